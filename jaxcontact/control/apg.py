"""Analytic policy gradients: train a policy by differentiating rollouts of the simulator.

Each update runs a batch of environments (`jax.vmap`) for a window of `window` steps under the
policy, from the states the previous window ended in, and ascends the mean reward per step of
the window by its exact gradient (the implicit gradients of every step, `jc.rollout`). The
state is carried from window to window with its gradient stopped (truncated backpropagation
through time, as in APG and SHAC): memory and the gradient's variance stay bounded however
long the episodes are. An environment whose episode ends (after `Task.episode_length` steps,
or when `Task.done` says so) restarts inside the window from a fresh draw of `Task.reset`
(domain randomization: model and state), so one compiled update serves the whole run and new
draws never recompile.

    result = jc.control.train(task, policy, params, key=jax.random.key(0), updates=200)
    result.params, result.history   # trained parameters, one dict of metrics per update

Where exact gradients mislead, two other gradients plug in: the backward pass smoothed
(`jc.Newton(adjoint=jc.Implicit(smoothing=...))` on the task's model; the simulation stays
exact), or `train(estimator=jc.optim.Estimator(...))`, a randomized-smoothing estimate over
the policy's parameters from perturbed copies of each window.

A run whose loss or gradient becomes non-finite stops, instead of training on: with a
`ValueError` where the policy returned non-finite controls (NaN actions), else with a
`FloatingPointError`; either names the update and what the window's steps reported
(`StepInfo`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxcontact.control import critic as critic_lib
from jaxcontact.control import report
from jaxcontact.control.critic import Critic
from jaxcontact.control.task import Task
from jaxcontact.compiling import jit
from jaxcontact.math import tree_finite
from jaxcontact.optim.estimators import Estimator
from jaxcontact.step import policy_control
from jaxcontact.types import Result


@dataclasses.dataclass
class TrainResult:
    """What `train` returns.

    Attributes:
      params: the trained policy parameters.
      history: one dict per update: `reward` (mean reward per step of the window, over the
        batch), `objective` (what the update ascends: `reward`, or with a critic the
        discounted rewards and end values per step), `grad_norm` (before clipping),
        `converged` (fraction of steps whose solve converged), `max_residual`, `episode_return` (mean return of the episodes that ended
        in the window; NaN if none did), `episodes` (how many ended), `seconds` (wall time
        since the start, compilation included); with a critic also `critic_loss` (its
        last fit's mean squared error) and `value` (mean V of the window's end states).
      first_update_seconds: wall time of the first update, its compilation included (unless
        a run of the same task, policy and settings compiled it before: then it is cached).
      opt_state: the optimizer's state at the end (to continue training).
      critic_state: with a critic, its (parameters, optimizer state) at the end (to continue
        training, or to read the learned values); else None.
    """

    params: Any
    history: list
    first_update_seconds: float
    opt_state: Any = None
    critic_state: Any = None


def _check_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _select(flag, new, old):
    """Per environment: new where flag, else old (flag has the batch axis only)."""
    def pick(a, b):
        mask = jnp.reshape(flag, flag.shape + (1,) * (a.ndim - flag.ndim))
        return jnp.where(jnp.broadcast_to(mask, a.shape), a, b)
    return jax.tree.map(pick, new, old)


def _start(task, scene, keys):
    """Fresh episodes: (models, states) drawn for each key (batch axis first)."""
    return jax.vmap(lambda k: task.initial(scene, k))(keys)


def _window(task, scene, policy, params, carry, window, stochastic, critic=None,
            critic_params=None):
    """Run `window` steps of every environment under the policy.

    carry: (models, states, t (B,) steps into the episode, returns (B,) the episode's return
    so far, key). Returns (new carry, per-step metrics with leading axes (window, B)); with
    a `critic`, also V of each step's end state (before a restart, V's parameters fixed)
    and the critic's observation of each step's start state."""
    batch = carry[2].shape[0]

    def env_step(model, state, t, ret, key):
        key_policy, key_reset = jax.random.split(key)
        control = policy_control(policy, params, state, model,
                                 key_policy if stochastic else None)
        new, info = task.advance(model, state, control)
        reward = task.reward(model, state, control, new)
        finite_control = tree_finite(control)
        ret = ret + reward
        t = t + 1
        terminated = jnp.zeros((), bool)
        if task.done is not None:
            terminated = jnp.asarray(task.done(model, new), bool)
        ended = (t >= task.episode_length) | terminated
        out = {"reward": reward, "converged": info.converged,
               "residual": info.residual, "nonfinite": info.result == Result.NONFINITE,
               "finite_control": finite_control, "ended": ended, "terminated": terminated,
               "episode_return": ret}
        if critic is not None:
            out["next_value"] = critic.value(jax.lax.stop_gradient(critic_params), new)
            out["observation"] = jax.lax.stop_gradient(critic.observation(state))
        fresh_model, fresh_state = task.initial(scene, key_reset)
        model, new = _select(ended, (fresh_model, fresh_state), (model, new))
        return model, new, jnp.where(ended, 0, t), jnp.where(ended, 0.0, ret), out

    def body(c, _):
        models, states, t, ret, key = c
        key, sub = jax.random.split(key)
        keys = jax.random.split(sub, batch)
        models, states, t, ret, out = jax.vmap(env_step)(models, states, t, ret, keys)
        return (models, states, t, ret, key), out

    return jax.lax.scan(body, carry, None, length=window)


DEFAULT_OPTIMIZER = optax.adam(1e-3)   # one object: runs with the default share programs


def _clipped(optimizer, clip):
    if clip is None:
        return optimizer
    return optax.chain(optax.clip_by_global_norm(clip), optimizer)


def _loss(params, scene, carry, task, policy, window, stochastic, critic, critic_params):
    """Minus the window's objective: the mean reward per step, or with a critic the
    discounted rewards and end values (`critic.window_objective`) per step of the window."""
    carry = jax.lax.stop_gradient(carry)   # truncation: no gradient into earlier windows
    carry, out = _window(task, scene, policy, params, carry, window, stochastic, critic,
                         critic_params)
    if critic is None:
        return -jnp.mean(out["reward"]), (carry, out)
    objective = critic_lib.window_objective(out["reward"], out["next_value"], out["ended"],
                                            out["terminated"], critic.discount)
    return -jnp.mean(objective) / window, (carry, out)


# one compiled program per task's functions, policy and settings: a second run of the same
# task (another key, other initial parameters) reuses it
@partial(jit, static_argnames=("task", "policy", "window", "stochastic", "optimizer",
                                   "clip", "critic", "estimator"))
def _update(scene, params, opt_state, carry, critic_state, *, task, policy, window, stochastic,
            optimizer, clip, critic, estimator=None):
    """One update: a window of every environment, the gradient of its objective (or, with an
    `estimator`, its estimate from perturbed copies of the same window), one optimizer step
    (and with a critic, its fit to the window's TD(λ) targets). Returns (params, opt_state,
    carry, critic_state, metrics)."""
    critic_params = None if critic is None else critic_state[0]
    rest = (scene, carry, task, policy, window, stochastic, critic, critic_params)
    if estimator is None:
        (value, (carry, out)), grads = jax.value_and_grad(_loss, has_aux=True)(params, *rest)
    else:
        # every sample runs the window from the same environments with the same keys
        # (common random numbers); the unperturbed window carries the environments on
        value, (new_carry, out) = _loss(params, *rest)
        _, grads, _ = estimator(lambda p: _loss(p, *rest)[0], params,
                                jax.random.fold_in(carry[4], 1), value=value)
        carry = new_carry
    norm = optax.tree.norm(grads)
    changes, opt_state = _clipped(optimizer, clip).update(grads, opt_state, params)
    ended = out["ended"]
    count = jnp.sum(ended)
    metrics = {
        "reward": jnp.mean(out["reward"]), "objective": -value, "grad_norm": norm,
        "converged": jnp.mean(out["converged"]),
        "max_residual": jnp.max(out["residual"]),
        "episode_return": jnp.where(count > 0, jnp.sum(
            jnp.where(ended, out["episode_return"], 0.0)) / jnp.maximum(count, 1), jnp.nan),
        "episodes": count,
        "nonfinite_steps": jnp.sum(out["nonfinite"]),
        "nonfinite_controls": jnp.sum(~out["finite_control"]),
        "first_nonfinite_control": jnp.argmax(~jnp.all(out["finite_control"], axis=1)),
    }
    ok = jnp.isfinite(value) & jnp.isfinite(norm)
    # a failed update leaves the parameters as they were (the caller stops)
    params = jax.tree.map(lambda new, old: jnp.where(ok, new, old),
                          optax.apply_updates(params, changes), params)
    if critic is not None:
        targets = critic_lib.td_lambda_targets(out["reward"], out["next_value"], out["ended"],
                                               out["terminated"], critic.discount, critic.lam)
        obs = out["observation"]
        critic_params, critic_opt, critic_loss = critic_lib.fit(
            critic, critic_params, critic_state[1], jnp.reshape(obs, (-1, obs.shape[-1])),
            jnp.reshape(targets, (-1,)))
        critic_state = (critic_params, critic_opt)
        metrics["critic_loss"] = critic_loss
        metrics["value"] = jnp.mean(out["next_value"])
    return params, opt_state, carry, critic_state, metrics


def train(task: Task, policy, params, *, key, updates: int = 100, batch: int = 32,
          window: int | None = None, optimizer=None, clip: float | None = 1.0,
          stochastic: bool = False, opt_state=None, critic: Critic | None = None,
          critic_state=None, estimator=None, log: str | None = None,
          plot: str | None = None, progress: bool = True) -> TrainResult:
    """Train `policy` on `task` by analytic policy gradients (module docstring).

    Args:
      task: a `jaxcontact.control.Task`.
      policy: `policy(params, state) -> jc.Control` (with `stochastic`:
        `policy(params, state, key)`, a fresh key per step); e.g. a
        `jaxcontact.control.MLPPolicy`.
      params: the initial policy parameters (any pytree of arrays).
      key: a `jax.random` key: resets, and the policy's noise.
      updates: gradient updates, an int >= 1.
      batch: environments run in parallel (`vmap`), an int >= 1.
      window: steps per update (the truncation length); default: the episode length.
      optimizer: an `optax.GradientTransformation`; default `optax.adam(1e-3)`. The compiled
        update is cached by the task's functions, the policy, the optimizer object and the
        settings: pass the same objects to reuse it.
      clip: clip the gradient to this global norm before the optimizer (None: no clipping);
        contact makes single gradients large now and then.
      stochastic: call the policy with a key.
      opt_state: the optimizer state to continue from (`TrainResult.opt_state` of an
        earlier run with the same optimizer and clip, to train on in chunks); default: a
        fresh one. The environments always start new episodes.
      critic: a `jaxcontact.control.Critic`: close each window with a learned value and
        train it alongside (`jaxcontact.control.critic`; for tasks whose episodes end early
        by `done`, where windows alone learn to throw the future away); None: ascend the
        window's mean reward.
      critic_state: the critic's (parameters, optimizer state) to continue from
        (`TrainResult.critic_state`); default: fresh ones drawn from `key`.
      estimator: a `jc.optim.Estimator`: each update's gradient is its estimate over the
        policy's flattened parameters (σ in their units; N perturbed copies of the window,
        `Estimator.simulations` = N + 1 windows an update) instead of the exact gradient (issue 66: for losses whose
        exact gradients mislead; a zeroth-order estimate over thousands of parameters is
        noisy, as evolution strategies are). None (default): exact gradients.
      log: write the run (settings, history, timings) as JSON to this path.
      plot: write the learning curve (PNG, needs matplotlib) to this path.
      progress: show a progress bar on standard error.

    Returns:
      A `TrainResult`.

    Raises:
      ValueError: bad settings (named, with the value), a policy returning anything but a
        `Control` of the model's shapes, or a policy returning non-finite controls (NaN
        actions; the message names the update and the step of the window).
      FloatingPointError: the loss or the gradient became non-finite otherwise; the message
        names the update and what the window's steps reported (solver results).
    """
    if not isinstance(task, Task):
        raise ValueError(f"task must be a jaxcontact.control.Task, got {type(task).__name__}")
    if not callable(policy):
        raise ValueError(f"policy must be a function policy(params, state), got {policy!r}")
    updates = _check_int("updates", updates)
    batch = _check_int("batch", batch)
    window = task.episode_length if window is None else _check_int("window", window)
    if clip is not None and not (isinstance(clip, numbers.Real) and not isinstance(clip, bool)
                                 and math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a positive number or None, got {clip!r}")
    if not isinstance(stochastic, bool):
        raise ValueError(f"stochastic must be a bool, got {stochastic!r}")
    if estimator is not None and not isinstance(estimator, Estimator):
        raise ValueError(f"estimator must be a jc.optim.Estimator or None, got {estimator!r}")
    optimizer = DEFAULT_OPTIMIZER if optimizer is None else optimizer
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, got {optimizer!r}")

    if critic is not None and not isinstance(critic, Critic):
        raise ValueError(f"critic must be a jaxcontact.control.Critic or None, got {critic!r}")
    if critic is None and critic_state is not None:
        raise ValueError("critic_state was given without a critic")

    rules, scene = task.rules(), (task.model, task.state)
    key, start = jax.random.split(key)
    if critic is not None and critic_state is None:
        key, init = jax.random.split(key)
        critic_state = critic.init(init, task.state)
    models, states = _start(rules, scene, jax.random.split(start, batch))
    zeros = jnp.zeros((batch,), jnp.int32)
    carry = (models, states, zeros, jnp.zeros((batch,), states.pos.dtype), key)
    if opt_state is None:
        opt_state = _clipped(optimizer, clip).init(params)
    statics = dict(task=rules, policy=policy, window=window, stochastic=stochastic,
                   optimizer=optimizer, clip=clip, critic=critic, estimator=estimator)
    t0 = time.perf_counter()
    bar = report.Progress(updates, enabled=progress)
    first_update_seconds = math.nan
    history = []
    settings = {"updates": updates, "batch": batch, "window": window, "clip": clip,
                "episode_length": task.episode_length, "stochastic": stochastic,
                "estimator": None if estimator is None else repr(estimator)}
    if critic is not None:
        settings["critic"] = {"hidden": list(critic.hidden), "discount": critic.discount,
                              "lam": critic.lam, "iterations": critic.iterations}
    try:
        for k in range(updates):
            params, opt_state, carry, critic_state, metrics = _update(
                scene, params, opt_state, carry, critic_state, **statics)
            row = {name: float(v) for name, v in metrics.items()}
            row["seconds"] = time.perf_counter() - t0
            history.append(row)
            if k == 0:
                first_update_seconds = row["seconds"]
            if not (math.isfinite(row["objective"]) and math.isfinite(row["grad_norm"])):
                # NaN actions are bad input from the policy; anything else is the run's
                error = ValueError if row["nonfinite_controls"] else FloatingPointError
                raise error(_failure(k, row, window, batch))
            bar.update(k + 1, row)
    finally:
        bar.close()
        if log is not None:
            report.write_log(log, settings, history, first_update_seconds)
        if plot is not None and history:
            report.plot_curve(plot, history)
    return TrainResult(params=params, history=history, first_update_seconds=first_update_seconds,
                       opt_state=opt_state, critic_state=critic_state)


def _failure(k, row, window, batch):
    what = "loss" if not math.isfinite(row["objective"]) else "gradient"
    parts = [f"the {what} became non-finite at update {k} (window of {window} steps x "
             f"{batch} environments)"]
    if row["nonfinite_controls"]:
        parts.append(f"the policy returned non-finite controls in {int(row['nonfinite_controls'])}"
                     f" environment-steps (first at step {int(row['first_nonfinite_control'])} "
                     "of the window)")
    if row["nonfinite_steps"]:
        parts.append(f"{int(row['nonfinite_steps'])} steps ended with non-finite values "
                     "(StepInfo.result NONFINITE)")
    parts.append(f"StepInfo over the window: {100 * row['converged']:.1f} % of steps converged, "
                 f"largest residual {row['max_residual']:.3g}")
    return "; ".join(parts)


def evaluate(task: Task, policy, params, *, key, batch: int = 32, stochastic=False):
    """Mean return of `batch` whole episodes from fresh draws of `task.reset`, and the fraction
    of their steps that converged: (return, converged). Episodes that end early (`done`)
    count the reward up to their end."""
    batch = _check_int("batch", batch)
    value, converged = _evaluate((task.model, task.state), params, key, task=task.rules(),
                                 policy=policy, batch=batch, stochastic=stochastic)
    return float(value), float(converged)


@partial(jit, static_argnames=("task", "policy", "batch", "stochastic"))
def _evaluate(scene, params, key, *, task, policy, batch, stochastic):
    key, start = jax.random.split(key)
    models, states = _start(task, scene, jax.random.split(start, batch))

    def env(model, state, key):
        def body(c, k):
            state, alive = c
            control = policy_control(policy, params, state, model, k if stochastic else None)
            new, info = task.advance(model, state, control)
            reward = jnp.where(alive, task.reward(model, state, control, new), 0.0)
            if task.done is not None:
                alive = alive & ~jnp.asarray(task.done(model, new), bool)
            return (new, alive), (reward, info.converged)

        keys = jax.random.split(key, task.episode_length)
        _, (rewards, converged) = jax.lax.scan(body, (state, jnp.ones((), bool)), keys)
        return jnp.sum(rewards), jnp.mean(converged)

    returns, converged = jax.vmap(env)(models, states, jax.random.split(key, batch))
    return jnp.mean(returns), jnp.mean(converged)
