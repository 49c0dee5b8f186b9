"""Attachments: particles tied to points fixed in bodies, or to world points: a kind of
physics (`jaxcontact.models.kinds`): `Attachment`, `attach` and `AttachmentTerm`.

An attachment ties a particle to a point fixed in a body (or the world): U = k/2 |x_p - p_b|²
with the dissipation Δt c/2 |v_p - v_b(p_b)|² of their relative velocity (the body point's
lever arm taken at the start of the step). Both are equality rows (thesis Eq. 117).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.math import quat_rotate
from jaxcontact.models import kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Attachment(kinds.Params):
    """Particles tied to points fixed in bodies, or to world points (body -1).

    Attributes:
      anchor:    (A, 3) the point in the body's frame (world coordinates for body -1), m.
      stiffness: (A,) k, N/m.
      damping:   (A,) c, N s/m.
      particle, body: static tuples (A,) of indices.
    """

    anchor: Array
    stiffness: Array
    damping: Array
    particle: tuple = static(default=())
    body: tuple = static(default=())



@dataclasses.dataclass
class AttachmentRecord:
    particle: int
    body: int
    anchor: np.ndarray
    stiffness: float
    damping: float


def attach(scene, particle, body=-1, anchor=None, *, stiffness, damping=0.0) -> int:
    """Tie particle `particle` to a point of body `body`, or to a world point (body -1).
    Returns the attachment's index.

    U = k/2 |x_p - p|² with p the anchor point, and the dissipation Δt c/2 |v_p - v(p)|² of
    their relative velocity.

    Args:
      particle: a particle index.
      body: a body index, or -1 for the world.
      anchor: the point in WORLD coordinates at build time (stored in the body's frame);
        default: the particle's current position.
      stiffness: k, N/m (> 0).
      damping: c, N s/m (>= 0).
    """
    particles = scene.records("particle")
    p = check.index("particle", particle, len(particles))
    b = scene.body_index("body", body)
    point = particles[p].pos if anchor is None else check.vector("anchor", anchor, 3)
    rot, pos = scene.frame(b)
    if b >= 0:
        scene.exclude_particle(p, b)   # it never collides with the body it is tied to
    records = scene.records("attachment")
    records.append(AttachmentRecord(p, b, rot.T @ (point - pos),
                                    check.number("stiffness", stiffness, positive=True),
                                    check.number("damping", damping, low=0)))
    return len(records) - 1


@dataclasses.dataclass(frozen=True)
class AttachmentTerm(terms.RowTerm):
    """Every attachment of `model.attachment`: particle `particle[i]` to body `body[i]`."""

    count: int
    n_bodies = 1
    n_particles = 1
    name = "attachment"

    def elements(self, model, state, control, stages):
        att = model.attachment
        bodies = np.asarray(att.body, np.int32).reshape(-1, 1)
        particles = np.asarray(att.particle, np.int32).reshape(-1, 1)
        params = {name: getattr(att, name) for name in ("anchor", "stiffness", "damping")}
        start = dofs.gather_start(state, bodies, particles)
        # the body point's lever arm for the dissipation, at the start of the step
        params["lever"] = jax.vmap(quat_rotate)(start.quat[:, 0], params["anchor"])
        return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                              start=start, params=params)

    def rows(self, x, p, shared, dt):
        point = x.pos[0] + quat_rotate(x.quat[0], p["anchor"])
        v_point = x.vel[0] + jnp.cross(x.ang_vel[0], p["lever"])
        return (terms.bilateral(x.particle_pos[0] - point, jnp.full((3,), p["stiffness"])),
                terms.bilateral(x.particle_vel[0] - v_point, jnp.full((3,), dt * p["damping"])))


def _pack(records, columns) -> Attachment:
    return Attachment(anchor=columns.column(records, "anchor", 3),
                      stiffness=columns.column(records, "stiffness"),
                      damping=columns.column(records, "damping"),
                      particle=columns.static(records, "particle"),
                      body=columns.static(records, "body"))


def _terms(records) -> list:
    return [AttachmentTerm(len(records))] if records else []


KIND = kinds.register(kinds.Kind("attachment", _pack, _terms, (attach,)))
