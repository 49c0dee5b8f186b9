"""Soft joints, motors and limits (ADD §5.3) against closed forms, and their gradients (float64).

One "zoo" scene holds every closed-form check as independent subsystems (no planes, so no
contact), so one compiled rollout serves them all; a small articulated scene serves the
gradient, solver and row checks.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import terms
from jaxcontact.math import quat_rotate, quat_to_mat
from tests._helpers import row_multipliers

G = 9.81
DT = 0.005
STEPS = 200          # 1 s
K = 1e5              # joint stiffness, N/m (and N m for the alignment rows)
HALF = 0.15          # half length of a link, m
LINK = (0.02, 0.02, HALF)        # hanging link (body z along the link)
FLAT = (HALF, 0.02, 0.02)        # horizontal link (body x along the link)
ALPHA_HOLD, KP_HOLD = 0.6, 5.0   # motor holding a hanging link against gravity
ALPHA_SPIN, KP_SPIN = 0.5, 4.0   # motors turning a link about a vertical axis
SLIDER_F = np.array([2.0, 1.0, 0.0])
LIMIT_F, LIMIT_HI, LIMIT_K, LIMIT_C = 2.0, 0.05, 1e3, 10.0
HINGE_LIMIT, HINGE_LIMIT_K = 0.3, 1e3


def _link_inertia(half):
    h = 2.0 * np.asarray(half)
    return np.array([h[1] ** 2 + h[2] ** 2, h[0] ** 2 + h[2] ** 2, h[0] ** 2 + h[1] ** 2]) / 12


def _rigid(omega, centre, point):
    """Velocity of `point` in a rigid rotation ω about `centre`."""
    return tuple(np.cross(omega, np.asarray(point) - np.asarray(centre)))


def _zoo():
    s = jc.Scene(dt=DT)
    b = {}
    # physical pendulum: link hinged at its top about y, small swing
    b["pend"] = s.add_box(LINK, 1.0, (0.0, 0.0, 1.0 - HALF), ang_vel=(0.0, 0.3, 0.0))
    s.add_joint("hinge", b["pend"], anchor=(0.0, 0.0, 1.0), axis=(0, 1, 0), stiffness=K)
    # two-link chain swinging rigidly about its pivot
    omega, pivot = np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 1.0])
    c1, c2 = pivot - [0, 0, HALF], pivot - [0, 0, 3 * HALF]
    b["chain1"] = s.add_box(LINK, 1.0, tuple(c1), vel=_rigid(omega, pivot, c1), ang_vel=omega)
    b["chain2"] = s.add_box(LINK, 1.0, tuple(c2), vel=_rigid(omega, pivot, c2), ang_vel=omega)
    s.add_joint("hinge", b["chain1"], anchor=tuple(pivot), axis=(0, 1, 0), stiffness=K)
    s.add_joint("hinge", b["chain2"], b["chain1"], anchor=tuple(pivot - [0, 0, 2 * HALF]),
                axis=(0, 1, 0), stiffness=K)
    # slider along x with a sideways push; a second one pushed against its limit
    b["slider"] = s.add_box(0.05, 1.0, (2.0, 0.0, 1.0))
    s.add_joint("slider", b["slider"], anchor=(2.0, 0.0, 1.0), axis=(1, 0, 0), stiffness=K)
    b["slider_lim"] = s.add_box(0.05, 1.0, (2.0, 1.0, 1.0))
    s.add_joint("slider", b["slider_lim"], anchor=(2.0, 1.0, 1.0), axis=(1, 0, 0), stiffness=K,
                limit=(-LIMIT_HI, LIMIT_HI), limit_stiffness=LIMIT_K, damping=LIMIT_C)
    # two boxes welded together, spinning about z while falling
    spin, centre = np.array([0.0, 0.0, 3.0]), np.array([3.05, 0.0, 1.0])
    pa, pb = centre - [0.05, 0, 0], centre + [0.05, 0, 0]
    b["fix_a"] = s.add_box(0.05, 1.0, tuple(pa), vel=_rigid(spin, centre, pa), ang_vel=spin)
    b["fix_b"] = s.add_box(0.05, 1.0, tuple(pb), vel=_rigid(spin, centre, pb), ang_vel=spin)
    s.add_joint("fixed", b["fix_a"], b["fix_b"], anchor=tuple(centre), stiffness=K)
    # cables: one slack all along the fall, one taut at its static stretch
    b["slack"] = s.add_box(0.05, 1.0, (4.0, 0.0, 1.0))
    s.add_joint("distance", b["slack"], anchor=(4.0, 0.0, 1.0), anchor_b=(4.0, 0.0, 2.0),
                rest_length=6.0, stiffness=K)
    k_cable = 1e4
    b["taut"] = s.add_box(0.05, 1.0, (5.0, 0.0, 0.5 - G / k_cable))
    s.add_joint("distance", b["taut"], anchor=(5.0, 0.0, 0.5 - G / k_cable),
                anchor_b=(5.0, 0.0, 1.0), rest_length=0.5, stiffness=k_cable)
    # a motor holding a hanging link against gravity (pose set in `zoo`)
    b["hold"] = s.add_box(LINK, 1.0, (6.0, 0.0, 1.0 - HALF))
    h = s.add_joint("hinge", b["hold"], anchor=(6.0, 0.0, 1.0), axis=(0, 1, 0), stiffness=K)
    s.add_motor(h, kp=KP_HOLD)
    # motors turning horizontal links about z, undamped and critically damped
    inertia_z = _link_inertia(FLAT)[2] + HALF ** 2
    for name, x, kd in (("free", 7.0, 0.0), ("damped", 8.0, 2 * math.sqrt(KP_SPIN * inertia_z))):
        b[name] = s.add_box(FLAT, 1.0, (x + HALF, 0.0, 1.0))
        h = s.add_joint("hinge", b[name], anchor=(x, 0.0, 1.0), axis=(0, 0, 1), stiffness=K)
        s.add_motor(h, kp=KP_SPIN, kd=kd)
    # a horizontal link falling about y onto its hinge limit
    b["limit"] = s.add_box(FLAT, 1.0, (9.0 + HALF, 0.0, 1.0))
    s.add_joint("hinge", b["limit"], anchor=(9.0, 0.0, 1.0), axis=(0, 1, 0), stiffness=K,
                limit=(-HINGE_LIMIT, HINGE_LIMIT), limit_stiffness=HINGE_LIMIT_K)
    # the mechanisms are far apart: leave body-body contact out (it would only compile)
    for i, j in itertools.combinations(range(len(b)), 2):
        s.exclude_pair(i, j)
    model, state = s.build()
    return model, state, b


def _hold_angle():
    """θ* of kp sin(α - θ) = m g d sin θ (motor against gravity), by Newton's method."""
    theta = 0.0
    for _ in range(50):
        f = KP_HOLD * math.sin(ALPHA_HOLD - theta) - G * HALF * math.sin(theta)
        df = -KP_HOLD * math.cos(ALPHA_HOLD - theta) - G * HALF * math.cos(theta)
        theta -= f / df
    return theta


@jax.jit
def _run_zoo(model, state, controls):
    return jc.rollout(model, state, controls, return_info=True)


@pytest.fixture(scope="module")
def zoo():
    model, state, b = _zoo()
    # the holding link starts at its static equilibrium: rotated by θ* about the pivot, and
    # sagged by m g / k at the hinge
    theta = _hold_angle()
    quat = np.array([math.cos(theta / 2), 0.0, math.sin(theta / 2), 0.0])
    rot = np.asarray(quat_to_mat(jnp.asarray(quat)))
    centre = np.array([6.0, 0.0, 1.0 - G / K]) - rot @ np.array([0.0, 0.0, HALF])
    i = b["hold"]
    state = state.replace(pos=state.pos.at[i].set(centre), quat=state.quat.at[i].set(quat))
    force = np.zeros((model.n_body, 3))
    force[b["slider"]] = SLIDER_F
    force[b["slider_lim"]] = (LIMIT_F, 0.0, 0.0)
    controls = jc.Control(force=jnp.broadcast_to(jnp.asarray(force), (STEPS, model.n_body, 3)),
                          torque=jnp.zeros((STEPS, model.n_body, 3)),
                          motor=jnp.broadcast_to(jnp.asarray([ALPHA_HOLD, ALPHA_SPIN, ALPHA_SPIN]),
                                                 (STEPS, 3)))
    final, traj, info = _run_zoo(model, state, controls)
    assert bool(jnp.all(info.converged)), float(jnp.max(info.residual))
    traj = jax.tree.map(np.asarray, traj)
    return model, state, b, traj


def _angle(traj, body, axis):
    """Rotation angle of a body about the world y or z axis (its only rotation)."""
    rot = np.asarray(quat_to_mat(jnp.asarray(traj.quat[:, body])))
    if axis == "y":
        return np.arctan2(rot[:, 0, 2], rot[:, 0, 0])
    return np.arctan2(rot[:, 1, 0], rot[:, 0, 0])


def _joint_gap(model, traj, j):
    """|p_a - p_b| of joint j over the trajectory, m."""
    joint = model.joint

    def world(body, local):
        if body < 0:
            return np.broadcast_to(np.asarray(local), (traj.pos.shape[0], 3))
        return traj.pos[:, body] + np.asarray(quat_rotate(jnp.asarray(traj.quat[:, body]),
                                                          local[None]))
    p_a = world(joint.body_a[j], joint.anchor_a[j])
    p_b = world(joint.body_b[j], joint.anchor_b[j])
    return np.linalg.norm(p_a - p_b, axis=-1)


def _free_fall_drop(n):
    """z drop of implicit Euler free fall after n steps: g Δt² n(n+1)/2."""
    return G * DT ** 2 * n * (n + 1) / 2


def test_hinge_pendulum_has_the_physical_pendulum_period(zoo):
    model, _, b, traj = zoo
    theta = _angle(traj, b["pend"], "y")
    t = np.arange(1, STEPS + 1) * DT
    i = np.nonzero(np.sign(theta[:-1]) != np.sign(theta[1:]))[0]
    crossings = t[i] + DT * theta[i] / (theta[i] - theta[i + 1])
    half_periods = np.diff(np.r_[0.0, crossings])   # it starts at θ = 0
    inertia = _link_inertia(LINK)[1] + HALF ** 2
    expected = 2 * math.pi * math.sqrt(inertia / (G * HALF))
    assert half_periods.size >= 2
    assert 2 * np.mean(half_periods) == pytest.approx(expected, rel=1e-2)
    # the hinge holds: anchor gap within its load over k, the axis stays aligned
    assert np.max(_joint_gap(model, traj, 0)) < 2 * G / K
    axis = np.asarray(quat_to_mat(jnp.asarray(traj.quat[:, b["pend"]])))[:, :, 1]
    assert np.max(np.abs(axis - [0.0, 1.0, 0.0])) < 1e-9


def test_hinge_chain_drift_scales_with_load_over_stiffness(zoo):
    model, _, b, traj = zoo
    load = 2 * G + 2 * 1.0 * 4 * HALF  # weight of both links + their centripetal pull (ω ≈ 1)
    for j in (1, 2):
        gap = _joint_gap(model, traj, j)
        assert 0.0 < np.max(gap) < 2 * load / K, (j, np.max(gap))
    # the chain moves in its plane: the y axes stay aligned
    for name in ("chain1", "chain2"):
        axis = np.asarray(quat_to_mat(jnp.asarray(traj.quat[:, b[name]])))[:, :, 1]
        assert np.max(np.abs(axis - [0.0, 1.0, 0.0])) < 1e-9


def test_slider_moves_only_along_its_axis_at_force_over_mass(zoo):
    _, state, b, traj = zoo
    i = b["slider"]
    n = np.arange(1, STEPS + 1)
    # implicit Euler under a constant acceleration a: x_n = x0 + a Δt² n(n+1)/2, exactly
    x = state.pos[i, 0] + SLIDER_F[0] * DT ** 2 * n * (n + 1) / 2
    np.testing.assert_allclose(traj.pos[:, i, 0], x, atol=1e-9)
    drift = np.linalg.norm(traj.pos[:, i, 1:] - np.asarray(state.pos[i, 1:]), axis=-1)
    assert np.max(drift) < 2 * math.hypot(SLIDER_F[1], G) / K
    assert np.max(np.abs(traj.ang_vel[:, i])) < 1e-9


def test_slider_limit_stops_at_the_limit_plus_load_over_stiffness(zoo):
    _, state, b, traj = zoo
    s = traj.pos[:, b["slider_lim"], 0] - float(state.pos[b["slider_lim"], 0])
    rest = LIMIT_HI + LIMIT_F / LIMIT_K
    assert s[-1] == pytest.approx(rest, abs=0.05 * LIMIT_F / LIMIT_K)
    assert np.max(s) < LIMIT_HI + 4 * LIMIT_F / LIMIT_K


def test_fixed_joint_falls_as_one_rigid_body(zoo):
    _, state, b, traj = zoo
    a, c = b["fix_a"], b["fix_b"]
    rot_a = np.asarray(quat_to_mat(jnp.asarray(traj.quat[:, a])))
    rot_c = np.asarray(quat_to_mat(jnp.asarray(traj.quat[:, c])))
    offset = np.einsum("tji,tj->ti", rot_a, traj.pos[:, c] - traj.pos[:, a])
    load = 1.0 * 3.0 ** 2 * 0.05   # centripetal force on each box, N
    np.testing.assert_allclose(offset, np.broadcast_to([0.1, 0.0, 0.0], offset.shape),
                               atol=3 * load / K)
    relative = np.einsum("tji,tjk->tik", rot_a, rot_c)
    np.testing.assert_allclose(relative, np.broadcast_to(np.eye(3), relative.shape),
                               atol=3 * load / K / 0.05)
    # internal forces cancel: the centre of mass falls freely
    z = 0.5 * (traj.pos[:, a, 2] + traj.pos[:, c, 2])
    n = np.arange(1, STEPS + 1)
    np.testing.assert_allclose(z, 1.0 - _free_fall_drop(n), atol=1e-9)


def test_slack_cable_exerts_no_force_and_taut_cable_holds(zoo):
    _, state, b, traj = zoo
    n = np.arange(1, STEPS + 1)
    i = b["slack"]
    np.testing.assert_allclose(traj.pos[:, i, 2], 1.0 - _free_fall_drop(n), atol=1e-12)
    np.testing.assert_allclose(traj.pos[:, i, :2], np.broadcast_to([4.0, 0.0], (STEPS, 2)),
                               atol=1e-12)
    i = b["taut"]
    np.testing.assert_allclose(traj.pos[:, i], np.broadcast_to(state.pos[i], (STEPS, 3)),
                               atol=1e-9)


def test_motor_holds_its_static_deflection_under_gravity(zoo):
    _, _, b, traj = zoo
    theta = _angle(traj, b["hold"], "y")
    np.testing.assert_allclose(theta, _hold_angle(), atol=1e-8)
    assert abs(_hold_angle() - ALPHA_HOLD) > 0.1  # the deflection is not negligible


def test_motor_reaches_its_target_and_damping_removes_the_overshoot(zoo):
    _, _, b, traj = zoo
    free, damped = _angle(traj, b["free"], "z"), _angle(traj, b["damped"], "z")
    assert np.max(free) > 1.5 * ALPHA_SPIN        # undamped: swings past the target
    assert np.max(damped) < ALPHA_SPIN * (1 + 1e-3)  # critically damped: no overshoot
    assert damped[-1] == pytest.approx(ALPHA_SPIN, abs=1e-3)


def test_hinge_limit_stops_the_fall(zoo):
    _, _, b, traj = zoo
    theta = _angle(traj, b["limit"], "y")
    load = 1.0 * G * HALF * math.cos(HINGE_LIMIT)   # gravity torque at the limit, N m
    # overshoot: the impact speed ω (energy m g d sin(hi) = I ω²/2) over the limit frequency
    inertia = _link_inertia(FLAT)[1] + HALF ** 2
    impact = math.sqrt(2 * G * HALF * math.sin(HINGE_LIMIT) / inertia)
    assert np.max(theta) < HINGE_LIMIT + load / HINGE_LIMIT_K + impact * math.sqrt(
        inertia / HINGE_LIMIT_K)
    assert np.min(theta) > -1e-9
    # rest: k_lim (θ - hi) = m g d cos θ
    rest = HINGE_LIMIT + load / HINGE_LIMIT_K
    assert theta[-1] == pytest.approx(rest, abs=0.1 * load / HINGE_LIMIT_K)


# --- an articulated arm: gradients, solvers and rows ------------------------------------------

ARM_STEPS = 20
ARM_DT = 0.005


def _arm(solver=None, contact=True):
    """Two horizontal links on hinges about y, the first pressed onto its upper limit (0) by
    gravity, both with motors, and a box hanging from the tip by a taut cable. The first link
    and the weight never touch; contact=False leaves their (inactive) contact rows out."""
    s = jc.Scene(dt=ARM_DT)
    l1 = s.add_box(FLAT, 1.0, (HALF, 0.0, 1.0))
    l2 = s.add_box(FLAT, 1.0, (3 * HALF, 0.0, 1.0))
    k_cable, rest = 1e3, 0.2
    z3 = 1.0 - rest - 0.5 * G / k_cable
    weight = s.add_box(0.03, 0.5, (4 * HALF, 0.0, z3))
    h1 = s.add_joint("hinge", l1, anchor=(0.0, 0.0, 1.0), axis=(0, 1, 0), stiffness=1e4,
                     limit=(-0.5, 0.0), limit_stiffness=500.0)
    h2 = s.add_joint("hinge", l2, l1, anchor=(2 * HALF, 0.0, 1.0), axis=(0, 1, 0), stiffness=1e4,
                     damping=0.01)
    s.add_joint("distance", weight, l2, anchor=(4 * HALF, 0.0, z3), anchor_b=(4 * HALF, 0.0, 1.0),
                rest_length=rest, stiffness=k_cable)
    s.add_motor(h1, kp=0.5)
    s.add_motor(h2, kp=2.0, kd=0.05)
    if not contact:
        s.exclude_pair(l1, weight)
    return s.build(solver=solver)


def _arm_controls(targets, n_body=3):
    t = targets.shape[0]
    return jc.Control(force=jnp.zeros((t, n_body, 3)), torque=jnp.zeros((t, n_body, 3)),
                      motor=targets)


def _arm_params(model, targets):
    j, m = model.joint, model.motor
    return {"targets": targets, "stiffness": j.stiffness, "angular_stiffness": j.angular_stiffness,
            "axis_a": j.axis_a, "anchor_a": j.anchor_a, "limit_stiffness": j.limit_stiffness,
            "rest_length": j.rest_length, "damping": j.damping, "kp": m.kp, "kd": m.kd}


def _arm_loss(params, model, state):
    j = model.joint.replace(**{k: params[k] for k in (
        "stiffness", "angular_stiffness", "axis_a", "anchor_a", "limit_stiffness",
        "rest_length", "damping")})
    m = model.replace(joint=j, motor=model.motor.replace(kp=params["kp"], kd=params["kd"]))
    final, _ = jc.rollout(m, state, _arm_controls(params["targets"]))
    weights = jnp.asarray([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4], [-0.9, 0.6, 0.1]])
    return (jnp.sum(weights * final.pos) + 0.1 * jnp.sum(weights * final.vel)
            + 0.01 * jnp.sum(weights * final.ang_vel))


def _arm_case(contact):
    model, state = _arm(contact=contact)
    targets = 0.2 * jnp.stack([jnp.linspace(0.0, 0.5, ARM_STEPS),
                               jnp.linspace(0.0, -1.0, ARM_STEPS)], axis=-1)
    return model, state, targets


@pytest.fixture(scope="module")
def arm():
    return _arm_case(contact=True)


@pytest.fixture(scope="module")
def jointed_arm():
    """The arm without its untouching contact pair: the gradient checks are about the joints,
    motors, limit and cable, and compile much less without the box-box rows."""
    return _arm_case(contact=False)


def _directions(params, seed):
    """A random tangent: a relative perturbation of every parameter (absolute where 0)."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    return jax.tree.unflatten(tree, [jax.random.normal(k, x.shape) * jnp.maximum(jnp.abs(x), 0.1)
                                     for k, x in zip(keys, leaves)])


def _dot(a, b):
    return sum(float(jnp.sum(x * y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def arm_loss(jointed_arm):
    """The arm's loss and its gradient, one program (finite differences call it too)."""
    model, state, _ = jointed_arm
    return jax.jit(jax.value_and_grad(lambda p: _arm_loss(p, model, state)))


@pytest.fixture(scope="module")
def arm_grad(jointed_arm, arm_loss):
    params = _arm_params(jointed_arm[0], jointed_arm[2])
    return params, arm_loss(params)[1]


# slow: the arm's gradient program is ~80 s of compilation. Joint terms go through the same
# generic assembly and implicit rule as the contact, spring, attachment and user-energy terms
# whose gradients CI checks against finite differences (solvers/test_adjoint_finite_differences.py,
# scene/test_particles.py)
@pytest.mark.slow
def test_implicit_gradient_matches_finite_differences(arm_loss, arm_grad):
    # d(final state)/d(motor targets, stiffnesses, axes, anchors, limit, cable, damping, gains)
    # through 20 steps in which the limit stays pressed and the cable taut
    params, grad = arm_grad

    def loss(p):
        return arm_loss(p)[0]

    h = 1e-6
    for seed in (0, 1):
        v = _directions(params, seed)
        fd = (float(loss(jax.tree.map(lambda x, d: x + h * d, params, v)))
              - float(loss(jax.tree.map(lambda x, d: x - h * d, params, v)))) / (2 * h)
        assert _dot(grad, v) == pytest.approx(fd, rel=1e-5), seed
    # every parameter group reaches the loss (the motion is planar: no alignment error)
    for name, g in grad.items():
        if name == "angular_stiffness":
            continue
        assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.max(jnp.abs(g))) > 0, name


@pytest.mark.slow
def test_forward_mode_matches_reverse_mode(jointed_arm, arm_grad):
    model, state, _ = jointed_arm
    params, grad = arm_grad
    jvp_model = model.replace(solver=jc.Newton(ad="jvp"))
    jvp = jax.jit(lambda p, v: jax.jvp(lambda q: _arm_loss(q, jvp_model, state), (p,), (v,)))
    for seed in (0, 1):
        v = _directions(params, seed)
        assert float(jvp(params, v)[1]) == pytest.approx(_dot(grad, v), rel=1e-8), seed


@pytest.fixture(scope="module")
def arm_solution(arm):
    """One Newton step of the arm from a moving start: the limit is pressed, the cable taut.

    Returns model, the step's args, its solution u, and the rows at u with the autodiff
    Jacobian of their errors (one program)."""
    model, state, targets = arm
    state = state.replace(vel=jnp.asarray([[0.0, 0.0, -0.1], [0.1, 0.0, -0.3], [0.2, 0.0, 0.1]]),
                          ang_vel=jnp.asarray([[0.0, 0.7, 0.0], [0.0, 1.2, 0.0], [0.3, 0.0, 0.5]]))
    control = jc.Control(force=jnp.zeros((3, 3)), torque=jnp.zeros((3, 3)),
                         motor=jnp.asarray([0.3, -0.4]))
    args, u, stats, rows = _solve_and_rows(model, state, control)
    assert bool(stats["converged"])
    return model, args, u, rows


def _flat(values):
    return jnp.concatenate([v.reshape(-1) for v in values])


@jax.jit
def _solve_and_rows(model, state, control):
    args = (model, terms.prepare(model, state, control))
    u, stats = model.solver.solve(terms.PROBLEM, terms.free_flight(args), args)
    jacobian = jax.jacfwd(lambda x: _flat(rb.error for rb in terms.rows(x, args)))(u)
    return args, u, stats, (terms.rows(u, args), jacobian)


def _solve(solver, args):
    return jax.jit(lambda a: solver.solve(terms.PROBLEM, terms.free_flight(a), a))(args)


@pytest.mark.slow  # compile-heavy; the exact-rows test below checks the same rows in CI
@pytest.mark.parametrize("solver", [
    jc.Descent(iterations=4000, early_exit=True),
    jc.Dual(iterations=4000, update="exact", early_exit=True)], ids=["descent", "dual"])
def test_first_order_solvers_reach_the_newton_step(solver, arm_solution):
    # Descent on Φ and Dual on its rows in compliance form reach the primal solution
    model, args, want, _ = arm_solution
    got, stats = _solve(solver, args)
    assert bool(stats["converged"]), (float(stats["residual"]), int(stats["iterations"]))
    np.testing.assert_allclose(got, want, atol=1e-8)


# the arm's blocks of rows, in order: (term, kind, shape of the errors)
_ARM_ROWS = (
    # one box-box pair, link 1 - weight (far, untouching), 17 contacts: 16 corner rows and an
    # unused edge-edge row (jointed neighbours do not collide), each (normal, t1, t2)
    ("contact box-box", "cone", (1, 17, 3)),
    # two hinges: anchor (3) | axis (3) | damping of the spin about the axis (1)
    ("hinge joint", "bilateral", (2, 3)), ("hinge joint", "bilateral", (2, 3)),
    ("hinge joint", "bilateral", (2, 1)),
    # the cable: one-sided stretch | damping while taut
    ("distance joint", "unilateral", (1, 1)), ("distance joint", "bilateral", (1, 1)),
    # the limit of hinge 1: lower | upper (the rows on a hinge's coordinate are one term)
    ("hinge coordinate", "unilateral", (1, 2)),
    # two motors: reference directions (3) | damping (1)
    ("motor", "bilateral", (2, 3)), ("motor", "bilateral", (2, 1)),
)
_ARM_LINEAR = (0, 3, 5, 8)     # rows linear in u: contact (J x - v̂) and damping (ẋ = G u, G
                               # frozen at the start of the step)
_ARM_CABLE, _ARM_LIMIT = 4, 6


def _separated(rb, y):
    """The arm's contact rows separate: λ = 0."""
    assert bool(jnp.all(rb.error[..., 0] > 0.0)), "the arm's contacts must separate"
    return jnp.zeros_like(y)


def _multipliers(rows):
    """λ = Π(-s e) per block of joint rows (`row_multipliers`): free for bilateral rows, λ >= 0
    for one-sided ones, 0 for the arm's separated contacts."""
    return row_multipliers(rows, _separated)


@pytest.mark.slow  # compile-heavy arm fixture; CI: tests/test_terms.py's assembly of joints and
# contacts
def test_joint_rows_are_an_exact_view_of_the_primal_problem(arm_solution):
    model, args, u, (rows, dense) = arm_solution
    n = model.n_body
    # layout: 17 contacts x 3 rows, no springs; bilateral: 6 + 6 hinge rows and 3 + 3 motor
    # rows; damping: hinge 2, cable 1, motor 2; one-sided: cable, lower, upper
    assert tuple((rb.term, rb.kind, rb.error.shape) for rb in rows) == _ARM_ROWS
    assert sum(rb.error.size for rb in rows if rb.kind == "unilateral") == 3
    c = 3 * 17
    # the pair is far apart: its normal rows separate (v_n - v̂_n = v_n + d₀/T > 0)
    assert bool(jnp.all(rows[0].error[..., 0] > 0.1))
    error = _flat(rb.error for rb in rows)
    assert error.shape == (c + 18 + 5 + 3,)
    # stationarity: M (u - ũ) = Σ Gᵀ λ at the primal solution
    lam = _multipliers(rows)
    impulse = sum(rb.transpose_apply(l, 6 * n) for rb, l in zip(rows, lam))
    momentum = terms.mass(args).apply(u - terms.free_flight(args))
    assert float(jnp.max(jnp.abs(momentum))) > 1e-3
    np.testing.assert_allclose(momentum, impulse, atol=1e-9)
    # Jacobians: position rows exactly; rows linear in u are G u (- v̂) with G frozen
    sizes = [rb.error.size for rb in rows]
    offsets = np.cumsum([0] + sizes)
    block = lambda i: np.arange(offsets[i], offsets[i + 1])  # noqa: E731
    linear = np.concatenate([block(i) for i in _ARM_LINEAR])
    position = np.concatenate([block(i) for i in range(len(rows)) if i not in _ARM_LINEAR])
    assert (position.size, linear.size) == (18 + 3, c + 5)
    assembled = np.concatenate([np.asarray(rb.dense_jac(6 * n)) for rb in rows])
    np.testing.assert_allclose(assembled[position], dense[position], atol=1e-10)
    np.testing.assert_allclose(assembled[linear], dense[linear], atol=1e-12)
    damping = np.concatenate([block(i) for i in _ARM_LINEAR[1:]])
    np.testing.assert_allclose(assembled[damping] @ np.asarray(u), error[damping], atol=1e-12)
    # the lower limit is slack, the upper one pressed, the cable taut: only the last two push
    limit, cable = rows[_ARM_LIMIT], rows[_ARM_CABLE]
    np.testing.assert_allclose(jnp.concatenate([limit.stiffness.reshape(-1),
                                                cable.stiffness.reshape(-1)]),
                               [500.0, 500.0, 1e3])        # lower | upper | cable
    np.testing.assert_array_equal(np.asarray(limit.error).reshape(-1) < 0.0, [False, True])
    assert float(cable.error[0, 0]) < 0.0
    pushes = np.concatenate([np.asarray(lam[_ARM_LIMIT]).reshape(-1),
                             np.asarray(lam[_ARM_CABLE]).reshape(-1)])
    assert pushes[0] == 0.0 and np.all(pushes[1:] > 0.0)


# --- smoothness at zero error -------------------------------------------------------------------

@pytest.mark.slow  # compile-heavy; CI: test_implicit_gradient_matches_finite_differences
def test_residual_jacobian_is_finite_where_every_joint_error_is_zero():
    # every kind at its build pose (all errors 0, a zero-length cable, a hinge limit at 0):
    # Φ's gradient and Hessian are finite there
    s = jc.Scene(dt=0.01)
    bodies = [s.add_box(0.05, 1.0, (float(i), 0.0, 1.0)) for i in range(5)]
    for i, kind in enumerate(("ball", "hinge", "slider", "fixed", "distance")):
        limit = (0.0, 0.0) if kind in ("hinge", "slider") else None
        j = s.add_joint(kind, bodies[i], anchor=(float(i), 0.0, 1.0), stiffness=100.0,
                        limit=limit)
        if kind == "hinge":
            s.add_motor(j, kp=1.0, kd=0.1)
    model, state = s.build()
    control = jc.Control.zeros(model.n_body, model.n_motor)

    @jax.jit   # the step's data and the Jacobian, one program
    def jacobian(u, model, state, control):
        return jax.jacfwd(terms.residual)(u, (model, terms.prepare(model, state, control)))

    jac = jacobian(jnp.zeros(6 * model.n_body), model, state, control)
    assert bool(jnp.all(jnp.isfinite(jac)))


# --- builder validation -------------------------------------------------------------------------

def _two_boxes():
    s = jc.Scene()
    s.add_box(0.05, 1.0, (0.0, 0.0, 1.0))
    s.add_box(0.05, 1.0, (0.2, 0.0, 1.0))
    return s


_JOINT = {"kind": "hinge", "body_a": 0, "body_b": 1, "anchor": (0.1, 0.0, 1.0), "stiffness": 1e3}


@pytest.mark.parametrize("change, name", [
    ({"kind": "universal"}, "kind"),
    ({"body_a": 2}, "body_a"),
    ({"body_b": 0}, "body_b"),
    ({"body_b": True}, "body_b"),
    ({"axis": (0.0, 0.0, 0.0)}, "axis"),
    ({"axis": (1.0, 0.0)}, "axis"),
    ({"anchor": (0.0, float("nan"), 1.0)}, "anchor"),
    ({"stiffness": -1.0}, "stiffness"),
    ({"damping": -0.1}, "damping"),
    ({"limit": (0.3, -0.3)}, "limit"),
    ({"limit": (-4.0, 0.0)}, "limit"),
    ({"kind": "ball", "limit": (-0.3, 0.3)}, "limit"),
    ({"limit_stiffness": 10.0}, "limit_stiffness"),
    ({"limit": (-0.3, 0.3), "limit_stiffness": 0.0}, "limit_stiffness"),
    ({"limit": (-0.3, 0.3), "limit_damping": -1.0}, "limit_damping"),
    ({"limit_damping": 1.0}, "limit_damping"),
    ({"rest_length": 0.1}, "rest_length"),
    ({"kind": "distance", "rest_length": -0.1}, "rest_length"),
    ({"collide": "no"}, "collide"),
    ({"kind": "fixed", "damping": 1.0}, "damping"),
])
def test_add_joint_rejects_bad_arguments(change, name):
    s = _two_boxes()
    with pytest.raises(ValueError, match=name):
        s.add_joint(**{**_JOINT, **change})


@pytest.mark.parametrize("kind, joint, kw, name", [
    ("hinge", 3, {}, "joint"),
    ("ball", 0, {}, "hinge"),
    ("hinge", 0, {"kp": 0.0}, "kp"),
    ("hinge", 0, {"kd": -1.0}, "kd"),
])
def test_add_motor_rejects_bad_arguments(kind, joint, kw, name):
    s = _two_boxes()
    s.add_joint(**{**_JOINT, "kind": kind})
    with pytest.raises(ValueError, match=name):
        s.add_motor(joint, **{"kp": 1.0, **kw})


def test_second_motor_on_a_hinge_and_collision_pairs():
    s = _two_boxes()
    h = s.add_joint(**_JOINT)
    s.add_joint("ball", 1, anchor=(0.3, 0.0, 1.0), stiffness=1.0, collide=True)
    assert s.add_motor(h, kp=1.0) == 0
    with pytest.raises(ValueError, match="already has a motor"):
        s.add_motor(h, kp=1.0)
    assert s._no_collide == {(0, 1)}
    model, _ = s.build()
    assert model.n_motor == 1 and model.joint.kind == ("hinge", "ball")


def _spin_into_limit(limit_damping, mode="vjp"):
    """A 1 m, 1 kg rod on a hinge about z (no gravity) spinning at 2 rad/s into its upper
    limit 0.1 rad (k_lim = 100 N m/rad)."""
    scene = jc.Scene(dt=1e-3, gravity=(0.0, 0.0, 0.0))
    rod = scene.add_body(1.0, (1e-4, 1.0 / 12, 1.0 / 12), pos=(0.5, 0.0, 0.0),
                         vel=(0.0, 1.0, 0.0), ang_vel=(0.0, 0.0, 2.0))
    scene.add_joint("hinge", rod, -1, anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0),
                    stiffness=1e6, limit=(-1.0, 0.1), limit_stiffness=100.0,
                    limit_damping=limit_damping)
    return scene.build(solver=jc.Newton(ad=mode))


@jax.jit
def _spin_after_the_limit(limit_damping):
    model, state = _spin_into_limit(0.0)
    model = model.replace(joint=model.joint.replace(
        limit_damping=jnp.full_like(model.joint.limit_damping, limit_damping)))
    final, _, info = jc.rollout(model, state, steps=600, return_info=True)
    return final.ang_vel[0, 2], jnp.all(info.converged)


def test_limit_damping_absorbs_the_rebound_continuously():
    """Undamped, the rod leaves the limit at about its arrival speed (implicit Euler loses a
    little); critically damped (c = 2 sqrt(k_lim I), I = 1/3 kg m²) it comes to rest against
    the limit, the limit never pulling (a rebound speed of at most a few percent); half
    critically damped it rebounds at the damped oscillator's restitution. The final spin is
    smooth in c: its gradient equals central differences."""
    inertia = 1.0 / 3.0
    critical = 2.0 * math.sqrt(100.0 * inertia)
    bounce, ok = _spin_after_the_limit(0.0)
    assert bool(ok) and -2.0 < float(bounce) < -1.6
    rest, ok = _spin_after_the_limit(critical)
    assert bool(ok) and -0.1 < float(rest) <= 1e-9
    c = 0.5 * critical
    # half critical: the damped oscillator's restitution exp(-π ζ / sqrt(1 - ζ²)), ζ = 1/2
    half, _ = _spin_after_the_limit(c)
    assert float(half) == pytest.approx(-2.0 * math.exp(-math.pi / math.sqrt(3.0)), rel=0.05)
    reverse = float(jax.grad(lambda c: _spin_after_the_limit(c)[0])(c))
    h = 1e-5
    central = (float(_spin_after_the_limit(c + h)[0])
               - float(_spin_after_the_limit(c - h)[0])) / (2 * h)
    assert reverse == pytest.approx(central, rel=1e-5)
    assert reverse > 0.0          # more damping, a slower rebound


@pytest.mark.parametrize("kind", ["hinge", "slider"])
def test_a_joint_built_at_a_coordinate_measures_from_it(kind):
    """`add_joint(coordinate=x0)`: the coordinate reads x0 at build, so a spring with
    reference x0 holds the body still, and one with reference x0 - 0.1 moves it exactly as
    the same joint built at 0 with reference -0.1 does (a hinge's x0 = 3.0, near π, too)."""
    x0 = 3.0 if kind == "hinge" else 0.4

    def first_step(coordinate, reference):
        scene = jc.Scene(dt=1e-3, gravity=(0.0, 0.0, 0.0))
        rod = scene.add_body(1.0, (1e-4, 1.0 / 12, 1.0 / 12), pos=(0.5, 0.0, 0.0))
        axis = (0.0, 0.0, 1.0) if kind == "hinge" else (1.0, 0.0, 0.0)
        joint = scene.add_joint(kind, rod, -1, anchor=(0.0, 0.0, 0.0), axis=axis,
                                stiffness=1e6, coordinate=coordinate)
        scene.add_joint_properties(joint, spring_stiffness=2.0, spring_reference=reference)
        model, state = scene.build()
        final, info = jax.jit(jc.step)(model, state)    # one program for the three scenes
        assert bool(info.converged)
        return np.concatenate([np.asarray(final.vel[0]), np.asarray(final.ang_vel[0])])

    assert np.max(np.abs(first_step(x0, x0))) < 1e-9
    moved, same = first_step(x0, x0 - 0.1), first_step(0.0, -0.1)
    assert np.max(np.abs(moved)) > 1e-5
    np.testing.assert_allclose(moved, same, rtol=1e-7, atol=1e-12)


def test_a_joints_coordinate_is_checked():
    scene = jc.Scene(dt=1e-3)
    rod = scene.add_body(1.0, (0.1, 0.1, 0.1))
    for kind, value in (("hinge", 3.5), ("ball", 0.2), ("hinge", float("nan"))):
        with pytest.raises(ValueError, match="coordinate"):
            scene.add_joint(kind, rod, -1, anchor=(0.0, 0.0, 0.0), stiffness=1e4,
                            coordinate=value)
