"""Soft joints and their limits between two bodies (ADD §5.3), as constraint rows: a kind of
physics (`jaxcontact.models.kinds`): `Joint`, `add_joint`, `JointTerm` and `LimitTerm`.

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
stretch while taut (distance). Limits are one-sided rows on the hinge angle θ or the slider position s: x - lo >= 0 and hi - x >= 0.
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
from jaxcontact.types import Array, static

KINDS = ("ball", "hinge", "slider", "fixed", "distance")
VECTORS = ("anchor_a", "anchor_b", "axis_a", "axis_b", "ref_a", "ref_b")
_SCALARS = ("stiffness", "angular_stiffness", "damping", "rest_length", "lower", "upper",
            "limit_stiffness", "limit_damping")


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
    (`LimitTerm`: SAP's continuous damping, as contact's). Joint damping is a viscous
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


def add_joint(scene, kind, body_a, body_b=-1, *, anchor, axis=(0.0, 0.0, 1.0), stiffness,
              damping=0.0, limit=None, limit_stiffness=None, limit_damping=0.0,
              rest_length=None, collide=False, angular_stiffness=None,
              anchor_b=None) -> int:
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
        (m), both 0 at build time; hinges and sliders only.
      limit_stiffness: k_lim of the limit penalty (default: stiffness), N m/rad² or N/m.
      limit_damping: c_lim >= 0 of the limit while it pushes, N m s/rad or N s/m: the limit's
        torque is max(0, k_lim (lo - θ) - c_lim θ̇) (and the mirror at hi), continuous in
        the state (`LimitTerm`).
      rest_length: L >= 0 of a "distance" joint (default: the current distance).
      collide: whether the two bodies may still collide with each other.
      angular_stiffness: k of the axis-alignment rows, N m (default: stiffness's value).
      anchor_b: "distance" only: the attachment point on body b (default: anchor).
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
    (rot_a, pos_a), (rot_b, pos_b) = scene.frame(a), scene.frame(b)
    records = scene.records("joint")
    records.append(JointRecord(
        kind=kind, body_a=a, body_b=b, anchor_a=rot_a.T @ (point - pos_a),
        anchor_b=rot_b.T @ (point_b - pos_b), axis_a=rot_a.T @ direction,
        axis_b=rot_b.T @ direction, ref_a=rot_a.T @ ref, ref_b=rot_b.T @ ref,
        stiffness=k, angular_stiffness=k_ang, damping=c, rest_length=rest, lower=float(lo),
        upper=float(hi), limit_stiffness=k_lim, limit_damping=c_lim,
        limited=limit is not None))
    if not collide and b >= 0:
        scene.exclude_pair(a, b)
    return len(records) - 1



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
        return {"jac_a": jac_a, "jac_b": jac_b, "coef": coef}

    return jax.vmap(one)(start, params)


@dataclasses.dataclass(frozen=True)
class LimitTerm(terms.RowTerm):
    """Limits of hinges (on θ, rad) or sliders (on s, m): k_lim/2 (min(x - lo, 0)² +
    min(hi - x, 0)²) as two one-sided rows, damped by c_lim as contact is (SAP's linear
    dissipation, `models/contact.py`): each row is read a time τ = c_lim/k_lim later,
    e' = e(q⁺) ± τ ẋ (ẋ = G u, G frozen at the start of the step as for the joint's damping),
    with stiffness k_lim Δt/(Δt + τ), so that its impulse is Δt max(0, -k_lim e - c_lim ė) to
    first order in Δt, convex, and continuous in the state."""

    kind: str                # "hinge" | "slider"
    joints: tuple
    n_bodies = 2

    @property
    def name(self):
        return f"{self.kind} limit"

    def elements(self, model, state, control, stages):
        bodies, particles, start = two_bodies(model, state, self.joints)
        params = gather(model.joint, self.joints,
                         VECTORS + ("lower", "upper", "limit_stiffness", "limit_damping"))

        def rate(s, p):
            f = frames(dofs.local(s, jnp.zeros((12,), s.pos.dtype), model.dt), p)
            return damping_jacobians(self.kind, f, s.pos)

        params["jac_a"], params["jac_b"] = jax.vmap(rate)(start, params)
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    # a limit may start far outside its range (gymnasium's ant: its ankles 0.52 rad out,
    # k_lim = 7.1e5 on legs of 3e-4 kg m²): the exact Hessian k (∇e∇eᵀ + e∇²e) is then
    # strongly indefinite and Newton diverged; its Gauss-Newton part converges in 2-5
    # iterations (design note 57). The implicit gradients take the exact Hessian.
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        coord = hinge_angle(f) if self.kind == "hinge" else slider_position(f)
        tau = p["limit_damping"] / p["limit_stiffness"]
        ahead = coord + tau * velocity_rows(x, p)[0]
        error = jnp.stack([ahead - p["lower"], p["upper"] - ahead])
        stiffness = p["limit_stiffness"] * dt / (dt + tau)
        return (terms.unilateral(error, jnp.full((2,), stiffness)),)


def _pack(records, columns) -> Joint:
    return Joint(**{f: columns.column(records, f, 3) for f in VECTORS},
                 **{f: columns.column(records, f) for f in _SCALARS},
                 **{f: columns.static(records, f)
                    for f in ("kind", "body_a", "body_b", "limited")})


def _terms(records) -> list:
    """A term per joint kind present, then one per limited kind (hinge, slider)."""
    out = []
    for kind in KINDS:
        joints = tuple(j for j, r in enumerate(records) if r.kind == kind)
        if joints:
            out.append(JointTerm(kind, joints))
    for kind in ("hinge", "slider"):
        joints = tuple(j for j, r in enumerate(records) if r.kind == kind and r.limited)
        if joints:
            out.append(LimitTerm(kind, joints))
    return out


KIND = kinds.register(kinds.Kind("joint", _pack, _terms, (add_joint,),
                                  joins=kinds.body_pairs))
