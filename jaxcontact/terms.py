"""Terms: everything physical in a step, declared once, and the generic assembly of the step.

A term (gravity, a contact collider, a joint kind, a spring, a motor, an attachment, a user
energy; later FEM elements and cloth triangles) is a static object that declares

  - which blocks of degrees of freedom each of its E elements touches: kb bodies and kp
    particles (`Elements.bodies` (E, kb), `Elements.particles` (E, kp); body -1 = world),
    decided once by `Scene.build` or, for contact candidates, by the broad phase of the step;
  - its parameters per element (`Elements.params`, leaves with leading axis E gathered from
    `Model` leaves, so they are differentiable) and parameters its elements share;
  - a local function of ONE element: its contribution Ψ to the step's potential directly
    (`EnergyTerm.potential`), or constraint rows (`RowTerm.rows`: errors e(x, x̄) with a
    stiffness and a row kind), from which Ψ = Σ_j ψ_kind(e_j) is derived here.

x is the element's `dofs.Local` view at the end of the step for the velocities u being
solved for, x̄ the same for the lagged iterate ū (dissipation uses the contact frame and
friction bound of ū, thesis Eq. 132). The step's potential (thesis Eq. 104-106; ADD Sec. 3):

    Φ(u; ū) = 1/2 (u - ũ)ᵀ M (u - ũ) + Σ_terms Σ_elements Ψ_e(x_e(u), x̄_e(ū))

Everything a solver needs is derived from it by gather → vmap(local) → scatter, here and
nowhere else: Φ (the merit function), the residual ∇Φ(u; u), the exact Jacobian (local
Jacobians of each element's gradient, lag terms included, assembled block-sparse), the
symmetric Hessian of Φ(·; ū), Gauss-Newton blocks Gᵀ ψ'' G, the constraint rows Dual
projects by kind, and the rounding level of the residual. No law is written twice: a row
term's energy *is* its rows' laws.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import aggregation, dofs
from jaxcontact.math import safe_sqrt, world_inertia, world_inertia_inv
from jaxcontact.problem import (BlockDiagonal, Jacobian, Problem, RowBlock, RowModel,
                                gauss_newton_locals)
from jaxcontact.types import Array

BILATERAL, UNILATERAL, DISC = "bilateral", "unilateral", "disc"


# --- row laws ------------------------------------------------------------------------------

def bilateral_energy(e, s, bound):
    """ψ = s/2 e²: an equality row in compliance form (thesis Eq. 117), λ = -s e."""
    del bound
    return 0.5 * s * e * e


def unilateral_energy(e, s, bound):
    """ψ = s/2 min(e, 0)²: a one-sided row (contact, cable, limit), λ = max(-s e, 0)."""
    del bound
    low = jnp.minimum(e, 0.0)
    return 0.5 * s * low * low


def disc_energy(z, s, bound):
    """ψ(z = |e|²) = s/2 z inside s|e| < R, R|e| - R²/(2 s) outside (R = bound): the relaxed
    Coulomb potential of thesis Eq. 132-133 in row form, whose multiplier is -s e projected
    onto the disc |λ| <= R (Eq. 123). Smooth in z at e = 0; R = 0 gives no force."""
    stick = z < (bound / s) ** 2
    # strict: with R = 0 there is no stick stiffness either; the slip branch then sees z = 0
    # only through safe_sqrt, which is finite there
    slip = bound * safe_sqrt(jnp.where(stick, 1.0, z)) - bound * bound / (2.0 * s)
    return jnp.where(stick, 0.5 * s * z, slip)


@struct.dataclass
class RowGroup:
    """c rows of ONE element with one law (what `RowTerm.rows` returns, per element).

    Scalar rows: error (c,), energy Σ ψ(e, s, bound). Pair rows (friction): error (c, 2),
    energy Σ ψ(z = |e|², s, bound), isotropic in the pair.

    Attributes:
      error:     (c,) or (c, 2) row errors e(x, x̄).
      stiffness: (c,) s: the multiplier is λ = -s e on the quadratic part of the law.
      bound:     (c,) law parameter (the disc radius R of friction pairs).
      cone:      (c,) "disc": radius per unit multiplier of the partner row (μ Δt).
      law:       static ψ (a module-level function).
      kind:      static "bilateral", "unilateral", "disc" (compliance forms Dual projects),
                 or "" (a law without one: Dual refuses the term).
      partner:   static, "disc": index in the element's tuple of groups of the unilateral
                 group whose multipliers bound the disc.
      pair:      static, pair rows.
    """

    error: Array
    stiffness: Array
    bound: Array
    cone: Array
    law: Callable = struct.field(pytree_node=False)
    kind: str = struct.field(pytree_node=False, default="")
    partner: int = struct.field(pytree_node=False, default=-1)
    pair: bool = struct.field(pytree_node=False, default=False)

    def energy(self, irls=0.0):
        """Σ ψ of the group. With weight `irls` = w > 0, pair laws ψ(z) become
        (1 - w) ψ(z) + w ψ'(z₀) z, z₀ held at the point of evaluation: the iteratively
        reweighted quadratic has the same gradient there, but the curvature ψ'/|e| in every
        tangent direction instead of the exact one, which is zero along the slip (thesis
        Eq. 136 makes the same choice)."""
        if not self.pair:
            return jnp.sum(self.law(self.error, self.stiffness, self.bound))
        z = jnp.sum(self.error * self.error, axis=-1)
        exact = jnp.sum(self.law(z, self.stiffness, self.bound))
        if isinstance(irls, float) and irls == 0.0:
            return exact
        slope = jax.vmap(jax.grad(self.law))(jax.lax.stop_gradient(z), self.stiffness,
                                             self.bound)
        return (1.0 - irls) * exact + irls * jnp.sum(slope * z)

    def curvature(self):
        """Gauss-Newton curvature per row (c,): ψ''(e), or for pairs 2 ∂ψ/∂z (isotropic;
        thesis Eq. 131 and 136)."""
        if self.pair:
            z = jnp.sum(self.error * self.error, axis=-1)
            return 2.0 * jax.vmap(jax.grad(self.law))(z, self.stiffness, self.bound)
        return jax.vmap(jax.grad(jax.grad(self.law)))(self.error, self.stiffness, self.bound)


def _zeros(s):
    return jnp.zeros_like(s)


def bilateral(error, stiffness) -> RowGroup:
    """Equality rows s/2 e²."""
    return RowGroup(error, stiffness, _zeros(stiffness), _zeros(stiffness),
                    law=bilateral_energy, kind=BILATERAL)


def unilateral(error, stiffness) -> RowGroup:
    """One-sided rows s/2 min(e, 0)²."""
    return RowGroup(error, stiffness, _zeros(stiffness), _zeros(stiffness),
                    law=unilateral_energy, kind=UNILATERAL)


def disc(error, stiffness, bound, cone, partner) -> RowGroup:
    """Friction pairs (c, 2) with the relaxed Coulomb law, bounded by R = `bound` (primal) or
    cone λ_partner (Dual)."""
    return RowGroup(error, stiffness, bound, cone, law=disc_energy, kind=DISC,
                    partner=partner, pair=True)


def custom(error, stiffness, law, bound=None, pair=False) -> RowGroup:
    """Rows with a law ψ(e or z, s, bound) that has no compliance form."""
    bound = _zeros(stiffness) if bound is None else bound
    return RowGroup(error, stiffness, bound, _zeros(stiffness), law=law, pair=pair)


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
      live:      optional (E,) bool, the element exists this step (a filled broad-phase
                 slot). A dead element's energy is zero for every x; its energy, gradient
                 and Jacobians are then not evaluated where a whole chunk is dead (`_each`),
                 and Newton's directions leave out the dead slots past a prefix that holds
                 the live ones (`live_prefix`).
    """

    bodies: Array
    particles: Array
    start: dofs.Start
    params: Any
    shared: Any = None
    index: Any = None
    live: Any = None


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
      linear: Ψ is linear in u (gravity): `free_flight` folds it into ũ.
      stages: shared per-step computations (`Stage`) the term's `elements` needs.
      reports_gaps: the term is a contact: `gaps` gives its rows' gaps for `StepInfo`.
    """

    name: str = "term"
    n_bodies: int = 0
    n_particles: int = 0
    linear: bool = False
    stages: tuple = ()
    reports_gaps: bool = False

    def elements(self, model, state, control, stages) -> Elements:
        """Blocks, start poses and parameters of the elements for the step at `state`."""
        raise NotImplementedError

    def potential(self, x, lag, params, shared, dt, irls=0.0):
        """Ψ of one element (x, lag: `dofs.Local`); `irls`: weight of reweighted friction."""
        raise NotImplementedError

    def without_rows(self) -> str | None:
        """Why the term has no compliance form for Dual, or None if it has one."""
        return f"{self.name} is an energy without constraint rows"

    def gaps(self, x, params, shared):
        """Contact gaps (c,) of one element at x (contact terms only)."""
        raise NotImplementedError


class RowTerm(Term):
    """A term given by constraint rows: `rows(x, lag, params, shared, dt)` returns a tuple of
    `RowGroup` per element; its potential is the sum of its rows' laws."""

    def rows(self, x, lag, params, shared, dt) -> tuple:
        raise NotImplementedError

    def potential(self, x, lag, params, shared, dt, irls=0.0):
        return sum(g.energy(irls) for g in self.rows(x, lag, params, shared, dt))

    def without_rows(self) -> str | None:
        return None


class EnergyTerm(Term):
    """A term given by its local potential Ψ(x, x̄, params, shared, dt) directly."""


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
      elements: tuple of `Elements`, one per term of `model.terms`.
      mass:     `BlockDiagonal` mass of the step: diag(m I₃, R I Rᵀ) per body (world frame
                at the start of the step), m I₃ per particle.
      u_free:   (n,) ũ: velocities after an explicit step of the control forces and the
                gyroscopic torque (gravity is a term).
      u_flight: (n,) ũ plus the impulse of the terms linear in u (`free_flight`).
      overflow: () bool, a stage dropped candidates (`jc.BroadPhase`).
      resolution: (n,) the velocity that one rounding unit of the configuration amounts to
                over the step: eps |position| / Δt per translational DOF, eps / Δt per
                rotational one (`Problem.resolution`).
      coarse:   the meshes' `aggregation.CoarseSpace` at the start of the step (multilevel
                preconditioning), or None (`coarse_space`).
      quat:     (N + 1, 4) body orientations at the start of the step, the world's identity
                last (`turns`).
    """

    elements: tuple
    mass: BlockDiagonal
    u_free: Array
    u_flight: Array
    overflow: Array
    resolution: Array
    coarse: Any = None
    quat: Any = None


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


def prepare(model, state, control) -> Context:
    """The u-independent part of the step's problem: mass, ũ, and every term's elements
    (each shared stage, e.g. the broad phase, runs once)."""
    mass = mass_blocks(model, state)
    inertia = mass.blocks[0][:, 3:, 3:]
    vel = state.vel + model.dt * control.force / model.body.mass[:, None]
    torque = control.torque - jnp.cross(state.ang_vel,
                                        jnp.einsum("nij,nj->ni", inertia, state.ang_vel))
    inverse = world_inertia_inv(state.quat, model.body.inertia)
    ang_vel = state.ang_vel + model.dt * jnp.einsum("nij,nj->ni", inverse, torque)
    u_free = dofs.join(vel, ang_vel, state.particle_vel)
    results, overflow = {}, jnp.zeros((), bool)
    for term in model.terms:
        for stage in term.stages:
            if stage not in results:
                results[stage] = stage(model, state)
                overflow = overflow | getattr(results[stage], "overflow", False)
    elements = []
    for term in model.terms:
        el = term.elements(model, state, control, results)
        elements.append(el.replace(index=dofs.dof_index(el.bodies, el.particles,
                                                          layout(model))))
    eps = jnp.finfo(state.pos.dtype).eps
    resolution = jax.lax.stop_gradient(eps / model.dt * dofs.join(
        jnp.abs(state.pos), jnp.ones_like(state.ang_vel), jnp.abs(state.particle_pos)))
    elements = tuple(elements)
    return Context(elements=elements, mass=mass, u_free=u_free,
                   u_flight=_free_flight(model, elements, mass, u_free), overflow=overflow,
                   resolution=resolution, coarse=coarse_space(model, state),
                   quat=jnp.concatenate([state.quat, jnp.asarray([[1.0, 0.0, 0.0, 0.0]],
                                                                  state.quat.dtype)]))


def coarse_space(model, state):
    """The coarse space of the model's meshes at the state's positions, where a solve may
    use it: cloth of at least `aggregation.MIN_PARTICLES` particles (where the multilevel
    preconditioner pays: design note 31), or a solver that asks for it; else None."""
    wanted = {getattr(model.solver, "preconditioner", "auto"),
              getattr(getattr(model.solver, "gradients", None), "preconditioner", "auto")}
    if "multilevel" not in wanted and not aggregation.pays(model):
        return None   # (decided before the hierarchy, which a solid alone never needs)
    structure = aggregation.of_model(model)
    if structure is None:
        return None
    return aggregation.coarse_space(structure, state.particle_pos)


# --- generic assembly (every function takes args = (model, ctx) last) -------------------------

def _potential(term, dt, x, lag, at, at_lag, start, params, shared, irls=0.0, travel=None,
               lag_travel=None):
    """Ψ(x_e, x̄_e) of one element, from its local velocity vectors (the configuration moved
    by `travel`, `lag_travel` where given: `_configuration_floor`); orientations from the
    bodies' expansions `at`, `at_lag` about x and x̄ (`dofs.Turn`), or exact where None."""
    return term.potential(dofs.local(start, x, dt, travel, at),
                          dofs.local(start, lag, dt, lag_travel, at_lag), params, shared, dt, irls)


# elements per chunk where dead elements are skipped (`_each`)
_CHUNK = 16
# local velocity components of one term (elements x DOFs, `Elements.index.size`) from which
# `merit_change` evaluates its trial points one at a time: the 9 points of a 10,082-triangle
# cloth (bending elements of 18 DOFs) at once took 2.6x as long as one by one, whose arrays
# stay in cache; at 1,058 triangles 2.4x (design note 32)
_CACHED_VALUES = 2 ** 13
# local Jacobian entries of one term (elements x DOFs²) from which `_each` forms them in chunks
# of `_CACHE_CHUNK` elements: 2^19 float64 are a 4 MB L2 cache. Below it chunks cost more
# than they save (1,058 cloth bending elements: 11 ms at once, 14 in chunks)
_CACHED_ENTRIES = 2 ** 19
_CACHE_CHUNK = 512


def _each(kernel, term, el: Elements, dt, *per_element, extra=()):
    """kernel(term, dt, *per_element, start, params, shared, *extra) over the elements (vmap);
    the kernels, below, are the only per-element code of the generic assembly.

    Where the term marks which elements live (`Elements.live`: broad-phase slots, most of them
    empty in a sparse scene) and the kernel is one of the energy's (`_ENERGY_KERNELS`: zero for
    a dead element), the elements run in chunks of `_CHUNK`, and a chunk without a live
    element is not evaluated (its outputs are zeros). A chain of 40 boxes has 520 box-box
    slots and almost no candidates: evaluating every slot made its step 20x that of 10 boxes
    (design note 23). Under `vmap` over scenes the skip becomes a select, which evaluates
    every chunk, as before.

    Local Jacobians of a term whose elements are all live run in chunks of `_CACHE_CHUNK`
    where together they would not fit a core's cache (`_CACHED_ENTRIES`): the linearization
    of a 10,082-triangle cloth took 187 ms at once and 134 ms in chunks (design note 32)."""
    def one(x, start, params, shared):
        return kernel(term, dt, *x, start, params, shared, *extra)
    run = jax.vmap(one, in_axes=(0, 0, 0, None))
    n, dofs_per_element = el.index.shape
    if (el.live is None and kernel in _MATRIX_KERNELS and n >= 2 * _CACHE_CHUNK
            and n * dofs_per_element ** 2 >= _CACHED_ENTRIES):
        return jax.lax.map(lambda i: one(*i, el.shared), (per_element, el.start, el.params),
                           batch_size=_CACHE_CHUNK)
    if el.live is None or kernel not in _ENERGY_KERNELS or n < 2 * _CHUNK:
        return run(per_element, el.start, el.params, el.shared)
    chunks = -(-n // _CHUNK)
    pad = chunks * _CHUNK - n

    def split(a, fill=None):
        if pad:
            tail = (jnp.full((pad,) + a.shape[1:], fill, a.dtype) if fill is not None
                    else jnp.broadcast_to(a[:1], (pad,) + a.shape[1:]))
            a = jnp.concatenate([a, tail])
        return a.reshape((chunks, _CHUNK) + a.shape[1:])

    inputs = jax.tree.map(split, (per_element, el.start, el.params))
    live = split(el.live, False)
    shapes = jax.eval_shape(lambda i: run(*i, el.shared), jax.tree.map(lambda a: a[0], inputs))

    def chunk(_, c):
        i, alive = c
        return None, jax.lax.cond(
            jnp.any(alive), lambda i: run(*i, el.shared),
            lambda i: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes), i)

    _, out = jax.lax.scan(chunk, None, (inputs, live))
    return jax.tree.map(lambda o: o.reshape((chunks * _CHUNK,) + o.shape[2:])[:n], out)


# the element kernels of `_each`

_potential_gradient = jax.grad(_potential, argnums=2)


def _linearized(term, dt, x, x_lag, at, at_lag, start, params, shared, mode, irls):
    """An element's gradient and its local Jacobian (`linearize`), from one forward pass
    (`at_lag` expands about the lag point w x + (1 - w) x̄)."""
    def grad_at(y):
        # the lag is y itself in the exact Jacobian (w = 1), the held x̄ when w = 0
        y_lag = mode * y + (1.0 - mode) * x_lag
        return _potential_gradient(term, dt, y, y_lag, at, at_lag, start, params, shared, irls)

    # (jacfwd would trace the gradient a second time for the value)
    def push(t):
        return jax.jvp(grad_at, (x,), (t,))
    return jax.vmap(push, out_axes=(None, -1))(jnp.eye(x.shape[0], dtype=x.dtype))


def _configuration_floor(term, dt, x, resolution, at, start, params, shared):
    """|∂g_e/∂c| resolution_e: how far the element's gradient g_e(x) = ∇Ψ(x; x̄ = x) moves
    when only its end-of-step configuration c (moved by x) is rounded, its velocities held."""
    def grad_at(c):
        return jax.grad(lambda t: _potential(term, dt, x + t, x, at, at, start, params, shared,
                                             0.0, c + t, c))(jnp.zeros_like(x))
    return jnp.abs(jax.jacfwd(grad_at)(x)) @ resolution


def _row_groups(term, dt, x, lag, at, at_lag, start, params, shared):
    return term.rows(dofs.local(start, x, dt, at=at), dofs.local(start, lag, dt, at=at_lag),
                     params, shared, dt)


def _rows_and_jacobians(term, dt, x, lag, at, at_lag, start, params, shared):
    """An element's row groups at x (lag x̄), G = ∂e/∂x with the lag frozen, curvatures."""
    groups = _row_groups(term, dt, x, lag, at, at_lag, start, params, shared)
    jac = jax.jacfwd(lambda y: tuple(g.error for g in _row_groups(term, dt, y, lag, at, at_lag,
                                                                  start, params, shared)))(x)
    return groups, jac, tuple(g.curvature() for g in groups)


def _reweighted_hessian(term, dt, x, at, start, params, shared):
    """The Hessian of Ψ(·; x̄ = x) with reweighted friction (`gauss_newton`)."""
    return jax.hessian(_potential, argnums=2)(term, dt, x, jax.lax.stop_gradient(x), at, at,
                                              start, params, shared, 1.0)


def _gaps(term, dt, x, start, params, shared):
    return term.gaps(dofs.local(start, x, dt), params, shared)


# the kernels whose every output is zero for a dead element (`Elements.live`)
_ENERGY_KERNELS = (_potential, _potential_gradient, _linearized, _reweighted_hessian,
                   _configuration_floor)
# the kernels that form local (DOFs x DOFs) matrices
_MATRIX_KERNELS = (_linearized, _reweighted_hessian, _configuration_floor)


def shares_turns(model, ctx) -> bool:
    """Whether the elements read their bodies' orientations from one shared expansion per
    body (`turns`), or each integrates its own (static, from the element tables' shapes).

    Sharing pays where the nonlinear terms' elements read more body orientations than there
    are bodies (joints, piles, several colliders per body: design note 39); where each body
    is read about once (box_drop: one box on a plane), the expansion would only add its own
    work and a gather to the element's (design note 40)."""
    reads = sum(el.bodies.size for term, el in zip(model.terms, ctx.elements)
                if not term.linear)
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


def _turn_of(turn: dofs.Turn, el: Elements) -> dofs.Turn:
    """The expansions of an element's bodies, (E, kb, ...) (-1 picks the world's, last)."""
    if turn is None:
        return None
    world = turn.at.shape[0] - 1
    bodies = jnp.where(el.bodies < 0, world, el.bodies)
    return jax.tree.map(lambda a: dofs.take(a, bodies), turn)


def kinetic(u, ctx: Context):
    du = u - ctx.u_free
    return 0.5 * jnp.dot(du, ctx.mass.apply(du))


def merit(u, u_lag, args):
    """Φ(u; ū) (module docstring): the solvers' merit function (scalar)."""
    model, ctx = args
    total = kinetic(u, ctx)
    at, at_lag = turns(u, args, 0), turns(u_lag, args, 0)
    for term, el in zip(model.terms, ctx.elements):
        values = _each(_potential, term, el, model.dt, dofs.gather(u, el.index),
                       dofs.gather(u_lag, el.index), _turn_of(at, el), _turn_of(at_lag, el))
        total = total + jnp.sum(values)
    return total


def merit_change(u, u_lag, trial, args):
    """(Φ(v; ū) - Φ(u; ū) for each trial point v (rows of `trial`), the magnitude its rounding
    is relative to): the line search's comparison, without forming Φ itself.

    Φ is a sum of large terms (gravity m g z of a body high above the origin, the kinetic
    energy of a fast body, the energy of a stiff contact) whose changes near the solution are
    far below their rounding: in float32, 64 ulps of the gravity term of a rolling 10 g ball
    exceed the decrease of a step that fixes its spin (design note 16c). Here the inertia and
    the terms linear in u (gravity), which together are ½ (u - û)ᵀM(u - û) + const with û the
    free flight (`free_flight`), change by δᵀM(u - û) + ½ δᵀMδ, δ = v - u (exact near u), and
    every other element by the difference of its own two values, so the rounding left is
    relative to the magnitudes that change (returned per trial point).
    Where Φ(u; ū) itself is not finite, a finite trial value is a change of -inf."""
    model, ctx = args
    delta = trial - u[None, :]
    m_delta = jax.vmap(ctx.mass.apply)(delta)
    away = u - free_flight(args)
    change = m_delta @ away + 0.5 * jnp.sum(delta * m_delta, axis=1)
    size = jnp.abs(m_delta) @ jnp.abs(away) + 0.5 * jnp.sum(jnp.abs(delta * m_delta), axis=1)
    at_u = kinetic(u, ctx)
    points = jnp.concatenate([trial, u[None, :]])
    # every point's orientations once, for all the terms
    at_points = jax.vmap(lambda v: turns(v, args, 0))(points)
    at_lag = turns(u_lag, args, 0)
    for term, el in zip(model.terms, ctx.elements):
        if term.linear:
            continue
        lag = dofs.gather(u_lag, el.index)

        def values_at(point, term=term, el=el, lag=lag):
            v, at = point
            return _each(_potential, term, el, model.dt, dofs.gather(v, el.index), lag,
                         _turn_of(at, el), _turn_of(at_lag, el))
        # all points at once (vmap) while a point's element arrays are small, or where `_each`
        # skips dead chunks (its skip is decided once for all points); one point at a time
        # where they would not stay in cache (design note 32)
        one_point = el.live is None and el.index.size >= _CACHED_VALUES
        values = (jax.lax.map(values_at, (points, at_points)) if one_point
                  else jax.vmap(values_at)((points, at_points)))
        change = change + jnp.sum(values[:-1] - values[-1:], axis=1)
        size = size + jnp.sum(jnp.abs(values[:-1]) + jnp.abs(values[-1:]), axis=1)
        at_u = at_u + jnp.sum(values[-1])
    change = jnp.where(jnp.isfinite(at_u), change,
                       jnp.where(jnp.isfinite(change), -jnp.inf, jnp.nan))
    return change, size


def gradient_noise(u, args, lag=None):
    """(∇₁Φ(u; ū), its rounding noise per DOF), ū = `lag` (default u: then g(u), zero at the
    end-of-step velocities), in one pass over the elements.

    The noise is that of M⁻¹ g, in units of velocity: the machine epsilon times M⁻¹ of the sum
    of the magnitudes of everything g adds up (inertia and every element's gradient). A
    residual below a small multiple of it is as converged as the arithmetic allows."""
    model, ctx = args
    n = layout(model).size
    # first order: only g is formed; the lag's derivatives are not taken
    at = turns(u, args, 1)
    at_lag = at if lag is None else turns(lag, args, 0)
    lag = u if lag is None else lag
    g = ctx.mass.apply(u - ctx.u_free)
    total = jnp.abs(ctx.mass.apply(u)) + jnp.abs(ctx.mass.apply(ctx.u_free))
    for term, el in zip(model.terms, ctx.elements):
        g_e = _each(_potential_gradient, term, el, model.dt, dofs.gather(u, el.index),
                    dofs.gather(lag, el.index), _turn_of(at, el), _turn_of(at_lag, el))
        g = g + dofs.scatter(g_e, el.index, n)
        total = total + dofs.scatter(jnp.abs(g_e), el.index, n)
    return g, jnp.finfo(u.dtype).eps * jnp.abs(ctx.mass.solve(total))


def gradient(u, args):
    """g(u) = ∂Φ/∂u (u; ū = u): zero at the end-of-step velocities."""
    return gradient_noise(u, args)[0]


def residual(u, args):
    """M⁻¹ g(u): the residual in units of velocity (m/s, rad/s)."""
    return args[1].mass.solve(gradient(u, args))


MODES = ("exact", "lagged")


def _assembled(model, ctx, local) -> Jacobian:
    return Jacobian(ctx.mass, tuple(local), tuple(el.index for el in ctx.elements),
                    tuple(dofs.block_ids(el.bodies, el.particles) for el in ctx.elements),
                    tuple(dofs.slots(t.n_bodies, t.n_particles) for t in model.terms),
                    layout(model).size, ctx.coarse)


def linearize(u, args, mode="exact", lag=None, irls=0.0):
    """g and a Jacobian of it at u, assembled block-sparse from per-element local Jacobians.

    mode "exact": the exact Jacobian of g(u) = ∇Φ(u; u), lag terms included (in general not
    symmetric); "lagged": the symmetric Hessian of Φ(·; ū) at u with the lag ū held (no lag
    terms), and g = ∇₁Φ(u; ū). `lag` is ū (default u; "exact" ignores it). mode may also be
    a traced 0/1 weight (1 = exact, 0 = lagged): one compiled program for a solver that picks
    per scene (Newton's lag phases). `irls` (a weight in [0, 1], may be traced) blends in the
    reweighted curvature of friction pairs (`RowGroup.energy`); g is the same either way.
    """
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        mode = 1.0 if mode == "exact" else 0.0
    model, ctx = args
    n = layout(model).size
    at = turns(u, args)
    # the kernel's lag point is w u + (1 - w) ū
    at_lag = at if lag is None else turns(mode * u + (1.0 - mode) * lag, args)
    lag = u if lag is None else lag
    g = ctx.mass.apply(u - ctx.u_free)
    local = []
    for term, el in zip(model.terms, ctx.elements):
        g_e, j_e = _each(_linearized, term, el, model.dt, dofs.gather(u, el.index),
                         dofs.gather(lag, el.index), _turn_of(at, el), _turn_of(at_lag, el),
                         extra=(mode, irls))
        g = g + dofs.scatter(g_e, el.index, n)
        local.append(j_e)
    return g, _assembled(model, ctx, local)


def _term_rows(term, el: Elements, u, at, dt):
    """The rows of one row term at u (lag ū = u; `at`: `turns` of u): per group, errors,
    local Jacobians G = ∂e/∂x with the lag frozen, stiffnesses, cones and curvatures."""
    x, at = dofs.gather(u, el.index), _turn_of(at, el)
    return _each(_rows_and_jacobians, term, el, dt, x, x, at, at)


def rows(u, args) -> tuple:
    """Every row term's rows at u: a flat tuple of `RowBlock` (partners as flat indices)."""
    model, ctx = args
    out = []
    at = turns(u, args, 1)   # the rows' first derivatives only
    for term, el in zip(model.terms, ctx.elements):
        if not isinstance(term, RowTerm):
            continue
        groups, jacs, curvatures = _term_rows(term, el, u, at, model.dt)
        base, blocks = len(out), dofs.block_ids(el.bodies, el.particles)
        slots = dofs.slots(term.n_bodies, term.n_particles)
        for g, jac, curvature in zip(groups, jacs, curvatures):
            out.append(RowBlock(error=g.error, jac=jac, stiffness=g.stiffness,
                                curvature=curvature, cone=g.cone, index=el.index,
                                blocks=blocks, slots=slots, kind=g.kind,
                                partner=base + g.partner if g.partner >= 0 else -1,
                                pair=g.pair, term=term.name))
    return tuple(out)


def row_model(u, lag, args) -> RowModel:
    """The `RowModel` of Φ(·; ū = lag) at u: row errors linearized, their laws kept, and the
    inertia and energy terms as their gradient and lag-held Hessian at u."""
    model, ctx = args
    n = layout(model).size
    b = ctx.mass.apply(u - ctx.u_free)
    base, groups, jacs, index, term_of = [], [], [], [], []
    at_u, at_lag = turns(u, args), turns(lag, args)
    for term, el in zip(model.terms, ctx.elements):
        x, x_lag = dofs.gather(u, el.index), dofs.gather(lag, el.index)
        at, at_x_lag = _turn_of(at_u, el), _turn_of(at_lag, el)
        if isinstance(term, RowTerm):
            found, found_jacs, _ = _each(_rows_and_jacobians, term, el, model.dt, x, x_lag, at,
                                         at_x_lag)
            groups.extend(found)
            jacs.extend(found_jacs)
            index.extend([el.index] * len(found))
            term_of.extend([len(base)] * len(found))
            d = el.index.shape[1]
            base.append(jnp.zeros((el.index.shape[0], d, d), u.dtype))
            continue
        g_e, j_e = _each(_linearized, term, el, model.dt, x, x_lag, at, at_x_lag,
                         extra=(0.0, 0.0))
        b = b + dofs.scatter(g_e, el.index, n)
        base.append(j_e)
    return RowModel(gradient=b, base=_assembled(model, ctx, base), groups=tuple(groups),
                    jacs=tuple(jacs), index=tuple(index), terms=tuple(term_of))


def gauss_newton(u, args) -> Jacobian:
    """M + Σ_e Gᵀ diag(c) G over row terms (c the rows' Gauss-Newton curvatures) + the local
    Hessians of Φ(·; ū) of energy terms: the symmetric model of the step's Hessian that
    primal preconditioners use (thesis Eq. 115-116, 131, 136)."""
    model, ctx = args
    local = []
    at = turns(u, args)
    for term, el in zip(model.terms, ctx.elements):
        if isinstance(term, RowTerm):
            _, jacs, curvatures = _term_rows(term, el, u, at, model.dt)
            total = 0.0
            for jac, c in zip(jacs, curvatures):
                total = total + gauss_newton_locals(jac, c)
            local.append(total)
            continue
        local.append(_each(_reweighted_hessian, term, el, model.dt, dofs.gather(u, el.index),
                           _turn_of(at, el)))
    return _assembled(model, ctx, local)


def mass(args) -> BlockDiagonal:
    return args[1].mass


def free_flight(args):
    """ũ plus the impulse of the terms linear in u (gravity): where the step goes without any
    other term (the start of thesis Algorithms 2 and 3). Computed once per step by `prepare`;
    the line search reads it every iteration (`merit_change`)."""
    return args[1].u_flight


def _free_flight(model, elements, mass, u_free):
    """`free_flight` from the step's elements, mass and ũ."""
    linear = [(t, el) for t, el in zip(model.terms, elements) if t.linear]
    if not linear:
        return u_free

    def linear_potential(u):
        total = 0.0
        for term, el in linear:
            x = dofs.gather(u, el.index)
            total = total + jnp.sum(_each(_potential, term, el, model.dt, x, x, None, None))
        return total

    return u_free - mass.solve(jax.grad(linear_potential)(jnp.zeros_like(u_free)))


def resolution(args):
    """Context.resolution: below eps |u| + this, a velocity is not resolved by the step's
    arithmetic (its rounding and the configuration's)."""
    return args[1].resolution


def configuration_floor(u, args):
    """Σ_e |∂g_e/∂c| resolution_e: how far g(u) moves when the end-of-step configuration
    is rounded (`Context.resolution`), the velocities held. Friction and damping read u
    itself, so their stiffness near zero slip does not count here, as it would in
    |J| resolution."""
    model, ctx = args
    n = layout(model).size
    out = jnp.zeros_like(u)
    at = turns(u, args)
    for term, el in zip(model.terms, ctx.elements):
        f_e = _each(_configuration_floor, term, el, model.dt, dofs.gather(u, el.index),
                    dofs.gather(ctx.resolution, el.index), _turn_of(at, el))
        out = out + dofs.scatter(f_e, el.index, n)
    return jax.lax.stop_gradient(out)


def largest_rotation(du, args):
    """max over bodies of Δt |Δω|: the largest change of orientation (rad) that a velocity
    change du makes over the step (the size of a Newton increment in configuration)."""
    model, _ = args
    _, ang_vel, _ = dofs.split(du, layout(model))
    return model.dt * jnp.max(jnp.sqrt(jnp.sum(ang_vel * ang_vel, axis=-1)), initial=0.0)


def contact_gaps(u, args):
    """Gaps of every contact row (flat) at the end of the step for velocities u."""
    model, ctx = args
    out = []
    for term, el in zip(model.terms, ctx.elements):
        if not term.reports_gaps:
            continue
        out.append(_each(_gaps, term, el, model.dt, dofs.gather(u, el.index)).reshape(-1))
    return jnp.concatenate(out) if out else jnp.zeros((0,), u.dtype)


def body_contacts(u, args, margin=0.0):
    """(N,) bool: body i has a contact row with gap <= margin at the end of the step for
    velocities u (u = 0: the configuration at its start)."""
    model, ctx = args
    touching = jnp.zeros((model.n_body,), bool)
    for term, el in zip(model.terms, ctx.elements):
        if not term.reports_gaps:
            continue
        gaps = _each(_gaps, term, el, model.dt, dofs.gather(u, el.index))
        near = jnp.any(gaps.reshape(gaps.shape[0], -1) <= margin, axis=1)
        for side in range(el.bodies.shape[1]):
            body = el.bodies[:, side]
            # the world (-1) and padding rows scatter out of range and are dropped
            target = jnp.where(body >= 0, body, model.n_body)
            touching = touching.at[target].max(near, mode="drop")
    return touching


def check_rows(model) -> None:
    """ValueError unless every term of `model` has a compliance form (what Dual needs)."""
    reasons = [r for r in (t.without_rows() for t in model.terms) if r]
    if reasons:
        raise ValueError("solver Dual needs every term in compliance form (constraint rows); "
                         + "; ".join(reasons))


# broad-phase terms of at least this many slots are cut to a prefix of them where their live
# slots fit (`live_prefix`)
_PREFIX_SLOTS = 128


def live_prefix(args, parts):
    """(args', fits): args with the elements of every broad-phase term of at least
    `_PREFIX_SLOTS` slots cut to the first 1/`parts` of them, and whether no live slot is
    left out. A dead slot's energy is zero for every u (`Elements.live`), so where `fits`
    args' poses the same problem on fewer elements: a chain of 40 boxes has 520 box-box
    slots and, lying on the ground, none live (design note 50). (None, None) where no term
    is that large."""
    model, ctx = args
    elements, fits, cut = [], jnp.ones((), bool), False
    for el in ctx.elements:
        n = el.index.shape[0]
        if el.live is None or n < _PREFIX_SLOTS:
            elements.append(el)
            continue
        keep = n // parts
        fits = fits & ~jnp.any(el.live[keep:])
        prefix = jax.tree.map(lambda a, keep=keep: a[:keep], el.replace(shared=None))
        elements.append(prefix.replace(shared=el.shared))
        cut = True
    if not cut:
        return None, None
    return (model, ctx.replace(elements=tuple(elements))), fits


PROBLEM = Problem(gradient=gradient, residual=residual, merit=merit, merit_change=merit_change,
                  linearize=linearize, gauss_newton=gauss_newton, rows=rows,
                  row_model=row_model, mass=mass, start=free_flight,
                  gradient_noise=gradient_noise, resolution=resolution,
                  configuration_floor=configuration_floor, rotation=largest_rotation,
                  live_prefix=live_prefix)
