"""gymnasium's Hopper-v5 and Ant-v5 as tasks (jaxcontact/control/locomotion.py) and MuJoCo's
coordinates of an imported model (jaxcontact/control/coordinates.py).

Fast tests work on hand-made states (moved with `MjcfCoordinates.state`), so nothing compiles
a step:
- qpos / qvel of a state built from MuJoCo's (qpos, qvel) give them back; the body frames
  and angular velocities are MuJoCo's own forward kinematics at that configuration;
- ctrl read back from `MjcfImport.control` is the action;
- the reward's terms one at a time: standing still with no action pays healthy_reward
  exactly; the forward term is the root x displacement over Δt; the control cost is
  weight x |a|²; a fallen or tilted hopper and a low ant are unhealthy (`done`);
- resets stay within the noise; bad arguments raise ValueErrors naming them.
Slow tests take real steps: the forward reward over a step equals the torso frame's x
velocity computed independently (numpy, from MuJoCo's build frame), the reward's gradient
through a step matches central differences, and `Task.substeps` repeats the step.
"""

import math

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.control import Task
from jaxcontact.control.coordinates import MjcfCoordinates
from jaxcontact.control.locomotion import ant_task, contact_forces, gymnasium_asset, hopper_task
from jaxcontact.control.task import advance

# float64 kinematics of order-1 quantities: a few ulps, with room for the chains of
# quaternion products
_TOL = 1e-12


@pytest.fixture(scope="module")
def hopper():
    return hopper_task(dtype=jnp.float64)


@pytest.fixture(scope="module")
def ant():
    return ant_task(dtype=jnp.float64)


def _coords(name):
    scene, imported = jc.io.load_mjcf(str(gymnasium_asset(name)))
    model, state = scene.build(dtype=jnp.float64)
    return imported, model, state, MjcfCoordinates(imported, model, state)


def _moved(bundle, qpos=None, qvel=None, **changes):
    """The bundle's nominal state moved to qpos0 (+ changes at qpos indices) and qvel."""
    coords = _bundle_coords(bundle)
    m = coords.mj_model
    q = np.array(coords.qpos_build if qpos is None else qpos, float)
    for index, value in changes.items():
        q[int(index[1:])] = value
    v = np.zeros(m.nv) if qvel is None else np.asarray(qvel, float)
    return coords.state(bundle.task.state, q, v)


def _bundle_coords(bundle):
    """The coordinates of a task's scene (the import is deterministic: the same indices)."""
    name = "hopper" if bundle.action_size == 3 else "ant"
    _, imported = jc.io.load_mjcf(str(gymnasium_asset(name)))
    return MjcfCoordinates(imported, bundle.task.model, bundle.task.state)


@pytest.mark.parametrize("name", ["hopper", "ant"])
def test_coordinates_round_trip_and_mujoco_kinematics(name):
    imported, model, state, coords = _coords(name)
    m = imported.mj_model
    np.testing.assert_allclose(coords.qpos(state), m.qpos0, atol=_TOL, err_msg="qpos at build")
    rng = np.random.default_rng(1)
    qpos = m.qpos0 + rng.uniform(-0.3, 0.3, m.nq)
    if name == "ant":
        qpos[3:7] /= np.linalg.norm(qpos[3:7])
    qvel = rng.normal(size=m.nv)
    moved = coords.state(state, qpos, qvel)
    np.testing.assert_allclose(coords.qpos(moved), qpos, atol=_TOL, err_msg="qpos")
    np.testing.assert_allclose(coords.qvel(moved), qvel, atol=1e-11, err_msg="qvel")
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    xpos, xquat = coords.frames(moved)
    np.testing.assert_allclose(xpos, d.xpos, atol=_TOL, err_msg="xpos")
    # q and -q are one rotation
    np.testing.assert_allclose(np.abs(np.sum(np.asarray(xquat) * d.xquat, axis=1)), 1.0,
                               atol=_TOL, err_msg="xquat")
    for b in range(1, m.nbody):
        spatial = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, spatial, 0)
        np.testing.assert_allclose(moved.ang_vel[coords.group[b]], spatial[:3], atol=1e-11,
                                   err_msg=f"angular velocity of MuJoCo body {b}")


@pytest.mark.parametrize("name", ["hopper", "ant"])
def test_ctrl_reads_back_the_action(name):
    imported, model, state, coords = _coords(name)
    rng = np.random.default_rng(2)
    moved = coords.state(state, imported.mj_model.qpos0 + rng.uniform(-0.2, 0.2, len(
        imported.mj_model.qpos0)) * (np.arange(imported.mj_model.nq) >= (7 if name == "ant"
                                                                         else 0)),
                         rng.normal(size=imported.mj_model.nv))
    action = rng.uniform(-1, 1, imported.mj_model.nu)
    control = imported.control(model, moved, action)
    np.testing.assert_allclose(coords.ctrl(model, moved, control), action, atol=_TOL)


def test_hopper_reward_terms(hopper):
    task = hopper.task
    model, state = task.model, task.state
    zero = hopper.act(model, state, jnp.zeros(3))
    # standing still, no action: the healthy reward alone
    assert float(task.reward(model, state, zero, state)) == 1.0
    # forward: the root x displacement over the step (8 ms)
    ahead = _moved(hopper, q0=0.004)
    np.testing.assert_allclose(task.reward(model, state, zero, ahead), 1.0 + 0.004 / 0.008,
                               rtol=_TOL)
    # control cost: 1e-3 |a|²; an action past ±1 is clipped to it
    action = jnp.asarray([0.5, -1.0, 0.25])
    np.testing.assert_allclose(task.reward(model, state, hopper.act(model, state, action), state),
                               1.0 - 1e-3 * (0.25 + 1.0 + 0.0625), rtol=_TOL)
    np.testing.assert_allclose(
        task.reward(model, state, hopper.act(model, state, jnp.asarray([3.0, 0, 0])), state),
        1.0 - 1e-3, rtol=_TOL)


def test_hopper_health(hopper):
    task = hopper.task
    model = task.model
    assert not bool(task.done(model, task.state))
    for what, state in (("fallen (z 0.5)", _moved(hopper, q1=0.5)),
                        ("pitched 0.3 rad", _moved(hopper, q2=0.3)),
                        ("a joint rate over 100", _moved(hopper, qvel=[0, 0, 0, 120.0, 0, 0]))):
        assert bool(task.done(model, state)), what
        zero = hopper.act(model, task.state, jnp.zeros(3))
        # unhealthy after the step, x unchanged: no reward at all
        assert abs(float(task.reward(model, task.state, zero, state))) < _TOL, what
    obs = hopper.observe(model, _moved(hopper, qvel=[20.0, 0, 0, 0, 0, -30.0]))
    np.testing.assert_allclose(obs[5:], [10.0, 0, 0, 0, 0, -10.0], atol=1e-9,
                               err_msg="qvel clipped to ±10")


def test_ant_reward_health_and_observation(ant):
    task = ant.task
    model, state = task.model, task.state
    zero = ant.act(model, state, jnp.zeros(8))
    obs = ant.observe(model, state)
    assert obs.shape == (105,)
    np.testing.assert_allclose(obs[:13], np.asarray(model_qpos0(ant))[2:], atol=_TOL)
    # at build the ant floats (legs at z 0.75): no contact, reward = healthy reward
    assert float(task.reward(model, state, zero, state)) == 1.0
    ahead = _moved(ant, q0=0.01)
    np.testing.assert_allclose(task.reward(model, state, zero, ahead), 1.0 + 0.01 / 0.05,
                               rtol=_TOL)
    action = jnp.linspace(-1.0, 1.0, 8)
    np.testing.assert_allclose(task.reward(model, state, ant.act(model, state, action), state),
                               1.0 - 0.5 * float(jnp.sum(action ** 2)), rtol=_TOL)
    assert bool(task.done(model, _moved(ant, q2=0.15)))
    assert bool(task.done(model, _moved(ant, q2=1.05)))
    assert not bool(task.done(model, _moved(ant, q2=0.5)))


def model_qpos0(bundle):
    return _bundle_coords(bundle).qpos_build


def test_ant_contact_forces_on_the_ground(ant):
    task = ant.task
    model = task.model
    coords = _bundle_coords(ant)
    # lowered onto the ground, legs flat (capsules of radius 0.08 at the torso's height):
    # every body presses 1 cm into it, and the torso is too low to be healthy
    sunk = _moved(ant, q2=0.07)
    forces = contact_forces(coords, model, sunk)
    assert forces.shape == (coords.mj_model.nbody, 6)
    # the ground pushes up on the feet, pulls on nothing; the world row is 0
    assert float(jnp.max(forces[:, 5])) > 0.0 and float(jnp.min(forces[:, 5])) >= 0.0
    np.testing.assert_array_equal(forces[0], 0.0)
    reward = task.reward(model, task.state, ant.act(model, task.state, jnp.zeros(8)), sunk)
    clipped = np.clip(np.asarray(forces), -1, 1)
    np.testing.assert_allclose(reward, -5e-4 * np.sum(clipped ** 2), rtol=1e-10)
    assert float(reward) < 0.0


@pytest.mark.parametrize("make", [hopper_task, ant_task])
def test_reset_noise_within_scale(make, hopper, ant):
    bundle = hopper if make is hopper_task else ant
    coords = _bundle_coords(bundle)
    scale = 5e-3 if make is hopper_task else 0.1
    for seed in range(3):
        _, state = bundle.task.initial(jax.random.key(seed))
        qpos = np.asarray(coords.qpos(state))
        shift = qpos - coords.qpos_build
        if make is ant_task:      # the quaternion is normalized after the noise
            shift = np.delete(shift, [3, 4, 5, 6])
        assert np.all(np.abs(shift) <= scale + 1e-12) and np.any(shift != 0.0)
        if make is hopper_task:
            assert np.all(np.abs(np.asarray(coords.qvel(state))) <= scale + 1e-12)


@pytest.mark.parametrize("make,argument,value", [
    (hopper_task, "ctrl_cost_weight", -1.0), (hopper_task, "healthy_z_range", (1.0, 0.5)),
    (hopper_task, "dt", 0.0), (hopper_task, "substeps", 0),
    (hopper_task, "terminate_when_unhealthy", "yes"), (hopper_task, "reset_noise_scale", -0.1),
    (ant_task, "contact_cost_weight", float("nan")),
    (ant_task, "contact_force_range", (-1.0, math.inf)),
    (ant_task, "include_cfrc_ext_in_observation", 1)])
def test_bad_arguments_are_named(make, argument, value):
    with pytest.raises(ValueError, match=argument):
        make(**{argument: value})


def test_task_substeps_checked():
    scene = jc.Scene(dt=0.01)
    scene.add_sphere(0.1, mass=1.0, pos=(0.0, 0.0, 1.0))
    model, state = scene.build()
    with pytest.raises(ValueError, match="substeps"):
        Task(model=model, state=state, reward=lambda *a: 0.0, episode_length=3, substeps=0)


@pytest.mark.slow
def test_hopper_forward_reward_is_the_torso_velocity_over_a_step(hopper):
    task = hopper.task
    model = task.model
    _, start = task.initial(jax.random.key(3))
    control = hopper.act(model, start, jnp.asarray([0.3, -0.2, 0.1]))
    after, info = jax.jit(task.rules().advance)(model, start, control)
    assert bool(info.converged)
    # the torso frame's origin, in numpy from MuJoCo's build frame: offset in the torso body
    m = _bundle_coords(hopper).mj_model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    torso = 0     # our body of MuJoCo body 1 (torso)
    rot0 = jc.math.quat_to_mat_numpy(np.asarray(task.state.quat[torso]))
    offset = rot0.T @ (d.xpos[1] - np.asarray(task.state.pos[torso]))

    def frame_x(state):
        rot = jc.math.quat_to_mat_numpy(np.asarray(state.quat[torso]))
        return float(np.asarray(state.pos[torso])[0] + (rot @ offset)[0])

    velocity = (frame_x(after) - frame_x(start)) / 0.008
    ctrl = 1e-3 * (0.09 + 0.04 + 0.01)
    healthy = 0.0 if bool(task.done(model, after)) else 1.0
    # the root x slide is read off its carrier, jointed to the torso by penalty rows: it
    # follows the torso frame within the joints' sag
    np.testing.assert_allclose(task.reward(model, start, control, after),
                               velocity + healthy - ctrl, atol=1e-3)


@pytest.mark.slow
def test_hopper_reward_gradient_through_a_step_matches_central_differences(hopper):
    task = hopper.task
    model = task.model
    _, start = task.initial(jax.random.key(4))

    def value(action):
        control = hopper.act(model, start, action)
        after, _ = task.rules().advance(model, start, control)
        return task.reward(model, start, control, after)

    action = jnp.asarray([0.2, -0.3, 0.4])
    grad = jax.jit(jax.grad(value))(action)
    f = jax.jit(value)
    h = 1e-6
    fd = np.array([(f(action.at[i].add(h)) - f(action.at[i].add(-h))) / (2 * h)
                   for i in range(3)])
    assert np.all(np.isfinite(np.asarray(grad)))
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_advance_repeats_the_step():
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(0.1, mass=1.0, pos=(0.0, 0.0, 0.3), vel=(1.0, 0.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    control = jc.Control.zeros(1, dtype=jnp.float64)
    twice, info = advance(model, state, control, 2)
    once, _ = jc.step(model, state, control)
    again, _ = jc.step(model, once, control)
    np.testing.assert_allclose(twice.pos, again.pos, atol=1e-14)
    assert bool(info.converged)
