"""Dual ascent on the compliant constraints: Jacobi XPBD (thesis Algorithm 3, Eq. 117-125).

Every row j of the step (`jaxcontact.problem.RowBlock`) is a compliant constraint
e_j + λ_j/s_j = 0 with multiplier λ_j (thesis Eq. 117, 120). From u = ũ and λ = 0 each
iteration takes, for all rows at once (Jacobi),

    Δλ_j = -α (s_j e_j(u) + λ_j) / (s_j W_j + 1),      W_j = G_j M̃⁻¹ G_jᵀ   (Eq. 122-123)
    λ    <- Π(λ + Δλ)                       by the row's declared kind: "unilateral" λ >= 0,
                                            "disc" |λ_pair| <= cone λ_partner, "bilateral" free
    u    <- u + M⁻¹ Σ_j G_jᵀ (λ_new - λ)_j   ("fast projection", the thesis's choice)
       or  u = ũ + M⁻¹ Σ_j G_j(u)ᵀ λ_j        (`update="exact"`: Eq. 124 from the start of
                                               the step, whose fixed point is exactly the
                                               primal solution)

M̃ is the split mass (Tonge et al., thesis §5.6): a block shared by c active rows counts with
mass M/c, which keeps the Jacobi sweep stable on stacks and piles (`split_counts`). The
incremental update accumulates each iteration's Jacobian, so where constraint directions
rotate during the solve its fixed point differs slightly from the primal one; the reported
residual (max |M⁻¹ ∂Φ/∂u|) shows by how much. It converges slowly for large mass ratios
(thesis §5.3, Fig. 26 and 30) and is insensitive to stiffness ratios (Fig. 27). Only terms
in compliance form can be projected (every row kind declared): `check` says which are not.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact.math import safe_div, safe_norm
from jaxcontact.problem import BlockDiagonal
from jaxcontact.solvers import base

UPDATES = ("incremental", "exact")


def project(rows, lam):
    """Π of Eq. 123, block by block by declared kind: unilateral multipliers >= 0, each
    friction pair onto its disc of radius cone x the partner's (projected) multiplier."""
    out = list(lam)
    for i, rb in enumerate(rows):
        if rb.kind == "unilateral":
            out[i] = jnp.maximum(lam[i], 0.0)
    for i, rb in enumerate(rows):
        if rb.kind == "disc":
            radius = rb.cone * out[rb.partner]
            norm = safe_norm(lam[i])
            scale = jnp.where(norm > radius, safe_div(radius, norm), 1.0)
            out[i] = lam[i] * scale[..., None]
    return tuple(out)


def active(rows, lam):
    """Per block of rows, which rows act (E, c): one-sided rows in violation or with a
    multiplier, rows with stiffness, friction pairs whose partner acts (counted twice)."""
    out = []
    for rb, l in zip(rows, lam):
        if rb.kind == "unilateral":
            out.append((rb.error < 0.0) | (l > 0.0))
        elif rb.kind == "disc":
            out.append(None)
        else:
            out.append(rb.stiffness > 0.0)
    for i, rb in enumerate(rows):
        if rb.kind == "disc":
            out[i] = 2 * (out[rb.partner] & (rb.cone > 0.0))
    return out


def split_counts(rows, lam, mass: BlockDiagonal):
    """Mass-splitting factor per block, per group: the number of active rows on it (>= 1).

    Counting rows, not contacts, is what makes the Jacobi sweep safe: with c_b rows on block
    b, (Σ_j x_j g_j)ᵀ M⁻¹ (Σ_j x_j g_j) <= c_b Σ_j x_j² g_jᵀ M⁻¹ g_j (Cauchy-Schwarz), so the
    split diagonal dominates the dual Hessian and α <= 1 cannot overshoot. (Counting a
    contact once lets its parallel normal and damping rows overshoot together: a 2-cycle.)
    """
    counts = [jnp.zeros((b.shape[0],), b.dtype) for b in mass.blocks]
    for rb, act in zip(rows, active(rows, lam)):
        per_element = jnp.sum(act.astype(counts[0].dtype), axis=1)
        for s, (group, _, _) in enumerate(rb.slots):
            count = counts[group].shape[0]
            target = jnp.where(rb.blocks[:, s] < 0, count, rb.blocks[:, s])
            counts[group] += jax.ops.segment_sum(per_element, target, count + 1)[:count]
    return [jnp.maximum(c, 1.0) for c in counts]


def effective_mass(rb, inverse_blocks):
    """W_j = Σ_slots G_j,slot M̃⁻¹_slot G_j,slotᵀ per row (E, r) of one block of rows."""
    jac = rb.flat_jac()
    total = jnp.zeros(jac.shape[:2], jac.dtype)
    for s, (group, offset, size) in enumerate(rb.slots):
        inv = inverse_blocks[group]
        padded = jnp.concatenate([inv, jnp.zeros((1,) + inv.shape[1:], inv.dtype)])
        ids = jnp.where(rb.blocks[:, s] < 0, inv.shape[0], rb.blocks[:, s])
        g = jac[:, :, offset:offset + size]
        total = total + jnp.einsum("erm,emn,ern->er", g, padded[ids], g)
    return total


@dataclasses.dataclass(frozen=True)
class Dual(base.Solver):
    """Dual ascent (XPBD) solver (thesis Algorithm 3).

    Attributes:
      iterations: static number of Jacobi sweeps.
      alpha: step length α in (0, 1] (with mass splitting, 1 is stable).
      update: "incremental" (default: the thesis's fast projection, XPBD's update; stays
        finite where "exact" diverges, e.g. a 1e4:1 pendulum) or "exact" (its fixed point is
        the primal solution, so it can converge to tol; see the module docstring).
      mass_splitting: divide each block's mass among its active constraints (Jacobi safety).
      tol, early_exit, ad, adjoint: see `solvers.base.Solver`.
    """

    iterations: int = 50
    alpha: float = 1.0
    update: str = "incremental"
    mass_splitting: bool = True

    def __post_init__(self):
        super().__post_init__()
        base.check_positive(self, "alpha", high=1.0)
        base.check_choice(self, "update", UPDATES)
        base.check_bool(self, "mass_splitting")

    def check(self, model):
        """ValueError naming every term without a compliance form (its rows' kinds)."""
        reasons = [r for r in (t.without_rows() for t in model.terms) if r]
        if reasons:
            raise ValueError("solver Dual needs every term in compliance form (constraint "
                             "rows of declared kinds): " + "; ".join(reasons))

    def start(self, problem, points, grads, noises, args, tol):
        u = points[0]
        rows = jax.eval_shape(problem.rows, u, args)
        lam = tuple(jnp.zeros(rb.error.shape, u.dtype) for rb in rows)
        return (u, lam), grads[0], noises[0]

    def iteration(self, problem, carry, args, tol):
        u, lam = carry
        mass = problem.mass(args)
        n = u.shape[0]
        g, noise = problem.gradient_noise(u, args)
        r = mass.solve(g)
        rows = problem.rows(u, args)
        if self.mass_splitting:
            counts = split_counts(rows, lam, mass)
            split = mass.divided(counts)
        else:
            split = mass
        inverse = split.inverse().blocks
        new = []
        for rb, l in zip(rows, lam):
            w = effective_mass(rb, inverse)
            if rb.pair:   # one effective mass for both rows of a pair (the larger): the
                # projection onto the disc commutes with a step only if the step is scaled the
                # same in both directions, else the sweep stalls at a wrong fixed point
                w = jnp.max(w.reshape(w.shape[0], -1, 2), axis=-1)[..., None]
                s = rb.stiffness[..., None]
            else:
                s = rb.stiffness
            new.append(l - self.alpha * (s * rb.error + l) / (s * w + 1.0))
        new = project(rows, tuple(new))
        if self.update == "incremental":
            delta = sum(rb.transpose_apply(a - b, n) for rb, a, b in zip(rows, new, lam))
            u_new = u + mass.solve(delta)
        else:
            impulse = sum(rb.transpose_apply(a, n) for rb, a in zip(rows, new))
            u_new = problem.start(args) + mass.solve(impulse)
        return (u_new, new), r, base.finite(u_new), noise, 0.0
