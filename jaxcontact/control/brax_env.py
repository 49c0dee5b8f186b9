"""A Brax environment over a jaxcontact `Task`, so that Brax's trainers (PPO, SAC) run on it.

`BraxEnv(task, observe=..., act=..., action_size=...)` is a `brax.envs.Env`: `reset(rng)`
draws the start of an episode with `task.initial(rng)` and `step(state, action)` is one
`jc.step` (`task.substeps` of them, an action repeat) under the control
`act(model, state, action)`. It adds no physics of its own.

What goes where in Brax's `State`:
- `pipeline_state`: a `Physics` record holding the episode's `Model` and `State`. The model
  is per environment (a randomized `task.reset` gives each environment its own masses,
  frictions, ...), and Brax's `AutoResetWrapper` restores both to the start that the last
  `reset` drew, with one `where` per leaf, as it does for its own pipelines. An environment
  thus replays the same start every episode until `reset` is called again (`ppo.train` does
  so between evaluations when `num_resets_per_eval` > 0).
- `obs`, `reward`, `done` and `metrics`: cast to JAX's default float (float32, or float64
  with `jax_enable_x64`), the dtype Brax's wrappers make their own counters in
  (`EpisodeWrapper`'s `steps`, `truncation`): any other dtype changes the type of the state
  that Brax's training loops carry, which `lax.scan` rejects. The physics in
  `pipeline_state` keeps the scene's dtype, and actions are cast to it before `act`.
- `metrics`: per step, `reward`, `residual` (the solve's final residual, m/s),
  `iterations`, `converged` (1 or 0) and `nonfinite` (1 or 0). `EpisodeWrapper` sums them
  over the episode.

A step whose state, observation or reward is not finite (or whose solve reports
`Result.NONFINITE`) is never passed on: the environment keeps the last finite state and
observation, the step's reward is `nonfinite_reward`, `done` is 1 (an auto-reset wrapper then
starts a new episode) and `metrics["nonfinite"]` is 1, so a diverged environment is counted,
not hidden, and one NaN does not poison a whole batch of PPO updates. Choose
`nonfinite_reward` no better than any reward the task gives, or diverging pays.

Domain randomization belongs in `task.reset`: the environment has no Brax `System`, so
`ppo.train(randomization_fn=...)` (which rewrites `env.sys`) does not apply.

Brax 0.14's trainers (PPO, SAC, APG) call `jax.device_put_replicated`, which JAX 0.10 removed;
on such a JAX, put `device_put_replicated` from this module back in its place before training
(`jax.device_put_replicated = device_put_replicated`). Nothing here changes `jax` by itself.
Importing this module needs Brax: `pip install -e ".[rl]"`.
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

try:
    from brax.envs import base as brax_base
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("jaxcontact.control.brax_env needs Brax: pip install -e \".[rl]\"") \
        from error

from jaxcontact.compiling import jit
from jaxcontact.control.task import Task, advance
from jaxcontact.math import tree_finite
from jaxcontact.step import step as physics_step
from jaxcontact.types import Control, Model, Result, State

# jc.step traced once per process and shapes, however many programs step the environment
# (Brax compiles training, evaluation and reset apart): the inner jit caches the trace
_physics_step = jit(physics_step)
_advance = jit(advance, static_argnames="substeps")   # tasks with an action repeat

METRICS = ("reward", "residual", "iterations", "converged", "nonfinite")


@struct.dataclass
class Physics:
    """The simulator's part of a Brax `State` (its `pipeline_state`).

    Attributes:
      model: the environment's `Model` (drawn by `task.reset` at each `reset`).
      state: the current `State`.
    """

    model: Model
    state: State


def device_put_replicated(x, devices):
    """`x` stacked once per device along a new leading axis, one slice on each device.

    What `jax.device_put_replicated` did before JAX 0.10 removed it (Brax 0.14's trainers
    still call it), written with `jax.device_put` and a sharding over `devices`.

    Args:
      x: a pytree of arrays.
      devices: a non-empty sequence of `jax.Device`.

    Returns:
      the pytree with leaves of shape (len(devices), *leaf.shape).
    """
    devices = list(devices)
    if not devices:
        raise ValueError("devices must be a non-empty sequence of jax devices, got []")
    mesh = jax.sharding.Mesh(np.array(devices), ("replica",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("replica"))

    def put(leaf):
        leaf = jnp.asarray(leaf)
        return jax.device_put(jnp.broadcast_to(leaf, (len(devices),) + leaf.shape), sharding)

    return jax.tree.map(put, x)


def _shapes(tree):
    return [(jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)]


class BraxEnv(brax_base.Env):
    """A `brax.envs.Env` that steps a jaxcontact `Task`.

    Args:
      task: the `jaxcontact.control.Task` (scene, reward, episode length, reset, done).
      observe: `observe(model, state) -> (observation_size,)` array, the observation.
      act: `act(model, state, action) -> jc.Control`, the control of one step from an
        action of shape (action_size,) in the scene's dtype; Brax's PPO and SAC emit
        actions in [-1, 1] (tanh-squashed), `act` scales them.
      action_size: the length of the action vector, required: it is what Brax sizes the
        policy's output by, and `act` is an arbitrary function of it, so it cannot be read
        off `act` (checking `act` needs a concrete size to call it with).
      nonfinite_reward: the reward of a step that went non-finite (see the module docstring).

    `observe`, `act`, `task.reward` and `task.done` are checked once here, by tracing them
    on the nominal scene (`jax.eval_shape`: nothing is compiled).

    Example:
      push = jaxcontact.control.tasks.push_task()
      env = BraxEnv(push.task, observe=push.observe, act=push.act,
                    action_size=push.action_size)
      make_policy, params, metrics = brax.training.agents.ppo.train.train(
          env, num_timesteps=100_000, episode_length=push.task.episode_length, ...)
    """

    def __init__(self, task, *, observe, act, action_size, nonfinite_reward=0.0):
        if not isinstance(task, Task):
            raise ValueError(f"task must be a jaxcontact.control.Task, got "
                             f"{type(task).__name__}")
        for name, fn in (("observe", observe), ("act", act)):
            if not callable(fn):
                raise ValueError(f"{name} must be a function, got {fn!r}")
        if (isinstance(action_size, bool) or not isinstance(action_size, numbers.Integral)
                or action_size < 1):
            raise ValueError(f"action_size must be an int >= 1, got {action_size!r}")
        if not np.isscalar(nonfinite_reward) or not np.isfinite(nonfinite_reward):
            raise ValueError(f"nonfinite_reward must be a finite number, got "
                             f"{nonfinite_reward!r}")
        self._task = task
        self._observe_fn = observe
        self._act_fn = act
        self._action_size = int(action_size)
        self._scene_dtype = task.state.pos.dtype
        self._nonfinite_reward = float(nonfinite_reward)
        self._observation_size = self._check()

    # --- checks, by tracing on the nominal scene --------------------------------------------
    def _check(self) -> int:
        """Validate observe, act, reward, done and reset; return the observation size."""
        task = self._task
        model, state = task.model, task.state
        obs = jax.eval_shape(self._observe_fn, model, state)
        if not isinstance(obs, jax.ShapeDtypeStruct) or len(obs.shape) != 1:
            got = obs.shape if isinstance(obs, jax.ShapeDtypeStruct) else type(obs).__name__
            raise ValueError(f"observe must return a 1-D array, got {got}")
        action = jax.ShapeDtypeStruct((self._action_size,), self._scene_dtype)
        control = jax.eval_shape(self._act_fn, model, state, action)
        if not isinstance(control, Control):
            raise ValueError(f"act must return a jc.Control, got {type(control).__name__}")
        n = model.n_body
        for name, shape in (("force", (n, 3)), ("torque", (n, 3)), ("motor", (model.n_motor,))):
            got = jnp.shape(getattr(control, name))
            if got != shape:
                raise ValueError(f"act must return a Control whose {name} has shape {shape}, "
                                 f"got {got} (action_size={self._action_size})")
        reward = jax.eval_shape(task.reward, model, state, control, state)
        if jnp.shape(reward) != ():
            raise ValueError(f"task.reward must return a scalar, got shape {jnp.shape(reward)}")
        if task.done is not None:
            done = jax.eval_shape(task.done, model, state)
            if jnp.shape(done) != ():
                raise ValueError(f"task.done must return a scalar, got shape "
                                 f"{jnp.shape(done)}")
        if task.reset is not None:
            start = jax.eval_shape(task.initial, jax.random.PRNGKey(0))
            nominal = (model, state)
            if (jax.tree.structure(start) != jax.tree.structure(nominal)
                    or _shapes(start) != _shapes(nominal)):
                raise ValueError("task.reset must return (model, state) with the structure, "
                                 "shapes and dtypes of (task.model, task.state)")
        return int(obs.shape[0])

    # --- brax.envs.Env ------------------------------------------------------------------------
    def reset(self, rng: jax.Array) -> brax_base.State:
        """The start of an episode drawn with `rng` (`task.initial`)."""
        model, state = self._task.initial(rng)
        zero = jnp.zeros(())
        metrics = {name: zero for name in METRICS}
        # nothing was solved yet: the start counts as converged
        metrics["converged"] = jnp.ones(())
        return brax_base.State(pipeline_state=Physics(model=model, state=state),
                               obs=self._observe(model, state), reward=zero, done=zero,
                               metrics=metrics, info={})

    def step(self, state: brax_base.State, action: jax.Array) -> brax_base.State:
        """One `jc.step` under `act(model, state, action)`."""
        model, before = state.pipeline_state.model, state.pipeline_state.state
        control = self._act_fn(model, before, jnp.asarray(action).astype(self._scene_dtype))
        if self._task.substeps == 1:
            after, info = _physics_step(model, before, control)
        else:
            after, info = _advance(model, before, control, substeps=self._task.substeps)
        reward = self._task.reward(model, before, control, after)
        obs = self._observe(model, after)
        done = (jnp.zeros((), bool) if self._task.done is None
                else jnp.asarray(self._task.done(model, after)).astype(bool))
        nonfinite = ((info.result == Result.NONFINITE) | ~tree_finite(after)
                     | ~jnp.isfinite(reward) | ~tree_finite(obs))
        # keep the last finite state and observation (see the module docstring); a select,
        # so the finite branch's value is exact
        after = jax.tree.map(lambda old, new: jnp.where(nonfinite, old, new), before, after)
        obs = jnp.where(nonfinite, state.obs, obs)
        brax_float = jnp.zeros(()).dtype
        reward = jnp.where(nonfinite, self._nonfinite_reward, reward).astype(brax_float)
        done = (done | nonfinite).astype(brax_float)
        metrics = {"reward": reward, "residual": info.residual, "iterations": info.iterations,
                   "converged": info.converged, "nonfinite": nonfinite}
        metrics = {name: jnp.asarray(value).astype(brax_float)
                   for name, value in metrics.items()}
        return state.replace(pipeline_state=Physics(model=model, state=after), obs=obs,
                             reward=reward, done=done, metrics=metrics)

    def _observe(self, model: Model, state: State) -> jax.Array:
        return jnp.asarray(self._observe_fn(model, state)).astype(jnp.zeros(()).dtype)

    @property
    def observation_size(self) -> int:
        return self._observation_size

    @property
    def action_size(self) -> int:
        return self._action_size

    @property
    def backend(self) -> str:
        return "jaxcontact"

    @property
    def dt(self) -> jax.Array:
        """Seconds per environment step (the scene's time step x the task's substeps)."""
        return self._task.model.dt * self._task.substeps

    @property
    def task(self) -> Task:
        return self._task

    @property
    def sys(self):
        # Brax's DomainRandomizationVmapWrapper rewrites `env.sys`; say where randomization goes
        raise AttributeError("BraxEnv has no Brax System: randomize the scene in task.reset "
                             "(per episode), not with a Brax randomization_fn")
