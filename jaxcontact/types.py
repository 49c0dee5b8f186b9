"""Pytrees of the simulator: Model, State, Control, StepInfo and their parts.

Array fields are pytree leaves: they may be traced, batched with `vmap` and differentiated.
Fields declared with `static` are structure (counts, shape kinds, the terms of the step, laws
and solver settings): they are hashed into the compiled program, so changing one recompiles
and changing a leaf's value never does. Shapes use N bodies, P particles, J joints.
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

Array = jax.Array


def static(**kwargs):
    """A dataclass field that is structure, not data (not a pytree leaf)."""
    return struct.field(pytree_node=False, **kwargs)


class Shape(enum.IntEnum):
    """Kinds of collision shape (of a geom; a body carries any number of geoms)."""

    SPHERE = 0
    BOX = 1
    CAPSULE = 2
    MESH = 3


@struct.dataclass
class Body:
    """Inertial properties of the N dynamic bodies.

    Attributes:
      mass:     (N,)   kg.
      inertia:  (N, 3) principal moments of inertia in the body frame, kg m².
    """

    mass: Array
    inertia: Array


@struct.dataclass
class Geom:
    """Collision shapes (geoms) and their surface parameters. Each geom is rigidly attached
    to one body at a pose in that body's frame; a body has any number of geoms (a compound
    body), and geoms of one body never collide with each other. `Scene.add_sphere`,
    `add_box`, ... make a body with one geom at its centre of mass (geom g of body g while
    every body is made that way); `Scene.add_body` and `Scene.add_geom` make compound bodies.

    Every shape is a convex core grown by a ball (a Minkowski sum): a sphere is a point
    grown by its radius, a capsule a segment along the geom's z axis grown by its radius, a
    box a box of half sizes `size - rounding` grown by `rounding`, a mesh its convex hull
    (not grown). See `jaxcontact.models.geometry`.

    Attributes:
      size:       (G, 3) sphere: (radius, 0, 0); box: half sizes along the geom axes;
                  capsule: (radius, half length of the axis segment, 0); mesh: zeros, m.
      rounding:   (G,)   radius of a box's rounded edges and corners, m (0 for other shapes).
      friction:   (G,)   Coulomb coefficient μ.
      stiffness:  (G,)   normal penalty stiffness k_n (N/m for the `linear` law).
      damping:    (G,)   normal contact damping k_d, N s/m (ADD Eq. 21).
      pos:        (G, 3) the geom's origin in its body's frame (centre of mass, principal
                  axes), m.
      quat:       (G, 4) the geom's orientation in its body's frame (w, x, y, z).
      shape:      static tuple of `Shape` per geom.
      mesh:       static tuple (G,): index into `Model.mesh` for mesh geoms, -1 otherwise.
      body:       static tuple (G,): the body each geom belongs to.
    """

    size: Array
    rounding: Array
    friction: Array
    stiffness: Array
    damping: Array
    pos: Array
    quat: Array
    shape: tuple = static()
    mesh: tuple = static(default=())
    body: tuple = static(default=())


@struct.dataclass
class Mesh:
    """Convex meshes of the mesh geoms, padded to common sizes.

    Its vertices are the geom's contact points (ADD's point proxies); its face planes are
    the geom's signed distance for other geoms' points (exact inside, a lower bound
    outside, near edges).

    Attributes:
      vertices: (M, V, 3) hull vertices in the geom's frame,
                padded by repeating the first vertex.
      planes:   (M, F, 4) unique face planes (n, o): n·x <= o inside; padded by repeating.
      count:    static tuple (M,) of the real vertex count of each mesh.
    """

    vertices: Array
    planes: Array
    count: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.count)


@struct.dataclass
class Obstacle:
    """Static obstacles given by signed distance grids (triangle meshes, heightfields).

    Attributes:
      grid:      tuple of `jaxcontact.models.sdf.GridSDF`, one per obstacle.
      friction, stiffness, damping: (O,) surface parameters, as in `Geom`.
    """

    grid: tuple
    friction: Array
    stiffness: Array
    damping: Array

    @property
    def size(self) -> int:
        return len(self.grid)


@struct.dataclass
class Plane:
    """Static half-spaces {x : normal·x >= offset} (the ground and walls).

    Attributes:
      normal:     (P, 3) unit outward normals.
      offset:     (P,)   plane offsets, m.
      friction, stiffness, damping: (P,) surface parameters, as in `Geom`.
    """

    normal: Array
    offset: Array
    friction: Array
    stiffness: Array
    damping: Array


@struct.dataclass
class Spring:
    """Distance springs between two bodies, or a body and a world anchor (thesis Eq. 111).

    U = k/2 C², C = |p_a - p_b| - L, with p_a = x_a + R_a a_a the attachment point on body a
    and p_b the one on body b (a world point for body -1). In compliance form (thesis Eq. 117,
    used by the `Dual` solver) its rows are e = Δ - L Δ/|Δ| (`models/springs.py`). A zero rest
    length makes a soft ball joint.

    Attributes:
      anchor_a:    (S, 3) attachment point in body a's frame, m.
      anchor_b:    (S, 3) attachment point in body b's frame (world coordinates if b = -1).
      rest_length: (S,)   L, m.
      stiffness:   (S,)   k, N/m.
      body_a, body_b: static tuples (S,) of body indices (body_b may be -1, the world).
    """

    anchor_a: Array
    anchor_b: Array
    rest_length: Array
    stiffness: Array
    body_a: tuple = static(default=())
    body_b: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.body_a)


JOINT_KINDS = ("ball", "hinge", "slider", "fixed", "distance")


@struct.dataclass
class Joint:
    """Soft joints: quadratic potentials k/2 |e|² of per-joint error vectors (ADD §5.3).

    Every vector below is in the frame of its body (world coordinates for a world side,
    body -1). Per kind, the error terms are (p = world anchor point, â axis, r̂ reference
    direction ⊥ â, R the body rotation; `jaxcontact.models.joints` has the formulas):

      ball:     p_a - p_b                                 (3 rows, ADD Eq. 23 with l0 = 0)
      hinge:    ball + R_a â_a - R_b â_b                  (3 + 3 rows, ADD Eq. 24)
      slider:   (I - n nᵀ)(p_a - p_b), n = R_b â_b, + orientation lock (3 + 6 rows)
      fixed:    ball + orientation lock                   (3 + 6 rows)
      distance: unilateral cable k/2 max(|p_a - p_b| - L, 0)²   (1 one-sided row)

    The orientation lock aligns both axes â and r̂ (two Eq. 24 terms). Hinges and sliders may
    carry limits on their coordinate x (hinge angle θ, slider displacement s): the one-sided
    penalty k_lim/2 (min(x - lo, 0)² + max(x - hi, 0)²). Joint damping is a viscous
    dissipation Δt c/2 ẋ² of the joint's free coordinate(s) (`jaxcontact.models.joints`).

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
      kind:               static tuple (J,) of names from `JOINT_KINDS`.
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
    kind: tuple = static(default=())
    body_a: tuple = static(default=())
    body_b: tuple = static(default=())
    limited: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.kind)


@struct.dataclass
class Motor:
    """Position motors on hinges (ADD Eq. 25-26), with targets α from `Control.motor`.

    Energy kp/2 |R_a r̂_a - Rot(n, α) R_b r̂_b|² (n the world hinge axis R_b â_b): it holds the
    hinge angle θ at α. Damping: the dissipation Δt kd/2 (n·(ω_a - ω_b))² (Eq. 26 projected
    on the hinge axis, n frozen at the start of the step).

    Attributes:
      kp:    (M,) stiffness, N m (per unit of the dimensionless error; ≈ N m/rad for small
             angle errors).
      kd:    (M,) damping, N m s/rad.
      joint: static tuple (M,) index of the hinge each motor drives.
    """

    kp: Array
    kd: Array
    joint: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.joint)


@struct.dataclass
class Particle:
    """Particles: 3-DOF point masses that collide as balls of their radius.

    Attributes:
      mass:      (P,) kg.
      radius:    (P,) m (0: a point).
      friction, stiffness, damping: (P,) surface parameters, as in `Geom`.
    """

    mass: Array
    radius: Array
    friction: Array
    stiffness: Array
    damping: Array

    @property
    def size(self) -> int:
        return self.mass.shape[-1]


@struct.dataclass
class Attachment:
    """Particles tied to points fixed in bodies, or to world points (body -1).

    U = k/2 |x_p - p_b|² and the dissipation Δt c/2 |v_p - v_b(p_b)|² (`models/springs.py`).

    Attributes:
      anchor:    (A, 3) the point in the body's frame (world coordinates for body -1), m.
      stiffness: (A,) k, N/m.
      damping:   (A,) c, N s/m.
      particle, body: static tuples (A,) of indices.
    """

    anchor: Array
    stiffness: Array
    damping: Array
    particle: tuple = static(default=())
    body: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.particle)


@struct.dataclass
class Solid:
    """Linear tetrahedra of FEM solids (`Scene.add_solid`, `models/solids.py`): one entry
    per tetrahedron, its corners particles.

    Attributes:
      density:        (T,) ρ, kg/m³ (lumped: ρV/4 to each corner, `Model.particle_masses`).
      youngs_modulus: (T,) E, Pa.
      poisson_ratio:  (T,) ν.
      viscosity:      (T,) η of the Green-strain-rate dissipation η |Ė|² per volume, Pa s.
      rest_inverse:   (T, 3, 3) D_m⁻¹ of the rest corners (`models/elasticity.py`), 1/m.
      volume:         (T,) rest volume, m³.
      tets:           static tuple (T,) of 4 particle indices.
      material:       static tuple (T,) of law names (`elasticity.MATERIALS`).
    """

    density: Array
    youngs_modulus: Array
    poisson_ratio: Array
    viscosity: Array
    rest_inverse: Array
    volume: Array
    tets: tuple = static(default=())
    material: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.tets)


@struct.dataclass
class Cloth:
    """Cloth triangles (`Scene.add_cloth`, `models/cloth.py`): one entry per triangle, its
    corners particles; each triangle carries membrane and plate bending energy.

    Attributes:
      density:           (T,) area density ρ_A, kg/m² (lumped: ρ_A A/3 to each corner).
      stretch_stiffness: (T,) k, the membrane's 2-D Young's modulus, N/m.
      bend_stiffness:    (T,) D, flexural rigidity, N m.
      poisson_ratio:     (T,) ν of the membrane and of the plate's bending.
      damping:           (T,) c of the strain-rate dissipation c |Ė|² per area, N s/m.
      rest_inverse:      (T, 2, 2) D_m⁻¹ of the rest triangle in its plane, 1/m.
      area:              (T,) rest area, m².
      curvature_map:     (T, 3, 3) M, the shape operator's components from the triangle's
                         three edge angles (rest geometry, `cloth.curvature_map`), 1/m.
      rest_angle:        (T, 3) rest dihedral angle θ̄ of each edge, rad (0 on boundaries).
      tris:     static tuple (T,) of 3 particle indices.
      stencils: static tuple (T,) of 6 particle indices: the corners, then the far corner
                across each edge (−1 on a boundary edge; `cloth.bending_stencils`).
    """

    density: Array
    stretch_stiffness: Array
    bend_stiffness: Array
    poisson_ratio: Array
    damping: Array
    rest_inverse: Array
    area: Array
    curvature_map: Array
    rest_angle: Array
    tris: tuple = static(default=())
    stencils: tuple = static(default=())

    @property
    def size(self) -> int:
        return len(self.tris)


@struct.dataclass
class ContactParams:
    """Contact and friction laws (DESIGN.md section 4) and their global parameters.

    Attributes:
      friction_stiffness: ()  k_f of the `huber` law, N s/m (thesis Eq. 132).
      friction_eps:       ()  regularization velocity ε of `pseudo_huber`, m/s.
      smooth_width:       ()  width δ of the `smooth` normal law, m.
      normal:    static law name: "linear" | "power" | "smooth".
      power:     static exponent p of the `power` law (p >= 2).
      friction:  static law name: "huber" | "pseudo_huber" | "tanh" | "linear".
      coupling:  static, how friction's bound follows the normal impulse: "cone" | "lagged".
      relinearize: static number of times a step's contact is linearized again at its
                 answer and solved again (`jc.Contact`).
    """

    friction_stiffness: Array
    friction_eps: Array
    smooth_width: Array
    normal: str = static(default="linear")
    power: float = static(default=3.0)
    friction: str = static(default="huber")
    coupling: str = static(default="cone")
    relinearize: int = static(default=0)


@struct.dataclass
class Model:
    """Everything that does not change from step to step.

    Attributes:
      body, geom, plane, contact, spring, joint, motor, mesh, obstacle: see their classes.
      particle, attachment, solid, cloth: see their classes.
      energy:   tuple, `model.energy[t]`: the parameters of user term t (`Scene.add_energy`),
                leaves with a leading axis of its element count.
      gravity:  (3,) m/s².
      dt:       ()   time step, s.
      terms:    static tuple of the step's terms (`jaxcontact.terms`), decided by the builder.
      solver:   static solver settings (e.g. `jc.Newton(...)`).
    """

    body: Body
    geom: Geom
    plane: Plane
    contact: ContactParams
    spring: Spring
    joint: Joint
    motor: Motor
    mesh: Mesh
    obstacle: Obstacle
    particle: Particle
    attachment: Attachment
    solid: Solid
    cloth: Cloth
    energy: tuple
    gravity: Array
    dt: Array
    terms: tuple = static()
    solver: Any = static()

    @property
    def n_body(self) -> int:
        """N, the number of rigid bodies."""
        return self.body.mass.shape[-1]

    @property
    def n_particle(self) -> int:
        """P, the number of particles."""
        return self.particle.mass.shape[-1]

    @property
    def has_meshes(self) -> bool:
        """Whether the scene has FEM solids or cloth (solver defaults differ: `jc.Newton`)."""
        return bool(self.solid.size or self.cloth.size)

    @property
    def particle_masses(self) -> Array:
        """(P,) every particle's mass, kg: its own point mass `particle.mass` plus its lumped
        share of the solid and cloth elements it is a corner of (ρV/4 per tetrahedron,
        ρ_A A/3 per triangle). The step uses this; it is differentiable in the densities."""
        mass = self.particle.mass
        for corners, share in ((self.solid.tets, self.solid.density * self.solid.volume / 4.0),
                               (self.cloth.tris, self.cloth.density * self.cloth.area / 3.0)):
            if len(corners):
                index = np.asarray(corners).reshape(-1)
                mass = mass.at[..., index].add(jnp.repeat(share, len(corners[0]), axis=-1))
        return mass

    @property
    def n_motor(self) -> int:
        """M, the length of `Control.motor`."""
        return self.motor.size


@struct.dataclass
class State:
    """Dynamic state of the bodies and particles (world frame).

    Attributes:
      pos:          (N, 3) centre of mass, m.
      quat:         (N, 4) unit quaternion (w, x, y, z), body to world.
      vel:          (N, 3) linear velocity, m/s.
      ang_vel:      (N, 3) angular velocity in the world frame, rad/s.
      time:         ()     s.
      particle_pos: (P, 3) particle positions, m.
      particle_vel: (P, 3) particle velocities, m/s.
    """

    pos: Array
    quat: Array
    vel: Array
    ang_vel: Array
    time: Array
    particle_pos: Array
    particle_vel: Array


@struct.dataclass
class Control:
    """Inputs applied during one step (constant over the step).

    Attributes:
      force:   (N, 3) external force at the centre of mass, world frame, N.
      torque:  (N, 3) external torque, world frame, N m.
      motor:   (M,)   motor target angles α, rad (`Model.motor`; M = `model.n_motor`).
    """

    force: Array
    torque: Array
    motor: Array

    @classmethod
    def zeros(cls, n_body: int, n_motor: int = 0, dtype=None) -> "Control":
        dtype = dtype or jnp.zeros(()).dtype
        return cls(force=jnp.zeros((n_body, 3), dtype), torque=jnp.zeros((n_body, 3), dtype),
                   motor=jnp.zeros((n_motor,), dtype))


class Result(enum.IntEnum):
    """Outcome of a step's solve, reported in `StepInfo.result`."""

    SUCCESS = 0
    MAX_ITERATIONS = 1
    NONFINITE = 2
    STALLED = 3


RESULT_MESSAGES = {
    Result.SUCCESS: "converged",
    Result.MAX_ITERATIONS: "not converged: iteration cap reached (raise `iterations`, lower dt "
                           "or loosen `tol`)",
    Result.NONFINITE: "non-finite residual (NaN/inf): the step diverged",
    Result.STALLED: "not converged: the line search found no decrease of the step's "
                    "potential along Newton's direction (the residual is at its rounding: "
                    "loosen `tol` or use float64)",
}


@struct.dataclass
class StepInfo:
    """What the solve of one step did.

    Attributes:
      residual:        ()  final residual norm, max |M⁻¹ r| in m/s (rad/s for rotations).
      iterations:      ()  iterations used (int).
      converged:       ()  bool, residual <= tol.
      result:          ()  int code of `Result`.
      active_contacts: ()  number of contact rows that push (a positive normal impulse over
                           the step; int).
      max_penetration: ()  largest penetration depth, m (0 if none).
      overflow:        ()  bool, the broad phase found more candidate pairs than its
                           buffer holds (some were dropped this step); see `jc.BroadPhase`.
      tolerance:       ()  the tolerance the residual was held to, m/s: `tol`, raised where
                           the step's rounding level is above it (`solvers.base`).
    """

    residual: Array
    iterations: Array
    converged: Array
    result: Array
    active_contacts: Array
    max_penetration: Array
    overflow: Array
    tolerance: Array
