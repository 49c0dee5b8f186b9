"""`step` and `rollout`: the only place where physics (dynamics.py) and solvers meet.

One step: build the residual of the implicit step from (model, state, control), solve it with
`model.solver` on stop-gradient inputs, attach implicit gradients to the solution, and advance
the state. Gradients of a rollout therefore cost one transposed linear solve per step and keep
O(steps × state) memory, independent of solver iterations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcontact import dynamics
from jaxcontact.models.geometry import contact_frame
from jaxcontact.solvers import check_solver
from jaxcontact.solvers.base import early_exit, matrix_free_adjoint
from jaxcontact.solvers.blocks import jacobian_preconditioner
from jaxcontact.solvers.implicit import MatrixFree, implicit_solution
from jaxcontact.types import Control, Model, State, StepInfo


def _check_control(model: Model, control: Control):
    n = model.n_body
    for name, shape in (("force", (n, 3)), ("torque", (n, 3)), ("motor", (model.n_motor,))):
        got = jnp.shape(getattr(control, name))
        if got != shape:
            raise ValueError(f"control.{name} must have shape {shape}, got {got}")


def _preconditioner(u, args, transpose):
    """Block-Jacobi preconditioner of the step's Jacobian for matrix-free implicit gradients."""
    return jacobian_preconditioner(dynamics.PROBLEM, u, args, transpose)


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
    dtype = state.pos.dtype
    if control is None:
        control = Control.zeros(model.n_body, model.n_motor, dtype=dtype)
    _check_control(model, control)
    solver = model.solver
    check_solver(solver, model.contact.normal, model.contact.friction)
    args = (model, state, dynamics.prepare(model, state, control))
    u_prev = dynamics.join_velocity(state.vel, state.ang_vel)  # warm start (Newton)
    with jax.named_scope("solve"):
        if solver.ad == "unrolled":
            u, stats = solver.solve(dynamics.PROBLEM, u_prev, args)
        else:
            u, stats = solver.solve(dynamics.PROBLEM, jax.lax.stop_gradient(u_prev),
                                    jax.lax.stop_gradient(args))
            linear = (MatrixFree(_preconditioner, early_exit=early_exit(solver))
                      if matrix_free_adjoint(solver, u.shape[0]) else None)
            u = implicit_solution(dynamics.residual, u, args, solver.ad, linear)
    new_state = dynamics.advance(model, state, u)
    cand = args[2].candidates
    gap = jax.lax.stop_gradient(contact_frame(model, cand, new_state.pos, new_state.quat).gap)
    info = StepInfo(
        residual=stats["residual"], iterations=stats["iterations"],
        converged=stats["converged"], result=stats["result"],
        active_contacts=jnp.sum(gap < 0.0).astype(jnp.int32),
        max_penetration=jnp.max(jnp.maximum(-gap, 0.0), initial=0.0),
        overflow=cand.overflow)
    return new_state, info


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
