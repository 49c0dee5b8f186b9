"""FEM solids: linear tetrahedra over particles: a kind of physics (`jaxcontact.models.kinds`):
`Solid`, `add_solid` and `SolidTerm`.

A tetrahedron's corners are particles. Its potential in the step is
  Ψ = V (ψ(F) + Δt η |Ė|²),
with the elastic energy density ψ of its material (`models/elasticity.py`: neo_hookean,
stable_neo_hookean, corotational; Lamé parameters from E and ν per element), F = D_s D_m⁻¹,
and ADD's rotation-invariant viscosity (Sec. 5.2, Eq. 19) as a dissipation potential of the
Green strain rate Ė = ½ (ḞᵀF + FᵀḞ), Ḟ = [v₁ − v₀, v₂ − v₀, v₃ − v₀] D_m⁻¹: rigid rotations
have Ė = 0, so a spinning body is not slowed. Masses are lumped: each tetrahedron gives a
quarter of ρV to each corner particle.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import meshes, terms
from jaxcontact import validate as check
from jaxcontact.models import elasticity, kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Solid(kinds.Params):
    """Linear tetrahedra of FEM solids (`add_solid`): one entry
    per tetrahedron, its corners particles.

    Attributes:
      density:        (T,) ρ, kg/m³ (lumped: ρV/4 to each corner, `Model.particle_masses`).
      youngs_modulus: (T,) E, Pa.
      poisson_ratio:  (T,) ν.
      viscosity:      (T,) η of the Green-strain-rate dissipation η |Ė|² per volume, Pa s.
      rest_inverse:   (T, 3, 3) D_m⁻¹ of the rest corners (`models/elasticity.py`), 1/m.
      volume:         (T,) rest volume, m³.
      tets:           static tuple (T,) of 4 particle indices.
      material:       static tuple (T,) of law names (`elasticity.MATERIALS`).
    """

    density: Array
    youngs_modulus: Array
    poisson_ratio: Array
    viscosity: Array
    rest_inverse: Array
    volume: Array
    tets: tuple = static(default=())
    material: tuple = static(default=())

    def lumped_mass(self):
        """(corners (T, 4), share (T,)): a quarter of each tetrahedron's ρV to each corner."""
        return self.tets, self.density * self.volume / 4.0


@dataclasses.dataclass
class SolidRecord:
    """One `add_solid` call: T tetrahedra of one material."""
    corners: np.ndarray       # (T, 4) particle indices
    rest_inverse: np.ndarray  # (T, 3, 3)
    volume: np.ndarray        # (T,)
    density: float
    youngs_modulus: float
    poisson_ratio: float
    viscosity: float
    material: str



def add_solid(scene, verts, tets, *, density, youngs_modulus, poisson_ratio, viscosity=0.0,
              material="neo_hookean", pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
              radius=0.0, friction=None, stiffness=None, damping=None):
    """Add an FEM solid of linear tetrahedra (`jc.meshes`). Returns its particle indices.

    Every vertex becomes a particle, colliding as a ball of `radius` like any particle;
    every tetrahedron an element of `model.solid`, with its own differentiable ρ, E, ν
    and η (`models/solids.py`). Vertex masses are lumped from the density (a quarter of
    each tetrahedron's ρV): `model.particle_masses` is the total, `model.particle.mass`
    only a point mass added on top (0 here).

    Args:
      verts: (V, 3) rest positions (m), in a frame placed at `pos`.
      tets: (T, 4) vertex indices, positively oriented (`jc.meshes.check_tets`, which
        rejects inverted or degenerate elements by index).
      density: ρ, kg/m³ (> 0).
      youngs_modulus: E, Pa (> 0). poisson_ratio: ν in (-1, 0.5).
      viscosity: η (Pa s, >= 0) of ADD's Green-strain-rate dissipation.
      material: "neo_hookean" (ADD), "stable_neo_hookean" (thesis Eq. 158) or
        "corotational".
      pos, vel: translation of the rest shape, and the initial velocity of every vertex.
      radius, friction, stiffness, damping: the vertices' contact, as `add_particle`.
    """
    if material not in elasticity.MATERIALS:
        raise ValueError(f"material must be one of {sorted(elasticity.MATERIALS)}, got "
                         f"{material!r}")
    points = check.points("verts", verts)
    volumes = meshes.check_tets(points, tets)
    tets = np.asarray(tets, np.int64)
    rho = check.number("density", density, positive=True)
    elasticity.lame(youngs_modulus, poisson_ratio)          # checks E and ν
    eta = check.number("viscosity", viscosity, low=0)
    check.every_vertex_used("verts", len(points), tets, "tetrahedron")
    first = scene.mesh_particles(points, pos, vel, radius, friction, stiffness, damping)
    rest = np.swapaxes(points[tets[:, 1:]] - points[tets[:, :1]], 1, 2)
    scene.records("solid").append(SolidRecord(first + tets, np.linalg.inv(rest), volumes, rho,
                                    float(youngs_modulus), float(poisson_ratio), eta,
                                    material))
    return np.arange(first, first + len(points))


def _density(material, F, p):
    """ψ(F) (J/m³) of a tetrahedron of `material` with parameters p."""
    mu, lam = elasticity.lame_array(p["youngs_modulus"], p["poisson_ratio"])
    return elasticity.MATERIALS[material](F, mu, lam)


def strain_energy(model, particle_pos):
    """Σ V ψ(F) over every tetrahedron (J): the solids' elastic energy at particle positions
    (P, 3). (`jc.observe.strain_energy` adds the cloth's.)"""
    solid = model.solid
    if not solid.size:
        return jnp.zeros((), particle_pos.dtype)
    corners = particle_pos[np.asarray(solid.tets)]
    F = jax.vmap(elasticity.deformation_gradient)(corners, solid.rest_inverse)
    material = np.asarray(solid.material)
    total = jnp.zeros((), particle_pos.dtype)
    for law in set(solid.material):
        index = np.flatnonzero(material == law)
        p = {name: getattr(solid, name)[index] for name in ("youngs_modulus", "poisson_ratio")}
        psi = jax.vmap(lambda f, q: _density(law, f, q))(F[index], p)
        total = total + jnp.sum(solid.volume[index] * psi)
    return total


@dataclasses.dataclass(frozen=True)
class SolidTerm(terms.EnergyTerm):
    """The tetrahedra `tets` (indices into `model.solid`) of one material."""

    material: str
    tets: tuple
    n_particles = 4
    project_directions = True   # Ψ(F) is not convex in the corners (stretch, inversion)

    @property
    def name(self):
        return f"solid ({self.material}, {len(self.tets)} tetrahedra)"

    def elements(self, model, state, control, stages):
        solid = model.solid
        index = np.asarray(self.tets, np.int64)
        params = {name: getattr(solid, name)[index] for name in
                  ("youngs_modulus", "poisson_ratio", "viscosity", "rest_inverse", "volume")}
        return terms.particle_elements(state, np.asarray(solid.tets)[index], params)

    def potential(self, x, p, shared, dt):
        F = elasticity.deformation_gradient(x.particle_pos, p["rest_inverse"])
        elastic = _density(self.material, F, p)
        rate = elasticity.deformation_gradient(x.particle_vel, p["rest_inverse"])
        strain_rate = 0.5 * (rate.T @ F + F.T @ rate)
        dissipation = p["viscosity"] * jnp.sum(strain_rate * strain_rate)
        return p["volume"] * (elastic + dt * dissipation)


def _pack(records, columns) -> Solid:
    def count(r):
        return len(r.corners)

    return Solid(**{f: columns.per_element(records, f, count) for f in (
        "density", "youngs_modulus", "poisson_ratio", "viscosity")},
        volume=columns.stacked(records, "volume"),
        rest_inverse=columns.stacked(records, "rest_inverse", 3, 3),
        tets=columns.table(records, "corners", 4),
        material=tuple(r.material for r in records for _ in range(count(r))))


def _terms(records) -> list:
    """One term per material present."""
    material = [r.material for r in records for _ in range(len(r.corners))]
    out = []
    for law in elasticity.MATERIALS:
        tets = tuple(i for i, m in enumerate(material) if m == law)
        if tets:
            out.append(SolidTerm(law, tets))
    return out


KIND = kinds.register(kinds.Kind("solid", _pack, _terms, (add_solid,)))
