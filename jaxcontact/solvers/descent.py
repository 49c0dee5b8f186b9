"""Primal descent: block-Jacobi preconditioned gradient descent on Φ (thesis Algorithm 2) from
ũ: u <- u - α P⁻¹ ∂Φ/∂u, P the block diagonal (per body or particle) of the step's Hessian with
friction's curvature reweighted (Eq. 115-116, 136; blockwise as §5.6), rebuilt every iterate.
Insensitive to mass ratios, slow for large stiffness ratios (thesis §5.3, Fig. 27 and 31).
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
    """
    alpha: float = 0.5
    preconditioner: str = "block"

    def __post_init__(self):
        super().__post_init__()
        check.number("alpha", self.alpha, positive=True, high=1.0)
        check.choice("preconditioner", self.preconditioner, PRECONDITIONERS)

    def iteration(self, problem, carry, args):
        g, hessian = problem.hessian(carry.u, args, "reweighted")
        blocks = hessian.block_diagonal()
        blocks = blocks.diagonal_only() if self.preconditioner == "diagonal" else blocks
        # each block made positive definite where it is not (in the mass metric): d descends
        sizes, metric = blocks.sizes, problem.mass(args).diagonal()
        solve = jax.vmap(lambda a, r, m: linalg.solve_convexified(a, r, m)[0])
        step = jnp.concatenate([solve(b, r, m).reshape(-1) for b, r, m in zip(
            blocks.blocks, _split(g, sizes), _split(metric, sizes))])
        u = carry.u - self.alpha * step
        return base.Carry(u, problem.gradient(u, args)), base.finite(step)
