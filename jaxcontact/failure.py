"""Failure policy of rollouts: find the first step that failed, then ignore, warn or raise.

A step fails when its solve did not converge (`StepInfo.converged` false: the iteration cap
was reached, `Result.MAX_ITERATIONS`, or the residual is NaN/inf, `Result.NONFINITE`), when
the broad phase dropped contact candidates (`StepInfo.overflow`), or when the state after it
holds a NaN or an inf, even where the solver reported convergence.

`rollout(..., on_failure="warn" | "raise")` collects one bool per step (the state's
finiteness) next to the `StepInfo`s it already stacks, and after the scan reduces them to
one summary: the first failing step (its index, the time after it, its `StepInfo` values)
and the number of failing steps. The summary is checked once per rollout:

- on concrete values (no `jax.jit`, `vmap` or `grad` around the rollout) in Python, at the
  call: `warnings.warn(SimulationWarning)` or `raise SimulationError`;
- on traced values by one `jax.debug.callback` (unordered: ordered effects cannot run in a
  program sharded over several devices, `jaxcontact.parallel`), wrapped in a
  `jax.custom_batching.custom_vmap` whose batching rule hands the callback the whole batch
  at once. A plain `jax.debug.callback` under `vmap` is called once per batch member with
  that member's values and cannot tell which member it is; through the rule the message
  names the failing members' batch indices (nested `vmap`s give multi-indices, outer axis
  first). The callback's inputs carry no gradient, and the callback has no outputs: `grad`
  of a rollout is unchanged by it.

`check_rollout` applies the same check to the `traj` and `infos` that a (jitted) rollout
returned, outside jit: the way to get a typed `SimulationError` from a compiled rollout.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jaxcontact.types import RESULT_MESSAGES, Result, State, StepInfo

ON_FAILURE = ("ignore", "warn", "raise")
_SHOWN = 4  # failing batch members described in full in one message


class SimulationWarning(RuntimeWarning):
    """A rollout step failed (`rollout(..., on_failure="warn")`)."""


class SimulationError(RuntimeError):
    """A rollout step failed (`rollout(..., on_failure="raise")`, `check_rollout`)."""


def check_on_failure(on_failure) -> str:
    """`on_failure` if it is one of `ON_FAILURE`, else ValueError naming it."""
    if not isinstance(on_failure, str) or on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}, got {on_failure!r}")
    return on_failure


def state_finite(state: State, batch_ndim: int = 0, xp=jnp):
    """Whether every leaf of `state` is finite, per index of its `batch_ndim` leading axes
    (time and batch axes; 0 for one state). `xp` is `jax.numpy` or `numpy`."""
    finite = xp.ones(xp.shape(state.time)[:batch_ndim], dtype=bool)
    for leaf in jax.tree.leaves(state):
        leaf = xp.asarray(leaf)
        axes = tuple(range(batch_ndim, leaf.ndim))
        finite = finite & xp.all(xp.isfinite(leaf), axis=axes)
    return finite


def _summarize(finite, infos: StepInfo, time, xp=jnp):
    """The failure summary over the last axis (time) of per-step `finite` flags, `infos` and
    `time` (the state's time after each step); leading (batch) axes are kept.

    Returns a dict of arrays: "count" failing steps, "first" failing step (0 if none), and at
    that step "finite", "time" and every `StepInfo` field."""
    failed = (~xp.asarray(infos.converged) | xp.asarray(infos.overflow) | ~xp.asarray(finite)
              | ~xp.isfinite(xp.asarray(infos.residual))
              | (xp.asarray(infos.result) != int(Result.SUCCESS)))
    first = xp.argmax(failed, axis=-1)

    def at_first(x):
        return xp.take_along_axis(xp.asarray(x), first[..., None], axis=-1)[..., 0]

    summary = {"count": xp.sum(failed, axis=-1), "first": first,
               "finite": at_first(finite), "time": at_first(time)}
    for name in StepInfo.__dataclass_fields__:
        summary[name] = at_first(getattr(infos, name))
    return summary


def _member_message(values: dict, steps: int) -> str:
    """The report of one rollout's summary `values` (numpy scalars)."""
    t, count = int(values["first"]), int(values["count"])
    code = int(values["result"])
    reasons = []
    if code != Result.SUCCESS or not bool(values["converged"]):
        try:
            reasons.append(f"{RESULT_MESSAGES[Result(code)]} (result {Result(code).name})")
        except ValueError:
            reasons.append(f"not converged (unknown result code {code})")
    if not bool(values["finite"]):
        reasons.append("non-finite state (NaN/inf) after the step")
    if bool(values["overflow"]):
        reasons.append("broad-phase overflow: contact candidates were dropped (raise "
                       "`jc.BroadPhase` capacity or window)")
    info = (f"residual={float(values['residual']):.3g}, "
            f"tolerance={float(values['tolerance']):.3g}, "
            f"iterations={int(values['iterations'])}, converged={bool(values['converged'])}, "
            f"result={code}, active_contacts={int(values['active_contacts'])}, "
            f"max_penetration={float(values['max_penetration']):.3g} m, "
            f"overflow={bool(values['overflow'])}")
    return (f"step {t} (0-based index into traj and infos; state time {float(values['time']):.6g}"
            f" s after it) failed: {'; '.join(reasons)}. StepInfo: {info}. "
            f"{count} of {steps} steps failed in total.")


def message(summary: dict, steps: int) -> str | None:
    """The report of a summary whose arrays have leading batch axes (none for one rollout),
    or None if no step failed."""
    summary = {k: np.asarray(v) for k, v in summary.items()}
    count = summary["count"]
    if not np.any(count > 0):
        return None
    if count.ndim == 0:
        return f"jaxcontact rollout: {_member_message(summary, steps)}"
    failing = [tuple(int(i) for i in index) for index in np.argwhere(count > 0)]
    shown = " ".join(
        f"batch member {index if len(index) > 1 else index[0]}: "
        f"{_member_message({k: v[index] for k, v in summary.items()}, steps)}"
        for index in failing[:_SHOWN])
    listed = [f if len(f) > 1 else f[0] for f in failing]
    more = f" (the first {_SHOWN} described)" if len(failing) > _SHOWN else ""
    return (f"jaxcontact rollout: {len(failing)} of {count.size} batch members (batch shape "
            f"{count.shape}) had failing steps, members {listed}{more}. {shown}")


def _emit(mode: str, steps: int, summary: dict, stacklevel: int = 0):
    """Warn or raise (per `mode`) if `summary` (concrete) has a failing step; the warning is
    attributed to the frame `stacklevel` above this one's caller (0, from a callback: here)."""
    text = message(summary, steps)
    if text is None:
        return
    if mode == "raise":
        raise SimulationError(text)
    warnings.warn(text, SimulationWarning, stacklevel=stacklevel + 1)


@functools.lru_cache(maxsize=None)
def _reporter(mode: str, steps: int, batch_ndim: int):
    """report(summary): one `jax.debug.callback` with the summary of `batch_ndim` leading
    batch axes; under `vmap` its rule adds the mapped axis in front and defers to the
    reporter of `batch_ndim + 1` axes, so one callback sees the whole batch."""

    @custom_vmap
    def report(summary):
        jax.debug.callback(functools.partial(_emit, mode, steps), summary)
        return ()

    @report.def_vmap
    def _batched(axis_size, in_batched, summary):
        summary = jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x)),
            summary, in_batched[0])
        _reporter(mode, steps, batch_ndim + 1)(summary)
        return (), ()

    return report


def report(mode: str, steps: int, finite, infos: StepInfo, time):
    """Apply the policy `mode` to one rollout's per-step `finite` flags, `infos` and `time`
    (leading axis: the `steps` steps): nothing for "ignore"; else at once on concrete values,
    by one `jax.debug.callback` on traced ones (module docstring)."""
    if mode == "ignore":
        return
    summary = jax.lax.stop_gradient(_summarize(finite, infos, time))
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(summary)):
        _reporter(mode, steps, 0)(summary)
    else:
        _emit(mode, steps, summary, stacklevel=3)  # the warning points at rollout's caller


def check_rollout(traj: State, infos: StepInfo, on_failure: str = "raise") -> int:
    """Check the output of a rollout that ran without a failure policy (e.g. jitted, with
    `return_info=True`), in Python: the way to get a typed `SimulationError` from a compiled
    rollout.

    The same check and message as `rollout(..., on_failure=...)`: a step fails if it did not
    converge, overflowed the broad phase, or left a non-finite state.

    Args:
      traj: the rollout's trajectory (`State` with a leading time axis, after any batch axes).
      infos: its `StepInfo`s, same leading axes.
      on_failure: "raise" (default): `SimulationError` naming the first failing step;
        "warn": a `SimulationWarning` instead; "ignore": only count.

    Returns:
      The number of failing steps (summed over any batch axes).

    Raises:
      SimulationError: with "raise", if a step failed.
      ValueError: a bad `on_failure`, or `traj` and `infos` without a common time axis.
    """
    mode = check_on_failure(on_failure)
    converged = np.asarray(infos.converged)
    time = np.asarray(traj.time)
    if converged.ndim < 1 or converged.shape != time.shape:
        raise ValueError(f"traj and infos must share their leading (batch and time) axes, got "
                         f"traj.time of shape {time.shape} and infos.converged of shape "
                         f"{converged.shape}")
    traj = jax.tree.map(np.asarray, traj)
    finite = state_finite(traj, converged.ndim, xp=np)
    summary = _summarize(finite, jax.tree.map(np.asarray, infos), time, xp=np)
    if mode != "ignore":
        _emit(mode, converged.shape[-1], summary, stacklevel=2)
    return int(np.sum(summary["count"]))
