"""What every solver shares: settings and their validation, the one loop driver, the report.

A solver is a frozen dataclass of static settings that supplies `start` (its first carry, a
NamedTuple whose fields `u` and `g` are the iterate and ∇Φ there) and `iteration` (one step of
its method: the carry after it and whether it moved). `solve` here runs them under one
bounded loop (`loop.iterate`: a scan of `iterations`, or a while loop with `early_exit`),
freezes a scene once it has converged, stopped moving or produced a non-finite value, counts
iterations, and reports the same way for every method.

Converged means that the iterate is within the tolerance of the step's answer u*, per degree of
freedom, in velocity units (m/s, rad/s): the residual r estimates u - u*. To first order
u - u* = H⁻¹ ∇Φ (H = ∇²Φ): Newton's step, which Newton forms every iteration (once a step
that small has been taken, the error left is of its square). M⁻¹ ∇Φ, which every method has,
bounds it wherever H >= M (the mass plus convex terms) and is used where it is smaller. (M⁻¹ ∇Φ
alone overstates the error by H/M along stiff directions: for a bob on a hinge of stiffness
1e7 the float32 answer was 2e-5 m/s from float64's while M⁻¹ ∇Φ was 0.1; design note 57.)

The tolerance of a step is max(tol, `tolerances.ROUNDING_ULPS` eps (|u| + |ũ|)) per degree of
freedom: the rounding of the inertia term, scaled to the step's own velocities.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp

from jaxcontact.solvers import loop, tolerances
from jaxcontact.solvers.adjoint import AD_MODES, Implicit, Unrolled, from_settings
from jaxcontact.solvers.linear import METHODS
from jaxcontact.types import Result


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision (`tolerances.TOL_FLOAT64`, `TOL_FLOAT32`)."""
    return tolerances.TOL_FLOAT64 if jnp.dtype(dtype) == jnp.float64 else tolerances.TOL_FLOAT32


def check_int(solver, name, low=1):
    value = getattr(solver, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    object.__setattr__(solver, name, int(value))


def check_positive(solver, name, optional=False, high=None):
    value = getattr(solver, name)
    if optional and value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value <= 0 or (high is not None and value > high)):
        limit = f" and <= {high}" if high is not None else ""
        extra = " or None" if optional else ""
        raise ValueError(f"{name} must be a positive number{limit}{extra}, got {value!r}")


def check_choice(solver, name, choices):
    value = getattr(solver, name)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_bool(solver, name):
    value = getattr(solver, name)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")


def finite(x):
    """Whether every entry of x is finite (a scalar bool)."""
    return jnp.all(jnp.isfinite(x))


@dataclasses.dataclass(frozen=True)
class Solver:
    """Settings every solver has.

    Attributes:
      iterations: static iteration cap.
      tol: residual tolerance on max |M⁻¹ ∇Φ| (m/s); None: 1e-10 (float64) / 3e-4 (float32).
        The rounding of the step's inertia raises it where needed (module docstring).
      early_exit: run the loops as bounded while loops that stop once every scene of a
        (vmapped) batch has converged (default), instead of always running every masked
        iteration (a fixed-length scan, the form for accelerators and for unrolled
        gradients). Answers are the same either way (converged iterates are frozen), and
        first derivatives never go through these loops (implicit rules).
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
        check_positive(self, "tol", optional=True)
        check_bool(self, "early_exit")
        check_choice(self, "ad", AD_MODES)
        if isinstance(self.adjoint, (Implicit, Unrolled)):
            rule = self.adjoint
        else:
            check_choice(self, "adjoint", METHODS)
            rule = from_settings(self.ad, self.adjoint)
        object.__setattr__(self, "gradients", rule)

    @property
    def loops_exit_early(self) -> bool:
        """Whether the loops may stop early: `early_exit`, unless gradients are unrolled
        through the iterations (reverse mode needs the scans)."""
        return self.early_exit and not isinstance(self.gradients, Unrolled)

    def check(self, model) -> None:
        """ValueError if the solver cannot run this model's terms (Dual: compliance forms)."""

    def tolerance(self, u, start):
        """Per-DOF tolerance of a residual at u: max(tol, the rounding of M (u - ũ))."""
        tol = self.tol if self.tol is not None else default_tol(u.dtype)
        floor = tolerances.ROUNDING_ULPS * jnp.finfo(u.dtype).eps * (jnp.abs(u)
                                                                      + jnp.abs(start))
        return jax.lax.stop_gradient(jnp.maximum(tol, floor))

    # --- what a method supplies -----------------------------------------------------------

    def start(self, problem, u0, args):
        """The first carry (a NamedTuple with the iterate as its field `u` and ∇Φ there as
        `g`), from u0, or where u0 is None from ũ, the free flight (thesis Algorithms 2
        and 3)."""
        raise NotImplementedError

    def iteration(self, problem, carry, args):
        """(carry after one step of the method, whether it moved)."""
        raise NotImplementedError

    def residual(self, problem, carry, args):
        """(n,) the estimate of u - u* at the carry (module docstring): M⁻¹ ∇Φ by default."""
        return problem.mass(args).solve(carry.g)

    # --- the driver -----------------------------------------------------------------------

    def solve(self, problem, u0, args):
        """Iterate until converged or the cap; returns (u, stats)."""

        def converged(carry, args, start):
            r = self.residual(problem, carry, args)
            return jnp.all(jnp.abs(r) <= self.tolerance(carry.u, start)), r

        def body(state, operands):
            args, start = operands
            carry, used, done, bad, stuck = state
            new, moved = self.iteration(problem, carry, args)
            met, r = converged(new, args, start)
            ok = finite(r) & finite(new.u)
            stop = done | met | ~ok | ~moved
            bad = bad | (~done & ~ok)
            stuck = stuck | (~done & ok & ~met & ~moved)
            carry = jax.tree.map(lambda a, b: jnp.where(done, a, b), carry, new)
            return carry, used + jnp.where(done, 0, 1), stop, bad, stuck

        start = problem.start(args)
        carry = self.start(problem, u0, args)
        met, r = converged(carry, args, start)
        false = jnp.zeros((), bool)
        init = (carry, jnp.zeros((), jnp.int32), met | ~finite(r), ~finite(r), false)
        if self.loops_exit_early:
            final = loop.until_done(body, init, (args, start), self.iterations,
                                    lambda s: s[2], unknowns=start.shape[0])
        else:
            final = loop.iterate(lambda s: body(s, (args, start)), init, self.iterations,
                                 False, lambda s: s[2])
        carry, used, _, bad, stuck = final
        u = carry.u
        r = self.residual(problem, carry, args)
        return u, report(r, u, self.tolerance(u, start), used, bad, stuck)


def report(r, u, tol, used, bad=False, stuck=False):
    """The stats every solver returns from the residual r (the estimate of u - u*, module
    docstring) at the answer u: residual (max |r|), iterations, converged, result (a `Result`
    code), tolerance (the largest per-DOF tolerance of the step)."""
    ok = ~jnp.asarray(bad) & finite(r) & finite(u)
    converged = ok & jnp.all(jnp.abs(r) <= tol)
    result = jnp.where(converged, Result.SUCCESS,
                       jnp.where(ok, jnp.where(stuck, Result.STALLED, Result.MAX_ITERATIONS),
                                 Result.NONFINITE))
    return {"residual": jnp.max(jnp.abs(r), initial=0.0),
            "iterations": jnp.asarray(used, jnp.int32), "converged": converged,
            "result": result.astype(jnp.int32), "tolerance": jnp.max(tol, initial=0.0)}
