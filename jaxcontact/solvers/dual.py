"""Dual ascent on the compliant constraints: Jacobi XPBD (thesis Algorithm 3, Eq. 117-125).

Every row j of the step (`jaxcontact.problem.Rows`) is a quadratic penalty s_j/2 e_j(u)² and
so a compliant constraint e_j + λ_j/s_j = 0 with multiplier λ_j (thesis Eq. 117, 120). From
u = ũ and λ = 0 each iteration takes, for all rows at once (Jacobi),

    Δλ_j = -α (s_j e_j(u) + λ_j) / (s_j W_j + 1),      W_j = G_j M̃⁻¹ G_jᵀ   (Eq. 122-123)
    λ    <- Π(λ + Δλ)                       normal λ_n >= 0; friction |λ_t| <= μ Δt λ_n;
                                            one-sided joint rows (cables, limits) λ >= 0
    u    <- u + M⁻¹ Σ_j G_jᵀ (λ_new - λ)_j   ("fast projection", the thesis's choice)
       or  u = ũ + M⁻¹ Σ_j G_j(u)ᵀ λ_j        (`update="exact"`: Eq. 124 from the start of
                                               the step, whose fixed point is exactly the
                                               primal solution)

M̃ is the split mass (Tonge et al., thesis §5.6): a body shared by c active rows counts with
mass M/c, which keeps the Jacobi sweep stable on stacks and piles (`split_counts`). The
incremental update accumulates each iteration's Jacobian, so where constraint directions
rotate during the solve its fixed point differs slightly from the primal one; the reported
residual (max |M⁻¹ ∂Φ/∂u|) shows by how much. It converges slowly for large mass ratios
(thesis §5.3, Fig. 26 and 30) and is insensitive to stiffness ratios (Fig. 27).
Only quadratic rows have this form: the `linear` normal law and `huber` (or `linear`)
friction (checked by the scene builder).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcontact.math import safe_div, safe_norm
from jaxcontact.solvers import base, blocks, loop

UPDATES = ("incremental", "exact")


def project(rows, lam):
    """Π of Eq. 123: normal and one-sided joint multipliers >= 0 (cables and limits, the last
    `n_unilateral` rows), each contact's friction pair onto its disc."""
    k, r = rows.n_contact, lam.shape[0] - rows.n_unilateral
    normal = jnp.maximum(lam[:k], 0.0)
    tangent = jnp.stack([lam[2 * k:3 * k], lam[3 * k:4 * k]], axis=-1)
    radius = rows.cone * normal
    norm = safe_norm(tangent)
    scale = jnp.where(norm > radius, safe_div(radius, norm), 1.0)
    tangent = tangent * scale[:, None]
    return jnp.concatenate([normal, lam[k:2 * k], tangent[:, 0], tangent[:, 1], lam[4 * k:r],
                            jnp.maximum(lam[r:], 0.0)])


def isotropic_friction(rows, w):
    """One effective mass for both friction rows of a contact (the larger, conservative).

    The projection onto the friction disc commutes with a step only if the step is scaled the
    same in both tangent directions: with different scalings the fixed point of
    λ = Π(λ - C h) is not the solution (λ_t = Π(-s e_t)), and the iteration stalls on a
    wrong, slipping or sticking, answer.
    """
    k = rows.n_contact
    both = jnp.maximum(w[2 * k:3 * k], w[3 * k:4 * k])
    return jnp.concatenate([w[:2 * k], both, both, w[4 * k:]])


def split_counts(rows, lam, n):
    """Mass-splitting factor per body: the number of its active rows (>= 1).

    Counting rows, not contacts, is what makes the Jacobi sweep safe: with c_b rows on body
    b, (Σ_j x_j g_j)ᵀ M⁻¹ (Σ_j x_j g_j) <= c_b Σ_j x_j² g_jᵀ M⁻¹ g_j (Cauchy-Schwarz), so the
    split diagonal dominates the dual Hessian and α <= 1 cannot overshoot. (Counting a
    contact once lets its parallel normal and damping rows overshoot together: a 2-cycle.)
    """
    k, r = rows.n_contact, lam.shape[0] - rows.n_unilateral
    normal = (rows.error[:k] < 0.0) | (lam[:k] > 0.0)
    friction = normal & (rows.cone > 0.0)
    one_sided = (rows.error[r:] < 0.0) | (lam[r:] > 0.0)
    active = jnp.concatenate([normal, rows.stiffness[k:2 * k] > 0.0, friction, friction,
                              rows.stiffness[4 * k:r] > 0.0, one_sided]).astype(lam.dtype)
    count = blocks.scatter(active, active, rows, n)
    return jnp.maximum(count, 1.0)


@dataclasses.dataclass(frozen=True)
class Dual:
    """Dual ascent (XPBD) solver (thesis Algorithm 3).

    Attributes:
      iterations: static number of Jacobi sweeps.
      alpha: step length α in (0, 1] (with mass splitting, 1 is stable).
      update: "incremental" (default: the thesis's fast projection, XPBD's update; stays
        finite where "exact" diverges, e.g. a 1e4:1 pendulum) or "exact" (its fixed point is
        the primal solution, so it can converge to tol; see the module docstring).
      mass_splitting: divide each body's mass among its active constraints (Jacobi safety).
      tol: residual tolerance on max |M⁻¹ ∂Φ/∂u| (m/s), as for the other solvers.
      ad, adjoint, early_exit: gradient mode, implicit linear solve and early stop of the
        loops (forward, and the matrix-free adjoint), as for `Newton`.
    """

    iterations: int = 50
    alpha: float = 1.0
    update: str = "incremental"
    mass_splitting: bool = True
    tol: float | None = None
    ad: str = "vjp"
    early_exit: bool = False
    adjoint: str = "auto"
    quadratic_rows = True  # needs the linear normal law and huber/linear friction

    def __post_init__(self):
        base.check_int(self, "iterations")
        base.check_positive(self, "alpha", high=1.0)
        base.check_choice(self, "update", UPDATES)
        base.check_bool(self, "mass_splitting")
        base.check_bool(self, "early_exit")
        base.check_positive(self, "tol", optional=True)
        base.check_ad(self)

    def solve(self, problem, u0, args):
        """Project the multipliers from u = ũ, λ = 0 (u0 is not used)."""
        del u0
        u_free = problem.start(args)
        tol = base.tolerance(self, u_free.dtype)
        mass = problem.mass(args)
        inv_mass = blocks.block_inverse(mass)
        n = mass.shape[0]

        def impulse_velocity(rows, lam):
            impulse = blocks.transpose_apply(rows, lam, n)
            return jnp.einsum("nij,nj->ni", inv_mass, impulse).reshape(-1)

        def iteration(carry):
            u, lam, used, done = carry
            done = done | (base.residual_norm(problem.residual(u, args)) <= tol)
            rows = problem.rows(u, args)
            split = (split_counts(rows, lam, n) if self.mass_splitting
                     else jnp.ones((n,), u.dtype))
            w = isotropic_friction(rows, blocks.effective_mass(rows, inv_mass, split))
            s = rows.stiffness
            step = -self.alpha * (s * rows.error + lam) / (s * w + 1.0)
            lam_new = project(rows, lam + step)
            if self.update == "incremental":
                u_new = u + impulse_velocity(rows, lam_new - lam)
            else:
                u_new = u_free + impulse_velocity(rows, lam_new)
            keep = lambda new, old: jnp.where(done, old, new)  # noqa: E731
            return keep(u_new, u), keep(lam_new, lam), used + jnp.where(done, 0, 1), done

        rows0 = jax.eval_shape(problem.rows, u_free, args)
        init = (u_free, jnp.zeros(rows0.error.shape, u_free.dtype), jnp.zeros((), jnp.int32),
                jnp.zeros((), bool))
        u, _, used, _ = loop.iterate(iteration, init, self.iterations, base.early_exit(self),
                                     lambda carry: carry[3])
        return u, base.report(problem, u, args, tol, used)
