"""Newton's method on r(u) = 0 with a parallel backtracking line search (thesis Ch. 4).

Each iteration builds the exact dense Jacobian J = ∂r/∂u (forward mode), takes the direction
d = -J⁻¹ r (LU), and tries the step lengths 1, 1/2, ..., 1/2^(L-1) *at once* (one batched
residual evaluation rather than a sequential loop), accepting the longest that satisfies the
Armijo condition on the merit ||r||² (d is always a descent direction for it). The loop is a
`lax.scan` with a static iteration cap: a scene that has converged stops changing (masks), so a
vmapped batch runs in lock step and nothing here is a `while_loop`.
With `linear="cg"` or `"cr"` the direction is found matrix-free instead (Hessian-vector
products, block-Jacobi preconditioned Krylov iterations). The solver knows nothing of physics:
it sees the functions of a `jaxcontact.problem.Problem` and their arguments.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact.solvers import base, blocks, krylov, loop
from jaxcontact.solvers.implicit import linear_solve, residual_and_jacobian

_FORCING_MIN, _FORCING_MAX = 1e-10, 1e-3  # relative accuracy of the matrix-free directions
_ARMIJO = 1e-4  # sufficient decrease constant of the line search (standard choice)
_NOISE_ULPS = 64.0  # rounding noise of the merit, in ulps of its magnitude (measured ~10)
LINEAR_SOLVERS = ("dense", "bicgstab", "cg", "cr")


@dataclasses.dataclass(frozen=True)
class Newton:
    """Newton solver with line search; dense or matrix-free linear solves.

    Attributes:
      iterations: static iteration cap (every step runs this many masked iterations).
      tol: convergence tolerance on max |M⁻¹ r| (m/s); None picks 1e-10 in float64 and 3e-4
        in float32.
      line_search: number of step lengths tried per iteration (1 = always the full step).
      ad: how gradients flow: "vjp" (implicit reverse mode, default), "jvp" (implicit forward
        mode; reverse mode by transposition), or "unrolled" (differentiate through every
        iteration: for testing, costs memory in the iteration count).
    """

    iterations: int = 12
    tol: float | None = None
    line_search: int = 8
    ad: str = "vjp"
    adjoint: str = "auto"
    """How the implicit-gradient systems J λ = ū are solved: "dense" (LU of the exact J),
    "krylov" (BiCGSTAB with Jacobian-vector products and a block-Jacobi preconditioner: no
    n x n matrix), or "auto": krylov for matrix-free Newton and above 384 unknowns."""
    linear: str = "dense"
    """How each Newton direction is solved. "dense": the exact Jacobian, built by forward mode
    and eliminated (quadratic convergence; cost O(n³), for up to a few dozen bodies).
    "bicgstab": matrix-free with the exact Jacobian: Jacobian-vector products of r, solved by
    block-Jacobi preconditioned BiCGSTAB (the Jacobian is not symmetric); Newton's
    convergence is kept as far as the Krylov solve is accurate.
    "cg" / "cr": matrix-free on a symmetric model: Hessian-vector products of Φ(·; ū) at the lagged point ū = u
    (symmetric; the lag terms of the exact Jacobian are left out, so convergence is fast but
    linear near sliding contacts), solved by block-Jacobi preconditioned conjugate gradients or
    conjugate residuals (thesis §4.6.2), for systems too large to factor."""
    krylov_iterations: int = 40
    """Most iterations of the Krylov solve per Newton iteration (matrix-free `linear` only).
    Each direction is solved to a linear residual of 0.1 tol, relative accuracy 1e-3 at most
    (inexact Newton): with `early_exit` the solve stops there, otherwise every iteration is
    paid. A direction still inexact after them slows Newton down or stalls it (reported as not
    converged), so large stiff scenes (a few hundred stacked boxes) need more than the
    default."""
    early_exit: bool = False
    """Run the forward solve as a bounded `while_loop` that stops once every scene of the
    (vmapped) batch has converged, instead of always running `iterations` masked iterations;
    the Krylov solves (matrix-free Newton's directions, and the implicit-gradient systems
    whenever they are solved matrix-free) stop likewise once their residual is small, instead
    of always running `krylov_iterations` (or 100) masked ones. Answers are unchanged:
    converged iterates are frozen in both forms. Gradients do not go through the solve (except
    with ad="unrolled", which always uses the scans), but reverse mode cannot differentiate
    the early-exit adjoint solve a second time: take second reverse-mode derivatives with
    early_exit=False. It pays off for single scenes and small batches; in large batches some
    scene is usually still iterating."""

    def __post_init__(self):
        base.check_int(self, "iterations")
        base.check_int(self, "line_search")
        base.check_int(self, "krylov_iterations")
        base.check_positive(self, "tol", optional=True)
        base.check_choice(self, "linear", LINEAR_SOLVERS)
        base.check_bool(self, "early_exit")
        base.check_ad(self)

    def solve(self, problem, u0, args):
        """Find u with problem.residual(u, args) = 0, starting from u0.

        The line search asks for sufficient decrease of the merit Φ(·; u_k)
        (`problem.objective`), whose u-gradient at u_k is M r: this globalizes Newton across
        the kinks of piecewise-smooth laws (a contact just outside its range has no stiffness
        in J, and |r| along the full step can only grow). Directions come from
        `problem.direction`: exact, or with the conservative friction model after an
        iteration whose full step the line search rejected.

        Returns:
          u: (n,) the last iterate.
          stats: dict of residual (max |r|), iterations (int), converged (bool), result (int).
        """
        tol = base.tolerance(self, u0.dtype)
        steps = 0.5 ** jnp.arange(self.line_search, dtype=u0.dtype)

        def line_search(u, direction):
            trial = u[None, :] + steps[:, None] * direction[None, :]
            merit0, slope = jax.jvp(lambda x: problem.objective(x, u, args), (u,), (direction,))
            merit = jax.vmap(problem.objective, in_axes=(0, None, None))(trial, u, args)
            finite = jnp.isfinite(merit)
            ok = finite & (merit <= merit0 + _ARMIJO * steps * jnp.minimum(slope, 0.0))
            # Near the root the predicted decrease falls below the rounding noise of Φ (sums of
            # O(Φ) terms), the Armijo test becomes a coin toss and the line search would halve
            # good steps forever: there the full Newton step is taken.
            noise = _NOISE_ULPS * jnp.finfo(u.dtype).eps * (jnp.abs(merit0) + 1.0)
            ok = ok.at[0].set(ok[0] | (finite[0] & (-slope <= noise)))
            # the longest acceptable step, else the best one tried
            pick = jnp.where(jnp.any(ok), jnp.argmax(ok),
                             jnp.argmin(jnp.where(finite, merit, jnp.inf)))
            return trial[pick], jnp.any(finite), pick > 0

        def dense_direction(u, damped):
            r, jac = residual_and_jacobian(
                lambda x, a: problem.direction(x, a, damped.astype(u.dtype)), u, args)
            ok = jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(jac))
            return r, -linear_solve(jac, r), ok

        def forcing(b):
            # inexact Newton (Eisenstat & Walker): solve J d = b only as far as the step needs:
            # to a linear residual of a tenth of the tolerance, relative accuracy at most 1e-3
            # (far from the root) and at least 1e-10 (the Krylov solves' own floor)
            return jax.lax.stop_gradient(
                jnp.clip(0.1 * tol / jnp.linalg.norm(b), _FORCING_MIN, _FORCING_MAX))

        def krylov_direction(u, damped):
            grad, hvp = jax.linearize(
                lambda x: problem.model_gradient(x, u, args, damped.astype(u.dtype)), u)
            mass = problem.mass(args)
            inverse = blocks.block_inverse(blocks.gauss_newton_blocks(problem.rows(u, args),
                                                                      mass))
            n = mass.shape[0]

            def precond(v):
                return jnp.einsum("nij,nj->ni", inverse, v.reshape(n, 6)).reshape(-1)

            r = problem.residual(u, args)  # M⁻¹ grad: the units of tol
            direction = krylov.SOLVERS[self.linear](hvp, precond, -grad,
                                                    self.krylov_iterations, forcing(r),
                                                    base.early_exit(self))
            return r, direction, jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(direction))

        def exact_krylov_direction(u, damped):
            r, jvp = jax.linearize(
                lambda x: problem.direction(x, args, damped.astype(u.dtype)), u)
            precond = blocks.jacobian_preconditioner(problem, u, args)
            direction = krylov.bicgstab(jvp, precond, -r, self.krylov_iterations, forcing(r),
                                        base.early_exit(self))
            return r, direction, jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(direction))

        find_direction = {"dense": dense_direction, "bicgstab": exact_krylov_direction}.get(
            self.linear, krylov_direction)

        def iteration(carry):
            u, used, done, bad, damped = carry
            r, direction, finite = find_direction(u, damped)
            stop = done | ~finite | (base.residual_norm(r) <= tol)
            u_new, any_finite, shortened = line_search(u, direction)
            # a non-finite iterate stops the scene at its last finite one
            bad = bad | (~stop & ~any_finite) | (~done & ~finite)
            stop = stop | bad
            return (jnp.where(stop, u, u_new), used + jnp.where(stop, 0, 1), stop, bad,
                    shortened)

        false = jnp.zeros((), bool)
        init = (u0, jnp.zeros((), jnp.int32), false, false, false)
        u, used, _, bad, _ = loop.iterate(iteration, init, self.iterations, base.early_exit(self),
                                          lambda carry: carry[2])
        return u, base.report(problem, u, args, tol, used, bad)
