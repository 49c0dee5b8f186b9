"""Contact terms: one collider per pair of kinds, linearized at the start of the step.

Every contact candidate is one element of a term: a body against a plane or an obstacle, a
particle against a plane, an obstacle or a body, or two bodies. The term's collider gives the
element's c contact rows (gap d, normal n from side b into side a, point; `geometry`) at any
configuration. At the start of the step (`ContactTerm.elements`) each row is evaluated once at
the configuration q- and linearized (DESIGN.md section 1, v2):

    gap d₀,  frame (n, t₁, t₂),  J (3, d): v = (v_n, v_t1, v_t2) = J x

the relative velocity of the two sides at the contact point in the contact frame, for the
element's local velocities x (d of them). The gap at the end of the step is d₀ + Δt v_n to
first order (exactly the derivative of the distance: the contact point's lever arms differ by
the gap along n). The row's share of the step's potential is the convex cost
ℓ(J x; d₀, k_n, k_d, μ) of `models.contact.contact_cost`: the normal law, its damping and the
friction cone in one function. Nothing of the geometry runs during the solve.
Pair parameters combine the two sides' values (`combine`).
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
from jaxcontact.models.contact import Laws
from jaxcontact.models.geometry import FAR
from jaxcontact.problem import Factored, worth_factoring
from jaxcontact.types import Shape

HOW = {"friction": "mean", "stiffness": "harmonic", "damping": "mean"}


def combine(a, b, how):
    """Pair parameter from the two sides' values; equal values give that value."""
    if how == "mean":
        return 0.5 * (a + b)
    if how == "harmonic":  # springs in series, rescaled: the softer side dominates
        return 2.0 * a * b / (a + b)
    raise ValueError(f"unknown combination {how!r}")


# --- the contact term ------------------------------------------------------------------------

class ContactTerm(terms.Term):
    """What every collider shares: the linearization at the start of the step, pair
    parameters, and the contact cost of its rows.

    Subclasses define `collide(x, params, shared) -> (gap (c,), normal (c, 3), point (c, 3))`
    on the geoms' world poses, `rows_per_element` c, `elements`, which Local slots are side
    a and side b (`side_a`, `side_b`: ("body", i), ("particle", i) or None for the world),
    and `geom_slots`: the (slot, suffix) of each body slot that carries a geom.
    """

    reports_gaps = True
    convex = True
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
            return (f"{self.name}: {self.laws.friction!r} friction has no cone projection "
                    "(use friction='huber' or 'linear')")
        return None

    def velocities(self, x, params):
        """(c, 3) v = J x: each row's relative velocity in its contact frame."""
        # (products and sums, not einsums: XLA's CPU dot of such tiny operands is a call of
        # its own, a product and sum fuses with its neighbours)
        return jnp.sum(params["jac"] * x[None, None, :], axis=-1)

    def _row_costs(self, params, shared, dt, reweighted=False):
        """ℓ of each row as a function of its velocity, and the rows' parameters, (c,)."""
        c = params["gap"].shape[0]

        def cost(v_row, gap, k, damping, mu, bound, stick):
            return laws.contact_cost(v_row, gap, k, damping, mu, dt, self.laws, shared, bound,
                                     reweighted, stick)

        k, damping, mu = _row_parameters(params, c)
        rows = (params["gap"], k, damping, mu, params["bound"], params["stick"])
        return cost, rows

    def energy(self, x, start, params, shared, dt, reweighted=False):
        cost, rows = self._row_costs(params, shared, dt, reweighted)
        values = jax.vmap(cost)(self.velocities(x, params), *rows)
        return jnp.sum(jnp.where(params["used"], values, 0.0))

    def row_derivatives(self, v, params, shared, dt, reweighted=False, order=2):
        """Each row's law differentiated in its three velocities v (c, 3): ∇ℓ (c, 3) and
        with `order` 2 ∇²ℓ (c, 3, 3), zero for unused rows; in closed form where the laws
        have one (`models.contact.closed_form`), else by autodiff."""
        cost, rows = self._row_costs(params, shared, dt, reweighted)
        if laws.closed_form(self.laws):
            def one(v_row, gap, k, damping, mu, bound, stick):
                return laws.contact_derivatives(v_row, gap, k, damping, mu, dt, self.laws,
                                                shared, bound, reweighted, stick)[1:]
            grad, hess = jax.vmap(one)(v, *rows)
        else:
            grad = jax.vmap(jax.grad(cost))(v, *rows)
            hess = jax.vmap(jax.hessian(cost))(v, *rows) if order == 2 else None
            # (symmetric up to rounding; the reweighted law keeps one of its cross terms)
            hess = None if hess is None else 0.5 * (hess + jnp.swapaxes(hess, 1, 2))
        used = params["used"][:, None]
        grad = jnp.where(used, grad, 0.0)
        if order == 1:
            return grad
        return grad, jnp.where(used[:, :, None], hess, 0.0)

    def gradient(self, x, start, params, shared, dt):
        """∇Ψ (d,) of the element: Σ_rows Jᵀ ∇ℓ (`terms.gradient`)."""
        grad = self.row_derivatives(self.velocities(x, params), params, shared, dt, order=1)
        return jnp.sum(params["jac"] * grad[:, :, None], axis=(0, 1))

    def gradient_and_hessian(self, x, start, params, shared, dt, reweighted=False):
        """(∇Ψ (d,), ∇²Ψ (d, d)) of the element: Σ_rows Jᵀ ∇ℓ and Jᵀ ∇²ℓ J, the law
        differentiated in its three row velocities only (`terms.hessian`); ∇²Ψ as
        `problem.Factored` (J, ∇²ℓ) where that is smaller (`problem.worth_factoring`)."""
        grad, hess = self.row_derivatives(self.velocities(x, params), params, shared, dt,
                                          reweighted)
        jac = params["jac"]
        g = jnp.sum(jac * grad[:, :, None], axis=(0, 1))
        if worth_factoring(3 * jac.shape[0], jac.shape[-1]):
            return g, Factored(jac, hess)
        weighted = jnp.sum(hess[:, :, :, None] * jac[:, None, :, :], axis=2)   # (c, 3, d)
        return g, jnp.sum(jac[:, :, :, None] * weighted[:, :, None, :], axis=(0, 1))

    def along(self, x, d, alpha, start, params, shared, dt):
        """(Ψ', Ψ'') along x + α d at α = alpha (`terms.along`): Σ ∇ℓ·(J d), (J d)ᵀ ∇²ℓ J d."""
        dv = self.velocities(d, params)
        grad, hess = self.row_derivatives(self.velocities(x + alpha * d, params), params,
                                          shared, dt)
        return (jnp.sum(grad * dv),
                jnp.sum(dv[:, :, None] * hess * dv[:, None, :]))

    def normal_impulses(self, x, params, shared, dt):
        """(c,) each row's normal impulse over the step, -∂ℓ/∂v_n, at local velocities x."""
        grad = self.row_derivatives(self.velocities(x, params), params, shared, dt, order=1)
        return -grad[:, 0]

    def gaps(self, x, params, dt):
        """(c,) the rows' gaps at the end of the step, to first order: d₀ + Δt v_n."""
        return jnp.where(params["used"], params["gap"] + dt * self.velocities(x, params)[:, 0],
                         FAR)

    def compliance(self, x, params, shared, dt):
        """The rows in compliance form (Dual; linear normal law with huber or linear friction,
        `without_rows`): the normal row λ_n = max(-(v_n - v̂_n)/R_n, 0) with
        v̂_n = -d₀/T, R_n = 1/(Δt k T), T = Δt + k_d/k, and the tangential pair
        λ_t = -v_t/R_t, R_t = 1/s (s the row's stick stiffness), limited to friction's
        bound (coupling "lagged") or, with
        the normal row, to the friction cone (coupling "cone", SAP's form: Castro et al.
        2022, Eq. 18). Returns (v - v̂ (c, 3), 1/R (c, 3), the bound or μ (c,)); unused
        rows have stiffness 0."""
        k, damping, mu = _row_parameters(params, params["gap"].shape[0])
        T = dt + damping / k
        s = params["stick"]
        zero = jnp.zeros_like(T)
        target = jnp.stack([-params["gap"] / T, zero, zero], axis=-1)
        stiffness = jnp.stack([dt * k * T, s, s], axis=-1)
        stiffness = jnp.where(params["used"][:, None], stiffness, 0.0)
        limit = mu if self.laws.coupling == "cone" else params["bound"]
        return self.velocities(x, params) - target, stiffness, limit

    def relative_velocity(self, x, config, point):
        """(c, 3) velocity of side a relative to side b at the points, world frame, for the
        element's local velocities x (linear in x; lever arms from the bodies' positions in
        `config`, a `dofs.Local`)."""
        kb, kp = config.pos.shape[0], config.particle_pos.shape[0]
        rigid = x[:dofs.BODY_DOF * kb].reshape(kb, dofs.BODY_DOF)
        particle = x[dofs.BODY_DOF * kb:].reshape(kp, dofs.PARTICLE_DOF)

        def side(which):
            if which is None:
                return jnp.zeros_like(point)
            kind, i = which
            if kind == "particle":
                return jnp.broadcast_to(particle[i], point.shape)
            lever = point - config.pos[i][None, :]
            return rigid[i, :3][None, :] + jnp.cross(
                jnp.broadcast_to(rigid[i, 3:], lever.shape), lever)

        return side(self.side_a) - side(self.side_b)

    def linearize(self, start, params, shared, dt, at=None):
        """{"gap", "jac", "bound"} of one element's rows: d₀ (c,), J (c, 3, d) and friction's
        lagged bound (c,) (coupling "lagged"; unused by "cone"); `regularized` adds the rest.

        Linearized about the element's local velocities `at` (None: at the start of the
        step, x = 0; `relinearize`: the previous solve's answer): the end-of-step gap
        d(q+(x)) ≈ d(q+(at)) + Δt J_n (x - at) = d₀ + Δt J_n x, with Δt J_n its exact
        derivative through q+ (the exponential map's included), and the tangential rows the
        relative velocity at the contact point, its lever arms from q+(at). At x = 0 the
        normal row is the relative velocity along n as well (the witness points' lever arms
        differ by the gap along n). The lagged bound is μ times the normal impulse at the
        velocities `at`, or at the start of the step the state's (`start.velocity`)."""
        d = dofs.local_size(self.n_bodies, self.n_particles)
        x0 = jnp.zeros((d,), start.pos.dtype) if at is None else at

        def gap_of(x):
            return self.frames(dofs.local(start, x, dt), params, shared)[0]

        config = dofs.local(start, x0, dt)
        gap, normal, point = self.frames(config, params, shared)
        t1, t2 = tangent_basis(normal)
        # at the start of the step the normal row is the relative velocity along n too; about
        # a previous answer, the gap's derivative through q+ (`relinearize`)
        frame = jnp.stack([normal, t1, t2] if at is None else [t1, t2], axis=1)
        jac = jax.jacfwd(lambda x: jnp.sum(
            frame * self.relative_velocity(x, config, point)[:, None, :], axis=-1))(x0)
        if at is not None:
            jac = jnp.concatenate([jax.jacfwd(gap_of)(x0)[:, None, :] / dt, jac], axis=1)
        velocity = start.velocity if at is None else at
        vn = jac[:, 0, :] @ velocity
        gap = jnp.where(params["used"], gap - dt * (jac[:, 0, :] @ x0), FAR)
        # friction's bound with coupling "lagged": μ times the normal impulse at the
        # velocities the rows are linearized at
        c = gap.shape[0]
        k, damping, mu = (jnp.broadcast_to(params[name], (c,))
                          for name in ("stiffness", "damping", "friction"))
        impulse = laws.normal_impulse(vn, gap, k, damping, dt, self.laws, shared)
        return {"gap": gap, "jac": jac, "bound": mu * impulse}

    def regularized(self, el, delassus, dt) -> terms.Elements:
        """The linearized elements `el` with each row's stick stiffness "stick" and normal
        stiffness factor "rigid_factor", bounded by its effective mass
        (`models.contact.regularization`); `delassus` (E, c, 3, 3) the rows' J M⁻¹ Jᵀ.
        `terms.prepare` calls it after `linearized`: every row function reads both."""
        p = el.params
        shape = p["gap"].shape

        def per_row(name):
            value = p[name]
            return jnp.broadcast_to(value.reshape(value.shape[0], -1), shape)

        stick, factor = laws.regularization(self.laws, delassus, per_row("stiffness"),
                                            per_row("damping"), dt,
                                            el.shared["friction_stiffness"])
        # the linear law's impulse, and so the lagged bound, scale with k
        return el.replace(params={**p, "stick": stick, "rigid_factor": factor,
                                  "bound": factor * p["bound"]})

    def linearized(self, el, dt, at=None) -> terms.Elements:
        """The elements `el` with every row linearized (`linearize`); `at` (E, d) the
        elements' local velocities to linearize about, or None (the start of the step)."""
        if at is None:
            rows = jax.vmap(lambda s, p: self.linearize(s, p, el.shared, dt))(el.start,
                                                                             el.params)
        else:
            rows = jax.vmap(lambda s, p, a: self.linearize(s, p, el.shared, dt, a))(
                el.start, el.params, at)
        return el.replace(params={**el.params, **rows})


def with_laws(model, contact):
    """`model` with the contact laws and their global parameters of `contact` (a `jc.Contact`;
    its `relinearize` is not used): the same geometry, pairs and surface parameters. The
    backward pass of `jc.Implicit(smoothing=contact)` differentiates the step of this model."""
    laws = contact.laws
    dtype = model.contact.smooth_width.dtype
    params = model.contact.replace(**{
        name: jnp.asarray(getattr(contact, name), dtype)
        for name in ("friction_stiffness", "friction_eps", "smooth_width")}, laws=laws)
    return model.replace(contact=params, terms=tuple(
        dataclasses.replace(t, laws=laws) if isinstance(t, ContactTerm) else t
        for t in model.terms))


def _row_parameters(params, c):
    """(k_n, k_d, μ) (c,) of an element's rows as the step uses them: the pair's, with k_n and
    k_d times the rows' near-rigid factor (`ContactTerm.regularized`)."""
    k, damping, mu = (jnp.broadcast_to(params[name], (c,))
                      for name in ("stiffness", "damping", "friction"))
    factor = params["rigid_factor"]
    return factor * k, factor * damping, mu


def normal_force(laws_, shared, gap, stiffness):
    """f_n = -U'(d) of the normal law per row (gap (c,), stiffness (c,) or scalar), N."""
    return laws.normal_force(gap, stiffness, laws_.normal, laws_.power, shared["smooth_width"])


def _shared(model, extra=None):
    out = {"friction_stiffness": model.contact.friction_stiffness,
           "friction_eps": model.contact.friction_eps,
           "smooth_width": model.contact.smooth_width}
    return {**out, **(extra or {})}


def _finish(term, model, state, bodies, particles, params, shared, used):
    """Elements with start poses and which rows exist (`used`); their rows are linearized by
    `terms.prepare` (`ContactTerm.linearized`)."""
    start = dofs.gather_start(state, bodies, particles)
    return terms.Elements(bodies=bodies, particles=particles, start=start,
                          params={**params, "used": used}, shared=shared)


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


def _geometry(model, geom, shape, placed, suffix, n_vertices):
    """Per-element shape data of geoms `geom` (E,): size, rounding, mesh vertices (the first
    `n_vertices`: the colliders' padding, which meshes that never collide do not set) and
    planes, and with `placed` the geom's pose in its body's frame."""
    g, table = jnp.maximum(geom, 0), model.geom
    out = {"size" + suffix: table.size[g], "rounding" + suffix: table.rounding[g]}
    if placed:
        out["geom_pos" + suffix], out["geom_quat" + suffix] = table.pos[g], table.quat[g]
    if shape == Shape.MESH:
        mesh = jnp.asarray(table.mesh, jnp.int32)[g]
        out["vertices" + suffix] = model.mesh.vertices[mesh][:, :n_vertices]
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


def _balls_against(centre, radius, distance, normal):
    """Rows of balls (centres (c, 3), radii (c,)) against a static surface, from its signed
    distance (c,) and outward normal (c, 3) at the centres: gaps, normals, and contact points
    midway into the overlap."""
    gap = distance - radius
    return gap, normal, centre - (radius + 0.5 * gap)[:, None] * normal


def _static_distance(term, centre, p, shared):
    """(distance (c,), normal (c, 3)) of points (c, 3) to the term's plane (p's normal and
    offset) or to its obstacle's grid (shared)."""
    if term.against_plane:
        return centre @ p["normal"] - p["offset"], jnp.broadcast_to(p["normal"], centre.shape)
    grid = shared["grid"]
    return (jax.vmap(lambda c: sdf.sample(grid, c))(centre),
            jax.vmap(lambda c: sdf.normal(grid, c))(centre))


def _static_side(term, model, count):
    """(params, surface, shared) of the static side of the term's `count` elements: plane
    `term.planes[e]` (its normal and offset per element) or obstacle `term.obstacle` (its grid
    shared by every element)."""
    if term.against_plane:
        plane = jnp.asarray(term.planes, jnp.int32)
        return ({"normal": model.plane.normal[plane], "offset": model.plane.offset[plane]},
                _surface(model.plane, plane), _shared(model))
    surface = {k: jnp.broadcast_to(v, (count,))
               for k, v in _surface(model.obstacle, term.obstacle).items()}
    return {}, surface, _shared(model, {"grid": model.obstacle.grid[term.obstacle]})


# --- colliders ---------------------------------------------------------------------------------

class BodyAgainstStatic(ContactTerm):
    """Bodies of one shape (`shape`, `geoms`) against a static surface (`BodyPlane`,
    `BodyObstacle`): one element per geom, one row per contact point of the shape
    (`geometry.proxy_count`)."""

    n_bodies = 1
    geom_slots = ((0, ""),)

    @property
    def rows_per_element(self):
        return geometry.proxy_count(self.shape, self.n_vertices)

    @property
    def count(self):
        return len(self.geoms)

    def collide(self, x, p, shared):
        centre, radius = _points(self.shape, x, 0, p, "")
        return _balls_against(centre, radius, *_static_distance(self, centre, p, shared))

    def elements(self, model, state, control, stages):
        geom = jnp.asarray(self.geoms, jnp.int32)
        side, surface, shared = _static_side(self, model, len(self.geoms))
        params = {**_geometry(model, geom, self.shape, self.placed, "", self.n_vertices),
                  **side,
                  **_combined(_surface(model.geom, geom), surface)}
        c = geometry.proxy_count(self.shape, self.n_vertices)
        used = jax.vmap(lambda p: _proxy_mask(self.shape, p, "", c))(params)
        return _finish(self, model, state, _geom_body(model, geom)[:, None],
                       jnp.zeros((len(self.geoms), 0), jnp.int32), params, shared, used)


@dataclasses.dataclass(frozen=True)
class BodyPlane(BodyAgainstStatic):
    """Bodies of one shape against planes: each contact point of the body against the plane,
    d = n·c - o - ρ. Elements: the static (geom, plane) table."""

    shape: int
    geoms: tuple
    planes: tuple
    laws: Laws
    n_vertices: int = 0
    placed: bool = False
    against_plane = True

    @property
    def name(self):
        return f"contact {Shape(self.shape).name.lower()}-plane"


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
    against_plane = False

    @property
    def name(self):
        return f"contact {Shape(self.shape).name.lower()}-obstacle {self.obstacle}"


class ParticleAgainstStatic(ContactTerm):
    """Particles (balls of their radius) against a static surface (`ParticlePlane`,
    `ParticleObstacle`): one element and one row per particle."""

    n_particles = 1
    side_a = ("particle", 0)
    rows_per_element = 1

    @property
    def count(self):
        return len(self.particles)

    def collide(self, x, p, shared):
        centre = x.particle_pos[:1]
        return _balls_against(centre, p["radius"][None],
                              *_static_distance(self, centre, p, shared))

    def elements(self, model, state, control, stages):
        particle = jnp.asarray(self.particles, jnp.int32)
        e = len(self.particles)
        side, surface, shared = _static_side(self, model, e)
        params = {"radius": model.particle.radius[particle], **side,
                  **_combined(_surface(model.particle, particle), surface)}
        return _finish(self, model, state, jnp.zeros((e, 0), jnp.int32), particle[:, None],
                       params, shared, jnp.ones((e, 1), bool))


@dataclasses.dataclass(frozen=True)
class ParticlePlane(ParticleAgainstStatic):
    """Particles against planes. Elements: the static (particle, plane) table."""

    particles: tuple
    planes: tuple
    laws: Laws
    against_plane = True
    name = "contact particle-plane"


@dataclasses.dataclass(frozen=True)
class ParticleObstacle(ParticleAgainstStatic):
    """Particles against one obstacle's signed distance grid."""

    particles: tuple
    obstacle: int
    laws: Laws
    against_plane = False

    @property
    def name(self):
        return f"contact particle-obstacle {self.obstacle}"


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
        params = {**_geometry(model, geom, self.shape, self.placed, "", self.n_vertices),
                  "radius": model.particle.radius[jnp.maximum(particle, 0)],
                  **_combined(_surface(model.particle, jnp.maximum(particle, 0)),
                              _surface(model.geom, jnp.maximum(geom, 0)))}
        body = _geom_body(model, jnp.where(used, geom, -1))
        return _finish(self, model, state, body[:, None], particle[:, None], params,
                       _shared(model), used[:, None])


# How each pair of shapes (shape_a <= shape_b) meets, keyed by the pair (as MJX keys its
# collision functions by geom types): the parts of its rows, each a collider of `BodyPair`:
#   "a" / "b": that side's contact points (`geometry.proxy_count` balls) against the other's core;
#   "segments": the closest points of two capsules' segments (one row);
#   "edges": one frozen edge-edge row (`geometry.edge_pairing`), where points miss edge contact.
COLLIDERS = {
    **{(Shape.SPHERE, other): ("a",) for other in Shape},
    (Shape.BOX, Shape.BOX): ("a", "b", "edges"),
    (Shape.BOX, Shape.CAPSULE): ("a", "b", "edges"),
    (Shape.BOX, Shape.MESH): ("a", "b"),
    (Shape.CAPSULE, Shape.CAPSULE): ("segments",),
    (Shape.CAPSULE, Shape.MESH): ("a", "b"),
    (Shape.MESH, Shape.MESH): ("a", "b"),
}


@dataclasses.dataclass(frozen=True)
class BodyPair(ContactTerm):
    """Geoms of shapes (shape_a <= shape_b) on two bodies against each other (`COLLIDERS`):
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
        return COLLIDERS[(Shape(self.shape_a), Shape(self.shape_b))]

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
        found = [self._segments(x, p) if part == "segments" else
                 self._edges(x, p) if part == "edges" else
                 self._points(x, p, *((0, 1) if part == "a" else (1, 0)))
                 for part in self.parts]
        return tuple(jnp.concatenate(rows) for rows in zip(*found))

    def _segments(self, x, p):
        """The "segments" collider: one row at the closest points of two capsules."""
        out = geometry.segment_segment(x.pos[0], x.quat[0], p["size_a"], x.pos[1], x.quat[1],
                                       p["size_b"])
        return tuple(v[None] for v in out)

    def _edges(self, x, p):
        """The "edges" collider: one row between the edges paired at the start of the step."""
        sides = [(geometry.core_half(s, p["size" + k], p["rounding" + k]),
                  geometry.shape_radius(s, p["size" + k], p["rounding" + k]))
                 for s, k in ((self.shape_a, "_a"), (self.shape_b, "_b"))]
        out = geometry.edge_edge(x.pos[0], x.quat[0], *sides[0], x.pos[1], x.quat[1],
                                 *sides[1], p["edge"], p["edge_sign"])
        return tuple(v[None] for v in out)

    def _points(self, x, p, own, other):
        """The "a" / "b" colliders: side `own`'s contact points against side `other`'s core;
        normals point from body b towards body a, as every collider's."""
        shapes, keys = (self.shape_a, self.shape_b), ("_a", "_b")
        centre, radius = _points(shapes[own], x, own, p, keys[own])
        distance = geometry.core_distance(shapes[other])
        k = keys[other]
        planes = p.get("planes" + k, jnp.zeros((1, 4), centre.dtype))
        core_radius = geometry.shape_radius(shapes[other], p["size" + k], p["rounding" + k])

        def one(c, r):
            return geometry.ball_against_core(
                c, r, x.pos[other], x.quat[other],
                lambda q: distance(q, p["size" + k], p["rounding" + k], planes), core_radius)

        gap, normal, point = jax.vmap(one)(centre, radius)
        return gap, normal if own == 0 else -normal, point

    def elements(self, model, state, control, stages):
        a, b, used = _pair_slots(self, stages)
        params = {**_geometry(model, a, self.shape_a, self.placed, "_a", self.n_vertices),
                  **_geometry(model, b, self.shape_b, self.placed, "_b", self.n_vertices),
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
                       params, _shared(model), rows_used)

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
      force:     (K,) the normal law's force -ψ'(gap) (`normal_force`) at the stiffness the
                 step uses (lowered where near-rigid: `jc.Contact`), N; 0 where unused.
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
        force = normal_force(term.laws, el.shared, gap,
                             per_row["stiffness"] * el.params["rigid_factor"].reshape(-1))
        out.append(ContactRows(
            gap=gap, normal=normal.reshape(-1, 3), point=point.reshape(-1, 3),
            used=used.reshape(-1), force=jnp.where(used.reshape(-1), force, 0.0), **per_row))
    if not out:
        z = jnp.zeros((0,), state.pos.dtype)
        i = jnp.zeros((0,), jnp.int32)
        return ContactRows(z, jnp.zeros((0, 3)), jnp.zeros((0, 3)), i, i, i,
                           jnp.zeros((0,), bool), z, z, z, z)
    return jax.tree.map(lambda *x: jnp.concatenate(x), *out)
