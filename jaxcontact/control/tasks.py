"""Small ready-made control tasks, for tests and examples.

A task here is the `Task` record plus the two maps a learner needs around it: `observe`
(state -> observation vector) and `act` (action vector in [-1, 1] -> `Control`), bundled in
a `Bundle` so that either trainer takes it whole:

    push = push_task()
    env = BraxEnv(push.task, observe=push.observe, act=push.act,
                  action_size=push.action_size)

- `push_task`: roll a ball on the ground to a target by a horizontal force.
- `pusher_task`: a force-driven ball pushes a box to a random target (Qiao et al. 2020).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.control.critic import Critic
from jaxcontact.control.policies import MLPPolicy
from jaxcontact.control.task import Task
from jaxcontact.domain import randomizer
from jaxcontact.math import quat_mul, quat_rotate, quat_rotate_inverse, safe_atan2, safe_norm
from jaxcontact.scene import Scene
from jaxcontact.scenes import legged_robot, trot_targets
from jaxcontact.types import Control


class Bundle(NamedTuple):
    """A task and its observation and action maps.

    Attributes:
      task: the `Task`.
      observe: `observe(model, state) -> (observation_size,)` array.
      act: `act(model, state, action) -> Control`, for actions of shape (action_size,) in
        [-1, 1].
      action_size: length of the action vector.
    """

    task: Task
    observe: Callable
    act: Callable
    action_size: int

    def mlp_policy(self, hidden=(64, 64), **options) -> MLPPolicy:
        """An `MLPPolicy` (for `jaxcontact.control.train`) on this task's maps, which read
        the nominal model: a policy sees only the state. `options`: `MLPPolicy`'s other
        fields (`noise`, `activation`, `output_scale`)."""
        model = self.task.model
        return MLPPolicy(observe=lambda state: self.observe(model, state),
                         act=lambda action, state: self.act(model, state, action),
                         action_size=self.action_size, hidden=hidden, **options)

    def critic(self, hidden=(64, 64), **options) -> Critic:
        """A `Critic` (for `jaxcontact.control.train(..., critic=)`) on this task's
        observation of the nominal model. `options`: `Critic`'s other fields (`discount`,
        `lam`, `iterations`, `optimizer`, `activation`)."""
        model = self.task.model
        return Critic(observe=lambda state: self.observe(model, state), hidden=hidden,
                      **options)


def _horizontal_push(state, body, action, max_force) -> Control:
    """A horizontal force max_force · clip(action, -1, 1) (N) on `body`, nothing else."""
    dtype = state.pos.dtype
    force = max_force * jnp.clip(action.astype(dtype), -1.0, 1.0)
    zeros = jnp.zeros(state.pos.shape, dtype)
    return Control(force=zeros.at[body, :2].set(force), torque=zeros,
                   motor=jnp.zeros((0,), dtype))


def _push_effort(control, body, max_force):
    """|F / max_force|² of a `_horizontal_push` on `body`."""
    return jnp.sum(jnp.square(control.force[body, :2] / max_force))


def push_task(*, target=(0.0, 0.0), start_range=0.5, mass_range=(0.5, 2.0), radius=0.1,
              max_force=5.0, action_cost=0.01, dt=0.02, episode_length=50, solver=None,
              dtype=None) -> Bundle:
    """A ball on the ground, pushed by a horizontal force at its centre to a target point.

    The ball (radius `radius`, built with mass 1 kg) starts at rest on the ground plane, its
    centre offset from `target` by a uniform draw in [-start_range, start_range]² and its
    mass drawn uniformly in `mass_range` (inertia scaled with it), at each reset. A
    rolling ball's acceleration is 5/7 F/m (solid sphere), so `max_force` = 5 N moves a 1 kg
    ball 1.8 m in the default one-second episode: every start can reach the target.

    - action (2,): the horizontal force (F_x, F_y) = max_force · clip(action, -1, 1), N.
    - observation (4,): the ball's horizontal offset from the target (m) and its horizontal
      velocity (m/s).
    - reward: -|x_xy - target| - action_cost |F / max_force|², x after the step.

    Args:
      target: (2,) target point on the ground, m.
      start_range: half width of the square of start offsets around the target, m (>= 0).
      mass_range: (low, high) ball mass, kg.
      radius: ball radius, m.
      max_force: force at action ±1, N.
      action_cost: weight of the squared normalized force in the reward.
      dt: time step, s.
      episode_length: steps per episode.
      solver: the scene's solver settings (default `jc.Newton()`).
      dtype: float dtype of the scene (default: JAX's default float).

    Returns:
      a `Bundle` (task, observe, act, action_size = 2).
    """
    low, high = (float(v) for v in mass_range)
    if not 0.0 < low <= high:
        raise ValueError(f"mass_range must be (low, high) with 0 < low <= high, got "
                         f"{mass_range!r}")
    if start_range < 0:
        raise ValueError(f"start_range must be >= 0, got {start_range!r}")
    if max_force <= 0:
        raise ValueError(f"max_force must be > 0, got {max_force!r}")
    scene = Scene(dt=dt)
    scene.add_plane()
    # resting height: the ground's penalty spring (default k_n = 1e5 N/m) carries m g with a
    # penetration m g / k_n ~ 0.1 mm at 1 kg, so starting at z = radius barely bounces
    scene.add_sphere(radius, mass=1.0, pos=(0.0, 0.0, radius))
    model, state = scene.build(solver=solver, dtype=dtype)
    goal = jnp.asarray(target, state.pos.dtype)
    if goal.shape != (2,):
        raise ValueError(f"target must be a 2-vector, got {target!r}")
    state = state.replace(pos=state.pos.at[0, :2].set(goal))

    # a new start offset and mass (inertia scaled with it: a uniform solid) at each reset
    reset = randomizer(mass=(low, high), pos=((-start_range, -start_range, 0.0),
                                              (start_range, start_range, 0.0)))

    def observe(model, state):
        return jnp.concatenate([state.pos[0, :2] - goal, state.vel[0, :2]])

    def act(model, state, action):
        return _horizontal_push(state, 0, action, max_force)

    def reward(model, state, control, next_state):
        # safe_norm: the distance is differentiable at the target (zero) too
        distance = safe_norm(next_state.pos[0, :2] - goal)
        effort = _push_effort(control, 0, max_force)
        return -distance - action_cost * effort

    task = Task(model=model, state=state, reward=reward, episode_length=episode_length,
                reset=reset)
    return Bundle(task=task, observe=observe, act=act, action_size=2)


def pusher_task(*, target_low=(0.2, -0.25), target_high=(0.6, 0.25), box_half=(0.1, 0.1, 0.05),
                box_mass=0.5, pusher_radius=0.05, pusher_mass=0.5, pusher_start=None,
                friction=0.5, stiffness=1e4, damping=50.0, max_force=10.0, action_cost=0.01,
                dt=0.02, episode_length=50, solver=None, dtype=None) -> Bundle:
    """A pusher (a ball driven by a horizontal force) brings a box on the ground to a target.

    Qiao et al. 2020's learning-control task ("bring an object to a randomised target within
    1 s", their Sec. 5) with a pusher: the manipulator and the object start at fixed places,
    the box at the origin and the pusher behind it on the x axis, and each episode draws the
    target uniformly in the rectangle [target_low, target_high] (m, on the ground); by
    default the pusher starts touching the box's back face. The
    scene is invariant to horizontal shifts, so the scene is built with the target at the
    origin and a reset shifts both bodies by minus the drawn target: the same episodes.
    The box slides with Coulomb friction and stops when the pusher leaves it; the pusher can
    only push, so it has to steer the box by pushing off its centre.

    - action (2,): the horizontal force on the pusher, max_force · clip(action, -1, 1), N.
    - observation (11,): the box's offset from the target and its velocity (x, y), its yaw
      as (cos, sin), the pusher's offset from the box and its velocity, and the time left
      in the episode (s). Qiao et al.'s inputs: relative distance, speed, remaining time.
    - reward: -|box_xy - target| - action_cost |F / max_force|², after the step (Qiao et
      al.'s DDPG reward; their loss is the distance at the end of the episode, which is
      what `experiments/qiao_learning_control.py` reports).

    Args:
      target_low, target_high: (2,) corners of the rectangle of targets, m (low <= high),
        relative to the box's start.
      box_half, box_mass: the box's half sizes (m) and mass (kg).
      pusher_radius, pusher_mass: the pusher ball's radius (m) and mass (kg).
      pusher_start: the pusher's start on the x axis (m), behind the box: <= -(box_half[0]
        + pusher_radius). None (default): that bound, touching the box, so that from the
        first step a push moves the box and the reward's gradient reaches the policy.
      friction: Coulomb μ of the ground and both bodies.
      stiffness, damping: contact k_n (N/m) and k_d (N s/m) of every surface. Softer than
        `Scene`'s default (1e5), so the pusher's impacts on the box converge in fewer
        Newton iterations; they still need up to ~15 at dt = 0.02 s (the default cap is
        50; the experiment passes `solver=jc.Newton(iterations=30)`). The box sinks only
        m g / k_n = 0.5 mm.
      max_force: force at action ±1, N.
      action_cost: weight of the squared normalized force in the reward.
      dt, episode_length: time step (s) and steps per episode (default 50 x 0.02 = 1 s).
      solver, dtype: the scene's solver settings and float dtype (defaults as `Scene.build`).

    Returns:
      a `Bundle` (task, observe, act, action_size = 2).
    """
    low = np.asarray(target_low, float)
    high = np.asarray(target_high, float)
    if low.shape != (2,) or high.shape != (2,) or not np.all(low <= high):
        raise ValueError(f"target_low and target_high must be 2-vectors with low <= high, "
                         f"got {target_low!r} and {target_high!r}")
    touching = -(float(box_half[0]) + float(pusher_radius))
    pusher_start = touching if pusher_start is None else pusher_start
    if pusher_start > touching:
        raise ValueError(f"pusher_start must be <= -(box_half[0] + pusher_radius) (behind the "
                         f"box), got {pusher_start!r}")
    if max_force <= 0:
        raise ValueError(f"max_force must be > 0, got {max_force!r}")
    scene = Scene(dt=dt, friction=friction, stiffness=stiffness, damping=damping)
    scene.add_plane()
    box = scene.add_box(box_half, mass=box_mass, pos=(0.0, 0.0, box_half[2]))
    pusher = scene.add_sphere(pusher_radius, mass=pusher_mass,
                              pos=(pusher_start, 0.0, pusher_radius))
    model, state = scene.build(solver=solver, dtype=dtype)
    horizon = episode_length * dt

    def reset(model, state, key):
        goal = jax.random.uniform(key, (2,), state.pos.dtype, low, high)
        shift = jnp.concatenate([goal, jnp.zeros((1,), goal.dtype)])
        return model, state.replace(pos=state.pos - shift[None, :])

    def observe(model, state):
        pos, vel = state.pos[:, :2], state.vel[:, :2]
        heading = quat_rotate(state.quat[box], jnp.asarray([1.0, 0.0, 0.0], pos.dtype))[:2]
        heading = heading / safe_norm(heading)
        return jnp.concatenate([pos[box], vel[box], heading, pos[pusher] - pos[box],
                                vel[pusher], jnp.reshape(horizon - state.time, (1,))])

    def act(model, state, action):
        return _horizontal_push(state, pusher, action, max_force)

    def reward(model, state, control, next_state):
        distance = safe_norm(next_state.pos[box, :2])
        effort = _push_effort(control, pusher, max_force)
        return -distance - action_cost * effort

    task = Task(model=model, state=state, reward=reward, episode_length=episode_length,
                reset=reset)
    return Bundle(task=task, observe=observe, act=act, action_size=2)


def walk_task(*, friction_range=(0.4, 1.2), mass_scale=(0.7, 1.3), residual=True,
              amplitude=0.3, frequency=2.0, action_cost=0.02, tilt_cost=5.0,
              alive_bonus=0.0, max_tilt_deg=60.0, dt=0.02, episode_length=100, solver=None,
              dtype=None) -> Bundle:
    """The quadruped of `jc.scenes.legged_robot` walks forward (+x) on randomized friction
    and torso mass.

    At each reset `jaxcontact.domain.randomizer` draws every body's and the ground's friction
    uniformly in `friction_range` (a contact uses the mean of its two sides) and the torso's
    mass uniformly in `mass_scale` times its nominal 2 kg (inertia scaled with it); the robot
    starts standing at rest, in the nominal pose. Motor m = 2 leg + (0 hip, 1 knee), legs in
    `jc.scenes.LEGS` order; a positive angle swings the lower end of a link backwards (-x).

    - action (8,) in [-1, 1]: motor target angles, rad, θ* = amplitude · a, plus (with
      `residual`) the hand-written trot `jc.scenes.trot_targets(t)` at the state's time t: a
      zero action then walks the open-loop trot, and the policy learns a correction. With
      `residual=False` the policy makes the whole gait.
    - observation (28,): the torso's height above its start (×10, m), gravity's direction in
      the torso frame (3), the torso's linear velocity (3, m/s) and angular velocity (3, ×0.2,
      rad/s) in the torso frame, the 8 hinge angles (rad, from the links' relative
      orientations) and their rates (8, ×0.1, rad/s), and the phase clock (sin 2π f t,
      cos 2π f t): a memoryless network can keep a rhythm.
    - reward: v_x - action_cost · mean(a²) - tilt_cost · (1 - u_z) + alive_bonus, with v_x
      the torso's forward velocity after the step (m/s) and u_z the z component of the
      torso's up axis (1 upright, 0 on its side). The return of an episode is its forward
      distance over dt, less the penalties, plus the bonus for each step it lasted: with
      a `Critic`, a bonus larger than the penalties makes falling cost the future.
    - done: the torso tilts past `max_tilt_deg` or drops below half its start height.

    Args:
      friction_range: (low, high) Coulomb friction, μ >= 0.
      mass_scale: (low, high) factors > 0 of the torso's nominal mass.
      residual: actions correct the hand-written trot (True) or are the whole target.
      amplitude: target angle at action ±1, rad (> 0).
      frequency: the trot's and the phase clock's frequency, Hz (> 0).
      action_cost, tilt_cost: weights of the penalties (>= 0).
      alive_bonus: reward per step the episode lasts (>= 0).
      max_tilt_deg: tilt that ends an episode, degrees in (0, 180].
      dt: time step, s.
      episode_length: steps per episode.
      solver: the scene's solver settings (default `jc.Newton()`: at dt = 0.02 s every
        step of the trot converges, in at most 30 iterations; a slow test checks it).
      dtype: float dtype of the scene (default: JAX's default float).

    Returns:
      a `Bundle` (task, observe, act, action_size = 8).
    """
    f_low, f_high = (float(v) for v in friction_range)
    if not 0.0 <= f_low <= f_high:
        raise ValueError(f"friction_range must be (low, high) with 0 <= low <= high, got "
                         f"{friction_range!r}")
    m_low, m_high = (float(v) for v in mass_scale)
    if not 0.0 < m_low <= m_high:
        raise ValueError(f"mass_scale must be (low, high) with 0 < low <= high, got "
                         f"{mass_scale!r}")
    for name, value, positive in (("amplitude", amplitude, True),
                                  ("frequency", frequency, True),
                                  ("action_cost", action_cost, False),
                                  ("tilt_cost", tilt_cost, False),
                                  ("alive_bonus", alive_bonus, False)):
        if not (value > 0 if positive else value >= 0):
            raise ValueError(f"{name} must be {'>' if positive else '>='} 0, got {value!r}")
    if not 0.0 < max_tilt_deg <= 180.0:
        raise ValueError(f"max_tilt_deg must be in (0, 180], got {max_tilt_deg!r}")
    if not isinstance(residual, bool):
        raise ValueError(f"residual must be a bool, got {residual!r}")

    scene = legged_robot(dt=dt)
    info = scene.info
    torso = info["torso"]
    model, state = scene.build(solver=solver, dtype=dtype)
    ftype = state.pos.dtype
    nominal = float(model.body.mass[torso])
    reset = randomizer(friction=(f_low, f_high), mass=(m_low * nominal, m_high * nominal),
                       bodies=(torso,))
    # each motor's link (thigh at the hip, shank at the knee) and the link it hangs from
    child = np.array([b for leg in range(4) for b in (info["thighs"][leg], info["shanks"][leg])])
    parent = np.array([b for leg in range(4) for b in (torso, info["thighs"][leg])])
    start_height = float(state.pos[torso, 2])
    min_up = math.cos(math.radians(max_tilt_deg))

    def hinges(state):
        # every link is built unrotated, so the hinge angle is the rotation about y of the
        # parent-to-child relative quaternion conj(q_p) q_c
        conj = state.quat[parent] * jnp.asarray([1.0, -1.0, -1.0, -1.0], ftype)[None, :]
        rel = quat_mul(conj, state.quat[child])
        sign = jnp.where(rel[:, 0] < 0.0, -1.0, 1.0).astype(ftype)   # q and -q: one rotation
        angle = 2.0 * safe_atan2(sign * rel[:, 2], sign * rel[:, 0])
        y = jnp.broadcast_to(jnp.asarray([0.0, 1.0, 0.0], ftype), (child.size, 3))
        rate = jnp.sum((state.ang_vel[child] - state.ang_vel[parent])
                       * quat_rotate(state.quat[parent], y), axis=1)
        return angle, rate

    def up_z(state):
        return quat_rotate(state.quat[torso], jnp.asarray([0.0, 0.0, 1.0], ftype))[2]

    def base(state):
        if not residual:
            return jnp.zeros((8,), ftype)
        return trot_targets(state.time, frequency=frequency).astype(ftype)

    def observe(model, state):
        q = state.quat[torso]
        gravity = quat_rotate_inverse(q, jnp.asarray([0.0, 0.0, -1.0], ftype))
        angle, rate = hinges(state)
        phase = 2.0 * math.pi * frequency * state.time
        return jnp.concatenate([
            jnp.reshape(10.0 * (state.pos[torso, 2] - start_height), (1,)), gravity,
            quat_rotate_inverse(q, state.vel[torso]),
            0.2 * quat_rotate_inverse(q, state.ang_vel[torso]), angle, 0.1 * rate,
            jnp.stack([jnp.sin(phase), jnp.cos(phase)]).astype(ftype)])

    def act(model, state, action):
        motor = base(state) + amplitude * jnp.clip(action.astype(ftype), -1.0, 1.0)
        zeros = jnp.zeros((state.pos.shape[0], 3), ftype)
        return Control(force=zeros, torque=zeros, motor=motor)

    def reward(model, state, control, next_state):
        action = (control.motor - base(state)) / amplitude
        return (next_state.vel[torso, 0] - action_cost * jnp.mean(jnp.square(action))
                - tilt_cost * (1.0 - up_z(next_state)) + alive_bonus)

    def done(model, state):
        return (up_z(state) < min_up) | (state.pos[torso, 2] < 0.5 * start_height)

    task = Task(model=model, state=state, reward=reward, episode_length=episode_length,
                reset=reset, done=done)
    return Bundle(task=task, observe=observe, act=act, action_size=8)
