"""Primal descent: block-Jacobi preconditioned gradient descent on Φ (thesis Algorithm 2).

Starting from the free-flight velocities ũ (gravity included), each iteration takes

    u <- u - α P⁻¹ ∂Φ/∂u,     P = the block diagonal of ∇²Φ

with P one dense block per block of degrees of freedom (6 x 6 per body, 3 x 3 per particle)
of the step's Hessian with friction's curvature reweighted (Eq. 136)
(`Problem.hessian`: thesis Eq. 115-116, blockwise as §5.6 does for rigid bodies) rebuilt at
every iterate, and a fixed step α (0.5 in the thesis). The cost per
iteration is one gradient and one row evaluation, and it is insensitive to mass ratios (the
mass is inverted exactly, blockwise), but it converges slowly when stiffness ratios are large
(thesis §5.3, Fig. 27 and 31).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact import validate as check
from jaxcontact.solvers import base

PRECONDITIONERS = ("block", "diagonal")


class DescentCarry(NamedTuple):
    """The iterate and ∇Φ there."""

    u: jax.Array
    g: jax.Array


@dataclasses.dataclass(frozen=True)
class Descent(base.Solver):
    """Primal descent solver (thesis Algorithm 2).

    Attributes:
      iterations: static number of descent iterations (the thesis uses 15-100).
      alpha: fixed step length α in (0, 1] (thesis §5.6: 0.5 "sufficient ... for all cases").
      preconditioner: "block" (default): each block's full Hessian block, inverted
        blockwise as §5.6 does for rigid bodies; "diagonal": its diagonal only, the per-DOF
        Jacobi preconditioner of Eq. 116 / Algorithm 2, which ignores the coupling of a
        body's own degrees of freedom (and so, e.g., between a contact's normal and friction
        rows).
      tol, early_exit, ad, adjoint: see `solvers.base.Solver`. Descent starts from ũ (thesis
        Algorithm 2's warm start), not from the previous step's velocities.
    """

    iterations: int = 50
    alpha: float = 0.5
    preconditioner: str = "block"

    def __post_init__(self):
        super().__post_init__()
        check.number("alpha", self.alpha, positive=True, high=1.0)
        check.choice("preconditioner", self.preconditioner, PRECONDITIONERS)

    def start(self, problem, u0, args):
        u = problem.start(args) if u0 is None else u0
        return DescentCarry(u, problem.gradient(u, args))

    def iteration(self, problem, carry, args):
        u, _ = carry
        g, hessian = problem.hessian(u, args, exact=False)
        blocks = hessian.block_diagonal()
        if self.preconditioner == "diagonal":
            blocks = blocks.diagonal_only()
        # each block made positive definite where it is not (`linalg.solve_convexified`,
        # in the mass metric): the step then descends
        metric = problem.mass(args).diagonal()
        step, start = [], 0
        for b in blocks.blocks:
            count, size = b.shape[0], b.shape[1]
            part = slice(start, start + count * size)
            solve = jax.vmap(lambda a, r, m: linalg.solve_convexified(a, r, m)[0])
            step.append(solve(b, g[part].reshape(count, size),
                              metric[part].reshape(count, size)).reshape(-1))
            start += count * size
        step = jnp.concatenate(step)
        u_new = u - self.alpha * step
        return DescentCarry(u_new, problem.gradient(u_new, args)), base.finite(step)
