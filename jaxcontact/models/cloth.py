"""Cloth: triangle membranes with dihedral bending over particles (issue 16; `Scene.add_cloth`).

**Membrane.** A triangle with rest corners X₀, X₁, X₂ is given a 2-D rest frame once (edge
matrix D_m, 2x2, in an orthonormal basis of its plane); its current corners x₀, x₁, x₂ give
the 3x2 deformation gradient F = [x₁ − x₀, x₂ − x₀] D_m⁻¹ and the Green strain
E = ½ (FᵀF − I₂). Its energy is the St. Venant-Kirchhoff membrane
  U = A (μ |E|² + λ/2 (tr E)²),    μ = k / (2 (1 + ν)),  λ = k ν / (1 − ν²),
with k the stretch stiffness (N/m: Young's modulus times thickness, the 2-D modulus) and ν
the in-plane Poisson ratio (plane stress). Under uniaxial stretch with ν = 0 the membrane
force per width is k (1 + ε) (ε + ε²/2) ≈ k ε. Damping is the rotation-invariant dissipation
A c |Ė|² of the Green strain rate Ė = ½ (ḞᵀF + FᵀḞ) (ADD Sec. 5.2's viscosity on a
surface), so a rigidly moving sheet is not slowed.

**Bending.** Each interior edge (a hinge) with corners x₀, x₁ and the opposite corners x₂, x₃
of its two triangles has the signed dihedral angle θ between their normals; its energy is
the discrete-shell bending energy (Grinspun et al. 2003, Eq. 4, with its constant fixed)
  U = D/2 · |ē|² / (Ā₁ + Ā₂) · (θ − θ̄)²,
with the hinge's rest length |ē|, rest areas Ā and rest angle θ̄, and D the flexural
rigidity (N m; the hinge's is the mean of its triangles'). The weight |ē|²/(Ā₁ + Ā₂) (not
Grinspun's 3 |ē|²/(Ā₁ + Ā₂)) makes a sheet bent into a cylinder of radius R store
D/2 · A / R², the Kirchhoff plate's energy: measured within 2 % on equilateral meshes in
every direction and on `jc.meshes.grid` sheets along the grid axes. Discrete shells depend on
the mesh: a grid sheet bent about its diagonal is up to 1.5 times stiffer.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import terms


def membrane_lame(stiffness, poisson_ratio):
    """(μ, λ) of a membrane (N/m) from its 2-D Young's modulus k (N/m) and Poisson ratio ν
    (plane stress)."""
    return (stiffness / (2.0 * (1.0 + poisson_ratio)),
            stiffness * poisson_ratio / (1.0 - poisson_ratio * poisson_ratio))


def rest_frame(corners):
    """D_m (2, 2): a rest triangle's edges x₁ − x₀, x₂ − x₀ (NumPy, (3, 3) corners) as
    columns in an orthonormal basis of its plane, first axis along x₁ − x₀."""
    e1, e2 = corners[1] - corners[0], corners[2] - corners[0]
    t1 = e1 / np.linalg.norm(e1)
    t2 = e2 - (e2 @ t1) * t1
    t2 = t2 / np.linalg.norm(t2)
    return np.array([[e1 @ t1, e2 @ t1], [0.0, e2 @ t2]])


def deformation_gradient(corners, rest_inverse):
    """F = [x₁ − x₀, x₂ − x₀] D_m⁻¹ (3, 2) of a triangle's corners (3, 3)."""
    return (corners[1:] - corners[:1]).T @ rest_inverse


def green_strain(F):
    """E = ½ (FᵀF − I) (2, 2) of a membrane's F (3, 2)."""
    return 0.5 * (F.T @ F - jnp.eye(2, dtype=F.dtype))


def stvk_membrane(F, mu, lam):
    """St. Venant-Kirchhoff energy per rest area, μ |E|² + λ/2 (tr E)² (J/m²)."""
    strain = green_strain(F)
    return mu * jnp.sum(strain * strain) + 0.5 * lam * jnp.trace(strain) ** 2


def dihedral_angle(corners):
    """Signed angle θ (rad) between the normals of triangles (x₀, x₁, x₂) and (x₁, x₀, x₃)
    of a hinge's corners (4, 3): 0 for a flat hinge, positive when x₂ and x₃ fold towards
    the first normal. Invariant to the triangles' sizes (atan2 of the scaled sine and
    cosine), smooth while neither triangle is degenerate."""
    x0, x1, x2, x3 = corners
    edge = x1 - x0
    n1 = jnp.cross(edge, x2 - x0)
    n2 = jnp.cross(-edge, x3 - x1)
    sine = jnp.cross(n1, n2) @ edge / jnp.sqrt(edge @ edge)
    return jnp.arctan2(sine, n1 @ n2)


def hinges(tris):
    """The interior edges of a triangle mesh (NumPy): (H, 4) corners (x₀, x₁ the shared edge
    as ordered in the first triangle, x₂ its opposite corner, x₃ the second triangle's) and
    (H, 2) the two triangles. An edge with more than two triangles raises ValueError."""
    owners: dict = {}
    for t, tri in enumerate(np.asarray(tris).tolist()):
        for i in range(3):
            a, b, c = tri[i], tri[(i + 1) % 3], tri[(i + 2) % 3]
            owners.setdefault((min(a, b), max(a, b)), []).append((t, a, b, c))
    corners, pairs = [], []
    for edge, sides in owners.items():
        if len(sides) > 2:
            raise ValueError(f"tris: edge {edge} belongs to {len(sides)} triangles (a cloth "
                             "must be a surface: at most two per edge)")
        if len(sides) == 2:
            (t1, a, b, c), (t2, _, _, d) = sides
            corners.append((a, b, c, d))
            pairs.append((t1, t2))
    return (np.asarray(corners, np.int64).reshape(-1, 4),
            np.asarray(pairs, np.int64).reshape(-1, 2))


def membrane_rows(F, rate, mu, lam, damping, area, dt):
    """The membrane as constraint rows (`terms.RowGroup`, so Dual solves cloth too): with
    σ = E₁₁ + E₂₂ and δ = E₁₁ − E₂₂,
      A (μ |E|² + λ/2 (tr E)²) = A/2 ((μ + λ) σ² + μ δ² + 4μ E₁₂²),
    three equality rows of stiffness A (μ + λ, μ, 4μ); and the damping Δt A c |Ė|², three
    rows (Ė₁₁, Ė₂₂, Ė₁₂) of stiffness Δt A (2c, 2c, 4c)."""
    strain = green_strain(F)
    strain_rate = 0.5 * (rate.T @ F + F.T @ rate)
    elastic = jnp.stack([strain[0, 0] + strain[1, 1], strain[0, 0] - strain[1, 1],
                         strain[0, 1]])
    viscous = jnp.stack([strain_rate[0, 0], strain_rate[1, 1], strain_rate[0, 1]])
    weights = jnp.array([2.0, 2.0, 4.0], F.dtype)
    return (terms.bilateral(elastic, area * jnp.stack([mu + lam, mu, 4.0 * mu])),
            terms.bilateral(viscous, dt * area * damping * weights))


def hinge_stiffness(cloth):
    """(H,) D of each hinge: the mean of its two triangles' `bend_stiffness`."""
    pairs = np.asarray(cloth.hinge_tris, np.int32).reshape(-1, 2)
    return 0.5 * (cloth.bend_stiffness[..., pairs[:, 0]] + cloth.bend_stiffness[..., pairs[:, 1]])


def strain_energy(model, particle_pos):
    """The cloth's elastic energy (J) at particle positions (P, 3): every triangle's membrane
    energy and every hinge's bending energy."""
    cloth = model.cloth
    if not cloth.size:
        return jnp.zeros((), particle_pos.dtype)
    F = jax.vmap(deformation_gradient)(particle_pos[np.asarray(cloth.tris)], cloth.rest_inverse)
    mu, lam = membrane_lame(cloth.stretch_stiffness, cloth.poisson_ratio)
    membrane = jnp.sum(cloth.area * jax.vmap(stvk_membrane)(F, mu, lam))
    if not len(cloth.hinges):
        return membrane
    bend = jax.vmap(dihedral_angle)(particle_pos[np.asarray(cloth.hinges)])
    return membrane + jnp.sum(0.5 * hinge_stiffness(cloth) * cloth.hinge_weight
                              * (bend - cloth.hinge_rest_angle) ** 2)


@dataclasses.dataclass(frozen=True)
class MembraneTerm(terms.RowTerm):
    """The stretch energy and strain-rate damping of every cloth triangle."""

    count: int
    n_particles = 3

    @property
    def name(self):
        return f"cloth membrane ({self.count} triangles)"

    def elements(self, model, state, control, stages):
        cloth = model.cloth
        params = {name: getattr(cloth, name) for name in
                  ("stretch_stiffness", "poisson_ratio", "damping", "rest_inverse", "area")}
        return terms.particle_elements(state, cloth.tris, params)

    def rows(self, x, lag, p, shared, dt):
        F = deformation_gradient(x.particle_pos, p["rest_inverse"])
        rate = deformation_gradient(x.particle_vel, p["rest_inverse"])
        mu, lam = membrane_lame(p["stretch_stiffness"], p["poisson_ratio"])
        return membrane_rows(F, rate, mu, lam, p["damping"], p["area"], dt)


@dataclasses.dataclass(frozen=True)
class BendingTerm(terms.RowTerm):
    """The dihedral bending energy of every interior cloth edge: one equality row θ − θ̄ of
    stiffness D |ē|² / (Ā₁ + Ā₂) per hinge."""

    count: int
    n_particles = 4

    @property
    def name(self):
        return f"cloth bending ({self.count} hinges)"

    def elements(self, model, state, control, stages):
        cloth = model.cloth
        params = {"stiffness": hinge_stiffness(cloth) * cloth.hinge_weight,
                  "rest_angle": cloth.hinge_rest_angle}
        return terms.particle_elements(state, cloth.hinges, params)

    def rows(self, x, lag, p, shared, dt):
        bend = dihedral_angle(x.particle_pos) - p["rest_angle"]
        return (terms.bilateral(bend[None], p["stiffness"][None]),)
