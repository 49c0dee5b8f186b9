"""The implicit step as an optimization problem: incremental potential and its residual.

Variational implicit Euler (thesis Ch. 5, Eq. 104-106; ADD Sec. 3). With all body velocities
stacked in u = (v_1, ω_1, ..., v_N, ω_N) and the configuration update q+(u) = q- ⊕ Δt u
(positions by x + Δt v, orientations by the exact exponential map exp(Δt ω) ⊗ r):

    Φ(u; ū) = 1/2 (u - ũ)ᵀ M (u - ũ) + Σ_k U_n(d_k(q+(u))) + Σ_s U_s(q+(u)) + Σ_j U_j(q+(u))
              + Δt Σ_k D_k(u; q+(ū), f_n(ū)) + Δt Σ_v c_v/2 (G_v u)²

U_n are the normal penalties; U_s the springs (thesis Eq. 111); U_j the soft joints, motors
and limits (ADD §5.3, `models/joints.py`), with the motor targets of the step's control;
c_v/2 (G_v u)² the joint and motor damping (ADD Eq. 26) with G_v taken at the start of the step;
D_k the contact damping and friction dissipation potentials,
whose geometry (normal, contact point, fraction of the step in contact) and friction bound
μ f_n are *lagged* at the point ū (thesis Eq. 132). The step solves r(u) = ∂Φ/∂u (u; ū = u) = 0, so at the
solution every quantity is consistent with the end-of-step state; ∂r/∂u is the exact,
in general non-symmetric, Jacobian (DESIGN.md section 1). The residual returned is M⁻¹ r:
same roots, units of velocity, so one tolerance fits bodies of any mass.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact.math import (quat_integrate, quat_normalize, tangent_basis, world_inertia,
                             world_inertia_inv)
from jaxcontact.models import contact as laws
from jaxcontact.models import joints
from jaxcontact.models import geometry
from jaxcontact.models.geometry import (Candidates, candidate_frame, contact_frame, gather_poses,
                                        pair_parameters)
from jaxcontact.problem import Problem, Rows
from jaxcontact.types import Array, Control, Model, State


def split_velocity(u, n_body):
    """Flat (6N,) velocity -> linear (N, 3) and angular (N, 3) parts."""
    u = u.reshape(n_body, 6)
    return u[:, :3], u[:, 3:]


def join_velocity(vel, ang_vel):
    """Linear (N, 3) and angular (N, 3) velocities -> flat (6N,)."""
    return jnp.concatenate([vel, ang_vel], axis=-1).reshape(-1)


def configuration(model: Model, state: State, u):
    """q+(u): end-of-step positions and orientations for velocities u."""
    vel, ang_vel = split_velocity(u, model.n_body)
    return state.pos + model.dt * vel, quat_integrate(state.quat, ang_vel, model.dt)


@struct.dataclass
class StepContext:
    """What the step's residual needs that does not depend on u: computed once per step.

    It is a function of (model, state, control), passed to the solvers inside their args, so
    implicit gradients reach model, state and control through it by ordinary autodiff.

    Attributes:
      u_free:      (6N,)     ũ, free-flight velocities.
      inertia:     (N, 3, 3) world-frame inertia at the start of the step.
      inertia_inv: (N, 3, 3) its inverse.
      candidates:  the step's contact rows (broad phase at the start of the step).
      gap_start:   (K,)      gaps at the start of the step.
      friction, stiffness, damping: (K,) pair parameters of the contact rows.
      motor_target: (M,)   motor angles α of the control, rad.
      damp_jac_a, damp_jac_b: (V, 6) Jacobians of the joint and motor damping rows at the
                   start of the step (`joints.velocity_rows`).
      damp_coef:   (V,)    their damping coefficients c_v.
    """

    candidates: Candidates
    u_free: Array
    inertia: Array
    inertia_inv: Array
    gap_start: Array
    friction: Array
    stiffness: Array
    damping: Array
    motor_target: Array
    damp_jac_a: Array
    damp_jac_b: Array
    damp_coef: Array


def free_velocity(model: Model, state: State, control: Control, inertia_w, inertia_inv):
    """ũ: velocities after one explicit step of external forces and gyroscopic torque."""
    mass = model.body.mass[:, None]
    vel = state.vel + model.dt * (model.gravity[None, :] + control.force / mass)
    spin = jnp.einsum("nij,nj->ni", inertia_w, state.ang_vel)
    torque = control.torque - jnp.cross(state.ang_vel, spin)
    ang_vel = state.ang_vel + model.dt * jnp.einsum("nij,nj->ni", inertia_inv, torque)
    return join_velocity(vel, ang_vel)


def prepare(model: Model, state: State, control: Control) -> StepContext:
    """The u-independent part of the step's problem."""
    inertia = world_inertia(state.quat, model.body.inertia)
    inertia_inv = world_inertia_inv(state.quat, model.body.inertia)
    cand = geometry.candidates(model, state)
    friction, stiffness, damping = pair_parameters(model, cand)
    layout = joints.velocity_plan(model.joint, model.motor)
    damp_a, damp_b, damp_coef = joints.velocity_rows(
        model.joint, model.motor, layout, *gather_poses(state.pos, state.quat, layout.body_a),
        *gather_poses(state.pos, state.quat, layout.body_b))
    return StepContext(
        candidates=cand, u_free=free_velocity(model, state, control, inertia, inertia_inv),
        inertia=inertia, inertia_inv=inertia_inv,
        gap_start=contact_frame(model, cand, state.pos, state.quat).gap,
        friction=friction, stiffness=stiffness, damping=damping,
        motor_target=jnp.asarray(control.motor, inertia.dtype), damp_jac_a=damp_a,
        damp_jac_b=damp_b, damp_coef=damp_coef)


def _side_velocities(u, n_body, body_a, body_b):
    """Velocities (R, 6) of each row's two sides (zero for the world, -1)."""
    padded = jnp.concatenate([u.reshape(n_body, 6), jnp.zeros((1, 6), u.dtype)])
    return (padded[jnp.asarray(body_a, jnp.int32).reshape(-1)],
            padded[jnp.asarray(body_b, jnp.int32).reshape(-1)])


def joint_rates(u, model: Model, ctx: StepContext):
    """G_v u: the joint and motor damping rows' velocities at u, (V,)."""
    layout = joints.velocity_plan(model.joint, model.motor)
    u_a, u_b = _side_velocities(u, model.n_body, layout.body_a, layout.body_b)
    return jnp.sum(ctx.damp_jac_a * u_a + ctx.damp_jac_b * u_b, axis=-1)


def _point_velocity(vel, ang_vel, pos, body, point):
    """Velocity of the material point at `point` of each candidate's body (0 for the world)."""
    zero = jnp.zeros((1, 3), vel.dtype)
    vel, ang_vel, pos = (jnp.concatenate([a, zero]) for a in (vel, ang_vel, pos))
    idx = jnp.asarray(body, jnp.int32)  # -1 picks the appended zero row: the world does not move
    return vel[idx] + jnp.cross(ang_vel[idx], point - pos[idx])


def _contact_velocity(frame, pos, vel, ang_vel):
    """Relative velocity of a with respect to b at each contact point, (K, 3)."""
    return (_point_velocity(vel, ang_vel, pos, frame.body_a, frame.point)
            - _point_velocity(vel, ang_vel, pos, frame.body_b, frame.point))


def incremental_potential(u, u_lag, model: Model, state: State, ctx: StepContext,
                          newton_model=0.0):
    """Φ(u; ū) of the module docstring (scalar).

    With `newton_model` = w > 0, friction is replaced by (1 - w) D + w D̃, where D̃ is the
    quadratic c/2 |u_s|² whose curvature
    c = 2 ∂D/∂|u_s|² is frozen at the slip of ū (its dependence on the bound μ f_n(ū) is
    kept). D̃ and D have the same gradient at u = ū, so the residual's value is unchanged, but
    its Jacobian holds the iteratively reweighted (IRLS) friction curvature μ f_n/|u_s| in
    every tangential direction instead of the exact one, which is zero along the slip: Newton
    steps from a sliding iterate then no longer leap across the stick region (thesis Eq. 136
    makes the same isotropic choice for its preconditioner).
    """
    params = model.contact
    du = (u - ctx.u_free).reshape(model.n_body, 6)
    kinetic = 0.5 * jnp.sum(model.body.mass * jnp.sum(du[:, :3] ** 2, axis=-1))
    kinetic += 0.5 * jnp.einsum("ni,nij,nj->", du[:, 3:], ctx.inertia, du[:, 3:])

    pos, quat = configuration(model, state, u)
    frame = contact_frame(model, ctx.candidates, pos, quat)
    elastic = jnp.sum(laws.normal_energy(frame.gap, ctx.stiffness, params.normal, params.power,
                                         params.smooth_width))
    if model.spring.size:
        spring = model.spring
        elastic += jnp.sum(joints.energy(spring, *gather_poses(pos, quat, spring.body_a),
                                         *gather_poses(pos, quat, spring.body_b)))
    joint_damping = 0.0
    if model.joint.size:
        body_a, body_b = model.joint.body_a, model.joint.body_b
        elastic += joints.joint_energy(model.joint, model.motor, ctx.motor_target,
                                       joints.plan(model.joint, model.motor),
                                       *gather_poses(pos, quat, body_a),
                                       *gather_poses(pos, quat, body_b))
        joint_damping = jnp.sum(0.5 * ctx.damp_coef * joint_rates(u, model, ctx) ** 2)

    # lagged geometry and friction bound, evaluated at ū
    pos_l, quat_l = configuration(model, state, u_lag)
    lag = contact_frame(model, ctx.candidates, pos_l, quat_l)
    f_n = laws.normal_force(lag.gap, ctx.stiffness, params.normal, params.power,
                            params.smooth_width)
    vel, ang_vel = split_velocity(u, model.n_body)
    v_rel = _contact_velocity(lag, pos_l, vel, ang_vel)
    v_n = jnp.sum(v_rel * lag.normal, axis=-1)
    slip = v_rel - v_n[:, None] * lag.normal
    weight = laws.contact_fraction(ctx.gap_start, lag.gap)
    damping = laws.damping_dissipation(v_n, ctx.damping, weight)
    bound = ctx.friction * f_n

    def dissipation(z):
        return _friction_law(params, model.dt)(z, bound, ctx.stiffness)

    z = jnp.sum(slip * slip, axis=-1)
    friction = dissipation(z)
    if not isinstance(newton_model, float) or newton_model != 0.0:
        vel_l, ang_vel_l = split_velocity(u_lag, model.n_body)
        slip_l = _contact_velocity(lag, pos_l, vel_l, ang_vel_l)
        slip_l = slip_l - jnp.sum(slip_l * lag.normal, axis=-1)[:, None] * lag.normal
        z_l = jax.lax.stop_gradient(jnp.sum(slip_l * slip_l, axis=-1))
        curvature = 2.0 * jax.grad(lambda zz: jnp.sum(dissipation(zz)))(z_l)
        friction = (1.0 - newton_model) * friction + newton_model * 0.5 * curvature * z
    return kinetic + elastic + model.dt * (jnp.sum(damping + friction) + joint_damping)


def newton_residual(u, args, damped):
    """`residual`'s value; with `damped` (0/1) its Jacobian uses the IRLS friction curvature.

    Newton takes exact directions (quadratic convergence) until a step has to be shortened by
    the line search, the sign of a slip that a step leapt across the stick region; the next
    direction then uses the IRLS curvature, which keeps the iterate at the stick region.
    """
    return residual(u, args, newton_model=damped)


def objective(u, u_lag, args):
    """Φ(u; ū) with args = (model, state, ctx): the solvers' merit function."""
    return incremental_potential(u, u_lag, *args)


def residual(u, args, newton_model=0.0):
    """M⁻¹ ∂Φ/∂u (u; ū = u): zero at the end-of-step velocities. args = (model, state, ctx).

    `newton_model` gives the same value with the IRLS friction curvature in its Jacobian (see
    `incremental_potential`); solvers use it for search directions only.
    """
    model, state, ctx = args
    grad = jax.grad(incremental_potential)(u, u, model, state, ctx, newton_model)
    g_lin, g_ang = split_velocity(grad, model.n_body)
    scaled_ang = jnp.einsum("nij,nj->ni", ctx.inertia_inv, g_ang)
    return join_velocity(g_lin / model.body.mass[:, None], scaled_ang)


def gradient(u, args):
    """∂Φ/∂u (u; ū = u): the unscaled residual (M r)."""
    model, state, ctx = args
    return jax.grad(incremental_potential)(u, u, model, state, ctx)


def model_gradient(u, u_lag, args, damped):
    """∂Φ/∂u (u; ū) at a fixed lag point: its u-Jacobian is the symmetric Hessian of Φ(·; ū)
    (with the IRLS friction curvature when `damped`)."""
    model, state, ctx = args
    return jax.grad(incremental_potential)(u, u_lag, model, state, ctx, damped)


def mass_matrix(args):
    """Block-diagonal mass of the step, (N, 6, 6): diag(m I₃, I_world) per body."""
    model, _, ctx = args
    n, dtype = model.n_body, ctx.inertia.dtype
    blocks = jnp.zeros((n, 6, 6), dtype)
    blocks = blocks.at[:, :3, :3].set(model.body.mass[:, None, None] * jnp.eye(3, dtype=dtype)[None])
    return blocks.at[:, 3:, 3:].set(ctx.inertia)


def free_flight(args):
    """ũ of the step (the primal start of thesis Algorithm 2 and 3)."""
    return args[2].u_free


def _side_jacobians(errors, u_a, u_b):
    """Values and per-row Jacobians (R, 6) of errors(u_a, u_b) -> (R,), where row j depends
    only on row j of u_a and u_b: one linearization, 12 tangent evaluations."""
    values, tangent = jax.linearize(errors, u_a, u_b)
    basis = jnp.eye(6, dtype=u_a.dtype)
    zero_a, zero_b = jnp.zeros_like(u_a), jnp.zeros_like(u_b)
    jac_a = jax.vmap(lambda t: tangent(jnp.broadcast_to(t, u_a.shape), zero_b))(basis).T
    jac_b = jax.vmap(lambda t: tangent(zero_a, jnp.broadcast_to(t, u_b.shape)))(basis).T
    return values, jac_a, jac_b


def _velocity_row(direction, point, centre_a, centre_b):
    """Jacobian blocks of the relative velocity along `direction` at `point`, (K, 6) x 2:
    t·(v_a + ω_a × (p - x_a)) - t·(v_b + ω_b × (p - x_b))."""
    jac_a = jnp.concatenate([direction, jnp.cross(point - centre_a, direction)], axis=-1)
    jac_b = jnp.concatenate([direction, jnp.cross(point - centre_b, direction)], axis=-1)
    return jac_a, -jac_b


def rows(u, args) -> Rows:
    """Constraint rows at u (see `jaxcontact.problem`): what Descent and Dual iterate on.

    Position rows (contact gaps, spring stretches, joint errors) are functions of q+(u) and
    their Jacobians are exact (forward mode through the exponential map), so the stationarity
    conditions M(u - ũ) = Σ Gᵀ λ at λ = -s e are exactly ∂Φ/∂u = 0 (for the `linear` normal
    law and `huber` friction, whose potentials are the rows' quadratics). Velocity rows
    (contact damping and friction) use the contact frame at u, as Φ lags it; joint and motor
    damping rows use the start-of-step Jacobians of Φ. One-sided joint rows (cables, limits)
    are last: like normal rows, their stiffness is k throughout, their curvature k only while
    e < 0, and their multipliers are projected onto λ >= 0.
    """
    model, state, ctx = args
    params, dt, n = model.contact, model.dt, model.n_body
    spring = model.spring
    jplan = joints.plan(model.joint, model.motor)
    vplan = joints.velocity_plan(model.joint, model.motor)
    cand = ctx.candidates

    def ints(body):
        return jnp.asarray(body, jnp.int32).reshape(-1)

    body_a = jnp.concatenate([cand.body_a, ints(spring.body_a), ints(jplan.body_a)])
    body_b = jnp.concatenate([cand.body_b, ints(spring.body_b), ints(jplan.body_b)])
    k = cand.body_a.shape[0]
    ks = k + spring.size
    u_a, u_b = _side_velocities(u, n, body_a, body_b)
    pos0_a, quat0_a = gather_poses(state.pos, state.quat, body_a)
    pos0_b, quat0_b = gather_poses(state.pos, state.quat, body_b)

    def poses(pos0, quat0, vel):
        return pos0 + dt * vel[:, :3], quat_integrate(quat0, vel[:, 3:], dt)

    def position_errors(u_a, u_b):
        pos_a, quat_a = poses(pos0_a, quat0_a, u_a)
        pos_b, quat_b = poses(pos0_b, quat0_b, u_b)
        gap = candidate_frame(model, cand, pos_a[:k], quat_a[:k], pos_b[:k], quat_b[:k]).gap
        stretch = joints.stretch(spring, pos_a[k:ks], quat_a[k:ks], pos_b[k:ks], quat_b[k:ks])
        joint = joints.row_errors(model.joint, model.motor, ctx.motor_target, jplan,
                                  pos_a[ks:], quat_a[ks:], pos_b[ks:], quat_b[ks:])
        return jnp.concatenate([gap, stretch, joint])

    error, jac_a, jac_b = _side_jacobians(position_errors, u_a, u_b)
    world_b = (body_b < 0)[:, None]
    jac_b = jnp.where(world_b, 0.0, jac_b)
    gap = error[:k]

    # velocity rows at the contact frame of u
    pos_a, quat_a = poses(pos0_a[:k], quat0_a[:k], u_a[:k])
    pos_b, quat_b = poses(pos0_b[:k], quat0_b[:k], u_b[:k])
    frame = candidate_frame(model, cand, pos_a, quat_a, pos_b, quat_b)
    t1, t2 = tangent_basis(frame.normal)
    vel_rows = [_velocity_row(d, frame.point, pos_a, pos_b) for d in (frame.normal, t1, t2)]
    vel_a = jnp.concatenate([r[0] for r in vel_rows])
    vel_b = jnp.where(jnp.tile(world_b[:k], (3, 1)), 0.0, jnp.concatenate([r[1] for r in vel_rows]))
    tiled_a, tiled_b = jnp.tile(u_a[:k], (3, 1)), jnp.tile(u_b[:k], (3, 1))
    velocity = jnp.sum(vel_a * tiled_a + vel_b * tiled_b, axis=-1)

    # stiffnesses (λ = -s e) and Gauss-Newton curvatures
    normal_curv = jax.vmap(jax.grad(jax.grad(
        lambda d, kn: laws.normal_energy(d, kn, params.normal, params.power,
                                         params.smooth_width))))(gap, ctx.stiffness)
    damping = dt * ctx.damping * laws.contact_fraction(ctx.gap_start, gap)
    f_n = laws.normal_force(gap, ctx.stiffness, params.normal, params.power, params.smooth_width)
    slip_sq = velocity[k:2 * k] ** 2 + velocity[2 * k:] ** 2
    stick = params.friction_stiffness if params.friction != "linear" else ctx.stiffness * dt
    friction_curv = 2.0 * jax.vmap(jax.grad(_friction_law(params, dt)))(
        slip_sq, ctx.friction * f_n, ctx.stiffness)
    ones = jnp.ones_like(gap)

    # joint rows: bilateral | damping (velocity, start-of-step Jacobians) | one-sided
    nb = ks + jplan.n_bilateral
    joint_k = joints.row_stiffness(model.joint, model.motor, jplan)
    one_sided_curv = joint_k[jplan.n_bilateral:] * (error[nb:] < 0.0)
    rate = joint_rates(u, model, ctx)
    damp_k = dt * ctx.damp_coef

    stiffness = jnp.concatenate([ctx.stiffness, damping, dt * stick * ones, dt * stick * ones,
                                 spring.stiffness, joint_k[:jplan.n_bilateral], damp_k,
                                 joint_k[jplan.n_bilateral:]])
    curvature = jnp.concatenate([normal_curv, damping, dt * friction_curv, dt * friction_curv,
                                 spring.stiffness, joint_k[:jplan.n_bilateral], damp_k,
                                 one_sided_curv])
    sides = tuple(jnp.concatenate([jnp.tile(b[:k], 4), b[k:nb], ints(v), b[nb:]])
                  for b, v in ((body_a, vplan.body_a), (body_b, vplan.body_b)))
    return Rows(
        jac_a=jnp.concatenate([jac_a[:k], vel_a, jac_a[k:nb], ctx.damp_jac_a, jac_a[nb:]]),
        jac_b=jnp.concatenate([jac_b[:k], vel_b, jac_b[k:nb], ctx.damp_jac_b, jac_b[nb:]]),
        error=jnp.concatenate([gap, velocity, error[k:nb], rate, error[nb:]]),
        stiffness=stiffness, curvature=curvature, cone=dt * ctx.friction, body_a=sides[0],
        body_b=sides[1], n_contact=k, n_unilateral=jplan.n_unilateral)


def _friction_law(params, dt):
    """The friction potential D(z, μ f_n, k_n) of the contact settings, per contact."""
    def law(z, bound, k_n):
        return laws.friction_dissipation(z, bound, params.friction, params.friction_stiffness,
                                         params.friction_eps, k_n * dt)
    return law


PROBLEM = Problem(residual=residual, gradient=gradient, objective=objective,
                  direction=newton_residual,
                  model_gradient=model_gradient, rows=rows, mass=mass_matrix,
                  start=free_flight)


def advance(model: Model, state: State, u) -> State:
    """The end-of-step state for velocities u."""
    pos, quat = configuration(model, state, u)
    vel, ang_vel = split_velocity(u, model.n_body)
    return state.replace(pos=pos, quat=quat_normalize(quat), vel=vel, ang_vel=ang_vel,
                         time=state.time + model.dt)
