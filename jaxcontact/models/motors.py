"""Position motors on hinges (ADD Eq. 25-26): a kind of physics (`jaxcontact.models.kinds`):
`Motor`, `add_motor` and `MotorTerm`.

A motor holds its hinge's angle at the control's target α = `Control.motor[m]`:
R_a r̂_a - Rot(n, α) R_b r̂_b (3 equality rows, kp), and damps the spin about the hinge axis n
(frozen at the start of the step, kd); the frames are the joint's (`models/joints.py`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.math import rotate_about
from jaxcontact.models import kinds
from jaxcontact.models.joints import (VECTORS, damping_jacobians, frames, gather, two_bodies,
                                      velocity_rows)
from jaxcontact.types import Array, static


@struct.dataclass
class Motor(kinds.Params):
    """Position motors on hinges (ADD Eq. 25-26), with targets α from `Control.motor`.

    Energy kp/2 |R_a r̂_a - Rot(n, α) R_b r̂_b|² (n the world hinge axis R_b â_b): it holds the
    hinge angle θ at α. Damping: the dissipation Δt kd/2 (n·(ω_a - ω_b))² (Eq. 26 projected
    on the hinge axis, n frozen at the start of the step).

    Attributes:
      kp:    (M,) stiffness, N m (per unit of the dimensionless error; ≈ N m/rad for small
             angle errors).
      kd:    (M,) damping, N m s/rad.
      joint: static tuple (M,) index of the hinge each motor drives.
    """

    kp: Array
    kd: Array
    joint: tuple = static(default=())



@dataclasses.dataclass
class MotorRecord:
    joint: int
    kp: float
    kd: float


def add_motor(scene, joint, kp, kd=0.0) -> int:
    """Add a position motor to a hinge (ADD Eq. 25-26). Returns its index m.

    The motor holds the hinge angle θ at the target `Control.motor[m]` (rad; 0 is the
    build-time pose) with stiffness kp (N m, > 0) and damps the relative spin about the
    axis with kd (N m s/rad, >= 0).
    """
    joints, records = scene.records("joint"), scene.records("motor")
    joint = check.index("joint", joint, len(joints))
    if joints[joint].kind != "hinge":
        raise ValueError(f"joint must be a hinge to carry a motor, got joint {joint!r} of "
                         f"kind {joints[joint].kind!r}")
    if any(m.joint == joint for m in records):
        raise ValueError(f"joint {joint!r} already has a motor")
    records.append(MotorRecord(joint, check.number("kp", kp, positive=True),
                               check.number("kd", kd, low=0)))
    return len(records) - 1

@dataclasses.dataclass(frozen=True)
class MotorTerm(terms.RowTerm):
    """Position motors on hinges (ADD Eq. 25-26): kp/2 |R_a r̂_a - Rot(n, α) R_b r̂_b|² holds the
    hinge angle at the target α = `Control.motor[m]`; kd damps the spin about the axis (n
    frozen at the start of the step)."""

    motors: tuple            # motor indices m
    joints: tuple            # the hinge of each motor
    n_bodies = 2
    name = "motor"

    def elements(self, model, state, control, stages):
        bodies, particles, start = two_bodies(model, state, self.joints)
        params = gather(model.joint, self.joints, VECTORS)
        m = jnp.asarray(self.motors, jnp.int32)
        params.update(kp=model.motor.kp[m], kd=model.motor.kd[m],
                      target=jnp.asarray(control.motor, state.pos.dtype)[m])

        def spin(s, p):
            f = frames(dofs.local(s, jnp.zeros((12,), s.pos.dtype), model.dt), p)
            return damping_jacobians("hinge", f, s.pos)

        params["jac_a"], params["jac_b"] = jax.vmap(spin)(start, params)
        params["coef"] = params["kd"][:, None]
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        error = f["ref_a"] - rotate_about(f["axis_b"], p["target"], f["ref_b"])
        return (terms.bilateral(error, jnp.full((3,), p["kp"])),
                terms.bilateral(velocity_rows(x, p), dt * p["coef"]))




def _pack(records, columns) -> Motor:
    return Motor(kp=columns.column(records, "kp"), kd=columns.column(records, "kd"),
                 joint=columns.static(records, "joint"))


def _terms(records) -> list:
    return [MotorTerm(tuple(range(len(records))), tuple(m.joint for m in records))] \
        if records else []


KIND = kinds.register(kinds.Kind("motor", _pack, _terms, (add_motor,)))
