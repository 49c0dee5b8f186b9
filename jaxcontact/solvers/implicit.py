"""Implicit differentiation of a solve r(u*; θ) = 0: the only gradient rules of the library.

For the solution u*(θ) of r(u; θ) = 0, with J = ∂r/∂u at u*:
    reverse:  J^T λ = ū,   θ̄ = -(∂r/∂θ)^T λ            (`custom_vjp`, ad="vjp")
    forward:  J u̇ = -(∂r/∂θ) θ̇                          (`custom_jvp`, ad="jvp")
Both share `linear_solve`. The forward rule solves through `lax.custom_linear_solve`, which JAX
can transpose, so `jax.grad` works in "jvp" mode too. With a `MatrixFree` setting (used by the
matrix-free Newton variants) J is never formed: the systems are solved by preconditioned
BiCGSTAB with Jacobian-vector (or vector-Jacobian) products, for systems too large to factor. Solvers never see these rules: the step
runs the solver on stop-gradient inputs and passes its answer through `implicit_solution`, whose
primal is the identity on u*. The memory kept per solve is u* and θ, whatever the iteration
count. `residual_fn(u, args)` must be a global function (not a closure over arrays): arrays
it closed over would be invisible to the rules.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp

from jaxcontact.solvers import krylov, linalg

AD_MODES = ("vjp", "jvp", "unrolled")


def residual_jacobian(residual_fn, u, args):
    """Dense ∂r/∂u at (u, args), (n, n)."""
    return residual_and_jacobian(residual_fn, u, args)[1]


def residual_and_jacobian(residual_fn, u, args):
    """r(u) and the dense ∂r/∂u, (n,), (n, n): one linearization, n tangent evaluations."""
    r, tangent = jax.linearize(lambda x: residual_fn(x, args), u)
    jac = jax.vmap(tangent, out_axes=1)(jnp.eye(u.shape[0], dtype=u.dtype))
    return r, jac


def linear_solve(jac, rhs, transpose=False):
    """Solve J x = b (or Jᵀ x = b) densely; J is in general non-symmetric."""
    return linalg.solve(jac.T if transpose else jac, rhs)


@dataclasses.dataclass(frozen=True)
class MatrixFree:
    """Solve the implicit systems by preconditioned BiCGSTAB instead of a dense J.

    Attributes:
      preconditioner: global function (u, args, transpose) -> (v ↦ P v), P ≈ J⁻¹ (or J⁻ᵀ).
      iterations: BiCGSTAB iterations (static).
      rtol: relative residual at which the Krylov iteration stops.
      early_exit: stop the loop there (a `while_loop`, see `krylov`) instead of running all
        `iterations` masked; reverse mode then cannot differentiate the solve a second time.
    """

    preconditioner: Callable
    iterations: int = 100
    rtol: float = 1e-12
    early_exit: bool = False


def _solver(residual_fn, u_star, args, linear, transpose):
    """A function b ↦ J⁻¹ b (or J⁻ᵀ b) at (u*, args), dense or matrix-free."""
    if linear is None:
        jac = residual_jacobian(residual_fn, u_star, args)
        return lambda b: linear_solve(jac, b, transpose=transpose)
    if transpose:
        _, pullback = jax.vjp(lambda x: residual_fn(x, args), u_star)
        matvec = lambda v: pullback(v)[0]  # noqa: E731
    else:
        _, matvec = jax.linearize(lambda x: residual_fn(x, args), u_star)
    precond = linear.preconditioner(u_star, args, transpose)
    return lambda b: krylov.bicgstab(matvec, precond, b, linear.iterations, linear.rtol,
                                     linear.early_exit)


@partial(jax.custom_vjp, nondiff_argnums=(0, 3))
def _implicit_vjp(residual_fn, u_star, args, linear):
    return u_star


def _implicit_vjp_fwd(residual_fn, u_star, args, linear):
    return u_star, (u_star, args)


def _implicit_vjp_bwd(residual_fn, linear, saved, u_bar):
    u_star, args = saved
    lam = _solver(residual_fn, u_star, args, linear, transpose=True)(u_bar)
    _, pullback = jax.vjp(lambda a: residual_fn(u_star, a), args)
    (args_bar,) = pullback(-lam)
    # u* was found from a stop-gradient guess: the solution does not depend on it
    return jnp.zeros_like(u_star), args_bar


_implicit_vjp.defvjp(_implicit_vjp_fwd, _implicit_vjp_bwd)


@partial(jax.custom_jvp, nondiff_argnums=(0, 3))
def _implicit_jvp(residual_fn, u_star, args, linear):
    return u_star


@_implicit_jvp.defjvp
def _implicit_jvp_rule(residual_fn, linear, primals, tangents):
    u_star, args = primals
    _, args_dot = tangents
    _, r_dot = jax.jvp(lambda a: residual_fn(u_star, a), (args,), (args_dot,))
    if linear is None:
        jac = residual_jacobian(residual_fn, u_star, args)
        matvec = lambda x: jac @ x  # noqa: E731
        solve = lambda _, b: linear_solve(jac, b)  # noqa: E731
        solve_t = lambda _, b: linear_solve(jac, b, transpose=True)  # noqa: E731
    else:
        _, matvec = jax.linearize(lambda x: residual_fn(x, args), u_star)
        forward = _solver(residual_fn, u_star, args, linear, transpose=False)
        backward = _solver(residual_fn, u_star, args, linear, transpose=True)
        solve, solve_t = (lambda _, b: forward(b)), (lambda _, b: backward(b))
    u_dot = jax.lax.custom_linear_solve(matvec, -r_dot, solve=solve, transpose_solve=solve_t)
    return u_star, u_dot


def implicit_solution(residual_fn, u_star, args, ad="vjp", linear=None):
    """Return u_star, differentiable in `args` by the implicit function theorem.

    Args:
      residual_fn: global function r(u, args) -> (n,), zero at u_star.
      u_star: (n,) a (converged) root, computed without gradients.
      args: pytree of the parameters θ.
      ad: "vjp" (reverse mode, default) or "jvp" (forward mode; reverse by transposition).
      linear: None (dense J, LU) or a `MatrixFree` setting.
    """
    u_star = jax.lax.stop_gradient(u_star)
    if ad == "vjp":
        return _implicit_vjp(residual_fn, u_star, args, linear)
    if ad == "jvp":
        return _implicit_jvp(residual_fn, u_star, args, linear)
    raise ValueError(f"ad must be 'vjp' or 'jvp' for implicit differentiation, got {ad!r}")
