"""A control task: a scene, what is rewarded, how long an episode lasts, how it starts.

The one record the closed-loop tools share: `jaxcontact.control.train` (analytic policy
gradients through the simulator) and the Brax environment adapter both read it, so a task is
written once and trained either way.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxcontact.step import step
from jaxcontact.types import Model, Result, State, StepInfo


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
      substeps: `jc.step`s per control, an int >= 1 (an action repeat, gymnasium's
        `frame_skip`): each control is held for `substeps` steps of `model.dt`, and `reward`
        and `done` see the state before the first and after the last (`advance`). A step of
        the task lasts `substeps` x `model.dt`.
    """

    model: Model
    state: State
    reward: Callable[..., Any]
    episode_length: int
    reset: Callable[..., Any] | None = None
    done: Callable[..., Any] | None = None
    substeps: int = 1

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
        sub = self.substeps
        if isinstance(sub, bool) or not isinstance(sub, numbers.Integral) or sub < 1:
            raise ValueError(f"substeps must be an int >= 1, got {sub!r}")
        object.__setattr__(self, "substeps", int(sub))

    def rules(self) -> "Rules":
        """The task's functions without its arrays (hashable: compiled programs are cached
        by them, with the nominal scene as an argument)."""
        return Rules(self.reward, self.reset, self.done, self.episode_length, self.substeps)

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
    substeps: int = 1

    def initial(self, scene, key):
        """(model, state) at the start of an episode drawn with `key` from the nominal
        scene (model, state)."""
        model, state = scene
        return (model, state) if self.reset is None else self.reset(model, state, key)

    def advance(self, model, state, control):
        """One step of the task: `advance(model, state, control, self.substeps)`."""
        return advance(model, state, control, self.substeps)


def advance(model: Model, state: State, control, substeps: int = 1):
    """`substeps` calls of `jc.step` under the same `control` (an action repeat).

    A `Control` is world-frame forces and torques and motor targets, held as they are over
    the repeat (a joint torque turns with its axis only between controls).

    Returns:
      (state after the last step, a `StepInfo` of the repeat: the largest residual,
      tolerance and penetration, the iterations summed, converged only if every step did,
      the worst `Result` code, the last step's active contacts, overflow if any step did).
    """
    if substeps == 1:
        return step(model, state, control)

    def body(s, _):
        new, info = step(model, s, control)
        return new, info

    final, infos = jax.lax.scan(body, state, None, length=substeps)
    info = StepInfo(residual=jnp.max(infos.residual), iterations=jnp.sum(infos.iterations),
                    converged=jnp.all(infos.converged), result=_worst(infos.result),
                    active_contacts=infos.active_contacts[-1],
                    max_penetration=jnp.max(infos.max_penetration),
                    overflow=jnp.any(infos.overflow), tolerance=jnp.max(infos.tolerance))
    return final, info


def _worst(results):
    """The worst of a repeat's `Result` codes: NONFINITE if any step diverged, else the
    largest code (a step that did not converge)."""
    return jnp.where(jnp.any(results == Result.NONFINITE), jnp.asarray(Result.NONFINITE,
                                                                     results.dtype),
                     jnp.max(results))
