"""A control task: a scene, what is rewarded, how long an episode lasts, how it starts.

The one record the closed-loop tools share: `jaxcontact.control.train` (analytic policy
gradients through the simulator) and the Brax environment adapter both read it, so a task is
written once and trained either way.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable

from jaxcontact.types import Model, State


@dataclasses.dataclass(frozen=True)
class Task:
    """What to control and what counts as doing it well.

    Attributes:
      model, state: the nominal scene (unbatched, from `Scene.build`).
      reward: `reward(model, state, control, next_state) -> scalar`, the reward of one step
        (higher is better): `state` before the step, `control` applied during it,
        `next_state` after it. Differentiable: analytic policy gradients ascend it.
      episode_length: steps per episode, an int >= 1; an episode then starts again from
        `reset`.
      reset: `reset(model, state, key) -> (model, state)`, the start of an episode drawn from
        the nominal scene (domain randomization: `jaxcontact.domain`); None: always the nominal
        scene. It runs inside jitted loops: new draws never recompile.
      done: optional `done(model, state) -> bool scalar`: the episode ends early (a robot that
        fell); None: episodes always last `episode_length` steps.
    """

    model: Model
    state: State
    reward: Callable[..., Any]
    episode_length: int
    reset: Callable[..., Any] | None = None
    done: Callable[..., Any] | None = None

    def __post_init__(self):
        if not isinstance(self.model, Model):
            raise ValueError(f"model must be a jc.Model, got {type(self.model).__name__}")
        if not isinstance(self.state, State):
            raise ValueError(f"state must be a jc.State, got {type(self.state).__name__}")
        for name in ("reward", "reset", "done"):
            value = getattr(self, name)
            if not (callable(value) or (value is None and name != "reward")):
                raise ValueError(f"{name} must be a function, got {value!r}")
        length = self.episode_length
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
            raise ValueError(f"episode_length must be an int >= 1, got {length!r}")
        object.__setattr__(self, "episode_length", int(length))

    def rules(self) -> "Rules":
        """The task's functions without its arrays (hashable: compiled programs are cached
        by them, with the nominal scene as an argument)."""
        return Rules(self.reward, self.reset, self.done, self.episode_length)

    def initial(self, key) -> tuple[Model, State]:
        """(model, state) at the start of an episode drawn with `key`."""
        return self.rules().initial((self.model, self.state), key)


@dataclasses.dataclass(frozen=True)
class Rules:
    """A `Task`'s functions and episode length, without the nominal scene."""

    reward: Callable[..., Any]
    reset: Callable[..., Any] | None
    done: Callable[..., Any] | None
    episode_length: int

    def initial(self, scene, key):
        """(model, state) at the start of an episode drawn with `key` from the nominal
        scene (model, state)."""
        model, state = scene
        return (model, state) if self.reset is None else self.reset(model, state, key)
