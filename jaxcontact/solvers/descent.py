"""Primal descent: block-Jacobi preconditioned gradient descent on Φ (thesis Algorithm 2).

Starting from the free-flight velocities ũ (gravity included), each iteration takes

    u <- u - α P⁻¹ ∂Φ/∂u,     P = the block diagonal of M + Σ_e Gᵀ ψ'' G

with P one dense block per block of degrees of freedom (6 x 6 per body, 3 x 3 per particle)
of the Gauss-Newton model of the Hessian (`Problem.gauss_newton`: thesis Eq. 115-116,
blockwise as §5.6 does for rigid bodies; contact curvature by Eq. 131, friction by the scalar
Eq. 136) rebuilt at every iterate, and a fixed step α (0.5 in the thesis). The cost per
iteration is one gradient and one row evaluation, and it is insensitive to mass ratios (the
mass is inverted exactly, blockwise), but it converges slowly when stiffness ratios are large
(thesis §5.3, Fig. 27 and 31).
"""

from __future__ import annotations

import dataclasses

from jaxcontact.solvers import base

PRECONDITIONERS = ("block", "diagonal")


@dataclasses.dataclass(frozen=True)
class Descent(base.Solver):
    """Primal descent solver (thesis Algorithm 2).

    Attributes:
      iterations: static number of descent iterations (the thesis uses 15-100).
      alpha: fixed step length α in (0, 1] (thesis §5.6: 0.5 "sufficient ... for all cases").
      preconditioner: "block" (default): each block's full Gauss-Newton block, inverted
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
        base.check_positive(self, "alpha", high=1.0)
        base.check_choice(self, "preconditioner", PRECONDITIONERS)

    def iteration(self, problem, carry, args, tol):
        (u,) = carry
        g, noise = problem.gradient_noise(u, args)
        blocks = problem.gauss_newton(u, args).block_diagonal()
        if self.preconditioner == "diagonal":
            blocks = blocks.diagonal_only()
        step = blocks.solve(g)
        return ((u - self.alpha * step,), problem.mass(args).solve(g), base.finite(step),
                noise, 0.0)
