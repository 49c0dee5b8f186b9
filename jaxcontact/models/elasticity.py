"""Hyperelastic energy densities of linear tetrahedra (issue 16, the laws of `add_solid`).

A tetrahedron with rest corners X₀..X₃ and current corners x₀..x₃ has the constant
deformation gradient F = D_s D_m⁻¹, D_s = [x₁ − x₀, x₂ − x₀, x₃ − x₀] and D_m the same of the
rest corners; its elastic energy is V_rest Ψ(F). Each law is written once, as Ψ(F, μ, λ):
forces are −∂U/∂x and Newton's Hessian comes from differentiating it again, like every term.

Lamé parameters from Young's modulus E and Poisson's ratio ν: μ = E / (2(1 + ν)),
λ = E ν / ((1 + ν)(1 − 2ν)). Every law below reduces to linear elasticity with these (μ, λ)
at small strain: Ψ ≈ μ |ε|² + λ/2 (tr ε)², ε = sym(F − I).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxcontact import validate as check

# below this volume ratio J the Neo-Hookean log is continued by its second-order Taylor
# polynomial: finite energy and forces for flat and inverted elements, a growing barrier
_LOG_FLOOR = 0.05


def lame(youngs_modulus, poisson_ratio):
    """(μ, λ) from Young's modulus E (Pa, > 0) and Poisson's ratio ν (−1 < ν < 0.5)."""
    e = check.number("youngs_modulus", youngs_modulus, positive=True)
    nu = check.number("poisson_ratio", poisson_ratio)
    if not -1.0 < nu < 0.5:
        raise ValueError(f"poisson_ratio must be in (-1, 0.5), got {poisson_ratio!r}")
    return lame_array(e, nu)


def lame_array(youngs_modulus, poisson_ratio):
    """`lame` for (traced, per-element) arrays, without checks: the model leaves' form."""
    return (youngs_modulus / (2.0 * (1.0 + poisson_ratio)),
            youngs_modulus * poisson_ratio / ((1.0 + poisson_ratio) * (1.0 - 2.0 * poisson_ratio)))


def edge_matrix(corners):
    """D = [x₁ − x₀, x₂ − x₀, x₃ − x₀] (3, 3), edges as columns, of corners (4, 3)."""
    return (corners[1:] - corners[:1]).T


def deformation_gradient(corners, rest_inverse):
    """F = D_s D_m⁻¹ (3, 3) of a tetrahedron's current corners (4, 3), with `rest_inverse`
    D_m⁻¹ of its rest corners."""
    return edge_matrix(corners) @ rest_inverse


def _log_continued(j):
    """log J for J ≥ the floor, its second-order Taylor polynomial below (C², finite)."""
    j0 = _LOG_FLOOR
    safe = jnp.maximum(j, j0)
    below = jnp.log(j0) + (j - j0) / j0 - 0.5 * ((j - j0) / j0) ** 2
    return jnp.where(j >= j0, jnp.log(safe), below)


def neo_hookean(F, mu, lam):
    """Ψ = μ/2 (I_C − 3) − μ log J + λ/2 (log J)², I_C = tr FᵀF, J = det F (the compressible
    Neo-Hookean of ADD Sec. 5.2, "a standard Neo-Hookean material"; J/m³).

    Defined for J > 0; below J = 0.05 the log is continued by its Taylor polynomial, so flat
    and inverted elements get a finite, steeply growing energy instead of NaN.
    """
    ic = jnp.sum(F * F)
    log_j = _log_continued(jnp.linalg.det(F))
    return 0.5 * mu * (ic - 3.0) - mu * log_j + 0.5 * lam * log_j ** 2


def stable_neo_hookean(F, mu, lam, alpha=None):
    """Ψ = μ/2 (I_C − 3) + λ'/2 (J − α)² (thesis Eq. 158, after Smith et al. 2018), defined
    for every F, inverted included (J < 0 is penalized, not singular).

    λ' = λ + μ and the rest-stable α = 1 + μ/λ' make it linear elasticity with Lamé (μ, λ)
    at small strain (the stress at F = I is zero). `alpha` replaces that α: the thesis's
    per-element volumetric activation (α > rest value: the element wants to grow). The
    constant λ'/2 (1 − α)² is subtracted, so Ψ(I) = 0.
    """
    lam_snh = lam + mu
    a = 1.0 + mu / lam_snh if alpha is None else alpha
    ic = jnp.sum(F * F)
    # measured from the undeformed state: zero energy at F = I (and any rotation)
    return (0.5 * mu * (ic - 3.0)
            + 0.5 * lam_snh * ((jnp.linalg.det(F) - a) ** 2 - (1.0 - a) ** 2))


def polar_rotation(F, iterations=12):
    """R of the polar decomposition F = R S (R orthogonal), by Higham's scaled Newton
    iteration R ← (ζ R + R⁻ᵀ / ζ) / 2, ζ = (|R⁻¹|/|R|)^½ (Frobenius): smooth in F, with
    derivatives of every order (no SVD, whose derivative breaks at repeated singular values,
    e.g. F = I). Converges quadratically for non-singular F; det R = sign det F."""
    R = F
    for _ in range(iterations):
        inv_t = jnp.linalg.inv(R).T
        zeta = jnp.sqrt(jnp.sqrt(jnp.sum(inv_t * inv_t) / jnp.sum(R * R)))
        R = 0.5 * (zeta * R + inv_t / zeta)
    return R


def corotational(F, mu, lam):
    """Ψ = μ |F − R|² + λ/2 (tr(RᵀF) − 3)², R the rotation of F's polar decomposition
    (co-rotational linear elasticity: linear in the rotated strain RᵀF − I). Rotation
    invariant, cheap, and volume-losing under large stretch (the thesis's comparison)."""
    R = polar_rotation(F)
    return mu * jnp.sum((F - R) ** 2) + 0.5 * lam * (jnp.trace(R.T @ F) - 3.0) ** 2


MATERIALS = {"neo_hookean": neo_hookean, "stable_neo_hookean": stable_neo_hookean,
             "corotational": corotational}
