"""Primal descent: block-Jacobi preconditioned gradient descent on Φ (thesis Algorithm 2).

From the free-flight velocities ũ each iteration takes

    u <- u - α P⁻¹ ∂Φ/∂u,     P = the block diagonal of ∇²Φ

with one dense block per body (6 x 6) or particle (3 x 3) of the step's Hessian, friction's
curvature reweighted (Eq. 136; `Problem.hessian`: Eq. 115-116, blockwise as §5.6 does for
rigid bodies), rebuilt at every iterate, and a fixed step α. It is insensitive to mass ratios
but slow for large stiffness ratios (thesis §5.3, Fig. 27 and 31).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact import validate as check
from jaxcontact.problem import _split
from jaxcontact.solvers import base

PRECONDITIONERS = ("block", "diagonal")


@dataclasses.dataclass(frozen=True)
class Descent(base.Solver):
    """Primal descent solver (thesis Algorithm 2).

    Attributes:
      iterations: static number of descent iterations (the thesis uses 15-100).
      alpha: fixed step length α in (0, 1] (thesis §5.6: 0.5 "sufficient ... for all cases").
      preconditioner: "block" (default): each block's full Hessian block; "diagonal": its
        diagonal only, the per-DOF Jacobi preconditioner of Eq. 116 / Algorithm 2.
      tol, early_exit, ad, adjoint: see `solvers.base.Solver`.
    """

    iterations: int = 50
    alpha: float = 0.5
    preconditioner: str = "block"

    def __post_init__(self):
        super().__post_init__()
        check.number("alpha", self.alpha, positive=True, high=1.0)
        check.choice("preconditioner", self.preconditioner, PRECONDITIONERS)

    def iteration(self, problem, carry, args):
        g, hessian = problem.hessian(carry.u, args, exact=False)
        blocks = hessian.block_diagonal()
        if self.preconditioner == "diagonal":
            blocks = blocks.diagonal_only()
        # each block made positive definite where it is not, in the mass metric: the step
        # then descends
        sizes, metric = blocks.sizes, problem.mass(args).diagonal()
        solve = jax.vmap(lambda a, r, m: linalg.solve_convexified(a, r, m)[0])
        step = jnp.concatenate([solve(b, r, m).reshape(-1) for b, r, m in zip(
            blocks.blocks, _split(g, sizes), _split(metric, sizes))])
        u = carry.u - self.alpha * step
        return base.Carry(u, problem.gradient(u, args)), base.finite(step)
