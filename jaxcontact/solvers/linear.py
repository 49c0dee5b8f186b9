"""Linear solves of the step: dense elimination for small systems, bounded preconditioned
conjugate gradients on the block-sparse `Hessian` for large ones (thesis §4.6.2, Fig. 15)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxcontact import validate as check
from jaxcontact.math import safe_div
from jaxcontact.solvers import loop, multilevel, tolerances

METHODS = ("auto", "dense", "krylov")
PRECONDITIONERS = ("auto", "block_jacobi", "multilevel")


def dense(n: int, method: str, rigid: bool = False) -> bool:
    """Whether a system of n unknowns is solved densely under `method` ("auto": up to
    `tolerances.DENSE_MAX`, or `DENSE_MAX_RIGID` where every unknown is a rigid body's)."""
    bound = tolerances.DENSE_MAX_RIGID if rigid else tolerances.DENSE_MAX
    return method == "dense" or (method == "auto" and n <= bound)


def rigid_only(hessian) -> bool:
    """Whether every unknown of the `Hessian` belongs to a rigid body (6 x 6 blocks only)."""
    return all(size == 6 for count, size in hessian.diagonal.sizes if count)


def preconditioner(hessian, kind="auto"):
    """v ↦ P v ≈ H⁻¹ v: "block_jacobi" (H's block diagonal inverted), "multilevel" (a V-cycle,
    `solvers.multilevel`) or "auto" (multilevel where H has a coarse space)."""
    check.choice("preconditioner", kind, PRECONDITIONERS)
    if kind == "auto":
        kind = "block_jacobi" if hessian.coarse is None else "multilevel"
    if kind == "block_jacobi":
        return hessian.block_diagonal().inverse().apply
    if hessian.coarse is None:
        raise ValueError("preconditioner='multilevel' needs a scene with solids or cloth "
                         "(it aggregates their mesh particles); this scene has none")
    return multilevel.preconditioner(hessian, hessian.coarse)


def cg(matvec, precond, b, iterations, rtol=1e-10, early_exit=False, absolute=False):
    """x ≈ A⁻¹ b by preconditioned conjugate gradients (precond applies P ≈ A⁻¹), at most
    `iterations`, frozen once the residual is below rtol |b|. At a curvature pᵀAp <= 0 it stops,
    or with `absolute` takes |pᵀAp| (as `linalg.solve_convexified` does densely)."""
    z = precond(b)
    stop_at = (rtol * jnp.linalg.norm(b)) ** 2

    def body(carry):
        x, r, z, p, rz, done = carry
        ap = matvec(p)
        curvature = jnp.abs(jnp.dot(p, ap)) if absolute else jnp.dot(p, ap)
        done = done | (curvature <= 0.0) | (jnp.dot(r, r) <= stop_at)
        alpha = jnp.where(done, 0.0, safe_div(rz, curvature))
        x, r = x + alpha * p, r - alpha * ap
        z_new = precond(r)
        rz_new = jnp.dot(r, z_new)
        p_new = z_new + safe_div(rz_new, rz) * p
        keep = lambda new, old: jnp.where(done, old, new)  # noqa: E731
        return (x, r, keep(z_new, z), keep(p_new, p), keep(rz_new, rz), done)

    init = (jnp.zeros_like(b), b, z, z, jnp.dot(b, z), jnp.zeros((), bool))
    return loop.iterate(body, init, iterations, early_exit, lambda carry: carry[-1])[0]
