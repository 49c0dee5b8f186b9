"""Training policies by analytic policy gradients (`jaxcontact.control.train`,
jaxcontact/control/apg.py): training through the simulator improves the return (and does
better on new draws, slow), stops on a policy's NaN actions, checks its settings, and
continues from an optimizer state.

Training runs on a body in free flight, whose step compiles in a few seconds, so that the
trainer's own logic (windows, resets, clipping, failure reports) is what is tested. (Policies
in the loop through contact: tests/test_step_closed_loop.py.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
import pytest

import jaxcontact as jc
from jaxcontact import control

GOAL = jnp.asarray([0.2, -0.1, 0.0])
TRACES = {"reward": 0}


def _reach_task(length=10):
    scene = jc.Scene(dt=0.05, gravity=(0.0, 0.0, 0.0))
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.0))
    model, state = scene.build()

    def reward(m, s, c, nxt):
        TRACES["reward"] += 1                      # counts traces, not calls
        return -jnp.sum((nxt.pos[0] - GOAL) ** 2) - 1e-4 * jnp.sum(c.force ** 2)

    def reset(m, s, key):
        start = jax.random.uniform(key, (1, 3), s.pos.dtype, -0.1, 0.1)
        return m.replace(body=m.body.replace(mass=m.body.mass * jax.random.uniform(
            jax.random.fold_in(key, 1), (1,), s.pos.dtype, 0.5, 2.0))), s.replace(pos=start)

    return control.Task(model, state, reward=reward, episode_length=length, reset=reset)


def _force_policy(scale=5.0):
    return control.MLPPolicy(
        observe=lambda s: jnp.concatenate([jc.observe.positions(s, relative_to=GOAL),
                                           jc.observe.velocities(s)[:3]]),
        act=lambda a, s: jc.Control(force=scale * a[None, :], torque=jnp.zeros((1, 3)),
                                    motor=jnp.zeros((0,))),
        action_size=3, hidden=(16,))


# the training tests share one task, policy and optimizer object: one compiled update
OPTIMIZER = optax.adam(1e-2)


@pytest.fixture(scope="module")
def reach():
    task, policy = _reach_task(), _force_policy()
    return task, policy, policy.init(jax.random.key(0), task.state)


def test_training_through_the_simulator_improves_the_return(reach, tmp_path, capsys):
    task, policy, params = reach
    TRACES["reward"] = 0
    result = control.train(task, policy, params, key=jax.random.key(1), updates=40, batch=8,
                           window=5, optimizer=OPTIMIZER, log=tmp_path / "run.json")
    history = result.history
    assert len(history) == 40
    # windows of 5 steps, episodes of 10: every second window ends every episode (resets with
    # new masses and starts happen inside the compiled update)
    assert [row["episodes"] for row in history[:4]] == [0.0, 8.0, 0.0, 8.0]
    returns = [row["episode_return"] for row in history if row["episodes"]]
    first, last = np.mean(returns[:3]), np.mean(returns[-3:])
    assert last > 0.6 * first, returns          # returns are negative: closer to 0 is better
    assert all(row["converged"] == 1.0 and np.isfinite(row["grad_norm"]) for row in history)
    # 40 updates, one compiled program: the reward was traced a fixed number of times,
    # however many updates and resets ran
    assert TRACES["reward"] <= 2, TRACES
    import json
    log = json.loads((tmp_path / "run.json").read_text())
    assert len(log["history"]) == 40 and log["settings"]["window"] == 5
    assert log["first_update_seconds"] > 0
    assert "update 40/40" in capsys.readouterr().err


@pytest.mark.slow  # CI: the training history above shows the same improvement
def test_a_trained_policy_does_better_on_new_draws(reach):
    task, policy, params = reach
    before, _ = control.evaluate(task, policy, params, key=jax.random.key(9), batch=16)
    result = control.train(task, policy, params, key=jax.random.key(1), updates=40, batch=8,
                           window=5, optimizer=OPTIMIZER, progress=False)
    after, converged = control.evaluate(task, policy, result.params, key=jax.random.key(9),
                                        batch=16)
    assert after > 0.6 * before, (before, after)
    assert converged == 1.0


def test_training_stops_when_the_policy_returns_nan_actions(reach):
    task, policy, params = reach
    # the same program as above (the same task, policy, optimizer and settings): the NaN
    # comes from the parameters
    bad = jax.tree.map(lambda x: jnp.full_like(x, jnp.nan), params)
    with pytest.raises(ValueError, match=r"non-finite at update 0 .*non-finite controls"):
        control.train(task, policy, bad, key=jax.random.key(1), updates=3, batch=8, window=5,
                      optimizer=OPTIMIZER, progress=False)


def test_training_settings_are_checked(reach):
    task, policy, params = reach
    for bad, name in ((dict(updates=0), "updates"), (dict(batch=1.5), "batch"),
                      (dict(window=-1), "window"), (dict(clip=-1.0), "clip"),
                      (dict(optimizer="adam"), "optimizer"), (dict(stochastic=1), "stochastic")):
        with pytest.raises(ValueError, match=name):
            control.train(task, policy, params, key=jax.random.key(0), **bad)
    with pytest.raises(ValueError, match="episode_length"):
        control.Task(task.model, task.state, reward=task.reward, episode_length=0)
    with pytest.raises(ValueError, match="reward"):
        control.Task(task.model, task.state, reward=None, episode_length=3)
    with pytest.raises(ValueError, match="action_size"):
        control.MLPPolicy(observe=lambda s: s.pos, act=lambda a, s: None, action_size=0)
    with pytest.raises(ValueError, match="observe must return a 1-D array"):
        control.MLPPolicy(observe=lambda s: s.pos, act=lambda a, s: None,
                          action_size=1).init(jax.random.key(0), task.state)


def test_training_continues_from_an_optimizer_state(reach):
    task, policy, params = reach
    # the same compiled program as above; Adam's step count carries over from run to run
    first = control.train(task, policy, params, key=jax.random.key(1), updates=2, batch=8,
                          window=5, optimizer=OPTIMIZER, progress=False)
    more = control.train(task, policy, first.params, key=jax.random.key(2), updates=1,
                         batch=8, window=5, optimizer=OPTIMIZER, opt_state=first.opt_state,
                         progress=False)
    count = optax.tree.get(more.opt_state, "count")
    assert int(count) == 3
    fresh = control.train(task, policy, first.params, key=jax.random.key(2), updates=1,
                          batch=8, window=5, optimizer=OPTIMIZER, progress=False)
    assert int(optax.tree.get(fresh.opt_state, "count")) == 1
    # Adam's bias correction differs at step 3 and step 1: the updates differ
    assert not np.allclose(ravel_pytree(more.params)[0],
                           ravel_pytree(fresh.params)[0])


def test_an_estimator_gives_the_updates_of_its_gradient(reach):
    """`train(estimator=...)`: a first-order estimator with σ = 1e-9 averages exact gradients
    at the parameters themselves, so its updates are the exact ones (Adam, to its rounding);
    a zeroth-order one differs, and both report the same windows' rewards."""
    task, policy, params = reach
    runs = {name: control.train(task, policy, params, key=jax.random.key(1), updates=2,
                                batch=8, window=5, optimizer=OPTIMIZER, progress=False,
                                estimator=estimator)
            for name, estimator in (
                ("exact", None), ("first", jc.optim.Estimator("first", sigma=1e-9, samples=2)),
                ("zeroth", jc.optim.Estimator("zeroth", sigma=1e-2, samples=4)))}
    flat = {name: ravel_pytree(run.params)[0] for name, run in runs.items()}
    np.testing.assert_allclose(flat["first"], flat["exact"], rtol=1e-6, atol=1e-9)
    assert not np.allclose(flat["zeroth"], flat["exact"], atol=1e-6)
    # the first window is the same unperturbed window in all three
    rewards = [run.history[0]["reward"] for run in runs.values()]
    np.testing.assert_allclose(rewards, rewards[0], rtol=1e-12)
    with pytest.raises(ValueError, match="estimator"):
        control.train(task, policy, params, key=jax.random.key(0), estimator="zeroth")
