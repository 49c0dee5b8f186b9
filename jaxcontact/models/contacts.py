"""Contact terms: one collider per pair of kinds, the contact and friction laws as rows.

Every contact candidate is one element of a term: a body against a plane or an obstacle, a
particle against a plane, an obstacle or a body, or two bodies. The term's collider gives the
element's c contact rows (gap d, normal n from side b into side a, point; `geometry`) at
any configuration, and every contact term turns them into the same three row groups
(thesis Ch. 5; ADD Sec. 4):

    normal    d(q+(u))                           U_n(d; k_n), the normal law (`contact`):
                                                 "linear" is the one-sided row k_n/2 min(d,0)²
    damping   v_n = (d(q+(u)) - d(q-))/Δt        Δt w k_d/2 v_n² (ADD Eq. 21), w the fraction
                                                 of the step in contact (design note 1); the
                                                 gap's rate over the step (design note 41)
    friction  (t̄₁·v_rel(u), t̄₂·v_rel(u))        Δt D(|u_s|²; μ f_n(ū)), the friction law; "huber"
                                                 and "linear" are the disc rows of Eq. 132-133

with the frame (n̄, t̄, the point) and the friction bound μ f_n taken at the lagged iterate ū
(x̄), and the gap at u (x). Pair parameters combine the two sides' values (`combine`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact.compiling import jit
from jaxcontact.math import quat_mul, quat_rotate, tangent_basis
from jaxcontact.models import contact as laws
from jaxcontact.models import geometry, sdf
from jaxcontact.models.geometry import FAR
from jaxcontact.types import Shape

HOW = {"friction": "mean", "stiffness": "harmonic", "damping": "mean"}


@dataclasses.dataclass(frozen=True)
class Laws:
    """The static choice of laws (from `jc.Contact`): normal law, its power, friction law."""

    normal: str = "linear"
    power: float = 3.0
    friction: str = "huber"


def combine(a, b, how):
    """Pair parameter from the two sides' values; equal values give that value."""
    if how == "mean":
        return 0.5 * (a + b)
    if how == "harmonic":  # springs in series, rescaled: the softer side dominates
        return 2.0 * a * b / (a + b)
    raise ValueError(f"unknown combination {how!r}")


# --- the laws as row laws ψ(e or z, s, bound) ------------------------------------------------

def _power_row(d, k, p):
    return laws.power_energy(d, k, p)


def _smooth_row(d, k, delta):
    return laws.smooth_energy(d, k, delta)


def _huber_row(z, s, bound):
    return laws.huber_dissipation(z, bound, s)


def _pseudo_huber_row(z, eps, bound):
    return laws.pseudo_huber_dissipation(z, bound, eps)


def _tanh_row(z, s, bound):
    return laws.tanh_dissipation(z, bound, s)


def normal_law(normal, power, shared, c):
    """(ψ, its third argument (c,)) of the normal law; "linear" is the unilateral row."""
    dtype = shared["smooth_width"].dtype
    if normal == "linear":
        return terms.unilateral_energy, jnp.zeros((c,), dtype)
    if normal == "power":
        return _power_row, jnp.full((c,), power, dtype)
    return _smooth_row, jnp.broadcast_to(shared["smooth_width"], (c,))


# --- the contact term ------------------------------------------------------------------------

class ContactTerm(terms.RowTerm):
    """What every collider shares: the law rows, pair parameters, gaps at the start.

    Subclasses define `collide(x, params, shared) -> (gap (c,), normal (c, 3), point (c, 3))`
    on the geoms' world poses, `rows_per_element` c, `elements`, which Local slots are side
    a and side b (`side_a`, `side_b`: ("body", i), ("particle", i) or None for the world),
    and `geom_slots`: the (slot, suffix) of each body slot that carries a geom.
    """

    reports_gaps = True
    side_a = ("body", 0)
    side_b = None
    geom_slots = ()

    def collide(self, x, params, shared):
        raise NotImplementedError

    def frames(self, x, params, shared):
        """(gap, normal, point) of the element's rows at the configuration x of its blocks."""
        return self.collide(_place(x, params, self.geom_slots), params, shared)

    def without_rows(self):
        if self.laws.normal != "linear":
            return (f"{self.name}: the {self.laws.normal!r} normal law is not a compliant "
                    "constraint (use normal='linear')")
        if self.laws.friction not in ("huber", "linear"):
            return (f"{self.name}: {self.laws.friction!r} friction has no disc projection "
                    "(use friction='huber' or 'linear')")
        return None

    def gaps(self, x, params, shared):
        return jnp.where(params["used"], self.frames(x, params, shared)[0], FAR)

    def _side_velocity(self, side, x, lag, point):
        if side is None:
            return jnp.zeros_like(point)
        kind, i = side
        if kind == "particle":
            return jnp.broadcast_to(x.particle_vel[i], point.shape)
        lever = point - lag.pos[i][None, :]
        return x.vel[i][None, :] + jnp.cross(jnp.broadcast_to(x.ang_vel[i], lever.shape), lever)

    def rows(self, x, lag, params, shared, dt):
        used = params["used"]
        gap = jnp.where(used, self.frames(x, params, shared)[0], FAR)
        gap_lag, normal, point = self.frames(lag, params, shared)
        gap_lag = jnp.where(used, gap_lag, FAR)
        c = gap.shape[0]
        k = jnp.broadcast_to(params["stiffness"], (c,))
        law, arg = normal_law(self.laws.normal, self.laws.power, shared, c)
        normal_rows = (terms.unilateral(gap, k) if self.laws.normal == "linear"
                       else terms.custom(gap, k, law, arg))
        force = normal_force(self.laws, shared, gap_lag, k)   # f_n(ū), the lagged bound
        v_rel = (self._side_velocity(self.side_a, x, lag, point)
                 - self._side_velocity(self.side_b, x, lag, point))
        # the gap's own rate over the step, so that the damper only dissipates: n̄·v_rel
        # reads the lever at the end of the step, turned by the step's rotation from the
        # chord the contact point moves along, and fed the transverse spin of a capsule
        # rolling at 0.36 rad per step 1.8x per step (design note 41)
        v_n = (gap - params["gap_start"]) / dt
        weight = laws.contact_fraction(params["gap_start"], gap_lag)
        damping = terms.bilateral(v_n, dt * params["damping"] * weight)
        t1, t2 = tangent_basis(normal)
        slip = jnp.stack([jnp.sum(v_rel * t1, axis=-1), jnp.sum(v_rel * t2, axis=-1)], axis=-1)
        mu = jnp.broadcast_to(params["friction"], (c,))
        bound, cone = dt * mu * force, dt * mu
        friction = self.laws.friction
        if friction in ("huber", "linear"):
            stick = shared["friction_stiffness"] if friction == "huber" else k * dt
            slip_rows = terms.RowGroup(slip, dt * jnp.broadcast_to(stick, (c,)), bound, cone,
                                       law=_huber_row, kind=terms.DISC, partner=0, pair=True)
        elif friction == "pseudo_huber":
            slip_rows = terms.custom(slip, jnp.broadcast_to(shared["friction_eps"], (c,)),
                                     _pseudo_huber_row, bound, pair=True)
        else:
            slip_rows = terms.custom(slip, dt * jnp.broadcast_to(shared["friction_stiffness"],
                                                                 (c,)),
                                     _tanh_row, bound, pair=True)
        return normal_rows, damping, slip_rows


def normal_force(laws, shared, gap, stiffness):
    """f_n = -ψ'(d) of the normal law per row (gap (c,), stiffness (c,) or scalar), N."""
    c = gap.shape[0]
    law, arg = normal_law(laws.normal, laws.power, shared, c)
    return -jax.vmap(jax.grad(law))(gap, jnp.broadcast_to(stiffness, (c,)), arg)


def _shared(model, extra=None):
    out = {"friction_stiffness": model.contact.friction_stiffness,
           "friction_eps": model.contact.friction_eps,
           "smooth_width": model.contact.smooth_width}
    return {**out, **(extra or {})}


def _finish(term, model, state, bodies, particles, params, shared, used, slots=False):
    """Elements with start poses and the gaps at the start of the step; with `slots` (the
    elements are broad-phase slots, which may be empty) also which elements live."""
    start = dofs.gather_start(state, bodies, particles)
    d = dofs.local_size(term.n_bodies, term.n_particles)

    def at_start(s, p):
        return term.frames(dofs.local(s, jnp.zeros((d,), state.pos.dtype), model.dt), p,
                           shared)[0]

    params = {**params, "used": used}
    params["gap_start"] = jnp.where(used, jax.vmap(at_start)(start, params), FAR)
    # only broad-phase slots can be empty: static elements always exist, and chunking them
    # would only add a loop
    live = jnp.any(used, axis=1) if slots else None
    return terms.Elements(bodies=bodies, particles=particles, start=start, params=params,
                          shared=shared, live=live)


def _place(x, p, slots):
    """x with the pose of each geom slot's body replaced by the geom's world pose (body pose
    composed with the geom's pose in the body frame), where the elements carry geom poses."""
    if not slots or "geom_pos" + slots[0][1] not in p:
        return x
    pos, quat = x.pos, x.quat
    for slot, k in slots:
        pos = pos.at[slot].add(quat_rotate(quat[slot], p["geom_pos" + k]))
        quat = quat.at[slot].set(quat_mul(quat[slot], p["geom_quat" + k]))
    return x.replace(pos=pos, quat=quat)


def _geom_body(model, geom):
    """The body of each geom `geom` (E,), -1 where geom is -1 (an empty slot)."""
    if model.geom.body == tuple(range(len(model.geom.body))):   # geom g is body g
        return geom
    body = jnp.asarray(model.geom.body, jnp.int32)[jnp.maximum(geom, 0)]
    return jnp.where(geom >= 0, body, -1)


def _geometry(model, geom, shape, placed, suffix=""):
    """Per-element shape data of geoms `geom` (E,): size, rounding, mesh vertices/planes,
    and with `placed` the geom's pose in its body's frame."""
    g, table = jnp.maximum(geom, 0), model.geom
    out = {"size" + suffix: table.size[g], "rounding" + suffix: table.rounding[g]}
    if placed:
        out["geom_pos" + suffix], out["geom_quat" + suffix] = table.pos[g], table.quat[g]
    if shape == Shape.MESH:
        mesh = jnp.asarray(table.mesh, jnp.int32)[g]
        out["vertices" + suffix] = model.mesh.vertices[mesh]
        out["planes" + suffix] = model.mesh.planes[mesh]
        out["count" + suffix] = jnp.asarray(model.mesh.count, jnp.int32)[mesh]
    return out


def _geom_pose(model, state, geom, params, suffix):
    """World poses (E, 3), (E, 4) of geoms `geom` in `state`."""
    body = jnp.maximum(_geom_body(model, geom), 0)
    pos, quat = state.pos[body], state.quat[body]
    if "geom_pos" + suffix not in params:
        return pos, quat
    return (pos + jax.vmap(quat_rotate)(quat, params["geom_pos" + suffix]),
            jax.vmap(quat_mul)(quat, params["geom_quat" + suffix]))


def _proxy_mask(shape, geometry_params, suffix, c):
    """Mesh padding vertices are not contact points."""
    if shape != Shape.MESH:
        return jnp.ones((c,), bool)
    return jnp.arange(c) < geometry_params["count" + suffix]


def _surface(source, index):
    return {name: getattr(source, name)[index] for name in HOW}


def _combined(side_a, side_b):
    return {name: combine(side_a[name], side_b[name], how) for name, how in HOW.items()}


def _points(shape, x, slot, p, suffix):
    """World centres (c, 3) and radii (c,) of the contact points of geom slot `slot`."""
    local, radius = geometry.proxies(shape, p["size" + suffix], p["rounding" + suffix],
                                     p.get("vertices" + suffix))
    rotate = jax.vmap(quat_rotate, in_axes=(None, 0))
    return x.pos[slot][None, :] + rotate(x.quat[slot], local), radius


# --- colliders ---------------------------------------------------------------------------------

class BodyAgainstStatic(ContactTerm):
    """Bodies of one shape (`shape`, `bodies`) against a static surface: one element per body,
    one row per contact point of the shape (`geometry.proxy_count`)."""

    n_bodies = 1
    geom_slots = ((0, ""),)

    @property
    def rows_per_element(self):
        return geometry.proxy_count(self.shape, self.n_vertices)

    @property
    def count(self):
        return len(self.geoms)


@dataclasses.dataclass(frozen=True)
class BodyPlane(BodyAgainstStatic):
    """Bodies of one shape against planes: each contact point of the body against the plane,
    d = n·c - o - ρ. Elements: the static (body, plane) table."""

    shape: int
    geoms: tuple
    planes: tuple
    laws: Laws
    n_vertices: int = 0
    placed: bool = False

    @property
    def name(self):
        return f"contact {Shape(self.shape).name.lower()}-plane"

    def collide(self, x, p, shared):
        centre, radius = _points(self.shape, x, 0, p, "")
        gap = centre @ p["normal"] - p["offset"] - radius
        normal = jnp.broadcast_to(p["normal"], centre.shape)
        return gap, normal, centre - (radius + 0.5 * gap)[:, None] * normal

    def elements(self, model, state, control, stages):
        geom = jnp.asarray(self.geoms, jnp.int32)
        plane = jnp.asarray(self.planes, jnp.int32)
        params = {**_geometry(model, geom, self.shape, self.placed),
                  "normal": model.plane.normal[plane], "offset": model.plane.offset[plane],
                  **_combined(_surface(model.geom, geom), _surface(model.plane, plane))}
        c = geometry.proxy_count(self.shape, self.n_vertices)
        used = jax.vmap(lambda p: _proxy_mask(self.shape, p, "", c))(params)
        return _finish(self, model, state, _geom_body(model, geom)[:, None],
                       jnp.zeros((len(self.geoms), 0), jnp.int32), params, _shared(model), used)


@dataclasses.dataclass(frozen=True)
class BodyObstacle(BodyAgainstStatic):
    """Bodies of one shape against one obstacle's signed distance grid (trilinear,
    `sdf`): d = φ(c) - ρ, n = ∇φ/|∇φ|."""

    shape: int
    geoms: tuple
    obstacle: int
    laws: Laws
    n_vertices: int = 0
    placed: bool = False

    @property
    def name(self):
        return f"contact {Shape(self.shape).name.lower()}-obstacle {self.obstacle}"

    def collide(self, x, p, shared):
        centre, radius = _points(self.shape, x, 0, p, "")
        grid = shared["grid"]
        gap = jax.vmap(lambda c: sdf.sample(grid, c))(centre) - radius
        normal = jax.vmap(lambda c: sdf.normal(grid, c))(centre)
        return gap, normal, centre - (radius + 0.5 * gap)[:, None] * normal

    def elements(self, model, state, control, stages):
        geom = jnp.asarray(self.geoms, jnp.int32)
        obstacle = _surface(model.obstacle, self.obstacle)
        params = {**_geometry(model, geom, self.shape, self.placed),
                  **_combined(_surface(model.geom, geom),
                              {k: jnp.broadcast_to(v, geom.shape) for k, v in obstacle.items()})}
        c = geometry.proxy_count(self.shape, self.n_vertices)
        used = jax.vmap(lambda p: _proxy_mask(self.shape, p, "", c))(params)
        shared = _shared(model, {"grid": model.obstacle.grid[self.obstacle]})
        return _finish(self, model, state, _geom_body(model, geom)[:, None],
                       jnp.zeros((len(self.geoms), 0), jnp.int32), params, shared, used)


@dataclasses.dataclass(frozen=True)
class ParticlePlane(ContactTerm):
    """Particles (balls of their radius) against planes."""

    particles: tuple
    planes: tuple
    laws: Laws
    n_particles = 1
    side_a = ("particle", 0)
    name = "contact particle-plane"
    rows_per_element = 1

    @property
    def count(self):
        return len(self.particles)

    def collide(self, x, p, shared):
        centre = x.particle_pos[:1]
        gap = centre @ p["normal"] - p["offset"] - p["radius"]
        normal = p["normal"][None, :]
        return gap, normal, centre - (p["radius"] + 0.5 * gap)[:, None] * normal

    def elements(self, model, state, control, stages):
        particle = jnp.asarray(self.particles, jnp.int32)
        plane = jnp.asarray(self.planes, jnp.int32)
        params = {"radius": model.particle.radius[particle], "normal": model.plane.normal[plane],
                  "offset": model.plane.offset[plane],
                  **_combined(_surface(model.particle, particle), _surface(model.plane, plane))}
        e = len(self.particles)
        return _finish(self, model, state, jnp.zeros((e, 0), jnp.int32), particle[:, None],
                       params, _shared(model), jnp.ones((e, 1), bool))


@dataclasses.dataclass(frozen=True)
class ParticleObstacle(ContactTerm):
    """Particles against one obstacle's signed distance grid."""

    particles: tuple
    obstacle: int
    laws: Laws
    n_particles = 1
    side_a = ("particle", 0)

    rows_per_element = 1

    @property
    def name(self):
        return f"contact particle-obstacle {self.obstacle}"

    @property
    def count(self):
        return len(self.particles)

    def collide(self, x, p, shared):
        centre = x.particle_pos[0]
        gap = sdf.sample(shared["grid"], centre) - p["radius"]
        normal = sdf.normal(shared["grid"], centre)
        return gap[None], normal[None], (centre - (p["radius"] + 0.5 * gap) * normal)[None]

    def elements(self, model, state, control, stages):
        particle = jnp.asarray(self.particles, jnp.int32)
        obstacle = _surface(model.obstacle, self.obstacle)
        params = {"radius": model.particle.radius[particle],
                  **_combined(_surface(model.particle, particle),
                              {k: jnp.broadcast_to(v, particle.shape)
                               for k, v in obstacle.items()})}
        e = len(self.particles)
        shared = _shared(model, {"grid": model.obstacle.grid[self.obstacle]})
        return _finish(self, model, state, jnp.zeros((e, 0), jnp.int32), particle[:, None],
                       params, shared, jnp.ones((e, 1), bool))


def _pair_slots(term, stages, offset_b=0):
    """(a, b, used) of a pair term: its static pairs, or its broad-phase slots (objects:
    geoms, then particles from `offset_b`)."""
    if term.pairs:
        a = jnp.asarray([p[0] for p in term.pairs], jnp.int32)
        b = jnp.asarray([p[1] for p in term.pairs], jnp.int32)
        return a, b, jnp.ones(a.shape, bool)
    a, b, used = stages[term.sweep].slots[term.group]
    return a, jnp.where(used, b - offset_b, -1), used


@dataclasses.dataclass(frozen=True)
class ParticleBody(ContactTerm):
    """Particles against geoms of one shape: the particle's ball against the geom's core.
    Side a is the particle, side b the geom's body. Static pairs, or broad-phase slots."""

    shape: int
    pairs: tuple            # ((geom, particle), ...) or () with the broad phase
    laws: Laws
    capacity: int = 0
    sweep: object = None    # the broad-phase `Stage` (with pairs = ())
    n_vertices: int = 0
    placed: bool = False
    n_bodies = 1
    n_particles = 1
    side_a = ("particle", 0)
    side_b = ("body", 0)
    geom_slots = ((0, ""),)

    rows_per_element = 1

    @property
    def name(self):
        return f"contact particle-{Shape(self.shape).name.lower()}"

    @property
    def count(self):
        return len(self.pairs) or self.capacity

    @property
    def stages(self):
        return () if self.pairs else (self.sweep,)

    @property
    def group(self):
        return (int(self.shape), int(self.sweep.particle_kind))

    def collide(self, x, p, shared):
        distance = geometry.core_distance(self.shape)
        planes = p.get("planes", jnp.zeros((1, 4), p["size"].dtype))
        gap, normal, point = geometry.ball_against_core(
            x.particle_pos[0], p["radius"], x.pos[0], x.quat[0],
            lambda q: distance(q, p["size"], p["rounding"], planes),
            geometry.shape_radius(self.shape, p["size"], p["rounding"]))
        return gap[None], normal[None], point[None]

    def elements(self, model, state, control, stages):
        geom, particle, used = _pair_slots(self, stages, len(model.geom.shape))
        params = {**_geometry(model, geom, self.shape, self.placed),
                  "radius": model.particle.radius[jnp.maximum(particle, 0)],
                  **_combined(_surface(model.particle, jnp.maximum(particle, 0)),
                              _surface(model.geom, jnp.maximum(geom, 0)))}
        body = _geom_body(model, jnp.where(used, geom, -1))
        return _finish(self, model, state, body[:, None], particle[:, None], params,
                       _shared(model), used[:, None], slots=not self.pairs)


def pair_terms(shape_a, shape_b):
    """Which contact points a pair of shapes uses: "a" (a's points vs b's core), "b" (b's
    points vs a's core), "segments" (capsule-capsule closest points), "edges" (one
    edge-edge row, box-box and box-capsule)."""
    if shape_a == Shape.SPHERE:
        return ("a",)
    if shape_a == shape_b == Shape.CAPSULE:
        return ("segments",)
    if {shape_a, shape_b} <= {Shape.BOX, Shape.CAPSULE}:
        return ("a", "b", "edges")
    return ("a", "b")


@dataclasses.dataclass(frozen=True)
class BodyPair(ContactTerm):
    """Geoms of shapes (shape_a <= shape_b) on two bodies against each other (`pair_terms`):
    each side's points against the other's core, capsule segments, one frozen edge-edge
    row. Static pairs of geoms (small scenes) or broad-phase slots."""

    shape_a: int
    shape_b: int
    pairs: tuple
    laws: Laws
    capacity: int = 0
    sweep: object = None
    n_vertices: int = 0
    placed: bool = False
    n_bodies = 2
    side_b = ("body", 1)
    geom_slots = ((0, "_a"), (1, "_b"))

    @property
    def name(self):
        return (f"contact {Shape(self.shape_a).name.lower()}-"
                f"{Shape(self.shape_b).name.lower()}")

    @property
    def stages(self):
        return () if self.pairs else (self.sweep,)

    @property
    def group(self):
        return (int(self.shape_a), int(self.shape_b))

    @property
    def parts(self):
        return pair_terms(self.shape_a, self.shape_b)

    @property
    def rows_per_element(self):
        return sum(self.count_of(part) for part in self.parts)

    @property
    def count(self):
        return len(self.pairs) or self.capacity

    def count_of(self, part):
        if part in ("segments", "edges"):
            return 1
        shape = self.shape_a if part == "a" else self.shape_b
        return geometry.proxy_count(shape, self.n_vertices)

    def collide(self, x, p, shared):
        gaps, normals, points = [], [], []
        for part in self.parts:
            if part == "segments":
                out = geometry.segment_segment(x.pos[0], x.quat[0], p["size_a"], x.pos[1],
                                               x.quat[1], p["size_b"])
                out = tuple(v[None] for v in out)
            elif part == "edges":
                sides = [(geometry.core_half(s, p["size" + k], p["rounding" + k]),
                          geometry.shape_radius(s, p["size" + k], p["rounding" + k]))
                         for s, k in ((self.shape_a, "_a"), (self.shape_b, "_b"))]
                out = geometry.edge_edge(x.pos[0], x.quat[0], *sides[0], x.pos[1], x.quat[1],
                                         *sides[1], p["edge"], p["edge_sign"])
                out = tuple(v[None] for v in out)
            else:
                own, other = (0, 1) if part == "a" else (1, 0)
                shapes = (self.shape_a, self.shape_b)
                keys = ("_a", "_b")
                centre, radius = _points(shapes[own], x, own, p, keys[own])
                distance = geometry.core_distance(shapes[other])
                k = keys[other]
                planes = p.get("planes" + k, jnp.zeros((1, 4), centre.dtype))
                core_radius = geometry.shape_radius(shapes[other], p["size" + k],
                                                    p["rounding" + k])

                def one(c, r, other=other, distance=distance, k=k, planes=planes,
                        core_radius=core_radius):
                    return geometry.ball_against_core(
                        c, r, x.pos[other], x.quat[other],
                        lambda q: distance(q, p["size" + k], p["rounding" + k], planes),
                        core_radius)

                gap, normal, point = jax.vmap(one)(centre, radius)
                out = (gap, normal if part == "a" else -normal, point)
            gaps.append(out[0]), normals.append(out[1]), points.append(out[2])
        return jnp.concatenate(gaps), jnp.concatenate(normals), jnp.concatenate(points)

    def elements(self, model, state, control, stages):
        a, b, used = _pair_slots(self, stages)
        params = {**_geometry(model, a, self.shape_a, self.placed, "_a"),
                  **_geometry(model, b, self.shape_b, self.placed, "_b"),
                  **_combined(_surface(model.geom, jnp.maximum(a, 0)),
                              _surface(model.geom, jnp.maximum(b, 0)))}
        masks = []
        for part in self.parts:
            c = self.count_of(part)
            if part in ("a", "b"):
                shape = self.shape_a if part == "a" else self.shape_b
                suffix = "_" + part
                masks.append(jax.vmap(lambda p, s=shape, k=suffix, c=c:
                                      _proxy_mask(s, p, k, c))(params))
            elif part == "edges":
                valid, edge, sign = self._edge_pairings(model, state, params, a, b)
                params["edge"], params["edge_sign"] = edge, sign
                masks.append(valid[:, None])
            else:
                masks.append(jnp.ones((a.shape[0], 1), bool))
        rows_used = jnp.concatenate(masks, axis=1) & used[:, None]
        bodies = jnp.stack([_geom_body(model, jnp.where(used, a, -1)),
                            _geom_body(model, jnp.where(used, b, -1))], axis=1)
        return _finish(self, model, state, bodies, jnp.zeros((a.shape[0], 0), jnp.int32),
                       params, _shared(model), rows_used, slots=not self.pairs)

    def _edge_pairings(self, model, state, params, a, b):
        """`geometry.edge_pairing` of every element (geoms a, b) at the start of the step."""
        (pos_a, quat_a), (pos_b, quat_b) = (
            _geom_pose(model, state, g, params, k) for g, k in ((a, "_a"), (b, "_b")))
        half_a = jax.vmap(lambda s, r: geometry.core_half(self.shape_a, s, r))(
            params["size_a"], params["rounding_a"])
        half_b = jax.vmap(lambda s, r: geometry.core_half(self.shape_b, s, r))(
            params["size_b"], params["rounding_b"])
        pairing = jax.vmap(geometry.edge_pairing, in_axes=(0, 0, 0, None, 0, 0, 0, None))
        return pairing(pos_a, quat_a, half_a, self.shape_a == Shape.BOX,
                       pos_b, quat_b, half_b, self.shape_b == Shape.BOX)


# --- inspecting the contact rows ----------------------------------------------------------------

@struct.dataclass
class ContactRows:
    """Every contact row of a step, flat in the order of the model's contact terms (element
    by element, the rows of an element together).

    Attributes:
      gap:       (K,) signed distance, m (`geometry.FAR` for unused rows).
      normal:    (K, 3) unit normal from side b into side a.
      point:     (K, 3) world contact point.
      body_a, body_b: (K,) body of each side (-1: the world, or a particle side).
      particle:  (K,) the particle of side a (-1: none).
      used:      (K,) bool, the row exists this step (broad-phase slot filled, mesh vertex
                 not padding, edge pairing found).
      friction, stiffness, damping: (K,) the pair's combined surface parameters.
      force:     (K,) the normal law's force -ψ'(gap) (`normal_force`), N; 0 where unused.
    """

    gap: jax.Array
    normal: jax.Array
    point: jax.Array
    body_a: jax.Array
    body_b: jax.Array
    particle: jax.Array
    used: jax.Array
    friction: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    force: jax.Array


def n_rows(model) -> int:
    """K, the number of contact rows of a step (static)."""
    return sum(t.count * t.rows_per_element for t in model.terms
               if isinstance(t, ContactTerm))


@jit
def contact_rows(model, state, control=None) -> ContactRows:
    """The contact rows of the step that starts at `state`, evaluated at that configuration.

    Jitted: evaluated op by op, the narrow phase of a small scene dispatched some 250 programs."""
    from jaxcontact.types import Control

    control = Control.zeros(model.n_body, model.n_motor, state.pos.dtype) \
        if control is None else control
    ctx = terms.prepare(model, state, control)
    out = []
    for term, el in zip(model.terms, ctx.elements):
        if not isinstance(term, ContactTerm):
            continue
        c = term.rows_per_element
        d = dofs.local_size(term.n_bodies, term.n_particles)

        def frames(start, params, term=term, d=d):
            x = dofs.local(start, jnp.zeros((d,), state.pos.dtype), model.dt)
            return term.frames(x, params, el.shared)

        gap, normal, point = jax.vmap(frames)(el.start, el.params)
        used = el.params["used"]
        e = gap.shape[0]
        minus = jnp.full((e,), -1, jnp.int32)

        def side(kind_slot):
            if kind_slot is None or kind_slot[0] != "body":
                return minus
            return el.bodies[:, kind_slot[1]]

        particle = el.particles[:, 0] if term.side_a[0] == "particle" else minus
        per_row = {"body_a": side(term.side_a), "body_b": side(term.side_b),
                   "particle": particle,
                   **{k: el.params[k] for k in HOW}}
        gap = jnp.where(used, gap, FAR).reshape(-1)
        per_row = {k: jnp.repeat(v, c) for k, v in per_row.items()}
        force = normal_force(term.laws, el.shared, gap, per_row["stiffness"])
        out.append(ContactRows(
            gap=gap, normal=normal.reshape(-1, 3), point=point.reshape(-1, 3),
            used=used.reshape(-1), force=jnp.where(used.reshape(-1), force, 0.0), **per_row))
    if not out:
        z = jnp.zeros((0,), state.pos.dtype)
        i = jnp.zeros((0,), jnp.int32)
        return ContactRows(z, jnp.zeros((0, 3)), jnp.zeros((0, 3)), i, i, i,
                           jnp.zeros((0,), bool), z, z, z, z)
    return jax.tree.map(lambda *x: jnp.concatenate(x), *out)
