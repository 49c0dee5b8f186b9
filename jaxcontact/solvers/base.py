"""What every solver shares: settings and their validation, the loop driver, the report.

A solver supplies `start` (its first carry, a NamedTuple with the iterate `u` and ∇Φ there `g`)
and `iteration`; `solve` runs them in one bounded loop, freezing a scene once it has converged
(its residual, an estimate of u - u*, within max(tol, `tolerances.ROUNDING_ULPS` eps (|u| + |ũ|))
per DOF, m/s or rad/s; design note 57; where it stopped moving, within RESOLUTION_ULPS times
`Problem.resolution`, note 59), stopped moving or gone non-finite.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcontact import validate as check
from jaxcontact.solvers import loop, tolerances
from jaxcontact.solvers.adjoint import AD_MODES, Implicit, Unrolled
from jaxcontact.solvers.linear import METHODS
from jaxcontact.types import Result


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision (`tolerances.TOL_FLOAT64`, `TOL_FLOAT32`)."""
    return tolerances.TOL_FLOAT64 if jnp.dtype(dtype) == jnp.float64 else tolerances.TOL_FLOAT32


def finite(x):
    return jnp.all(jnp.isfinite(x))


class Carry(NamedTuple):   # the iterate and ∇Φ there (Descent's carry)
    u: jax.Array
    g: jax.Array


@dataclasses.dataclass(frozen=True)
class Solver:
    """Settings every solver has (`Newton`, `Descent` and `Dual` add their own).

    Attributes:
      iterations: static iteration cap.
      tol: residual tolerance (m/s); None: `default_tol` (module docstring).
      early_exit: loops stop once every scene of a batch has converged (bounded while loops;
        default) instead of running as fixed-length scans. Answers are the same either way.
      ad: "vjp" / "jvp" (implicit reverse / forward mode) or "unrolled" (for testing).
      adjoint: a `jc.Implicit(...)` or `jc.Unrolled()`, or the implicit linear solve "auto",
        "dense" or "krylov" (with `ad`); resolved as `solver.gradients`.
      krylov_iterations: conjugate-gradient cap of Newton's directions and of the implicit
        gradients; None (default): `step`'s per scene (`tolerances.KRYLOV_RIGID`, or
        `KRYLOV_MESHES` with solids or cloth: `with_krylov_cap`).
    """
    iterations: int = 50
    tol: float | None = None
    early_exit: bool = True
    ad: str = "vjp"
    adjoint: Any = "auto"
    krylov_iterations: int | None = None
    gradients: Any = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check.integer_setting(self, "iterations")
        if self.krylov_iterations is not None:
            check.integer_setting(self, "krylov_iterations")
        if self.tol is not None:
            check.number("tol", self.tol, positive=True)
        check.boolean("early_exit", self.early_exit)
        check.choice("ad", self.ad, AD_MODES)
        rule = self.adjoint
        if not isinstance(rule, (Implicit, Unrolled)):
            check.choice("adjoint", rule, METHODS)
            rule = Unrolled() if self.ad == "unrolled" else Implicit(
                mode="forward" if self.ad == "jvp" else "reverse", linear=rule)
        object.__setattr__(self, "gradients", rule)

    def with_krylov_cap(self, cap: int) -> "Solver":
        """These settings with Krylov cap `cap` where it is None: `step` gives the one the
        scene's Hessians need, so that no solver reads the physics."""
        return self if self.krylov_iterations else dataclasses.replace(self, krylov_iterations=cap)

    @property
    def loops_exit_early(self) -> bool:
        """`early_exit`, unless gradients are unrolled (reverse mode needs the scans)."""
        return self.early_exit and not isinstance(self.gradients, Unrolled)

    def check(self, model) -> None:
        """ValueError if the solver cannot run this model's terms (Dual: compliance forms)."""

    def tolerance(self, u, start):
        """Per-DOF tolerance of a residual at u: max(tol, the rounding of M (u - ũ))."""
        tol = self.tol if self.tol is not None else default_tol(u.dtype)
        floor = tolerances.ROUNDING_ULPS * jnp.finfo(u.dtype).eps * (abs(u) + abs(start))
        return jax.lax.stop_gradient(jnp.maximum(tol, floor))

    def start(self, problem, u0, args):
        """The first carry at u0, or at ũ (the free flight) where u0 is None."""
        u = problem.start(args) if u0 is None else u0
        return Carry(u, problem.gradient(u, args))

    def iteration(self, problem, carry, args):
        """(carry after one step of the method, whether it moved)."""
        raise NotImplementedError

    def residual(self, problem, carry, args):
        """(n,) the estimate of u - u* at the carry: M⁻¹ ∇Φ by default."""
        return problem.mass(args).solve(carry.g)

    def solve(self, problem, u0, args):
        """Iterate until converged or the cap; returns (u, stats): residual (max |r|),
        iterations, converged, result (a `Result` code), tolerance (the largest per DOF)."""

        def converged(carry, args, start):
            r = self.residual(problem, carry, args)
            return jnp.all(jnp.abs(r) <= self.tolerance(carry.u, start)), r

        def body(state, operands):
            args, start = operands
            carry, used, done, bad, stuck = state
            new, moved = self.iteration(problem, carry, args)
            met, r = converged(new, args, start)
            ok = finite(r) & finite(new.u)
            bad = bad | (~done & ~ok)
            stuck = stuck | (~done & ok & ~met & ~moved)
            # (a non-finite iterate is reported, never kept: the last finite one is returned)
            carry = jax.tree.map(lambda a, b: jnp.where(done | ~ok, a, b), carry, new)
            return carry, used + jnp.where(done, 0, 1), done | met | ~ok | ~moved, bad, stuck

        start = problem.start(args)
        carry = self.start(problem, u0, args)
        met, r = converged(carry, args, start)
        init = (carry, jnp.zeros((), jnp.int32), met | ~finite(r), ~finite(r),
                jnp.zeros((), bool))
        if self.loops_exit_early:
            final = loop.until_done(body, init, (args, start), self.iterations,
                                    lambda s: s[2], unknowns=start.shape[0])
        else:
            final = loop.iterate(lambda s: body(s, (args, start)), init, self.iterations,
                                 False, lambda s: s[2])
        carry, used, _, bad, stuck = final
        u, r, tol = carry.u, self.residual(problem, carry, args), self.tolerance(carry.u, start)
        ok = ~bad & finite(r) & finite(u)
        tol = jnp.where(stuck, jnp.maximum(tol, jax.lax.stop_gradient(
            tolerances.RESOLUTION_ULPS * problem.resolution(args))), tol)
        done = ok & jnp.all(jnp.abs(r) <= tol)
        stuck = stuck & ~done
        result = jnp.select([done, ~ok, stuck], [Result.SUCCESS, Result.NONFINITE,
                                                  Result.STALLED], Result.MAX_ITERATIONS)
        return u, {"residual": jnp.max(jnp.abs(r), initial=0.0), "iterations": used,
                   "converged": done, "result": result.astype(jnp.int32),
                   "tolerance": jnp.max(tol, initial=0.0)}
