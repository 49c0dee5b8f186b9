"""Distance springs between bodies, and attachments of particles to bodies or the world.

A spring joins a point fixed in body a to a point fixed in body b (or a world point, b = -1):
U = k/2 (|Δ| - L)², Δ = p_a - p_b (thesis Eq. 111; ADD Eq. 23); in compliance form (thesis
Eq. 117, the `Dual` solver) its rows are e + λ/k = 0. Two row forms of this one energy,
chosen by the builder from the rest length at build time:
  - L > 0: the scalar stretch e = |Δ| - L (one row);
  - L = 0 (a soft ball joint): the vector e = Δ - L Δ/|Δ| (three rows, |e| = ||Δ| - L|), which
    stays smooth with Hessian k I where the points coincide; the scalar form has no
    curvature there. (With L > 0 the vector form's Jacobian grows as L/|Δ| near a fully
    compressed spring, which the scalar form does not.)
Both stay exact for any value of the differentiable leaf L.

An attachment ties a particle to a point fixed in a body (or the world): U = k/2 |x_p - p_b|²
with the dissipation Δt c/2 |v_p - v_b(p_b)|² of their relative velocity (the body point's
lever arm taken at the start of the step).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import dofs, terms
from jaxcontact.math import quat_rotate, safe_norm, safe_normalize


def _bodies(body_a, body_b, index):
    j = np.asarray(index, np.int64)
    return np.stack([np.asarray(body_a)[j], np.asarray(body_b)[j]], axis=1).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class SpringTerm(terms.RowTerm):
    """The springs `springs` of `model.spring`; `vector`: the three-row form (module)."""

    springs: tuple
    vector: bool = False
    n_bodies = 2

    @property
    def name(self):
        return "zero-length spring" if self.vector else "spring"

    def elements(self, model, state, control, stages):
        spring = model.spring
        bodies = _bodies(spring.body_a, spring.body_b, self.springs)
        particles = np.zeros((len(self.springs), 0), np.int32)
        index = jnp.asarray(self.springs, jnp.int32)
        params = {name: getattr(spring, name)[index]
                  for name in ("anchor_a", "anchor_b", "rest_length", "stiffness")}
        return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                              start=dofs.gather_start(state, bodies, particles), params=params)

    def rows(self, x, p, shared, dt):
        delta = (x.pos[0] + quat_rotate(x.quat[0], p["anchor_a"])
                 - x.pos[1] - quat_rotate(x.quat[1], p["anchor_b"]))
        if self.vector:
            error = delta - p["rest_length"] * safe_normalize(delta)
            return (terms.bilateral(error, jnp.full((3,), p["stiffness"])),)
        stretch = safe_norm(delta) - p["rest_length"]
        return (terms.bilateral(stretch[None], p["stiffness"][None]),)


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

