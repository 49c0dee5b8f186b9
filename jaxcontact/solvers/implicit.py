"""Implicit differentiation of a solve r(u*; θ) = 0: the only gradient rules of the library.

For the solution u*(θ) of r(u; θ) = 0, with J = ∂r/∂u at u*:
    reverse:  J^T λ = ū,   θ̄ = -(∂r/∂θ)^T λ            (`custom_vjp`, ad="vjp")
    forward:  J u̇ = -(∂r/∂θ) θ̇                          (`custom_jvp`, ad="jvp")
Both share `linear_solve`. The forward rule solves through `lax.custom_linear_solve`, which JAX
can transpose, so `jax.grad` works in "jvp" mode too. Solvers never see these rules: the step
runs the solver on stop-gradient inputs and passes its answer through `implicit_solution`, whose
primal is the identity on u*. The memory kept per solve is u* and θ, whatever the iteration
count. `residual_fn(u, args)` must be a global function (not a closure over arrays): arrays
it closed over would be invisible to the rules.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxcontact.solvers import linalg

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


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _implicit_vjp(residual_fn, u_star, args):
    return u_star


def _implicit_vjp_fwd(residual_fn, u_star, args):
    return u_star, (u_star, args)


def _implicit_vjp_bwd(residual_fn, saved, u_bar):
    u_star, args = saved
    lam = linear_solve(residual_jacobian(residual_fn, u_star, args), u_bar, transpose=True)
    _, pullback = jax.vjp(lambda a: residual_fn(u_star, a), args)
    (args_bar,) = pullback(-lam)
    # u* was found from a stop-gradient guess: the solution does not depend on it
    return jnp.zeros_like(u_star), args_bar


_implicit_vjp.defvjp(_implicit_vjp_fwd, _implicit_vjp_bwd)


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def _implicit_jvp(residual_fn, u_star, args):
    return u_star


@_implicit_jvp.defjvp
def _implicit_jvp_rule(residual_fn, primals, tangents):
    u_star, args = primals
    _, args_dot = tangents
    _, r_dot = jax.jvp(lambda a: residual_fn(u_star, a), (args,), (args_dot,))
    jac = residual_jacobian(residual_fn, u_star, args)
    u_dot = jax.lax.custom_linear_solve(
        lambda x: jac @ x, -r_dot,
        solve=lambda _, b: linear_solve(jac, b),
        transpose_solve=lambda _, b: linear_solve(jac, b, transpose=True))
    return u_star, u_dot


def implicit_solution(residual_fn, u_star, args, ad="vjp"):
    """Return u_star, differentiable in `args` by the implicit function theorem.

    Args:
      residual_fn: global function r(u, args) -> (n,), zero at u_star.
      u_star: (n,) a (converged) root, computed without gradients.
      args: pytree of the parameters θ.
      ad: "vjp" (reverse mode, default) or "jvp" (forward mode; reverse by transposition).
    """
    u_star = jax.lax.stop_gradient(u_star)
    if ad == "vjp":
        return _implicit_vjp(residual_fn, u_star, args)
    if ad == "jvp":
        return _implicit_jvp(residual_fn, u_star, args)
    raise ValueError(f"ad must be 'vjp' or 'jvp' for implicit differentiation, got {ad!r}")
