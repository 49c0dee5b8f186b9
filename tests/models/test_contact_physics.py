"""Physics of the step against closed-form answers (float64), with every solver.

Descent and Dual get budgets large enough to converge (every step must report converged), so
each test checks that they solve the same physics, not just that Newton does.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.math import quat_rotate

G = 9.81


CHUNK = 100  # steps per compiled call: scenes of one structure share one program
# first-order solvers converge linearly: a budget that reaches 1e-8 m/s on every step, with
# early exit so that steps that converge sooner stop
# (matrix-free Newton takes Newton's iterates exactly: solvers/test_solvers_agree.py checks it)
SOLVERS = {"newton": jc.Newton(),
           "descent": jc.Descent(iterations=1000, tol=1e-8, early_exit=True),
           "dual": jc.Dual(iterations=2000, update="exact", tol=1e-8, early_exit=True)}


@pytest.fixture(params=list(SOLVERS), ids=list(SOLVERS))
def solver(request):
    return SOLVERS[request.param]


# The long first-order runs (restitution at dt = 2e-5, the box on the incline) are marked slow:
# `make test-all` runs them; CI keeps their Newton versions and the other first-order ones.
SLOW_FIRST_ORDER = pytest.mark.parametrize(
    "solver", [name if name == "newton" else pytest.param(name, marks=pytest.mark.slow)
               for name in SOLVERS], indirect=True)


@jax.jit
def _chunk(model, state):
    return jc.rollout(model, state, steps=CHUNK, return_info=True)


def _run(scene, steps, solver=None, **build):
    """Roll out `steps` (a multiple of CHUNK) steps; returns model, final, traj, info."""
    assert steps % CHUNK == 0
    model, state = scene.build(solver=solver, **build)
    trajs, infos = [], []
    for _ in range(steps // CHUNK):
        state, traj, info = _chunk(model, state)
        trajs.append(traj), infos.append(info)
    traj, info = (jax.tree.map(lambda *x: jnp.concatenate(x), *t) for t in (trajs, infos))
    assert bool(jnp.all(info.converged)), (
        f"{int(jnp.sum(~info.converged))} steps did not converge, max residual "
        f"{float(jnp.max(info.residual)):.2e}")
    return model, state, traj, info


@pytest.mark.parametrize("shape", ["sphere", "box"])
@pytest.mark.parametrize("solver", [
    name if name == "newton" else pytest.param(name, marks=pytest.mark.slow) for name in SOLVERS],
    indirect=True)
def test_resting_penetration_is_weight_over_stiffness(shape, solver):
    # linear law: at rest the penalty force k_n d balances m g (a box rests on 4 corners)
    k, m = 1e5, 2.0
    scene = jc.Scene(dt=0.002, stiffness=k, damping=200.0)
    scene.add_plane()
    if shape == "sphere":
        scene.add_sphere(0.05, m, (0, 0, 0.05))
        expected = m * G / k
    else:
        scene.add_box(0.05, m, (0, 0, 0.05))
        expected = m * G / (4 * k)
    _, final, _, info = _run(scene, 500, solver)
    penetration = 0.05 - float(final.pos[0, 2])
    assert penetration == pytest.approx(expected, rel=0.01), "penetration"
    assert float(info.max_penetration[-1]) == pytest.approx(expected, rel=0.01), "info"
    assert int(info.active_contacts[-1]) == (1 if shape == "sphere" else 4)


@SLOW_FIRST_ORDER
def test_restitution_follows_the_damped_law(solver):
    # e = 0.5 through `jc.restitution_to_damping` (the damper releases the ball before the gap
    # reopens, `jc.damping_to_restitution`). dt = 2e-5 s resolves the 10 ms contact (k_n = 1e5,
    # m = 1) in ~500 steps, so implicit Euler's numerical damping stays near 1%; gravity
    # during the contact shifts e by a further ~1%.
    k, m, e = 1e5, 1.0, 0.5
    damping = float(jc.restitution_to_damping(e, k, m))
    dt = 2e-5
    scene = jc.Scene(dt=dt, stiffness=k, damping=damping)
    scene.add_plane()
    scene.add_sphere(0.05, m, (0, 0, 0.05 + 1e-4), vel=(0, 0, -3.0))  # dropped from ~0.46 m
    _, _, traj, _ = _run(scene, 1500, solver)
    gap = np.asarray(traj.pos[:, 0, 2]) - 0.05
    vz = np.asarray(traj.vel[:, 0, 2])
    i_in = int(np.argmax(gap < 0))
    i_out = i_in + int(np.argmax(gap[i_in:] > 0))
    assert i_out > i_in, "the sphere did not leave the ground"
    v_in = -np.interp(0.0, gap[[i_in, i_in - 1]], vz[[i_in, i_in - 1]])
    v_out = np.interp(0.0, gap[[i_out - 1, i_out]], vz[[i_out - 1, i_out]])
    assert v_out / v_in == pytest.approx(e, rel=0.05), "restitution"


def _incline_scene(theta, mu):
    """A cube resting on a plane tilted by theta about the y axis; returns scene, slope dir."""
    normal = (-math.sin(theta), 0.0, math.cos(theta))
    down_slope = np.array([-math.cos(theta), 0.0, -math.sin(theta)])  # ⟂ normal, descending
    quat = (math.cos(theta / 2), 0.0, -math.sin(theta / 2), 0.0)  # body z -> plane normal
    scene = jc.Scene(dt=0.002, friction=mu)
    scene.add_plane(normal=normal)
    h = 0.05
    pos = np.array(normal) * (h - 1e-5)
    scene.add_box(h, 1.0, tuple(pos), quat=quat)
    return scene, down_slope, np.array(normal)


def test_incline_quat_puts_face_on_plane():
    theta = 0.3
    scene, _, normal = _incline_scene(theta, 0.5)
    model, state = scene.build()
    z_axis = quat_rotate(state.quat[0], jnp.array([0.0, 0.0, 1.0]))
    np.testing.assert_allclose(z_axis, normal, atol=1e-12)


@SLOW_FIRST_ORDER
def test_incline_sticks_below_friction_angle(solver):
    mu = 0.5
    theta = math.atan(mu - 0.1)
    scene, slope, _ = _incline_scene(theta, mu)
    _, final, traj, _ = _run(scene, 500, solver)
    displacement = float(jnp.linalg.norm(final.pos[0] - traj.pos[0, 0]))
    assert displacement < 1e-3, f"moved {displacement:.2e} m in 1 s"


@SLOW_FIRST_ORDER
def test_incline_slides_with_coulomb_acceleration(solver):
    mu = 0.5
    theta = math.atan(mu + 0.1)
    scene, slope, _ = _incline_scene(theta, mu)
    _, _, traj, _ = _run(scene, 500, solver)
    v = np.asarray(traj.vel[:, 0]) @ slope
    t = np.asarray(traj.time)
    i0 = int(np.searchsorted(t, 0.2))
    accel = (v[-1] - v[i0]) / (t[-1] - t[i0])
    expected = G * (math.sin(theta) - mu * math.cos(theta))
    assert accel == pytest.approx(expected, rel=0.03), "acceleration"


# CI's check of Descent and Dual on contact and friction
def test_sliding_sphere_reaches_rolling_speed(solver):
    # Coulomb: a solid sphere launched without spin rolls at 5/7 v0 after 2 v0 / (7 μ g)
    v0, mu, r = 2.0, 0.5, 0.05
    scene = jc.Scene(dt=0.002, friction=mu)
    scene.add_plane()
    scene.add_sphere(r, 1.0, (0, 0, r), vel=(v0, 0, 0))
    _, final, _, _ = _run(scene, 200, solver)  # 0.4 s, the switch is at 0.12 s
    assert float(final.vel[0, 0]) == pytest.approx(5 / 7 * v0, rel=0.02), "speed"
    # rolling without slip: ω_y r = v_x (up to the penetration of the lever arm)
    assert float(final.ang_vel[0, 1]) * r == pytest.approx(5 / 7 * v0, rel=0.02), "spin"


# Descent and Dual: slow (a pair contact, ~15 s of compilation each)
@SLOW_FIRST_ORDER
def test_spheres_collide_and_conserve_momentum(solver):
    # head-on, no gravity, no friction: total momentum is conserved exactly by the pair force
    scene = jc.Scene(dt=0.001, gravity=(0, 0, 0), friction=0.0, damping=0.0)
    scene.add_sphere(0.1, 1.0, (0, 0, 0), vel=(1.0, 0, 0))
    scene.add_sphere(0.1, 3.0, (0.25, 0, 0))
    _, final, traj, info = _run(scene, 200, solver)
    p0 = 1.0 * 1.0
    p = 1.0 * final.vel[0, 0] + 3.0 * final.vel[1, 0]
    # each step's momentum error is bounded by the masses times its residual (m/s)
    bound = float(jnp.sum(info.residual)) * (1.0 + 3.0) + 1e-12
    assert abs(float(p) - p0) <= bound, "momentum"
    assert bound < 1e-6
    assert int(jnp.max(info.active_contacts)) == 1
    # undamped contact: nearly elastic, so the light sphere bounces back
    assert float(final.vel[0, 0]) < 0 < float(final.vel[1, 0])
