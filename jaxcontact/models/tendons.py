"""Fixed tendons: linear combinations of joint coordinates, a kind of physics
(`jaxcontact.models.kinds`): `Tendon`, `add_tendon` and `TendonTerm`, with the combination
machinery that actuators on tendons share (`combination_elements`, `combination`).

A fixed tendon (MuJoCo's `<fixed>` tendon) has the length L = Σ_j c_j x_j of the coordinates
x_j of hinges (θ, rad) and sliders (s, m), 0 at build time, and the rate L̇ = Σ_j c_j ẋ_j,
each ẋ_j = G_j u the joint's velocity row with its Jacobian frozen at the start of the step
(`joints.damping_jacobians`). On L act, as on one joint's coordinate (`joints.CoordinateTerm`):

    spring    k/2 (L - L_ref)²                        (MuJoCo's tendon stiffness, springlength)
    damping   Δt c/2 L̇²                               (its damping)
    limits    `joints.limit_rows` on L: lo <= L <= hi, damped as a joint limit is

A coupling of joints (MuJoCo's joint and tendon equalities, linear part) is a tendon held at
its reference by a stiff spring: c = (1, -a) makes x_1 = a x_2.

An element's bodies are the distinct bodies of its joints (the world, -1, where a joint has
it), padded with -1; each joint slot picks its two bodies by one-hot rows (`sel_a`, `sel_b`),
so a body shared by two joints of a chain is one block of the element.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.models import kinds
from jaxcontact.models.joints import (VECTORS, damping_jacobians, frames, hinge_angle,
                                      limit_rows, slider_position)
from jaxcontact.types import Array, static


@struct.dataclass
class Tendon(kinds.Params):
    """Fixed tendons: L = Σ_j c_j x_j over hinge angles and slider positions (module
    docstring), with a spring, damping and limits on L.

    Attributes:
      coefficient:     (T, J) c_j, m/rad or m/m (0 past a tendon's own joints).
      stiffness:       (T,) k, N/m (per unit of L).
      rest_length:     (T,) L_ref (0 is the build-time pose).
      damping:         (T,) c, N s/m.
      lower, upper:    (T,) limits on L (used where `limited`).
      limit_stiffness: (T,) k_lim of the limits.
      limit_damping:   (T,) c_lim of the limits.
      joints:          static tuple (T,) of tuples of joint indices (hinges or sliders).
      limited:         static tuple (T,) of bools.
    """

    coefficient: Array
    stiffness: Array
    rest_length: Array
    damping: Array
    lower: Array
    upper: Array
    limit_stiffness: Array
    limit_damping: Array
    joints: tuple = static(default=())
    limited: tuple = static(default=())


@dataclasses.dataclass
class TendonRecord:
    joints: tuple
    coefficient: tuple
    stiffness: float
    rest_length: float
    damping: float
    lower: float
    upper: float
    limit_stiffness: float
    limit_damping: float
    limited: bool
    bodies: tuple


def combination_bodies(scene, joints) -> tuple:
    """The distinct bodies of joints (the world, -1, where a joint has it), in the order
    `combination_elements` lays them out."""
    records, seen = scene.records("joint"), []
    for j in joints:
        for b in (records[j].body_a, records[j].body_b):
            if b not in seen:
                seen.append(b)
    return tuple(seen)


def check_combination(scene, joints, coefficients) -> tuple:
    """Validated (joints, coefficients) of a linear combination of hinge / slider
    coordinates: distinct joint indices of hinges or sliders, one finite coefficient each."""
    records = scene.records("joint")
    if isinstance(joints, (int, np.integer)):
        joints = (joints,)
    joints = tuple(check.index("joints", j, len(records)) for j in joints)
    if not joints:
        raise ValueError("joints must name at least one joint, got ()")
    if len(set(joints)) != len(joints):
        raise ValueError(f"joints must be distinct, got {joints!r}")
    for j in joints:
        if records[j].kind not in ("hinge", "slider"):
            raise ValueError(f"joints must be hinges or sliders, got joint {j!r} of kind "
                             f"{records[j].kind!r}")
    coefficients = tuple(float(c) for c in check.vector("coefficients", coefficients,
                                                        len(joints)))
    return joints, coefficients


def add_tendon(scene, joints, coefficients, *, stiffness=0.0, rest_length=0.0, damping=0.0,
               limit=None, limit_stiffness=None, limit_damping=0.0) -> int:
    """Add a fixed tendon L = Σ_j c_j x_j over hinges and sliders (module docstring). Returns
    its index.

    Args:
      joints: joint indices (`add_joint`) of hinges or sliders, distinct.
      coefficients: c_j, one per joint (m/rad for a hinge, m/m for a slider, or any unit the
        tendon's length is measured in).
      stiffness: k >= 0 of the spring k/2 (L - rest_length)².
      rest_length: L_ref; L is 0 at the build-time pose.
      damping: c >= 0 of the dissipation Δt c/2 L̇².
      limit: (lo, hi) on L, or None.
      limit_stiffness: k_lim > 0 of the limits (needed with a limit).
      limit_damping: c_lim >= 0 of the limits while they push.
    """
    joints, coefficients = check_combination(scene, joints, coefficients)
    k = check.number("stiffness", stiffness, low=0)
    c = check.number("damping", damping, low=0)
    rest = check.number("rest_length", rest_length)
    lo = hi = k_lim = 0.0
    if limit is not None:
        lo, hi = check.vector("limit", limit, 2)
        if lo > hi:
            raise ValueError(f"limit must have lo <= hi, got {limit!r}")
        if limit_stiffness is None:
            raise ValueError("limit_stiffness is needed with a limit, got None")
        k_lim = check.number("limit_stiffness", limit_stiffness, positive=True)
    elif limit_stiffness is not None:
        raise ValueError(f"limit_stiffness needs a limit, got {limit_stiffness!r}")
    c_lim = check.number("limit_damping", limit_damping, low=0)
    if limit is None and c_lim > 0:
        raise ValueError(f"limit_damping needs a limit, got {limit_damping!r}")
    records = scene.records("tendon")
    records.append(TendonRecord(joints, coefficients, k, rest, c, float(lo), float(hi), k_lim,
                                c_lim, limit is not None, combination_bodies(scene, joints)))
    return len(records) - 1


# --- the combination, shared with actuators on tendons -----------------------------------------

def _layout(model, joint_table, kb=None):
    """Static layout of combinations: bodies (E, kb) (distinct, padded with -1), one-hot
    selections sel_a, sel_b (E, J, kb) of each slot's two bodies, the slots' joint indices
    (E, J) (padded with the first joint) and whether a slot is real (E, J)."""
    body_a, body_b = np.asarray(model.joint.body_a), np.asarray(model.joint.body_b)
    width = max(len(t) for t in joint_table)
    members = []
    for joints in joint_table:
        seen = []
        for j in joints:
            for b in (int(body_a[j]), int(body_b[j])):
                if b not in seen:
                    seen.append(b)
        members.append(seen)
    kb = max(len(m) for m in members) if kb is None else kb
    n = len(joint_table)
    bodies = np.full((n, kb), -1, np.int32)
    sel_a, sel_b = np.zeros((n, width, kb)), np.zeros((n, width, kb))
    slots = np.zeros((n, width), np.int32)
    real = np.zeros((n, width), bool)
    for e, (joints, seen) in enumerate(zip(joint_table, members)):
        bodies[e, :len(seen)] = seen
        slots[e] = joints[0]
        for s, j in enumerate(joints):
            sel_a[e, s, seen.index(int(body_a[j]))] = 1.0
            sel_b[e, s, seen.index(int(body_b[j]))] = 1.0
            slots[e, s], real[e, s] = j, True
        sel_a[e, len(joints):, 0] = sel_b[e, len(joints):, 0] = 1.0   # padding: no motion
    return bodies, sel_a, sel_b, slots, real


def combination_elements(model, state, joint_table, coefficient, kb):
    """`terms.Elements` of linear combinations of joint coordinates (module docstring):
    `joint_table` a static tuple (E,) of joint-index tuples, `coefficient` (E, J), kb the
    elements' width (`combination_bodies`). Params:
    per slot the joint's vectors, whether it is a hinge, the one-hot selections, the frozen
    rate Jacobians jac_a, jac_b (E, J, 6); the coefficients; and the length at the start of
    the step, `start_length` (E,)."""
    bodies, sel_a, sel_b, slots, real = _layout(model, joint_table, kb)
    dtype = state.pos.dtype
    index = jnp.asarray(slots)
    params = {name: getattr(model.joint, name)[index] for name in VECTORS}
    # padded slots: both sides the same frame, so their coordinate is 0 and smooth
    for side in ("a", "b"):
        params["axis_" + side] = jnp.where(real[..., None], params["axis_" + side],
                                           jnp.asarray([0.0, 0.0, 1.0], dtype))
        params["ref_" + side] = jnp.where(real[..., None], params["ref_" + side],
                                          jnp.asarray([1.0, 0.0, 0.0], dtype))
    kind = np.asarray(model.joint.kind, object)[slots]
    params["hinge"] = jnp.asarray(kind == "hinge", dtype)
    params["sel_a"], params["sel_b"] = jnp.asarray(sel_a, dtype), jnp.asarray(sel_b, dtype)
    params["coefficient"] = jnp.where(jnp.asarray(real), coefficient, 0.0)
    start = dofs.gather_start(state, bodies, np.zeros((len(bodies), 0), np.int32))

    def slot_start(s, p):
        x = _pair(dofs.local(s, jnp.zeros_like(s.velocity), model.dt), p)
        f = frames(x, p)
        hinge = p["hinge"] > 0.5
        jacs = [jnp.where(hinge, h, s_) for h, s_ in zip(damping_jacobians("hinge", f, x.pos),
                                                         damping_jacobians("slider", f, x.pos))]
        return jacs[0][0], jacs[1][0], _coordinate(f, p)

    slot_params = {k: params[k] for k in VECTORS + ("hinge", "sel_a", "sel_b")}
    per_element = jax.vmap(jax.vmap(slot_start, in_axes=(None, 0)), in_axes=(0, 0))
    params["jac_a"], params["jac_b"], start_coordinate = per_element(start, slot_params)
    params["start_length"] = jnp.sum(params["coefficient"] * start_coordinate, axis=1)
    return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.zeros((len(bodies), 0),
                                                                          jnp.int32),
                          start=start, params=params)


def _pair(x, p):
    """The two bodies of one slot, picked from the element's view x by its selections."""
    pick = jnp.stack([p["sel_a"], p["sel_b"]])
    return dofs.Local(pos=pick @ x.pos, quat=pick @ x.quat, vel=pick @ x.vel,
                      ang_vel=pick @ x.ang_vel, particle_pos=x.particle_pos,
                      particle_vel=x.particle_vel)


def _coordinate(f, p):
    return jnp.where(p["hinge"] > 0.5, hinge_angle(f), slider_position(f))


def combination(x, p):
    """(L, L̇) of one element: Σ c_j x_j and Σ c_j ẋ_j (module docstring)."""
    slot = {k: p[k] for k in VECTORS + ("hinge", "sel_a", "sel_b", "jac_a", "jac_b")}

    def one(q):
        pair = _pair(x, q)
        rate = (q["jac_a"] @ jnp.concatenate([pair.vel[0], pair.ang_vel[0]])
                + q["jac_b"] @ jnp.concatenate([pair.vel[1], pair.ang_vel[1]]))
        return _coordinate(frames(pair, q), q), rate

    coordinates, rates = jax.vmap(one)(slot)
    return p["coefficient"] @ coordinates, p["coefficient"] @ rates


# --- the term ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TendonTerm(terms.RowTerm):
    """Fixed tendons (module docstring): the spring and damping rows of L, and its limits
    where `limits`."""

    tendons: tuple
    joints: tuple            # static (E,) tuples of each tendon's joints
    n_bodies: int            # the most distinct bodies of one tendon (`combination_bodies`)
    limits: bool = False
    name = "tendon"

    def elements(self, model, state, control, stages):
        t = jnp.asarray(self.tendons, jnp.int32)
        out = combination_elements(model, state, self.joints, model.tendon.coefficient[t],
                                   self.n_bodies)
        for name in ("stiffness", "rest_length", "damping", "lower", "upper",
                     "limit_stiffness", "limit_damping"):
            out.params[name] = getattr(model.tendon, name)[t]
        limited = np.asarray([model.tendon.limited[i] for i in self.tendons], bool)
        out.params["limit_stiffness"] = jnp.where(limited, out.params["limit_stiffness"], 0.0)
        return out

    # limits may start far outside their range, as a joint's may (`CoordinateTerm`)
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        length, rate = combination(x, p)
        groups = (terms.bilateral((length - p["rest_length"])[None], p["stiffness"][None]),
                  terms.bilateral(rate[None], (dt * p["damping"])[None]))
        if self.limits:
            groups += (limit_rows(length, rate, p, dt),)
        return groups


def _pack(records, columns) -> Tendon:
    width = max((len(r.joints) for r in records), default=1)
    coefficient = [list(r.coefficient) + [0.0] * (width - len(r.joints)) for r in records]
    return Tendon(coefficient=columns.array(coefficient, width),
                  **{f: columns.column(records, f)
                     for f in ("stiffness", "rest_length", "damping", "lower", "upper",
                               "limit_stiffness", "limit_damping")},
                  joints=columns.static(records, "joints"),
                  limited=columns.static(records, "limited"))


def _terms(records) -> list:
    """One term of the tendons something acts on (a tendon without a spring, damping or
    limits, one an actuator drives, adds none)."""
    acting = [(t, r) for t, r in enumerate(records) if r.stiffness or r.damping or r.limited]
    if not acting:
        return []
    return [TendonTerm(tuple(t for t, _ in acting), tuple(r.joints for _, r in acting),
                       max(len(r.bodies) for _, r in acting), any(r.limited for _, r in acting))]


KIND = kinds.register(kinds.Kind("tendon", _pack, _terms, (add_tendon,)))
