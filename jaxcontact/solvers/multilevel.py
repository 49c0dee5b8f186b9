"""A multilevel (aggregation multigrid) preconditioner of the step's block-sparse Hessian: rigid
motions of groups of mesh particles (`jaxcontact.aggregation`) as coarse spaces, Galerkin
matrices A_{l+1} = Pᵀ A_l P, one V-cycle (Briggs, Henson & McCormick, A Multigrid Tutorial,
ch. 3) of damped block-Jacobi sweeps and a dense LU on the coarsest level (design note 31).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import linalg
from jaxcontact.aggregation import MODES

SMOOTHING = 0.7  # damping of the block-Jacobi sweeps


def _sandwich(left, middle, right):
    """leftᵀ middle right for batches of small matrices, as sums of broadcast products (XLA's
    CPU dot is 10x slower on millions of 3 x 6 products)."""
    inner = sum(left[..., i, :, None] * middle[..., i, None, :] for i in range(left.shape[-2]))
    return sum(inner[..., :, j, None] * right[..., j, None, :] for j in range(right.shape[-2]))


def galerkin(jacobian, space) -> list:
    """Every level's matrix Pᵀ A P as (Q, 6, 6) blocks of its node pairs (`Level.rows`,
    `Level.cols`), level 1 first: Σ_e B_eᵀ A_e B_e + Σ_p B_pᵀ D_p B_p over the particles."""
    levels, basis = space.structure.levels, space.basis[0]
    level, particles = levels[0], basis.shape[0]
    padded = jnp.concatenate([basis, jnp.zeros((1, 3, MODES), basis.dtype)])
    node = jnp.concatenate([jnp.asarray(level.aggregate), jnp.array([level.count])])
    table = jnp.asarray(level.pair_of)
    own = _sandwich(basis, jacobian.diagonal.blocks[1], basis)
    values = jax.ops.segment_sum(own, table[node[:particles], node[:particles]],
                                 num_segments=level.pairs + 1)
    for local, ids, slots in zip(jacobian.matrices(), jacobian.blocks, jacobian.slots):
        chosen = [(s, offset) for s, (group, offset, _) in enumerate(slots) if group == 1]
        if not chosen or local.shape[0] == 0:
            continue
        count = len(chosen)
        rows = np.concatenate([np.arange(offset, offset + 3) for _, offset in chosen])
        sub = local[:, rows][:, :, rows].reshape(-1, count, 3, count, 3).transpose(0, 1, 3, 2, 4)
        particle = ids[:, np.array([s for s, _ in chosen])]
        particle = jnp.where(particle < 0, particles, particle)
        b, at = padded[particle], node[particle]
        pair = table[at[:, :, None], at[:, None, :]]
        values = values + jax.ops.segment_sum(_sandwich(b[:, :, None], sub, b[:, None]).reshape(
            -1, MODES, MODES), pair.reshape(-1), num_segments=level.pairs + 1)
    matrices = [values[:level.pairs]]
    for depth in range(1, len(levels)):
        finer, q = levels[depth - 1], space.basis[depth]
        product = _sandwich(q[finer.rows], matrices[-1], q[finer.cols])
        matrices.append(jax.ops.segment_sum(product, jnp.asarray(levels[depth].pair_of),
                                            num_segments=levels[depth].pairs))
    return matrices


def preconditioner(jacobian, space):
    """v ↦ one V-cycle's approximation of H⁻¹ v over `space`'s levels."""
    levels, basis = space.structure.levels, space.basis
    matrices = galerkin(jacobian, space)
    eye = jnp.eye(MODES, dtype=matrices[0].dtype)
    # the inverses of each level's diagonal blocks (dropped modes: identity)
    smoothers = [jax.vmap(linalg.inverse)(a[:level.count] + (1.0 - kept)[:, :, None] * eye[None])
                 for a, level, kept in zip(matrices[:-1], levels[:-1], space.kept[:-1])]
    last, kept = levels[-1], space.kept[-1]
    dense = jnp.zeros((last.count, last.count, MODES, MODES), matrices[-1].dtype)
    dense = dense.at[last.rows, last.cols].add(matrices[-1])
    dense = dense.transpose(0, 2, 1, 3).reshape(MODES * last.count, MODES * last.count)
    factor = jax.scipy.linalg.lu_factor(dense + jnp.diag(1.0 - kept.reshape(-1)))
    fine_inverse = jacobian.block_diagonal().inverse().apply
    bodies = MODES * jacobian.diagonal.blocks[0].shape[0]

    def cycle(depth, r):
        """The correction at level `depth` (0: the fine level, flat) for its residual r."""
        if depth == len(levels):
            return jax.scipy.linalg.lu_solve(factor, r.reshape(-1)).reshape(-1, MODES)
        q, node = basis[depth], jnp.asarray(levels[depth].aggregate)
        if depth == 0:
            matvec, inverse = jacobian.matvec, fine_inverse
        else:
            level, a, inv = levels[depth - 1], matrices[depth - 1], smoothers[depth - 1]
            matvec = lambda x: jax.ops.segment_sum(  # noqa: E731 (A x over the pair blocks)
                jnp.einsum("qij,qj->qi", a, x[level.cols]), level.rows, num_segments=level.count)
            inverse = lambda v: jnp.einsum("nij,nj->ni", inv, v)  # noqa: E731
        x = SMOOTHING * inverse(r)
        residual = r - matvec(x)
        if depth == 0:
            residual = residual[bodies:].reshape(-1, 3)
        # restricted to level depth + 1 (node `count`: in no aggregate), corrected, prolonged
        coarse = jax.ops.segment_sum(jnp.einsum("nim,ni->nm", q, residual), node,
                                     num_segments=levels[depth].count)
        y = jnp.take(cycle(depth + 1, coarse), node, axis=0, mode="fill", fill_value=0.0)
        correction = jnp.einsum("nim,nm->ni", q, y)
        if depth == 0:
            correction = jnp.concatenate([jnp.zeros((bodies,), y.dtype), correction.reshape(-1)])
        x = x + correction
        return x + SMOOTHING * inverse(r - matvec(x))

    return lambda r: cycle(0, r)
