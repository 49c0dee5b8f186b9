"""The critic that closes training windows (jaxcontact.control.critic).

- TD(λ) targets equal their definition as a λ-weighted mean of n-step returns, episode ends
  and window ends included; the window objective discounts within each episode, adds V
  where an episode is carried on and nothing after a `done`;
- a critic's fit regresses its values onto targets;
- in training, the value at the window's end steers the policy (its gradient flows through
  the simulator into the end state), where the window's rewards alone give no gradient;
- bad settings are named.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxcontact as jc
from jaxcontact import control
from jaxcontact.control import critic as critic_lib


def _episode_pattern(rng, steps, batch):
    ended = rng.random((steps, batch)) < 0.25
    terminated = ended & (rng.random((steps, batch)) < 0.5)
    return ended, terminated


def _n_step_return(r, v, ended, terminated, t, n, gamma):
    """Σ_{k<n} γ^k r_t+k + γ^n V(s_t+n) (nothing after a done; n stops at an episode's or
    the window's end, where the value is V of that end state)."""
    total = 0.0
    for k in range(n):
        total += gamma ** k * r[t + k]
        if ended[t + k]:
            return total + (0.0 if terminated[t + k] else gamma ** (k + 1) * v[t + k])
    return total + gamma ** n * v[t + n - 1]


def _lambda_return(r, v, ended, terminated, t, gamma, lam):
    """(1 - λ) Σ_n λ^(n-1) G^(n) + λ^(N-1) G^(N), N the steps to the episode's or window's
    end (Sutton & Barto eq. 12.3 with a finite end)."""
    steps = len(r)
    last = t
    while last < steps - 1 and not ended[last]:
        last += 1
    horizon = last - t + 1
    total = sum((1 - lam) * lam ** (n - 1) * _n_step_return(r, v, ended, terminated, t, n, gamma)
                for n in range(1, horizon))
    return total + lam ** (horizon - 1) * _n_step_return(r, v, ended, terminated, t, horizon,
                                                         gamma)


@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_td_lambda_targets_are_weighted_n_step_returns(lam):
    rng = np.random.default_rng(3)
    steps, batch, gamma = 9, 5, 0.9
    r, v = rng.normal(size=(steps, batch)), rng.normal(size=(steps, batch))
    ended, terminated = _episode_pattern(rng, steps, batch)
    got = critic_lib.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), jnp.asarray(ended),
                                       jnp.asarray(terminated), gamma, lam)
    want = np.array([[_lambda_return(r[:, b], v[:, b], ended[:, b], terminated[:, b], t,
                                     gamma, lam) for b in range(batch)] for t in range(steps)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)


def test_window_objective_discounts_per_episode_and_drops_the_value_after_a_done():
    gamma = 0.5
    r = jnp.ones((4, 3))
    v = jnp.full((4, 3), 10.0)
    ended = jnp.asarray([[0, 0, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0]], bool)
    terminated = jnp.asarray([[0, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]], bool)
    got = critic_lib.window_objective(r, v, ended, terminated, gamma)
    running = 1 + 0.5 + 0.25 + 0.125 + 0.0625 * 10          # one episode, V at the window's end
    truncated = (1 + 0.5 + 0.25 * 10) + (1 + 0.5 + 0.25 * 10)   # length reached at step 1
    fell = (1 + 0.5) + (1 + 0.5 + 0.25 * 10)                # done at step 1: no value
    np.testing.assert_allclose(np.asarray(got), [running, truncated, fell], rtol=1e-12)


def test_fit_regresses_values_onto_targets():
    critic = control.Critic(observe=lambda s: s.pos[0], hidden=(16,), iterations=400,
                            optimizer=optax.adam(1e-2))
    obs = jax.random.normal(jax.random.key(0), (64, 3))
    targets = 2.0 * obs[:, 0] - obs[:, 2] + 0.5
    params = critic.network.init(jax.random.key(1), obs[0])
    before = jnp.mean(jnp.square(jax.vmap(lambda o: critic.value_of_observation(params, o))(
        obs) - targets))
    params, _, loss = critic_lib.fit(critic, params, critic.optimizer.init(params), obs,
                                     targets)
    assert float(loss) < 0.01 * float(before), (loss, before)


def _drift_task():
    # a free sphere; the reward is zero: only the value at the window's end asks for anything
    scene = jc.Scene(dt=0.05, gravity=(0.0, 0.0, 0.0))
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.0))
    model, state = scene.build()
    return control.Task(model, state, reward=lambda m, s, c, n: 0.0 * n.pos[0, 0],
                        episode_length=6)


@pytest.mark.slow  # 19 s; CI: the targets, objective and fit of the critic above
def test_the_value_at_the_window_end_steers_the_policy():
    task = _drift_task()
    policy = control.MLPPolicy(
        observe=lambda s: jnp.concatenate([s.pos[0], s.vel[0]]),
        act=lambda a, s: jc.Control(force=a[None, :], torque=jnp.zeros((1, 3)),
                                    motor=jnp.zeros((0,))),
        action_size=3, hidden=(8,), output_scale=1.0)
    params = policy.init(jax.random.key(0), task.state)
    # a linear critic V = x (no hidden layer), frozen: its optimizer changes nothing
    critic = control.Critic(observe=lambda s: s.pos[0], hidden=(), discount=1.0,
                            optimizer=optax.set_to_zero())
    weights, opt = critic.init(jax.random.key(1), task.state)
    weights = jax.tree.map(jnp.zeros_like, weights)
    weights["params"]["Dense_0"]["kernel"] = jnp.asarray([[1.0], [0.0], [0.0]])
    settings = dict(key=jax.random.key(2), batch=2, window=3, optimizer=optax.sgd(10.0),
                    clip=None, progress=False)
    plain = control.train(task, policy, params, updates=1, **settings)
    assert plain.history[0]["grad_norm"] == 0.0           # zero reward: nothing to ascend
    steered = control.train(task, policy, params, updates=5, critic=critic,
                            critic_state=(weights, opt), **settings)
    assert steered.history[0]["grad_norm"] > 0.0
    # V = x asks for motion along +x: the policy's push along x grew, across the others
    before, after = (np.asarray(policy.action(p, task.state)) for p in (params, steered.params))
    gain = after - before
    assert gain[0] > 0.1 and abs(gain[1]) < 0.25 * gain[0] and abs(gain[2]) < 0.25 * gain[0], gain
    assert steered.history[0]["reward"] == 0.0
    # the critic stayed frozen, and comes back for the next run
    np.testing.assert_array_equal(steered.critic_state[0]["params"]["Dense_0"]["kernel"],
                                  weights["params"]["Dense_0"]["kernel"])


def test_critic_settings_are_checked():
    observe = lambda s: s.pos[0]    # noqa: E731
    for bad, name in ((dict(discount=0.0), "discount"), (dict(lam=1.5), "lam"),
                      (dict(iterations=0), "iterations"), (dict(hidden=(0,)), "hidden"),
                      (dict(optimizer="adam"), "optimizer")):
        with pytest.raises(ValueError, match=name):
            control.Critic(observe=observe, **bad)
    with pytest.raises(ValueError, match="observe"):
        control.Critic(observe=None)
    task = _drift_task()
    policy = control.MLPPolicy(observe=lambda s: s.pos[0],
                               act=lambda a, s: jc.Control(force=a[None, :],
                                                           torque=jnp.zeros((1, 3)),
                                                           motor=jnp.zeros((0,))),
                               action_size=3, hidden=(4,))
    params = policy.init(jax.random.key(0), task.state)
    with pytest.raises(ValueError, match="critic must be"):
        control.train(task, policy, params, key=jax.random.key(0), critic="V")
    with pytest.raises(ValueError, match="critic_state"):
        control.train(task, policy, params, key=jax.random.key(0), critic_state=(1, 2))
