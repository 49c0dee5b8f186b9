"""Linear drag on particles: a kind of physics (`jaxcontact.models.kinds`): `Drag`, `add_drag`
and `DragTerm`.

A particle moving at v through still air (or a viscous fluid at low Reynolds number, Stokes
drag) feels the force -c v. Its dissipation potential is D = c/2 |v|², entering the step as
Δt D of the end-of-step velocity (the same form as a joint's or an attachment's damping): one
equality row per axis, e = v, of stiffness Δt c (thesis Eq. 117). With gravity alone the step
is v⁺ = (v + Δt g) / (1 + Δt c/m), which tends to the terminal velocity m g / c.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import terms
from jaxcontact import validate as check
from jaxcontact.models import kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Drag(kinds.Params):
    """Linear drag on particles.

    Attributes:
      coefficient: (D,) c, N s/m.
      particle:    static tuple (D,) of the particle each acts on.
    """

    coefficient: Array
    particle: tuple = static(default=())



@dataclasses.dataclass
class DragRecord:
    particle: int
    coefficient: float


def add_drag(scene, particles, coefficient) -> np.ndarray:
    """Add the linear drag force -c v to particles. Returns the drag indices.

    Args:
      particles: a particle index or a sequence of them (e.g. what `add_cloth` returns).
      coefficient: c, N s/m (>= 0); the same for every particle given. Differentiable as
        `model.drag.coefficient`.
    """
    count = len(scene.records("particle"))
    index = check.table("particles", np.atleast_1d(particles), count)[:, 0]
    c = check.number("coefficient", coefficient, low=0)
    records = scene.records("drag")
    first = len(records)
    records.extend(DragRecord(int(p), c) for p in index)
    return np.arange(first, len(records))


@dataclasses.dataclass(frozen=True)
class DragTerm(terms.RowTerm):
    """The drag of `count` particles: three velocity rows each, stiffness Δt c."""

    count: int
    n_particles = 1
    name = "drag"

    def elements(self, model, state, control, stages):
        drag = model.drag
        return terms.particle_elements(state, np.reshape(drag.particle, (-1, 1)),
                                       {"coefficient": drag.coefficient})

    def rows(self, x, p, shared, dt):
        return (terms.bilateral(x.particle_vel[0], jnp.full((3,), dt * p["coefficient"])),)


def _pack(records, columns) -> Drag:
    return Drag(coefficient=columns.column(records, "coefficient"),
                particle=columns.static(records, "particle"))


def _terms(records) -> list:
    return [DragTerm(len(records))] if records else []


KIND = kinds.register(kinds.Kind("drag", _pack, _terms, (add_drag,)))
