"""Gauss-Newton / Levenberg-Marquardt on residuals, with forward-mode sensitivities."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from jaxcontact import validate as check
from jaxcontact.compiling import jit
from jaxcontact.optim.compiled import layout, program
from jaxcontact.optim.result import OptimResult


def _compiled(residual, unravel, key):
    """The jitted (Jacobian, residual) of `residual` for x of this layout: one program, which
    also evaluates every trial step (forward mode carries the residual along), so a fit
    compiles once and an accepted step costs no second evaluation."""

    def build():
        def flat(z, args):
            r = jnp.ravel(residual(unravel(z), *args))
            return r, r

        return jit(jax.jacfwd(flat, has_aux=True))

    return program(("gauss_newton", residual, key), build)


def gauss_newton(residual, x0, *, args=(), max_iterations=20, xtol=1e-10, rtol=1e-9,
                 ftol=0.0, gtol=0.0, damping=1e-3) -> OptimResult:
    """Minimize ½|r(x, *args)|² with Levenberg-Marquardt steps.

    The Jacobian J = ∂r/∂x comes from forward-mode sensitivities (`jax.jacfwd`: through a
    rollout, the implicit forward mode of each step; ADD's direct sensitivities, one tangent
    per parameter). Each step solves (JᵀJ + λ diag(JᵀJ)) δ = -Jᵀr; λ shrinks tenfold after
    a step that lowers the cost and grows tenfold (the step retried) after one that does not.

    Args:
      residual: r(x, *args) -> array (any shape), a JAX function of the pytree x.
      x0: the start.
      args: a tuple of extra arguments of `residual` (traced: other values reuse the
        compiled Jacobian, as do later calls with the same function).
      max_iterations: cap on accepted and rejected steps together (> 0).
      xtol: stop once |δ| <= xtol (|x| + xtol).
      rtol: stop once an accepted step lowers ½|r|² by at most rtol of it (the noise floor
        of fitting noisy data).
      ftol: stop once ½|r|² <= ftol.
      gtol: stop once |Jᵀr| <= gtol.
      damping: the initial λ (>= 0; 0 starts as pure Gauss-Newton).

    Returns:
      `OptimResult` (value ½|r|²; simulations count evaluations: every point tried, the start
      and each step, is one forward-mode pass giving the residual and its Jacobian).
    """
    max_iterations = check.integer("max_iterations", max_iterations, low=1)
    xtol, rtol, ftol, gtol = (check.number(n, v, low=0) for n, v in
                              (("xtol", xtol), ("rtol", rtol), ("ftol", ftol), ("gtol", gtol)))
    lam = check.number("damping", damping, low=0)
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple of extra arguments of residual, got {args!r}")
    z, unravel = ravel_pytree(x0)
    jacobian = _compiled(residual, unravel, layout(x0))
    J, r = jacobian(z, args)
    cost = 0.5 * float(r @ r)
    history, simulations, converged, status = [cost], 1, False, ""
    grad = J.T @ r
    for it in range(1, max_iterations + 1):
        if float(jnp.linalg.norm(grad)) <= gtol or cost <= ftol:
            converged, status = True, "gradient or cost tolerance met"
            it -= 1
            break
        h = J.T @ J
        scale = jnp.diag(h) + 1e-30
        step = jnp.linalg.solve(h + lam * jnp.diag(scale), -grad)
        J_new, r_new = jacobian(z + step, args)
        simulations += 1
        new_cost = 0.5 * float(r_new @ r_new)
        if np.isfinite(new_cost) and new_cost < cost:
            z = z + step
            lam = lam / 10.0
            J, r = J_new, r_new
            decrease = cost - new_cost
            cost, grad = 0.5 * float(r @ r), J.T @ r
            history.append(cost)
            if float(jnp.linalg.norm(step)) <= xtol * (float(jnp.linalg.norm(z)) + xtol):
                converged, status = True, f"step {float(jnp.linalg.norm(step)):.3g} below xtol"
                break
            if decrease <= rtol * (cost + decrease):
                converged = True
                status = (f"cost decreased by {decrease:.3g}, below rtol = {rtol:.3g} of the "
                          f"cost {cost + decrease:.3g}")
                break
        elif float(jnp.linalg.norm(step)) <= xtol * (float(jnp.linalg.norm(z)) + xtol):
            # a negligible step that does not lower the cost: at the round-off floor
            converged = True
            status = f"rejected step {float(jnp.linalg.norm(step)):.3g} below xtol"
            break
        else:
            lam = max(10.0 * lam, 1e-6)
    else:
        it = max_iterations
        status = f"iteration cap {max_iterations} reached: cost {cost:.3g}"
    if converged and not status:
        status = "converged"
    return OptimResult(x=unravel(z), value=cost, grad_norm=float(jnp.linalg.norm(grad)),
                       iterations=it, simulations=simulations, converged=converged,
                       status=status, history=history, jacobian=J)
