"""What every solver shares: settings and their validation, the one loop driver, the report.

A solver is a frozen dataclass of static settings that supplies `candidates` (the points it
may start from: g is evaluated at all of them in one batched pass), `start` (its first carry,
from them) and `iteration` (one masked step of its method, returning the carry after it and
the residual at the carry before it); `solve` here runs them under one bounded loop (`loop.iterate`: a scan of
`iterations`, or a while loop with `early_exit`), freezes a scene once it has converged or
produced a non-finite value, counts iterations, and ends the same way for every method: it
evaluates the step's residual r = M⁻¹ ∂Φ/∂u at the answer, so "converged" means the same
(max |r| <= tolerance) whichever solver ran.

The tolerance of a step is max(tol, `ROUNDING_ULPS` x the residual's rounding level at the
start of the solve and at the iterate, `FLOOR_MARGIN` x the method's own floor), per degree
of freedom: the residual is a sum of terms whose rounding errors alone can exceed a fixed tol
(stiff contact in float32, heavy bodies), and a solve asked for less than its arithmetic can
give would report failure for a converged step.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from jaxcontact.solvers import loop
from jaxcontact.solvers.adjoint import AD_MODES, Implicit, Unrolled, from_settings
from jaxcontact.solvers.linear import METHODS
from jaxcontact.types import Result

# A residual within this many multiples of its rounding level (the machine epsilon times the
# magnitude of the terms summed into it) is converged: rounding alone puts ~1-10 there.
ROUNDING_ULPS = 64.0
# A method's own floor (`Solver.iteration`) bounds the residual's change under the rounding
# of u and of the configuration (|M⁻¹| (|J| eps |u| + |J_c| resolution), J_c the Jacobian's
# configuration part; already a worst case): a margin of 2 over it.
FLOOR_MARGIN = 2.0
# A solve within STALL_BAND x its tolerance makes progress while its best residual (relative
# to its level) halves at least once in `patience` iterations; one that does not has stalled
# on its rounding (`Result.STALLED`).
PROGRESS = 0.5
STALL_BAND = 8.0


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision: 1e-10 in float64, 3e-4 in float32 (3e-4 m/s
    moves a body by less than 1 µm per step at Δt = 2 ms); the rounding floor of each step
    (module docstring) raises it where the arithmetic cannot reach it."""
    return 1e-10 if jnp.dtype(dtype) == jnp.float64 else 3e-4


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


def residual_norm(r):
    return jnp.max(jnp.abs(r), initial=0.0)


def _select(keep, old, new):
    return jax.tree.map(lambda a, b: jnp.where(keep, a, b), old, new)


@dataclasses.dataclass(frozen=True)
class Solver:
    """Settings every solver has.

    Attributes:
      iterations: static iteration cap.
      patience: stop a scene's solve, reported `Result.STALLED` (not converged), once its
        best residual max |M⁻¹ g| / tolerance is within `STALL_BAND` and has not halved for
        this many iterations: its rounding, not the method, holds it there. None (default):
        only the cap ends a solve.
      tol: residual tolerance on max |M⁻¹ r| (m/s); None: 1e-10 (float64) / 3e-4 (float32).
        The rounding level of each step raises it where needed (module docstring).
      early_exit: run the loops as bounded while loops that stop once every scene of a
        (vmapped) batch has converged (default), instead of always running every masked
        iteration; the Krylov solves inside (matrix-free directions, implicit-gradient
        systems) stop at their tolerance likewise. Answers are the same either way
        (converged iterates are frozen), and first derivatives never go through these loops
        (implicit rules). Reverse mode cannot differentiate a while loop, though: take second
        reverse-mode derivatives with early_exit=False.
      ad: shorthand for the adjoint: "vjp" (implicit reverse mode, `custom_vjp`), "jvp"
        (implicit forward mode, `custom_jvp`; reverse by transposition) or "unrolled"
        (differentiate every iteration: for testing).
      adjoint: a `jc.Implicit(...)` or `jc.Unrolled()` object, or the shorthand "auto",
        "dense", "krylov" for the implicit linear solve (with `ad`). The resolved object is
        `solver.gradients`.
    """

    iterations: int = 50
    patience: int | None = None
    tol: float | None = None
    early_exit: bool = True
    ad: str = "vjp"
    adjoint: Any = "auto"
    gradients: Any = dataclasses.field(init=False, repr=False, compare=False)
    # whether the carry holds g and its noise at the iterate (`measured` costs nothing), so
    # the driver can judge a step converged as soon as it is taken
    carries_residual: ClassVar[bool] = False

    def __post_init__(self):
        check_int(self, "iterations")
        if self.patience is not None:
            check_int(self, "patience")
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

    def converged(self, problem, g, noise, args, tol):
        """(whether g is converged, the level it is held to): max |M⁻¹ g| within
        max(tol, the tolerance of its rounding noise), per DOF."""
        level = self.level(noise, tol)
        return jnp.all(jnp.abs(problem.mass(args).solve(g)) <= level), level

    def level(self, noise, tol):
        """The plain level a residual with rounding noise `noise` is held to, per DOF:
        max(tol, its tolerance). A method's floor can only raise it (`iteration`)."""
        return jnp.maximum(tol, self.tolerance(noise))

    def tolerance(self, noise):
        """Per-DOF tolerance where the residual's rounding noise is `noise` (module
        docstring)."""
        tol = self.tol if self.tol is not None else default_tol(noise.dtype)
        return jnp.maximum(tol, jax.lax.stop_gradient(ROUNDING_ULPS * noise))

    def stalled(self, best, since):
        """Whether a solve has stalled on its rounding (`patience`): its best residual, in
        tolerances, is within `STALL_BAND` and has not halved for `patience` iterations."""
        if self.patience is None:
            return jnp.zeros((), bool)
        return (since >= self.patience) & (best <= STALL_BAND)

    # --- what a method supplies -----------------------------------------------------------

    def candidates(self, problem, u0, args):
        """(k, n) points the method may start from (u0: the state's velocity); the driver
        evaluates g at all of them in one batched pass. Default: free flight ũ + Δt g (the
        start of thesis Algorithms 2 and 3)."""
        return problem.start(args)[None]

    def start(self, problem, points, grads, noises, args, tol):
        """(the first carry, g and the rounding noise of M⁻¹ g at its iterate), from the
        candidate points with their g and noise; the carry's first element is the iterate u.
        Default: the first candidate."""
        return (points[0],), grads[0], noises[0]

    def iteration(self, problem, carry, args, tol):
        """(carry after one step, residual M⁻¹ g at the carry's iterate (n,), ok, noise,
        floor): ok is false where the step produced non-finite values; noise is the rounding
        noise of that residual (`Problem.gradient_noise`: the methods evaluate g there anyway,
        so it costs no second pass over the elements); floor (per DOF, or 0) is a rounding
        level of the residual that the method can measure better (Newton: |M⁻¹| |J| |u| eps,
        the residual's sensitivity to the rounding of u itself)."""
        raise NotImplementedError

    def cap(self, args, n: int) -> int:
        """The static cap of the loop for n unknowns of the problem with arguments `args`
        (a step's: (model, context)). Default: `iterations`."""
        return self.iterations

    def escalate(self, args, carry, used):
        """The carry before an iteration, given the iterations `used` so far: where a method
        changes course once they are spent. Default: unchanged."""
        return carry

    def measured(self, problem, carry, args):
        """(g, rounding noise of M⁻¹ g) at the carry's iterate: evaluated here, unless the
        method carries them (Newton)."""
        return problem.gradient_noise(carry[0], args)

    # --- the driver -----------------------------------------------------------------------

    def solve(self, problem, u0, args):
        """Iterate from u0 until converged or the cap; returns (u, stats)."""
        points = self.candidates(problem, u0, args)
        grads, noises = jax.vmap(lambda v: problem.gradient_noise(v, args))(points)
        tol = self.tolerance(noises[0])

        def body(state, operands):
            args, tol = operands
            carry, used, done, bad, level, best, since = state
            carry = self.escalate(args, carry, used)
            new, r, ok, noise, floor = self.iteration(problem, carry, args, tol)
            finite = jnp.all(jnp.isfinite(r))
            # the rounding level at the iterate, not only at the start (contact forces that
            # only appear during the solve raise it)
            here = jnp.maximum(self.level(noise, tol),
                               jax.lax.stop_gradient(FLOOR_MARGIN * floor))
            stop = done | ~finite | jnp.all(jnp.abs(r) <= here)
            bad = bad | (~stop & ~ok) | (~done & ~finite)
            # progress: the best residual, relative to its level, halves within `patience`
            ratio = jnp.max(jnp.abs(r) / here, initial=0.0)
            gained = ratio <= PROGRESS * best
            best = jnp.where(done | ~gained, best, ratio)
            since = jnp.where(done, since, jnp.where(gained, 0, since + 1))
            stop = stop | self.stalled(best, since)
            stop = stop | bad
            level = jnp.where(done, level, here)
            used = used + jnp.where(stop, 0, 1)
            carry = _select(stop, carry, new)
            if self.carries_residual:
                # the step just taken may already be converged at its own rounding level
                # (the method's floor would only raise that level, and it needs the
                # linearization at the new iterate): stop now instead of paying a whole
                # iteration to find out at its start (design note 34)
                met, here_new = self.converged(problem, *self.measured(problem, new, args),
                                               args, tol)
                arrived = ~stop & met
                stop = stop | arrived
                level = jnp.where(arrived, here_new, level)
            return carry, used, stop, bad, level, best, since

        # a scene already converged where the method starts needs no iteration (with
        # `early_exit` it costs none)
        start, g_start, noise_start = self.start(problem, points, grads, noises, args, tol)
        done0, level0 = self.converged(problem, g_start, noise_start, args, tol)
        init = (start, jnp.zeros((), jnp.int32), done0, jnp.zeros((), bool), level0,
                jnp.full((), jnp.inf, g_start.dtype), jnp.zeros((), jnp.int32))
        cap = self.cap(args, points.shape[1])
        if self.loops_exit_early:
            final = loop.until_done(body, init, (args, tol), cap, lambda s: s[2],
                                    unknowns=points.shape[1])
        else:
            final = loop.iterate(lambda s: body(s, (args, tol)), init, cap, False,
                                 lambda s: s[2])
        carry, used, _, bad, level, best, since = final
        u = carry[0]
        g, noise = self.measured(problem, carry, args)
        # the level at the last iterate looked at (the answer, if it stopped early)
        tol = self.level(noise, level)
        return u, report(problem.mass(args).solve(g), u, tol, used, bad,
                         self.stalled(best, since))


def report(r, u, tol, used, bad=False, stalled=False):
    """The stats every solver returns from the residual r = M⁻¹ g at the answer u: residual
    (max |r|), iterations, converged, result (a `Result` code), tolerance (the largest per-DOF
    tolerance of the step)."""
    finite = ~jnp.asarray(bad) & jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(u))
    converged = finite & jnp.all(jnp.abs(r) <= tol)
    result = jnp.where(converged, Result.SUCCESS,
                       jnp.where(finite, jnp.where(stalled, Result.STALLED,
                                                   Result.MAX_ITERATIONS), Result.NONFINITE))
    return {"residual": residual_norm(r), "iterations": jnp.asarray(used, jnp.int32),
            "converged": converged, "result": result.astype(jnp.int32),
            "tolerance": jnp.max(tol, initial=0.0)}


def finite(x):
    """Whether every entry of x is finite (a scalar bool)."""
    return jnp.all(jnp.isfinite(x))
