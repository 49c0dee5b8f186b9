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
import math
import numbers

import jax
import jax.numpy as jnp

from jaxcontact.solvers.implicit import AD_MODES, linear_solve, residual_and_jacobian
from jaxcontact.types import Result

_ARMIJO = 1e-4  # sufficient decrease constant of the line search (standard choice)
_NOISE_ULPS = 64.0  # rounding noise of the merit, in ulps of its magnitude (measured ~10)


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision.

    float32: stiff contact and friction terms amplify the rounding of a ~1 m/s velocity
    (1e-7) by Δt k / m ~ 10-100, so residuals below ~1e-4 are noise; 3e-4 m/s moves a body by
    less than 1 µm per step at Δt = 2 ms.
    """
    return 1e-10 if jnp.dtype(dtype) == jnp.float64 else 3e-4


@dataclasses.dataclass(frozen=True)
class Newton:
    """Dense Newton solver with line search.

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
    early_exit: bool = False
    """Run the forward solve as a bounded `while_loop` that stops once every scene of the
    (vmapped) batch has converged, instead of always running `iterations` masked iterations.
    Gradients are unaffected (they never go through the solve, except with ad="unrolled",
    which always uses the scan). It pays off for single scenes and small batches; in large
    batches some scene is usually still iterating."""

    def __post_init__(self):
        for name in ("iterations", "line_search"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                    or value < 1):
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.tol is not None and (isinstance(self.tol, bool) or not isinstance(
                self.tol, numbers.Real) or not math.isfinite(self.tol) or self.tol <= 0):
            raise ValueError(f"tol must be a positive number or None, got {self.tol!r}")
        if not isinstance(self.early_exit, bool):
            raise ValueError(f"early_exit must be a bool, got {self.early_exit!r}")
        if self.ad not in AD_MODES:
            raise ValueError(f"ad must be one of {AD_MODES}, got {self.ad!r}")

    def solve(self, residual_fn, u0, args, objective_fn=None, direction_fn=None):
        """Find u with residual_fn(u, args) = 0 starting from u0.

        Args:
          residual_fn: global function r(u, args) -> (n,).
          u0: (n,) initial guess.
          args: pytree passed through to the functions.
          objective_fn: optional global function Φ(u, u_lag, args) -> () whose gradient in u at
            u_lag = u is (a positive scaling of) r. When given, the line search asks for
            sufficient decrease of Φ(·, u_k) instead of ||r||²: this globalizes Newton across
            the kinks of piecewise-smooth laws (a contact just outside its range has no
            stiffness in J, and ||r|| along the full step can only grow).
          direction_fn: optional global function (u, args, damped) with the value of
            residual_fn, whose Jacobian gives the Newton direction: with damped = 0 the exact
            one, with damped = 1 a more conservative model, used after an iteration whose full
            step was rejected by the line search.

        Returns:
          u: (n,) the last iterate.
          stats: dict of residual (max |r|), iterations (int), converged (bool), result (int).
        """
        tol = self.tol if self.tol is not None else default_tol(u0.dtype)
        steps = 0.5 ** jnp.arange(self.line_search, dtype=u0.dtype)

        def residual_norm(r):
            return jnp.max(jnp.abs(r))

        def line_search(u, r, direction):
            trial = u[None, :] + steps[:, None] * direction[None, :]
            if objective_fn is None:
                merit = jax.vmap(lambda x: jnp.sum(residual_fn(x, args) ** 2))(trial)
                merit0, slope = jnp.sum(r * r), -2.0 * jnp.sum(r * r)
            else:
                merit0, slope = jax.jvp(lambda x: objective_fn(x, u, args), (u,), (direction,))
                merit = jax.vmap(objective_fn, in_axes=(0, None, None))(trial, u, args)
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

        def iteration(carry):
            u, used, done, bad, damped = carry
            if direction_fn is None:
                r, jac = residual_and_jacobian(residual_fn, u, args)
            else:
                r, jac = residual_and_jacobian(
                    lambda x, a: direction_fn(x, a, damped.astype(u.dtype)), u, args)
            finite = jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(jac))
            stop = done | ~finite | (residual_norm(r) <= tol)
            u_new, any_finite, shortened = line_search(u, r, -linear_solve(jac, r))
            # a non-finite iterate stops the scene at its last finite one
            bad = bad | (~stop & ~any_finite) | (~done & ~finite)
            stop = stop | bad
            return (jnp.where(stop, u, u_new), used + jnp.where(stop, 0, 1), stop, bad,
                    shortened)

        false = jnp.zeros((), bool)
        init = (u0, jnp.zeros((), jnp.int32), false, false, false)
        if self.early_exit:
            def cond(carry):
                return ~carry[0][2] & (carry[1] < self.iterations)

            def body(carry):
                return iteration(carry[0]), carry[1] + 1

            (u, used, _, bad, _), _ = jax.lax.while_loop(cond, body, (init, 0))
        else:
            (u, used, _, bad, _), _ = jax.lax.scan(lambda c, _: (iteration(c), None), init,
                                                    None, length=self.iterations)
        r = residual_fn(u, args)
        res = residual_norm(r)
        finite = ~bad & jnp.all(jnp.isfinite(r))
        converged = finite & (res <= tol)
        result = jnp.where(converged, Result.SUCCESS,
                           jnp.where(finite, Result.MAX_ITERATIONS, Result.NONFINITE))
        return u, {"residual": res, "iterations": used, "converged": converged,
                   "result": result.astype(jnp.int32)}
