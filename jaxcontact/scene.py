"""`Scene`: a plain-Python builder that validates every input and builds (Model, State).

All structure (body count, shapes, the contact-candidate table, laws, solver settings) is
decided here with NumPy, once; the arrays it produces are the differentiable leaves.
Every bad argument raises `ValueError` naming the argument and the value received.
"""

from __future__ import annotations

import itertools
import math
import numbers

import jax.numpy as jnp
import numpy as np

from jaxcontact.models.contact import Contact
from jaxcontact.math import quat_rotate, quat_to_mat
from jaxcontact.solvers import SOLVERS, check_solver
from jaxcontact.solvers.newton import Newton
from jaxcontact.types import (JOINT_KINDS, Body, ContactParams, ContactTable, Geom, Joint, Model,
                              Motor, Plane, Shape, Spring, State)

_QUAT_TOL = 1e-6  # |q| may differ from 1 by this much (rounding of user-typed quaternions)
_BOX_CORNERS = tuple(itertools.product((-1, 1), repeat=3))


def _number(name, value, *, low=None, positive=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return value


def _vector(name, value, size, *, positive=False):
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of {size} numbers, got {value!r}") from None
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {value!r} with shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and not np.all(arr > 0):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return arr


class Scene:
    """Builds a scene of spheres and boxes over static planes.

    Args:
      dt: time step, s.
      gravity: (3,) m/s².
      friction, stiffness, damping: default surface parameters of everything added later
        (Coulomb μ, normal stiffness k_n in N/m, normal damping k_d in N s/m).

    Example:
      scene = jc.Scene(dt=0.002)
      scene.add_plane()
      ball = scene.add_sphere(radius=0.05, mass=1.0, pos=(0, 0, 0.5))
      model, state = scene.build()
    """

    def __init__(self, dt=0.002, gravity=(0.0, 0.0, -9.81), *, friction=0.5, stiffness=1e5,
                 damping=300.0):
        self.dt = _number("dt", dt, positive=True)
        self.gravity = _vector("gravity", gravity, 3)
        self._defaults = {"friction": _number("friction", friction, low=0),
                          "stiffness": _number("stiffness", stiffness, positive=True),
                          "damping": _number("damping", damping, low=0)}
        self._bodies: list[dict] = []
        self._planes: list[dict] = []
        self._springs: list[dict] = []
        self._joints: list[dict] = []
        self._motors: list[dict] = []
        # body pairs (min, max) joined by a joint with collide=False: contact between them is
        # to be left out of the candidate table
        self._no_collide: set[tuple[int, int]] = set()

    # --- validation helpers ---
    def _surface(self, friction, stiffness, damping):
        d = self._defaults
        return {
            "friction": d["friction"] if friction is None else _number("friction", friction, low=0),
            "stiffness": (d["stiffness"] if stiffness is None
                          else _number("stiffness", stiffness, positive=True)),
            "damping": d["damping"] if damping is None else _number("damping", damping, low=0),
        }

    def _body(self, shape, size, mass, inertia, pos, quat, vel, ang_vel, surface):
        mass = _number("mass", mass, positive=True)
        quat = _vector("quat", quat, 4)
        if abs(np.linalg.norm(quat) - 1.0) > _QUAT_TOL:
            raise ValueError(f"quat must be a unit quaternion (w, x, y, z), got {tuple(quat)} "
                             f"with norm {np.linalg.norm(quat):.6g}")
        inertia = (_vector("inertia", inertia, 3, positive=True) if inertia is not None
                   else None)
        self._bodies.append({
            "shape": shape, "size": size, "mass": mass, "inertia": inertia,
            "pos": _vector("pos", pos, 3), "quat": quat, "vel": _vector("vel", vel, 3),
            "ang_vel": _vector("ang_vel", ang_vel, 3), **surface})
        return len(self._bodies) - 1

    # --- public builders ---
    def add_plane(self, normal=(0.0, 0.0, 1.0), offset=0.0, *, friction=None, stiffness=None,
                  damping=None) -> int:
        """Add the static half-space {x : n·x >= offset} (n is normalized). Returns its index."""
        n = _vector("normal", normal, 3)
        norm = np.linalg.norm(n)
        if norm < 1e-12:
            raise ValueError(f"normal must be non-zero, got {normal!r}")
        self._planes.append({"normal": n / norm, "offset": _number("offset", offset),
                             **self._surface(friction, stiffness, damping)})
        return len(self._planes) - 1

    def add_sphere(self, radius, mass, pos, vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), *,
                   quat=(1.0, 0.0, 0.0, 0.0), inertia=None, friction=None, stiffness=None,
                   damping=None) -> int:
        """Add a solid sphere (inertia 2/5 m r² unless given). Returns its body index."""
        r = _number("radius", radius, positive=True)
        return self._body(Shape.SPHERE, np.array([r, 0.0, 0.0]), mass, inertia, pos, quat,
                          vel, ang_vel, self._surface(friction, stiffness, damping))

    def add_box(self, half_size, mass, pos, quat=(1.0, 0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                ang_vel=(0.0, 0.0, 0.0), *, inertia=None, friction=None, stiffness=None,
                damping=None) -> int:
        """Add a solid box. It collides through its 8 corners only (no edge/face contact yet).

        `half_size` is a number (cube) or 3 half extents. Returns its body index.
        """
        if isinstance(half_size, numbers.Real) and not isinstance(half_size, bool):
            half_size = (half_size,) * 3
        h = _vector("half_size", half_size, 3, positive=True)
        return self._body(Shape.BOX, h, mass, inertia, pos, quat, vel, ang_vel,
                          self._surface(friction, stiffness, damping))

    def add_spring(self, body_a, body_b=-1, *, stiffness, anchor_a=(0.0, 0.0, 0.0),
                   anchor_b=None, rest_length=None) -> int:
        """Add a distance spring U = k/2 (|p_a - p_b| - L)² (thesis Eq. 111). Returns its index.

        Args:
          body_a: index of a body.
          body_b: index of another body, or -1 for a fixed world point.
          stiffness: k, N/m (> 0). The `Dual` solver sees it as the compliance 1/k.
          anchor_a: attachment point in body a's frame (default its centre of mass).
          anchor_b: attachment point in body b's frame, or a world point when body_b = -1.
            Default: body b's centre, or for the world the current world position of
            anchor_a (so the spring starts at its rest length when that is left out too).
          rest_length: L >= 0, m. Default: the current distance of the two points. 0 makes a
            soft ball joint.
        """
        self._check_pair(body_a, body_b)
        k = _number("stiffness", stiffness, positive=True)
        anchor_a = _vector("anchor_a", anchor_a, 3)
        world_a = self._world_point(body_a, anchor_a)
        if anchor_b is None:
            anchor_b = world_a if body_b == -1 else np.zeros(3)
        anchor_b = _vector("anchor_b", anchor_b, 3)
        world_b = anchor_b if body_b == -1 else self._world_point(body_b, anchor_b)
        if rest_length is None:
            rest_length = float(np.linalg.norm(world_a - world_b))
        self._springs.append({"body_a": int(body_a), "body_b": int(body_b), "anchor_a": anchor_a,
                              "anchor_b": anchor_b, "stiffness": k,
                              "rest_length": _number("rest_length", rest_length, low=0)})
        return len(self._springs) - 1

    def _check_pair(self, body_a, body_b):
        n = len(self._bodies)
        for name, index, low in (("body_a", body_a, 0), ("body_b", body_b, -1)):
            if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not (
                    low <= index < n):
                raise ValueError(f"{name} must be a body index in [{low}, {n}), got {index!r}")
        if body_a == body_b:
            raise ValueError(f"body_b must differ from body_a, got {body_b!r} for both")

    def add_joint(self, kind, body_a, body_b=-1, *, anchor, axis=(0.0, 0.0, 1.0), stiffness,
                  damping=0.0, limit=None, limit_stiffness=None, rest_length=None,
                  collide=False, angular_stiffness=None, anchor_b=None) -> int:
        """Add a soft joint (ADD §5.3; see `jc.Joint` for its energy). Returns its index.

        All geometry is given in WORLD coordinates at the bodies' current poses and stored in
        each body's frame.

        Args:
          kind: "ball", "hinge", "slider", "fixed" or "distance" (a one-sided cable).
          body_a: index of a body.
          body_b: index of another body, or -1 for the world.
          anchor: the joint point, m (for "distance": the attachment point on body a).
          axis: the hinge or slider axis (normalized; must be non-zero). Its sign sets the
            sign of the hinge angle θ (right-handed, a relative to b) and slider position.
          stiffness: k of the position rows, N/m (> 0).
          damping: viscous damping c >= 0 of the free coordinate(s): N m s/rad for hinges and
            balls (relative spin), N s/m for sliders and cables (cables only while taut).
          limit: (lo, hi) on the hinge angle (rad, within [-π, π]) or the slider position
            (m), both 0 at build time; hinges and sliders only.
          limit_stiffness: k_lim of the limit penalty (default: stiffness), N m/rad² or N/m.
          rest_length: L >= 0 of a "distance" joint (default: the current distance).
          collide: whether the two bodies may still collide with each other.
          angular_stiffness: k of the axis-alignment rows, N m (default: stiffness's value).
          anchor_b: "distance" only: the attachment point on body b (default: anchor).
        """
        if kind not in JOINT_KINDS:
            raise ValueError(f"kind must be one of {JOINT_KINDS}, got {kind!r}")
        self._check_pair(body_a, body_b)
        k = _number("stiffness", stiffness, positive=True)
        k_ang = k if angular_stiffness is None else _number(
            "angular_stiffness", angular_stiffness, positive=True)
        c = _number("damping", damping, low=0)
        if kind == "fixed" and c > 0:
            raise ValueError(f"damping must be 0 for a fixed joint (no free motion), "
                             f"got {damping!r}")
        if not isinstance(collide, bool):
            raise ValueError(f"collide must be a bool, got {collide!r}")
        point = _vector("anchor", anchor, 3)
        direction = _vector("axis", axis, 3)
        norm = np.linalg.norm(direction)
        if norm < 1e-12:
            raise ValueError(f"axis must be non-zero, got {axis!r}")
        direction = direction / norm
        helper = np.eye(3)[int(np.argmin(np.abs(direction)))]
        ref = np.cross(direction, helper)
        ref = ref / np.linalg.norm(ref)
        lo, hi, k_lim = 0.0, 0.0, k
        if limit is not None:
            if kind not in ("hinge", "slider"):
                raise ValueError(f"limit is only for hinge and slider joints, got limit={limit!r} "
                                 f"for kind {kind!r}")
            lo, hi = _vector("limit", limit, 2)
            if lo > hi:
                raise ValueError(f"limit must have lo <= hi, got {limit!r}")
            if kind == "hinge" and (lo < -math.pi or hi > math.pi):
                raise ValueError(f"limit of a hinge must lie in [-pi, pi] rad, got {limit!r}")
            if limit_stiffness is not None:
                k_lim = _number("limit_stiffness", limit_stiffness, positive=True)
        elif limit_stiffness is not None:
            raise ValueError(f"limit_stiffness needs a limit, got {limit_stiffness!r}")
        point_b = point
        if kind == "distance":
            if anchor_b is not None:
                point_b = _vector("anchor_b", anchor_b, 3)
            if rest_length is None:
                rest_length = float(np.linalg.norm(point - point_b))
            rest = _number("rest_length", rest_length, low=0)
        else:
            for name, value in (("rest_length", rest_length), ("anchor_b", anchor_b)):
                if value is not None:
                    raise ValueError(f"{name} is only for distance joints, got {value!r} for "
                                     f"kind {kind!r}")
            rest = 0.0
        frame_a, frame_b = self._frame(body_a), self._frame(body_b)
        self._joints.append({
            "kind": kind, "body_a": int(body_a), "body_b": int(body_b),
            "anchor_a": frame_a[0].T @ (point - frame_a[1]),
            "anchor_b": frame_b[0].T @ (point_b - frame_b[1]),
            "axis_a": frame_a[0].T @ direction, "axis_b": frame_b[0].T @ direction,
            "ref_a": frame_a[0].T @ ref, "ref_b": frame_b[0].T @ ref,
            "stiffness": k, "angular_stiffness": k_ang, "damping": c, "rest_length": rest,
            "lower": float(lo), "upper": float(hi), "limit_stiffness": k_lim,
            "limited": limit is not None})
        if not collide and body_b >= 0:
            self._no_collide.add((min(body_a, body_b), max(body_a, body_b)))
        return len(self._joints) - 1

    def add_motor(self, joint, kp, kd=0.0) -> int:
        """Add a position motor to a hinge (ADD Eq. 25-26). Returns its index m.

        The motor holds the hinge angle θ at the target `Control.motor[m]` (rad; 0 is the
        build-time pose) with stiffness kp (N m, > 0) and damps the relative spin about the
        axis with kd (N m s/rad, >= 0).
        """
        n = len(self._joints)
        if isinstance(joint, bool) or not isinstance(joint, numbers.Integral) or not (
                0 <= joint < n):
            raise ValueError(f"joint must be a joint index in [0, {n}), got {joint!r}")
        if self._joints[joint]["kind"] != "hinge":
            raise ValueError(f"joint must be a hinge to carry a motor, got joint {joint!r} of "
                             f"kind {self._joints[joint]['kind']!r}")
        if any(m["joint"] == joint for m in self._motors):
            raise ValueError(f"joint {joint!r} already has a motor")
        self._motors.append({"joint": int(joint), "kp": _number("kp", kp, positive=True),
                             "kd": _number("kd", kd, low=0)})
        return len(self._motors) - 1

    def _frame(self, body):
        """(R, x) of a body at its build-time pose (identity and origin for the world)."""
        if body < 0:
            return np.eye(3), np.zeros(3)
        b = self._bodies[body]
        quat = jnp.asarray(b["quat"] / np.linalg.norm(b["quat"]))
        return np.asarray(quat_to_mat(quat)), b["pos"]

    def _world_point(self, body, local):
        b = self._bodies[body]
        quat = jnp.asarray(b["quat"] / np.linalg.norm(b["quat"]))
        return b["pos"] + np.asarray(quat_rotate(quat, jnp.asarray(local)))

    # --- build ---
    def _table(self) -> ContactTable:
        point_body, point_plane, point_corner, point_round = [], [], [], []
        for i, b in enumerate(self._bodies):
            corners = [(0, 0, 0)] if b["shape"] == Shape.SPHERE else _BOX_CORNERS
            for p in range(len(self._planes)):
                for c in corners:
                    point_body.append(i), point_plane.append(p), point_corner.append(c)
                    point_round.append(int(b["shape"] == Shape.SPHERE))
        spheres = [i for i, b in enumerate(self._bodies) if b["shape"] == Shape.SPHERE]
        pairs = list(itertools.combinations(spheres, 2))
        return ContactTable(point_body=tuple(point_body), point_plane=tuple(point_plane),
                            point_corner=tuple(point_corner), point_round=tuple(point_round),
                            pair_a=tuple(a for a, _ in pairs), pair_b=tuple(b for _, b in pairs))

    @staticmethod
    def _inertia(b):
        if b["inertia"] is not None:
            return b["inertia"]
        m, s = b["mass"], b["size"]
        if b["shape"] == Shape.SPHERE:
            return np.full(3, 0.4 * m * s[0] ** 2)
        sq = (2.0 * s) ** 2
        return m / 12.0 * np.array([sq[1] + sq[2], sq[0] + sq[2], sq[0] + sq[1]])

    def build(self, contact: Contact | None = None, solver=None, dtype=None):
        """Freeze the scene into a `(Model, State)` pair.

        Args:
          contact: a `jc.Contact` (laws and their parameters); default `Contact()`.
          solver: solver settings: `jc.Newton(...)` (default), `jc.Descent(...)` or
            `jc.Dual(...)`. `Dual` needs the `linear` normal law and `huber` or `linear`
            friction (its rows are the compliance form of those quadratics).
          dtype: float dtype of every array; default JAX's default float (float32 unless
            `jax_enable_x64` is on).
        """
        contact = Contact() if contact is None else contact
        solver = Newton() if solver is None else solver
        if not isinstance(contact, Contact):
            raise ValueError(f"contact must be a jc.Contact, got {contact!r}")
        if not isinstance(solver, SOLVERS):
            raise ValueError("solver must be a jc.Newton, jc.Descent or jc.Dual, "
                             f"got {solver!r}")
        check_solver(solver, contact.normal, contact.friction)
        if not self._bodies:
            raise ValueError("the scene has no bodies: add a sphere or a box before build()")
        try:
            dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
        except TypeError:
            raise ValueError(f"dtype must be a float dtype, got {dtype!r}") from None
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"dtype must be a float dtype, got {dtype!r}")

        def arr(values):
            return jnp.asarray(np.asarray(values, dtype=float), dtype=dtype)

        bodies, planes, springs, joints = (self._bodies, self._planes, self._springs,
                                           self._joints)
        surface = ("friction", "stiffness", "damping")
        model = Model(
            body=Body(mass=arr([b["mass"] for b in bodies]),
                      inertia=arr([self._inertia(b) for b in bodies])),
            geom=Geom(size=arr([b["size"] for b in bodies]),
                      **{k: arr([b[k] for b in bodies]) for k in surface},
                      shape=tuple(Shape(b["shape"]) for b in bodies)),
            plane=Plane(normal=arr(np.reshape([p["normal"] for p in planes], (-1, 3))),
                        offset=arr([p["offset"] for p in planes]),
                        **{k: arr([p[k] for p in planes]) for k in surface}),
            contact=ContactParams(friction_stiffness=arr(contact.friction_stiffness),
                                  friction_eps=arr(contact.friction_eps),
                                  smooth_width=arr(contact.smooth_width), normal=contact.normal,
                                  power=float(contact.power), friction=contact.friction),
            spring=Spring(anchor_a=arr(np.reshape([s["anchor_a"] for s in springs], (-1, 3))),
                          anchor_b=arr(np.reshape([s["anchor_b"] for s in springs], (-1, 3))),
                          rest_length=arr([s["rest_length"] for s in springs]),
                          stiffness=arr([s["stiffness"] for s in springs]),
                          body_a=tuple(s["body_a"] for s in springs),
                          body_b=tuple(s["body_b"] for s in springs)),
            joint=Joint(**{f: arr(np.reshape([j[f] for j in joints], (-1, 3)))
                           for f in ("anchor_a", "anchor_b", "axis_a", "axis_b", "ref_a",
                                     "ref_b")},
                        **{f: arr([j[f] for j in joints])
                           for f in ("stiffness", "angular_stiffness", "damping", "rest_length",
                                     "lower", "upper", "limit_stiffness")},
                        **{f: tuple(j[f] for j in joints)
                           for f in ("kind", "body_a", "body_b", "limited")}),
            motor=Motor(kp=arr([m["kp"] for m in self._motors]),
                        kd=arr([m["kd"] for m in self._motors]),
                        joint=tuple(m["joint"] for m in self._motors)),
            gravity=arr(self.gravity), dt=arr(self.dt), table=self._table(), solver=solver)
        state = State(pos=arr([b["pos"] for b in bodies]),
                      quat=arr([b["quat"] / np.linalg.norm(b["quat"]) for b in bodies]),
                      vel=arr([b["vel"] for b in bodies]),
                      ang_vel=arr([b["ang_vel"] for b in bodies]), time=arr(0.0))
        return model, state
