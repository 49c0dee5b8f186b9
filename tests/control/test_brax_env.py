"""Tests of the Brax environment adapter (`jaxcontact.control.brax_env`).

- One jitted program (module fixture) runs the push task through Brax's training wrappers
  (`brax.envs.wrappers.training.wrap`: vmap, episode counter, auto-reset) for two
  environments and, next to every step, the same step by `jc.step` under the mapped control:
  the adapter's states, observations and rewards equal the direct ones, episodes restart
  after `episode_length` steps with each environment's own randomized model, and a step fed a
  NaN action ends its episode and is counted in the metrics.
- Sizes and input checks trace the user's functions only (nothing compiles).
- Slow: a few PPO iterations (`brax.training.agents.ppo.train`) improve the evaluation reward.

Compilation dominates: the fixture's program holds the step twice (the wrapped environment
and the reference), and the scenes use the `Descent` solver, whose step compiles in about 60%
of the time of `Newton`'s; the adapter is the same for every solver. Descent needs up to ~150
iterations on these steps (Newton 1-3), hence its cap of 200.
"""

import importlib
import sys
import time

import numpy as np
import pytest

pytest.importorskip("brax", reason="the Brax adapter needs the rl extra: pip install -e '.[rl]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from brax.envs.wrappers import training as brax_wrappers  # noqa: E402

import jaxcontact as jc  # noqa: E402
from jaxcontact.control import Task  # noqa: E402
from jaxcontact.control import brax_env  # noqa: E402
from jaxcontact.control.brax_env import BraxEnv  # noqa: E402
from jaxcontact.control.tasks import push_task  # noqa: E402

EPISODE = 3     # steps per episode in the wrapped run
STEPS = 7       # wrapped steps: episodes end after steps 3 and 6 (1-based)
NAN_STEP = 3    # 0-based step at which environment 1 gets a NaN action
NAN_REWARD = -7.0
SOLVER = jc.Descent(iterations=200)
# the adapter and the reference are the same float64 operations compiled twice in one
# program: XLA may fuse them differently, so the last bits may differ (positions ~0.5 m,
# float64 rounding ~1e-16 of that; they agree exactly today)
_TOL = 1e-12
_SOLVE_TOL = 1e-9   # what two separately compiled solves of one step agree to (Descent, tol 1e-10)


def _push(**kw):
    return push_task(solver=SOLVER, episode_length=EPISODE, **kw)


@pytest.fixture(scope="module")
def run():
    push = _push()
    env = BraxEnv(push.task, observe=push.observe, act=push.act,
                  action_size=push.action_size, nonfinite_reward=NAN_REWARD)
    wrapped = brax_wrappers.wrap(env, episode_length=EPISODE)

    # the reference is jc.step itself; jitted, its trace is the one the adapter's step made
    # (jit caches traces per function), and only XLA compiles it twice
    def reference(physics, action):
        model, state = physics.model, physics.state
        control = push.act(model, state, action)
        after, info = jax.jit(jc.step)(model, state, control)
        return after, push.task.reward(model, state, control, after), info

    def program(keys, actions):
        first = wrapped.reset(keys)

        def body(s, action):
            after = wrapped.step(s, action)
            return after, (s.pipeline_state, after, jax.vmap(reference)(s.pipeline_state, action))

        _, (before, after, ref) = jax.lax.scan(body, first, actions)
        starts = jax.vmap(push.task.initial)(keys)
        start_obs = jax.vmap(push.observe)(*starts)
        return first, before, after, ref, starts, start_obs

    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    actions = jnp.tile(jnp.array([[0.8, -0.4], [-1.0, 0.6]]), (STEPS, 1, 1))
    actions = actions.at[NAN_STEP, 1, 0].set(jnp.nan)
    first, before, after, ref, starts, start_obs = jax.jit(program)(keys, actions)
    return {"push": push, "env": env, "first": first, "before": before, "after": after,
            "ref": ref, "starts": starts, "start_obs": start_obs}


def _close(name, got, want, tol=_TOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=name)


def test_reset_draws_task_initial(run):
    """reset: the pipeline holds task.initial(key)'s model and state, per environment."""
    first, (models, states) = run["first"], run["starts"]
    _close("pos", first.pipeline_state.state.pos, states.pos, 0.0)
    _close("mass", first.pipeline_state.model.body.mass, models.body.mass, 0.0)
    mass = np.asarray(models.body.mass)[:, 0]
    assert mass[0] != mass[1], f"the two environments drew the same mass {mass}"
    _close("obs", first.obs, run["start_obs"], 0.0)
    _close("reward", first.reward, np.zeros(2), 0.0)
    _close("done", first.done, np.zeros(2), 0.0)
    assert set(brax_env.METRICS) <= set(first.metrics), sorted(first.metrics)


def test_step_is_jc_step(run):
    """Every finite step that did not restart is jc.step under act(action), with task.reward."""
    after, (ref_state, ref_reward, ref_info) = run["after"], run["ref"]
    done = np.asarray(after.done)
    plain = done == 0
    assert plain.sum() == STEPS * 2 - 5, f"done pattern {done.T}"
    for field in ("pos", "quat", "vel", "ang_vel", "time"):
        _close(field, np.asarray(getattr(after.pipeline_state.state, field))[plain],
               np.asarray(getattr(ref_state, field))[plain])
    observe = jax.vmap(jax.vmap(run["push"].observe))
    _close("obs", np.asarray(after.obs)[plain],
           np.asarray(observe(after.pipeline_state.model, ref_state))[plain])
    finite = np.ones_like(plain)
    finite[NAN_STEP, 1] = False
    # the reward is the step's, also on the steps that end an episode
    # (on the steps that end an episode the two programs' solves agree within the solver's
    # tolerance, 1e-10 m/s, not to the last digits: their states are not compared above)
    _close("reward", np.asarray(after.reward)[finite], np.asarray(ref_reward)[finite],
           _SOLVE_TOL)
    _close("metrics.reward", after.metrics["reward"], after.reward, 0.0)
    _close("metrics.residual", np.asarray(after.metrics["residual"])[finite],
           np.asarray(ref_info.residual)[finite], _SOLVE_TOL)
    _close("metrics.converged", np.asarray(after.metrics["converged"])[finite],
           np.asarray(ref_info.converged)[finite], 0.0)
    # iteration counts: Descent's path through friction's stick/slip switches follows the
    # rounding of the program it is compiled into, so only where the states were compared
    _close("metrics.iterations", np.asarray(after.metrics["iterations"])[plain],
           np.asarray(ref_info.iterations)[plain], 0.0)
    assert np.all(np.asarray(ref_info.converged)[finite]), "a step did not converge"
    # the ball moved: the comparison is not between two resting states
    moved = np.abs(np.asarray(ref_state.pos - run["before"].state.pos))[plain]
    assert moved.max() > 1e-3, moved.max()


def test_autoreset_restarts_after_episode_length(run):
    """Through brax's `wrap`: done after EPISODE steps, and the next state is the episode's
    start (model and state), not the physics' next state."""
    after, (ref_state, _, _) = run["after"], run["ref"]
    first = run["first"].pipeline_state
    done = np.asarray(after.done)
    expected = np.zeros((STEPS, 2))
    expected[[EPISODE - 1, 2 * EPISODE - 1], 0] = 1       # environment 0: by length
    expected[[EPISODE - 1, NAN_STEP, NAN_STEP + EPISODE], 1] = 1  # 1: length, NaN, length
    _close("done", done, expected, 0.0)
    steps = np.asarray(after.info["steps"])
    assert steps[EPISODE - 1, 0] == EPISODE and steps[EPISODE, 0] == 1, steps.T
    for t, e in zip(*np.nonzero(expected)):
        _close(f"pos at restart {t, e}", after.pipeline_state.state.pos[t, e],
               first.state.pos[e], 0.0)
        _close(f"vel at restart {t, e}", after.pipeline_state.state.vel[t, e],
               first.state.vel[e], 0.0)
    # the restart replaced a state that had moved, and kept each environment's own model
    _close("model kept", after.pipeline_state.model.body.mass,
           np.broadcast_to(np.asarray(first.model.body.mass)[None], (STEPS, 2, 1)), 0.0)
    gap = np.abs(np.asarray(ref_state.pos[EPISODE - 1, 0] - first.state.pos[0])).max()
    assert gap > 1e-3, f"the episode's last state is its start (gap {gap})"


def test_nonfinite_step_ends_episode_and_is_counted(run):
    """A NaN action makes the physics non-finite (jc.step reports it: `Result.NONFINITE`, its
    last finite iterate kept): done, metrics['nonfinite'] = 1, the set reward, and nothing
    non-finite in what Brax sees."""
    after, (_, _, ref_info) = run["after"], run["ref"]
    assert int(ref_info.result[NAN_STEP, 1]) == int(jc.Result.NONFINITE), \
        "the NaN action did not make jc.step non-finite: the test checks nothing"
    flags = np.asarray(after.metrics["nonfinite"])
    expected = np.zeros((STEPS, 2))
    expected[NAN_STEP, 1] = 1
    _close("metrics.nonfinite", flags, expected, 0.0)
    assert after.done[NAN_STEP, 1] == 1
    assert after.reward[NAN_STEP, 1] == NAN_REWARD
    for name, leaf in (("obs", after.obs), ("reward", after.reward),
                       ("pos", after.pipeline_state.state.pos)):
        assert np.all(np.isfinite(np.asarray(leaf))), f"{name} is not finite"


def test_sizes_dtypes_and_backend(run):
    env = run["env"]
    assert (env.observation_size, env.action_size, env.backend) == (4, 2, "jaxcontact")
    after = run["after"]
    default = jnp.zeros(()).dtype        # what brax's wrappers count in (float64 here)
    for name, leaf in (("obs", after.obs), ("reward", after.reward), ("done", after.done),
                       *((f"metrics.{k}", v) for k, v in after.metrics.items())):
        assert leaf.dtype == default, f"{name}: {leaf.dtype}"
    assert after.obs.shape == (STEPS, 2, env.observation_size)
    assert after.pipeline_state.state.pos.dtype == run["push"].task.state.pos.dtype
    with pytest.raises(AttributeError, match="task.reset"):
        env.sys  # noqa: B018  (Brax's domain randomization wrapper reads it)


# --- input checks (tracing only) ------------------------------------------------------------

def _bad_control(model, state, action):
    return jc.Control.zeros(2, 0)


def _check_error(match, **changes):
    push = _push()
    kw = dict(observe=push.observe, act=push.act, action_size=2)
    kw.update(changes)
    with pytest.raises(ValueError, match=match):
        BraxEnv(kw.pop("task", push.task), **kw)


@pytest.mark.parametrize("changes, match", [
    (dict(observe="obs"), r"observe must be a function, got 'obs'"),
    (dict(act=None), r"act must be a function, got None"),
    (dict(action_size=0), r"action_size must be an int >= 1, got 0"),
    (dict(action_size=True), r"action_size must be an int >= 1, got True"),
    (dict(task="push"), r"task must be a jaxcontact.control.Task, got str"),
    (dict(observe=lambda m, s: s.pos), r"observe must return a 1-D array, got \(1, 3\)"),
    (dict(act=_bad_control), r"force has shape \(1, 3\), got \(2, 3\)"),
    (dict(act=lambda m, s, a: a), r"act must return a jc.Control, got"),
    (dict(nonfinite_reward=float("nan")), r"nonfinite_reward must be a finite number"),
])
def test_bad_inputs_raise(changes, match):
    _check_error(match, **changes)


def test_bad_task_functions_raise():
    push = _push()
    task = push.task

    def reset_grows(model, state, key):
        return model, state.replace(pos=jnp.zeros((2, 3)))

    bad_reset = Task(task.model, task.state, task.reward, EPISODE, reset=reset_grows)
    bad_reward = Task(task.model, task.state, lambda m, s, c, n: n.pos[:, 0], EPISODE)
    for t, match in ((bad_reset, "task.reset must return"),
                     (bad_reward, r"task.reward must return a scalar, got shape \(1,\)")):
        _check_error(match, task=t)


@pytest.mark.parametrize("kw, match", [
    (dict(mass_range=(0.0, 1.0)), r"mass_range must be \(low, high\) with 0 < low <= high"),
    (dict(start_range=-0.1), r"start_range must be >= 0, got -0.1"),
    (dict(max_force=0.0), r"max_force must be > 0, got 0.0"),
    (dict(target=(0.0, 0.0, 0.0)), r"target must be a 2-vector, got \(0.0, 0.0, 0.0\)"),
])
def test_push_task_bad_inputs_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        push_task(**kw)


def test_missing_brax_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "brax.envs", None)   # import of brax.envs fails
    monkeypatch.delitem(sys.modules, "jaxcontact.control.brax_env")
    with pytest.raises(ImportError, match=r'pip install -e "\.\[rl\]"'):
        importlib.import_module("jaxcontact.control.brax_env")


def test_device_put_replicated():
    tree = {"a": jnp.arange(3.0), "b": jnp.asarray(2, jnp.int32)}
    out = brax_env.device_put_replicated(tree, jax.local_devices()[:1])
    _close("a", out["a"], np.arange(3.0)[None], 0.0)
    assert out["b"].shape == (1,) and out["b"].dtype == jnp.int32
    with pytest.raises(ValueError, match="devices must be a non-empty sequence"):
        brax_env.device_put_replicated(tree, [])


# --- slow: Brax's PPO learns the push task ----------------------------------------------------

@pytest.mark.slow
def test_ppo_improves_push_reward(monkeypatch):
    """A few PPO iterations (8k environment steps) on the push task raise the deterministic
    evaluation return (64 episodes from random starts) by at least a fifth."""
    import functools

    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo

    # Brax 0.14 calls jax.device_put_replicated, gone from JAX 0.10
    monkeypatch.setattr(jax, "device_put_replicated", brax_env.device_put_replicated,
                        raising=False)
    push = push_task(solver=SOLVER)
    env = BraxEnv(push.task, observe=push.observe, act=push.act, action_size=push.action_size)
    returns = []
    start = time.perf_counter()
    networks = functools.partial(ppo_networks.make_ppo_networks,
                                 policy_hidden_layer_sizes=(32, 32),
                                 value_hidden_layer_sizes=(32, 32))
    # Brax's networks and normalizer broadcast implicitly; our suite raises on that
    with jax.numpy_rank_promotion("allow"):
        ppo.train(env, num_timesteps=8000, num_evals=2, episode_length=push.task.episode_length,
                  num_envs=16, batch_size=16, num_minibatches=4, unroll_length=10,
                  num_updates_per_batch=8, learning_rate=1e-2, entropy_cost=1e-3,
                  discounting=0.9, normalize_observations=True, network_factory=networks,
                  num_eval_envs=64, deterministic_eval=True, seed=0,
                  progress_fn=lambda step, m: returns.append(float(m["eval/episode_reward"])))
    seconds = time.perf_counter() - start
    print(f"PPO on the push task: eval return {returns[0]:.2f} -> {returns[-1]:.2f} "
          f"in {seconds:.0f} s")
    assert len(returns) == 2, returns
    before, after = returns
    assert np.isfinite(after) and after > before + 0.2 * abs(before), (before, after, seconds)
