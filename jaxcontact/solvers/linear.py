"""Linear solves of the step: dense elimination for small systems, bounded preconditioned
conjugate gradients on the block-sparse `Hessian` for large ones (thesis §4.6.2, Fig. 15).

The step's Hessian is symmetric positive definite (the mass plus positive semi-definite
terms), so conjugate gradients apply. `dense(n, "auto")` is the rule Newton's directions and
the implicit gradients use by default: dense up to `tolerances.DENSE_MAX` unknowns, Krylov
above, so default settings scale with the number of bodies. Each Krylov solve runs at most
`iterations` iterations (`loop.iterate`): a `lax.scan` of that static length by default, or
with `early_exit` a `while_loop` that stops as soon as every scene of the batch has its
residual below `rtol` times its initial value. Either way an iterate freezes once its
residual is that small, and every division is guarded, so a batch under `vmap` runs in lock
step and a breakdown (a zero or negative curvature) stops the iteration at its last good
iterate; the two loop forms give the same answer.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact.math import safe_div
from jaxcontact.solvers import loop, multilevel, tolerances

METHODS = ("auto", "dense", "krylov")
PRECONDITIONERS = ("auto", "block_jacobi", "multilevel")


def dense(n: int, method: str) -> bool:
    """Whether a system of n unknowns is solved densely under `method`."""
    return method == "dense" or (method == "auto" and n <= tolerances.DENSE_MAX)


def dense_solve(hessian, rhs):
    """H x = b by elimination of the assembled dense H."""
    return linalg.solve(hessian.dense(), rhs)


def block_jacobi(hessian):
    """v ↦ D⁻¹ v with D the block diagonal of H: the default preconditioner."""
    return hessian.block_diagonal().inverse().apply


def preconditioner(hessian, kind="auto"):
    """v ↦ P v ≈ H⁻¹ v for a Krylov solve with H. kind "block_jacobi": `block_jacobi`;
    "multilevel": a V-cycle over the meshes' coarse space (`solvers.multilevel`); "auto":
    multilevel where the Hessian has a coarse space (a cloth of at least
    `aggregation.MIN_PARTICLES` particles, or a solver that asked for one), else
    block-Jacobi."""
    if kind not in PRECONDITIONERS:
        raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {kind!r}")
    if kind == "auto":
        kind = "block_jacobi" if hessian.coarse is None else "multilevel"
    if kind == "block_jacobi":
        return block_jacobi(hessian)
    if hessian.coarse is None:
        raise ValueError("preconditioner='multilevel' needs a scene with solids or cloth "
                         "(it aggregates their mesh particles); this scene has none")
    return multilevel.preconditioner(hessian, hessian.coarse)


def cg(matvec, precond, b, iterations, rtol=1e-10, early_exit=False, absolute=False):
    """x ≈ A⁻¹ b by preconditioned conjugate gradients (precond applies P ≈ A⁻¹).

    A must be symmetric positive definite; where it is not, the iteration stops at the first
    direction p of non-positive curvature pᵀAp, or with `absolute` takes |pᵀAp| for it and
    goes on: the counterpart, for Newton's directions on an indefinite Hessian, of the dense
    solve's modified factorization (`linalg.solve_convexified`: a negative curvature taken
    as its magnitude), so that such directions are followed downhill, not left out."""
    z = precond(b)
    stop_at = (rtol * jnp.linalg.norm(b)) ** 2

    def body(carry):
        x, r, z, p, rz, done = carry
        ap = matvec(p)
        curvature = jnp.dot(p, ap)
        if absolute:
            curvature = jnp.abs(curvature)
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
