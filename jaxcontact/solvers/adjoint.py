"""How gradients flow through a solve: implicit differentiation or unrolling, as objects a
solver carries and `step` calls. For the minimizer u*(θ) of Φ(u; θ), H = ∇²Φ(u*):

    reverse:  H λ = ū,   θ̄ = -(∂∇Φ/∂θ)ᵀ λ          (`custom_vjp`, Implicit(mode="reverse"))
    forward:  H u̇ = -(∂∇Φ/∂θ) θ̇                      (`custom_jvp`, Implicit(mode="forward"))

θ holds the contact rows linearized at the start of the step (exact gradients of the simulated
map). `problem` holds global functions: arrays closed over would be invisible to the rules.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact import validate as check
from jaxcontact.solvers import linear, tolerances

AD_MODES = ("vjp", "jvp", "unrolled")
MODES = ("reverse", "forward")


@dataclasses.dataclass(frozen=True)
class Implicit:
    """Implicit gradients of each solve (the default).

    Attributes:
      mode: "reverse" (`custom_vjp`) or "forward" (`custom_jvp`: `jax.jacfwd`; reverse too).
      linear: "auto" (dense up to `tolerances.DENSE_MAX` unknowns, `DENSE_MAX_RIGID` for
        rigid bodies only), "dense" or "krylov".
      iterations: Krylov iteration cap; None (default): the solver's `krylov_iterations`.
      preconditioner: of the Krylov solve, as `Newton.preconditioner`.
      rtol: relative residual at which the Krylov solve stops.
      early_exit: the Krylov loop as a while loop (not differentiable a second time).
      smoothing: None (default: exact gradients of the simulated step) or a `jc.Contact`,
        the contact laws of the backward pass only. Each step is simulated exactly; its
        gradient is that of the same step under `smoothing`'s laws, from the same start
        (a second solve, warm-started at the exact answer; `step`). E.g.
        `jc.Contact(normal="smooth", smooth_width=0.02)`: contact forces that reach out
        2 cm, so that a near miss has a gradient towards touching;
        `friction_regularization=0.1`: stick softened into slip. The bias is the difference
        between the two steps' Jacobians; a rollout's gradient chains the smoothed steps'
        Jacobians along the exact trajectory. Its `relinearize` is not used.
    """
    mode: str = "reverse"
    linear: str = "auto"
    iterations: int | None = None
    preconditioner: str = "auto"
    rtol: float = tolerances.ADJOINT_RTOL
    early_exit: bool = False
    smoothing: Any = None

    def __post_init__(self):
        check.choice("mode", self.mode, MODES)
        check.choice("linear", self.linear, linear.METHODS)
        check.choice("preconditioner", self.preconditioner, linear.PRECONDITIONERS)
        if self.iterations is not None:
            check.integer("iterations", self.iterations, low=1)
        check.boolean("early_exit", self.early_exit)
        # (a jc.Contact, checked by its shape: solvers do not import the physics)
        if self.smoothing is not None and not hasattr(self.smoothing, "laws"):
            raise ValueError("smoothing must be None or a jc.Contact (the laws of the "
                             f"backward pass), got {self.smoothing!r}")

    def solve(self, solver, problem, u0, args):
        """Run `solver` on stop-gradient inputs; attach the implicit rule to its answer."""
        u, stats = solver.solve(problem, None if u0 is None else jax.lax.stop_gradient(u0),
                                jax.lax.stop_gradient(args))
        settings = dataclasses.replace(self, early_exit=self.early_exit or solver.loops_exit_early,
                                       iterations=self.iterations or solver.krylov_iterations
                                       or tolerances.KRYLOV_RIGID)
        rule = _reverse if self.mode == "reverse" else _forward
        return rule(problem, jax.lax.stop_gradient(u), args, settings), stats


@dataclasses.dataclass(frozen=True)
class Unrolled:
    """Differentiate through every iteration (for testing: the loops run as scans)."""

    def solve(self, solver, problem, u0, args):
        return solver.solve(problem, u0, args)


def _operator(hessian, settings):
    """b ↦ H⁻¹ b for the assembled `Hessian` H, dense or by conjugate gradients."""
    if linear.dense(hessian.size, settings.linear, linear.rigid_only(hessian)):
        a = hessian.dense()
        return lambda b: linalg.solve(a, b)
    precond = linear.preconditioner(hessian, settings.preconditioner)
    return lambda b: linear.cg(hessian.matvec, precond, b, settings.iterations, settings.rtol,
                               settings.early_exit)


@partial(jax.custom_vjp, nondiff_argnums=(0, 3))
def _reverse(problem, u_star, args, settings):
    return u_star


def _reverse_bwd(problem, settings, saved, u_bar):
    u_star, args = saved
    lam = _operator(problem.hessian(u_star, args)[1], settings)(u_bar)
    _, pullback = jax.vjp(lambda a: problem.gradient(u_star, a), args)
    # u* was found from a stop-gradient guess: the solution does not depend on it
    return jnp.zeros_like(u_star), pullback(-lam)[0]


_reverse.defvjp(lambda problem, u, args, settings: (u, (u, args)), _reverse_bwd)


@partial(jax.custom_jvp, nondiff_argnums=(0, 3))
def _forward(problem, u_star, args, settings):
    return u_star


@_forward.defjvp
def _forward_rule(problem, settings, primals, tangents):
    u_star, args = primals
    _, g_dot = jax.jvp(lambda a: problem.gradient(u_star, a), (args,), (tangents[1],))
    _, hessian = problem.hessian(u_star, args)
    solve = _operator(hessian, settings)
    return u_star, jax.lax.custom_linear_solve(hessian.matvec, -g_dot,
                                               solve=lambda _, b: solve(b), symmetric=True)
