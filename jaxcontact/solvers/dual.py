"""Dual ascent on the compliant constraints: Jacobi XPBD (thesis Algorithm 3, Eq. 117-125).

Every row j (`problem.RowBlock`) is a compliant constraint e_j + λ_j/s_j = 0 (Eq. 117, 120);
from u = ũ, λ = 0 each iteration takes, for all rows at once (Jacobi; M̃ the split mass of
Tonge et al., thesis §5.6: a block shared by c active rows counts with mass M/c),

    Δλ_j = -α (s_j e_j(u) + λ_j) / (s_j W_j + 1),      W_j = G_j M̃⁻¹ G_jᵀ   (Eq. 122-123)
    λ    <- Π(λ + Δλ)     by the row's kind: "unilateral" λ >= 0, "bilateral" free, "contact"
                          λ_n >= 0 and |λ_t| <= b̄, "cone" |λ_t| <= μ λ_n in the metric W + 1/s
    u    <- u + M⁻¹ Σ_j G_jᵀ (λ_new - λ)_j   (fast projection), or with `update="exact"`
            u = ũ + M⁻¹ Σ_j G_j(u)ᵀ λ_j (Eq. 124, whose fixed point is the primal solution)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcontact import validate as check
from jaxcontact.math import safe_div, safe_norm
from jaxcontact.problem import BlockDiagonal
from jaxcontact.solvers import base

UPDATES = ("incremental", "exact")


class DualCarry(NamedTuple):
    """The iterate, ∇Φ there and the rows' multipliers (one array per `RowBlock`)."""
    u: jax.Array
    g: jax.Array
    lam: tuple


def project_cone(y, mu, ratio):
    """Project multipliers y (..., 3) = (normal, tangential pair) onto the cone |y_t| <= μ y_n
    in the metric diag(D_n, D_t, D_t), ratio = D_t / D_n (Castro et al. 2022, Sec. V)."""
    n, t = y[..., 0], y[..., 1:]
    r = safe_norm(t)
    inside = r <= mu * n
    polar = mu * ratio * r <= -n
    normal = (n + mu * ratio * r) / (1.0 + mu * mu * ratio)
    tangent = (mu * normal)[..., None] * safe_div(t, r[..., None])
    surface = jnp.concatenate([normal[..., None], tangent], axis=-1)
    return jnp.where(inside[..., None], y, jnp.where(polar[..., None], 0.0, surface))


def project_contact(y, bound):
    """Project multipliers y (..., 3) onto λ_n >= 0, |λ_t| <= bound (a fixed disc)."""
    n, t = y[..., :1], y[..., 1:]
    r = safe_norm(t)[..., None]
    scale = jnp.where(r > bound[..., None], safe_div(bound[..., None], r), 1.0)
    return jnp.concatenate([jnp.maximum(n, 0.0), t * scale], axis=-1)


def split_counts(rows, lam, mass: BlockDiagonal):
    """Mass-splitting factor per block, per group: its number of active rows (>= 1). With c_b
    rows on block b, (Σ_j x_j g_j)ᵀ M⁻¹ (Σ_j x_j g_j) <= c_b Σ_j x_j² g_jᵀ M⁻¹ g_j, so the split
    diagonal dominates the dual Hessian and α <= 1 cannot overshoot."""
    counts = [jnp.zeros((b.shape[0],), b.dtype) for b in mass.blocks]
    for rb, l in zip(rows, lam):
        if rb.kind == "unilateral":
            act = (rb.error < 0.0) | (l > 0.0)
        elif rb.kind in ("contact", "cone"):
            act = jnp.repeat((rb.stiffness[..., 0] > 0.0)
                             & ((rb.error[..., 0] < 0.0) | (l[..., 0] > 0.0)), 3, axis=1)
        else:
            act = rb.stiffness > 0.0
        per_element = jnp.sum(act.astype(counts[0].dtype), axis=1)
        for s, (group, _, _) in enumerate(rb.slots):  # (the world, -1, is dropped)
            counts[group] += jax.ops.segment_sum(per_element, rb.blocks[:, s],
                                                 counts[group].shape[0])
    return [jnp.maximum(c, 1.0) for c in counts]


def _step(rb, lam, inverse, alpha):
    """One block of rows' multipliers after a Jacobi step (`inverse`: M̃⁻¹'s blocks), projected."""
    jac, w, s = rb.flat_jac(), 0.0, rb.stiffness
    for slot, (group, offset, size) in enumerate(rb.slots):  # W_j = Σ_slots G_j M̃⁻¹ G_jᵀ
        ids = jnp.where(rb.blocks[:, slot] < 0, inverse[group].shape[0], rb.blocks[:, slot])
        g, m = jac[:, :, offset:offset + size], jnp.take(inverse[group], ids, axis=0,
                                                         mode="fill", fill_value=0.0)
        w = w + jnp.einsum("erm,emn,ern->er", g, m, g)
    if rb.kind in ("contact", "cone"):
        # both tangential rows take the larger effective mass: the cone is round in the metric
        w = w.reshape(lam.shape)
        w = w.at[..., 1:].set(jnp.max(w[..., 1:], axis=-1, keepdims=True))
    new = lam - alpha * (s * rb.error + lam) / (s * w + 1.0)
    if rb.kind == "unilateral":
        return jnp.maximum(new, 0.0)
    if rb.kind == "contact":
        return project_contact(new, rb.limit)
    if rb.kind == "cone":  # in the metric D = W + 1/s: ratio D_t / D_n
        ratio = safe_div(s[..., 0] * (w[..., 1] * s[..., 1] + 1.0),
                         s[..., 1] * (w[..., 0] * s[..., 0] + 1.0))
        return project_cone(new, rb.limit, ratio)
    return new


@dataclasses.dataclass(frozen=True)
class Dual(base.Solver):
    """Dual ascent (XPBD) solver (thesis Algorithm 3): slow for large mass ratios, insensitive
    to stiffness ratios (thesis §5.3, Fig. 26, 27 and 30).

    Attributes:
      iterations: static number of Jacobi sweeps.
      alpha: step length α in (0, 1] (with mass splitting, 1 is stable).
      update: "incremental" (default: XPBD's; stays finite where "exact" diverges, e.g. a
        1e4:1 pendulum) or "exact" (converges to the primal solution; module docstring).
      mass_splitting: divide each block's mass among its active rows (Jacobi safety).
    """
    alpha: float = 1.0
    update: str = "incremental"
    mass_splitting: bool = True

    def __post_init__(self):
        super().__post_init__()
        check.number("alpha", self.alpha, positive=True, high=1.0)
        check.choice("update", self.update, UPDATES)
        check.boolean("mass_splitting", self.mass_splitting)

    def check(self, model):
        """ValueError naming every term without a compliance form (declared row kinds)."""
        if reasons := [r for r in (t.without_rows() for t in model.terms) if r]:
            raise ValueError("solver Dual needs every term in compliance form (constraint "
                             "rows of declared kinds): " + "; ".join(reasons))

    def start(self, problem, u0, args):
        u, g = super().start(problem, u0, args)
        rows = jax.eval_shape(problem.rows, u, args)
        return DualCarry(u, g, tuple(jnp.zeros(rb.error.shape, u.dtype) for rb in rows))

    def iteration(self, problem, carry, args):
        u, _, lam = carry
        mass, rows = problem.mass(args), problem.rows(u, args)
        split = mass.divided(split_counts(rows, lam, mass)) if self.mass_splitting else mass
        inverse = split.inverse().blocks
        new = tuple(_step(rb, l, inverse, self.alpha) for rb, l in zip(rows, lam))
        exact = self.update == "exact"
        impulse = sum(rb.transpose_apply(a if exact else a - b, u.shape[0])
                      for rb, a, b in zip(rows, new, lam))
        u_new = (problem.start(args) if exact else u) + mass.solve(impulse)
        return DualCarry(u_new, problem.gradient(u_new, args), new), base.finite(u_new)
