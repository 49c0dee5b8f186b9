"""Continuation: solve a sequence of problems, each warm-started at the last one's answer
(ADD E3: contact stiffness raised stage by stage, 100 -> 1000)."""

from __future__ import annotations

import numpy as np

from jaxcontact.optim.lbfgs import lbfgs


def continuation(make_loss, x0, schedule, *, optimizer=lbfgs, **options):
    """Minimize `make_loss(value)` for each value of `schedule` in turn, starting each stage
    at the previous stage's answer.

    Args:
      make_loss: value -> loss(x): the objective of one stage (e.g. the loss of a rollout of
        a model whose contact stiffness is `value`).
      x0: the start of the first stage.
      schedule: the stage values, each > 0 (e.g. stiffnesses).
      optimizer: `jc.optim.lbfgs` (default) or any function (loss, x0, **options) ->
        `OptimResult`.
      **options: passed to the optimizer.

    Returns:
      The list of every stage's `OptimResult`; the last one's `x` is the answer. Stages that
      do not converge stay in the list with their status.

    Raises:
      ValueError: an empty schedule or a value that is not a positive finite number.
    """
    values = np.asarray(schedule, dtype=float).reshape(-1)
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"schedule must be a non-empty sequence of positive numbers, got "
                         f"{schedule!r}")
    results, x = [], x0
    for value in values:
        result = optimizer(make_loss(float(value)), x, **options)
        results.append(result)
        x = result.x
    return results
