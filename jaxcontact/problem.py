"""The step's problem as the solvers see it: matrices in block form, constraint rows, functions.

Terms (`jaxcontact.terms`) build these; solvers (`jaxcontact.solvers`) consume them; neither
imports the other, and `step.py` hands one to the other. All are pytrees, so they pass through
`vmap`, `scan` and the implicit-gradient rules.

- `BlockDiagonal`: one dense block per block of degrees of freedom, grouped by block size
  (rigid bodies 6 x 6, particles 3 x 3): the mass, block-Jacobi preconditioners.
- `Hessian`: a block-diagonal part plus, per term, one dense local matrix per element
  scattered by the element's DOF indices, H = D + Σ_e P_eᵀ A_e P_e (symmetric). Products,
  its block diagonal and (for small systems) its dense form come from that.
- `Factored`: a term's local matrices kept as A_e = Σ_k J_kᵀ W_k J_k, where that is smaller
  than A_e (a contact between two bodies: 3 rows against 12 x 12).
- `RowBlock`: one group of constraint rows of a term (errors, local Jacobians, stiffnesses,
  a kind), what Dual projects.
- `Problem`: the global functions of one step's problem.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact import linalg
from jaxcontact.dofs import gather, scatter
from jaxcontact.types import Array


def _split(v, sizes):
    """Flat v -> per-group (count, size) pieces."""
    out, start = [], 0
    for count, size in sizes:
        # (an empty group, e.g. no particles, adds no operation to the program)
        out.append(v[start:start + count * size].reshape(count, size) if count
                   else jnp.zeros((0, size), v.dtype))
        start += count * size
    return out


@struct.dataclass
class BlockDiagonal:
    """A block-diagonal matrix: `blocks[g]` (count_g, s_g, s_g) for each group of blocks,
    in the order of the flat vector; `inverses`: the blocks' inverses where they are known in
    closed form (the mass: `terms.mass_blocks`), read by `solve` and `inverse`; None: those
    eliminate."""

    blocks: tuple
    inverses: Any = None

    @property
    def sizes(self):
        return tuple((b.shape[0], b.shape[1]) for b in self.blocks)

    @property
    def size(self) -> int:
        return sum(c * s for c, s in self.sizes)

    def apply(self, v):
        parts = _split(v, self.sizes)
        return jnp.concatenate([jnp.sum(b * p[:, None, :], axis=-1).reshape(-1) if b.shape[0]
                                else p.reshape(-1) for b, p in zip(self.blocks, parts)])

    def solve(self, v):
        """D⁻¹ v: a product with the known inverses, else block by block small dense
        elimination."""
        if self.inverses is not None:
            return BlockDiagonal(self.inverses).apply(v)
        parts = _split(v, self.sizes)
        return jnp.concatenate([jax.vmap(linalg.solve)(b, p).reshape(-1)
                                for b, p in zip(self.blocks, parts)])

    def divided(self, counts) -> "BlockDiagonal":
        """D with each block divided by its count (`counts[g]` (count_g,)), and its known
        inverses multiplied by it."""
        return BlockDiagonal(
            tuple(b / c[:, None, None] for b, c in zip(self.blocks, counts)),
            None if self.inverses is None else tuple(
                i * c[:, None, None] for i, c in zip(self.inverses, counts)))

    def inverse(self) -> "BlockDiagonal":
        if self.inverses is not None:
            return BlockDiagonal(self.inverses, self.blocks)
        return BlockDiagonal(tuple(jax.vmap(linalg.inverse)(b) for b in self.blocks))

    def diagonal(self):
        """The diagonal entries (n,), in the order of the flat vector."""
        return jnp.concatenate([jnp.diagonal(b, axis1=1, axis2=2).reshape(-1)
                                for b in self.blocks])

    def diagonal_only(self) -> "BlockDiagonal":
        """The diagonal of every block (a per-DOF Jacobi matrix)."""
        return BlockDiagonal(tuple(b * jnp.eye(b.shape[1], dtype=b.dtype)[None]
                                   for b in self.blocks))

    def dense(self):
        n = self.size
        out = jnp.zeros((n, n), self.blocks[0].dtype)
        start = 0
        for b in self.blocks:
            count, s = b.shape[0], b.shape[1]
            idx = start + jnp.arange(count * s).reshape(count, s)
            out = out.at[idx[:, :, None], idx[:, None, :]].set(b)
            start += count * s
        return out


@struct.dataclass
class Factored:
    """A term's local matrices A_e = Σ_k J_{e,k}ᵀ W_{e,k} J_{e,k} (a contact element: one 3 x 3
    W per contact, its rows' law differentiated in their velocities, and the rows' Jacobians J).
    A product then reads 3c(d + 3) numbers per element instead of d²: for two bodies' contact
    (c = 1, d = 12) 45 instead of 144 (`worth_factoring`).

    Attributes:
      jac:    (E, c, 3, d) the rows' Jacobians with respect to the element's DOFs.
      weight: (E, c, 3, 3) symmetric.
    """

    jac: Array
    weight: Array

    def apply(self, x):
        """A_e x_e for each element, x (E, d) -> (E, d)."""
        y = jnp.sum(self.jac * x[:, None, None, :], axis=-1)
        z = jnp.sum(self.weight * y[:, :, None, :], axis=-1)
        return jnp.sum(self.jac * z[..., None], axis=(1, 2))

    def matrices(self):
        """The (E, d, d) matrices A_e."""
        return self.block(0, self.jac.shape[-1])

    def block(self, start, size):
        """The (E, size, size) diagonal sub-blocks A_e[start:start+size, start:start+size]."""
        j = self.jac[..., start:start + size]
        return jnp.einsum("ecia,ecij,ecjb->eab", j, self.weight, j)


def worth_factoring(rows: int, d: int) -> bool:
    """Whether `Factored` A_e of `rows` rows (3 per contact) on d DOFs reads at most half the
    numbers of A_e: a product is memory-bound, and its flops (2 rows d + 3 rows) approach d²
    beyond that (two bodies' single contact: yes; a body on the ground, d = 6: no)."""
    return rows * (d + 3) <= d * d // 2


def matrices(local):
    """A term's (E, d, d) local matrices, whether stored whole or `Factored`."""
    return local.matrices() if isinstance(local, Factored) else local


def _apply(local, x):
    if isinstance(local, Factored):
        return local.apply(x)
    return jnp.sum(local * x[:, None, :], axis=-1)


@struct.dataclass
class Hessian:
    """H = D + Σ_terms Σ_e P_eᵀ A_e P_e: block-diagonal D plus symmetric local matrices.

    Attributes:
      diagonal: `BlockDiagonal` D (the mass).
      local:    per term (E, d, d) local matrices A_e, or their `Factored` form.
      index:    per term (E, d) DOF indices of the local rows/columns (n = dropped).
      blocks:   per term (E, k) group-relative block index of each slot (-1 = world).
      slots:    static, per term: ((group, offset, size), ...) of the element's k slots.
      size:     static n.
      coarse:   the meshes' `aggregation.CoarseSpace` for multilevel preconditioning, or None.
      convex:   static, every term is convex (`terms.convex`): H is positive definite.
      project:  static, per term: Newton projects its indefinite A_e (`projected`).
    """

    diagonal: BlockDiagonal
    local: tuple
    index: tuple
    blocks: tuple
    slots: tuple = struct.field(pytree_node=False)
    size: int = struct.field(pytree_node=False)
    coarse: Any = None
    convex: bool = struct.field(pytree_node=False, default=False)
    project: tuple = struct.field(pytree_node=False, default=())

    def matvec(self, v):
        out = self.diagonal.apply(v)
        for a, idx in zip(self.local, self.index):
            out = out + scatter(_apply(a, gather(v, idx)), idx, self.size)
        return out

    def matrices(self):
        """Per term, the (E, d, d) local matrices (`Factored` ones multiplied out)."""
        return tuple(matrices(a) for a in self.local)

    def projected(self, where_needed=None):
        """H with each A_e of the terms marked `project` that could make H indefinite projected
        to positive semi-definite (`linalg.project_psd`; Newton's directions, design note 60).
        An element could where A_e + diag(its share of M) is indefinite, its share being each
        DOF's mass divided among the term's elements on it: where none could, Σ is positive
        semi-definite already. LAPACK's eigh costs ~20 µs per 12 x 12 matrix on this CPU,
        50x a Cholesky factorization: it runs only where some element needs it, through
        `where_needed(needed, fn, fallback, operands)` (Newton passes `solvers.loop`'s, which
        keeps that in a vmapped batch; None: a `lax.cond`)."""
        if where_needed is None:
            def where_needed(needed, fn, fallback, operands):
                return jax.lax.cond(needed, fn, lambda _: fallback, operands)
        mass, local = self.diagonal.diagonal(), list(self.local)
        for k in (k for k, project in enumerate(self.project) if project):
            index = self.index[k]
            valence = scatter(jnp.ones(index.shape, mass.dtype), index, self.size)
            bad = linalg.indefinite(local[k], gather(mass / jnp.maximum(valence, 1.0), index))
            local[k] = where_needed(jnp.any(bad), lambda op: jnp.where(
                op[1][:, None, None], linalg.project_psd(op[0]), op[0]), local[k], (local[k], bad))
        return self.replace(local=tuple(local))

    def dense(self):
        """H as an (n, n) matrix, assembled by blocks: each element's (slot, slot) block goes
        to its two blocks' place in one scatter per pair of slots (scattering every entry
        alone took about as long as the rest of a Newton iteration of 8 boxes)."""
        sizes = self.diagonal.sizes
        dtype = self.diagonal.blocks[0].dtype
        # one (count_g + 1, count_h + 1, size_g, size_h) array per pair of groups; the extra
        # block index is the world's (dropped)
        parts = {(g, h): jnp.zeros((cg + 1, ch + 1, sg, sh), dtype)
                 for g, (cg, sg) in enumerate(sizes) for h, (ch, sh) in enumerate(sizes)}
        for g, (count, _) in enumerate(sizes):
            if count:
                i = jnp.arange(count)
                parts[g, g] = parts[g, g].at[i, i].add(self.diagonal.blocks[g])
        for a, ids, slots in zip(self.local, self.blocks, self.slots):
            a = matrices(a)
            for s, (g, start_s, size_s) in enumerate(slots):
                i = jnp.where(ids[:, s] < 0, sizes[g][0], ids[:, s])
                for t, (h, start_t, size_t) in enumerate(slots):
                    j = jnp.where(ids[:, t] < 0, sizes[h][0], ids[:, t])
                    block = a[:, start_s:start_s + size_s, start_t:start_t + size_t]
                    parts[g, h] = parts[g, h].at[i, j].add(block)
        rows = []
        for g, (cg, sg) in enumerate(sizes):
            if cg:
                rows.append(jnp.concatenate(
                    [parts[g, h][:cg, :ch].transpose(0, 2, 1, 3).reshape(cg * sg, ch * sh)
                     for h, (ch, sh) in enumerate(sizes) if ch], axis=1))
        return jnp.concatenate(rows, axis=0)

    def block_diagonal(self) -> BlockDiagonal:
        """D plus every element's diagonal sub-blocks, per block of DOFs."""
        groups = [b for b in self.diagonal.blocks]
        for a, ids, slots in zip(self.local, self.blocks, self.slots):
            for s, (group, offset, size) in enumerate(slots):
                sub = (a.block(offset, size) if isinstance(a, Factored)
                       else a[:, offset:offset + size, offset:offset + size])
                count = groups[group].shape[0]
                target = jnp.where(ids[:, s] < 0, count, ids[:, s])
                add = jax.ops.segment_sum(sub, target, num_segments=count + 1)[:count]
                groups[group] = groups[group] + add
        return BlockDiagonal(tuple(groups))


@struct.dataclass
class RowBlock:
    """One group of constraint rows of a term's E elements (c rows each; cones: c contacts of
    three rows each).

    Row j of element e has an error e_j, its Jacobian with respect to the element's local
    velocities G_j = ∂e_j/∂x, a stiffness s_j such that λ_j = -s_j e_j on the quadratic part
    of its law (thesis Eq. 117), and a kind: "bilateral" (λ free), "unilateral" (λ >= 0),
    or a contact's (normal, two tangential) rows, whose errors are velocities v - v̂ and
    stiffnesses 1/R (`models.contacts.ContactTerm.compliance`): "contact" (λ_n >= 0 and
    |λ_t| <= `limit`, friction's fixed bound) or "cone" (λ in the friction cone
    |λ_t| <= μ λ_n, μ = `limit`).

    Attributes:
      error:     (E, c) or (E, c, 3).
      jac:       (E, c, d) or (E, c, 3, d).
      stiffness: like error.
      limit:     (E, c) friction's bound ("contact") or μ ("cone"); zeros for other kinds.
      index:     (E, d) DOF indices; blocks (E, k) block ids; slots static, as `Hessian`.
      kind, term: static.
    """

    error: Array
    jac: Array
    stiffness: Array
    limit: Array
    index: Array
    blocks: Array
    slots: tuple = struct.field(pytree_node=False)
    kind: str = struct.field(pytree_node=False, default="")
    term: str = struct.field(pytree_node=False, default="")

    def flat_jac(self):
        """(E, r, d) with a cone's three rows as separate rows."""
        return self.jac.reshape(self.jac.shape[0], -1, self.jac.shape[-1])

    def transpose_apply(self, lam, n):
        """Σ_j G_jᵀ λ_j scattered to the flat (n,) vector; lam like `error`."""
        local = jnp.einsum("erd,er->ed", self.flat_jac(), lam.reshape(lam.shape[0], -1))
        return scatter(local, self.index, n)

    def dense_jac(self, n):
        """The rows' Jacobians scattered into one dense (R, n) matrix G, R = E r (for tests
        and small problems): row k of element e holds ∂e_k/∂u, its local Jacobian added at
        the element's DOF indices; world slots (index n) are dropped."""
        flat = self.flat_jac()
        e, r, d = flat.shape
        columns = jnp.broadcast_to(self.index[:, None, :], (e, r, d))
        rows = jnp.broadcast_to(jnp.arange(e * r).reshape(e, r, 1), (e, r, d))
        out = jnp.zeros((e * r, n + 1), flat.dtype).at[rows, columns].add(flat)
        return out[:, :n]


class Problem(NamedTuple):
    """The functions of one step's problem (global, so the implicit-gradient rules see every
    parameter; `args` is their last argument).

    Attributes:
      gradient: (u, args) -> (n,): ∇Φ, zero at the solution (Φ, the step's potential, one
                fixed convex function of u wherever the smooth terms are convex, is
                `terms.value`; no solver needs its values, only its slopes: `along`).
      hessian:  (u, args, form="exact") -> (∇Φ, `Hessian` ∇²Φ); form "newton": joints'
                and limits' Gauss-Newton part (Newton's directions), "reweighted": also
                friction's curvature reweighted (Descent's preconditioner).
      along:    (u, d, α, args) -> (φ'(α), φ''(α)) of φ(α) = Φ(u + α d).
      rows:     (u, args) -> tuple of `RowBlock` (Dual).
      mass:     (args) -> `BlockDiagonal` M.
      start:    (args) -> (n,): ũ, the free flight, gravity included.
      resolution: (args) -> (n,): the finest velocity each DOF resolves in the step's
                precision (a solver stopped by rounding is converged within a multiple).
    """

    gradient: Callable
    hessian: Callable
    along: Callable
    rows: Callable
    mass: Callable
    start: Callable
    resolution: Callable
