"""Newton's method on r(u) = 0 with a parallel backtracking line search (thesis Ch. 4).

Each iteration builds the exact dense Jacobian J = ∂r/∂u (forward mode), takes the direction
d = -J⁻¹ r (LU), and tries the step lengths 1, 1/2, ..., 1/2^(L-1) *at once* (one batched
residual evaluation rather than a sequential loop), accepting the longest that satisfies the
Armijo condition on the merit ||r||² (d is always a descent direction for it). The loop is a
`lax.scan` with a static iteration cap: a scene that has converged stops changing (masks), so a
vmapped batch runs in lock step and nothing here is a `while_loop`.
The solver knows nothing of physics: it sees a residual function and its arguments.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact.solvers.implicit import AD_MODES, linear_solve, residual_jacobian
from jaxcontact.types import Result

_ARMIJO = 1e-4  # sufficient decrease constant of the line search (standard choice)


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision: a few hundred ulps of a 1 m/s velocity."""
    return 1e-10 if jnp.dtype(dtype) == jnp.float64 else 1e-5


@dataclasses.dataclass(frozen=True)
class Newton:
    """Dense Newton solver with line search.

    Attributes:
      iterations: static iteration cap (every step runs this many masked iterations).
      tol: convergence tolerance on max |M⁻¹ r| (m/s); None picks 1e-10 in float64 and 1e-5
        in float32.
      line_search: number of step lengths tried per iteration (1 = always the full step).
      ad: how gradients flow: "vjp" (implicit reverse mode, default), "jvp" (implicit forward
        mode; reverse mode by transposition), or "unrolled" (differentiate through every
        iteration: for testing, costs memory in the iteration count).
    """

    iterations: int = 12
    tol: float | None = None
    line_search: int = 6
    ad: str = "vjp"

    def __post_init__(self):
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"iterations must be an int >= 1, got {self.iterations!r}")
        if self.tol is not None and not (isinstance(self.tol, (int, float)) and self.tol > 0):
            raise ValueError(f"tol must be positive or None, got {self.tol!r}")
        if not isinstance(self.line_search, int) or self.line_search < 1:
            raise ValueError(f"line_search must be an int >= 1, got {self.line_search!r}")
        if self.ad not in AD_MODES:
            raise ValueError(f"ad must be one of {AD_MODES}, got {self.ad!r}")

    def solve(self, residual_fn, u0, args):
        """Find u with residual_fn(u, args) = 0 starting from u0.

        Returns:
          u: (n,) the last iterate.
          stats: dict of residual (max |r|), iterations (int), converged (bool), result (int).
        """
        tol = self.tol if self.tol is not None else default_tol(u0.dtype)
        steps = 0.5 ** jnp.arange(self.line_search, dtype=u0.dtype)

        def merit(r):
            return jnp.sum(r * r)

        def iteration(carry, _):
            u, r, used, done, bad = carry
            jac = residual_jacobian(residual_fn, u, args)
            direction = -linear_solve(jac, r)
            trial = u + steps[:, None] * direction
            trial_r = jax.vmap(residual_fn, in_axes=(0, None))(trial, args)
            trial_m = jax.vmap(merit)(trial_r)
            ok = trial_m <= (1.0 - 2.0 * _ARMIJO * steps) * merit(r)
            ok = ok & jnp.isfinite(trial_m)
            # the longest acceptable step, else the best one tried
            pick = jnp.where(jnp.any(ok), jnp.argmax(ok), jnp.argmin(
                jnp.where(jnp.isfinite(trial_m), trial_m, jnp.inf)))
            u_new, r_new = trial[pick], trial_r[pick]
            # a non-finite trial (e.g. singular J) stops the scene at its last finite iterate
            bad = bad | (~done & ~jnp.all(jnp.isfinite(r_new)))
            keep = done | bad
            u = jnp.where(keep, u, u_new)
            r = jnp.where(keep, r, r_new)
            used = used + jnp.where(keep, 0, 1)
            done = done | bad | (jnp.max(jnp.abs(r)) <= tol)
            return (u, r, used, done, bad), None

        r0 = residual_fn(u0, args)
        bad0 = ~jnp.all(jnp.isfinite(r0))
        init = (u0, r0, jnp.zeros((), jnp.int32), bad0 | (jnp.max(jnp.abs(r0)) <= tol), bad0)
        (u, r, used, _, bad), _ = jax.lax.scan(iteration, init, None, length=self.iterations)
        res = jnp.max(jnp.abs(r))
        finite = ~bad
        converged = finite & (res <= tol)
        result = jnp.where(converged, Result.SUCCESS,
                           jnp.where(finite, Result.MAX_ITERATIONS, Result.NONFINITE))
        return u, {"residual": res, "iterations": used, "converged": converged,
                   "result": result.astype(jnp.int32)}
