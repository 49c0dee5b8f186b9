"""Primal descent: block-Jacobi preconditioned gradient descent on Φ (thesis Algorithm 2).

Starting from the free-flight velocities ũ, each iteration takes

    u <- u - α P⁻¹ ∂Φ/∂u,     P = blockdiag_b(M_b + Σ_j c_j G_jbᵀ G_jb)

with P the per-body 6x6 blocks of the Gauss-Newton Hessian (thesis Eq. 115-116, blockwise for
rigid bodies as in §5.6; contact curvature by Eq. 131, friction by the scalar Eq. 136) rebuilt
from the constraint rows at every iterate, and a fixed step α (0.5 in the thesis). The cost
per iteration is one gradient and one row evaluation, and it is insensitive to mass ratios
(the mass is inverted exactly, blockwise), but it converges slowly when stiffness ratios are
large (thesis §5.3, Fig. 27 and 31). Iterations are a `lax.scan` with a static count; scenes
stop changing once max |M⁻¹ ∂Φ/∂u| <= tol.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from jaxcontact.solvers import base, blocks, loop


PRECONDITIONERS = ("block", "diagonal")


@dataclasses.dataclass(frozen=True)
class Descent:
    """Primal descent solver (thesis Algorithm 2).

    Attributes:
      iterations: static number of descent iterations (the thesis uses 15-100).
      alpha: fixed step length α in (0, 1] (thesis §5.6: 0.5 "sufficient ... for all cases").
      preconditioner: "block" (default): each body's full 6x6 Gauss-Newton block, inverted
        blockwise as §5.6 does for rigid bodies; "diagonal": its diagonal only, the per-DOF
        Jacobi preconditioner of Eq. 116 / Algorithm 2, which ignores the coupling of a body's
        own degrees of freedom (and so, e.g., between a contact's normal and friction rows).
      tol: residual tolerance on max |M⁻¹ r| (m/s); None: 1e-10 (float64) / 3e-4 (float32).
        It only stops iterating early; an unconverged step is reported in `StepInfo`.
      ad, adjoint, early_exit: gradient mode ("vjp", "jvp", or "unrolled" through the
        iterations), implicit linear solve and early stop of the loops, as for `Newton`.
    """

    iterations: int = 50
    alpha: float = 0.5
    preconditioner: str = "block"
    tol: float | None = None
    ad: str = "vjp"
    early_exit: bool = False
    adjoint: str = "auto"

    def __post_init__(self):
        base.check_int(self, "iterations")
        base.check_positive(self, "alpha", high=1.0)
        base.check_choice(self, "preconditioner", PRECONDITIONERS)
        base.check_positive(self, "tol", optional=True)
        base.check_ad(self)
        base.check_bool(self, "early_exit")

    def solve(self, problem, u0, args):
        """Minimize Φ from ũ (thesis Algorithm 2's warm start; u0 is not used)."""
        del u0
        tol = base.tolerance(self, problem.start(args).dtype)
        mass = problem.mass(args)
        n = mass.shape[0]

        def iteration(carry):
            u, used, done = carry
            grad = problem.gradient(u, args)
            residual = blocks.block_solve(mass, grad.reshape(n, 6))
            done = done | (base.residual_norm(residual) <= tol)
            precond = blocks.gauss_newton_blocks(problem.rows(u, args), mass)
            if self.preconditioner == "diagonal":
                precond = precond * jnp.eye(6, dtype=precond.dtype)[None]
            step = blocks.block_solve(precond, grad.reshape(n, 6)).reshape(-1)
            u_new = u - self.alpha * step
            return jnp.where(done, u, u_new), used + jnp.where(done, 0, 1), done

        init = (problem.start(args), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
        u, used, _ = loop.iterate(iteration, init, self.iterations, base.early_exit(self),
                                  lambda carry: carry[2])
        return u, base.report(problem, u, args, tol, used)
