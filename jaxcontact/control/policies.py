"""Policies: functions `policy(params, state) -> jc.Control` with trainable parameters.

A policy is any function of that form; `MLPPolicy` is the usual one, a flax (linen)
multilayer perceptron from an observation of the state to an action in [-1, 1]^k, mapped to
a `Control` by a function the user gives (which forces, torques or motor targets the
actions drive, and how strongly):

    policy = jc.control.MLPPolicy(
        observe=lambda s: jnp.concatenate([jc.observe.positions(s), jc.observe.velocities(s)]),
        act=lambda a, s: jc.Control(force=..., torque=..., motor=...),
        action_size=2, hidden=(64, 64))
    params = policy.init(jax.random.key(0), state)
    control = policy(params, state)

`MLPPolicy(..., noise=σ)` is stochastic: called with a key it adds N(0, σ²) to the action
before squashing (exploration; `rollout(..., key=k)` and `train(..., stochastic=True)` pass
one per step), and the reparameterized sample keeps the gradient exact.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxcontact.types import Control, State


def check_hidden(hidden) -> tuple:
    """`hidden` as a tuple of layer widths (ints >= 1), or a ValueError naming it."""
    widths = tuple(hidden)
    if not all(isinstance(w, numbers.Integral) and not isinstance(w, bool) and w >= 1
               for w in widths):
        raise ValueError(f"hidden must be a sequence of ints >= 1, got {hidden!r}")
    return widths


def observation(observe, state):
    """observe(state) as an array, checked to be 1-D (a network's input)."""
    obs = jnp.asarray(observe(state))
    if obs.ndim != 1:
        raise ValueError(f"observe must return a 1-D array, got shape {obs.shape}")
    return obs


class MLP(nn.Module):
    """Dense layers with `activation` between them, then a linear layer of `out` units whose
    initial weights have variance `output_scale` / fan-in (1: flax's default)."""

    hidden: tuple
    out: int
    activation: Callable
    output_scale: float

    @nn.compact
    def __call__(self, x):
        for width in self.hidden:
            x = self.activation(nn.Dense(width)(x))
        return nn.Dense(self.out, kernel_init=nn.initializers.variance_scaling(
            self.output_scale, "fan_in", "truncated_normal"))(x)


@dataclasses.dataclass(frozen=True)
class MLPPolicy:
    """A multilayer perceptron policy: state -> observe -> MLP -> tanh -> act -> Control.

    Attributes:
      observe: `observe(state) -> (k_obs,)` array, the network's input (`jc.observe` helpers).
      act: `act(action, state) -> jc.Control`, from an action in [-1, 1]^action_size.
      action_size: the network's output size, an int >= 1.
      hidden: widths of the hidden layers.
      activation: the hidden layers' nonlinearity (default tanh: smooth, so the policy's
        gradient is too).
      noise: standard deviation of the Gaussian exploration noise of a call with a key (0:
        deterministic even then).
      output_scale: variance scale of the last layer's initial weights (fan-in). The default
        0.01 makes the first actions small and the first rollouts gentle; where small
        actions do nothing (a push below static friction), their gradient is nothing too,
        and a scale near 1 (actions of order 1 from the start) lets training begin.
    """

    observe: Callable[[State], Any]
    act: Callable[[Any, State], Control]
    action_size: int
    hidden: tuple = (64, 64)
    activation: Callable = nn.tanh
    noise: float = 0.0
    output_scale: float = 0.01

    def __post_init__(self):
        for name in ("observe", "act", "activation"):
            if not callable(getattr(self, name)):
                raise ValueError(f"{name} must be a function, got {getattr(self, name)!r}")
        size = self.action_size
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"action_size must be an int >= 1, got {size!r}")
        object.__setattr__(self, "hidden", check_hidden(self.hidden))
        noise = self.noise
        if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or not noise >= 0:
            raise ValueError(f"noise must be a number >= 0, got {noise!r}")
        scale = self.output_scale
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not scale > 0:
            raise ValueError(f"output_scale must be a number > 0, got {scale!r}")

    @property
    def network(self) -> nn.Module:
        return MLP(self.hidden, self.action_size, self.activation, self.output_scale)

    def _observation(self, state):
        return observation(self.observe, state)

    def init(self, key, state: State):
        """Parameters for observations of `state`'s shape (flax variables)."""
        return self.network.init(key, self._observation(state))

    def action(self, params, state: State, key=None):
        """The action in [-1, 1]^action_size (with `key`, noise added before the squash)."""
        pre = self.network.apply(params, self._observation(state))
        if key is not None and self.noise > 0:
            pre = pre + self.noise * jax.random.normal(key, pre.shape, pre.dtype)
        return jnp.tanh(pre)

    def __call__(self, params, state: State, key=None) -> Control:
        return self.act(self.action(params, state, key), state)
