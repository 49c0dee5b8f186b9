"""Soft joints between two bodies (ADD §5.3), as constraint rows, with what acts on a hinge's
or slider's coordinate (limits, a spring, armature, friction loss): a kind of physics
(`jaxcontact.models.kinds`): `Joint`, `add_joint`, `add_joint_properties`, `JointTerm`,
`CoordinateTerm` and `FrictionLossTerm`.

Each joint kind is a term whose elements are the joints of that kind; a world side (body -1)
is the fixed identity frame, so its anchor and axes are world vectors. With p the world
anchor points, n = R_b â_b the joint axis and r = R r̂ the reference directions (⊥ â, equal at
build time, so the hinge angle is 0 there), the rows of each kind are:

    ball      p_a - p_b                                   3, stiffness k (ADD Eq. 23, l0 = 0)
    hinge     ball + R_a â_a - R_b â_b                    3 + 3, angular stiffness (Eq. 24)
    slider    (I - n nᵀ)(p_a - p_b) + align + lock         3 + 3 + 3
    fixed     ball + align + lock (r_a - r_b)             3 + 3 + 3
    distance  L - |p_a - p_b|                             1, one-sided: a cable

plus the damping of the joint's free coordinate(s), a velocity row ẋ = G u with its Jacobian
frozen at the start of the step and stiffness Δt c (ADD Eq. 26): the relative spin about n
(hinge), the relative spin (ball, world axes), the sliding along n (slider), the rate of
stretch while taut (distance).

A hinge's or slider's coordinate x (the hinge angle θ or the slider position s, 0 at build
time) with its rate ẋ = G u (the damping row's) carries, in one term per kind
(`CoordinateTerm`, one Gauss-Newton pass for all of them):

    limits        k_lim/2 min(e', 0)², e' = x - lo or hi - x, read a time τ = c_lim/k_lim
                  ahead (e' ± τ ẋ, SAP's continuous damping, as contact's), stiffness
                  k_lim Δt/(Δt + τ): the torque max(0, k_lim (lo - x) - c_lim ẋ)
    spring        k/2 (x - x_ref)²              (MuJoCo's stiffness and springref)
    armature      a/2 (ẋ - ẋ₀)²                 ẋ₀ the rate at the start of the step: the
                                                 kinetic energy a ẋ²/2 of the coordinate
                                                 (MuJoCo's armature, a rotor's inertia)
    friction loss Δt f H_δ(ẋ)                    (`FrictionLossTerm`) dry friction f opposing
                                                 ẋ, H_δ the Huber function of width δ: a
                                                 joint loaded below f creeps at most at δ =
                                                 `FRICTION_LOSS_WIDTH`
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.math import quat_to_mat, safe_atan2, safe_norm, safe_normalize
from jaxcontact.models import kinds
from jaxcontact.models.contact import huber_dissipation
from jaxcontact.types import Array, static

KINDS = ("ball", "hinge", "slider", "fixed", "distance")
# δ, the rate (rad/s or m/s) below which friction loss acts as a viscous damper of
# coefficient f/δ: small against the motions it resists, large enough that its curvature
# Δt f/δ stays within a few decades of the joints' inertia for Newton's directions.
FRICTION_LOSS_WIDTH = 1e-3
VECTORS = ("anchor_a", "anchor_b", "axis_a", "axis_b", "ref_a", "ref_b")
_SCALARS = ("stiffness", "angular_stiffness", "damping", "rest_length", "lower", "upper",
            "limit_stiffness", "limit_damping", "spring_stiffness", "spring_reference",
            "armature", "friction_loss")
_COORDINATE = ("lower", "upper", "limit_stiffness", "limit_damping", "spring_stiffness",
               "spring_reference", "armature", "friction_loss")


@struct.dataclass
class Joint(kinds.Params):
    """Soft joints: quadratic potentials k/2 |e|² of per-joint error vectors (ADD §5.3).

    Every vector below is in the frame of its body (world coordinates for a world side,
    body -1). Per kind, the error terms are (p = world anchor point, â axis, r̂ reference
    direction ⊥ â, R the body rotation; the module docstring has the formulas):

      ball:     p_a - p_b                                 (3 rows, ADD Eq. 23 with l0 = 0)
      hinge:    ball + R_a â_a - R_b â_b                  (3 + 3 rows, ADD Eq. 24)
      slider:   (I - n nᵀ)(p_a - p_b), n = R_b â_b, + orientation lock (3 + 6 rows)
      fixed:    ball + orientation lock                   (3 + 6 rows)
      distance: unilateral cable k/2 max(|p_a - p_b| - L, 0)²   (1 one-sided row)

    The orientation lock aligns both axes â and r̂ (two Eq. 24 terms). Hinges and sliders may
    carry limits on their coordinate x (hinge angle θ, slider displacement s): the one-sided
    penalty k_lim/2 (min(x - lo, 0)² + max(x - hi, 0)²), damped by c_lim while violated
    (`CoordinateTerm`: SAP's continuous damping, as contact's). Joint damping is a viscous
    dissipation Δt c/2 ẋ² of the joint's free coordinate(s) (module docstring).

    Attributes:
      anchor_a, anchor_b: (J, 3) attachment points, m.
      axis_a, axis_b:     (J, 3) unit joint axes â (hinge / slider axis).
      ref_a, ref_b:       (J, 3) unit reference directions r̂ ⊥ â; R_a r̂_a = R_b r̂_b at build
                          time, so the hinge angle is 0 there.
      stiffness:          (J,) k of the position rows, N/m.
      angular_stiffness:  (J,) k of the alignment rows (dimensionless errors), N m.
      damping:            (J,) c of the free coordinate: N m s/rad (hinge, ball), N s/m
                          (slider, distance).
      rest_length:        (J,) L of distance joints, m (unused by other kinds).
      lower, upper:       (J,) limits on the joint coordinate, rad or m (used where `limited`).
      limit_stiffness:    (J,) k_lim, N m/rad² (hinge) or N/m (slider).
      limit_damping:      (J,) c_lim of the limit while it pushes, N m s/rad or N s/m.
      spring_stiffness:   (J,) k of the coordinate's spring, N m/rad or N/m (0: none).
      spring_reference:   (J,) x_ref of the spring, rad or m.
      armature:           (J,) a, the coordinate's own inertia, kg m² or kg.
      friction_loss:      (J,) f, the coordinate's dry friction, N m or N.
      kind:               static tuple (J,) of names from `KINDS`.
      body_a, body_b:     static tuples (J,) of body indices (body_b may be -1, the world).
      limited:            static tuple (J,) of bools.
    """

    anchor_a: Array
    anchor_b: Array
    axis_a: Array
    axis_b: Array
    ref_a: Array
    ref_b: Array
    stiffness: Array
    angular_stiffness: Array
    damping: Array
    rest_length: Array
    lower: Array
    upper: Array
    limit_stiffness: Array
    limit_damping: Array
    spring_stiffness: Array
    spring_reference: Array
    armature: Array
    friction_loss: Array
    kind: tuple = static(default=())
    body_a: tuple = static(default=())
    body_b: tuple = static(default=())
    limited: tuple = static(default=())



@dataclasses.dataclass
class JointRecord:
    kind: str
    body_a: int
    body_b: int
    anchor_a: np.ndarray
    anchor_b: np.ndarray
    axis_a: np.ndarray
    axis_b: np.ndarray
    ref_a: np.ndarray
    ref_b: np.ndarray
    stiffness: float
    angular_stiffness: float
    damping: float
    rest_length: float
    lower: float
    upper: float
    limit_stiffness: float
    limit_damping: float
    limited: bool
    spring_stiffness: float = 0.0
    spring_reference: float = 0.0
    armature: float = 0.0
    friction_loss: float = 0.0


def add_joint(scene, kind, body_a, body_b=-1, *, anchor, axis=(0.0, 0.0, 1.0), stiffness,
              damping=0.0, limit=None, limit_stiffness=None, limit_damping=0.0,
              rest_length=None, collide=False, angular_stiffness=None,
              anchor_b=None, coordinate=0.0) -> int:
    """Add a soft joint (ADD §5.3; see `jc.Joint` for its energy). Returns its index.

    All geometry is given in WORLD coordinates at the bodies' current poses and stored in
    each body's frame.

    Args:
      kind: "ball", "hinge", "slider", "fixed" or "distance" (a one-sided cable).
      body_a, body_b: indices of two bodies; either may be -1 for the world
        (`add_joint("hinge", -1, b, ...)` and `add_joint("hinge", b, -1, ...)` are the
        same joint: its coordinate is that of the body relative to the world).
      anchor: the joint point, m (for "distance": the attachment point on body a).
      axis: the hinge or slider axis (normalized; must be non-zero). Its sign sets the
        sign of the hinge angle θ (right-handed, a relative to b) and slider position.
      stiffness: k of the position rows, N/m (> 0).
      damping: viscous damping c >= 0 of the free coordinate(s): N m s/rad for hinges and
        balls (relative spin), N s/m for sliders and cables (cables only while taut).
      limit: (lo, hi) on the hinge angle (rad, within [-π, π]) or the slider position
        (m), `coordinate` at build time; hinges and sliders only.
      limit_stiffness: k_lim of the limit penalty (default: stiffness), N m/rad² or N/m.
      limit_damping: c_lim >= 0 of the limit while it pushes, N m s/rad or N s/m: the limit's
        torque is max(0, k_lim (lo - θ) - c_lim θ̇) (and the mirror at hi), continuous in
        the state (`CoordinateTerm`).
      rest_length: L >= 0 of a "distance" joint (default: the current distance).
      collide: whether the two bodies may still collide with each other.
      angular_stiffness: k of the axis-alignment rows, N m (default: stiffness's value).
      anchor_b: "distance" only: the attachment point on body b (default: anchor).
      coordinate: the hinge angle (rad, within [-π, π]) or the slider position (m) at build
        time (default 0): limits, spring references (`add_joint_properties`), motor targets
        and tendon lengths are measured in it. (A hinge's angle lives in (-π, π]: a range
        wider than π either side of the build pose fits when the origin is its middle.)
    """
    check.choice("kind", kind, KINDS)
    a, b = scene.body_pair(body_a, body_b)
    k = check.number("stiffness", stiffness, positive=True)
    k_ang = k if angular_stiffness is None else check.number(
        "angular_stiffness", angular_stiffness, positive=True)
    c = check.number("damping", damping, low=0)
    if kind == "fixed" and c > 0:
        raise ValueError(f"damping must be 0 for a fixed joint (no free motion), "
                         f"got {damping!r}")
    check.boolean("collide", collide)
    point = check.vector("anchor", anchor, 3)
    direction = check.direction("axis", axis)
    lo, hi, k_lim = 0.0, 0.0, k
    if limit is not None:
        if kind not in ("hinge", "slider"):
            raise ValueError(f"limit is only for hinge and slider joints, got limit={limit!r} "
                             f"for kind {kind!r}")
        lo, hi = check.vector("limit", limit, 2)
        if lo > hi:
            raise ValueError(f"limit must have lo <= hi, got {limit!r}")
        if kind == "hinge" and (lo < -np.pi or hi > np.pi):
            raise ValueError(f"limit of a hinge must lie in [-pi, pi] rad, got {limit!r}")
        if limit_stiffness is not None:
            k_lim = check.number("limit_stiffness", limit_stiffness, positive=True)
    elif limit_stiffness is not None:
        raise ValueError(f"limit_stiffness needs a limit, got {limit_stiffness!r}")
    x0 = check.number("coordinate", coordinate)
    if x0 and kind not in ("hinge", "slider"):
        raise ValueError(f"coordinate is only for hinge and slider joints, got "
                         f"{coordinate!r} for kind {kind!r}")
    if kind == "hinge" and not -np.pi <= x0 <= np.pi:
        raise ValueError(f"coordinate of a hinge must lie in [-pi, pi] rad, got {coordinate!r}")
    c_lim = check.number("limit_damping", limit_damping, low=0)
    if limit is None and c_lim > 0:
        raise ValueError(f"limit_damping needs a limit, got {limit_damping!r}")
    point_b = point
    if kind == "distance":
        if anchor_b is not None:
            point_b = check.vector("anchor_b", anchor_b, 3)
        if rest_length is None:
            rest_length = float(np.linalg.norm(point - point_b))
        rest = check.number("rest_length", rest_length, low=0)
    else:
        for name, value in (("rest_length", rest_length), ("anchor_b", anchor_b)):
            if value is not None:
                raise ValueError(f"{name} is only for distance joints, got {value!r} for "
                                 f"kind {kind!r}")
        rest = 0.0
    if a < 0:
        # the world on side a: the same joint (DESIGN.md section 3). Its coordinate (θ, s)
        # is the body's motion relative to the world about / along the given axis in
        # either order, so limits and motor targets mean the same; swap the sides only
        a, b, point, point_b = b, a, point_b, point
    helper = np.eye(3)[int(np.argmin(np.abs(direction)))]
    ref = np.cross(direction, helper)
    ref = ref / np.linalg.norm(ref)
    ref_b = ref
    if kind == "hinge":      # θ = x0 now: b's reference turned back by x0 about the axis
        ref_b = (np.cos(x0) * ref - np.sin(x0) * np.cross(direction, ref))
    elif kind == "slider":   # s = n·(p_a - p_b) = x0 now
        point_b = point_b - x0 * direction
    (rot_a, pos_a), (rot_b, pos_b) = scene.frame(a), scene.frame(b)
    records = scene.records("joint")
    records.append(JointRecord(
        kind=kind, body_a=a, body_b=b, anchor_a=rot_a.T @ (point - pos_a),
        anchor_b=rot_b.T @ (point_b - pos_b), axis_a=rot_a.T @ direction,
        axis_b=rot_b.T @ direction, ref_a=rot_a.T @ ref, ref_b=rot_b.T @ ref_b,
        stiffness=k, angular_stiffness=k_ang, damping=c, rest_length=rest, lower=float(lo),
        upper=float(hi), limit_stiffness=k_lim, limit_damping=c_lim,
        limited=limit is not None))
    if not collide and b >= 0:
        scene.exclude_pair(a, b)
    return len(records) - 1



def add_joint_properties(scene, joint, *, spring_stiffness=0.0, spring_reference=0.0,
                         armature=0.0, friction_loss=0.0) -> int:
    """Give a hinge or a slider a spring, armature and friction loss (module docstring: the
    rows on its coordinate). Returns the joint's index.

    Args:
      joint: the joint's index (`add_joint`), a hinge or a slider.
      spring_stiffness: k >= 0, N m/rad or N/m: the spring k/2 (x - x_ref)².
      spring_reference: x_ref, rad or m, relative to the build-time pose.
      armature: a >= 0, kg m² or kg: inertia of the coordinate itself.
      friction_loss: f >= 0, N m or N: dry friction on the coordinate.
    """
    records = scene.records("joint")
    joint = check.index("joint", joint, len(records))
    record = records[joint]
    if record.kind not in ("hinge", "slider"):
        raise ValueError(f"joint must be a hinge or a slider, got joint {joint!r} of kind "
                         f"{record.kind!r}")
    record.spring_stiffness = check.number("spring_stiffness", spring_stiffness, low=0)
    record.spring_reference = check.number("spring_reference", spring_reference)
    record.armature = check.number("armature", armature, low=0)
    record.friction_loss = check.number("friction_loss", friction_loss, low=0)
    return joint


def frames(x, p):
    """World anchors, axes and reference directions of both sides of one joint."""
    rot_a, rot_b = quat_to_mat(x.quat[0]), quat_to_mat(x.quat[1])
    side = {}
    for k, rot, pos in (("a", rot_a, x.pos[0]), ("b", rot_b, x.pos[1])):
        side["p_" + k] = pos + rot @ p["anchor_" + k]
        side["axis_" + k] = rot @ p["axis_" + k]
        side["ref_" + k] = rot @ p["ref_" + k]
    return side


def hinge_angle(f):
    """θ: signed angle of body a relative to body b about n = R_b â_b, rad.

    θ = atan2(n·(r_b × r_a), r_b·r_a): smooth except at θ = ±π (the branch cut of atan2).
    """
    n, r_a, r_b = f["axis_b"], f["ref_a"], f["ref_b"]
    return safe_atan2(n @ jnp.cross(r_b, r_a), r_b @ r_a)


def slider_position(f):
    """s = n·(p_a - p_b): displacement of a's anchor along b's axis, m (0 at build time)."""
    return f["axis_b"] @ (f["p_a"] - f["p_b"])


def gather(model_part, index, names):
    idx = jnp.asarray(index, jnp.int32)
    return {name: getattr(model_part, name)[idx] for name in names}


def two_bodies(model, state, index):
    """(bodies (E, 2), start) of joints `index`."""
    j = np.asarray(index)
    bodies = np.stack([np.asarray(model.joint.body_a)[j], np.asarray(model.joint.body_b)[j]],
                      axis=1).astype(np.int32)
    empty = np.zeros((len(j), 0), np.int32)
    return jnp.asarray(bodies), jnp.asarray(empty), dofs.gather_start(state, bodies, empty)


def velocity_rows(x, p):
    """G u of frozen velocity rows: jac_a·(v_a, ω_a) + jac_b·(v_b, ω_b), (r,)."""
    u_a = jnp.concatenate([x.vel[0], x.ang_vel[0]])
    u_b = jnp.concatenate([x.vel[1], x.ang_vel[1]])
    return p["jac_a"] @ u_a + p["jac_b"] @ u_b


def damping_jacobians(kind, f, start_pos):
    """Jacobians (r, 6) of each side's damping rows at the start-of-step frames f."""
    n = f["axis_b"]
    if kind in ("hinge", "ball"):
        dirs = n[None, :] if kind == "hinge" else jnp.eye(3, dtype=n.dtype)
        spin = jnp.concatenate([jnp.zeros_like(dirs), dirs], axis=1)
        return spin, -spin
    if kind == "slider":
        d, point_b = n, f["p_a"]          # b's material point at a's anchor
    else:                                 # distance: the rate of stretch
        d, point_b = safe_normalize(f["p_a"] - f["p_b"]), f["p_b"]
    jac_a = jnp.concatenate([d, jnp.cross(f["p_a"] - start_pos[0], d)])
    jac_b = -jnp.concatenate([d, jnp.cross(point_b - start_pos[1], d)])
    return jac_a[None, :], jac_b[None, :]


@dataclasses.dataclass(frozen=True)
class JointTerm(terms.RowTerm):
    """The joints of one kind (module docstring); `joints` indexes `model.joint`."""

    kind: str
    joints: tuple
    n_bodies = 2

    @property
    def name(self):
        return f"{self.kind} joint"

    def elements(self, model, state, control, stages):
        bodies, particles, start = two_bodies(model, state, self.joints)
        params = gather(model.joint, self.joints, VECTORS + (
            "stiffness", "angular_stiffness", "damping", "rest_length"))
        if self.kind != "fixed":
            params.update(_start_damping(self.kind, start, params, model.dt))
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    # Newton's directions take the Gauss-Newton Hessian: a joint's errors are its load over
    # its stiffness, so the dropped Σ ψ'(e) ∇²e is that small against Jᵀ ψ'' J, at a fifth of
    # the exact Hessian's cost (the humanoid's 17 joints, 16 scenes: 1.1 against 6.5 ms;
    # design note 58). The gradient, the answer and the implicit gradients stay exact.
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        point = f["p_a"] - f["p_b"]
        k3 = jnp.full((3,), p["stiffness"])
        ka3 = jnp.full((3,), p["angular_stiffness"])
        align = terms.bilateral(f["axis_a"] - f["axis_b"], ka3)
        lock = terms.bilateral(f["ref_a"] - f["ref_b"], ka3)
        if self.kind == "ball":
            groups = (terms.bilateral(point, k3),)
        elif self.kind == "hinge":
            groups = (terms.bilateral(point, k3), align)
        elif self.kind == "slider":
            n = f["axis_b"]
            groups = (terms.bilateral(point - (n @ point) * n, k3), align, lock)
        elif self.kind == "fixed":
            groups = (terms.bilateral(point, k3), align, lock)
        else:
            cable = p["rest_length"] - safe_norm(point)
            groups = (terms.unilateral(cable[None], p["stiffness"][None]),)
        if self.kind == "fixed":
            return groups
        rates = velocity_rows(x, p)
        return groups + (terms.bilateral(rates, dt * p["coef"]),)


def _start_damping(kind, start, params, dt):
    """Frozen damping rows of every joint of a kind at the start of the step: jac_a, jac_b
    (E, r, 6) and coefficients (E, r)."""
    def one(s, p):
        x = dofs.local(s, jnp.zeros((12,), s.pos.dtype), dt)
        f = frames(x, p)
        jac_a, jac_b = damping_jacobians(kind, f, s.pos)
        coef = jnp.full((jac_a.shape[0],), p["damping"])
        if kind == "distance":   # a cable is damped only while taut
            taut = safe_norm(f["p_a"] - f["p_b"]) > p["rest_length"]
            coef = coef * taut.astype(coef.dtype)
        rate0 = jac_a @ s.velocity[:6] + jac_b @ s.velocity[6:]
        return {"jac_a": jac_a, "jac_b": jac_b, "coef": coef, "rate0": rate0}

    return jax.vmap(one)(start, params)


def _coordinate_elements(model, state, joints, kind):
    bodies, particles, start = two_bodies(model, state, joints)
    params = gather(model.joint, joints, VECTORS + ("damping",) + _COORDINATE)
    # a joint without a limit, in the term for its spring or armature: no limit rows' force
    limited = np.asarray([model.joint.limited[j] for j in joints], bool)
    params["limit_stiffness"] = jnp.where(limited, params["limit_stiffness"], 0.0)
    params.update(_start_damping(kind, start, params, model.dt))
    return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)


def limit_rows(x_now, rate, p, dt):
    """The two one-sided rows of limits lo <= x <= hi on a coordinate x with rate ẋ, read a
    time τ = c_lim/k_lim ahead, with stiffness k_lim Δt/(Δt + τ) (module docstring): the
    force max(0, k_lim (lo - x) - c_lim ẋ) and its mirror at hi. k_lim = 0: no force."""
    k = p["limit_stiffness"]
    tau = jnp.where(k > 0.0, p["limit_damping"] / jnp.where(k > 0.0, k, 1.0), 0.0)
    ahead = x_now + tau * rate
    error = jnp.stack([ahead - p["lower"], p["upper"] - ahead])
    return terms.unilateral(error, jnp.full((2,), k * dt / (dt + tau)))


def coordinate(kind, f):
    """The hinge angle θ or the slider position s of frames f."""
    return hinge_angle(f) if kind == "hinge" else slider_position(f)


@dataclasses.dataclass(frozen=True)
class CoordinateTerm(terms.RowTerm):
    """Rows on the coordinate of hinges (θ, rad) or sliders (s, m) (module docstring): the
    limits (two one-sided rows) where `limits`, the spring and the armature (one equality row
    each) where `properties`; a joint without one has a zero stiffness there."""

    kind: str                # "hinge" | "slider"
    joints: tuple
    limits: bool = True
    properties: bool = False
    n_bodies = 2

    @property
    def name(self):
        return f"{self.kind} coordinate"

    def elements(self, model, state, control, stages):
        return _coordinate_elements(model, state, self.joints, self.kind)

    # a limit may start far outside its range (gymnasium's ant: its ankles 0.52 rad out,
    # k_lim = 7.1e5 on legs of 3e-4 kg m²): the exact Hessian k (∇e∇eᵀ + e∇²e) is then
    # strongly indefinite and Newton diverged; its Gauss-Newton part converges in 2-5
    # iterations (design note 57). The implicit gradients take the exact Hessian.
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        x_now = coordinate(self.kind, frames(x, p))
        rate = velocity_rows(x, p)[0]
        groups = ()
        if self.limits:
            groups += (limit_rows(x_now, rate, p, dt),)
        if self.properties:
            groups += (terms.bilateral((x_now - p["spring_reference"])[None],
                                       p["spring_stiffness"][None]),
                       terms.bilateral((rate - p["rate0"][0])[None], p["armature"][None]))
        return groups


@dataclasses.dataclass(frozen=True)
class FrictionLossTerm(terms.EnergyTerm):
    """Friction loss of hinges (or sliders): Δt f H_δ(ẋ) (module docstring)."""

    kind: str
    joints: tuple
    n_bodies = 2
    convex = True

    @property
    def name(self):
        return f"{self.kind} friction loss"

    def elements(self, model, state, control, stages):
        return _coordinate_elements(model, state, self.joints, self.kind)

    def without_rows(self):
        return (f"{self.name} (dry friction on a joint coordinate) has no compliance form; "
                "use jc.Newton() or jc.Descent()")

    def potential(self, x, p, shared, dt):
        # H_δ is friction's Huber law (`models.contact`) of unit bound and stick stiffness 1/δ
        rate = velocity_rows(x, p)[0]
        return dt * p["friction_loss"] * huber_dissipation(rate * rate, 1.0,
                                                           1.0 / FRICTION_LOSS_WIDTH)


def _pack(records, columns) -> Joint:
    return Joint(**{f: columns.column(records, f, 3) for f in VECTORS},
                 **{f: columns.column(records, f) for f in _SCALARS},
                 **{f: columns.static(records, f)
                    for f in ("kind", "body_a", "body_b", "limited")})


def _terms(records) -> list:
    """A term per joint kind present; then per coordinate kind (hinge, slider) one term of
    the joints with limits, a spring or armature, and one of those with friction loss."""
    out = []
    for kind in KINDS:
        joints = tuple(j for j, r in enumerate(records) if r.kind == kind)
        if joints:
            out.append(JointTerm(kind, joints))
    for kind in ("hinge", "slider"):
        mine = [(j, r) for j, r in enumerate(records) if r.kind == kind]
        propertied = [(j, r) for j, r in mine if r.spring_stiffness or r.armature]
        acting = [j for j, r in mine if r.limited or r.spring_stiffness or r.armature]
        if acting:
            out.append(CoordinateTerm(kind, tuple(acting), any(r.limited for _, r in mine),
                                      bool(propertied)))
        lossy = tuple(j for j, r in mine if r.friction_loss > 0.0)
        if lossy:
            out.append(FrictionLossTerm(kind, lossy))
    return out


KIND = kinds.register(kinds.Kind("joint", _pack, _terms, (add_joint, add_joint_properties),
                                  joins=kinds.body_pairs))
