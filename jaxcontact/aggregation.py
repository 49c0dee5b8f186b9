"""Coarse spaces of meshes for multilevel preconditioning: particles grouped into aggregates,
aggregates into larger ones, and each aggregate's rigid motions as its coarse unknowns.

Smoothed or not, aggregation multigrid (Vaněk, Mandel & Brezina 1996) needs two things from
the physics: which unknowns belong together (here, the mesh graph: particles that share a
tetrahedron or a triangle), and the motions that cost no energy (here, every aggregate's
translations and rotations, the near-kernel of elasticity and of cloth).

- `Hierarchy` (static, NumPy, built once per mesh and cached): the aggregates of each level
  and the block-sparse pattern of each coarse level's matrix. Level 1 groups particles by
  greedy aggregation of the mesh graph (a seed and its untouched neighbours; leftovers join a
  neighbouring aggregate); level l + 1 does the same on the graph of level l's aggregates,
  until the coarsest level has at most `COARSEST` unknowns or stops shrinking. Particles in
  no mesh are in no aggregate (their blocks are left to the smoother).
- `CoarseSpace` (a pytree, built each step from the positions): each level's prolongation
  blocks. A particle's is B_p = [I₃, −[x_p − c_a]×] (3 x 6: the velocity of p under the
  aggregate's translation and rotation about its centroid c_a); an aggregate's at level
  l + 1 maps the coarse rigid motion to its own. Each aggregate's six columns are made
  orthonormal (its Gram matrix's eigen-decomposition), and modes that do not exist
  (a single particle's rotations, a straight chain's twist) are dropped and flagged.

What a coarse space is used for (the Galerkin matrices, the V-cycle) is the solver's business:
`jaxcontact.solvers.multilevel`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact.types import Array

MODES = 6         # coarse unknowns per aggregate: translation and rotation
COARSEST = 384    # the coarsest level has at most this many unknowns (a dense LU), if it can
MIN_SHRINK = 0.7  # a level that keeps more than this fraction of nodes ends the hierarchy
MIN_PARTICLES = 1000  # "auto" preconditioning is multilevel from this many cloth particles
_DROP = 1e-10     # a mode whose Gram eigenvalue is below this times the largest is dropped


@dataclasses.dataclass(frozen=True, eq=False)
class Level:
    """One coarse level's static structure.

    Attributes:
      aggregate: (n_finer,) the node of this level each node of the finer level belongs to
        (`count` = none: a particle in no mesh).
      count: number of nodes (aggregates) of this level.
      rows, cols: (Q,) the node pairs of this level's block-sparse matrix; the first `count`
        are the diagonal (a, a), in node order.
      pair_of: level 1: (count + 1, count + 1) the pair index of each node pair (Q where the
        pattern has none, e.g. a contact between two distant aggregates: dropped from the
        coarse matrix); deeper levels: (Q_finer,) the pair of this level each finer pair
        adds to.
    """

    aggregate: np.ndarray
    count: int
    rows: np.ndarray
    cols: np.ndarray
    pair_of: np.ndarray

    @property
    def pairs(self) -> int:
        return len(self.rows)


def greedy_aggregates(neighbours) -> tuple[np.ndarray, int]:
    """(aggregate of each node, count): a seed whose neighbours are all unassigned takes them
    (in node order), then each leftover joins the aggregate of a neighbour; isolated nodes
    are their own aggregate."""
    n = len(neighbours)
    out = np.full(n, -1, np.int64)
    count = 0
    for i in range(n):
        if out[i] < 0 and all(out[j] < 0 for j in neighbours[i]):
            out[i] = count
            out[list(neighbours[i])] = count
            count += 1
    for i in np.flatnonzero(out < 0):
        assigned = [out[j] for j in neighbours[i] if out[j] >= 0]
        if assigned:
            out[i] = assigned[0]
    for i in np.flatnonzero(out < 0):
        out[i] = count
        count += 1
    return out, count


def _pattern(rows, cols, count):
    """Unique node pairs, the diagonal first: (rows, cols, index of each input pair)."""
    diag = np.arange(count)
    key = np.concatenate([diag * (count + 2), rows * (count + 1) + cols])
    unique, inverse = np.unique(key, return_inverse=True)
    # the diagonal keys first, in node order
    is_diag = (unique // (count + 1)) == (unique % (count + 1))
    order = np.concatenate([np.flatnonzero(is_diag), np.flatnonzero(~is_diag)])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    unique = unique[order]
    return unique // (count + 1), unique % (count + 1), rank[inverse[count:]]


@dataclasses.dataclass(frozen=True, eq=False)
class Hierarchy:
    """The static levels of a mesh's coarse spaces (level 1 first); `particles` = P, of
    which `mesh_particles` are in some mesh."""

    particles: int
    mesh_particles: int
    levels: tuple

    @property
    def unknowns(self) -> tuple:
        """Coarse unknowns per level."""
        return tuple(MODES * level.count for level in self.levels)


@functools.lru_cache(maxsize=32)
def hierarchy(particles: int, cells: tuple, coarsest: int = COARSEST) -> Hierarchy:
    """The aggregation hierarchy of P particles joined by `cells` (tuples of particle
    indices: tetrahedra, triangles), coarsened until a level has at most `coarsest`
    unknowns or stops shrinking."""
    in_mesh = np.zeros(particles, bool)
    edges = []
    for width in sorted({len(c) for c in cells}):
        table = np.asarray([c for c in cells if len(c) == width], np.int64)
        in_mesh[table.reshape(-1)] = True
        a, b = np.meshgrid(np.arange(width), np.arange(width), indexing="ij")
        off = a != b
        edges.append(np.stack([table[:, a[off]].reshape(-1), table[:, b[off]].reshape(-1)]))
    edges = np.unique(np.concatenate(edges, axis=1), axis=1)
    nodes = np.flatnonzero(in_mesh)
    local = np.full(particles, -1)
    local[nodes] = np.arange(len(nodes))
    rows, cols = local[edges[0]], local[edges[1]]
    # level 1 on the mesh graph, then on each level's graph of aggregates
    levels, finer_count, finer_rows, finer_cols = [], len(nodes), rows, cols
    while True:
        neighbours = [[] for _ in range(finer_count)]
        for i, j in zip(finer_rows, finer_cols):
            if i != j:
                neighbours[i].append(j)
        aggregate, count = greedy_aggregates(neighbours)
        if levels and count > MIN_SHRINK * finer_count:
            break
        c_rows, c_cols, pair_index = _pattern(aggregate[finer_rows], aggregate[finer_cols],
                                              count)
        if not levels:
            # particles -> aggregates; the pair table of level 1 (by aggregate pair)
            full = np.full(particles, count)
            full[nodes] = aggregate
            table = np.full((count + 1, count + 1), len(c_rows))
            table[c_rows, c_cols] = np.arange(len(c_rows))
            levels.append(Level(full, count, c_rows, c_cols, table))
        else:  # the finer level's pairs (as stored) -> this level's pairs
            levels.append(Level(aggregate, count, c_rows, c_cols, pair_index))
        if MODES * count <= coarsest:
            break
        finer_count, finer_rows, finer_cols = count, c_rows, c_cols
    return Hierarchy(particles, int(in_mesh.sum()), tuple(levels))


def of_model(model) -> Hierarchy | None:
    """The hierarchy of a model's solids and cloth (None without meshes)."""
    cells = tuple(model.solid.tets) + tuple(model.cloth.tris)
    return hierarchy(model.n_particle, cells) if cells else None


def pays(model) -> bool:
    """Whether "auto" preconditioning is multilevel for `model`: its cloth has at least
    `MIN_PARTICLES` particles. Measured (design note 31): on cloth, block-Jacobi BiCGSTAB
    needs about 150 iterations per direction, the V-cycle about 20; the multilevel step is
    as fast forward from 1,300 particles on, its gradient 1.8x faster at 2,600 and 1.2x at
    5,200 (slower below 1,000); on the solids
    of the scaling benchmark block-Jacobi needs about 17 iterations at every size, and the
    multilevel step is 2x slower."""
    return np.unique(np.asarray(model.cloth.tris, np.int64)).size >= MIN_PARTICLES


@struct.dataclass
class CoarseSpace:
    """Prolongation blocks of every level, from the positions at the start of a step.

    Attributes:
      basis: per level, (n_finer, s, 6): level 1 (P, 3, 6) per particle (zero for particles
        in no mesh), deeper levels (n_finer, 6, 6) per finer node.
      kept: per level, (count, 6) 1 for the modes of each aggregate that exist, 0 for
        dropped ones (their coarse rows are the identity).
      structure: the static `Hierarchy`.
    """

    basis: tuple
    kept: tuple
    structure: Hierarchy = struct.field(pytree_node=False)


def _cross_matrix(r):
    """[r]× for (..., 3) r: [r]× v = r × v."""
    zero = jnp.zeros_like(r[..., 0])
    return jnp.stack([jnp.stack([zero, -r[..., 2], r[..., 1]], -1),
                      jnp.stack([r[..., 2], zero, -r[..., 0]], -1),
                      jnp.stack([-r[..., 1], r[..., 0], zero], -1)], -2)


def _whiten(gram):
    """(W, W⁺, kept) per (6, 6) Gram matrix G: Wᵀ G W = diag(kept), W⁺ W = diag(kept)."""
    lam, vec = jnp.linalg.eigh(gram)
    drop = max(_DROP, 1e3 * float(jnp.finfo(gram.dtype).eps))   # float32: above its rounding
    kept = lam > drop * lam[..., -1:]
    root = jnp.sqrt(jnp.where(kept, lam, 1.0))
    w = vec * jnp.where(kept, 1.0 / root, 0.0)[..., None, :]
    w_plus = jnp.swapaxes(vec * jnp.where(kept, root, 0.0)[..., None, :], -1, -2)
    return w, w_plus, kept.astype(gram.dtype)


def _segment_mean(x, segment, count):
    total = jax.ops.segment_sum(x, segment, num_segments=count + 1)[:count]
    number = jax.ops.segment_sum(jnp.ones_like(x[:, :1]), segment, num_segments=count + 1)
    return total / jnp.maximum(number[:count], 1.0)


def coarse_space(structure: Hierarchy, positions: Array) -> CoarseSpace:
    """Each level's orthonormal rigid-motion prolongation blocks at `positions` (P, 3)."""
    x = jax.lax.stop_gradient(positions)
    eye = jnp.eye(3, dtype=x.dtype)
    basis, kept = [], []
    centers, w_plus = x, None
    for depth, level in enumerate(structure.levels):
        segment = jnp.asarray(level.aggregate)
        center = _segment_mean(centers, segment, level.count)
        offset = centers - jnp.concatenate([center, jnp.zeros((1, 3), x.dtype)])[segment]
        rotation = -_cross_matrix(offset)
        if depth == 0:        # a particle's velocity under its aggregate's rigid motion
            block = jnp.concatenate([jnp.broadcast_to(eye, rotation.shape), rotation], -1)
        else:                 # a finer aggregate's rigid motion under the coarser one's
            top = jnp.concatenate([jnp.broadcast_to(eye, rotation.shape), rotation], -1)
            bottom = jnp.concatenate([jnp.zeros_like(rotation),
                                      jnp.broadcast_to(eye, rotation.shape)], -1)
            block = w_plus @ jnp.concatenate([top, bottom], -2)
        in_mesh = (segment < level.count)[:, None, None]
        block = jnp.where(in_mesh, block, 0.0)
        gram = jax.ops.segment_sum(jnp.swapaxes(block, 1, 2) @ block, segment,
                                   num_segments=level.count + 1)[:level.count]
        w, w_plus, k = _whiten(gram)
        w_full = jnp.concatenate([w, jnp.zeros((1, MODES, MODES), x.dtype)])
        basis.append(block @ w_full[segment])
        kept.append(k)
        centers = center
    return CoarseSpace(tuple(basis), tuple(kept), structure)
