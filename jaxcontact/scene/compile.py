"""Compile a scene: its records become the arrays of `Model` and `State` (the differentiable
leaves), and the structure of the step is decided once, with NumPy: its terms
(`jaxcontact.terms`), each with its static table of elements, the contact colliders per pair
of shapes, whether pairs are found by the broad phase, and each registered kind's parameters
and terms (`jaxcontact.models.kinds`).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.models import geometry, kinds
from jaxcontact.models import mass as mass_properties
from jaxcontact.models.broad_phase import (HELD_REACH, PARTICLE, BroadPhase, Sweep,
                                           group_capacity)
from jaxcontact.models.contact import Contact
from jaxcontact.models.contacts import (BodyObstacle, BodyPair, BodyPlane, Laws, ParticleBody,
                                        ParticleObstacle, ParticlePlane)
from jaxcontact.models.forces import Gravity
from jaxcontact.types import (Body, ContactParams, Geom, Mesh, Model, Obstacle, Particle, Plane,
                              Shape, State)

SURFACE = ("friction", "stiffness", "damping")


def mass_inertia(records, b):
    """(mass, principal inertia) of a body record: given, or of its solid's shape."""
    if b.solid < 0:
        return b.mass, b.inertia
    g = records["geom"][b.solid]
    s = g.size
    if g.shape == Shape.MESH:
        m = records["mesh"][g.mesh]
        mass = b.mass if b.mass is not None else b.density * m.volume
        return mass, m.moments * (mass / m.volume)
    unit = {Shape.SPHERE: lambda: mass_properties.sphere(s[0], 1.0),
            Shape.BOX: lambda: mass_properties.box(s, 1.0),
            Shape.CAPSULE: lambda: mass_properties.capsule(s[0], s[1], 1.0)}[g.shape]()
    mass = b.mass if b.mass is not None else b.density * unit[0]
    inertia = b.inertia if b.inertia is not None else unit[1] * (mass / unit[0])
    return mass, inertia


def contact_terms(records, no_collide, attached, laws: Laws, broad_phase: BroadPhase) -> list:
    """The colliders: every kind pair present, with static element tables (of geoms) or
    broad-phase slots (decided here, once). `no_collide`: body pairs (a < b) that never
    collide; `attached`: (body, particle) pairs that never collide."""
    geoms, bodies = records["geom"], records["body"]
    shapes = sorted({g.shape for g in geoms if g.collide})
    by_shape = {sh: tuple(i for i, g in enumerate(geoms) if g.shape == sh and g.collide)
                for sh in shapes}
    # the colliders' mesh padding: the largest mesh that collides (a drawn-only mesh, like
    # dm_control's dog's 708-vertex skin, would pad every contact row set to its size)
    n_vertices = max((len(records["mesh"][g.mesh].vertices) for g in geoms
                      if g.collide and g.mesh >= 0), default=0)
    # geoms placed off their bodies' centres of mass, or not one geom per body
    placed = [g.body for g in geoms] != list(range(len(bodies))) or any(
        np.any(g.pos != 0.0) or np.any(g.quat != np.array([1.0, 0, 0, 0])) for g in geoms)
    out = []
    planes, obstacles = range(len(records["plane"])), range(len(records["obstacle"]))
    for sh in shapes:
        members = by_shape[sh]
        if records["plane"]:
            out.append(BodyPlane(int(sh), members * len(planes),
                                 tuple(p for p in planes for _ in members), laws,
                                 n_vertices, placed=placed))
        for o in obstacles:
            out.append(BodyObstacle(int(sh), members, o, laws, n_vertices, placed=placed))
    particles = tuple(range(len(records["particle"])))
    if particles and records["plane"]:
        out.append(ParticlePlane(particles * len(planes),
                                 tuple(p for p in planes for _ in particles), laws))
    for o in obstacles if particles else ():
        out.append(ParticleObstacle(particles, o, laws))
    # candidate pairs of geoms (shape_a <= shape_b) on different bodies that may collide,
    # then particles against each shape

    def collide(i, j):
        a, b = geoms[i].body, geoms[j].body
        return a != b and (min(a, b), max(a, b)) not in no_collide

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
        of_body = [[] for _ in bodies]
        for g, geom in enumerate(geoms):
            of_body[geom.body].append(g)
        never = [pair for gs in of_body for pair in itertools.combinations(gs, 2)]
        never += [(min(i, j), max(i, j)) for a, b in no_collide
                  for i in of_body[a] for j in of_body[b]]
        excluded = sorted({i * objects + j for i, j in never}
                          | {g * objects + n + p for g, geom in enumerate(geoms)
                             for p in swept_particles if (geom.body, p) in attached})
        groups = []
        group_of = body_groups(records)
        centre, radius = _bounding_spheres(records)
        for (ka, kb), pairs in swept.items():
            if broad_phase.capacity:
                groups.append((ka, kb, min(broad_phase.capacity, len(pairs))))
                continue
            held = [(i, j) for i, j in pairs if kb != PARTICLE
                    and group_of[geoms[i].body] == group_of[geoms[j].body]]
            held_set = set(held)
            loose = [p for p in pairs if p not in held_set]
            near = sum(np.linalg.norm(centre[i] - centre[j])
                       <= HELD_REACH * (radius[i] + radius[j]) + broad_phase.margin
                       for i, j in held)
            groups.append((ka, kb, group_capacity(ka, kb, loose, held, int(near))))
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


def _bounding_spheres(records):
    """World centres (G, 3) and radii (G,) of every geom's bounding sphere in the scene's
    initial pose (NumPy, at build time)."""
    bodies, geoms = records["body"], records["geom"]
    out_centre, out_radius = [], []
    for g in geoms:
        body = bodies[g.body]
        w, v = float(body.quat[0]), np.asarray(body.quat[1:], float)
        t = 2.0 * np.cross(v, g.pos)
        out_centre.append(body.pos + g.pos + w * t + np.cross(v, t))
        if g.shape == Shape.MESH:
            out_radius.append(float(np.max(np.linalg.norm(records["mesh"][g.mesh].vertices,
                                                          axis=1))))
        else:
            out_radius.append(float(geometry.bounding_radius(g.shape, np.asarray(g.size))))
    return np.asarray(out_centre).reshape(-1, 3), np.asarray(out_radius)


def body_groups(records) -> tuple:
    """Each body's group (the index of its group's first body): bodies joined, directly or
    through others, by the elements of a kind (`Kind.joins`)."""
    group = list(range(len(records["body"])))

    def root(i):
        while group[i] != i:
            i = group[i]
        return i

    for name, kind in kinds.KINDS.items():
        for a, b in (kind.joins(records[name]) if kind.joins else ()):
            if a >= 0 and b >= 0:
                ra, rb = sorted((root(a), root(b)))
                group[rb] = ra
    return tuple(root(i) for i in range(len(group)))


def step_terms(records, no_collide, attached, contact: Contact, broad_phase: BroadPhase):
    """Every term of the step, in a fixed order: gravity, contact, then each registered kind
    in registration order."""
    out = []
    if records["body"]:
        out.append(Gravity(len(records["body"])))
    if records["particle"]:
        out.append(Gravity(len(records["particle"]), particles=True))
    out += contact_terms(records, no_collide, attached, contact.laws, broad_phase)
    for name, kind in kinds.KINDS.items():
        out += kind.terms(records[name])
    return tuple(out)


def pack(records, no_collide, attached, gravity, dt, contact: Contact, solver, dtype,
         broad_phase: BroadPhase):
    """The (Model, State) of a scene's records, every array in `dtype`."""
    columns = kinds.Columns(dtype)
    column, arr = columns.column, columns.array
    bodies, particles, geoms = records["body"], records["particle"], records["geom"]
    meshes, planes, obstacles = records["mesh"], records["plane"], records["obstacle"]
    mass, inertia = zip(*(mass_inertia(records, b) for b in bodies)) if bodies else ((), ())
    n_vert = max((len(m.vertices) for m in meshes), default=1)
    n_plane = max((len(m.planes) for m in meshes), default=1)

    def pad(rows, size):
        return np.concatenate([rows, np.repeat(rows[:1], size - len(rows), axis=0)])

    def surface(records):
        return {k: column(records, k) for k in SURFACE}

    model = Model(
        body=Body(mass=arr(mass), inertia=arr(inertia, 3), group=body_groups(records)),
        geom=Geom(size=column(geoms, "size", 3), rounding=column(geoms, "rounding"),
                  **surface(geoms), pos=column(geoms, "pos", 3), quat=column(geoms, "quat", 4),
                  shape=tuple(Shape(g.shape) for g in geoms),
                  mesh=tuple(g.mesh for g in geoms), body=tuple(g.body for g in geoms)),
        mesh=Mesh(vertices=arr([pad(m.vertices, n_vert) for m in meshes], n_vert, 3),
                  planes=arr([pad(m.planes, n_plane) for m in meshes], n_plane, 4),
                  count=tuple(len(m.vertices) for m in meshes)),
        obstacle=Obstacle(grid=tuple(jax.tree.map(lambda x: jnp.asarray(x, dtype), o.grid)
                                     for o in obstacles), **surface(obstacles)),
        plane=Plane(normal=column(planes, "normal", 3), offset=column(planes, "offset"),
                    **surface(planes)),
        contact=ContactParams(friction_stiffness=jnp.asarray(contact.friction_stiffness, dtype),
                              friction_eps=jnp.asarray(contact.friction_eps, dtype),
                              smooth_width=jnp.asarray(contact.smooth_width, dtype),
                              laws=contact.laws, relinearize=contact.relinearize),
        particle=Particle(mass=column(particles, "mass"), radius=column(particles, "radius"),
                          **surface(particles)),
        kinds={name: kind.pack(records[name], columns) for name, kind in kinds.KINDS.items()},
        gravity=jnp.asarray(gravity, dtype), dt=jnp.asarray(dt, dtype),
        terms=step_terms(records, no_collide, attached, contact, broad_phase), solver=solver)
    state = State(pos=column(bodies, "pos", 3), quat=column(bodies, "quat", 4),
                  vel=column(bodies, "vel", 3), ang_vel=column(bodies, "ang_vel", 3),
                  time=jnp.asarray(0.0, dtype), particle_pos=column(particles, "pos", 3),
                  particle_vel=column(particles, "vel", 3))
    return model, state
