"""`step` and `rollout`: the only place where physics (the terms) and solvers meet.

One step: prepare the step's problem from (model, state, control) (`terms.prepare`: every
term's elements with contact linearized at the start of the step, the mass and ũ, once),
minimize its potential with `model.solver`, whose adjoint object attaches implicit gradients
to the solution (`solvers.adjoint`), and advance the state by q+(u) (`dofs`). Gradients of a
rollout therefore cost one linear solve per step and keep O(steps × state) memory,
independent of solver iterations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcontact import dofs, failure, terms
from jaxcontact.math import quat_normalize
from jaxcontact.models import contacts
from jaxcontact.solvers import tolerances
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
    # what the solve needs to know of the physics, decided here (the one place they meet):
    # meshes' Hessians need longer Krylov solves, and a coarse space if multilevel is asked
    solver = solver.with_krylov_cap(tolerances.KRYLOV_MESHES if model.has_meshes
                                    else tolerances.KRYLOV_RIGID)
    multilevel = "multilevel" in (getattr(solver, "preconditioner", None),
                                  getattr(solver.gradients, "preconditioner", None))
    args = (model, terms.prepare(model, state, control, multilevel=multilevel))
    with jax.named_scope("solve"):
        u, stats = solver.gradients.solve(solver, terms.PROBLEM, None, args)
    for _ in range(model.contact.relinearize):
        with jax.named_scope("relinearize"):
            args = (model, terms.prepare(model, state, control, at=u, multilevel=multilevel))
            u, again = solver.gradients.solve(solver, terms.PROBLEM, u, args)
        stats = {**again, "iterations": stats["iterations"] + again["iterations"]}
    smoothing = getattr(solver.gradients, "smoothing", None)
    if smoothing is not None:
        with jax.named_scope("smoothed"):
            u, stats = _smoothed_gradients(model, state, control, solver, smoothing, u, stats,
                                           multilevel)
    gap = jax.lax.stop_gradient(terms.contact_gaps(u, args))
    impulse = jax.lax.stop_gradient(terms.contact_impulses(u, args))
    info = StepInfo(
        residual=stats["residual"], iterations=stats["iterations"],
        converged=stats["converged"], result=stats["result"],
        active_contacts=jnp.sum(impulse > 0.0).astype(jnp.int32),
        max_penetration=jnp.max(jnp.maximum(-gap, 0.0), initial=0.0),
        overflow=args[1].overflow, tolerance=stats["tolerance"])
    return advance(model, state, u), info


def _smoothed_gradients(model, state, control, solver, smoothing, u, stats, multilevel):
    """The exact answer u, with the gradients of the same step under the contact laws
    `smoothing` (`jc.Implicit(smoothing=...)`): that step solved again from u (a few Newton
    iterations) and differentiated implicitly. Converged where both solves are."""
    smooth = contacts.with_laws(model, smoothing)
    args = (smooth, terms.prepare(smooth, state, control, multilevel=multilevel))
    u = jax.lax.stop_gradient(u)
    u_smooth, smooth_stats = solver.gradients.solve(solver, terms.PROBLEM, u, args)
    return _value_of_first(u, u_smooth), {
        **stats, "converged": stats["converged"] & smooth_stats["converged"]}


@jax.custom_jvp
def _value_of_first(value, derivative):
    """`value`, differentiated as `derivative` (the smoothed step's answer)."""
    return value


@_value_of_first.defjvp
def _value_of_first_jvp(primals, tangents):
    return primals[0], tangents[1]


def rollout(model: Model, state: State, controls: Control | None = None, *, steps=None,
            policy=None, policy_params=None, key=None, checkpoint=False, return_info=False,
            return_controls=False, on_failure="ignore"):
    """Run `step` repeatedly under `lax.scan`, open loop (controls) or closed loop (policy).

    Args:
      model, state: as for `step`.
      controls: a `Control` whose leaves have a leading time axis (T, ...), or None.
      steps: number of steps; required without controls, must equal T with them.
      policy: closed loop: `policy(policy_params, state) -> Control` computes each step's
        control from the state before it (with `key`: `policy(policy_params, state, key_t)`,
        a fresh key per step). Gradients flow to `policy_params` through every step (and to
        the model and the state, as always). Not together with `controls`.
      policy_params: the policy's parameters (any pytree), passed through unchanged.
      key: a `jax.random` key for a stochastic policy; step t gets `fold_in(key, t)`.
      checkpoint: recompute each step in the backward pass (`jax.checkpoint`) instead of
        storing its intermediates: less memory, about one extra forward pass.
      return_info: also return the per-step `StepInfo` (leading time axis).
      return_controls: also return the controls applied (a `Control` with a time axis: what
        the policy chose, or `controls`).
      on_failure: what to do when a step fails (`jaxcontact.failure`): its solve did not
        converge (`StepInfo.converged` false), the broad phase overflowed, or the state after
        it is not finite (NaN/inf, even where the solver reported convergence).
        "ignore" (default, as before: check `infos` yourself; the program is unchanged),
        "warn" or "raise". The check runs once per rollout, after the scan, on the first
        failing step; its message names that step's index into `traj`/`infos`, the state's
        time after it, its `StepInfo` values and `jc.RESULT_MESSAGES` text, and the number
        of failing steps (under `vmap`: the failing batch members' indices, each described).
        Not jitted, "warn" warns `jc.SimulationWarning` (a RuntimeWarning) and "raise"
        raises `jc.SimulationError` (a RuntimeError), at the call. Under `jax.jit` (and
        `vmap`, `grad`: traced values) one `jax.debug.callback` in the compiled program
        checks when the program runs: "warn" emits the same `SimulationWarning`, during the
        call on CPU and asynchronously on accelerators (`jax.effects_barrier()` waits for
        it); with "raise" the call fails with `jax.errors.JaxRuntimeError` (a RuntimeError:
        XLA does not rethrow the callback's exception type) whose message ends with
        "SimulationError: <the message>", and JAX logs the callback's traceback. For a
        typed `SimulationError` from a jitted rollout, jit it with `return_info=True` and
        call `jc.check_rollout(traj, infos)` on its outputs. (`checkify` would need
        `checkify.checkify` around every jitted call.) Gradients are unchanged: the check's
        inputs carry none.

    Returns:
      (final, traj), then infos if `return_info`, then controls if `return_controls`; traj
      is a `State` with a leading time axis holding the state after each step.

    Raises:
      ValueError: steps missing or not a positive int, controls without a time axis or of
        another length than `steps`, controls and a policy both given, a policy that is not
        callable, `key` without a policy, or a policy returning anything but a `Control` of
        the model's shapes (the message names the returned field and its shape), or an
        `on_failure` other than "ignore", "warn", "raise".
      SimulationError: on_failure="raise" and a step failed, outside jit (module
        `jaxcontact.failure`; under jit a JaxRuntimeError carrying its message, above).
    """
    failure.check_on_failure(on_failure)
    report = on_failure != "ignore"
    if policy is not None:
        if controls is not None:
            raise ValueError("give controls (open loop) or a policy (closed loop), not both")
        if not callable(policy):
            raise ValueError(f"policy must be a function policy(params, state), got {policy!r}")
    elif key is not None:
        raise ValueError("key is for a stochastic policy; got a key but no policy")
    if controls is None:
        if steps is None or not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"steps must be a positive int when controls is None, got {steps!r}")
    else:
        length = jnp.shape(controls.force)[0] if jnp.ndim(controls.force) == 3 else None
        if length is None:
            raise ValueError("controls must have a leading time axis: force of shape (T, N, 3), "
                             f"got {jnp.shape(controls.force)}")
        if steps is not None and steps != length:
            raise ValueError(f"steps={steps!r} does not match the {length} steps of controls")
        steps = length

    keep_info = return_info or report

    def outputs(s, info, c):
        # only what is returned is stacked: each output is a write per step
        return (s, info if keep_info else None, c if return_controls else None,
                failure.state_finite(s) if report else None)

    if policy is None:
        def body(s, c):
            if c is None:
                c = Control.zeros(model.n_body, model.n_motor, dtype=s.pos.dtype)
            s, info = step(model, s, c)
            return s, outputs(s, info, c)
        xs = controls
    else:
        def body(s, t):
            c = policy_control(policy, policy_params, s, model,
                               None if key is None else jax.random.fold_in(key, t))
            s, info = step(model, s, c)
            return s, outputs(s, info, c)
        xs = jnp.arange(steps)

    if checkpoint:
        body = jax.checkpoint(body)
    final, (traj, infos, applied, finite) = jax.lax.scan(body, state, xs, length=steps)
    if report:
        failure.report(on_failure, steps, finite, infos, traj.time)
    return ((final, traj) + ((infos,) if return_info else ())
            + ((applied,) if return_controls else ()))


def policy_control(policy, params, state: State, model: Model, key=None) -> Control:
    """The control `policy` gives in `state` (with `key` for a stochastic policy), checked:
    a `Control` of the model's shapes (ValueError naming the field and shape otherwise)."""
    control = policy(params, state) if key is None else policy(params, state, key)
    if not isinstance(control, Control):
        raise ValueError(f"policy must return a jc.Control, got {type(control).__name__}")
    try:
        _check_control(model, control)
    except ValueError as error:
        raise ValueError(f"policy returned a bad control: {error}") from None
    return control
