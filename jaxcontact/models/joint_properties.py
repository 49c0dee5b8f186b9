"""What acts on a hinge's angle or a slider's position as a coordinate (MuJoCo's joint
properties): a spring to a reference, armature, and friction loss. A kind of physics
(`jaxcontact.models.kinds`): `JointProperties`, `add_joint_properties`, `JointPropertyTerm`
and `FrictionLossTerm`.

With x the joint's coordinate (the hinge angle θ or the slider position s of
`models/joints.py`, 0 at build time) and ẋ = G u its rate (the relative spin about the hinge
axis or the sliding along it, G frozen at the start of the step as for the joint's damping),
each property is one row of the step's potential:

    spring        k/2 (x - x_ref)²              at the end of the step (a potential)
    armature      a/2 (ẋ - ẋ₀)²                 ẋ₀ the rate at the start of the step: the
                                                 kinetic energy a ẋ²/2 of the coordinate,
                                                 discretized as the bodies' M (u - ũ)
    friction loss Δt f H_δ(ẋ)                    dry friction of torque (force) f opposing
                                                 ẋ: H_δ the Huber function of width δ

Armature is what MuJoCo adds to the diagonal of its joint-space inertia (rotor inertia seen
through a gearbox); in maximal coordinates it is the same kinetic energy a ẋ²/2 of the
coordinate's rate. Friction loss is MuJoCo's `frictionloss`: Coulomb friction on the
coordinate, here regularized so that it is convex and smooth: a joint loaded below f creeps
at a rate of at most δ = `FRICTION_LOSS_WIDTH`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.models import kinds
from jaxcontact.models.joints import (VECTORS, damping_jacobians, frames, gather, hinge_angle,
                                      slider_position, two_bodies, velocity_rows)
from jaxcontact.types import Array, static

# δ, the rate (rad/s or m/s) below which friction loss acts as a viscous damper of
# coefficient f/δ: small against the motions it resists, large enough that its curvature
# Δt f/δ stays within a few decades of the joints' inertia for Newton's directions.
FRICTION_LOSS_WIDTH = 1e-3


@struct.dataclass
class JointProperties(kinds.Params):
    """Springs, armature and friction loss of hinges and sliders (module docstring).

    Attributes:
      spring_stiffness: (P,) k, N m/rad (hinge) or N/m (slider).
      spring_reference: (P,) x_ref, rad or m (0: the build-time pose).
      armature:         (P,) a, kg m² (hinge) or kg (slider).
      friction_loss:    (P,) f, N m (hinge) or N (slider).
      joint:            static tuple (P,) of the joint each belongs to.
      kind:             static tuple (P,) "hinge" or "slider", the joint's kind.
    """

    spring_stiffness: Array
    spring_reference: Array
    armature: Array
    friction_loss: Array
    joint: tuple = static(default=())
    kind: tuple = static(default=())


@dataclasses.dataclass
class JointPropertyRecord:
    joint: int
    kind: str
    spring_stiffness: float
    spring_reference: float
    armature: float
    friction_loss: float


def add_joint_properties(scene, joint, *, spring_stiffness=0.0, spring_reference=0.0,
                         armature=0.0, friction_loss=0.0) -> int:
    """Give a hinge or a slider a spring, armature and friction loss (module docstring).
    Returns the index of its entry in `model.joint_property`.

    Args:
      joint: the joint's index (`add_joint`), a hinge or a slider.
      spring_stiffness: k >= 0, N m/rad or N/m: the spring k/2 (x - x_ref)².
      spring_reference: x_ref, rad or m, relative to the build-time pose.
      armature: a >= 0, kg m² or kg: inertia of the coordinate itself.
      friction_loss: f >= 0, N m or N: dry friction on the coordinate.
    """
    joints, records = scene.records("joint"), scene.records("joint_property")
    joint = check.index("joint", joint, len(joints))
    kind = joints[joint].kind
    if kind not in ("hinge", "slider"):
        raise ValueError(f"joint must be a hinge or a slider, got joint {joint!r} of kind "
                         f"{kind!r}")
    if any(r.joint == joint for r in records):
        raise ValueError(f"joint {joint!r} already has its properties")
    records.append(JointPropertyRecord(
        joint, kind, check.number("spring_stiffness", spring_stiffness, low=0),
        check.number("spring_reference", spring_reference),
        check.number("armature", armature, low=0),
        check.number("friction_loss", friction_loss, low=0)))
    return len(records) - 1


def _elements(model, state, entries, joints, kind):
    """Elements of the entries `entries` (on `joints`, of one kind): the joint's frames, the
    properties, and the rate's frozen Jacobians with the rate at the start of the step."""
    bodies, particles, start = two_bodies(model, state, joints)
    params = gather(model.joint, joints, VECTORS)
    props = model.joint_property
    e = jnp.asarray(entries, jnp.int32)
    for name in ("spring_stiffness", "spring_reference", "armature", "friction_loss"):
        params[name] = getattr(props, name)[e]

    def rate(s, p):
        f = frames(dofs.local(s, jnp.zeros((12,), s.pos.dtype), model.dt), p)
        jac_a, jac_b = damping_jacobians(kind, f, s.pos)
        return jac_a, jac_b, (jac_a @ s.velocity[:6] + jac_b @ s.velocity[6:])[0]

    params["jac_a"], params["jac_b"], params["rate0"] = jax.vmap(rate)(start, params)
    return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)


def _coordinate(kind, f):
    return hinge_angle(f) if kind == "hinge" else slider_position(f)


@dataclasses.dataclass(frozen=True)
class JointPropertyTerm(terms.RowTerm):
    """Springs and armature of the hinges (or sliders) `joints`: two equality rows each."""

    kind: str
    entries: tuple           # indices into model.joint_property
    joints: tuple            # their joints
    n_bodies = 2
    # the spring's row is the joint's angle, nonlinear in the bodies' rotations: Newton's
    # directions take its Gauss-Newton Hessian, as for limits (`models/joints.py`)
    gauss_newton_directions = True

    @property
    def name(self):
        return f"{self.kind} spring and armature"

    def elements(self, model, state, control, stages):
        return _elements(model, state, self.entries, self.joints, self.kind)

    def rows(self, x, p, shared, dt):
        spring = _coordinate(self.kind, frames(x, p)) - p["spring_reference"]
        inertia = velocity_rows(x, p)[0] - p["rate0"]
        return (terms.bilateral(spring[None], p["spring_stiffness"][None]),
                terms.bilateral(inertia[None], p["armature"][None]))


@dataclasses.dataclass(frozen=True)
class FrictionLossTerm(terms.EnergyTerm):
    """Friction loss of the hinges (or sliders) `joints`: Δt f H_δ(ẋ) (module docstring)."""

    kind: str
    entries: tuple
    joints: tuple
    n_bodies = 2
    convex = True

    @property
    def name(self):
        return f"{self.kind} friction loss"

    def elements(self, model, state, control, stages):
        return _elements(model, state, self.entries, self.joints, self.kind)

    def without_rows(self):
        return (f"{self.name} (dry friction on a joint coordinate) has no compliance form; "
                "use jc.Newton() or jc.Descent()")

    def potential(self, x, p, shared, dt):
        rate = jnp.abs(velocity_rows(x, p)[0])
        width = FRICTION_LOSS_WIDTH
        huber = jnp.where(rate <= width, 0.5 * rate * rate / width, rate - 0.5 * width)
        return dt * p["friction_loss"] * huber


def _pack(records, columns) -> JointProperties:
    return JointProperties(
        **{f: columns.column(records, f) for f in ("spring_stiffness", "spring_reference",
                                                   "armature", "friction_loss")},
        joint=columns.static(records, "joint"), kind=columns.static(records, "kind"))


def _terms(records) -> list:
    """Per joint kind: one term of springs and armature, one of friction loss where any."""
    out = []
    for kind in ("hinge", "slider"):
        mine = [(i, r) for i, r in enumerate(records) if r.kind == kind]
        if mine:
            out.append(JointPropertyTerm(kind, tuple(i for i, _ in mine),
                                         tuple(r.joint for _, r in mine)))
        lossy = [(i, r) for i, r in mine if r.friction_loss > 0.0]
        if lossy:
            out.append(FrictionLossTerm(kind, tuple(i for i, _ in lossy),
                                        tuple(r.joint for _, r in lossy)))
    return out


KIND = kinds.register(kinds.Kind("joint_property", _pack, _terms, (add_joint_properties,)))
