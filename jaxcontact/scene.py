"""`Scene`: a plain-Python builder that validates every input and builds (Model, State).

What is added is kept as typed records; `build()` turns them into the arrays of `Model` and
`State` (the differentiable leaves) and decides, once and with NumPy, the structure of the
step: its terms (`jaxcontact.terms`), each with its static table of elements, the contact
colliders per pair of kinds, and whether pairs are found by the broad phase. Every bad
argument raises `ValueError` naming the argument and the value (`jaxcontact.validate`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import validate as check
from jaxcontact.math import quat_to_mat_numpy
from jaxcontact.models import mass as mass_properties
from jaxcontact.models import sdf
from jaxcontact.models.broad_phase import PARTICLE, BroadPhase, Sweep, default_capacity
from jaxcontact.models.contact import Contact
from jaxcontact.models.contacts import (BodyObstacle, BodyPair, BodyPlane, Laws, ParticleBody,
                                        ParticleObstacle, ParticlePlane)
from jaxcontact.models.energy import UserEnergy
from jaxcontact.models.forces import Gravity
from jaxcontact.models.joints import KINDS as JOINT_KINDS
from jaxcontact.models.joints import JointTerm, LimitTerm, MotorTerm
from jaxcontact import meshes
from jaxcontact.models import elasticity
from jaxcontact.models import cloth as cloth_law
from jaxcontact.models.cloth import BendingTerm, MembraneTerm
from jaxcontact.models.solids import SolidTerm
from jaxcontact.models.springs import AttachmentTerm, SpringTerm
from jaxcontact.solvers import SOLVERS
from jaxcontact.solvers.newton import Newton
from jaxcontact.types import (Attachment, Body, Cloth, ContactParams, Geom, Joint, Mesh, Model,
                              Motor, Obstacle, Particle, Plane, Shape, Solid, Spring, State)

SURFACE = ("friction", "stiffness", "damping")


# --- records ----------------------------------------------------------------------------------

@dataclasses.dataclass
class BodyRecord:
    mass: float | None
    density: float | None
    inertia: np.ndarray | None
    pos: np.ndarray
    quat: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray
    solid: int = -1       # the geom whose uniform solid gives mass and inertia (-1: given)


@dataclasses.dataclass
class GeomRecord:
    body: int
    shape: Shape
    size: np.ndarray
    pos: np.ndarray       # in the body's frame (centre of mass, principal axes)
    quat: np.ndarray
    friction: float
    stiffness: float
    damping: float
    rounding: float = 0.0
    mesh: int = -1
    collide: bool = True  # False: drawn and carried, never in contact


@dataclasses.dataclass
class PlaneRecord:
    normal: np.ndarray
    offset: float
    friction: float
    stiffness: float
    damping: float


@dataclasses.dataclass
class MeshRecord:
    vertices: np.ndarray
    planes: np.ndarray
    volume: float
    moments: np.ndarray


@dataclasses.dataclass
class ObstacleRecord:
    grid: sdf.GridSDF
    friction: float
    stiffness: float
    damping: float


@dataclasses.dataclass
class SpringRecord:
    body_a: int
    body_b: int
    anchor_a: np.ndarray
    anchor_b: np.ndarray
    stiffness: float
    rest_length: float


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
    limited: bool


@dataclasses.dataclass
class MotorRecord:
    joint: int
    kp: float
    kd: float


@dataclasses.dataclass
class ParticleRecord:
    mass: float
    radius: float
    pos: np.ndarray
    vel: np.ndarray
    friction: float
    stiffness: float
    damping: float


@dataclasses.dataclass
class AttachmentRecord:
    particle: int
    body: int
    anchor: np.ndarray
    stiffness: float
    damping: float


@dataclasses.dataclass
class SolidRecord:
    """One `add_solid` call: T tetrahedra of one material."""
    corners: np.ndarray       # (T, 4) particle indices
    rest_inverse: np.ndarray  # (T, 3, 3)
    volume: np.ndarray        # (T,)
    density: float
    youngs_modulus: float
    poisson_ratio: float
    viscosity: float
    material: str


@dataclasses.dataclass
class ClothRecord:
    """One `add_cloth` call: T triangles."""
    corners: np.ndarray       # (T, 3) particle indices
    rest_inverse: np.ndarray  # (T, 2, 2)
    area: np.ndarray          # (T,)
    stencils: np.ndarray      # (T, 6) particle indices, -1 across a boundary edge
    curvature_map: np.ndarray  # (T, 3, 3)
    rest_angle: np.ndarray    # (T, 3)
    density: float
    stretch_stiffness: float
    bend_stiffness: float
    poisson_ratio: float
    damping: float


@dataclasses.dataclass
class EnergyRecord:
    fn: Callable
    bodies: np.ndarray
    particles: np.ndarray
    params: Any
    dissipation: bool


def _mat_to_quat(rot):
    """Unit quaternion (w, x, y, z) of a proper rotation matrix (largest-pivot method)."""
    trace = np.trace(rot)
    k = int(np.argmax([trace, rot[0, 0], rot[1, 1], rot[2, 2]]))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        q = [w, (rot[2, 1] - rot[1, 2]) / (4 * w), (rot[0, 2] - rot[2, 0]) / (4 * w),
             (rot[1, 0] - rot[0, 1]) / (4 * w)]
    else:
        i, j, l = k - 1, k % 3, (k + 1) % 3
        v = 0.5 * np.sqrt(max(1.0 + rot[i, i] - rot[j, j] - rot[l, l], 0.0))
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (rot[l, j] - rot[j, l]) / (4 * v)
        q[1 + i] = v
        q[1 + j] = (rot[j, i] + rot[i, j]) / (4 * v)
        q[1 + l] = (rot[l, i] + rot[i, l]) / (4 * v)
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def _box_size(half_size, rounding):
    """Validated (half sizes (3,), rounding) of a box; a number is a cube's half size."""
    if isinstance(half_size, (int, float)) and not isinstance(half_size, bool):
        half_size = (half_size,) * 3
    h = check.vector("half_size", half_size, 3, positive=True)
    rounding = 0.02 * float(np.min(h)) if rounding is None else check.number(
        "rounding", rounding, low=0)
    if rounding >= np.min(h):
        raise ValueError(f"rounding must be smaller than the smallest half size "
                         f"{np.min(h):g}, got {rounding!r}")
    return h, rounding


def _as_float(x, dtype):
    """A user parameter leaf as an array: floats in the scene's dtype, others as given."""
    x = jnp.asarray(x)
    return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x


def _rotation(quat):
    return quat_to_mat_numpy(quat)


class Scene:
    """Builds a scene of rigid bodies, particles, joints, springs and user terms over static
    planes and obstacles.

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
        self.dt = check.number("dt", dt, positive=True)
        self.gravity = check.vector("gravity", gravity, 3)
        self._defaults = {"friction": check.number("friction", friction, low=0),
                          "stiffness": check.number("stiffness", stiffness, positive=True),
                          "damping": check.number("damping", damping, low=0)}
        self._bodies: list[BodyRecord] = []
        self._geoms: list[GeomRecord] = []
        self._planes: list[PlaneRecord] = []
        self._springs: list[SpringRecord] = []
        self._meshes: list[MeshRecord] = []
        self._obstacles: list[ObstacleRecord] = []
        self._joints: list[JointRecord] = []
        self._motors: list[MotorRecord] = []
        self._particles: list[ParticleRecord] = []
        self._attachments: list[AttachmentRecord] = []
        self._solids: list[SolidRecord] = []
        self._cloths: list[ClothRecord] = []
        self._energies: list[EnergyRecord] = []
        # body pairs (min, max) that never collide (joined by a joint with collide=False)
        self._no_collide: set[tuple[int, int]] = set()

    # --- shared pieces ---
    def _surface(self, friction, stiffness, damping):
        d = self._defaults
        return {
            "friction": d["friction"] if friction is None else check.number(
                "friction", friction, low=0),
            "stiffness": d["stiffness"] if stiffness is None else check.number(
                "stiffness", stiffness, positive=True),
            "damping": d["damping"] if damping is None else check.number(
                "damping", damping, low=0),
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
            mass = check.number("mass", mass, positive=True)
        else:
            density = check.number("density", density, positive=True)
        record = BodyRecord(
            mass=mass, density=density,
            inertia=None if inertia is None else check.vector("inertia", inertia, 3,
                                                              positive=True),
            pos=check.vector("pos", pos, 3), quat=check.quaternion("quat", quat),
            vel=check.vector("vel", vel, 3), ang_vel=check.vector("ang_vel", ang_vel, 3),
            solid=len(self._geoms))
        self._bodies.append(record)
        self._geoms.append(GeomRecord(len(self._bodies) - 1, shape, size, np.zeros(3),
                                      np.array([1.0, 0.0, 0.0, 0.0]), rounding=rounding,
                                      mesh=mesh, **surface))
        return len(self._bodies) - 1

    def _body_index(self, name, value, world=True):
        return check.index(name, value, len(self._bodies), world=world)

    def _pair(self, body_a, body_b, world=True):
        """Validated (a, b) of two distinct bodies; with `world`, either may be -1."""
        a = self._body_index("body_a", body_a, world)
        b = self._body_index("body_b", body_b, world)
        if a == b:
            raise ValueError(f"body_b must differ from body_a, got {body_b!r} for both")
        return a, b

    def _frame(self, body):
        """(R, x) of a body at its build-time pose (identity and origin for the world)."""
        if body < 0:
            return np.eye(3), np.zeros(3)
        b = self._bodies[body]
        return _rotation(b.quat), b.pos

    def _world_point(self, body, local):
        rot, pos = self._frame(body)
        return pos + rot @ local

    # --- bodies ---
    def add_plane(self, normal=(0.0, 0.0, 1.0), offset=0.0, *, friction=None, stiffness=None,
                  damping=None) -> int:
        """Add the static half-space {x : n·x >= offset} (n is normalized). Returns its index."""
        self._planes.append(PlaneRecord(normal=check.direction("normal", normal),
                                        offset=check.number("offset", offset),
                                        **self._surface(friction, stiffness, damping)))
        return len(self._planes) - 1

    def add_sphere(self, radius, mass=None, pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                   ang_vel=(0.0, 0.0, 0.0), *, quat=(1.0, 0.0, 0.0, 0.0), inertia=None,
                   density=None, friction=None, stiffness=None, damping=None) -> int:
        """Add a solid sphere. Returns its body index.

        Give `mass` (kg; inertia 2/5 m r² unless `inertia` is given) or `density` (kg/m³).
        """
        r = check.number("radius", radius, positive=True)
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
        h, rounding = _box_size(half_size, rounding)
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
        r = check.number("radius", radius, positive=True)
        half = check.number("half_length", half_length, positive=True)
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
        points = check.points("vertices", vertices)
        hull, planes = mass_properties.convex_hull(points)
        volume_mass, com, moments, axes = mass_properties.convex_mesh(hull, 1.0)
        local = (hull - com) @ axes            # vertices in the principal frame
        if contact_points is not None:
            extra = check.points("contact_points", contact_points)
            reach = np.max(extra @ planes[:, :3].T - planes[:, 3], axis=1)
            if np.any(reach > 1e-9 * max(1.0, float(np.max(np.abs(hull))))):
                raise ValueError("contact_points must lie on or inside the hull of vertices; "
                                 f"the farthest is {reach.max():.3g} m outside")
            local = (extra - com) @ axes
        normals = planes[:, :3] @ axes
        offsets = planes[:, 3] - planes[:, :3] @ com
        frame = _rotation(check.quaternion("quat", quat))
        centre = check.vector("pos", pos, 3) + frame @ com
        if mass is not None:
            mass = check.number("mass", mass, positive=True)
        self._meshes.append(MeshRecord(local, np.c_[normals, offsets], volume_mass, moments))
        try:
            return self._body(Shape.MESH, np.zeros(3), mass, None, centre,
                              _mat_to_quat(frame @ axes), vel, ang_vel,
                              self._surface(friction, stiffness, damping), density=density,
                              mesh=len(self._meshes) - 1)
        except ValueError:
            self._meshes.pop()
            raise

    def add_body(self, mass, inertia, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                 vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0)) -> int:
        """Add a rigid body with given inertia and no geom: give it shapes with `add_geom`
        (a compound body), or none (a body that only joints and springs act on). Returns its
        body index.

        Args:
          mass: kg (> 0).
          inertia: (3,) principal moments of inertia about the centre of mass, kg m² (> 0).
          pos: the centre of mass, m (world). The body's state is the centre of mass.
          quat: the orientation of the principal axes (w, x, y, z; body to world).
          vel, ang_vel: initial linear (m/s) and angular (rad/s, world) velocity.
        """
        check.number("mass", mass, positive=True)
        check.vector("inertia", inertia, 3, positive=True)
        record = BodyRecord(
            mass=float(mass), density=None, inertia=np.asarray(inertia, float),
            pos=check.vector("pos", pos, 3), quat=check.quaternion("quat", quat),
            vel=check.vector("vel", vel, 3), ang_vel=check.vector("ang_vel", ang_vel, 3))
        self._bodies.append(record)
        return len(self._bodies) - 1

    def add_geom(self, body, kind, *, radius=None, half_size=None, half_length=None,
                 vertices=None, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), rounding=None,
                 friction=None, stiffness=None, damping=None, collide=True) -> int:
        """Attach a collision shape to `body` at a pose given in WORLD coordinates at the
        bodies' current poses (as for joints), stored in the body's frame. Returns its geom
        index. The geom adds no mass (`add_body` gives the body's inertia); geoms of one body
        never collide with each other.

        Args:
          body: a body index.
          kind: "sphere" (`radius`), "box" (`half_size`, optional `rounding` as for
            `add_box`), "capsule" (`radius`, `half_length` along the geom's z axis) or
            "mesh" (`vertices` (V, 3) in the geom's frame: their convex hull).
          pos, quat: the geom's frame in the world, m and (w, x, y, z).
          friction, stiffness, damping: its surface parameters (default: the scene's).
          collide: False for a shape that is only drawn (`jc.viz`) and never touches
            anything (MJCF's contype = conaffinity = 0).
        """
        b = self._body_index("body", body, world=False)
        check.boolean("collide", collide)
        check.choice("kind", kind, ("sphere", "box", "capsule", "mesh"))
        given = {"radius": radius, "half_size": half_size, "half_length": half_length,
                 "vertices": vertices, "rounding": rounding}
        needs = {"sphere": ("radius",), "box": ("half_size", "rounding"),
                 "capsule": ("radius", "half_length"), "mesh": ("vertices",)}[kind]
        for name, value in given.items():
            if value is not None and name not in needs:
                raise ValueError(f"{name} is not an argument of a {kind} geom, got {value!r}")
        shape, rounding_value, mesh = Shape[kind.upper()], 0.0, -1
        if kind == "sphere":
            size = np.array([check.number("radius", radius, positive=True), 0.0, 0.0])
        elif kind == "capsule":
            size = np.array([check.number("radius", radius, positive=True),
                             check.number("half_length", half_length, positive=True), 0.0])
        elif kind == "box":
            size, rounding_value = _box_size(half_size, rounding)
        else:
            size = np.zeros(3)
        rot_b, pos_b = self._frame(b)
        local_pos = rot_b.T @ (check.vector("pos", pos, 3) - pos_b)
        local_quat = _mat_to_quat(rot_b.T @ _rotation(check.quaternion("quat", quat)))
        surface = self._surface(friction, stiffness, damping)
        if kind == "mesh":
            hull, planes = mass_properties.convex_hull(check.points("vertices", vertices))
            volume, _, moments, _ = mass_properties.convex_mesh(hull, 1.0)
            self._meshes.append(MeshRecord(hull, planes, volume, moments))
            mesh = len(self._meshes) - 1
        self._geoms.append(GeomRecord(b, shape, size, local_pos, local_quat,
                                      rounding=rounding_value, mesh=mesh, collide=collide,
                                      **surface))
        return len(self._geoms) - 1

    def add_particle(self, mass, pos, vel=(0.0, 0.0, 0.0), *, radius=0.0, friction=None,
                     stiffness=None, damping=None) -> int:
        """Add a particle: a 3-DOF point mass. Returns its particle index.

        It collides with planes, obstacles and every body as a ball of `radius` (m, >= 0;
        0 is a point), with the same laws and friction as bodies and its own surface
        parameters. Its state is `state.particle_pos[p]`, `state.particle_vel[p]`; its mass
        `model.particle.mass[p]` (differentiable, like every parameter).
        """
        self._particles.append(ParticleRecord(
            mass=check.number("mass", mass, positive=True),
            radius=check.number("radius", radius, low=0), pos=check.vector("pos", pos, 3),
            vel=check.vector("vel", vel, 3), **self._surface(friction, stiffness, damping)))
        return len(self._particles) - 1

    def exclude_pair(self, body_a, body_b) -> None:
        """Never collide bodies `body_a` and `body_b` (e.g. links of a chain or a robot).

        `add_joint(..., collide=False)` (the default) does this for the bodies it joins.
        """
        a, b = self._pair(body_a, body_b, world=False)
        self._no_collide.add((min(a, b), max(a, b)))

    def add_obstacle(self, grid, *, friction=None, stiffness=None, damping=None) -> int:
        """Add a static obstacle given by a signed distance grid (`jc.sdf.GridSDF`, e.g. from
        `jc.sdf.from_mesh` or `jc.sdf.from_heightfield`). Returns its index.

        Every body's contact points and every particle meet it (its `sample` is the
        distance, its gradient the normal).
        """
        if not isinstance(grid, sdf.GridSDF):
            raise ValueError(f"grid must be a jc.sdf.GridSDF, got {type(grid).__name__}")
        self._obstacles.append(ObstacleRecord(grid, **self._surface(friction, stiffness,
                                                                    damping)))
        return len(self._obstacles) - 1

    # --- connections ---
    def add_spring(self, body_a, body_b=-1, *, stiffness, anchor_a=(0.0, 0.0, 0.0),
                   anchor_b=None, rest_length=None) -> int:
        """Add a distance spring U = k/2 (|p_a - p_b| - L)² (thesis Eq. 111). Returns its index.

        Args:
          body_a, body_b: indices of two bodies; either may be -1 for a fixed world point.
          stiffness: k, N/m (> 0). The `Dual` solver sees it as the compliance 1/k.
          anchor_a: attachment point in body a's frame (default its centre of mass), or a
            world point when body_a = -1.
          anchor_b: attachment point in body b's frame, or a world point when body_b = -1.
            Default: body b's centre, or for the world the current world position of
            anchor_a (so the spring starts at its rest length when that is left out too).
          rest_length: L >= 0, m. Default: the current distance of the two points. 0 makes a
            soft ball joint.
        """
        a, b = self._pair(body_a, body_b)
        k = check.number("stiffness", stiffness, positive=True)
        anchor_a = check.vector("anchor_a", anchor_a, 3)
        if a < 0:   # the world on side a: the same spring with its sides swapped
            if anchor_b is None:
                anchor_b = np.zeros(3)
            a, b, anchor_a, anchor_b = b, a, check.vector("anchor_b", anchor_b, 3), anchor_a
        world_a = self._world_point(a, anchor_a)
        if anchor_b is None:
            anchor_b = world_a if b == -1 else np.zeros(3)
        anchor_b = check.vector("anchor_b", anchor_b, 3)
        world_b = anchor_b if b == -1 else self._world_point(b, anchor_b)
        if rest_length is None:
            rest_length = float(np.linalg.norm(world_a - world_b))
        self._springs.append(SpringRecord(a, b, anchor_a, anchor_b, k, check.number(
            "rest_length", rest_length, low=0)))
        return len(self._springs) - 1

    def add_joint(self, kind, body_a, body_b=-1, *, anchor, axis=(0.0, 0.0, 1.0), stiffness,
                  damping=0.0, limit=None, limit_stiffness=None, rest_length=None,
                  collide=False, angular_stiffness=None, anchor_b=None) -> int:
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
          rest_length: L >= 0 of a "distance" joint (default: the current distance).
          collide: whether the two bodies may still collide with each other.
          angular_stiffness: k of the axis-alignment rows, N m (default: stiffness's value).
          anchor_b: "distance" only: the attachment point on body b (default: anchor).
        """
        check.choice("kind", kind, JOINT_KINDS)
        a, b = self._pair(body_a, body_b)
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
        (rot_a, pos_a), (rot_b, pos_b) = self._frame(a), self._frame(b)
        self._joints.append(JointRecord(
            kind=kind, body_a=a, body_b=b, anchor_a=rot_a.T @ (point - pos_a),
            anchor_b=rot_b.T @ (point_b - pos_b), axis_a=rot_a.T @ direction,
            axis_b=rot_b.T @ direction, ref_a=rot_a.T @ ref, ref_b=rot_b.T @ ref,
            stiffness=k, angular_stiffness=k_ang, damping=c, rest_length=rest, lower=float(lo),
            upper=float(hi), limit_stiffness=k_lim, limited=limit is not None))
        if not collide and b >= 0:
            self._no_collide.add((min(a, b), max(a, b)))
        return len(self._joints) - 1

    def add_motor(self, joint, kp, kd=0.0) -> int:
        """Add a position motor to a hinge (ADD Eq. 25-26). Returns its index m.

        The motor holds the hinge angle θ at the target `Control.motor[m]` (rad; 0 is the
        build-time pose) with stiffness kp (N m, > 0) and damps the relative spin about the
        axis with kd (N m s/rad, >= 0).
        """
        joint = check.index("joint", joint, len(self._joints))
        if self._joints[joint].kind != "hinge":
            raise ValueError(f"joint must be a hinge to carry a motor, got joint {joint!r} of "
                             f"kind {self._joints[joint].kind!r}")
        if any(m.joint == joint for m in self._motors):
            raise ValueError(f"joint {joint!r} already has a motor")
        self._motors.append(MotorRecord(joint, check.number("kp", kp, positive=True),
                                        check.number("kd", kd, low=0)))
        return len(self._motors) - 1

    def attach(self, particle, body=-1, anchor=None, *, stiffness, damping=0.0) -> int:
        """Tie particle `particle` to a point of body `body`, or to a world point (body -1).
        Returns the attachment's index.

        U = k/2 |x_p - p|² with p the anchor point, and the dissipation Δt c/2 |v_p - v(p)|²
        of their relative velocity.

        Args:
          particle: a particle index.
          body: a body index, or -1 for the world.
          anchor: the point in WORLD coordinates at build time (stored in the body's frame);
            default: the particle's current position.
          stiffness: k, N/m (> 0).
          damping: c, N s/m (>= 0).
        """
        p = check.index("particle", particle, len(self._particles))
        b = self._body_index("body", body)
        point = self._particles[p].pos if anchor is None else check.vector("anchor", anchor, 3)
        rot, pos = self._frame(b)
        self._attachments.append(AttachmentRecord(
            p, b, rot.T @ (point - pos), check.number("stiffness", stiffness, positive=True),
            check.number("damping", damping, low=0)))
        return len(self._attachments) - 1

    def _mesh_particles(self, points, pos, vel, radius, friction, stiffness, damping):
        """Particles for a mesh's vertices (own point mass 0: their masses are lumped from
        the elements' densities, `Model.particle_masses`). Returns the first index."""
        offset, velocity = check.vector("pos", pos, 3), check.vector("vel", vel, 3)
        radius = check.number("radius", radius, low=0)
        surface = self._surface(friction, stiffness, damping)
        first = len(self._particles)
        for x in points:
            self._particles.append(ParticleRecord(mass=0.0, radius=radius, pos=x + offset,
                                                  vel=velocity, **surface))
        return first

    def add_solid(self, verts, tets, *, density, youngs_modulus, poisson_ratio, viscosity=0.0,
                  material="neo_hookean", pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                  radius=0.0, friction=None, stiffness=None, damping=None):
        """Add an FEM solid of linear tetrahedra (`jc.meshes`). Returns its particle indices.

        Every vertex becomes a particle, colliding as a ball of `radius` like any particle;
        every tetrahedron an element of `model.solid`, with its own differentiable ρ, E, ν
        and η (`models/solids.py`). Vertex masses are lumped from the density (a quarter of
        each tetrahedron's ρV): `model.particle_masses` is the total, `model.particle.mass`
        only a point mass added on top (0 here).

        Args:
          verts: (V, 3) rest positions (m), in a frame placed at `pos`.
          tets: (T, 4) vertex indices, positively oriented (`jc.meshes.check_tets`, which
            rejects inverted or degenerate elements by index).
          density: ρ, kg/m³ (> 0).
          youngs_modulus: E, Pa (> 0). poisson_ratio: ν in (-1, 0.5).
          viscosity: η (Pa s, >= 0) of ADD's Green-strain-rate dissipation.
          material: "neo_hookean" (ADD), "stable_neo_hookean" (thesis Eq. 158) or
            "corotational".
          pos, vel: translation of the rest shape, and the initial velocity of every vertex.
          radius, friction, stiffness, damping: the vertices' contact, as `add_particle`.
        """
        if material not in elasticity.MATERIALS:
            raise ValueError(f"material must be one of {sorted(elasticity.MATERIALS)}, got "
                             f"{material!r}")
        points = check.points("verts", verts)
        volumes = meshes.check_tets(points, tets)
        tets = np.asarray(tets, np.int64)
        rho = check.number("density", density, positive=True)
        elasticity.lame(youngs_modulus, poisson_ratio)          # checks E and ν
        eta = check.number("viscosity", viscosity, low=0)
        used = np.zeros(len(points), bool)
        used[tets.reshape(-1)] = True
        if not np.all(used):
            raise ValueError(f"verts: vertex {int(np.argmin(used))} belongs to no tetrahedron")
        first = self._mesh_particles(points, pos, vel, radius, friction, stiffness, damping)
        rest = np.swapaxes(points[tets[:, 1:]] - points[tets[:, :1]], 1, 2)
        self._solids.append(SolidRecord(first + tets, np.linalg.inv(rest), volumes, rho,
                                        float(youngs_modulus), float(poisson_ratio), eta,
                                        material))
        return np.arange(first, first + len(points))

    def add_cloth(self, verts, tris, *, density, stretch_stiffness, bend_stiffness,
                  damping=0.0, poisson_ratio=0.0, pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                  radius=0.0, friction=None, stiffness=None, contact_damping=None):
        """Add a cloth of triangles (`jc.meshes.grid`). Returns its particle indices.

        Every vertex becomes a particle (collides as a ball of `radius` with planes,
        obstacles and rigid bodies); every triangle a St. Venant-Kirchhoff membrane element
        and a Kirchhoff plate bending element, its curvature read from the dihedral angles
        of its edges (`models/cloth.py`), with
        differentiable per-triangle parameters in `model.cloth`. Vertex masses are lumped
        from the area density (a third of each triangle's ρ_A A). Pin nodes with
        `scene.attach(p, -1, stiffness=...)`, or tie them to a body with `scene.attach(p, b)`.

        Args:
          verts: (V, 3) rest positions (m), in a frame placed at `pos`. Any rest shape: a
            curved rest shape bends back to itself.
          tris: (T, 3) vertex indices (`jc.meshes.check_tris` rejects degenerate ones).
          density: area density ρ_A, kg/m² (> 0).
          stretch_stiffness: k, N/m (> 0): Young's modulus times thickness.
          bend_stiffness: D, N m (>= 0): flexural rigidity, E t³ / (12 (1 − ν²)). The
            bending converges to the plate's on meshes whose vertices have 5-7 neighbours
            (`jc.meshes.grid`, unstructured meshes); a mesh with valence-4 vertices (a
            criss-cross grid) bends about 2.9 times too easily (design note 29).
          damping: c, N s/m (>= 0) of the membrane's strain-rate dissipation.
          poisson_ratio: ν in [0, 0.5) of the membrane and the bending, default 0.
          pos, vel: translation of the rest shape, and the initial velocity of every vertex.
          radius, friction, stiffness, contact_damping: the vertices' contact (`stiffness`
            and `contact_damping` are the contact's k_n and k_d, as `add_particle`'s
            `stiffness` and `damping`). The scene's default k_d (300 N s/m) suits bodies
            of about a kilogram. A cloth vertex weighs grams, so the default is many times
            its critical damping 2√(k_n m) (37 times for 1.65 g at k_n = 1e4 N/m). That
            brakes whatever rolls or slides on the cloth, and its lagged terms can keep
            Newton from converging (design note 33). Give a k_d near critical, or 0.
        """
        points = check.points("verts", verts)
        areas = meshes.check_tris(points, tris)
        tris = np.asarray(tris, np.int64)
        rho = check.number("density", density, positive=True)
        k = check.number("stretch_stiffness", stretch_stiffness, positive=True)
        bend = check.number("bend_stiffness", bend_stiffness, low=0)
        c = check.number("damping", damping, low=0)
        nu = check.number("poisson_ratio", poisson_ratio, low=0)
        if nu >= 0.5:
            raise ValueError(f"poisson_ratio must be in [0, 0.5), got {poisson_ratio!r}")
        used = np.zeros(len(points), bool)
        used[tris.reshape(-1)] = True
        if not np.all(used):
            raise ValueError(f"verts: vertex {int(np.argmin(used))} belongs to no triangle")
        stencils = cloth_law.bending_stencils(tris)
        safe, interior = cloth_law.gather_table(stencils)
        rest_angle = np.asarray(jax.vmap(cloth_law.edge_angles)(jnp.asarray(points[safe]),
                                                                jnp.asarray(interior)))
        rest = np.stack([np.linalg.inv(cloth_law.rest_frame(points[t])) for t in tris])
        first = self._mesh_particles(points, pos, vel, radius, friction, stiffness,
                                     contact_damping)
        self._cloths.append(ClothRecord(
            first + tris, rest, areas, np.where(stencils >= 0, first + stencils, -1),
            cloth_law.curvature_map(points, stencils), rest_angle, rho, k, bend, nu, c))
        return np.arange(first, first + len(points))

    def add_energy(self, fn, *, bodies=None, particles=None, params=None,
                   dissipation=False) -> int:
        """Add a user-defined term: the same mechanism the built-in physics uses. Returns t.

        Args:
          fn: fn(local, params) -> scalar for ONE element: a potential U (J) of the end of
            step configuration, or with `dissipation=True` a dissipation potential D (W) of
            the velocities (entering the step as Δt D). `local.pos` (kb, 3), `local.quat`
            (kb, 4), `local.vel` (kb, 3), `local.ang_vel` (kb, 3), `local.particle_pos`
            (kp, 3), `local.particle_vel` (kp, 3) are end-of-step values of the element's
            blocks (a world body, -1, at the origin at rest); `params` is the element's slice
            of `params`. It must be a jax function of them (it is differentiated twice).
          bodies: (E, kb) int body indices per element (-1 = the world), or None.
          particles: (E, kp) int particle indices per element, or None.
          params: a pytree of arrays with leading axis E (or None); stored as
            `model.energy[t]`, differentiable like every parameter.
          dissipation: fn is a dissipation potential of velocities.

        Newton and Descent solve scenes with user terms; Dual needs constraint rows and
        refuses them.
        """
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {fn!r}")
        check.boolean("dissipation", dissipation)
        if bodies is None and particles is None:
            raise ValueError("give bodies or particles (the blocks of each element), got "
                             "bodies=None, particles=None")
        b = (None if bodies is None else
             check.table("bodies", bodies, len(self._bodies), rows="world"))
        p = None if particles is None else check.table("particles", particles,
                                                       len(self._particles))
        count = (b if b is not None else p).shape[0]
        if b is not None and p is not None and b.shape[0] != p.shape[0]:
            raise ValueError(f"bodies and particles must have the same number of elements, got "
                             f"{b.shape[0]} and {p.shape[0]}")
        b = np.zeros((count, 0), np.int32) if b is None else b
        p = np.zeros((count, 0), np.int32) if p is None else p
        leaves = jax.tree.leaves(params)
        for leaf in leaves:
            shape = np.shape(leaf)
            if not shape or shape[0] != count:
                raise ValueError(f"params leaves must have a leading axis of the {count} "
                                 f"elements, got a leaf of shape {shape}")
        self._energies.append(EnergyRecord(fn, b, p, params, dissipation))
        return len(self._energies) - 1

    # --- build ---
    def _mass_inertia(self, b: BodyRecord):
        """(mass, principal inertia) of a body record: given, or of its solid's shape."""
        if b.solid < 0:
            return b.mass, b.inertia
        g = self._geoms[b.solid]
        s = g.size
        if g.shape == Shape.MESH:
            m = self._meshes[g.mesh]
            mass = b.mass if b.mass is not None else b.density * m.volume
            return mass, m.moments * (mass / m.volume)
        unit = {Shape.SPHERE: lambda: mass_properties.sphere(s[0], 1.0),
                Shape.BOX: lambda: mass_properties.box(s, 1.0),
                Shape.CAPSULE: lambda: mass_properties.capsule(s[0], s[1], 1.0)}[g.shape]()
        mass = b.mass if b.mass is not None else b.density * unit[0]
        inertia = b.inertia if b.inertia is not None else unit[1] * (mass / unit[0])
        return mass, inertia

    def _contact_terms(self, laws: Laws, broad_phase: BroadPhase) -> list:
        """The colliders: every kind pair present, with static element tables (of geoms) or
        broad-phase slots (decided here, once)."""
        geoms = self._geoms
        shapes = sorted({g.shape for g in geoms if g.collide})
        by_shape = {sh: tuple(i for i, g in enumerate(geoms) if g.shape == sh and g.collide)
                    for sh in shapes}
        n_vertices = max((len(m.vertices) for m in self._meshes), default=0)
        # geoms placed off their bodies' centres of mass, or not one geom per body
        placed = [g.body for g in geoms] != list(range(len(self._bodies))) or any(
            np.any(g.pos != 0.0) or np.any(g.quat != np.array([1.0, 0, 0, 0])) for g in geoms)
        out = []
        planes, obstacles = range(len(self._planes)), range(len(self._obstacles))
        for sh in shapes:
            members = by_shape[sh]
            if self._planes:
                out.append(BodyPlane(int(sh), members * len(planes),
                                     tuple(p for p in planes for _ in members), laws,
                                     n_vertices, placed=placed))
            for o in obstacles:
                out.append(BodyObstacle(int(sh), members, o, laws, n_vertices, placed=placed))
        particles = tuple(range(len(self._particles)))
        if particles and self._planes:
            out.append(ParticlePlane(particles * len(planes),
                                     tuple(p for p in planes for _ in particles), laws))
        for o in obstacles if particles else ():
            out.append(ParticleObstacle(particles, o, laws))
        # candidate pairs of geoms (shape_a <= shape_b) on different bodies that may collide,
        # then particles against each shape
        attached = {(a.body, a.particle) for a in self._attachments if a.body >= 0}

        def collide(i, j):
            a, b = geoms[i].body, geoms[j].body
            return a != b and (min(a, b), max(a, b)) not in self._no_collide

        universe = {}
        for i, sa in enumerate(shapes):
            for sb in shapes[i:]:
                pairs = (itertools.combinations(by_shape[sa], 2) if sa == sb
                         else itertools.product(by_shape[sa], by_shape[sb]))
                pairs = tuple(p for p in pairs if collide(*p))
                if pairs:
                    universe[(int(sa), int(sb))] = pairs
        for sh in shapes:
            pairs = tuple((g, p) for g in by_shape[sh] for p in particles
                          if (geoms[g].body, p) not in attached)
            if pairs:
                universe[(int(sh), PARTICLE)] = pairs
        total = sum(len(p) for p in universe.values())
        brute = broad_phase.mode == "all_pairs" or (
            broad_phase.mode == "auto" and total <= broad_phase.max_all_pairs)
        # small groups of body-particle pairs: all pairs, outside the sweep (BroadPhase)
        listed = {kinds: pairs for kinds, pairs in universe.items() if brute or (
            broad_phase.mode == "auto" and kinds[1] == PARTICLE
            and len(pairs) <= broad_phase.max_particle_pairs)}
        swept = {kinds: pairs for kinds, pairs in universe.items() if kinds not in listed}
        sweep = None
        if swept:
            n = len(geoms)
            swept_particles = particles if any(kb == PARTICLE for _, kb in swept) else ()
            objects = n + len(swept_particles)
            # a geom that never collides has a kind of no group: never a candidate
            kinds = (tuple(int(g.shape) if g.collide else -1 for g in geoms)
                     + (PARTICLE,) * len(swept_particles))
            of_body = [[] for _ in self._bodies]
            for g, geom in enumerate(geoms):
                of_body[geom.body].append(g)
            never = [pair for gs in of_body for pair in itertools.combinations(gs, 2)]
            never += [(min(i, j), max(i, j)) for a, b in self._no_collide
                      for i in of_body[a] for j in of_body[b]]
            excluded = sorted({i * objects + j for i, j in never}
                              | {g * objects + n + p for g, geom in enumerate(geoms)
                                 for p in swept_particles if (geom.body, p) in attached})
            groups = []
            for (ka, kb), pairs in swept.items():
                members = len({x for pair in pairs for x in pair})
                capacity = broad_phase.capacity or default_capacity(ka, kb) * members
                groups.append((ka, kb, min(capacity, len(pairs))))
            sweep = Sweep(broad_phase, kinds, tuple(groups), tuple(excluded),
                          placed=placed)
        for (ka, kb), pairs in universe.items():
            static = listed.get((ka, kb), ())
            capacity = 0 if static else dict(((g[0], g[1]), g[2]) for g in sweep.groups)[(ka, kb)]
            if kb == PARTICLE:
                out.append(ParticleBody(ka, static, laws, capacity, sweep, n_vertices,
                                        placed=placed))
            else:
                out.append(BodyPair(ka, kb, static, laws, capacity, sweep, n_vertices,
                                    placed=placed))
        return out

    def _terms(self, contact: Contact, broad_phase: BroadPhase) -> tuple:
        """Every term of the step, in a fixed order."""
        out = []
        if self._bodies:
            out.append(Gravity(len(self._bodies)))
        if self._particles:
            out.append(Gravity(len(self._particles), particles=True))
        laws = Laws(contact.normal, float(contact.power), contact.friction, contact.coupling,
                    float(contact.near_rigid), float(contact.friction_regularization))
        out += self._contact_terms(laws, broad_phase)
        for vector in (False, True):   # the row form by the rest length at build time
            springs = tuple(i for i, r in enumerate(self._springs)
                            if (r.rest_length == 0.0) == vector)
            if springs:
                out.append(SpringTerm(springs, vector))
        for kind in JOINT_KINDS:
            joints = tuple(j for j, r in enumerate(self._joints) if r.kind == kind)
            if joints:
                out.append(JointTerm(kind, joints))
        if self._motors:
            out.append(MotorTerm(tuple(range(len(self._motors))),
                                 tuple(m.joint for m in self._motors)))
        for kind in ("hinge", "slider"):
            joints = tuple(j for j, r in enumerate(self._joints) if r.kind == kind and r.limited)
            if joints:
                out.append(LimitTerm(kind, joints))
        if self._attachments:
            out.append(AttachmentTerm(len(self._attachments)))
        material = [r.material for r in self._solids for _ in range(len(r.corners))]
        for law in elasticity.MATERIALS:
            tets = tuple(i for i, m in enumerate(material) if m == law)
            if tets:
                out.append(SolidTerm(law, tets))
        triangles = sum(len(r.corners) for r in self._cloths)
        if triangles:
            out.append(MembraneTerm(triangles))
        if any(np.any(r.stencils[:, 3:] >= 0) for r in self._cloths):
            out.append(BendingTerm(triangles))
        for t, e in enumerate(self._energies):
            out.append(UserEnergy(e.fn, t, tuple(map(tuple, e.bodies.tolist())),
                                  tuple(map(tuple, e.particles.tolist())), e.dissipation))
        return tuple(out)

    def build(self, contact: Contact | None = None, solver=None, dtype=None, broad_phase=None):
        """Freeze the scene into a `(Model, State)` pair.

        Args:
          contact: a `jc.Contact` (laws and their parameters); default `Contact()`.
          solver: solver settings: `jc.Newton(...)` (default), `jc.Descent(...)` or
            `jc.Dual(...)`. `Dual` needs every term in compliance form: the `linear` normal
            law, `huber` or `linear` friction, no user energies (it says which term is not).
          dtype: float dtype of every array; default JAX's default float (float32 unless
            `jax_enable_x64` is on).
          broad_phase: a `jc.BroadPhase`: how body pairs become contact candidates (default
            `BroadPhase()`: every pair in small scenes, sort and sweep in large ones).
        """
        contact = Contact() if contact is None else contact
        solver = Newton() if solver is None else solver
        check.instance("contact", contact, Contact, "a jc.Contact")
        check.instance("solver", solver, SOLVERS, "a jc.Newton, jc.Descent or jc.Dual")
        broad_phase = BroadPhase() if broad_phase is None else broad_phase
        check.instance("broad_phase", broad_phase, BroadPhase, "a jc.BroadPhase")
        if not self._bodies and not self._particles:
            raise ValueError("the scene has no bodies or particles: add a sphere, a box or a "
                             "particle before build()")
        try:
            dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
        except TypeError:
            raise ValueError(f"dtype must be a float dtype, got {dtype!r}") from None
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"dtype must be a float dtype, got {dtype!r}")

        def arr(values, *trailing):
            return jnp.asarray(np.asarray(values, dtype=float).reshape((-1,) + trailing),
                               dtype=dtype)

        def column(records, name, *trailing):
            return arr([getattr(r, name) for r in records], *trailing)

        def stacked(records, name, *trailing):
            """A mesh field (per element of each record) over all records."""
            return arr(np.concatenate([np.reshape(getattr(r, name), (-1,) + trailing)
                                       for r in records] or [np.zeros((0,) + trailing)]),
                       *trailing)

        def stacked_int(records, name, width):
            return np.concatenate([getattr(r, name) for r in records]
                                  or [np.zeros((0, width), np.int64)]).tolist()

        def per_element(records, name):
            """A mesh-wide scalar repeated for each of its elements."""
            return arr([getattr(r, name) for r in records for _ in range(len(r.corners))])

        bodies, particles, geoms = self._bodies, self._particles, self._geoms
        mass, inertia = zip(*(self._mass_inertia(b) for b in bodies)) if bodies else ((), ())
        n_vert = max((len(m.vertices) for m in self._meshes), default=1)
        n_plane = max((len(m.planes) for m in self._meshes), default=1)

        def pad(rows, size):
            return np.concatenate([rows, np.repeat(rows[:1], size - len(rows), axis=0)])

        joints = self._joints
        model = Model(
            body=Body(mass=arr(mass), inertia=arr(inertia, 3)),
            geom=Geom(size=column(geoms, "size", 3), rounding=column(geoms, "rounding"),
                      **{k: column(geoms, k) for k in SURFACE},
                      pos=column(geoms, "pos", 3), quat=column(geoms, "quat", 4),
                      shape=tuple(Shape(g.shape) for g in geoms),
                      mesh=tuple(g.mesh for g in geoms), body=tuple(g.body for g in geoms)),
            mesh=Mesh(vertices=arr([pad(m.vertices, n_vert) for m in self._meshes], n_vert, 3),
                      planes=arr([pad(m.planes, n_plane) for m in self._meshes], n_plane, 4),
                      count=tuple(len(m.vertices) for m in self._meshes)),
            obstacle=Obstacle(grid=tuple(jax.tree.map(lambda x: jnp.asarray(x, dtype), o.grid)
                                         for o in self._obstacles),
                              **{k: column(self._obstacles, k) for k in SURFACE}),
            plane=Plane(normal=column(self._planes, "normal", 3),
                        offset=column(self._planes, "offset"),
                        **{k: column(self._planes, k) for k in SURFACE}),
            contact=ContactParams(friction_stiffness=jnp.asarray(contact.friction_stiffness,
                                                                 dtype),
                                  friction_eps=jnp.asarray(contact.friction_eps, dtype),
                                  smooth_width=jnp.asarray(contact.smooth_width, dtype),
                                  normal=contact.normal, power=float(contact.power),
                                  friction=contact.friction, coupling=contact.coupling,
                                  relinearize=contact.relinearize),
            spring=Spring(anchor_a=column(self._springs, "anchor_a", 3),
                          anchor_b=column(self._springs, "anchor_b", 3),
                          rest_length=column(self._springs, "rest_length"),
                          stiffness=column(self._springs, "stiffness"),
                          body_a=tuple(s.body_a for s in self._springs),
                          body_b=tuple(s.body_b for s in self._springs)),
            joint=Joint(**{f: column(joints, f, 3) for f in ("anchor_a", "anchor_b", "axis_a",
                                                              "axis_b", "ref_a", "ref_b")},
                        **{f: column(joints, f)
                           for f in ("stiffness", "angular_stiffness", "damping", "rest_length",
                                     "lower", "upper", "limit_stiffness")},
                        **{f: tuple(getattr(j, f) for j in joints)
                           for f in ("kind", "body_a", "body_b", "limited")}),
            motor=Motor(kp=column(self._motors, "kp"), kd=column(self._motors, "kd"),
                        joint=tuple(m.joint for m in self._motors)),
            particle=Particle(mass=column(particles, "mass"),
                              radius=column(particles, "radius"),
                              **{k: column(particles, k) for k in SURFACE}),
            attachment=Attachment(anchor=column(self._attachments, "anchor", 3),
                                  stiffness=column(self._attachments, "stiffness"),
                                  damping=column(self._attachments, "damping"),
                                  particle=tuple(a.particle for a in self._attachments),
                                  body=tuple(a.body for a in self._attachments)),
            solid=Solid(**{f: per_element(self._solids, f) for f in (
                "density", "youngs_modulus", "poisson_ratio", "viscosity")},
                        volume=stacked(self._solids, "volume"),
                        rest_inverse=stacked(self._solids, "rest_inverse", 3, 3),
                        tets=tuple(map(tuple, stacked_int(self._solids, "corners", 4))),
                        material=tuple(r.material for r in self._solids
                                       for _ in range(len(r.corners)))),
            cloth=Cloth(**{f: per_element(self._cloths, f) for f in (
                "density", "stretch_stiffness", "bend_stiffness", "poisson_ratio", "damping")},
                        area=stacked(self._cloths, "area"),
                        rest_inverse=stacked(self._cloths, "rest_inverse", 2, 2),
                        curvature_map=stacked(self._cloths, "curvature_map", 3, 3),
                        rest_angle=stacked(self._cloths, "rest_angle", 3),
                        tris=tuple(map(tuple, stacked_int(self._cloths, "corners", 3))),
                        stencils=tuple(map(tuple, stacked_int(self._cloths, "stencils", 6)))),
            energy=tuple(jax.tree.map(lambda x: _as_float(x, dtype), e.params)
                         for e in self._energies),
            gravity=jnp.asarray(self.gravity, dtype),
            dt=jnp.asarray(self.dt, dtype),
            terms=self._terms(contact, broad_phase), solver=solver)
        solver.check(model)
        state = State(pos=column(bodies, "pos", 3), quat=column(bodies, "quat", 4),
                      vel=column(bodies, "vel", 3), ang_vel=column(bodies, "ang_vel", 3),
                      time=jnp.asarray(0.0, dtype),
                      particle_pos=column(particles, "pos", 3),
                      particle_vel=column(particles, "vel", 3))
        return model, state
