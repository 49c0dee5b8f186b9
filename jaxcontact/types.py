"""Pytrees of the simulator: Model, State, Control, StepInfo and their parts.

Array fields are pytree leaves: they may be traced, batched with `vmap` and differentiated.
Fields declared with `static` are structure (counts, shape kinds, the terms of the step, laws
and solver settings): they are hashed into the compiled program, so changing one recompiles
and changing a leaf's value never does. Shapes use N bodies, P particles, J joints.
"""

from __future__ import annotations

import dataclasses
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
      group:    static tuple (N,): the group of bodies each belongs to, the bodies joined to
                each other by the elements of the kinds of physics (`Kind.joins`: joints,
                springs, motors); the step's resolution pools their roundings (`terms`).
    """

    mass: Array
    inertia: Array
    group: tuple = static(default=())


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
class ContactParams:
    """Contact and friction laws (DESIGN.md section 4) and their global parameters.

    Attributes:
      friction_stiffness: ()  k_f of the `huber` law, N s/m (thesis Eq. 132).
      friction_eps:       ()  regularization velocity ε of `pseudo_huber`, m/s.
      smooth_width:       ()  width δ of the `smooth` normal law, m.
      laws:      static `models.contact.Laws`: the choice of laws (normal, power, friction,
                 coupling, near_rigid, friction_regularization), made once from `jc.Contact`
                 (`Contact.laws`); the contact terms carry the same.
      relinearize: static number of times a step's contact is linearized again at its
                 answer and solved again (`jc.Contact`).
    """

    friction_stiffness: Array
    friction_eps: Array
    smooth_width: Array
    laws: Any = static(default=None)
    relinearize: int = static(default=0)


@struct.dataclass
class Model:
    """Everything that does not change from step to step.

    Attributes:
      body, geom, plane, contact, mesh, obstacle, particle: see their classes.
      kinds:    the parameters of every registered kind of physics (`jaxcontact.models.kinds`),
                by name, also read as attributes: `model.spring`, `model.joint`,
                `model.motor`, `model.attachment`, `model.solid`, `model.cloth` and
                `model.energy` (a tuple: `model.energy[t]` are the parameters of user term t,
                `Scene.add_energy`, leaves with a leading axis of its element count).
                `model.replace(spring=...)` replaces one.
      gravity:  (3,) m/s².
      dt:       ()   time step, s.
      terms:    static tuple of the step's terms (`jaxcontact.terms`), decided by the builder.
      solver:   static solver settings (e.g. `jc.Newton(...)`).
    """

    body: Body
    geom: Geom
    plane: Plane
    contact: ContactParams
    mesh: Mesh
    obstacle: Obstacle
    particle: Particle
    kinds: dict
    gravity: Array
    dt: Array
    terms: tuple = static()
    solver: Any = static()

    def __getattr__(self, name):
        # called only for names that are not fields: the kinds' parameters (`model.spring`)
        if name.startswith("__") or name == "kinds":
            raise AttributeError(name)
        kinds = object.__getattribute__(self, "kinds")
        if name in kinds:
            return kinds[name]
        raise AttributeError(f"'Model' has no attribute {name!r} (its kinds of physics: "
                             f"{sorted(kinds)})")

    @property
    def n_body(self) -> int:
        """N, the number of rigid bodies."""
        return self.body.mass.shape[-1]

    @property
    def n_particle(self) -> int:
        """P, the number of particles."""
        return self.particle.mass.shape[-1]

    def _lumped(self):
        """(corners, share) of every kind whose elements lump mass onto particles."""
        return [part.lumped_mass() for part in self.kinds.values()
                if hasattr(part, "lumped_mass") and part.size]

    @property
    def has_meshes(self) -> bool:
        """Whether the scene has FEM solids or cloth (solver defaults differ: `jc.Newton`)."""
        return bool(self._lumped())

    @property
    def particle_masses(self) -> Array:
        """(P,) every particle's mass, kg: its own point mass `particle.mass` plus its lumped
        share of the solid and cloth elements it is a corner of (ρV/4 per tetrahedron,
        ρ_A A/3 per triangle). The step uses this; it is differentiable in the densities."""
        mass = self.particle.mass
        for corners, share in self._lumped():
            index = np.asarray(corners).reshape(-1)
            mass = mass.at[..., index].add(jnp.repeat(share, len(corners[0]), axis=-1))
        return mass

    @property
    def n_motor(self) -> int:
        """M, the length of `Control.motor`."""
        return self.kinds["motor"].size if "motor" in self.kinds else 0


def _replace_model(self, **changes):
    """A copy with fields, or kinds' parameters by name (`spring=...`), replaced."""
    parts = {name: changes.pop(name) for name in list(changes) if name in self.kinds}
    if parts:
        changes["kinds"] = {**changes.get("kinds", self.kinds), **parts}
    return dataclasses.replace(self, **changes)


Model.replace = _replace_model   # after flax's decorator, which installs its own


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
