"""`step` and `rollout`: the only place where physics (the terms) and solvers meet.

One step: prepare the step's problem from (model, state, control) (`terms.prepare`: every
term's elements, the mass and ũ, once), solve it with `model.solver`, whose adjoint object
attaches implicit gradients to the solution (`solvers.adjoint`), and advance the state by
q+(u) (`dofs`). Gradients of a rollout therefore cost one transposed linear solve per step
and keep O(steps × state) memory, independent of solver iterations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcontact import dofs, terms
from jaxcontact.math import quat_normalize
from jaxcontact.types import Control, Model, State, StepInfo


def _check_control(model: Model, control: Control):
    n = model.n_body
    for name, shape in (("force", (n, 3)), ("torque", (n, 3)), ("motor", (model.n_motor,))):
        got = jnp.shape(getattr(control, name))
        if got != shape:
            raise ValueError(f"control.{name} must have shape {shape}, got {got}")


def advance(model: Model, state: State, u) -> State:
    """The end-of-step state for velocities u."""
    pos, quat, particle_pos = dofs.configuration(state, u, model.dt)
    vel, ang_vel, particle_vel = dofs.split(u, terms.layout(model))
    return state.replace(pos=pos, quat=quat_normalize(quat), vel=vel, ang_vel=ang_vel,
                         particle_pos=particle_pos, particle_vel=particle_vel,
                         time=state.time + model.dt)


def step(model: Model, state: State, control: Control | None = None):
    """Advance one time step by variational implicit Euler.

    Args:
      model: the scene (from `Scene.build`).
      state: current state.
      control: external forces/torques and motor targets (rad) held over the step; zeros
        if None.

    Returns:
      (next_state, info): the end-of-step `State` and a `StepInfo`.
    """
    if control is None:
        control = Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)
    _check_control(model, control)
    solver = model.solver
    solver.check(model)
    args = (model, terms.prepare(model, state, control))
    with jax.named_scope("solve"):
        u, stats = solver.gradients.solve(solver, terms.PROBLEM, dofs.velocity(state), args)
    gap = jax.lax.stop_gradient(terms.contact_gaps(u, args))
    info = StepInfo(
        residual=stats["residual"], iterations=stats["iterations"],
        converged=stats["converged"], result=stats["result"],
        active_contacts=jnp.sum(gap < 0.0).astype(jnp.int32),
        max_penetration=jnp.max(jnp.maximum(-gap, 0.0), initial=0.0),
        overflow=args[1].overflow, tolerance=stats["tolerance"])
    return advance(model, state, u), info


def rollout(model: Model, state: State, controls: Control | None = None, *, steps=None,
            checkpoint=False, return_info=False):
    """Run `step` repeatedly under `lax.scan`.

    Args:
      model, state: as for `step`.
      controls: a `Control` whose leaves have a leading time axis (T, ...), or None.
      steps: number of steps; required without controls, must equal T with them.
      checkpoint: recompute each step in the backward pass (`jax.checkpoint`) instead of
        storing its intermediates: less memory, about one extra forward pass.
      return_info: also return the per-step `StepInfo` (leading time axis).

    Returns:
      (final, traj) or (final, traj, infos); traj is a `State` with a leading time axis
      holding the state after each step.
    """
    if controls is None:
        if steps is None or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive int when controls is None, got {steps!r}")
    else:
        length = jnp.shape(controls.force)[0] if jnp.ndim(controls.force) == 3 else None
        if length is None:
            raise ValueError("controls must have a leading time axis: force of shape (T, N, 3), "
                             f"got {jnp.shape(controls.force)}")
        if steps is not None and steps != length:
            raise ValueError(f"steps={steps!r} does not match the {length} steps of controls")
        steps = length

    def body(s, c):
        s, info = step(model, s, c)
        return s, (s, info)

    if checkpoint:
        body = jax.checkpoint(body)
    final, (traj, infos) = jax.lax.scan(body, state, controls, length=steps)
    return (final, traj, infos) if return_info else (final, traj)
