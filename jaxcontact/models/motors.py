"""Motors, the inputs of `Control.motor`: a kind of physics (`jaxcontact.models.kinds`):
`Motor`, `add_motor`, `add_actuator`, `MotorTerm` and `ActuatorTerm`.

Two laws share one index m and one input u = `Control.motor[m]`:

- a position motor on a hinge (`add_motor`, ADD Eq. 25-26) holds the hinge's angle at the
  target α = u: R_a r̂_a - Rot(n, α) R_b r̂_b (3 equality rows, kp), and damps the spin about
  the hinge axis n (frozen at the start of the step, kd); the frames are the joint's
  (`models/joints.py`);
- an actuator (`add_actuator`, MuJoCo's general actuator with an affine gain and bias) on a
  hinge, a slider or a fixed tendon, with length l = g x (x the coordinate or the tendon's
  length L, g the gear) and rate r = l̇, exerts the force

      f = clamp(gain u + b0 + b1 l + b2 r, f_lo, f_hi)

  along l (a torque g f on a hinge). Over the step, l = l0 + Δt r (l0 at the start: the
  linearization MuJoCo's implicit integrators make), so f = clamp(α + β r) with
  α = gain u + b0 + b1 l0 and β = b1 Δt + b2, and the step's potential gains

      Ψ(r) = -Δt ∫_0^r clamp(α + β s, f_lo, f_hi) ds,

  convex when β <= 0, which `add_actuator` requires (b1, b2 <= 0: a bias that pulls toward
  its reference; a positive one would make the step's problem non-convex). A position servo
  is gain = kp, b1 = -kp, b2 = -kv; a velocity servo gain = kv, b2 = -kv; a torque motor
  gain only.
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
from jaxcontact.models.tendons import (check_combination, combination, combination_bodies,
                                       combination_elements)
from jaxcontact.types import Array, static


@struct.dataclass
class Motor(kinds.Params):
    """Motors with inputs u = `Control.motor` (module docstring): position motors on hinges
    (ADD Eq. 25-26) and actuators.

    A position motor: energy kp/2 |R_a r̂_a - Rot(n, α) R_b r̂_b|² (n the world hinge axis
    R_b â_b) holds the hinge angle θ at α = u; damping: the dissipation Δt kd/2
    (n·(ω_a - ω_b))² (Eq. 26 projected on the hinge axis, n frozen at the start of the step).
    An actuator: the force clamp(gain u + b0 + b1 l + b2 l̇, f_lo, f_hi) along its length
    l = Σ_j g_j x_j.

    Attributes:
      kp:          (M,) stiffness, N m (per unit of the dimensionless error; ≈ N m/rad for
                   small angle errors); 0 for actuators.
      kd:          (M,) damping, N m s/rad; 0 for actuators.
      gain:        (M,) an actuator's gain (force per unit of u); 0 for position motors.
      bias:        (M, 3) an actuator's (b0, b1, b2).
      force_lower, force_upper: (M,) an actuator's force range (used where `force_limited`).
      coefficient: (M, J) an actuator's g_j: its gear times the tendon's coefficients.
      joint:       static tuple (M,) the hinge of each position motor (-1 for actuators).
      law:         static tuple (M,) "position" or "actuator".
      joints:      static tuple (M,) an actuator's joints (() for position motors).
      force_limited: static tuple (M,) of bools.
    """

    kp: Array
    kd: Array
    gain: Array
    bias: Array
    force_lower: Array
    force_upper: Array
    coefficient: Array
    joint: tuple = static(default=())
    law: tuple = static(default=())
    joints: tuple = static(default=())
    force_limited: tuple = static(default=())


@dataclasses.dataclass
class MotorRecord:
    joint: int
    kp: float
    kd: float
    law: str = "position"
    joints: tuple = ()
    coefficient: tuple = ()
    gain: float = 0.0
    bias: tuple = (0.0, 0.0, 0.0)
    force_lower: float = 0.0
    force_upper: float = 0.0
    force_limited: bool = False
    bodies: tuple = ()


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


def add_actuator(scene, joint=None, tendon=None, *, gear=1.0, gain=1.0, bias=(0.0, 0.0, 0.0),
                 force_range=None) -> int:
    """Add an actuator on a hinge, a slider or a fixed tendon (module docstring: MuJoCo's
    general actuator with affine gain and bias). Returns its index m: its input is
    `Control.motor[m]`.

    Args:
      joint: a hinge's or slider's index (`add_joint`), or None.
      tendon: a fixed tendon's index (`add_tendon`), or None; exactly one of the two.
      gear: g, the actuator's length l = g x (x the joint's coordinate, 0 at build, or the
        tendon's length); the joint feels g f.
      gain: the force per unit of input, f = gain u + ....
      bias: (b0, b1, b2) of f = gain u + b0 + b1 l + b2 l̇, with b1, b2 <= 0.
      force_range: (f_lo, f_hi) clamping f, or None.
    """
    if (joint is None) == (tendon is None):
        raise ValueError(f"give exactly one of joint and tendon, got joint={joint!r}, "
                         f"tendon={tendon!r}")
    g = check.number("gear", gear)
    if joint is not None:
        joints, coefficients = check_combination(scene, (joint,), (1.0,))
    else:
        tendons = scene.records("tendon")
        record = tendons[check.index("tendon", tendon, len(tendons))]
        joints, coefficients = record.joints, record.coefficient
    b0, b1, b2 = check.vector("bias", bias, 3)
    if b1 > 0 or b2 > 0:
        raise ValueError(f"bias must have b1 <= 0 and b2 <= 0 (a bias pulling toward its "
                         f"reference: the step stays convex), got {bias!r}")
    lo = hi = 0.0
    if force_range is not None:
        lo, hi = check.vector("force_range", force_range, 2)
        if lo > hi:
            raise ValueError(f"force_range must have lo <= hi, got {force_range!r}")
    records = scene.records("motor")
    records.append(MotorRecord(
        joint=-1, kp=0.0, kd=0.0, law="actuator", joints=joints,
        coefficient=tuple(g * c for c in coefficients), gain=check.number("gain", gain),
        bias=(float(b0), float(b1), float(b2)), force_lower=float(lo), force_upper=float(hi),
        force_limited=force_range is not None, bodies=combination_bodies(scene, joints)))
    return len(records) - 1


def clamped_work(r, alpha, beta, lower, upper):
    """∫_0^r clamp(α + β s, lower, upper) ds for β <= 0, piece by piece in s (no division of
    small differences: exact as β -> 0, where it tends to clamp(α) r)."""
    beta = jnp.minimum(beta, -1e-30)     # (β = 0: the breakpoints go to infinity)
    start, end = jnp.where(r >= 0.0, 0.0, r), jnp.where(r >= 0.0, r, 0.0)

    def within(s):   # s clipped to [start, end], by where: exact derivatives at r = 0
        return jnp.where(s < start, start, jnp.where(s > end, end, s))

    s_hi, s_lo = within((upper - alpha) / beta), within((lower - alpha) / beta)
    # g = α + β s falls with s: above `upper` before s_hi, within between, below after s_lo
    work = (upper * (s_hi - start) + (s_lo - s_hi) * (alpha + 0.5 * beta * (s_hi + s_lo))
            + lower * (end - s_lo))
    return jnp.where(r >= 0.0, work, -work)


@dataclasses.dataclass(frozen=True)
class ActuatorTerm(terms.EnergyTerm):
    """Actuators on joint coordinates and tendons (module docstring):
    Ψ = -Δt ∫_0^r clamp(α + β s, f_lo, f_hi) ds of the rate r of the actuator's length."""

    motors: tuple
    joints: tuple            # static (E,) tuples of each actuator's joints
    n_bodies: int
    name = "actuator"
    convex = True

    def elements(self, model, state, control, stages):
        m = jnp.asarray(self.motors, jnp.int32)
        out = combination_elements(model, state, self.joints, model.motor.coefficient[m],
                                   self.n_bodies)
        u = jnp.asarray(control.motor, state.pos.dtype)[m]
        bias = model.motor.bias[m]
        out.params["alpha"] = (model.motor.gain[m] * u + bias[:, 0]
                               + bias[:, 1] * out.params["start_length"])
        out.params["beta"] = bias[:, 1] * model.dt + bias[:, 2]
        limited = jnp.asarray([model.motor.force_limited[i] for i in self.motors])
        out.params["limited"] = limited.astype(state.pos.dtype)
        # (unlimited: finite stand-ins, so that the branch `where` drops stays finite)
        out.params["lower"] = jnp.where(limited, model.motor.force_lower[m], -1.0)
        out.params["upper"] = jnp.where(limited, model.motor.force_upper[m], 1.0)
        return out

    def without_rows(self):
        return (f"{self.name} (a force along a joint coordinate or tendon) has no compliance "
                "form; use jc.Newton() or jc.Descent()")

    def potential(self, x, p, shared, dt):
        _, rate = combination(x, p)
        free = p["alpha"] * rate + 0.5 * p["beta"] * rate * rate
        clamped = clamped_work(rate, p["alpha"], p["beta"], p["lower"], p["upper"])
        return -dt * jnp.where(p["limited"] > 0.5, clamped, free)


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
    width = max((len(r.joints) for r in records), default=1) or 1
    coefficient = [list(r.coefficient) + [0.0] * (width - len(r.coefficient)) for r in records]
    return Motor(**{f: columns.column(records, f)
                    for f in ("kp", "kd", "gain", "force_lower", "force_upper")},
                 bias=columns.column(records, "bias", 3),
                 coefficient=columns.array(coefficient, width),
                 **{f: columns.static(records, f)
                    for f in ("joint", "law", "joints", "force_limited")})


def _terms(records) -> list:
    out = []
    position = [(m, r) for m, r in enumerate(records) if r.law == "position"]
    if position:
        out.append(MotorTerm(tuple(m for m, _ in position), tuple(r.joint for _, r in position)))
    actuators = [(m, r) for m, r in enumerate(records) if r.law == "actuator"]
    if actuators:
        out.append(ActuatorTerm(tuple(m for m, _ in actuators),
                                tuple(r.joints for _, r in actuators),
                                max(len(r.bodies) for _, r in actuators)))
    return out


KIND = kinds.register(kinds.Kind("motor", _pack, _terms, (add_motor, add_actuator)))
