"""The ready-made control tasks (jaxcontact/control/tasks.py).

`walk_task` (the quadruped walking task of issue 13), on hand-made states: nothing here
compiles a training loop, and only the slow trot check a rollout.

- the observation's size and its parts: hinge angles of hand-rotated links, the phase clock;
- the action map: a zero action is the hand-written trot (`jc.scenes.trot_targets`) in the
  residual mode and zero targets otherwise, and actions saturate at ±1;
- the reward rises with the torso's forward velocity, and `done` fires on a tipped torso;
- resets draw friction and torso mass within their ranges;
- bad arguments raise `ValueError`s that name them.

`pusher_task`: targets drawn by shifting the scene, its observation, action map, reward and
argument checks.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import scenes
from jaxcontact.control import pusher_task, walk_task

# the observation's layout (see walk_task's docstring)
HEIGHT, GRAVITY, VEL, ANG_VEL, ANGLES, RATES, CLOCK = 0, 1, 4, 7, 10, 18, 26
OBS_SIZE = 28
# float64 arithmetic on angles of order 1: a few ulps
_TOL = 1e-12


@pytest.fixture(scope="module")
def walk():
    return walk_task(dtype=jnp.float64)


def _about_y(angle):
    """(w, x, y, z) quaternion of a rotation by `angle` about the world y axis."""
    return jnp.asarray([math.cos(angle / 2), 0.0, math.sin(angle / 2), 0.0])


def test_observation_of_the_nominal_state(walk):
    obs = np.asarray(walk.observe(walk.task.model, walk.task.state))
    assert obs.shape == (OBS_SIZE,)
    np.testing.assert_allclose(obs[GRAVITY:GRAVITY + 3], [0.0, 0.0, -1.0], atol=_TOL,
                               err_msg="gravity in the torso frame")
    np.testing.assert_allclose(obs[ANGLES:ANGLES + 8], 0.0, atol=_TOL, err_msg="hinge angles")
    np.testing.assert_allclose(obs[CLOCK:], [0.0, 1.0], atol=_TOL, err_msg="clock at t = 0")


def test_hinge_angles_of_rotated_links(walk):
    # front-left thigh and shank (bodies of motors 0 and 1) both turned by 0.3 rad about y:
    # the hip reads 0.3, the knee 0 (the shank did not turn relative to the thigh); the
    # front-right shank alone turned by -0.2: its knee (motor 3) reads -0.2
    state = walk.task.state
    thigh, shank = 1, 2
    assert np.allclose(state.pos[thigh, :2], state.pos[shank, :2]), "leg layout changed"
    quat = state.quat.at[thigh].set(_about_y(0.3)).at[shank].set(_about_y(0.3))
    quat = quat.at[4].set(_about_y(-0.2))
    obs = np.asarray(walk.observe(walk.task.model, state.replace(quat=quat)))
    expected = np.zeros(8)
    expected[0], expected[3] = 0.3, -0.2
    np.testing.assert_allclose(obs[ANGLES:ANGLES + 8], expected, atol=_TOL,
                               err_msg="hinge angles")


def test_zero_action_is_the_trot(walk):
    t = 0.13
    state = walk.task.state.replace(time=jnp.asarray(t))
    control = walk.act(walk.task.model, state, jnp.zeros(8))
    np.testing.assert_allclose(control.motor, scenes.trot_targets(np.array([t]))[0],
                               atol=_TOL, err_msg="motor targets of a zero action")
    assert control.force.shape == (9, 3) and not np.any(control.force)
    # the action saturates: 5 acts as 1, i.e. the trot plus the 0.3 rad amplitude
    big = walk.act(walk.task.model, state, jnp.full((8,), 5.0)).motor
    np.testing.assert_allclose(big - control.motor, 0.3, atol=_TOL, err_msg="saturated action")


def test_absolute_targets_without_residual():
    walk = walk_task(residual=False, amplitude=0.5, dtype=jnp.float64)
    state = walk.task.state.replace(time=jnp.asarray(0.13))
    action = jnp.linspace(-1.0, 1.0, 8)
    np.testing.assert_allclose(walk.act(walk.task.model, state, action).motor, 0.5 * action,
                               atol=_TOL, err_msg="absolute motor targets")


def test_reward_and_done(walk):
    model, state = walk.task.model, walk.task.state
    control = walk.act(model, state, jnp.zeros(8))

    def moving(vx):
        return state.replace(vel=state.vel.at[0, 0].set(vx))

    forward = float(walk.task.reward(model, state, control, moving(0.5)))
    backward = float(walk.task.reward(model, state, control, moving(-0.5)))
    # upright, zero action: the reward is the forward velocity itself
    assert forward == pytest.approx(0.5, abs=_TOL)
    assert backward == pytest.approx(-0.5, abs=_TOL)
    assert not bool(walk.task.done(model, state))
    tipped = state.replace(quat=state.quat.at[0].set(
        jnp.asarray([math.cos(0.6), math.sin(0.6), 0.0, 0.0])))    # 69° about x
    assert bool(walk.task.done(model, tipped))
    # tilted 69°, the tilt penalty is tilt_cost (default 5) times 1 - cos 69°
    tilted = float(walk.task.reward(model, state, control, tipped))
    assert tilted == pytest.approx(-5.0 * (1.0 - math.cos(1.2)), abs=_TOL)


def test_reset_draws_within_ranges(walk):
    keys = jax.random.split(jax.random.key(0), 16)
    models, states = jax.vmap(walk.task.initial)(keys)
    torso_mass = np.asarray(models.body.mass[:, 0])
    assert np.all((torso_mass >= 1.4) & (torso_mass <= 2.6)), torso_mass
    assert np.ptp(torso_mass) > 0.1, "torso mass is not randomized"
    np.testing.assert_allclose(models.body.mass[:, 1:], 0.2, err_msg="leg masses")
    friction = np.concatenate([np.ravel(models.geom.friction), np.ravel(models.plane.friction)])
    assert np.all((friction >= 0.4) & (friction <= 1.2)), friction
    np.testing.assert_allclose(states.pos, np.broadcast_to(walk.task.state.pos, states.pos.shape),
                               err_msg="start pose")


@pytest.mark.parametrize("kwargs, name", [
    ({"friction_range": (1.0, 0.5)}, "friction_range"),
    ({"mass_scale": (0.0, 1.0)}, "mass_scale"),
    ({"amplitude": 0.0}, "amplitude"),
    ({"frequency": -1.0}, "frequency"),
    ({"action_cost": -0.1}, "action_cost"),
    ({"max_tilt_deg": 200.0}, "max_tilt_deg"),
    ({"residual": 1}, "residual"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        walk_task(**kwargs)


@pytest.mark.slow
def test_the_trot_at_twenty_millisecond_steps_converges_on_every_step():
    """Issue 63: the legged task at Δt = 20 ms, 16 resets (friction and torso mass drawn)
    walking the open-loop trot (a zero action) for 100 steps, default `jc.Newton()`: every
    step converges (v1 stalled on 1-3 % of them) and the robot walks forward."""
    walk = walk_task(dt=0.02, dtype=jnp.float64)
    task = walk.task

    def episode(key):
        model, state = task.reset(task.model, task.state, key)

        def body(state, _):
            control = walk.act(model, state, jnp.zeros(8, state.pos.dtype))
            new, info = jc.step(model, state, control)
            return new, (info.converged, info.iterations)

        final, (converged, iterations) = jax.lax.scan(body, state, None, length=100)
        return final.pos[0, 0] - state.pos[0, 0], converged, iterations

    forward, converged, iterations = jax.jit(jax.vmap(episode))(
        jax.random.split(jax.random.PRNGKey(3), 16))
    assert bool(np.all(converged)), f"{np.sum(~np.asarray(converged))} steps did not converge"
    assert float(np.min(forward)) > 0.0
    assert float(np.max(iterations)) <= 30


# --- the pusher task ---------------------------------------------------------------------------

def test_pusher_task_draws_targets_by_shifting_the_scene():
    push = pusher_task(target_low=(0.2, -0.25), target_high=(0.6, 0.25))
    task = push.task
    keys = jax.random.split(jax.random.key(4), 64)
    models, states = jax.vmap(task.initial)(keys)
    box, pusher = np.asarray(states.pos[:, 0]), np.asarray(states.pos[:, 1])
    # the target sits at the origin: the box starts at minus the drawn target, inside the
    # rectangle, and the pusher keeps its place behind the box, touching it (0.1 + 0.05 m)
    target = -box[:, :2]
    assert np.all((target >= [0.2, -0.25]) & (target <= [0.6, 0.25]))
    assert np.ptp(target[:, 0]) > 0.2 and np.ptp(target[:, 1]) > 0.25   # spread, not one draw
    np.testing.assert_allclose(pusher - box, np.tile([-0.15, 0.0, 0.0], (64, 1)), atol=1e-6)
    model, state = task.initial(keys[0])
    obs = np.asarray(push.observe(model, state))
    assert obs.shape == (11,)
    np.testing.assert_allclose(obs[:2], box[0, :2], atol=1e-6)          # offset to the target
    np.testing.assert_allclose(obs[4:6], [1.0, 0.0], atol=1e-6)         # heading (cos, sin)
    np.testing.assert_allclose(obs[6:8], [-0.15, 0.0], atol=1e-6)       # pusher from the box
    np.testing.assert_allclose(obs[-1], 1.0, atol=1e-6)                 # 50 x 0.02 s left
    control_ = push.act(model, state, jnp.array([0.5, -2.0]))
    np.testing.assert_allclose(control_.force, [[0.0, 0.0, 0.0], [5.0, -10.0, 0.0]])
    # reward: minus the box's distance to the target after the step, minus the effort
    at_target = state.replace(pos=state.pos - state.pos[0:1] * jnp.array([[1.0, 1.0, 0.0]]))
    np.testing.assert_allclose(task.reward(model, state, control_, at_target), -0.01 * 1.25,
                               rtol=1e-5)
    for bad, name in ((dict(target_low=(0.5, 0.0), target_high=(0.2, 0.0)), "target_low"),
                      (dict(pusher_start=-0.1), "pusher_start"),
                      (dict(max_force=0.0), "max_force")):
        with pytest.raises(ValueError, match=name):
            pusher_task(**bad)
