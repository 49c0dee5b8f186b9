"""Constraint rows meet bodies: scatter, per-body 6x6 blocks and per-row effective masses.

Rows (`jaxcontact.problem.Rows`) couple at most two bodies; these helpers turn them into the
per-body quantities of the first-order solvers: the block-diagonal Gauss-Newton preconditioner
M_b + Σ_j c_j G_jbᵀ G_jb (thesis Eq. 115-116, accumulated over forces as in Algorithm 2, with
Eq. 131 and 136 for contact and friction), Σ_j G_jᵀ λ_j, and the effective mass of a row
G_j M⁻¹ G_jᵀ (thesis Eq. 122). Rows of the world (index -1) are dropped.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcontact.solvers import linalg


def _index(body, n):
    """Static body tuple -> int array with the world (-1) sent to the dropped slot n."""
    idx = jnp.asarray(body, jnp.int32).reshape(-1)
    return jnp.where(idx < 0, n, idx)


def scatter(values_a, values_b, rows, n):
    """Σ over rows of values_a onto body a and values_b onto body b, (n, ...)."""
    ia, ib = _index(rows.body_a, n), _index(rows.body_b, n)
    total = jax.ops.segment_sum(values_a, ia, num_segments=n + 1)
    total += jax.ops.segment_sum(values_b, ib, num_segments=n + 1)
    return total[:n]


def gather(per_body, rows, n):
    """Per-body (n, ...) values at each row's side a and side b."""
    padded = jnp.concatenate([per_body, jnp.zeros((1,) + per_body.shape[1:], per_body.dtype)])
    return padded[_index(rows.body_a, n)], padded[_index(rows.body_b, n)]


def transpose_apply(rows, lam, n):
    """Σ_j G_jᵀ λ_j as per-body (n, 6) generalized impulses."""
    return scatter(rows.jac_a * lam[:, None], rows.jac_b * lam[:, None], rows, n)


def gauss_newton_blocks(rows, mass):
    """(n, 6, 6) blocks M_b + Σ_j c_j G_jbᵀ G_jb of the Gauss-Newton Hessian's diagonal."""
    n = mass.shape[0]
    outer_a = rows.curvature[:, None, None] * rows.jac_a[:, :, None] * rows.jac_a[:, None, :]
    outer_b = rows.curvature[:, None, None] * rows.jac_b[:, :, None] * rows.jac_b[:, None, :]
    return mass + scatter(outer_a, outer_b, rows, n)


def block_solve(blocks, vec):
    """blocks⁻¹ vec for (n, 6, 6) blocks and (n, 6) right-hand sides."""
    return jax.vmap(linalg.solve)(blocks, vec)


def block_inverse(blocks):
    eye = jnp.broadcast_to(jnp.eye(6, dtype=blocks.dtype), blocks.shape)
    return jax.vmap(jax.vmap(linalg.solve, in_axes=(None, 1), out_axes=1))(blocks, eye)


def effective_mass(rows, inv_mass, split):
    """W_j = Σ_sides s_b G_jb M_b⁻¹ G_jbᵀ, with s_b >= 1 the mass-splitting factor of body b
    (the number of constraints sharing it; Tonge et al., as used in thesis §5.6)."""
    n = inv_mass.shape[0]
    inv_a, inv_b = gather(inv_mass * split[:, None, None], rows, n)
    w_a = jnp.einsum("ri,rij,rj->r", rows.jac_a, inv_a, rows.jac_a)
    w_b = jnp.einsum("ri,rij,rj->r", rows.jac_b, inv_b, rows.jac_b)
    return w_a + w_b


def jacobian_preconditioner(problem, u, args, transpose=False):
    """v ↦ P v with P ≈ J⁻¹ for the step's residual Jacobian J = M⁻¹ H at u (or ≈ J⁻ᵀ).

    H's block diagonal is approximated by the Gauss-Newton blocks B (mass, contact, friction
    and spring curvatures), so J⁻¹ ≈ B⁻¹ M and J⁻ᵀ ≈ M B⁻¹, both block diagonal.
    """
    mass = problem.mass(args)
    inverse = block_inverse(gauss_newton_blocks(problem.rows(u, args), mass))
    n = mass.shape[0]
    blocks = (jnp.einsum("nij,njk->nik", mass, inverse) if transpose
              else jnp.einsum("nij,njk->nik", inverse, mass))

    def apply(v):
        return jnp.einsum("nij,nj->ni", blocks, v.reshape(n, 6)).reshape(-1)

    return apply
