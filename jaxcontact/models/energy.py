"""User-defined terms: the mechanism the built-in physics uses, open; a kind of physics
(`jaxcontact.models.kinds`): `add_energy` and `UserEnergy`, parameters `model.energy[t]`.

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
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.models import kinds


@dataclasses.dataclass
class EnergyRecord:
    fn: Callable
    bodies: np.ndarray
    particles: np.ndarray
    params: Any
    dissipation: bool


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


def add_energy(scene, fn, *, bodies=None, particles=None, params=None,
               dissipation=False) -> int:
    """Add a user-defined term: the same mechanism the built-in physics uses. Returns t.

    Args:
      fn: fn(local, params) -> scalar for ONE element: a potential U (J) of the end of
        step configuration, or with `dissipation=True` a dissipation potential D (W) of
        the velocities (entering the step as Δt D). `local.pos` (kb, 3), `local.quat`
        (kb, 4), `local.vel` (kb, 3), `local.ang_vel` (kb, 3), `local.particle_pos`
        (kp, 3), `local.particle_vel` (kp, 3) are end-of-step values of the element's
        blocks (a world body, -1, at the origin at rest); `params` is the element's slice
        of `params`. It must be a jax function of them (it is differentiated twice).
      bodies: (E, kb) int body indices per element (-1 = the world), or None.
      particles: (E, kp) int particle indices per element, or None.
      params: a pytree of arrays with leading axis E (or None); stored as
        `model.energy[t]`, differentiable like every parameter.
      dissipation: fn is a dissipation potential of velocities.

    Newton and Descent solve scenes with user terms; Dual needs constraint rows and
    refuses them.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {fn!r}")
    check.boolean("dissipation", dissipation)
    if bodies is None and particles is None:
        raise ValueError("give bodies or particles (the blocks of each element), got "
                         "bodies=None, particles=None")
    b = (None if bodies is None else
         check.table("bodies", bodies, len(scene.records("body")), rows="world"))
    p = None if particles is None else check.table("particles", particles,
                                                   len(scene.records("particle")))
    count = (b if b is not None else p).shape[0]
    if b is not None and p is not None and b.shape[0] != p.shape[0]:
        raise ValueError(f"bodies and particles must have the same number of elements, got "
                         f"{b.shape[0]} and {p.shape[0]}")
    b = np.zeros((count, 0), np.int32) if b is None else b
    p = np.zeros((count, 0), np.int32) if p is None else p
    check.leading_axis("params", params, count, "elements")
    records = scene.records("energy")
    records.append(EnergyRecord(fn, b, p, params, dissipation))
    return len(records) - 1


def _pack(records, columns) -> tuple:
    return tuple(jax.tree.map(columns.as_float, r.params) for r in records)


def _terms(records) -> list:
    return [UserEnergy(r.fn, t, tuple(map(tuple, r.bodies.tolist())),
                       tuple(map(tuple, r.particles.tolist())), r.dissipation)
            for t, r in enumerate(records)]


KIND = kinds.register(kinds.Kind("energy", _pack, _terms, (add_energy,)))
