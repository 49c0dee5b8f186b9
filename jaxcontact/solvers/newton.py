"""Newton's method on g(u) = ∂Φ/∂u = 0 with a parallel backtracking line search (thesis Ch. 4).

Each iteration assembles the exact Jacobian J = ∂g/∂u from the terms' local Jacobians
(`Problem.linearize`), takes the direction d = -J⁻¹ g (dense elimination for small systems,
block-Jacobi preconditioned BiCGSTAB on the block-sparse J for large ones: `linear="auto"`
picks by size), and tries the step lengths 1, 1/2, ..., 1/2^(L-1) *at once* (one batched
evaluation of the merit Φ(·; u) rather than a sequential loop), accepting the longest that
satisfies the Armijo condition. J is not symmetric (friction's lagged normal force), so after
a rejected full step the next direction uses the reweighted friction model (`iteration`).
The solver knows nothing of physics: it sees the functions of a
`jaxcontact.problem.Problem` and their arguments."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact.solvers import base, linear

_FORCING_MIN, _FORCING_MAX = 1e-10, 1e-3  # relative accuracy of the Krylov directions
_ARMIJO = 1e-4  # sufficient decrease constant of the line search (standard choice)
_NOISE_ULPS = 64.0  # rounding noise of the merit, in ulps of its magnitude (measured ~10)
LINEAR_SOLVERS = ("auto", "dense", "bicgstab", "cg", "cr")


@dataclasses.dataclass(frozen=True)
class Newton(base.Solver):
    """Newton solver with line search; dense or Krylov linear solves.

    Attributes:
      iterations: static iteration cap.
      line_search: number of step lengths tried per iteration (1 = always the full step).
      linear: how each direction is solved. "auto" (default): "dense" up to
        `linear.DENSE_MAX` unknowns (16 bodies), "bicgstab" above, so default settings scale
        with the number of bodies. "dense": elimination of the assembled exact Jacobian
        (quadratic convergence; O(n³)). "bicgstab": block-Jacobi preconditioned BiCGSTAB on
        products with the assembled block-sparse exact Jacobian (not symmetric); Newton's
        convergence is kept as far as the Krylov solve is accurate. "cg" / "cr": conjugate
        gradients / residuals (thesis §4.6.2) on the symmetric Hessian of Φ(·; ū) at ū = u
        (the lag terms of the exact Jacobian left out: linear convergence near sliding
        contacts).
      krylov_iterations: most Krylov iterations per direction. Each direction is solved to a
        linear residual of 0.1 tol, relative accuracy 1e-3 at most (inexact Newton): with
        `early_exit` the solve stops there, otherwise every iteration is paid.
      tol, early_exit, ad, adjoint: see `jc.Solver` (`solvers.base.Solver`).
    """

    iterations: int = 12
    line_search: int = 8
    linear: str = "auto"
    krylov_iterations: int = 40

    def __post_init__(self):
        super().__post_init__()
        base.check_int(self, "line_search")
        base.check_int(self, "krylov_iterations")
        base.check_choice(self, "linear", LINEAR_SOLVERS)

    def method(self, n: int) -> str:
        """The linear solver of directions for n unknowns ("auto" resolved)."""
        if self.linear != "auto":
            return self.linear
        return "dense" if linear.dense(n, "auto") else "bicgstab"

    def start(self, problem, u0, args, tol):
        return (u0, jnp.zeros((), u0.dtype))

    def _direction(self, problem, u, args, tol, reweight):
        """(g(u), d ≈ -J⁻¹ g): J the exact Jacobian (for "cg" / "cr" the symmetric Hessian of
        Φ(·; ū)) with friction reweighted by `reweight` (0 or 1, `terms.RowGroup.energy`);
        dense elimination or a block-Jacobi preconditioned Krylov solve."""
        method = self.method(u.shape[0])
        mode = "lagged" if method in ("cg", "cr") else "exact"
        g, jac = problem.linearize(u, args, mode, reweight)
        if method == "dense":
            return g, -linalg.solve(jac.dense(), g)
        # inexact Newton (Eisenstat & Walker): solve only as far as the step needs, to a
        # residual of a tenth of the tolerance in the units of g (M tol), relative accuracy
        # at most 1e-3 far from the root and at least 1e-10 near it
        scale = jnp.linalg.norm(problem.mass(args).apply(jnp.broadcast_to(tol, g.shape)))
        rtol = jax.lax.stop_gradient(jnp.clip(0.1 * scale / jnp.linalg.norm(g),
                                              _FORCING_MIN, _FORCING_MAX))
        return g, linear.SOLVERS[method](jac.matvec, linear.block_jacobi(jac), -g,
                                         self.krylov_iterations, rtol, self.loops_exit_early)

    def iteration(self, problem, carry, args, tol):
        """One Newton step with a parallel backtracking line search (design note 16).

        The merit is the lagged potential Φ(·; u), whose gradient at u is g. The full step is
        also accepted when it reduces the residual |g|²_{M⁻¹} by the Armijo factor, or when
        the predicted decrease is below the merit's rounding noise (near the root, where the
        Armijo test becomes a coin toss). After an iteration whose full step was rejected the
        next direction uses the reweighted friction model (curvature ψ'/|e| in every tangent
        direction, thesis Eq. 136): symmetric in the slip plane and positive, so it descends
        where the exact, non-symmetric direction of a sliding contact does not.
        """
        u, reweight = carry
        mass = problem.mass(args)
        g, direction = self._direction(problem, u, args, tol, reweight)
        r = mass.solve(g)
        steps = 0.5 ** jnp.arange(self.line_search, dtype=u.dtype)
        trial = u[None, :] + steps[:, None] * direction[None, :]
        merit0 = problem.merit(u, u, args)
        merit = jax.vmap(problem.merit, in_axes=(0, None, None))(trial, u, args)
        slope = jnp.dot(g, direction)
        finite = jnp.isfinite(merit)
        ok = finite & (merit <= merit0 + _ARMIJO * steps * jnp.minimum(slope, 0.0))
        g_full = problem.gradient(trial[0], args)
        decrease = jnp.dot(g_full, mass.solve(g_full)) <= (1.0 - 2.0 * _ARMIJO) * jnp.dot(g, r)
        noise = _NOISE_ULPS * jnp.finfo(u.dtype).eps * (jnp.abs(merit0) + 1.0)
        ok = ok.at[0].set(ok[0] | (finite[0] & (decrease | (-slope <= noise))))
        # the longest acceptable step, else the best one tried
        pick = jnp.where(jnp.any(ok), jnp.argmax(ok),
                         jnp.argmin(jnp.where(finite, merit, jnp.inf)))
        return ((trial[pick], (pick > 0).astype(u.dtype)), r,
                base.finite(direction) & jnp.any(finite))
