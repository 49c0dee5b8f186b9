"""What every solver shares: settings and their validation, the one loop driver, the report.

A solver is a frozen dataclass of static settings that supplies `start` (its first carry, a
NamedTuple whose fields `u` and `g` are the iterate and ∇Φ there) and `iteration` (one step of
its method). `solve` runs them under one bounded loop, freezes a scene once it has converged,
stopped moving or gone non-finite, and reports the same way for every method.

Converged means the residual r, an estimate of u - u* (first order: H⁻¹ ∇Φ, Newton's step),
is within the tolerance per degree of freedom (m/s, rad/s). M⁻¹ ∇Φ bounds it where H >= M and
is used where smaller (alone it overstates the error by H/M along stiff directions; design
note 57). The tolerance is max(tol, `tolerances.ROUNDING_ULPS` eps (|u| + |ũ|)) per degree of
freedom: the rounding of the inertia term, scaled to the step's own velocities.
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


def check_int(settings, name):
    """Validate the int setting `name` (>= 1) and store it as a Python int."""
    object.__setattr__(settings, name, check.integer(name, getattr(settings, name), low=1))


def finite(x):
    """Whether every entry of x is finite (a scalar bool)."""
    return jnp.all(jnp.isfinite(x))


class Carry(NamedTuple):
    """The iterate and ∇Φ there: the carry of a method that needs no more (Descent)."""

    u: jax.Array
    g: jax.Array


@dataclasses.dataclass(frozen=True)
class Solver:
    """Settings every solver has.

    Attributes:
      iterations: static iteration cap.
      tol: residual tolerance on max |M⁻¹ ∇Φ| (m/s); None: 1e-10 (float64) / 3e-4 (float32),
        raised where needed by the rounding of the step's inertia (module docstring).
      early_exit: run the loops as bounded while loops that stop once every scene of a
        (vmapped) batch has converged (default), instead of fixed-length scans (the form for
        accelerators and unrolled gradients). Answers are the same either way.
      ad: shorthand for the adjoint: "vjp" (implicit reverse mode, `custom_vjp`), "jvp"
        (implicit forward mode, `custom_jvp`; reverse by transposition) or "unrolled"
        (differentiate every iteration: for testing).
      adjoint: a `jc.Implicit(...)` or `jc.Unrolled()` object, or the shorthand "auto",
        "dense", "krylov" for the implicit linear solve (with `ad`). The resolved object is
        `solver.gradients`.
    """

    iterations: int = 50
    tol: float | None = None
    early_exit: bool = True
    ad: str = "vjp"
    adjoint: Any = "auto"
    gradients: Any = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_int(self, "iterations")
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

    @property
    def loops_exit_early(self) -> bool:
        """`early_exit`, unless gradients are unrolled (reverse mode needs the scans)."""
        return self.early_exit and not isinstance(self.gradients, Unrolled)

    def check(self, model) -> None:
        """ValueError if the solver cannot run this model's terms (Dual: compliance forms)."""

    def tolerance(self, u, start):
        """Per-DOF tolerance of a residual at u: max(tol, the rounding of M (u - ũ))."""
        tol = self.tol if self.tol is not None else default_tol(u.dtype)
        eps = jnp.finfo(u.dtype).eps
        floor = tolerances.ROUNDING_ULPS * eps * (jnp.abs(u) + jnp.abs(start))
        return jax.lax.stop_gradient(jnp.maximum(tol, floor))

    def start(self, problem, u0, args):
        """The first carry (a NamedTuple with fields `u` and `g`) at u0, or where u0 is None
        at ũ, the free flight (thesis Algorithms 2 and 3)."""
        u = problem.start(args) if u0 is None else u0
        return Carry(u, problem.gradient(u, args))

    def iteration(self, problem, carry, args):
        """(carry after one step of the method, whether it moved)."""
        raise NotImplementedError

    def residual(self, problem, carry, args):
        """(n,) the estimate of u - u* at the carry (module docstring): M⁻¹ ∇Φ by default."""
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
            carry = jax.tree.map(lambda a, b: jnp.where(done, a, b), carry, new)
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
        u = carry.u
        r = self.residual(problem, carry, args)
        tol = self.tolerance(u, start)
        ok = ~bad & finite(r) & finite(u)
        done = ok & jnp.all(jnp.abs(r) <= tol)
        result = jnp.where(done, Result.SUCCESS,
                           jnp.where(ok, jnp.where(stuck, Result.STALLED, Result.MAX_ITERATIONS),
                                     Result.NONFINITE))
        return u, {"residual": jnp.max(jnp.abs(r), initial=0.0), "iterations": used,
                   "converged": done, "result": result.astype(jnp.int32),
                   "tolerance": jnp.max(tol, initial=0.0)}
