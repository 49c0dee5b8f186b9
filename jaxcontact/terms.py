"""Terms: everything physical in a step, declared once, and the generic assembly of the step.

A term (gravity, a contact collider, a joint kind, a spring, a motor, an attachment, FEM
elements, cloth triangles, a user energy) is a static object that declares

  - which blocks of degrees of freedom each of its E elements touches: kb bodies and kp
    particles (`Elements.bodies` (E, kb), `Elements.particles` (E, kp); body -1 = world),
    decided once by `Scene.build` or, for contact candidates, by the broad phase of the step;
  - its parameters per element (`Elements.params`, leaves with leading axis E gathered from
    `Model` leaves, so they are differentiable) and parameters its elements share;
  - the element's share of the step's potential as a function of its local velocity vector
    x (`Term.energy`): a smooth potential of the end-of-step configuration q+(x) and
    velocities (`EnergyTerm.potential`, or `RowTerm.rows`: constraint rows e(q+) with a
    stiffness and a row kind, whose potential is Σ ψ_kind(e)), or, for contact, a convex cost
    of rows linearized at the start of the step (`models.contacts.ContactTerm`).

The step's potential (DESIGN.md section 1, v2; thesis Eq. 104-106; ADD Sec. 3) is one fixed
function of the velocities u:

    Φ(u) = 1/2 (u - ũ)ᵀ M (u - ũ) + Σ_terms Σ_elements Ψ_e(x_e(u))

Everything a solver needs is derived from it by gather → vmap(local) → scatter, here and
nowhere else: Φ, its gradient, its Hessian assembled block-sparse (contact rows contribute
Jᵀ ∇²ℓ J, positive semi-definite by construction), Φ's first two derivatives along a line
(the line search), and the constraint rows Dual projects.
No law is written twice: a row term's energy *is* its rows' laws.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import aggregation, dofs, validate
from jaxcontact.math import world_inertia, world_inertia_inv
from jaxcontact.problem import BlockDiagonal, Hessian, Problem, RowBlock
from jaxcontact.types import Array

BILATERAL, UNILATERAL, CONTACT, CONE = "bilateral", "unilateral", "contact", "cone"


# --- row laws ------------------------------------------------------------------------------

def bilateral_energy(e, s):
    """ψ = s/2 e²: an equality row in compliance form (thesis Eq. 117), λ = -s e."""
    return 0.5 * s * e * e


def unilateral_energy(e, s):
    """ψ = s/2 min(e, 0)²: a one-sided row (cable, limit), λ = max(-s e, 0)."""
    low = jnp.minimum(e, 0.0)
    return 0.5 * s * low * low


@struct.dataclass
class RowGroup:
    """c rows of ONE element with one law (what `RowTerm.rows` returns, per element).

    Attributes:
      error:     (c,) row errors e(x).
      stiffness: (c,) s: the multiplier is λ = -s e on the quadratic part of the law.
      law:       static ψ(e, s) (a module-level function).
      kind:      static "bilateral" or "unilateral" (the compliance form Dual projects).
    """

    error: Array
    stiffness: Array
    law: Callable = struct.field(pytree_node=False)
    kind: str = struct.field(pytree_node=False, default="")

    def energy(self):
        """Σ ψ of the group."""
        return jnp.sum(self.law(self.error, self.stiffness))


def bilateral(error, stiffness) -> RowGroup:
    """Equality rows s/2 e²."""
    return RowGroup(error, stiffness, law=bilateral_energy, kind=BILATERAL)


def unilateral(error, stiffness) -> RowGroup:
    """One-sided rows s/2 min(e, 0)²."""
    return RowGroup(error, stiffness, law=unilateral_energy, kind=UNILATERAL)


# --- terms ---------------------------------------------------------------------------------

@struct.dataclass
class Elements:
    """The per-step data of a term's E elements (computed once per step, differentiable).

    Attributes:
      bodies:    (E, kb) int body indices (-1 = world).
      particles: (E, kp) int particle indices.
      start:     `dofs.Start`, the poses of those blocks at the start of the step.
      params:    pytree of per-element parameters, leading axis E.
      shared:    pytree of parameters common to all elements (no leading axis).
      index:     (E, 6 kb + 3 kp) DOF indices into u (filled in by `prepare`).
    """

    bodies: Array
    particles: Array
    start: dofs.Start
    params: Any
    shared: Any = None
    index: Any = None


def particle_elements(state, particles, params) -> Elements:
    """The `Elements` of a term over particles only (a mesh's tetrahedra, triangles,
    hinges): `particles` a static (E, kp) index table, `params` leaves with leading axis E."""
    particles = np.asarray(particles, np.int32)
    bodies = np.zeros((particles.shape[0], 0), np.int32)
    return Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                    start=dofs.gather_start(state, bodies, particles), params=params)


class Term:
    """Base of every term (module docstring). Subclasses are frozen dataclasses: static and
    hashable, they live in `Model.terms`.

    Class attributes:
      name: what error messages call the term.
      n_bodies, n_particles: kb and kp, the blocks of one element.
      linear: the energy is linear in u (gravity): `prepare` folds it into ũ.
      convex: the energy is convex in u (contact rows, gravity): where every term is, the
        Hessian is positive definite and Newton's dense directions need no modification.
      stages: shared per-step computations (`Stage`) the term's `elements` needs.
      reports_gaps: the term is a contact: `gaps` gives its rows' gaps for `StepInfo`.
      gauss_newton_directions: Newton's directions (and Descent's preconditioner) take the
        row term's Gauss-Newton Hessian (`gauss_newton`); the implicit gradients the exact one.
      project_directions: Newton's directions take the element Hessians that could make H
        indefinite projected to positive semi-definite (`Hessian.projected`: solids, note 60).
    """

    name: str = "term"
    n_bodies: int = 0
    n_particles: int = 0
    linear: bool = False
    convex: bool = False
    stages: tuple = ()
    reports_gaps: bool = False
    gauss_newton_directions: bool = False
    project_directions: bool = False

    def elements(self, model, state, control, stages) -> Elements:
        """Blocks, start poses and parameters of the elements for the step at `state`."""
        raise NotImplementedError

    def energy(self, x, start, params, shared, dt, reweighted=False):
        """Ψ_e: one element's share of Φ at its local velocity vector x (6 kb + 3 kp,).
        With `reweighted`, a function of the same value and gradient whose Hessian has
        friction's curvature reweighted (contact terms; `hessian`)."""
        raise NotImplementedError

    def without_rows(self) -> str | None:
        """Why the term has no compliance form for Dual, or None if it has one."""
        return f"{self.name} is an energy without constraint rows"

    def gaps(self, x, params, dt):
        """Contact gaps (c,) of one element at the end of the step (contact terms only)."""
        raise NotImplementedError


class EnergyTerm(Term):
    """A term given by a potential of its element's end-of-step `dofs.Local` view."""

    def potential(self, x, params, shared, dt):
        """Ψ of one element (x: `dofs.Local` at the end of the step)."""
        raise NotImplementedError

    def energy(self, x, start, params, shared, dt, reweighted=False, at=None):
        return self.potential(dofs.local(start, x, dt, at=at), params, shared, dt)


class RowTerm(EnergyTerm):
    """A term given by constraint rows: `rows(x, params, shared, dt)` returns a tuple of
    `RowGroup` per element; its potential is the sum of its rows' laws."""

    def rows(self, x, params, shared, dt) -> tuple:
        raise NotImplementedError

    def potential(self, x, params, shared, dt):
        return sum(g.energy() for g in self.rows(x, params, shared, dt))

    def without_rows(self) -> str | None:
        return None


def gauss_newton(term: RowTerm, x, start, params, shared, dt):
    """An element's exact gradient Jᵀψ'(e) and its Gauss-Newton Hessian Jᵀψ''(e)J (J the
    rows' Jacobian in x, ψ the rows' laws): positive semi-definite whatever the errors, for
    terms whose rows may start far from their targets (joint limits: design note 57). The
    exact Hessian adds Σ ψ'(e) ∇²e, which such a row makes strongly indefinite."""
    def errors(y):
        groups = term.rows(dofs.local(start, y, dt), params, shared, dt)
        return jnp.concatenate([g.error for g in groups]), groups

    # (the rows at x ride along as aux: evaluated once)
    _, jvp_of, groups = jax.linearize(errors, x, has_aux=True)
    jac = jax.vmap(jvp_of, out_axes=1)(jnp.eye(x.shape[0], dtype=x.dtype))
    slope, curve = [], []
    for g in groups:
        def derivative(e, k, law=g.law):
            return jax.jvp(lambda t: jax.grad(law)(t, k), (e,), (jnp.ones_like(e),))

        first, second = jax.vmap(derivative)(g.error, g.stiffness)
        slope.append(first), curve.append(second)
    slope, curve = jnp.concatenate(slope), jnp.concatenate(curve)
    return jac.T @ slope, jac.T @ (curve[:, None] * jac)


class Stage:
    """A shared per-step computation (the broad phase), run once per step for all the terms
    that list it in `stages`. A result with an `overflow` flag is reported in `StepInfo`."""

    def __call__(self, model, state):
        raise NotImplementedError


# --- the step's context ----------------------------------------------------------------------

@struct.dataclass
class Context:
    """What the step's problem needs that does not depend on u, computed once per step.

    It is a function of (model, state, control) and reaches the solvers inside their args, so
    implicit gradients flow to model, state and control through it by ordinary autodiff.

    Attributes:
      elements: tuple of `Elements`, one per term of `model.terms` (contact rows linearized).
      mass:     `BlockDiagonal` mass of the step: diag(m I₃, R I Rᵀ) per body (world frame
                at the start of the step), m I₃ per particle.
      u_free:   (n,) ũ: velocities after an explicit step of the control forces and the
                gyroscopic torque, plus the impulse of the terms linear in u (gravity).
      u_start:  (n,) where a solve starts: ũ without the controls' impulses. A control
                force is one linear term of Φ, and the first Newton step weighs it against
                everything that resists it; started at ũ instead, a torque on a light body
                that a joint's armature holds (gymnasium's ant: legs of 1e-3 kg m², armature
                1 kg m², 150 N m) sets the body spinning at Δt τ/I, hundreds of rad/s, and
                Newton converged on 0.8 % of its steps under random controls.
      overflow: () bool, a stage dropped candidates (`jc.BroadPhase`).
      coarse:   the meshes' `aggregation.CoarseSpace` at the start of the step (multilevel
                preconditioning), or None (`coarse_space`).
      quat:     (N + 1, 4) body orientations at the start of the step, the world's identity
                last (`turns`).
      resolution: (n,) the finest velocity each DOF's step resolves in its precision
                (`resolution`).
    """

    elements: tuple
    mass: BlockDiagonal
    u_free: Array
    u_start: Array
    overflow: Array
    coarse: Any = None
    quat: Any = None
    resolution: Any = None


def layout(model) -> dofs.Layout:
    return dofs.Layout(model.n_body, model.n_particle)


def mass_blocks(model, state) -> BlockDiagonal:
    """The step's mass: diag(m I₃, R diag(I) Rᵀ) per body, m I₃ per particle, with its
    inverse in closed form, diag(I₃ / m, R diag(1/I) Rᵀ) and I₃ / m (every M⁻¹ v of the
    step is a product: no elimination)."""
    dtype = state.pos.dtype
    eye = jnp.eye(3, dtype=dtype)[None]

    def rigid(mass, inertia):
        out = jnp.zeros((model.n_body, 6, 6), dtype)
        out = out.at[:, :3, :3].set(mass[:, None, None] * eye)
        return out.at[:, 3:, 3:].set(inertia)

    particle = model.particle_masses[:, None, None]
    return BlockDiagonal(
        (rigid(model.body.mass, world_inertia(state.quat, model.body.inertia)), particle * eye),
        inverses=(rigid(1.0 / model.body.mass, world_inertia_inv(state.quat, model.body.inertia)),
                  eye / particle))


def prepare(model, state, control, at=None, multilevel=False) -> Context:
    """The u-independent part of the step's problem: mass, ũ, and every term's elements
    (each shared stage, e.g. the broad phase, runs once; contact rows are linearized at the
    start of the step).

    With `at` (velocities u of a previous solve of this step, `relinearize`), contact rows
    are linearized about u instead of the start of the step
    (`models.contacts.ContactTerm.linearize`); everything else is the same. `multilevel`:
    the solve asks for the meshes' coarse space even where it does not pay (`coarse_space`)."""
    mass = mass_blocks(model, state)
    inertia = mass.blocks[0][:, 3:, 3:]
    gyroscopic = -jnp.cross(state.ang_vel, jnp.einsum("nij,nj->ni", inertia, state.ang_vel))
    inverse = world_inertia_inv(state.quat, model.body.inertia)

    def after(force, torque):
        vel = state.vel + model.dt * force / model.body.mass[:, None]
        ang_vel = state.ang_vel + model.dt * jnp.einsum("nij,nj->ni", inverse, torque)
        return dofs.join(vel, ang_vel, state.particle_vel)

    u_free = after(control.force, control.torque + gyroscopic)
    u_rest = after(jnp.zeros_like(control.force), gyroscopic)
    results, overflow = {}, jnp.zeros((), bool)
    for term in model.terms:
        for stage in term.stages:
            if stage not in results:
                results[stage] = stage(model, state)
                overflow = overflow | getattr(results[stage], "overflow", False)
    elements = []
    for term in model.terms:
        el = term.elements(model, state, control, results)
        el = el.replace(index=dofs.dof_index(el.bodies, el.particles, layout(model)))
        if term.reports_gaps:
            el = term.linearized(el, model.dt, None if at is None else dofs.gather(at,
                                                                                 el.index))
            el = term.regularized(el, delassus(el, mass), model.dt)
        elements.append(el)
    elements = tuple(elements)
    return Context(elements=elements, mass=mass,
                   u_free=_free_flight(model, elements, mass, u_free),
                   u_start=_free_flight(model, elements, mass, u_rest), overflow=overflow,
                   coarse=coarse_space(model, state, multilevel),
                   quat=jnp.concatenate([state.quat, jnp.asarray([[1.0, 0.0, 0.0, 0.0]],
                                                                  state.quat.dtype)]),
                   resolution=jax.lax.stop_gradient(_resolution(model, state, mass)))


def _resolution(model, state, mass: BlockDiagonal):
    """(n,) the finest velocity each DOF's step resolves: q+ = q + Δt u is stored to the
    precision eps, so a body at distance |x| from the origin, its points r (its largest radius
    of gyration) from its centre, moves in steps of eps L, L = |x| + r, and velocities closer
    than eps L / Δt give the same q+; a turn about a DOF's axis, of radius of gyration
    r_i = √(M_ii / m), resolves eps L / (Δt r_i) (equal kinetic energies: eps L / Δt · √(m /
    M_ii) for every DOF, particles with r = 0). Where stiff potentials decide u (joints), its
    error is this rounding through H⁻¹ ∇²E, which no solver resolves finer (design note 59).
    Bodies joined by joints or springs (`Body.group`) feel each other's roundings, which are
    independent: each takes the root sum of squares of its group's L (design note 62)."""
    eps = jnp.finfo(state.pos.dtype).eps
    body_mass = model.body.mass[:, None]
    reach = (jnp.max(jnp.abs(state.pos), axis=1, keepdims=True)
             + jnp.sqrt(jnp.max(model.body.inertia, axis=1, keepdims=True) / body_mass))
    if model.body.group:
        group = np.asarray(model.body.group)
        pooled = jax.ops.segment_sum(reach[:, 0] ** 2, group, num_segments=group.size)
        reach = jnp.sqrt(pooled)[group][:, None]
    reach_particle = jnp.max(jnp.abs(state.particle_pos), axis=1, keepdims=True)
    length = dofs.join(jnp.broadcast_to(reach, state.pos.shape),
                       jnp.broadcast_to(reach, state.pos.shape),
                       jnp.broadcast_to(reach_particle, state.particle_pos.shape))
    own = dofs.join(jnp.broadcast_to(body_mass, state.pos.shape),
                    jnp.broadcast_to(body_mass, state.pos.shape),
                    jnp.broadcast_to(model.particle_masses[:, None], state.particle_pos.shape))
    return eps * length / model.dt * jnp.sqrt(own / mass.diagonal())


def delassus(el: Elements, mass: BlockDiagonal):
    """(E, c, 3, 3) J M⁻¹ Jᵀ of each linearized contact row, its bodies' and particles'
    own inverse masses (the mass is block-diagonal: a sum over the element's blocks)."""
    jac = el.params["jac"]
    rigid, particle = mass.inverses
    kb = el.bodies.shape[1]
    out = 0.0
    for slot, (blocks, index) in enumerate(
            [(rigid, el.bodies[:, i]) for i in range(kb)]
            + [(particle, el.particles[:, j]) for j in range(el.particles.shape[1])]):
        size = blocks.shape[1]
        start = slot * dofs.BODY_DOF if slot < kb else (kb * dofs.BODY_DOF
                                                        + (slot - kb) * dofs.PARTICLE_DOF)
        inv = jnp.where((index >= 0)[:, None, None], dofs.take(blocks, jnp.maximum(index, 0)),
                        0.0)
        part = jac[..., start:start + size]
        out = out + jnp.einsum("ecid,edf,ecjf->ecij", part, inv, part)
    return out


def coarse_space(model, state, asked=False):
    """The coarse space of the model's meshes at the state's positions, where a solve may
    use it: cloth of at least `aggregation.MIN_PARTICLES` particles (where the multilevel
    preconditioner pays: design note 31), or where the solve asks for it; else None."""
    if not asked and not aggregation.pays(model):
        return None   # (decided before the hierarchy, which a solid alone never needs)
    structure = aggregation.of_model(model)
    if structure is None:
        return None
    return aggregation.coarse_space(structure, state.particle_pos)


def _free_flight(model, elements, mass, u_free):
    """ũ plus the impulse of the terms linear in u (gravity): where the step goes without
    any other term (the start of thesis Algorithms 2 and 3)."""
    linear = [(t, el) for t, el in zip(model.terms, elements) if t.linear]
    if not linear:
        return u_free

    def linear_potential(u):
        total = 0.0
        for term, el in linear:
            x = dofs.gather(u, el.index)
            total = total + jnp.sum(_each(_energy, term, el, model.dt, x, None))
        return total

    return u_free - mass.solve(jax.grad(linear_potential)(jnp.zeros_like(u_free)))


# --- generic assembly (every function takes args = (model, ctx) last) -------------------------

def _energy(term, dt, x, at, start, params, shared, reweighted=False):
    """Ψ_e(x) of one element; orientations from the bodies' expansions `at` where given."""
    if at is None:
        return term.energy(x, start, params, shared, dt, reweighted)
    return term.energy(x, start, params, shared, dt, reweighted, at=at)


def _each(kernel, term, el: Elements, dt, *per_element, extra=()):
    """kernel(term, dt, *per_element, start, params, shared, *extra) over the elements (vmap);
    the kernels, below, are the only per-element code of the generic assembly. A per-element
    argument may be None (then every element gets None)."""
    present = tuple(a is not None for a in per_element)
    given = tuple(a for a in per_element if a is not None)

    def one(args, start, params, shared):
        it = iter(args)
        full = tuple(next(it) if p else None for p in present)
        return kernel(term, dt, *full, start, params, shared, *extra)

    return jax.vmap(one, in_axes=(0, 0, 0, None))(given, el.start, el.params, el.shared)


_autodiff_gradient = jax.grad(_energy, argnums=2)


def _energy_gradient(term, dt, x, at, start, params, shared, reweighted=False):
    """∇Ψ_e(x) of one element: the term's own where it has one (contact rows), else by
    autodiff."""
    if hasattr(term, "gradient") and not reweighted:
        return term.gradient(x, start, params, shared, dt)
    return _autodiff_gradient(term, dt, x, at, start, params, shared, reweighted)


def _gradient_and_hessian(term, dt, x, at, start, params, shared, form):
    """An element's gradient and local Hessian (d, d) (`hessian`'s `form`): the Gauss-Newton
    Hessian for Newton's directions where the term asks for it (`gauss_newton_directions`),
    else the term's own where it has one (contact rows: Jᵀ ∇²ℓ J), else by
    forward-over-reverse autodiff."""
    if form != "exact" and term.gauss_newton_directions:
        return gauss_newton(term, x, start, params, shared, dt)
    reweighted = form == "reweighted"
    if hasattr(term, "gradient_and_hessian"):
        return term.gradient_and_hessian(x, start, params, shared, dt, reweighted)

    def grad_at(y):
        return _energy_gradient(term, dt, y, at, start, params, shared, reweighted)

    # (jacfwd would trace the gradient a second time for the value)
    g, hess = jax.vmap(lambda t: jax.jvp(grad_at, (x,), (t,)), out_axes=(None, -1))(
        jnp.eye(x.shape[0], dtype=x.dtype))
    return g, 0.5 * (hess + hess.T)


def _along(term, dt, x, d, start, params, shared, alpha):
    """(Ψ_e', Ψ_e'') along x + α d at α = alpha: the line search's derivatives (the term's
    own where it has them)."""
    if hasattr(term, "along"):
        return term.along(x, d, alpha, start, params, shared, dt)

    def value(a):
        return term.energy(x + a * d, start, params, shared, dt)

    return jax.jvp(jax.grad(value), (alpha,), (jnp.ones_like(alpha),))


def shares_turns(model, ctx) -> bool:
    """Whether the elements read their bodies' orientations from one shared expansion per
    body (`turns`), or each integrates its own (static, from the element tables' shapes).

    Sharing pays where the smooth terms' elements read more body orientations than there
    are bodies (joints, several springs per body: design note 39); where each body is read
    about once, the expansion would only add its own work and a gather to the element's."""
    reads = sum(el.bodies.size for term, el in zip(model.terms, ctx.elements)
                if isinstance(term, EnergyTerm) and not term.linear)
    return reads > ctx.quat.shape[0] - 1


def turns(u, args, order=2) -> dofs.Turn | None:
    """Every body's end-of-step orientation expanded about u's angular velocities to `order`
    (`dofs.Turn`; the world's last, at rest): computed once per assembly, read by every
    term's elements. None where the elements integrate their own (`shares_turns`)."""
    model, ctx = args
    if not shares_turns(model, ctx):
        return None
    _, ang_vel, _ = dofs.split(u, layout(model))
    ang_vel = jnp.concatenate([ang_vel, jnp.zeros((1, 3), ang_vel.dtype)])
    return dofs.turn(ctx.quat, ang_vel, model.dt, order)


def _turn_of(turn: dofs.Turn | None, term, el: Elements):
    """The expansions of an element's bodies, (E, kb, ...) (-1 picks the world's, last);
    None where not shared or the term reads no orientation through them (contacts)."""
    if turn is None or not isinstance(term, EnergyTerm):
        return None
    world = turn.at.shape[0] - 1
    bodies = jnp.where(el.bodies < 0, world, el.bodies)
    return jax.tree.map(lambda a: dofs.take(a, bodies), turn)


def _smooth(model, ctx):
    """(term, elements) pairs of the non-linear terms (the linear ones are in ũ)."""
    return [(t, el) for t, el in zip(model.terms, ctx.elements) if not t.linear]


def convex(model) -> bool:
    """Whether every term of `model` is convex in u (static): Φ is then strictly convex."""
    return all(t.convex for t in model.terms)


def kinetic(u, ctx: Context):
    du = u - ctx.u_free
    return 0.5 * jnp.dot(du, ctx.mass.apply(du))


def value(u, args):
    """Φ(u) (module docstring; gravity's potential, linear, is in ũ up to a constant)."""
    model, ctx = args
    total = kinetic(u, ctx)
    at = turns(u, args, 0)
    for term, el in _smooth(model, ctx):
        total = total + jnp.sum(_each(_energy, term, el, model.dt, dofs.gather(u, el.index),
                                      _turn_of(at, term, el)))
    return total


def gradient(u, args):
    """∇Φ(u): zero at the end-of-step velocities."""
    model, ctx = args
    n = layout(model).size
    at = turns(u, args, 1)
    g = ctx.mass.apply(u - ctx.u_free)
    for term, el in _smooth(model, ctx):
        g_e = _each(_energy_gradient, term, el, model.dt, dofs.gather(u, el.index),
                    _turn_of(at, term, el))
        g = g + dofs.scatter(g_e, el.index, n)
    return g


def residual(u, args):
    """M⁻¹ ∇Φ(u): the residual in units of velocity (m/s, rad/s)."""
    return args[1].mass.solve(gradient(u, args))


HESSIAN_FORMS = ("exact", "newton", "reweighted")


def hessian(u, args, form="exact"):
    """(∇Φ(u), ∇²Φ(u) as a block-sparse `Hessian`). `form`: "exact" (the implicit gradients'
    H), "newton" (Newton's directions: joints and limits take their Gauss-Newton part,
    `gauss_newton`, design notes 57-58), "reweighted" (Descent's: also friction's curvature
    reweighted, thesis Eq. 136, `models.contact`: positive along a slipping contact's slip
    where the exact Hessian has none)."""
    validate.choice("form", form, HESSIAN_FORMS)
    model, ctx = args
    n = layout(model).size
    at = turns(u, args)
    g = ctx.mass.apply(u - ctx.u_free)
    local, index, blocks, slots, project = [], [], [], [], []
    for term, el in _smooth(model, ctx):
        g_e, h_e = _each(_gradient_and_hessian, term, el, model.dt, dofs.gather(u, el.index),
                         _turn_of(at, term, el), extra=(form,))
        g = g + dofs.scatter(g_e, el.index, n)
        local.append(h_e)
        index.append(el.index)
        blocks.append(dofs.block_ids(el.bodies, el.particles))
        slots.append(dofs.slots(term.n_bodies, term.n_particles))
        project.append(term.project_directions)
    return g, Hessian(ctx.mass, tuple(local), tuple(index), tuple(blocks), tuple(slots), n,
                      ctx.coarse, convex(model), tuple(project))


def along(u, d, alpha, args):
    """(φ'(α), φ''(α)) of φ(α) = Φ(u + α d): the line search's derivatives (no values: near
    the answer Φ's changes are below the rounding of its large terms, its slope is not)."""
    model, ctx = args
    m_d = ctx.mass.apply(d)
    slope = jnp.dot(m_d, u + alpha * d - ctx.u_free)
    curvature = jnp.dot(m_d, d)
    for term, el in _smooth(model, ctx):
        s_e, c_e = _each(_along, term, el, model.dt, dofs.gather(u, el.index),
                         dofs.gather(d, el.index), extra=(alpha,))
        slope, curvature = slope + jnp.sum(s_e), curvature + jnp.sum(c_e)
    return slope, curvature


def _term_rows(term, el: Elements, u, dt):
    """The rows of one row term at u: per group, errors and local Jacobians G = ∂e/∂x."""
    def groups_at(y, start, params, shared):
        return term.rows(dofs.local(start, y, dt), params, shared, dt)

    def one(x, start, params, shared):
        groups = groups_at(x, start, params, shared)
        jac = jax.jacfwd(lambda y: tuple(g.error for g in groups_at(y, start, params,
                                                                    shared)))(x)
        return groups, jac

    return jax.vmap(one, in_axes=(0, 0, 0, None))(dofs.gather(u, el.index), el.start,
                                                   el.params, el.shared)


def rows(u, args) -> tuple:
    """Every term's constraint rows at u (what Dual projects): a flat tuple of `RowBlock`.

    Row terms give their rows at q+(u) with their Jacobians; contact terms their linearized
    rows in compliance form (`models.contacts.ContactTerm.compliance`)."""
    model, ctx = args
    out = []
    for term, el in zip(model.terms, ctx.elements):
        blocks, slots = dofs.block_ids(el.bodies, el.particles), dofs.slots(term.n_bodies,
                                                                           term.n_particles)
        if isinstance(term, RowTerm):
            groups, jacs = _term_rows(term, el, u, model.dt)
            for g, jac in zip(groups, jacs):
                out.append(RowBlock(error=g.error, jac=jac, stiffness=g.stiffness,
                                    limit=jnp.zeros_like(g.stiffness), index=el.index,
                                    blocks=blocks, slots=slots, kind=g.kind, term=term.name))
        elif term.reports_gaps:
            x = dofs.gather(u, el.index)
            error, stiffness, limit = jax.vmap(
                lambda xe, p: term.compliance(xe, p, el.shared, model.dt))(x, el.params)
            out.append(RowBlock(error=error, jac=el.params["jac"], stiffness=stiffness,
                                limit=limit, index=el.index, blocks=blocks, slots=slots,
                                kind=CONE if term.laws.coupling == "cone" else CONTACT,
                                term=term.name))
    return tuple(out)


def mass(args) -> BlockDiagonal:
    return args[1].mass


def resolution(args):
    return args[1].resolution


def free_flight(args):
    """Where a solve starts: ũ without the controls' impulses, gravity's included
    (`Context.u_start`)."""
    return args[1].u_start


def _contact_rows(u, args, kernel):
    """kernel(term, x, params, shared) of every contact element, flat over their rows."""
    model, ctx = args
    out = []
    for term, el in zip(model.terms, ctx.elements):
        if term.reports_gaps:
            x = dofs.gather(u, el.index)
            out.append(jax.vmap(lambda x, p, term=term, el=el: kernel(term, x, p, el.shared))(
                x, el.params).reshape(-1))
    return jnp.concatenate(out) if out else jnp.zeros((0,), u.dtype)


def contact_gaps(u, args):
    """Gaps of every contact row (flat) at the end of the step for velocities u, to first
    order (the rows' linearization)."""
    dt = args[0].dt
    return _contact_rows(u, args, lambda term, x, p, shared: term.gaps(x, p, dt))


def contact_impulses(u, args):
    """The normal impulse every contact row (flat) pushes with over the step for velocities
    u (> 0: the contact acts; with the cone coupling a sliding contact acts across a small
    positive gap, design note 57)."""
    dt = args[0].dt
    return _contact_rows(u, args, lambda term, x, p, shared: term.normal_impulses(x, p,
                                                                                  shared, dt))


def body_contacts(u, args, margin=0.0):
    """(N,) bool: body i has a contact row with gap <= margin at the end of the step for
    velocities u (u = 0: the configuration at its start)."""
    model, ctx = args
    touching = jnp.zeros((model.n_body,), bool)
    for term, el in zip(model.terms, ctx.elements):
        if not term.reports_gaps:
            continue
        gaps = jax.vmap(lambda x, p, term=term: term.gaps(x, p, model.dt))(
            dofs.gather(u, el.index), el.params)
        near = jnp.any(gaps.reshape(gaps.shape[0], -1) <= margin, axis=1)
        for side in range(el.bodies.shape[1]):
            body = el.bodies[:, side]
            # the world (-1) and padding rows scatter out of range and are dropped
            target = jnp.where(body >= 0, body, model.n_body)
            touching = touching.at[target].max(near, mode="drop")
    return touching


PROBLEM = Problem(gradient=gradient, hessian=hessian, along=along, rows=rows,
                  mass=mass, start=free_flight, resolution=resolution)
