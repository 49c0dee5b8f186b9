"""What every solver shares: settings validation, the default tolerance and the final report.

A solver is a frozen dataclass of static settings with a method
`solve(problem, u0, args) -> (u, stats)` (see `jaxcontact.problem.Problem`). Every solver ends
the same way: it evaluates the step's residual r = M⁻¹ ∂Φ/∂u at its answer and reports it, so
"converged" means the same thing (max |r| <= tol) whichever solver ran.
"""

from __future__ import annotations

import math
import numbers

import jax.numpy as jnp

from jaxcontact.solvers.implicit import AD_MODES
from jaxcontact.types import Result


def default_tol(dtype) -> float:
    """Residual tolerance (m/s) by precision.

    float32: stiff contact and friction terms amplify the rounding of a ~1 m/s velocity
    (1e-7) by Δt k / m ~ 10-100, so residuals below ~1e-4 are noise; 3e-4 m/s moves a body by
    less than 1 µm per step at Δt = 2 ms.
    """
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


def early_exit(solver) -> bool:
    """Whether the solver's loops may stop early (`loop.iterate`): its `early_exit`, except with
    ad="unrolled", whose reverse mode must differentiate the loops and so needs the scans."""
    return solver.early_exit and solver.ad != "unrolled"


def check_ad(solver):
    check_choice(solver, "ad", AD_MODES)
    check_choice(solver, "adjoint", ADJOINTS)


ADJOINTS = ("auto", "dense", "krylov")
# Above this many unknowns (64 bodies) "auto" solves the implicit systems matrix-free.
DENSE_ADJOINT_MAX = 384


def matrix_free_adjoint(solver, n: int) -> bool:
    """Whether the implicit-gradient systems of a solve with n unknowns are solved by Krylov
    iterations: `adjoint="krylov"`, or "auto" for matrix-free Newton and for n > 384."""
    if solver.adjoint == "auto":
        return getattr(solver, "linear", "dense") != "dense" or n > DENSE_ADJOINT_MAX
    return solver.adjoint == "krylov"


def tolerance(solver, dtype) -> float:
    return solver.tol if solver.tol is not None else default_tol(dtype)


def residual_norm(r):
    return jnp.max(jnp.abs(r), initial=0.0)


def report(problem, u, args, tol, used, bad=False):
    """The stats dict every solver returns: residual (max |r| at u), iterations, converged,
    result (a `Result` code)."""
    r = problem.residual(u, args)
    res = residual_norm(r)
    finite = ~jnp.asarray(bad) & jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(u))
    converged = finite & (res <= tol)
    result = jnp.where(converged, Result.SUCCESS,
                       jnp.where(finite, Result.MAX_ITERATIONS, Result.NONFINITE))
    return {"residual": res, "iterations": jnp.asarray(used, jnp.int32),
            "converged": converged, "result": result.astype(jnp.int32)}


def check_bool(solver, name):
    value = getattr(solver, name)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
