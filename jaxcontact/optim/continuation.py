"""Continuation: solve a sequence of problems, each warm-started at the last one's answer
(ADD E3: contact stiffness raised stage by stage, 100 -> 1000)."""

from __future__ import annotations

import numpy as np

from jaxcontact.optim.lbfgs import lbfgs


def continuation(loss, x0, schedule, *, optimizer=lbfgs, **options):
    """Minimize `loss(x, value)` for each `value` of `schedule` in turn, starting each stage
    at the previous stage's answer.

    The stage value is passed as a traced argument (the optimizers' `args`), so every stage
    runs the same compiled program: put it where it belongs inside the loss, e.g.
    `model.replace(geom=model.geom.replace(stiffness=...))`.

    Args:
      loss: (x, value) -> scalar, the objective at stage value `value` (e.g. the loss of a
        rollout of a model whose contact stiffness is `value`).
      x0: the start of the first stage.
      schedule: the stage values, each > 0 (e.g. stiffnesses).
      optimizer: `jc.optim.lbfgs` (default), `jc.optim.gauss_newton` (then `loss` is a
        residual) or any function (loss, x0, *, args, **options) -> `OptimResult`.
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
        result = optimizer(loss, x, args=(np.asarray(value),), **options)
        results.append(result)
        x = result.x
    return results
