"""User-defined terms (`Scene.add_energy`): the mechanism the built-in physics uses, open.

A user term is a potential U(local, params) of the end-of-step configuration (J), or with
`dissipation=True` a dissipation potential D(local, params) of the velocities (W, entering the
step as Δt D), of ONE element: `local` is the element's `dofs.Local` (pos (kb, 3), quat
(kb, 4), vel (kb, 3), ang_vel (kb, 3), particle_pos (kp, 3), particle_vel (kp, 3), all at the
end of the step; a world body (-1) sits at the origin at rest) and `params` that element's
slice of `model.energy[t]`. Its forces, its exact Jacobian for Newton, its Hessian blocks for
Descent's preconditioner and its implicit gradients all come from autodiff of that one
function, as for every built-in term. It has no constraint rows, so Dual refuses it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp

from jaxcontact import dofs, terms


@dataclasses.dataclass(frozen=True)
class UserEnergy(terms.EnergyTerm):
    """Term t of `Scene.add_energy`.

    Attributes:
      fn: fn(local, params) -> scalar, one element.
      index: t, the slot of its parameters in `model.energy`.
      bodies, particles: static (E, kb) and (E, kp) index tables, as tuples of tuples.
      dissipation: D of velocities (times Δt) instead of U.
    """

    fn: Callable
    index: int
    bodies: tuple
    particles: tuple
    dissipation: bool = False

    @property
    def name(self):
        return f"energy {self.index} ({getattr(self.fn, '__name__', 'fn')})"

    @property
    def n_bodies(self):
        return len(self.bodies[0]) if self.bodies else 0

    @property
    def n_particles(self):
        return len(self.particles[0]) if self.particles else 0

    @property
    def count(self):
        return len(self.bodies) or len(self.particles)

    def elements(self, model, state, control, stages):
        bodies = jnp.asarray(self.bodies, jnp.int32).reshape(self.count, self.n_bodies)
        particles = jnp.asarray(self.particles, jnp.int32).reshape(self.count, self.n_particles)
        return terms.Elements(bodies=bodies, particles=particles,
                              start=dofs.gather_start(state, bodies, particles),
                              params=model.energy[self.index])

    def potential(self, x, params, shared, dt):
        value = self.fn(x, params)
        return dt * value if self.dissipation else value
