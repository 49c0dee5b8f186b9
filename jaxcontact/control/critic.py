"""A learned value function at the end of each training window (short-horizon actor-critic).

Truncated windows see only `window` steps of the future. Where an episode can end early (a
robot that falls) and the restart does not depend on the policy, the windowed objective
never charges the future a fall throws away: analytic policy gradients then learn to dive,
trading the episode's future for speed now. A critic V(s) closes the window: the policy
ascends

    J = Σ_t γ^t r_t + γ^H V(s_H)

(SHAC, Xu et al. 2022, eq. 5), with the gradient flowing through the simulator into s_H and
through V's input (V's parameters held fixed). An episode that ends early by `Task.done`
contributes no value after its end (its future is lost), one that reaches the episode length
is bootstrapped with V of its last state, and the discount starts again in the next one.
The critic itself regresses on TD(λ) targets of each window (SHAC eq. 7-8), computed with
the critic before its update, for `iterations` optimizer steps per update.

For V to charge a fall, staying up must be worth something: a task with early ends should
pay a per-step reward for being alive that outweighs its penalties (`walk_task(alive_bonus=)`).

    critic = jc.control.Critic(observe=lambda s: ..., hidden=(64, 64))
    result = jc.control.train(task, policy, params, key=key, window=25, critic=critic)
    result.critic_state     # (critic parameters, critic optimizer state): continue with it
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxcontact.control.policies import MLP, check_hidden, observation
from jaxcontact.types import State

DEFAULT_OPTIMIZER = optax.adam(1e-3)   # one object: runs with the default share programs


@dataclasses.dataclass(frozen=True)
class Critic:
    """A value network V(observe(state)) and how it is trained (module docstring).

    Attributes:
      observe: `observe(state) -> (k,)` array, the network's input.
      hidden: widths of the hidden layers.
      activation: the hidden layers' nonlinearity (default tanh: smooth, so V's gradient
        with respect to the state is too).
      discount: γ in (0, 1]: the window's rewards and the value at its end are discounted
        by it (γ^t), and so are the TD(λ) targets.
      lam: λ in [0, 1] of the TD(λ) targets.
      iterations: optimizer steps of the critic per training update, an int >= 1.
      optimizer: the critic's `optax.GradientTransformation` (default Adam 1e-3).
    """

    observe: Callable[[State], Any]
    hidden: tuple = (64, 64)
    activation: Callable = nn.tanh
    discount: float = 0.99
    lam: float = 0.95
    iterations: int = 16
    optimizer: Any = DEFAULT_OPTIMIZER

    def __post_init__(self):
        for name in ("observe", "activation"):
            if not callable(getattr(self, name)):
                raise ValueError(f"{name} must be a function, got {getattr(self, name)!r}")
        object.__setattr__(self, "hidden", check_hidden(self.hidden))
        for name, low_open in (("discount", True), ("lam", False)):
            value = getattr(self, name)
            ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
                  and (0.0 < value <= 1.0 if low_open else 0.0 <= value <= 1.0))
            if not ok:
                interval = "(0, 1]" if low_open else "[0, 1]"
                raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
        its = self.iterations
        if isinstance(its, bool) or not isinstance(its, numbers.Integral) or its < 1:
            raise ValueError(f"iterations must be an int >= 1, got {its!r}")
        if not isinstance(self.optimizer, optax.GradientTransformation):
            raise ValueError("optimizer must be an optax.GradientTransformation, got "
                             f"{self.optimizer!r}")

    @property
    def network(self) -> nn.Module:
        return MLP(self.hidden, 1, self.activation, 1.0)

    def observation(self, state):
        return observation(self.observe, state)

    def init(self, key, state: State):
        """(parameters, optimizer state) for observations of `state`'s shape."""
        params = self.network.init(key, self.observation(state))
        return params, self.optimizer.init(params)

    def value(self, params, state: State):
        """V(state), a scalar."""
        return self.value_of_observation(params, self.observation(state))

    def value_of_observation(self, params, obs):
        """V of an observation (k,), a scalar."""
        return self.network.apply(params, obs)[0]


def discounts(ended, discount):
    """γ^(steps since the episode's start within the window) for each step: (T, B) from
    `ended` (T, B) (the episode ended at that step; the next step starts a new one at 1)."""
    def body(g, end):
        return jnp.where(end, 1.0, discount * g), g
    _, out = jax.lax.scan(body, jnp.ones(ended.shape[1:], jnp.result_type(float)), ended)
    return out


def window_objective(rewards, next_values, ended, terminated, discount):
    """Per environment (B,): Σ_t g_t (r_t + γ V(s_t+1) [the episode's value is carried on]),
    g_t from `discounts`. V(s_t+1) (the state after step t, before any restart) counts where
    the episode reached its length (`ended` and not `terminated`) or the window ends (last
    step, episode running): SHAC eq. 5 over windows that hold several episodes.
    All inputs (T, B)."""
    g = discounts(ended, discount).astype(rewards.dtype)
    last = jnp.zeros(ended.shape, bool).at[-1].set(True)
    bootstrap = ~terminated & (ended | last)
    return jnp.sum(g * (rewards + discount * jnp.where(bootstrap, next_values, 0.0)), axis=0)


def td_lambda_targets(rewards, next_values, ended, terminated, discount, lam):
    """TD(λ) targets (T, B) for V(s_t): G_t = r_t + γ [(1 - λ) V(s_t+1) + λ G_t+1] within an
    episode; at its end G_t = r_t (ended by `done`) or r_t + γ V(s_t+1) (reached its length);
    at the window's last step G = r + γ V(s_H) (SHAC eq. 7-8)."""
    def body(after, x):
        r, v, end, term = x
        carried = (1.0 - lam) * v + lam * after
        g = jnp.where(end, jnp.where(term, r, r + discount * v), r + discount * carried)
        return g, g
    last = rewards[-1] + discount * jnp.where(terminated[-1], 0.0, next_values[-1])
    _, out = jax.lax.scan(body, last, (rewards[:-1], next_values[:-1], ended[:-1],
                                       terminated[:-1]), reverse=True)
    return jnp.concatenate([out, last[None]], axis=0)


def fit(critic: Critic, params, opt_state, observations, targets):
    """`critic.iterations` optimizer steps on the mean squared error of V(observations) to
    `targets` (observations (N, k), targets (N,)). Returns (params, opt_state, last loss)."""
    targets = jax.lax.stop_gradient(targets)
    observations = jax.lax.stop_gradient(observations)

    def loss(p):
        values = jax.vmap(lambda o: critic.value_of_observation(p, o))(observations)
        return jnp.mean(jnp.square(values - targets))

    def body(c, _):
        p, s = c
        value, grads = jax.value_and_grad(loss)(p)
        changes, s = critic.optimizer.update(grads, s, p)
        return (optax.apply_updates(p, changes), s), value

    (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), None,
                                               length=critic.iterations)
    return params, opt_state, losses[-1]
