"""Small ready-made control tasks, for tests and examples.

A task here is the `Task` record plus the two maps a learner needs around it: `observe`
(state -> observation vector) and `act` (action vector in [-1, 1] -> `Control`), bundled in
a `Bundle` so that either trainer takes it whole:

    push = push_task()
    env = BraxEnv(push.task, observe=push.observe, act=push.act,
                  action_size=push.action_size)

- `push_task`: roll a ball on the ground to a target by a horizontal force.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp

from jaxcontact.control.policies import MLPPolicy
from jaxcontact.control.task import Task
from jaxcontact.domain import randomizer
from jaxcontact.math import safe_norm
from jaxcontact.scene import Scene
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

    def mlp_policy(self, hidden=(64, 64), noise=0.0) -> MLPPolicy:
        """An `MLPPolicy` (for `jaxcontact.control.train`) on this task's maps, which read
        the nominal model: a policy sees only the state."""
        model = self.task.model
        return MLPPolicy(observe=lambda state: self.observe(model, state),
                         act=lambda action, state: self.act(model, state, action),
                         action_size=self.action_size, hidden=hidden, noise=noise)


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
        dtype = state.pos.dtype
        force = max_force * jnp.clip(action.astype(dtype), -1.0, 1.0)
        zeros = jnp.zeros((1, 3), dtype)
        return Control(force=zeros.at[0, :2].set(force), torque=zeros,
                       motor=jnp.zeros((0,), dtype))

    def reward(model, state, control, next_state):
        # safe_norm: the distance is differentiable at the target (zero) too
        distance = safe_norm(next_state.pos[0, :2] - goal)
        effort = jnp.sum(jnp.square(control.force[0, :2] / max_force))
        return -distance - action_cost * effort

    task = Task(model=model, state=state, reward=reward, episode_length=episode_length,
                reset=reset)
    return Bundle(task=task, observe=observe, act=act, action_size=2)
