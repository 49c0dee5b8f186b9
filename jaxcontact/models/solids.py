"""FEM solids: linear tetrahedra over particles (issue 16; `Scene.add_solid`).

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

from jaxcontact import terms
from jaxcontact.models import elasticity


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
