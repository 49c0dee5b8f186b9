"""`Scene`: a plain-Python builder that validates every input and builds (Model, State).

All structure (body count, shapes, the contact-candidate table, laws, solver settings) is
decided here with NumPy, once; the arrays it produces are the differentiable leaves.
Every bad argument raises `ValueError` naming the argument and the value received.
"""

from __future__ import annotations

import itertools
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import quat_rotate, quat_to_mat
from jaxcontact.models import mass as mass_properties
from jaxcontact.models import sdf
from jaxcontact.models.broad_phase import BroadPhase, default_capacity
from jaxcontact.models.contact import Contact
from jaxcontact.solvers import SOLVERS, check_solver
from jaxcontact.solvers.newton import Newton
from jaxcontact.types import (JOINT_KINDS, Body, ContactParams, ContactTable, Geom, Joint, Mesh,
                              Model, Motor, Obstacle, PairGroup, Plane, Shape, Spring, State,
                              WorldGroup)

_QUAT_TOL = 1e-6  # |q| may differ from 1 by this much (rounding of user-typed quaternions)


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


def _mat_to_quat(rot):
    """Unit quaternion (w, x, y, z) of a proper rotation matrix (largest-pivot method)."""
    trace = np.trace(rot)
    k = int(np.argmax([trace, rot[0, 0], rot[1, 1], rot[2, 2]]))
    if k == 0:
        w = 0.5 * math.sqrt(1.0 + trace)
        q = [w, (rot[2, 1] - rot[1, 2]) / (4 * w), (rot[0, 2] - rot[2, 0]) / (4 * w),
             (rot[1, 0] - rot[0, 1]) / (4 * w)]
    else:
        i, j, l = k - 1, k % 3, (k + 1) % 3
        v = 0.5 * math.sqrt(max(1.0 + rot[i, i] - rot[j, j] - rot[l, l], 0.0))
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (rot[l, j] - rot[j, l]) / (4 * v)
        q[1 + i] = v
        q[1 + j] = (rot[j, i] + rot[i, j]) / (4 * v)
        q[1 + l] = (rot[l, i] + rot[i, l]) / (4 * v)
    q = np.asarray(q)
    return q / np.linalg.norm(q)


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
        self._meshes: list[dict] = []
        self._obstacles: list[dict] = []
        self._joints: list[dict] = []
        self._motors: list[dict] = []
        # body pairs (min, max) that never collide (joined by a joint with collide=False)
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

    def _body(self, shape, size, mass, inertia, pos, quat, vel, ang_vel, surface, *,
              density=None, rounding=0.0, mesh=-1):
        """Record a body. Exactly one of `mass` and `density` is given; with density, mass
        and inertia come from the shape (`models.mass`); with mass, the inertia of the
        uniform solid of that mass unless `inertia` is given."""
        if (mass is None) == (density is None):
            raise ValueError(f"give exactly one of mass and density, got mass={mass!r}, "
                             f"density={density!r}")
        if mass is not None:
            mass = _number("mass", mass, positive=True)
        else:
            density = _number("density", density, positive=True)
        quat = _vector("quat", quat, 4)
        if abs(np.linalg.norm(quat) - 1.0) > _QUAT_TOL:
            raise ValueError(f"quat must be a unit quaternion (w, x, y, z), got {tuple(quat)} "
                             f"with norm {np.linalg.norm(quat):.6g}")
        inertia = (_vector("inertia", inertia, 3, positive=True) if inertia is not None
                   else None)
        self._bodies.append({
            "shape": shape, "size": size, "mass": mass, "density": density, "inertia": inertia,
            "rounding": rounding, "mesh": mesh,
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

    def add_sphere(self, radius, mass=None, pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                   ang_vel=(0.0, 0.0, 0.0), *, quat=(1.0, 0.0, 0.0, 0.0), inertia=None,
                   density=None, friction=None, stiffness=None, damping=None) -> int:
        """Add a solid sphere. Returns its body index.

        Give `mass` (kg; inertia 2/5 m r² unless `inertia` is given) or `density` (kg/m³).
        """
        r = _number("radius", radius, positive=True)
        return self._body(Shape.SPHERE, np.array([r, 0.0, 0.0]), mass, inertia, pos, quat,
                          vel, ang_vel, self._surface(friction, stiffness, damping),
                          density=density)

    def add_box(self, half_size, mass=None, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), *, inertia=None, density=None,
                rounding=None, friction=None, stiffness=None, damping=None) -> int:
        """Add a solid box with slightly rounded edges and corners. Returns its body index.

        Args:
          half_size: a number (cube) or 3 half extents, m.
          mass, density, inertia: as for `add_sphere` (a uniform solid box).
          rounding: radius of the rounded edges and corners, m, in [0, min half size).
            Default 2% of the smallest half size. Box-box contact needs it > 0: a corner of
            one box is found against the other box's faces up to a penetration of twice
            the rounding (see `jaxcontact.models.geometry`). Resting on a face, the box's
            contact points are the centres of its 4 rounded corners.
        """
        if isinstance(half_size, numbers.Real) and not isinstance(half_size, bool):
            half_size = (half_size,) * 3
        h = _vector("half_size", half_size, 3, positive=True)
        rounding = 0.02 * float(np.min(h)) if rounding is None else _number(
            "rounding", rounding, low=0)
        if rounding >= np.min(h):
            raise ValueError(f"rounding must be smaller than the smallest half size "
                             f"{np.min(h):g}, got {rounding!r}")
        return self._body(Shape.BOX, h, mass, inertia, pos, quat, vel, ang_vel,
                          self._surface(friction, stiffness, damping), density=density,
                          rounding=rounding)

    def add_capsule(self, radius, half_length, mass=None, pos=(0.0, 0.0, 0.0),
                    quat=(1.0, 0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), *,
                    inertia=None, density=None, friction=None, stiffness=None,
                    damping=None) -> int:
        """Add a solid capsule: the segment from -half_length to +half_length on the body
        z axis, grown by `radius`. Returns its body index.

        `mass` or `density` and `inertia` as for `add_sphere` (a uniform solid capsule).
        """
        r = _number("radius", radius, positive=True)
        half = _number("half_length", half_length, positive=True)
        return self._body(Shape.CAPSULE, np.array([r, half, 0.0]), mass, inertia, pos, quat,
                          vel, ang_vel, self._surface(friction, stiffness, damping),
                          density=density)

    def add_mesh(self, vertices, mass=None, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                 vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), *, density=None,
                 contact_points=None, friction=None, stiffness=None, damping=None) -> int:
        """Add a convex rigid body: the convex hull of `vertices`. Returns its body index.

        Args:
          vertices: (V, 3) points in a frame placed at (`pos`, `quat`); their convex hull
            is the body. The body's own frame is moved to the hull's centre of mass and
            principal axes, so `state.pos` is the centre of mass, not `pos`.
          mass or density: the inertia is that of the uniform solid hull.
          contact_points: (P, 3) points in the same frame as `vertices`, on or inside the
            hull, to use as the body's contact points instead of the hull vertices (e.g. a
            grid on each face: ADD's supplement scales penalties by their number).
        Hull vertices are the body's contact points against everything else (ADD's point
        proxies); other bodies' points meet its face planes.
        """
        try:
            points = np.asarray(vertices, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"vertices must be a (V, 3) array of numbers, got {vertices!r}") \
                from None
        if points.ndim != 2 or points.shape[1] != 3 or not np.all(np.isfinite(points)):
            raise ValueError(f"vertices must be a finite (V, 3) array, got shape {points.shape}")
        hull, planes = mass_properties.convex_hull(points)
        volume_mass, com, moments, axes = mass_properties.convex_mesh(hull, 1.0)
        local = (hull - com) @ axes            # vertices in the principal frame
        if contact_points is not None:
            try:
                extra = np.asarray(contact_points, dtype=float)
            except (TypeError, ValueError):
                raise ValueError("contact_points must be a (P, 3) array of numbers, got "
                                 f"{contact_points!r}") from None
            if extra.ndim != 2 or extra.shape[1] != 3 or not np.all(np.isfinite(extra)):
                raise ValueError("contact_points must be a finite (P, 3) array, got shape "
                                 f"{extra.shape}")
            reach = np.max(extra @ planes[:, :3].T - planes[:, 3], axis=1)
            if np.any(reach > 1e-9 * max(1.0, float(np.max(np.abs(hull))))):
                raise ValueError("contact_points must lie on or inside the hull of vertices; "
                                 f"the farthest is {reach.max():.3g} m outside")
            local = (extra - com) @ axes
        normals = planes[:, :3] @ axes
        offsets = planes[:, 3] - planes[:, :3] @ com
        quat = _vector("quat", quat, 4)
        frame = np.asarray(quat_to_mat(jnp.asarray(quat / np.linalg.norm(quat))))
        centre = _vector("pos", pos, 3) + frame @ com
        rotation = frame @ axes
        self._meshes.append({"vertices": local, "planes": np.c_[normals, offsets],
                             "volume": volume_mass, "moments": moments})
        if mass is not None:
            mass = _number("mass", mass, positive=True)
        return self._body(Shape.MESH, np.zeros(3), mass, None, centre, _mat_to_quat(rotation),
                          vel, ang_vel, self._surface(friction, stiffness, damping),
                          density=density, mesh=len(self._meshes) - 1)

    def exclude_pair(self, body_a, body_b) -> None:
        """Never collide bodies `body_a` and `body_b` (e.g. links of a chain or a robot).

        `add_joint(..., collide=False)` (the default) does this for the bodies it joins.
        """
        self._check_pair(body_a, body_b, world=False)
        self._no_collide.add((min(body_a, body_b), max(body_a, body_b)))

    def add_obstacle(self, grid, *, friction=None, stiffness=None, damping=None) -> int:
        """Add a static obstacle given by a signed distance grid (`jc.sdf.GridSDF`, e.g. from
        `jc.sdf.from_mesh` or `jc.sdf.from_heightfield`). Returns its index.

        Every body's contact points meet it (its `sample` is the distance, its gradient the
        normal).
        """
        if not isinstance(grid, sdf.GridSDF):
            raise ValueError(f"grid must be a jc.sdf.GridSDF, got {type(grid).__name__}")
        self._obstacles.append({"grid": grid, **self._surface(friction, stiffness, damping)})
        return len(self._obstacles) - 1

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

    def _check_pair(self, body_a, body_b, world=True):
        """ValueError unless body_a and body_b are distinct body indices (body_b may be -1,
        the world, when `world`)."""
        n = len(self._bodies)
        for name, index, low in (("body_a", body_a, 0), ("body_b", body_b, -1 if world else 0)):
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
    def _table(self, broad_phase: BroadPhase) -> ContactTable:
        shapes = sorted({b["shape"] for b in self._bodies})
        by_shape = {sh: tuple(i for i, b in enumerate(self._bodies) if b["shape"] == sh)
                    for sh in shapes}
        world = []
        for sh in shapes:
            bodies = by_shape[sh]
            if self._planes:
                world.append(WorldGroup(int(sh), "plane", bodies * len(self._planes),
                                        tuple(p for p in range(len(self._planes))
                                              for _ in bodies)))
            for o in range(len(self._obstacles)):
                world.append(WorldGroup(int(sh), "obstacle", bodies, (o,) * len(bodies)))
        n = len(self._bodies)
        excluded = tuple(sorted(a * n + b for a, b in self._no_collide))
        universe = {}
        for i, sa in enumerate(shapes):
            for sb in shapes[i:]:
                if sa == sb:
                    pairs = itertools.combinations(by_shape[sa], 2)
                else:
                    pairs = itertools.product(by_shape[sa], by_shape[sb])
                pairs = tuple(p for p in pairs if (min(p), max(p)) not in self._no_collide)
                if pairs:
                    universe[(sa, sb)] = pairs
        total = sum(len(p) for p in universe.values())
        brute = broad_phase.mode == "all_pairs" or (
            broad_phase.mode == "auto" and total <= broad_phase.max_all_pairs)
        groups = []
        for (sa, sb), pairs in universe.items():
            if brute:
                groups.append(PairGroup(int(sa), int(sb), pairs, len(pairs)))
            else:
                members = len(set(by_shape[sa]) | set(by_shape[sb]))
                capacity = broad_phase.capacity or default_capacity(sa, sb) * members
                groups.append(PairGroup(int(sa), int(sb), (), min(capacity, len(pairs))))
        return ContactTable(world=tuple(world), pairs=tuple(groups), excluded=excluded,
                            broad_phase=None if brute else broad_phase)

    def _mass_inertia(self, b):
        """(mass, principal inertia) of a body record."""
        s = b["size"]
        if b["shape"] == Shape.MESH:
            m = self._meshes[b["mesh"]]
            mass = b["mass"] if b["mass"] is not None else b["density"] * m["volume"]
            return mass, m["moments"] * (mass / m["volume"])
        unit = {Shape.SPHERE: lambda: mass_properties.sphere(s[0], 1.0),
                Shape.BOX: lambda: mass_properties.box(s, 1.0),
                Shape.CAPSULE: lambda: mass_properties.capsule(s[0], s[1], 1.0)}[b["shape"]]()
        mass = b["mass"] if b["mass"] is not None else b["density"] * unit[0]
        inertia = b["inertia"] if b["inertia"] is not None else unit[1] * (mass / unit[0])
        return mass, inertia

    def build(self, contact: Contact | None = None, solver=None, dtype=None, broad_phase=None):
        """Freeze the scene into a `(Model, State)` pair.

        Args:
          contact: a `jc.Contact` (laws and their parameters); default `Contact()`.
          solver: solver settings: `jc.Newton(...)` (default), `jc.Descent(...)` or
            `jc.Dual(...)`. `Dual` needs the `linear` normal law and `huber` or `linear`
            friction (its rows are the compliance form of those quadratics).
          dtype: float dtype of every array; default JAX's default float (float32 unless
            `jax_enable_x64` is on).
          broad_phase: a `jc.BroadPhase`: how body pairs become contact candidates (default
            `BroadPhase()`: every pair in small scenes, sort and sweep in large ones).
        """
        contact = Contact() if contact is None else contact
        solver = Newton() if solver is None else solver
        if not isinstance(contact, Contact):
            raise ValueError(f"contact must be a jc.Contact, got {contact!r}")
        if not isinstance(solver, SOLVERS):
            raise ValueError("solver must be a jc.Newton, jc.Descent or jc.Dual, "
                             f"got {solver!r}")
        check_solver(solver, contact.normal, contact.friction)
        broad_phase = BroadPhase() if broad_phase is None else broad_phase
        if not isinstance(broad_phase, BroadPhase):
            raise ValueError(f"broad_phase must be a jc.BroadPhase, got {broad_phase!r}")
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
        obstacles, meshes = self._obstacles, self._meshes
        surface = ("friction", "stiffness", "damping")
        mass, inertia = zip(*(self._mass_inertia(b) for b in bodies))
        n_vert = max((len(m["vertices"]) for m in meshes), default=1)
        n_plane = max((len(m["planes"]) for m in meshes), default=1)

        def pad(rows, size):
            return np.concatenate([rows, np.repeat(rows[:1], size - len(rows), axis=0)])

        model = Model(
            body=Body(mass=arr(mass), inertia=arr(inertia)),
            geom=Geom(size=arr([b["size"] for b in bodies]),
                      rounding=arr([b["rounding"] for b in bodies]),
                      **{k: arr([b[k] for b in bodies]) for k in surface},
                      shape=tuple(Shape(b["shape"]) for b in bodies),
                      mesh=tuple(b["mesh"] for b in bodies)),
            mesh=Mesh(vertices=arr(np.reshape([pad(m["vertices"], n_vert) for m in meshes],
                                              (-1, n_vert, 3))),
                      planes=arr(np.reshape([pad(m["planes"], n_plane) for m in meshes],
                                            (-1, n_plane, 4))),
                      count=tuple(len(m["vertices"]) for m in meshes)),
            obstacle=Obstacle(grid=tuple(jax.tree.map(lambda x: jnp.asarray(x, dtype), o["grid"])
                                         for o in obstacles),
                              **{k: arr([o[k] for o in obstacles]) for k in surface}),
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
            gravity=arr(self.gravity), dt=arr(self.dt), table=self._table(broad_phase),
            solver=solver)
        state = State(pos=arr([b["pos"] for b in bodies]),
                      quat=arr([b["quat"] / np.linalg.norm(b["quat"]) for b in bodies]),
                      vel=arr([b["vel"] for b in bodies]),
                      ang_vel=arr([b["ang_vel"] for b in bodies]), time=arr(0.0))
        return model, state
