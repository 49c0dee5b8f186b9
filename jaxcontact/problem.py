"""The step's problem as the solvers see it: matrices in block form, constraint rows, functions.

Terms (`jaxcontact.terms`) build these; solvers (`jaxcontact.solvers`) consume them; neither
imports the other, and `step.py` hands one to the other. All are pytrees, so they pass through
`vmap`, `scan` and the implicit-gradient rules.

- `BlockDiagonal`: one dense block per block of degrees of freedom, grouped by block size
  (rigid bodies 6 x 6, particles 3 x 3): the mass, block-Jacobi preconditioners.
- `Jacobian`: a block-diagonal part plus, per term, one dense local matrix per element
  scattered by the element's DOF indices, H = D + Σ_e P_eᵀ A_e P_e. Products, transposed
  products, its block diagonal and (for small systems) its dense form come from that.
- `RowBlock`: one group of constraint rows of a term (errors, local Jacobians, stiffnesses,
  curvatures, a kind), what Dual projects and Descent's preconditioner sums.
- `RowModel`: Φ(·; ū) near u with every row's error linearized and its law kept whole,
  what Newton's lag phase minimizes (design note 24).
- `Problem`: the global functions of one step's problem.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact import linalg
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
        return jnp.concatenate([jnp.einsum("nij,nj->ni", b, p).reshape(-1) if b.shape[0]
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

    def magnitude(self) -> "BlockDiagonal":
        """|D| entry by entry."""
        return BlockDiagonal(tuple(jnp.abs(b) for b in self.blocks))

    def transpose(self) -> "BlockDiagonal":
        return BlockDiagonal(tuple(jnp.swapaxes(b, 1, 2) for b in self.blocks))

    def matmul(self, other: "BlockDiagonal") -> "BlockDiagonal":
        return BlockDiagonal(tuple(a @ b for a, b in zip(self.blocks, other.blocks)))

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


def _scatter_rows(values, index, n):
    """Σ of per-element rows `values` (E, d) into (n,) by `index` (E, d); slot n dropped."""
    flat = jax.ops.segment_sum(values.reshape(-1), index.reshape(-1), num_segments=n + 1)
    return flat[:n]


def _gather(v, index):
    return jnp.concatenate([v, jnp.zeros((1,), v.dtype)])[index]


@struct.dataclass
class Jacobian:
    """H = D + Σ_terms Σ_e P_eᵀ A_e P_e: block-diagonal D plus local matrices.

    Attributes:
      diagonal: `BlockDiagonal` D (the mass).
      local:    per term (E, d, d) local matrices A_e.
      index:    per term (E, d) DOF indices of the local rows/columns (n = dropped).
      blocks:   per term (E, k) group-relative block index of each slot (-1 = world).
      slots:    static, per term: ((group, offset, size), ...) of the element's k slots.
      size:     static n.
      coarse:   the meshes' `aggregation.CoarseSpace` for multilevel preconditioning, or None.
    """

    diagonal: BlockDiagonal
    local: tuple
    index: tuple
    blocks: tuple
    slots: tuple = struct.field(pytree_node=False)
    size: int = struct.field(pytree_node=False)
    coarse: Any = None

    def matvec(self, v):
        out = self.diagonal.apply(v)
        for a, idx in zip(self.local, self.index):
            out = out + _scatter_rows(jnp.einsum("eij,ej->ei", a, _gather(v, idx)), idx,
                                      self.size)
        return out

    def rmatvec(self, v):
        out = self.diagonal.transpose().apply(v)
        for a, idx in zip(self.local, self.index):
            out = out + _scatter_rows(jnp.einsum("eji,ej->ei", a, _gather(v, idx)), idx,
                                      self.size)
        return out

    def dense(self):
        n = self.size
        out = jnp.zeros((n + 1, n + 1), self.diagonal.blocks[0].dtype)
        for a, idx in zip(self.local, self.index):
            out = out.at[idx[:, :, None], idx[:, None, :]].add(a)
        return out[:n, :n] + self.diagonal.dense()

    def restricted(self, terms) -> "Jacobian":
        """D plus only the local matrices of the terms at the static positions `terms`."""
        def pick(per_term):
            return tuple(per_term[i] for i in terms)
        return self.replace(local=pick(self.local), index=pick(self.index),
                            blocks=pick(self.blocks), slots=pick(self.slots))

    def transpose(self) -> "Jacobian":
        """Hᵀ in the same form."""
        return self.replace(diagonal=self.diagonal.transpose(),
                            local=tuple(jnp.swapaxes(a, 1, 2) for a in self.local))

    def magnitude(self) -> "Jacobian":
        """|H|: the same structure with every entry replaced by its absolute value."""
        return self.replace(diagonal=self.diagonal.magnitude(),
                            local=tuple(jnp.abs(a) for a in self.local))

    def block_diagonal(self) -> BlockDiagonal:
        """D plus every element's diagonal sub-blocks, per block of DOFs."""
        groups = [b for b in self.diagonal.blocks]
        for a, ids, slots in zip(self.local, self.blocks, self.slots):
            for s, (group, offset, size) in enumerate(slots):
                sub = a[:, offset:offset + size, offset:offset + size]
                count = groups[group].shape[0]
                target = jnp.where(ids[:, s] < 0, count, ids[:, s])
                add = jax.ops.segment_sum(sub, target, num_segments=count + 1)[:count]
                groups[group] = groups[group] + add
        return BlockDiagonal(tuple(groups))


@struct.dataclass
class RowBlock:
    """One group of constraint rows of a term's E elements (c rows each; pairs: c pairs).

    Row j of element e has an error e_j (a gap, stretch or velocity), its Jacobian with
    respect to the element's local velocities G_j = ∂e_j/∂x (lag frozen), a stiffness s_j such
    that λ_j = -s_j e_j on the quadratic part of its law (thesis Eq. 117), a Gauss-Newton
    curvature c_j >= 0, and a kind: "bilateral" (λ free), "unilateral" (λ >= 0), "disc"
    (pairs: |λ| <= cone λ_partner), "" (no compliance form).

    Attributes:
      error:     (E, c) or (E, c, 2).
      jac:       (E, c, d) or (E, c, 2, d).
      stiffness, curvature, cone: (E, c).
      index:     (E, d) DOF indices; blocks (E, k) block ids; slots static, as `Jacobian`.
      kind, partner (index of the partner block in the flat tuple), pair, term: static.
    """

    error: Array
    jac: Array
    stiffness: Array
    curvature: Array
    cone: Array
    index: Array
    blocks: Array
    slots: tuple = struct.field(pytree_node=False)
    kind: str = struct.field(pytree_node=False, default="")
    partner: int = struct.field(pytree_node=False, default=-1)
    pair: bool = struct.field(pytree_node=False, default=False)
    term: str = struct.field(pytree_node=False, default="")

    def flat_jac(self):
        """(E, r, d) with the pair components as separate rows."""
        return self.jac.reshape(self.jac.shape[0], -1, self.jac.shape[-1])

    def flat(self, values):
        """Per-row values (E, c) repeated for pair components: (E, r)."""
        return jnp.repeat(values, 2, axis=1) if self.pair else values

    def transpose_apply(self, lam, n):
        """Σ_j G_jᵀ λ_j scattered to the flat (n,) vector; lam like `error`."""
        local = jnp.einsum("erd,er->ed", self.flat_jac(), lam.reshape(lam.shape[0], -1))
        return _scatter_rows(local, self.index, n)

    def dense_jac(self, n):
        """The rows' Jacobians scattered into one dense (R, n) matrix G, R = E r, the
        counterpart of `Jacobian.dense` (for tests and small problems).

        Row k of element e holds ∂e_k/∂u: its local Jacobian `flat_jac()[e, k]` added at the
        element's DOF indices `index[e]`; world slots (index n) are dropped.

        Args:
          n: the number of degrees of freedom (static).

        Returns:
          (E r, n) array, rows ordered like `flat(...)` flattened (pair components apart).
        """
        return _dense_rows(self.jac, self.index, n)


def gauss_newton_locals(jac, curvature):
    """Σ_j c_j G_jᵀ G_j of each element (E, d, d), from its rows' local Jacobians G
    (E, c, [2,] d) and Gauss-Newton curvatures c (E, c) (both components of a pair share
    their row's) or (E, c, 2) (thesis Eq. 116, 136)."""
    flat = jac.reshape(jac.shape[0], -1, jac.shape[-1])
    c = curvature.reshape(curvature.shape[0], -1)
    weight = jnp.repeat(c, flat.shape[1] // c.shape[1], axis=1)
    return jnp.einsum("eri,er,erj->eij", flat, weight, flat)


def _dense_rows(jac, index, n):
    """Local row Jacobians (E, c, [2,] d) at DOF indices (E, d) scattered into one dense
    (E r, n) matrix, pair components as separate rows; world slots (index n) dropped."""
    flat = jac.reshape(jac.shape[0], -1, jac.shape[-1])
    e, r, d = flat.shape
    columns = jnp.broadcast_to(index[:, None, :], (e, r, d))
    rows = jnp.broadcast_to(jnp.arange(e * r).reshape(e, r, 1), (e, r, d))
    out = jnp.zeros((e * r, n + 1), flat.dtype).at[rows, columns].add(flat)
    return out[:, :n]


@struct.dataclass
class RowModel:
    """Φ(u + δ; ū) - Φ(u; ū) with every row error linearized at u and its law kept whole:

        m(δ) = bᵀδ + ½ δᵀAδ + Σ_rows [ψ(e₀ + G δ) - ψ(e₀)]

    b, A: the gradient and the (lag-held) Hessian at u of everything that is not a row law:
    the inertia M, the terms linear in u, energy terms. e₀, G: each row group's errors at u and
    their Jacobians with the lag ū held. m agrees with Φ(·; ū) to first order at δ = 0, and,
    since the row laws are convex in the errors (unilateral, bilateral, the friction disc,
    the smoothed normal laws), it is convex wherever A is. A contact that is not touching at
    u but would be after δ is in m through its linearized gap, where the Hessian of Φ at u
    has none of its curvature (design notes 16d, 24). For a held lag the friction and damping
    rows are linear in u: only the gaps are approximated.

    Attributes:
      gradient: (n,) b.
      base:     `Jacobian` A (the mass, plus energy terms' local Hessians).
      groups:   tuple of `terms.RowGroup`, leading axis E (errors e₀).
      jacs:     per group, local G (E, c, d) or (E, c, 2, d); after `dense()`, (R, n).
      index:    per group (E, d) DOF indices (n = dropped); None after `dense()`.
      base_dense: A as an (n, n) matrix after `dense()`, else None.
      terms:    static, per group: the position in `base.local` of its term's elements.
    """

    gradient: Array
    base: "Jacobian"
    groups: tuple
    jacs: tuple
    index: tuple | None
    base_dense: Array | None = None
    terms: tuple = struct.field(pytree_node=False, default=())

    def dense(self) -> "RowModel":
        """The same model with A and every G assembled dense (for small systems: each
        evaluation is then a matrix product, not a gather and scatter)."""
        if self.index is None:
            return self
        n = self.gradient.shape[0]
        jacs = tuple(_dense_rows(jac, idx, n) for jac, idx in zip(self.jacs, self.index))
        return self.replace(jacs=jacs, index=None, base_dense=self.base.dense())

    def _at(self, delta):
        out = []
        for i, (g, jac) in enumerate(zip(self.groups, self.jacs)):
            if self.index is None:
                step = (jac @ delta).reshape(g.error.shape)
            else:
                step = jnp.einsum("e...d,ed->e...", jac, _gather(delta, self.index[i]))
            out.append(g.replace(error=g.error + step))
        return out

    def _base(self, delta):
        if self.base_dense is not None:
            return self.base_dense @ delta
        # A's local matrices of row terms are zeros (their curvature is the rows'): skipped,
        # they are as large as the broad phase's slots (design note 48)
        energies = [i for i in range(len(self.base.local)) if i not in self.terms]
        return self.base.restricted(energies).matvec(delta)

    def change(self, delta):
        """(m(δ), the magnitude its rounding is relative to)."""
        linear = jnp.dot(self.gradient, delta)
        quadratic = 0.5 * jnp.dot(delta, self._base(delta))
        value, size = linear + quadratic, jnp.abs(linear) + jnp.abs(quadratic)
        for g0, g in zip(self.groups, self._at(delta)):
            now, before = g.energy(), g0.energy()
            value = value + now - before
            size = size + jnp.abs(now) + jnp.abs(before)
        return value, size

    def gradient_at(self, delta):
        """∇m(δ)."""
        return jax.grad(lambda d: self.change(d)[0])(delta)

    def _curvatures(self, delta):
        """Per group, the rows' Gauss-Newton curvatures c at e₀ + Gδ (`hessian`)."""
        return [jnp.maximum(jax.vmap(lambda q: q.curvature())(g), 0.0) for g in self._at(delta)]

    def hessian(self, delta):
        """A + Σ Gᵀ diag(c) G as an (n, n) matrix (after `dense()`), with the rows'
        Gauss-Newton curvatures c at e₀ + Gδ: for friction isotropic, ψ'/|e| along the slip
        too (thesis Eq. 136), so that a step cannot overshoot the stick-slip kink;
        non-convex laws clipped at zero."""
        out = self.base_dense
        for c, jac in zip(self._curvatures(delta), self.jacs):
            weight = jnp.repeat(c.reshape(-1), jac.shape[0] // c.size)
            out = out + jac.T @ (weight[:, None] * jac)
        return out

    def curvature(self, delta) -> "Jacobian":
        """The matrix of `hessian` in block-sparse form (before `dense()`: large systems),
        each group's Gᵀ diag(c) G added to its term's local matrices of A."""
        local = list(self.base.local)
        for c, jac, term in zip(self._curvatures(delta), self.jacs, self.terms):
            local[term] = local[term] + gauss_newton_locals(jac, c)
        return self.base.replace(local=tuple(local))


class Problem(NamedTuple):
    """The functions of one step's problem (global, so the implicit-gradient rules see every
    parameter; `args` is their last argument).

    Attributes:
      gradient:  g(u, args) -> (n,): ∂Φ/∂u (u; ū = u), zero at the solution.
      residual:  (u, args) -> (n,): M⁻¹ g, in units of velocity (what `tol` measures).
      merit:     Φ(u, u_lag, args) -> (): potential whose u-gradient at u_lag = u is g.
      merit_change: (u, u_lag, trial (L, n), args) -> ((L,), (L,)): Φ(v; ū) - Φ(u; ū) at
                 each trial point v, formed without cancelling Φ's large terms, and the
                 magnitude its rounding is relative to.
      linearize: (u, args, mode, lag, irls) -> (g, `Jacobian`): mode "exact" (the exact
                 Jacobian of g), "lagged" (symmetric Hessian of Φ(·; ū) at u, lag ū), or a
                 traced 0/1 weight between the two; irls (default 0) the weight of friction's
                 reweighted curvature.
      gauss_newton: (u, args) -> `Jacobian`: symmetric positive semi-definite model.
      rows:      (u, args) -> tuple of `RowBlock` (row terms only).
      row_model: (u, lag, args) -> `RowModel` of Φ(·; ū = lag) at u.
      mass:      (args) -> `BlockDiagonal`.
      start:     (args) -> (n,): ũ including the linear terms (gravity).
      gradient_noise: (u, args, lag=None) -> (∇₁Φ(u; ū), (n,) rounding noise of M⁻¹ of it),
                 ū = lag (default u: g(u) and the rounding noise of the residual).
      resolution: (args) -> (n,): the velocity one rounding unit of the configuration
                 amounts to over the step (eps |q| / Δt per DOF).
      configuration_floor: (u, args) -> (n,): Σ_e |∂g_e/∂c| resolution_e, how far g(u)
                 moves when only the end-of-step configuration c is rounded.
      rotation:  (du, args) -> (): the largest rotation (rad) of any block that a velocity
                 change du makes over the step.
      live_prefix: (args, parts) -> (args', fits) or (None, None): args with the elements
                 of every large broad-phase term cut to the first 1/parts of its slots, and
                 whether that prefix holds every live one (then args' poses the same
                 problem; None where no term is large enough to cut).
    """

    gradient: Callable
    residual: Callable
    merit: Callable
    merit_change: Callable
    linearize: Callable
    gauss_newton: Callable
    rows: Callable
    row_model: Callable
    mass: Callable
    start: Callable
    gradient_noise: Callable
    resolution: Callable
    configuration_floor: Callable
    rotation: Callable
    live_prefix: Callable
