"""Springs and soft joints between bodies, as potentials of attachment points and axes.

Springs (thesis Eq. 111; ADD Eq. 23) and joints (ADD §5.3: ball, hinge Eq. 24, slider, fixed,
cable; motors Eq. 25-26; limits as one-sided penalties) are quadratic potentials of error
vectors of the two sides' poses. Each spring joins a point fixed in body a to a point fixed in
body b, or to a fixed world point when b = -1. Functions here take the poses of each entry's
two sides, gathered per entry, so one forward-mode pass gives every row's derivatives (see
`dynamics.rows`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import (quat_rotate, quat_to_mat, rotate_about, safe_atan2, safe_norm,
                             safe_normalize)
from jaxcontact.types import Array, Joint, Motor, Spring


def attachment_points(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> tuple[Array, Array]:
    """World attachment points (S, 3) of both sides. A world side (b = -1) is given the
    origin and the identity rotation by the caller, so its anchor is a world point."""
    return (pos_a + quat_rotate(quat_a, spring.anchor_a),
            pos_b + quat_rotate(quat_b, spring.anchor_b))


def stretch(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> Array:
    """C = |p_a - p_b| - L per spring, (S,) (0 gradient where the points coincide)."""
    p_a, p_b = attachment_points(spring, pos_a, quat_a, pos_b, quat_b)
    return safe_norm(p_a - p_b) - spring.rest_length


def energy(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> Array:
    """U = k/2 (|Δ| - L)², Δ = p_a - p_b, per spring (S,).

    Written as k/2 |Δ|² - k L |Δ| + k L²/2: for a zero rest length (a soft ball joint) the
    energy is then k/2 |Δ|², smooth with Hessian k I where the points coincide.
    """
    p_a, p_b = attachment_points(spring, pos_a, quat_a, pos_b, quat_b)
    delta = p_a - p_b
    k, rest = spring.stiffness, spring.rest_length
    return 0.5 * k * jnp.sum(delta * delta, axis=-1) - k * rest * safe_norm(delta) \
        + 0.5 * k * rest * rest


# --- soft joints (ADD §5.3) -------------------------------------------------------------------
#
# Every joint's error is one vector of 18 slots, computed for all joints alike (one code path,
# whatever the kinds); a static mask per joint (its kind, motor and limit) says which slots
# are rows. Functions take the poses of each entry's two sides gathered per entry (a world
# side has the identity pose at the origin), so entry r depends only on the poses of entry
# r: constraint rows replicate a joint once per row and one forward-mode pass gives every
# row's Jacobian (see `dynamics.rows`).

SLOTS = {"point": (0, 1, 2), "line": (3, 4, 5), "align": (6, 7, 8), "lock": (9, 10, 11),
         "motor": (12, 13, 14), "cable": (15,), "lower": (16,), "upper": (17,)}
N_SLOTS = 18
ONE_SIDED = 15  # slots from here on are one-sided: energy s/2 min(e, 0)²
_KIND_TERMS = {"ball": ("point",), "hinge": ("point", "align"), "fixed": ("point", "align", "lock"),
               "slider": ("line", "align", "lock"), "distance": ("cable",)}


class Plan(NamedTuple):
    """Static row layout of the joints: bilateral rows, then one-sided rows.

    Attributes:
      mask:   (J, 18) numpy bools: which slots of each joint are rows.
      joint, slot: tuples (R,) joint index and slot of each row.
      body_a, body_b: tuples (R,) body indices of each row's sides.
      motor:  tuple (J,) motor index of each joint, -1 for none.
      n_bilateral, n_unilateral: row counts.
    """

    mask: np.ndarray
    joint: tuple
    slot: tuple
    body_a: tuple
    body_b: tuple
    motor: tuple
    n_bilateral: int
    n_unilateral: int


def plan(joint: Joint, motor: Motor) -> Plan:
    """The static row layout of `joint` and `motor` (structure only)."""
    motor_of = [-1] * joint.size
    for m, j in enumerate(motor.joint):
        motor_of[j] = m
    mask = np.zeros((joint.size, N_SLOTS), bool)
    for j, kind in enumerate(joint.kind):
        terms = _KIND_TERMS[kind] + (("motor",) if motor_of[j] >= 0 else ()) + (
            ("lower", "upper") if joint.limited[j] else ())
        for term in terms:
            mask[j, list(SLOTS[term])] = True
    rows = ([(j, k) for j in range(joint.size) for k in range(ONE_SIDED) if mask[j, k]]
            + [(j, k) for j in range(joint.size) for k in range(ONE_SIDED, N_SLOTS) if mask[j, k]])
    rows_joint = tuple(j for j, _ in rows)
    n_uni = int(mask[:, ONE_SIDED:].sum())
    return Plan(mask=mask, joint=rows_joint, slot=tuple(k for _, k in rows),
                body_a=tuple(joint.body_a[j] for j in rows_joint),
                body_b=tuple(joint.body_b[j] for j in rows_joint), motor=tuple(motor_of),
                n_bilateral=len(rows) - n_uni, n_unilateral=n_uni)


def _take(tree, index):
    idx = jnp.asarray(index, jnp.int32).reshape(-1)
    return jax.tree.map(lambda x: x[idx], tree)


def anchors(j: Joint, pos_a, quat_a, pos_b, quat_b) -> tuple[Array, Array]:
    """World anchor points p_a = x_a + R_a a_a and p_b, (E, 3)."""
    return pos_a + quat_rotate(quat_a, j.anchor_a), pos_b + quat_rotate(quat_b, j.anchor_b)


def hinge_axis(j: Joint, quat_b) -> Array:
    """World joint axis n = R_b â_b, (E, 3)."""
    return quat_rotate(quat_b, j.axis_b)


def hinge_angle(j: Joint, quat_a, quat_b) -> Array:
    """θ: signed angle of body a relative to body b about n = R_b â_b, (E,), rad.

    θ = atan2(n·(r_b × r_a), r_b·r_a) with r = R r̂ the reference directions (⊥ â, equal at
    build time, so θ = 0 there). Smooth except at θ = ±π (the branch cut of atan2).
    """
    r_a, r_b = quat_rotate(quat_a, j.ref_a), quat_rotate(quat_b, j.ref_b)
    n = hinge_axis(j, quat_b)
    return safe_atan2(jnp.sum(n * jnp.cross(r_b, r_a), axis=-1), jnp.sum(r_b * r_a, axis=-1))


def slider_position(j: Joint, pos_a, quat_a, pos_b, quat_b) -> Array:
    """s = n·(p_a - p_b): displacement of a's anchor along b's axis, (E,), m (0 at build)."""
    p_a, p_b = anchors(j, pos_a, quat_a, pos_b, quat_b)
    return jnp.sum(hinge_axis(j, quat_b) * (p_a - p_b), axis=-1)


def slot_errors(j: Joint, alpha, is_hinge, used, pos_a, quat_a, pos_b, quat_b) -> Array:
    """All 18 error slots of each entry, (E, 18) (p anchors, n = R_b â_b, r = R r̂):

      point (3): p_a - p_b                               ball (ADD Eq. 23 with l0 = 0)
      line  (3): (I - n nᵀ)(p_a - p_b)                   slider: a's anchor on b's line
      align (3): R_a â_a - R_b â_b                       ADD Eq. 24
      lock  (3): R_a r̂_a - R_b r̂_b                       Eq. 24 on the reference axis
      motor (3): R_a r̂_a - Rot(n, α) R_b r̂_b             ADD Eq. 25 (b̂ = r̂ ⊥ â)
      cable (1): L - |p_a - p_b|                         one-sided: acts when < 0
      lower (1): x - lo,  upper (1): hi - x              one-sided limits of x = θ (where
                                                         the static `is_hinge`) or s

    Only the terms named in the static `used` are computed; the other slots are 0.
    """
    def world(pos, quat, anchor, axis, ref):
        vectors = jnp.einsum("eij,ekj->eki", quat_to_mat(quat), jnp.stack([anchor, axis, ref], 1))
        return pos + vectors[:, 0], vectors[:, 1], vectors[:, 2]

    p_a, axis_a, r_a = world(pos_a, quat_a, j.anchor_a, j.axis_a, j.ref_a)
    p_b, n, r_b = world(pos_b, quat_b, j.anchor_b, j.axis_b, j.ref_b)
    delta = p_a - p_b
    along = jnp.sum(n * delta, axis=-1)
    zero = jnp.zeros_like(delta)
    out = {"point": delta, "line": delta - along[:, None] * n, "align": axis_a - n,
           "lock": r_a - r_b}
    out["motor"] = r_a - rotate_about(n, alpha, r_b) if "motor" in used else zero
    scalars = [j.rest_length - safe_norm(delta) if "cable" in used else along * 0.0]
    if "lower" in used:
        if any(is_hinge):
            theta = safe_atan2(jnp.sum(n * jnp.cross(r_b, r_a), axis=-1),
                               jnp.sum(r_b * r_a, axis=-1))
            x = jnp.where(jnp.asarray(is_hinge, bool), theta, along)
        else:
            x = along
        scalars += [x - j.lower, j.upper - x]
    else:
        scalars += [along * 0.0, along * 0.0]
    return jnp.concatenate([out[t] for t in ("point", "line", "align", "lock", "motor")]
                           + [jnp.stack(scalars, axis=-1)], axis=-1)


def used_terms(layout: Plan) -> tuple:
    """Static names of the terms that some joint uses."""
    return tuple(t for t, slots in SLOTS.items() if layout.mask[:, list(slots)].any())


def slot_stiffness(j: Joint, kp) -> Array:
    """Stiffness of each slot, (E, 18): k (point, line, cable), the angular stiffness (align,
    lock), kp (motor; 0 for joints without one), k_lim (limits)."""
    k, ka, kl = j.stiffness[:, None], j.angular_stiffness[:, None], j.limit_stiffness[:, None]
    ones = jnp.ones((1, 3), k.dtype)
    return jnp.concatenate([k * ones, k * ones, ka * ones, ka * ones, kp[:, None] * ones, k,
                            kl, kl], axis=-1)


def per_joint_motor(motor: Motor, target, layout: Plan) -> tuple[Array, Array]:
    """Motor target α (rad) and kp of each joint, (J,) each (0 for joints without a motor)."""
    has = np.asarray(layout.motor) >= 0
    if not motor.size:
        zero = jnp.zeros((len(layout.motor),), motor.kp.dtype)
        return zero, zero
    idx = jnp.asarray(np.maximum(layout.motor, 0), jnp.int32)
    return (jnp.where(jnp.asarray(has), target[idx], 0.0),
            jnp.where(jnp.asarray(has), motor.kp[idx], 0.0))


def energy_of_slots(error, stiffness, mask) -> Array:
    """Σ over the masked slots of s/2 e² (bilateral) or s/2 min(e, 0)² (one-sided), J."""
    one_sided = np.arange(N_SLOTS) >= ONE_SIDED
    e = jnp.where(jnp.asarray(one_sided)[None, :], jnp.minimum(error, 0.0), error)
    return jnp.sum(jnp.where(jnp.asarray(mask), 0.5 * stiffness * e * e, 0.0))


def joint_energy(joint: Joint, motor: Motor, target, layout: Plan, pos_a, quat_a, pos_b,
                 quat_b) -> Array:
    """Σ_j U_j: the energy of every joint, motor and limit (J), from per-joint poses."""
    alpha, kp = per_joint_motor(motor, target, layout)
    is_hinge = tuple(k == "hinge" for k in joint.kind)
    error = slot_errors(joint, alpha, is_hinge, used_terms(layout), pos_a, quat_a, pos_b, quat_b)
    return energy_of_slots(error, slot_stiffness(joint, kp), layout.mask)


def row_errors(joint: Joint, motor: Motor, target, layout: Plan, pos_a, quat_a, pos_b,
               quat_b) -> Array:
    """Errors e (R,) of every joint row (`layout`), from per-row poses."""
    if not layout.joint:
        return jnp.zeros((0,), pos_a.dtype)
    alpha, _ = per_joint_motor(motor, target, layout)
    rows = jnp.asarray(layout.joint, jnp.int32)
    is_hinge = tuple(joint.kind[j] == "hinge" for j in layout.joint)
    error = slot_errors(_take(joint, layout.joint), alpha[rows], is_hinge, used_terms(layout),
                        pos_a, quat_a, pos_b, quat_b)
    return jnp.take_along_axis(error, jnp.asarray(layout.slot, jnp.int32)[:, None], axis=1)[:, 0]


def row_stiffness(joint: Joint, motor: Motor, layout: Plan) -> Array:
    """Stiffness s (R,) of every joint row."""
    if not layout.joint:
        return jnp.zeros((0,), joint.stiffness.dtype)
    _, kp = per_joint_motor(motor, jnp.zeros((motor.size,), joint.stiffness.dtype), layout)
    stiffness = slot_stiffness(joint, kp)
    return stiffness[jnp.asarray(layout.joint, jnp.int32), jnp.asarray(layout.slot, jnp.int32)]


# --- velocity rows: joint and motor damping -----------------------------------------------------

class VelocityPlan(NamedTuple):
    """Static layout of the damping rows: (kind, joint, comp, motor or -1) per row."""

    kind: tuple
    joint: tuple
    comp: tuple
    motor: tuple
    body_a: tuple
    body_b: tuple


def velocity_plan(joint: Joint, motor: Motor) -> VelocityPlan:
    """Damping rows: hinge 1 (spin about n), ball 3 (relative spin, world axes), slider 1
    (sliding along n), distance 1 (rate of stretch), fixed 0; then one spin row per motor."""
    rows = []
    for j, kind in enumerate(joint.kind):
        if kind == "ball":
            rows += [("ball", j, c, -1) for c in range(3)]
        elif kind in ("hinge", "slider", "distance"):
            rows.append((kind, j, 0, -1))
    rows += [("hinge", j, 0, m) for m, j in enumerate(motor.joint)]
    kind, joint_of, comp, motor_of = (tuple(c) for c in zip(*rows)) if rows else ((),) * 4
    return VelocityPlan(kind=kind, joint=joint_of, comp=comp, motor=motor_of,
                        body_a=tuple(joint.body_a[j] for j in joint_of),
                        body_b=tuple(joint.body_b[j] for j in joint_of))


def velocity_rows(joint: Joint, motor: Motor, layout: VelocityPlan, pos_a, quat_a, pos_b,
                  quat_b) -> tuple[Array, Array, Array]:
    """Jacobians (V, 6) of each side and coefficients c (V,) of the damping rows.

    Each row is a relative velocity ẋ = G_a u_a + G_b u_b of a joint coordinate with the
    geometry of the given poses (the start of the step), and dissipates Δt c/2 ẋ²:
      hinge and motor: ẋ = n·(ω_a - ω_b), n = R_b â_b (ADD Eq. 26 projected on the axis:
                       only the free spin is damped, the constrained directions are not);
      ball:            ẋ = e_c·(ω_a - ω_b) for the world axes e_c;
      slider:          ẋ = n·(velocity of a's material point at p_a relative to b's);
      distance:        ẋ = d̂·(ṗ_a - ṗ_b), d̂ = (p_a - p_b)/|p_a - p_b|, damped only while
                       taut (|p_a - p_b| > L) at the start of the step.
    """
    dtype = pos_a.dtype
    if not layout.kind:
        empty = jnp.zeros((0, 6), dtype)
        return empty, empty, jnp.zeros((0,), dtype)
    j = _take(joint, layout.joint)
    kind = np.asarray(layout.kind)
    p_a, p_b = anchors(j, pos_a, quat_a, pos_b, quat_b)
    n = hinge_axis(j, quat_b)
    delta = p_a - p_b
    d = safe_normalize(delta)
    world = jnp.eye(3, dtype=dtype)[jnp.asarray(layout.comp, jnp.int32)]
    zero = jnp.zeros_like(n)

    def pick(hinge, ball, slider, distance):
        out = distance
        for name, value in (("hinge", hinge), ("ball", ball), ("slider", slider)):
            out = jnp.where(jnp.asarray(kind == name)[:, None], value, out)
        return out

    direction = pick(n, world, n, d)
    angular = jnp.asarray(np.isin(kind, ("hinge", "ball")))[:, None]
    lever_a = jnp.cross(p_a - pos_a, direction)
    lever_b = jnp.cross(jnp.where(jnp.asarray(kind == "slider")[:, None], p_a, p_b) - pos_b,
                        direction)
    jac_a = jnp.where(angular, jnp.concatenate([zero, direction], -1),
                      jnp.concatenate([direction, lever_a], -1))
    jac_b = -jnp.where(angular, jnp.concatenate([zero, direction], -1),
                       jnp.concatenate([direction, lever_b], -1))
    world_b = jnp.asarray(layout.body_b, jnp.int32).reshape(-1)[:, None] < 0
    jac_b = jnp.where(world_b, 0.0, jac_b)
    taut = (safe_norm(delta) > j.rest_length).astype(dtype)
    coef = jnp.where(jnp.asarray(kind == "distance"), taut, 1.0) * j.damping
    motor_of = np.asarray(layout.motor)
    if motor.size:
        kd = motor.kd[jnp.asarray(np.maximum(motor_of, 0), jnp.int32)]
        coef = jnp.where(jnp.asarray(motor_of >= 0), kd, coef)
    return jac_a, jac_b, coef
