"""What every optimizer of `jaxcontact.optim` returns."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class OptimResult:
    """The outcome of an optimization, never silent about failure.

    Attributes:
      x: the best point found (the same pytree structure as the start).
      value: the objective there (½|r|² for least squares).
      grad_norm: the gradient's norm there (NaN where the method has none, as CMA-ES).
      iterations: iterations (or CMA-ES generations) run.
      simulations: objective evaluations (each a rollout; a value-and-gradient counts one,
        line-search trials included), the budget the papers compare.
      converged: whether the stopping test was met (not the iteration or budget cap).
      status: why it stopped, in words.
      history: the objective after each iteration.
      jacobian: `gauss_newton` only: ∂r/∂x at `x` (m, n), over the flattened x (what a
        covariance needs); None for the other methods.
      alpha: `descend` only: the α-order estimator's α at each iteration (0: zeroth order,
        1: first order); None for the other methods.
    """

    x: Any
    value: float
    grad_norm: float
    iterations: int
    simulations: int
    converged: bool
    status: str
    history: list = dataclasses.field(default_factory=list)
    jacobian: Any = None
    alpha: Any = None
