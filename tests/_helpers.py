"""Scenes, losses and gradient checks shared by several test modules.

- The solver scene (a sliding sphere, a spinning box, a spring and a zero-length spring) and
  the gradient of a linear functional of its final state: solvers/test_solvers_agree.py
  (every solver reaches the same step and gradient), solvers/test_adjoint.py (dense vs
  matrix-free adjoint), test_step.py (an unconverged solve's gradient) and test_terms_rows.py
  (the rows at one of its steps).
- The rollout-gradient scene and scenarios (a sphere and a box over the ground, 100 steps):
  solvers/test_adjoint_finite_differences.py checks reverse mode against finite differences
  and closed forms, solvers/test_adjoint.py the other gradient rules (forward mode, reverse
  through the forward rule, unrolled) against reverse mode on the same scenarios.
- The rows' multipliers in compliance form (`row_multipliers`): test_terms_rows.py and
  models/test_joints.py; the contact terms' share of a Hessian (`contact_share`).
- Reverse mode, forward mode and central differences of one scalar in two programs
  (`gradient_checks`): the models' parameter-gradient tests.
- The viewer's rollout (`falling_and_resting`): viz/test_html.py, viz/test_plots.py and
  test_observe.py.

Module-level jitted functions here are shared by every module that imports them.
"""

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

# --- the solver scene ----------------------------------------------------------------------

SOLVER_STEPS = 20


def solver_scene(solver, friction=0.5):
    """A sliding sphere, a spinning box falling onto the ground, a spring to the world and a
    ball joint (zero-length spring) between the two."""
    s = jc.Scene(dt=0.002, friction=friction)
    s.add_plane()
    ball = s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, 0.0))
    box = s.add_box(0.05, 2.0, (0.5, 0.0, 0.052), ang_vel=(1.0, 2.0, 0.5))
    # stretched from the start (a spring at zero length with a rest length sits at the tip of
    # its energy's cone, where the step has several minima and solvers may pick different ones)
    s.add_spring(box, -1, stiffness=1e3, anchor_a=(0.05, 0.05, 0.05), anchor_b=(0.55, 0.05, 0.2),
                 rest_length=0.1)
    s.add_spring(ball, box, stiffness=5e2, anchor_a=(0.0, 0.0, 0.05), rest_length=0.0,
                 anchor_b=(-0.1, 0.0, 0.0))
    return s.build(solver=solver)


@jax.jit
def solver_rollout(model, state):
    return jc.rollout(model, state, steps=SOLVER_STEPS, return_info=True)


def _solver_loss(params, model, state):
    friction, spring_k, rest, vel = params
    weights = jax.random.normal(jax.random.PRNGKey(3), (2, 9))
    m = model.replace(geom=model.geom.replace(friction=friction),
                      spring=model.spring.replace(stiffness=spring_k, rest_length=rest))
    final, traj, info = jc.rollout(m, state.replace(vel=vel), steps=SOLVER_STEPS,
                                   return_info=True)
    flat = jnp.concatenate([final.pos, final.vel, final.ang_vel], axis=-1)
    return jnp.sum(weights * flat), (final, traj, info)


# the rollout and the gradient of the loss in one program: (final, traj, info), gradient
_solver_run = jax.jit(jax.grad(_solver_loss, has_aux=True))


def solver_run(solver):
    """The solver scene's rollout (final, traj, info) and the gradient of a linear functional
    of its final state w.r.t. (friction, spring stiffness, rest length, v0), one program."""
    model, state = solver_scene(solver)
    params = (model.geom.friction, model.spring.stiffness, model.spring.rest_length, state.vel)
    grad, run = _solver_run(params, model, state)
    return run, grad


# --- the rollout-gradient scene and its scenarios -------------------------------------------

T = 100  # steps of every rollout of the scenarios (0.2 s)


def two_body_scene(friction=0.5, damping=100.0):
    scene = jc.Scene(dt=0.002, friction=friction, damping=damping)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, (0.0, 0.0, 0.05))
    # sharp corners: with the default rounding a corner's stick/slip switch lies within the
    # finite-difference step of μ here (FD at h = 1e-6 still matches the implicit gradient)
    scene.add_box(0.05, 1.0, (1.0, 0.0, 0.05), rounding=0.0)
    scene.exclude_pair(0, 1)  # each test moves one of them; they never meet
    return scene


def rollout_loss(model, state, controls, weights):
    """A linear functional of the final state (weights: a State), and the per-step infos."""
    final, _, info = jc.rollout(model, state, controls, return_info=True)
    value = sum(jnp.sum(w * x) for w, x in zip(jax.tree.leaves(weights), jax.tree.leaves(final)))
    return value, info


# the loss, its infos and its gradient, one program: finite differences evaluate the loss with
# it too, so that a module compiles the rollout once (a value-only program took a third of
# test_adjoint_finite_differences.py's time to compile; it runs the same forward solves)
_value_and_grad = jax.jit(jax.value_and_grad(rollout_loss, argnums=(0, 1, 2), has_aux=True))


def value_and_info(model, state, controls, weights):
    """The loss and the rollout's per-step infos."""
    return _value_and_grad(model, state, controls, weights)[0]


def grad(model, state, controls, weights):
    """The loss's reverse-mode gradient w.r.t. (model, state, controls)."""
    return _value_and_grad(model, state, controls, weights)[1]


@jax.jit
def jvp(model, state, controls, weights, tangents):
    return jax.jvp(lambda m, s, c: rollout_loss(m, s, c, weights)[0], (model, state, controls),
                   tangents)[1]


def zeros_like(tree):
    return jax.tree.map(jnp.zeros_like, tree)


def no_controls(state, steps=T):
    n = state.pos.shape[0]
    return jc.Control(force=jnp.zeros((steps, n, 3)), torque=jnp.zeros((steps, n, 3)),
                      motor=jnp.zeros((steps, 0)))


def weights_of(state, **fields):
    w = zeros_like(state)
    return w.replace(**{k: jnp.asarray(v, dtype=jnp.float64) for k, v in fields.items()})


def unit(shape, index):
    return jnp.zeros(shape).at[index].set(1.0)


def dot(a, b):
    return sum(float(jnp.sum(x * y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def tangent(model, state, controls, *, model_dir=None, state_fields=None, control=None):
    """A (model, state, controls) tangent, zero but for the given parts."""
    tm = zeros_like(model) if model_dir is None else model_dir
    ts = zeros_like(state)
    if state_fields:
        ts = ts.replace(**state_fields)
    tc = zeros_like(controls) if control is None else control
    return (tm, ts, tc)


def ball_bounce(model, state):
    """The sphere thrown down and sideways onto the ground; d x(T) / d v0 (x and z)."""
    state = state.replace(pos=state.pos.at[0, 2].set(0.1),
                          vel=state.vel.at[0].set(jnp.array([1.0, 0.0, -1.0])))
    controls = no_controls(state)
    weights = weights_of(state, pos=jnp.zeros((2, 3)).at[0].set(jnp.array([1.0, 0.0, 2.0])))
    directions = [tangent(model, state, controls, state_fields={"vel": unit((2, 3), (0, i))})
                  for i in (0, 2)]
    return state, controls, weights, directions


def box_sliding(model, state, v0=0.5):
    """The box sliding to rest; directions: the pair's μ, and v0."""
    state = state.replace(vel=state.vel.at[1, 0].set(v0))
    controls = no_controls(state)
    weights = weights_of(state, pos=unit((2, 3), (1, 0)))
    # one direction moves μ of the box and of the ground together (the pair's μ is their mean)
    d_mu = zeros_like(model)
    d_mu = d_mu.replace(geom=d_mu.geom.replace(friction=unit((2,), 1)),
                        plane=d_mu.plane.replace(friction=jnp.ones((1,))))
    directions = [tangent(model, state, controls, model_dir=d_mu),
                  tangent(model, state, controls, state_fields={"vel": unit((2, 3), (1, 0))})]
    return state, controls, weights, directions


def per_step_controls(model, state):
    """Random forces and torques on both bodies at every step; random control directions."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    controls = jc.Control(force=2.0 * jax.random.normal(k1, (T, 2, 3)),
                          torque=0.05 * jax.random.normal(k2, (T, 2, 3)),
                          motor=jnp.zeros((T, 0)))
    weights = weights_of(state, pos=jnp.ones((2, 3)), vel=jnp.full((2, 3), 0.1),
                         ang_vel=jnp.full((2, 3), 0.01))
    directions = []
    for i in range(2):
        kf, kt = jax.random.split(jax.random.PRNGKey(10 + i))
        tc = jc.Control(force=jax.random.normal(kf, (T, 2, 3)),
                        torque=0.1 * jax.random.normal(kt, (T, 2, 3)), motor=jnp.zeros((T, 0)))
        directions.append(tangent(model, state, controls, control=tc))
    return state, controls, weights, directions


SCENARIOS = {"ball_bounce": ball_bounce, "box_sliding": box_sliding,
             "per_step_controls": per_step_controls}


# --- gradient rules against reverse mode -------------------------------------------------------

# forward mode and reverse through the jvp rule differ from reverse mode by rounding only
AD_RTOL = 1e-8
# unrolled autodiff differs from the implicit gradient by O(residual at convergence)
UNROLL_RTOL = 1e-6


def check_modes(models, state, controls, weights, directions):
    """Forward mode, reverse through the jvp rule and unrolled autodiff against reverse mode
    along each (model, state, controls) tangent of `directions`.

    models: {"vjp", "jvp", "unrolled"} models of one scene (Newton with that `ad`).
    Returns the reverse-mode gradients (model_bar, state_bar, controls_bar).
    """
    rev = grad(models["vjp"], state, controls, weights)
    rev_jvp = grad(models["jvp"], state, controls, weights)
    unrolled = grad(models["unrolled"], state, controls, weights)
    for leaf in jax.tree.leaves(rev):
        assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite reverse-mode gradient"
    for direction in directions:
        expected = dot(rev, direction)
        # the tangent must carry the jvp model's static fields (its solver settings)
        tangent_jvp = (jax.tree.unflatten(jax.tree.structure(models["jvp"]),
                                          jax.tree.leaves(direction[0])),) + tuple(direction[1:])
        fwd = float(jvp(models["jvp"], state, controls, weights, tangent_jvp))
        assert fwd == pytest.approx(expected, rel=AD_RTOL, abs=1e-11), "forward vs reverse"
        assert dot(rev_jvp, direction) == pytest.approx(expected, rel=AD_RTOL, abs=1e-11), \
            "reverse through the jvp rule vs custom_vjp"
        assert dot(unrolled, direction) == pytest.approx(expected, rel=UNROLL_RTOL, abs=1e-9), \
            "unrolled vs implicit"
    return rev


def contact_share(hessian, model):
    """The Hessian's contact terms alone: no mass, only their elements' local matrices."""
    smooth = [t for t in model.terms if not t.linear]     # `Hessian.local`'s order
    keep = [i for i, t in enumerate(smooth) if t.reports_gaps]
    pick = lambda parts: tuple(parts[i] for i in keep)    # noqa: E731
    from jaxcontact.problem import BlockDiagonal

    zero = BlockDiagonal(tuple(jnp.zeros_like(b) for b in hessian.diagonal.blocks))
    return hessian.replace(diagonal=zero, local=pick(hessian.local), index=pick(hessian.index),
                           blocks=pick(hessian.blocks), slots=pick(hessian.slots))


def row_multipliers(rows, contact):
    """λ = Π(-s e) per block of rows (`problem.RowBlock`), the rows' laws in compliance form:
    free for bilateral rows, λ >= 0 for one-sided ones, `contact(rb, y)` for a contact's
    block ("contact" or "cone" rows; y = -s e)."""
    out = []
    for rb in rows:
        lam = -rb.stiffness * rb.error
        if rb.kind == "unilateral":
            lam = jnp.maximum(lam, 0.0)
        elif rb.kind in ("contact", "cone"):
            lam = contact(rb, lam)
        out.append(lam)
    return out


# --- reverse mode, forward mode and central differences of one scalar ---------------------------

def gradient_checks(loss, x, h=1e-6, forward=False, direction_seed=0):
    """Reverse mode and central differences of a scalar `loss(x, mode)` (mode "vjp" or
    "jvp", the step's `ad`) that returns (value, aux), in one compiled program; with
    `forward`, forward mode too, in a second.

    The program gives the value and the reverse gradient, and the central differences
    evaluate it at x ± h e_i; forward mode is the derivative along one fixed random
    direction d. Returns {"value", "aux", "reverse", "central"} and, with `forward`,
    {"along" (forward mode along d), "reverse_along" (reverse · d)}.
    """
    both = jax.jit(jax.value_and_grad(lambda v: loss(v, "vjp"), has_aux=True))
    (value, aux), reverse = both(x)
    eye = h * jnp.eye(x.size, dtype=x.dtype)
    central = jnp.stack([(both(x + e)[0][0] - both(x - e)[0][0]) / (2 * h) for e in eye])
    out = {"value": value, "aux": aux, "reverse": np.asarray(reverse),
           "central": np.asarray(central)}
    if forward:
        d = jax.random.normal(jax.random.PRNGKey(direction_seed), x.shape, x.dtype)
        along = jax.jit(lambda v: jax.jvp(lambda y: loss(y, "jvp")[0], (v,), (d,))[1])(x)
        out.update(along=float(along), reverse_along=float(jnp.dot(reverse, d)))
    return out


# --- the viewer's rollout ----------------------------------------------------------------------

# its time step and steps, the spheres' mass and radius, the contact stiffness and gravity
VIEW = types.SimpleNamespace(dt=0.01, steps=30, mass=1.0, radius=0.1, stiffness=1e5, g=9.81)


@functools.cache
def falling_and_resting():
    """The viewer's rollout (`VIEW`), built and run once per process: sphere A falls from 1 m
    (it does not reach the ground in the 0.3 s simulated) while sphere B rests on the ground
    plane at its equilibrium penetration. A namespace of model, state, final, traj, infos."""
    v = VIEW
    scene = jc.Scene(dt=v.dt, stiffness=v.stiffness)
    scene.add_plane()
    scene.add_sphere(radius=v.radius, mass=v.mass, pos=(0.0, 0.0, 1.0))
    scene.add_sphere(radius=v.radius, mass=v.mass,
                     pos=(0.5, 0.0, v.radius - v.mass * v.g / v.stiffness))
    scene.exclude_pair(0, 1)
    model, state = scene.build()
    final, traj, infos = jax.jit(
        lambda m, s: jc.rollout(m, s, steps=v.steps, return_info=True))(model, state)
    return types.SimpleNamespace(model=model, state=state, final=final, traj=traj, infos=infos)
