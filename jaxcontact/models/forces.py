"""Gravity: the potential -m g·x of every body and particle, a term linear in u."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from jaxcontact import dofs, terms


@dataclasses.dataclass(frozen=True)
class Gravity(terms.EnergyTerm):
    """U = -m g·x of the end-of-step position of every body (`particles=False`) or every
    particle (`particles=True`). Linear in u: Dual and Descent start from the free flight
    ũ + Δt g that it implies (thesis Algorithms 2 and 3)."""

    count: int
    particles: bool = False
    linear = True
    convex = True

    @property
    def name(self):
        return "gravity of particles" if self.particles else "gravity"

    @property
    def n_bodies(self):
        return 0 if self.particles else 1

    @property
    def n_particles(self):
        return 1 if self.particles else 0

    def elements(self, model, state, control, stages):
        index = np.arange(self.count, dtype=np.int32).reshape(-1, 1)
        empty = np.zeros((self.count, 0), np.int32)
        bodies, particles = (empty, index) if self.particles else (index, empty)
        mass = model.particle_masses if self.particles else model.body.mass
        return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                              start=dofs.gather_start(state, bodies, particles),
                              params={"mass": mass}, shared={"gravity": model.gravity})

    def potential(self, x, p, shared, dt):
        pos = x.particle_pos[0] if self.particles else x.pos[0]
        return -p["mass"] * (shared["gravity"] @ pos)

    def without_rows(self):
        return None   # linear: part of ũ for every solver
