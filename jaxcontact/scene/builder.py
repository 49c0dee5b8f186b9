"""`Scene`: a plain-Python builder that validates every input and records it.

What is added is kept as typed records: bodies, geoms, planes, meshes, obstacles and
particles here, and the records of every registered kind of physics (springs, joints, motors,
attachments, solids, cloth, user energies, drag: `jaxcontact.models.kinds`), whose builder hooks the
scene offers as its own methods (`scene.add_spring(...)`). `build()` compiles the records into
`(Model, State)` (`jaxcontact.scene.compile`). Every bad argument raises `ValueError` naming
the argument and the value (`jaxcontact.scene.validate`).
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np

from jaxcontact import validate as check
from jaxcontact.math import mat_to_quat_numpy, quat_to_mat_numpy
from jaxcontact.models import kinds
from jaxcontact.models import mass as mass_properties
from jaxcontact.models import sdf
from jaxcontact.scene import compile as compiler
from jaxcontact.scene import validate
from jaxcontact.types import Shape

CORE = ("body", "geom", "plane", "mesh", "obstacle", "particle")


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
class ParticleRecord:
    mass: float
    radius: float
    pos: np.ndarray
    vel: np.ndarray
    friction: float
    stiffness: float
    damping: float


class Scene:
    """Builds a scene of rigid bodies, particles, joints, springs and user terms over static
    planes and obstacles.

    Bodies, geoms, planes, obstacles and particles are added by this class's methods; the
    kinds of physics by their builder hooks, offered as methods of every scene:
    `add_spring` (`jaxcontact.models.springs`), `add_joint` (`models.joints`), `add_motor`
    (`models.motors`), `attach` (`models.attachments`), `add_solid` (`models.solids`),
    `add_cloth` (`models.cloth`), `add_energy` (`models.energy`), `add_drag`
    (`models.drag`) and `add_fluid` (`models.fluid`).

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
        self._defaults = validate.surface({}, friction, stiffness, damping)
        self._records: dict[str, list] = {name: [] for name in CORE + tuple(kinds.KINDS)}
        # body pairs (min, max), and (body, particle) pairs, that never collide
        self._no_collide: set[tuple[int, int]] = set()
        self._attached: set[tuple[int, int]] = set()

    def __getattr__(self, name):
        # called only for names the class does not define: the kinds' builder hooks
        hook = kinds.builder(name)
        if hook is None:
            raise AttributeError(f"'Scene' object has no attribute {name!r}")
        return types.MethodType(hook, self)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(kinds.builder_names()))

    # --- what builder hooks use ---
    def records(self, name) -> list:
        """The list of records of `name`: a kind's ("spring", ...) or "body", "geom",
        "plane", "mesh", "obstacle", "particle". Builder hooks append to it."""
        if name not in self._records:   # a kind registered after this scene was made
            if name not in kinds.KINDS:
                raise ValueError(f"name must be one of {sorted(self._records)}, got {name!r}")
            self._records[name] = []
        return self._records[name]

    def surface(self, friction, stiffness, damping) -> dict:
        """Validated surface parameters; None takes the scene's default."""
        return validate.surface(self._defaults, friction, stiffness, damping)

    def body_index(self, name, value, world=True) -> int:
        """Validated index of a body (argument `name`); with `world`, -1 (the world) too."""
        return check.index(name, value, len(self._records["body"]), world=world)

    def body_pair(self, body_a, body_b, world=True):
        """Validated (a, b) of two distinct bodies; with `world`, either may be -1."""
        a = self.body_index("body_a", body_a, world)
        b = self.body_index("body_b", body_b, world)
        if a == b:
            raise ValueError(f"body_b must differ from body_a, got {body_b!r} for both")
        return a, b

    def frame(self, body):
        """(R, x) of a body at its build-time pose (identity and origin for the world)."""
        if body < 0:
            return np.eye(3), np.zeros(3)
        b = self._records["body"][body]
        return quat_to_mat_numpy(b.quat), b.pos

    def world_point(self, body, local):
        """A point given in a body's frame, in the world at the body's build-time pose."""
        rot, pos = self.frame(body)
        return pos + rot @ local

    def mesh_particles(self, points, pos, vel, radius, friction, stiffness, damping) -> int:
        """Particles for a mesh's vertices (own point mass 0: their masses are lumped from
        the elements' densities, `Model.particle_masses`). Returns the first index."""
        offset, velocity = check.vector("pos", pos, 3), check.vector("vel", vel, 3)
        radius = check.number("radius", radius, low=0)
        surface = self.surface(friction, stiffness, damping)
        particles = self._records["particle"]
        first = len(particles)
        particles.extend(ParticleRecord(mass=0.0, radius=radius, pos=x + offset,
                                        vel=velocity, **surface) for x in points)
        return first

    def exclude_particle(self, particle, body) -> None:
        """Never collide particle `particle` with body `body` (an attachment ties them)."""
        self._attached.add((self.body_index("body", body, world=False),
                            check.index("particle", particle, len(self._records["particle"]))))

    def _body(self, shape, size, mass, inertia, pos, quat, vel, ang_vel, surface, *,
              density=None, rounding=0.0, mesh=-1):
        """Record a body with one geom at its centre. Exactly one of `mass` and `density` is
        given; with density, mass and inertia come from the shape (`models.mass`); with
        mass, the inertia of the uniform solid of that mass unless `inertia` is given."""
        mass, density = validate.mass_or_density(mass, density)
        bodies, geoms = self._records["body"], self._records["geom"]
        bodies.append(BodyRecord(
            mass=mass, density=density,
            inertia=None if inertia is None else check.vector("inertia", inertia, 3,
                                                              positive=True),
            pos=check.vector("pos", pos, 3), quat=check.quaternion("quat", quat),
            vel=check.vector("vel", vel, 3), ang_vel=check.vector("ang_vel", ang_vel, 3),
            solid=len(geoms)))
        geoms.append(GeomRecord(len(bodies) - 1, shape, size, np.zeros(3),
                                np.array([1.0, 0.0, 0.0, 0.0]), rounding=rounding, mesh=mesh,
                                **surface))
        return len(bodies) - 1

    # --- bodies ---
    def add_plane(self, normal=(0.0, 0.0, 1.0), offset=0.0, *, friction=None, stiffness=None,
                  damping=None) -> int:
        """Add the static half-space {x : n·x >= offset} (n is normalized). Returns its index."""
        planes = self._records["plane"]
        planes.append(PlaneRecord(normal=check.direction("normal", normal),
                                  offset=check.number("offset", offset),
                                  **self.surface(friction, stiffness, damping)))
        return len(planes) - 1

    def add_sphere(self, radius, mass=None, pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
                   ang_vel=(0.0, 0.0, 0.0), *, quat=(1.0, 0.0, 0.0, 0.0), inertia=None,
                   density=None, friction=None, stiffness=None, damping=None) -> int:
        """Add a solid sphere. Returns its body index.

        Give `mass` (kg; inertia 2/5 m r² unless `inertia` is given) or `density` (kg/m³).
        """
        r = check.number("radius", radius, positive=True)
        return self._body(Shape.SPHERE, np.array([r, 0.0, 0.0]), mass, inertia, pos, quat,
                          vel, ang_vel, self.surface(friction, stiffness, damping),
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
        h, rounding = validate.box_size(half_size, rounding)
        return self._body(Shape.BOX, h, mass, inertia, pos, quat, vel, ang_vel,
                          self.surface(friction, stiffness, damping), density=density,
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
                          vel, ang_vel, self.surface(friction, stiffness, damping),
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
        frame = quat_to_mat_numpy(check.quaternion("quat", quat))
        centre = check.vector("pos", pos, 3) + frame @ com
        meshes = self._records["mesh"]
        meshes.append(MeshRecord(local, np.c_[normals, offsets], volume_mass, moments))
        try:
            return self._body(Shape.MESH, np.zeros(3), mass, None, centre,
                              mat_to_quat_numpy(frame @ axes), vel, ang_vel,
                              self.surface(friction, stiffness, damping), density=density,
                              mesh=len(meshes) - 1)
        except ValueError:
            meshes.pop()
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
        record = BodyRecord(
            mass=check.number("mass", mass, positive=True), density=None,
            inertia=check.vector("inertia", inertia, 3, positive=True),
            pos=check.vector("pos", pos, 3), quat=check.quaternion("quat", quat),
            vel=check.vector("vel", vel, 3), ang_vel=check.vector("ang_vel", ang_vel, 3))
        self._records["body"].append(record)
        return len(self._records["body"]) - 1

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
        b = self.body_index("body", body, world=False)
        check.boolean("collide", collide)
        validate.geom_arguments(kind, {"radius": radius, "half_size": half_size,
                                       "half_length": half_length, "vertices": vertices,
                                       "rounding": rounding})
        shape, rounding_value, mesh = Shape[kind.upper()], 0.0, -1
        if kind == "sphere":
            size = np.array([check.number("radius", radius, positive=True), 0.0, 0.0])
        elif kind == "capsule":
            size = np.array([check.number("radius", radius, positive=True),
                             check.number("half_length", half_length, positive=True), 0.0])
        elif kind == "box":
            size, rounding_value = validate.box_size(half_size, rounding)
        else:
            size = np.zeros(3)
        rot_b, pos_b = self.frame(b)
        local_pos = rot_b.T @ (check.vector("pos", pos, 3) - pos_b)
        local_quat = mat_to_quat_numpy(
            rot_b.T @ quat_to_mat_numpy(check.quaternion("quat", quat)))
        surface = self.surface(friction, stiffness, damping)
        if kind == "mesh":
            hull, planes = mass_properties.convex_hull(check.points("vertices", vertices))
            volume, _, moments, _ = mass_properties.convex_mesh(hull, 1.0)
            self._records["mesh"].append(MeshRecord(hull, planes, volume, moments))
            mesh = len(self._records["mesh"]) - 1
        geoms = self._records["geom"]
        geoms.append(GeomRecord(b, shape, size, local_pos, local_quat, rounding=rounding_value,
                                mesh=mesh, collide=collide, **surface))
        return len(geoms) - 1

    def add_particle(self, mass, pos, vel=(0.0, 0.0, 0.0), *, radius=0.0, friction=None,
                     stiffness=None, damping=None) -> int:
        """Add a particle: a 3-DOF point mass. Returns its particle index.

        It collides with planes, obstacles and every body as a ball of `radius` (m, >= 0;
        0 is a point), with the same laws and friction as bodies and its own surface
        parameters. Its state is `state.particle_pos[p]`, `state.particle_vel[p]`; its mass
        `model.particle.mass[p]` (differentiable, like every parameter).
        """
        particles = self._records["particle"]
        particles.append(ParticleRecord(
            mass=check.number("mass", mass, positive=True),
            radius=check.number("radius", radius, low=0), pos=check.vector("pos", pos, 3),
            vel=check.vector("vel", vel, 3), **self.surface(friction, stiffness, damping)))
        return len(particles) - 1

    def exclude_pair(self, body_a, body_b) -> None:
        """Never collide bodies `body_a` and `body_b` (e.g. links of a chain or a robot).

        `add_joint(..., collide=False)` (the default) does this for the bodies it joins.
        """
        a, b = self.body_pair(body_a, body_b, world=False)
        self._no_collide.add((min(a, b), max(a, b)))

    def add_obstacle(self, grid, *, friction=None, stiffness=None, damping=None) -> int:
        """Add a static obstacle given by a signed distance grid (`jc.sdf.GridSDF`, e.g. from
        `jc.sdf.from_mesh` or `jc.sdf.from_heightfield`). Returns its index.

        Every body's contact points and every particle meet it (its `sample` is the
        distance, its gradient the normal).
        """
        if not isinstance(grid, sdf.GridSDF):
            raise ValueError(f"grid must be a jc.sdf.GridSDF, got {type(grid).__name__}")
        obstacles = self._records["obstacle"]
        obstacles.append(ObstacleRecord(grid, **self.surface(friction, stiffness, damping)))
        return len(obstacles) - 1

    # --- build ---
    def build(self, contact=None, solver=None, dtype=None, broad_phase=None):
        """Freeze the scene into a `(Model, State)` pair (`jaxcontact.scene.compile`).

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
        contact, solver, dtype, broad_phase = validate.build_arguments(contact, solver, dtype,
                                                                       broad_phase)
        if not self._records["body"] and not self._records["particle"]:
            raise ValueError("the scene has no bodies or particles: add a sphere, a box or a "
                             "particle before build()")
        records = {**{name: [] for name in kinds.KINDS}, **self._records}
        model, state = compiler.pack(records, self._no_collide, self._attached, self.gravity,
                                     self.dt, contact, solver, dtype, broad_phase)
        solver.check(model)
        return model, state

