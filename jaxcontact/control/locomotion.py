"""gymnasium's MuJoCo locomotion tasks (Hopper-v5, Ant-v5) as `jc.control` tasks.

Each task loads gymnasium's own MJCF file through `jc.io.load_mjcf` and writes gymnasium's
reward, termination, reset noise and observation in MuJoCo's generalized coordinates, read
off our body states by `MjcfCoordinates` (`jaxcontact.control.coordinates`). The formulas
and default weights are those of gymnasium 1.x's `hopper_v5.py` and `ant_v5.py` (the
Hopper-v5 and Ant-v5 documentation pages):

    reward = forward_reward_weight · Δx / Δt + healthy_reward · healthy
             - ctrl_cost_weight · |a|² (- contact_cost_weight · |clip(cfrc_ext, -1, 1)|², ant)

with Δx the main body's x displacement over the step (the hopper's root x slide, the ant's
torso frame), Δt the task's step (`dt` x `substeps`), `healthy` evaluated after the step,
and the episode ending (`Task.done`) when not healthy, with `terminate_when_unhealthy`.
The action is MuJoCo's ctrl in [-1, 1], mapped by `MjcfImport.control` (torque actuators:
gear × ctrl about each hinge); the control cost reads the action back from the `Control`
(`MjcfCoordinates.ctrl`), so it is the action clipped to [-1, 1].

gymnasium steps MuJoCo `frame_skip` times per action (hopper 4 x 2 ms, RK4; ant 5 x 10 ms,
RK4). Our step is implicit, so the hopper takes one step of 8 ms per action (every step of
random full-scale actions converges there); the ant takes gymnasium's 5 frames of 10 ms
(`Task.substeps`; under random full-scale actions every step converges at 10, 25 and 50 ms,
4.3, 5.4 and 7.7 Newton iterations on average: the solve starts without the controls'
impulse, `terms.Context.u_start`, since the legs' 150 N m against their 1e-3 kg m² would
otherwise start it spinning them at hundreds of rad/s).

Differences from gymnasium (everything else is its formula):
- the physics is ours (soft joints and penalty contact), not MuJoCo's, on the same file;
- a torque is held fixed in the world frame over the substeps of an action (MuJoCo turns it
  with the joint axis): the ant's torso turns ~0.02 rad in 10 ms at 2 rad/s, a 0.02 %
  smaller torque about the turned axis;
- the ant's `cfrc_ext` (observation and contact cost) is the contact force of our contact
  rows after the step, only the normal law's elastic part (`observe.ContactPoints.force`:
  no contact damping, no friction), with its moment about the ant's centre of mass (MuJoCo's
  com-based frame), each body's on the body that roots its weld group (the torso's welded
  leg stubs read 0). Clipped to [-1, 1] N it is mostly a contact flag, in both.
"""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.control.coordinates import MjcfCoordinates
from jaxcontact.control.task import Task
from jaxcontact.control.tasks import Bundle
from jaxcontact.models.contacts import contact_rows


def gymnasium_asset(name: str) -> pathlib.Path:
    """gymnasium's MJCF file of a MuJoCo environment (`<name>_v5.xml` where gymnasium has
    one, else `<name>.xml`; Hopper-v5 and Ant-v5 use `hopper.xml` and `ant.xml`)."""
    try:
        import gymnasium
    except ImportError:
        raise ImportError("gymnasium's MuJoCo models: pip install gymnasium (or pass xml=)") \
            from None
    folder = pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
    for candidate in (folder / f"{name}_v5.xml", folder / f"{name}.xml"):
        if candidate.is_file():
            return candidate
    raise ValueError(f"name: gymnasium has no MuJoCo model {name!r} in {folder}")


def _number(name, value, low=None, positive=False):
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and (low is None or value >= low) and (
        not positive or value > 0)
    if not ok:
        bound = " > 0" if positive else (f" >= {low}" if low is not None else "")
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


def _interval(name, value, allow_inf=True):
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}") from None
    if math.isnan(low) or math.isnan(high) or not low < high or (
            not allow_inf and not (math.isfinite(low) and math.isfinite(high))):
        raise ValueError(f"{name} must be a pair (low, high) with low < high, got {value!r}")
    return low, high


def _int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def _load(xml, name, dt, stiffness, damping, solver, dtype):
    from jaxcontact.io.mjcf import load_mjcf

    path = gymnasium_asset(name) if xml is None else xml
    # (gymnasium's hopper and ant import with nothing left out: no MjcfWarning)
    scene, imported = load_mjcf(str(path), dt=dt, stiffness=stiffness, damping=damping)
    model, state = scene.build(solver=solver, dtype=dtype)
    return imported, model, state, MjcfCoordinates(imported, model, state)


def _act(imported):
    def act(model, state, action):
        ctrl = jnp.clip(jnp.asarray(action, state.pos.dtype), -1.0, 1.0)
        return imported.control(model, state, ctrl)
    return act


def hopper_task(*, forward_reward_weight=1.0, ctrl_cost_weight=1e-3, healthy_reward=1.0,
                terminate_when_unhealthy=True, healthy_state_range=(-100.0, 100.0),
                healthy_z_range=(0.7, math.inf), healthy_angle_range=(-0.2, 0.2),
                reset_noise_scale=5e-3, dt=0.008, substeps=1, episode_length=1000, xml=None,
                stiffness=None, damping=None, solver=None, dtype=None) -> Bundle:
    """gymnasium's Hopper-v5 (a one-legged planar hopper hops forward, +x) as a task.

    qpos (6,) = (root x, root z, root pitch, thigh, leg, foot angles), qvel (6,) their rates
    (`MjcfCoordinates`; the root z slide reads the torso frame's height).

    - action (3,): ctrl in [-1, 1] of the thigh, leg and foot motors (gear 200 N m).
    - observation (11,): qpos[1:] and clip(qvel, -10, 10) (gymnasium's, x excluded).
    - reward: forward_reward_weight · (x' - x) / Δt + healthy_reward · healthy(after)
      - ctrl_cost_weight · |a|², x the root x coordinate, Δt = dt · substeps.
    - healthy: every qpos[2:] and qvel entry strictly inside `healthy_state_range`, the
      root z strictly inside `healthy_z_range` and the pitch strictly inside
      `healthy_angle_range` (rad); `done` = not healthy, with `terminate_when_unhealthy`.
    - reset: qpos0 + U(-s, s) on every qpos, U(-s, s) on every qvel, s = reset_noise_scale.

    Args (gymnasium's, with its defaults): forward_reward_weight, ctrl_cost_weight,
      healthy_reward, terminate_when_unhealthy, healthy_state_range, healthy_z_range,
      healthy_angle_range, reset_noise_scale. Ours:
      dt: our time step, s (default 8 ms: gymnasium's 4 frames of 2 ms in one step).
      substeps: steps per action (`Task.substeps`); an action lasts dt · substeps.
      episode_length: actions per episode (gymnasium's time limit, 1000).
      xml: the MJCF file (default gymnasium's hopper.xml).
      stiffness, damping: contact penalty parameters (`load_mjcf`'s; default the library's).
      solver, dtype: `Scene.build`'s.

    Returns:
      a `Bundle` (task, observe, act, action_size = 3).
    """
    forward = _number("forward_reward_weight", forward_reward_weight)
    ctrl_weight = _number("ctrl_cost_weight", ctrl_cost_weight, low=0.0)
    alive = _number("healthy_reward", healthy_reward)
    noise = _number("reset_noise_scale", reset_noise_scale, low=0.0)
    dt = _number("dt", dt, positive=True)
    substeps = _int("substeps", substeps)
    state_lo, state_hi = _interval("healthy_state_range", healthy_state_range)
    z_lo, z_hi = _interval("healthy_z_range", healthy_z_range)
    angle_lo, angle_hi = _interval("healthy_angle_range", healthy_angle_range)
    if not isinstance(terminate_when_unhealthy, bool):
        raise ValueError(f"terminate_when_unhealthy must be a bool, got "
                         f"{terminate_when_unhealthy!r}")
    imported, model, state, coords = _load(xml, "hopper", dt, stiffness, damping, solver, dtype)
    period = dt * substeps

    def healthy(state):
        qpos, qvel = coords.qpos(state), coords.qvel(state)
        rest = jnp.concatenate([qpos[2:], qvel])
        return (jnp.all((rest > state_lo) & (rest < state_hi))
                & (qpos[1] > z_lo) & (qpos[1] < z_hi)
                & (qpos[2] > angle_lo) & (qpos[2] < angle_hi))

    def observe(model, state):
        return jnp.concatenate([coords.qpos(state)[1:], jnp.clip(coords.qvel(state), -10.0, 10.0)])

    def reward(model, state, control, next_state):
        velocity = (coords.qpos(next_state)[0] - coords.qpos(state)[0]) / period
        ctrl = coords.ctrl(model, state, control)
        return (forward * velocity + alive * healthy(next_state).astype(velocity.dtype)
                - ctrl_weight * jnp.sum(jnp.square(ctrl)))

    return _bundle(model, state, imported, coords, reward, observe, healthy, noise, False,
                   episode_length, terminate_when_unhealthy, substeps)


def contact_forces(coords: MjcfCoordinates, model, state):
    """MuJoCo's `cfrc_ext` (nbody, 6) as our contact rows give it at `state` (module
    docstring): per MuJoCo body, (moment about the model's centre of mass, force) of the
    normal contact forces on it (N m, N), each our body's on the MuJoCo body that roots it."""
    rows = contact_rows(model, state)
    dtype = state.pos.dtype
    force = rows.force[:, None] * rows.normal              # on side a, from side b
    mass = model.body.mass
    centre = jnp.sum(mass[:, None] * state.pos, axis=0) / jnp.sum(mass)
    moment = jnp.cross(rows.point - centre[None, :], force)
    n = model.n_body
    per_body = jnp.zeros((n + 1, 6), dtype)                # row n: the world, dropped
    wrench = jnp.concatenate([moment, force], axis=1)
    for side, sign in ((rows.body_a, 1.0), (rows.body_b, -1.0)):
        index = jnp.where(side >= 0, side, n)
        per_body = per_body.at[index].add(sign * wrench)
    out = jnp.zeros((coords.mj_model.nbody, 6), dtype)
    for ours, mj_body in coords.root.items():
        out = out.at[mj_body].set(per_body[ours])
    return out


def ant_task(*, forward_reward_weight=1.0, ctrl_cost_weight=0.5, contact_cost_weight=5e-4,
             healthy_reward=1.0, terminate_when_unhealthy=True, healthy_z_range=(0.2, 1.0),
             contact_force_range=(-1.0, 1.0), reset_noise_scale=0.1,
             include_cfrc_ext_in_observation=True, dt=0.01, substeps=5,
             episode_length=1000, xml=None, stiffness=None, damping=None, solver=None,
             dtype=None) -> Bundle:
    """gymnasium's Ant-v5 (a four-legged ant walks forward, +x) as a task.

    qpos (15,) = (torso position 3, quaternion 4, 8 hinge angles), qvel (14,) = (torso
    frame velocity, world frame 3; angular velocity, torso frame 3; 8 hinge rates)
    (`MjcfCoordinates`).

    - action (8,): ctrl in [-1, 1] of the 8 hip and ankle motors (gear 150 N m), in the
      file's actuator order.
    - observation (105,): qpos[2:], qvel, and clip(cfrc_ext[1:], contact_force_range)
      flattened (13 bodies x 6), without it (27,) if not `include_cfrc_ext_in_observation`.
    - reward: forward_reward_weight · (x' - x) / Δt + healthy_reward · healthy(after)
      - ctrl_cost_weight · |a|² - contact_cost_weight · |clip(cfrc_ext, range)|² (after),
      x the torso frame's x, Δt = dt · substeps.
    - healthy: qpos and qvel finite, and healthy_z_range[0] <= torso z <= [1];
      `done` = not healthy, with `terminate_when_unhealthy`.
    - reset: qpos0 + U(-s, s) on every qpos (the quaternion then normalized), s N(0, 1) on
      every qvel, s = reset_noise_scale.

    Args (gymnasium's, with its defaults): forward_reward_weight, ctrl_cost_weight,
      contact_cost_weight, healthy_reward, terminate_when_unhealthy, healthy_z_range,
      contact_force_range, reset_noise_scale, include_cfrc_ext_in_observation. Ours:
      dt: our time step, s (default 10 ms, gymnasium's frame).
      substeps: steps per action (default 5: gymnasium's 5 frames of 10 ms).
      episode_length, xml, stiffness, damping, solver, dtype: as `hopper_task`.

    Returns:
      a `Bundle` (task, observe, act, action_size = 8).
    """
    forward = _number("forward_reward_weight", forward_reward_weight)
    ctrl_weight = _number("ctrl_cost_weight", ctrl_cost_weight, low=0.0)
    contact_weight = _number("contact_cost_weight", contact_cost_weight, low=0.0)
    alive = _number("healthy_reward", healthy_reward)
    noise = _number("reset_noise_scale", reset_noise_scale, low=0.0)
    dt = _number("dt", dt, positive=True)
    substeps = _int("substeps", substeps)
    z_lo, z_hi = _interval("healthy_z_range", healthy_z_range)
    f_lo, f_hi = _interval("contact_force_range", contact_force_range, allow_inf=False)
    for name, flag in (("terminate_when_unhealthy", terminate_when_unhealthy),
                       ("include_cfrc_ext_in_observation", include_cfrc_ext_in_observation)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    imported, model, state, coords = _load(xml, "ant", dt, stiffness, damping, solver, dtype)
    period = dt * substeps
    torso = 1   # gymnasium's main_body

    def clipped_forces(model, state):
        return jnp.clip(contact_forces(coords, model, state), f_lo, f_hi)

    def healthy(state):
        qpos, qvel = coords.qpos(state), coords.qvel(state)
        finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
        return finite & (qpos[2] >= z_lo) & (qpos[2] <= z_hi)

    def observe(model, state):
        parts = [coords.qpos(state)[2:], coords.qvel(state)]
        if include_cfrc_ext_in_observation:
            parts.append(jnp.reshape(clipped_forces(model, state)[1:], (-1,)))
        return jnp.concatenate(parts)

    def reward(model, state, control, next_state):
        velocity = (coords.frames(next_state)[0][torso, 0]
                    - coords.frames(state)[0][torso, 0]) / period
        ctrl = coords.ctrl(model, state, control)
        contact = jnp.sum(jnp.square(clipped_forces(model, next_state)))
        return (forward * velocity + alive * healthy(next_state).astype(velocity.dtype)
                - ctrl_weight * jnp.sum(jnp.square(ctrl)) - contact_weight * contact)

    return _bundle(model, state, imported, coords, reward, observe, healthy, noise, True,
                   episode_length, terminate_when_unhealthy, substeps)


def _bundle(model, state, imported, coords, reward, observe, healthy, noise, gaussian_velocity,
            episode_length, terminate_when_unhealthy, substeps) -> Bundle:
    """The `Bundle` of a locomotion task: reset noise on MuJoCo's qpos (uniform ±noise) and
    qvel (uniform ±noise, or noise·N(0, 1) where `gaussian_velocity`: Ant-v5), done when not
    healthy (with `terminate_when_unhealthy`)."""
    nq, nv = imported.mj_model.nq, imported.mj_model.nv

    def reset(model, state, key):
        k_pos, k_vel = jax.random.split(key)
        dtype_ = state.pos.dtype
        qpos = (jnp.asarray(coords.qpos_build, dtype_)
                + jax.random.uniform(k_pos, (nq,), dtype_, -noise, noise))
        qvel = (noise * jax.random.normal(k_vel, (nv,), dtype_) if gaussian_velocity
                else jax.random.uniform(k_vel, (nv,), dtype_, -noise, noise))
        return model, coords.state(state, qpos, qvel)

    def done(model, state):
        return ~healthy(state)

    task = Task(model=model, state=state, reward=reward, episode_length=episode_length,
                reset=reset, done=done if terminate_when_unhealthy else None,
                substeps=substeps)
    return Bundle(task=task, observe=observe, act=_act(imported), action_size=imported.mj_model.nu)
