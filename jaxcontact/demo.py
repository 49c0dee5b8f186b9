"""The `jaxcontact demo` job: a randomized batch and a gradient-based throw, end to end.

Two parts, each a real (small) job on the default CPU install:

1. `throw_batch`: B scenes, each a box and a sphere thrown onto the ground with random
   positions, velocities, spins, headings, masses and friction (`jc.randomize`), simulated
   with one `jax.vmap`-ed `jc.rollout` in float32. Reports throughput (scene-steps per second,
   with and without compilation) and physical sanity (bodies on the ground at the end, final
   heights, solver convergence from `StepInfo`).
2. `optimize_bounce`: the launch velocity (vx, vz) of a ball thrown from (0, 0, 0.5) is fitted
   by gradient descent (optax) so that it lands on a target after exactly one bounce. The loss
   is the squared distance from the target to the landing point (`landing_x`); its gradient
   comes from `jax.value_and_grad` through `jc.rollout`, i.e. from the implicit-function-theorem
   rule of every step. Runs in float64.

`run_demo` runs both, prints a short report and writes every number to a JSON file. Part 2
needs float64, so callers enable `jax_enable_x64` before anything else (the CLI does); part 1
builds its scene explicitly in float32 and is unaffected by that setting.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import platform
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcontact.compiling import jit
from jaxcontact.models.contact import damping_to_restitution, restitution_to_damping
from jaxcontact.parallel import map_batch, shard_batch
from jaxcontact.randomize import randomize
from jaxcontact.scene import Scene
from jaxcontact.step import rollout
from jaxcontact.types import Result

DT = 0.002
HALF = 0.05      # box half size, m
RADIUS = 0.05    # sphere and ball radius, m

# Part 1: what is thrown. Bodies start 5-11 cm above their resting height, anywhere in a 10 cm
# square, with any heading, and are thrown sideways and down with a spin.
THROW_RANGES = dict(
    mass=(0.5, 2.0), friction=(0.3, 1.0),
    pos=((-0.05, -0.05, 0.0), (0.05, 0.05, 0.06)),
    vel=((-1.0, -1.0, -1.0), (1.0, 1.0, 0.5)), ang_vel=(-6.0, 6.0), yaw=(-math.pi, math.pi))
# A body is "on the ground" at the end when its centre is within this distance of its resting
# height (box on a face, sphere touching) and it no longer moves vertically; "at rest" when it
# also neither slides nor spins (a sphere on a frictional plane keeps rolling, so spheres are
# reported as on the ground rather than at rest).
_GROUND_TOL = 0.005   # m: the largest resting penetration here is m g / k = 0.2 mm
_STILL_VEL = 0.05     # m/s
_STILL_SPIN = 0.5     # rad/s


# --- part 1: a randomized batch ----------------------------------------------------------

def throw_scene(dtype=jnp.float32):
    """The scene every batch member starts from: a box and a sphere above the ground plane.

    Args:
      dtype: float dtype of the arrays.

    Returns:
      (model, state): body 0 is the box (half size 0.05 m, 1 kg) at (0, 0, 0.1), body 1 the
      sphere (radius 0.05 m, 1 kg) at (0.3, 0, 0.1); k_n = 1e5 N/m, k_d = 300 N s/m.
    """
    scene = Scene(dt=DT, friction=0.6, stiffness=1e5, damping=300.0)
    scene.add_plane()
    scene.add_box(half_size=HALF, mass=1.0, pos=(0.0, 0.0, 0.1))
    scene.add_sphere(radius=RADIUS, mass=1.0, pos=(0.3, 0.0, 0.1))
    return scene.build(dtype=dtype)


def _throw_rollout(model, state, *, steps):
    """One scene: final state and per-scene reductions of the step infos."""
    final, _, info = rollout(model, state, steps=steps, return_info=True)
    summary = {
        "converged_steps": jnp.sum(info.converged.astype(jnp.int32)),
        "iterations": jnp.sum(info.iterations),
        "max_iterations": jnp.max(info.iterations),
        "nonfinite_steps": jnp.sum((info.result == Result.NONFINITE).astype(jnp.int32)),
        "max_penetration": jnp.max(info.max_penetration),
    }
    return final, summary


def _shard_batch(tree, batch):
    """Spread the batch axis over all local devices when it divides evenly (`jc.shard_batch`).

    On a CPU-only install each device is a thread (see `jax_num_cpu_devices`); the scenes are
    independent, and `jc.map_batch` runs each device's slice on its own.
    """
    devices = len(jax.devices())
    if devices < 2 or batch % devices:
        return tree, 1
    return shard_batch(tree), devices


def throw_batch(batch=1024, steps=150, seed=0):
    """Simulate `batch` randomized box-and-sphere throws with one vmapped rollout (float32).

    Args:
      batch: number of scenes B.
      steps: number of steps T of dt = 0.002 s.
      seed: PRNG seed of the randomization.

    Returns:
      A dict of plain numbers: timings (compile_s, run_s), throughput (scene-steps/s with and
      without compilation), solver statistics over all B*T steps, and the physical summary of
      the final states (fractions on the ground / at rest, mean final heights).
    """
    model, state = throw_scene(jnp.float32)
    t0 = time.perf_counter()
    models, states = randomize(model, state, jax.random.PRNGKey(seed), batch, **THROW_RANGES)
    (models, states), n_dev = _shard_batch((models, states), batch)
    jax.block_until_ready((models, states))
    t_sample = time.perf_counter() - t0

    run = jax.vmap(partial(_throw_rollout, steps=steps))
    # several devices: each its own slice and loops (`jc.map_batch`; GSPMD's partitioning of
    # the same program agrees across devices on every solver iteration, design note 60)
    run = jit(map_batch(run) if n_dev > 1 else run)
    t0 = time.perf_counter()
    compiled = run.lower(models, states).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    final, summary = jax.block_until_ready(compiled(models, states))
    t_run = time.perf_counter() - t0

    final, summary = jax.tree.map(np.asarray, (final, summary))
    masses = np.asarray(models.body.mass)
    total = batch * steps
    z, vel, spin = final.pos[..., 2], final.vel, final.ang_vel
    speed = np.linalg.norm(vel, axis=-1)
    spin_rate = np.linalg.norm(spin, axis=-1)
    rest_height = np.array([HALF, RADIUS])[None, :]
    on_ground = (np.abs(z - rest_height) < _GROUND_TOL) & (np.abs(vel[..., 2]) < _STILL_VEL)
    at_rest = on_ground & (speed < _STILL_VEL) & (spin_rate < _STILL_SPIN)
    finite = np.all(np.isfinite(final.pos), axis=(-1, -2))
    return {
        "batch": batch, "steps": steps, "dt": DT, "simulated_time_s": steps * DT,
        "dtype": "float32", "devices": n_dev, "seed": seed,
        "ranges": {k: np.asarray(v, dtype=float).tolist() for k, v in THROW_RANGES.items()},
        "sample_s": t_sample, "compile_s": t_compile, "run_s": t_run,
        "scene_steps": total,
        "scene_steps_per_s": total / t_run,
        "scene_steps_per_s_with_compile": total / (t_compile + t_run),
        "converged_fraction": float(summary["converged_steps"].sum() / total),
        "mean_newton_iterations": float(summary["iterations"].sum() / total),
        "max_newton_iterations": int(summary["max_iterations"].max()),
        "nonfinite_steps": int(summary["nonfinite_steps"].sum()),
        "finite_scene_fraction": float(finite.mean()),
        "max_penetration_m": float(summary["max_penetration"].max()),
        "on_ground_fraction": float(on_ground.mean()),
        "box_on_ground_fraction": float(on_ground[:, 0].mean()),
        "sphere_on_ground_fraction": float(on_ground[:, 1].mean()),
        "box_at_rest_fraction": float(at_rest[:, 0].mean()),
        "mean_final_height_m": {"box": float(z[:, 0].mean()), "sphere": float(z[:, 1].mean())},
        "mean_final_speed_m_s": {"box": float(speed[:, 0].mean()),
                                 "sphere": float(speed[:, 1].mean())},
        "mass_range_sampled": [float(masses.min()), float(masses.max())],
    }


# --- part 2: fit a throw through one bounce ----------------------------------------------

def bounce_scene(restitution=0.9, stiffness=1e4, friction=0.5, dtype=jnp.float64):
    """A ball (radius 0.05 m, 1 kg) at (0, 0, 0.5) above the ground plane.

    The contact damping of ball and ground is `restitution_to_damping(restitution, stiffness,
    1 kg)` (the damped law's restitution). That law is for the continuous contact: the implicit step adds its own
    dissipation, so the bounce measured in the simulation is lower (see `optimize_bounce`).

    Args:
      restitution: coefficient e of the continuous damped contact, in (0, 1].
      stiffness: k_n of ball and ground, N/m (soft enough that a bounce spans ~15 steps).
      friction: Coulomb μ of ball and ground.
      dtype: float dtype.

    Returns:
      (model, state) with the ball at rest; the launch velocity is set by the loss.
    """
    damping = float(restitution_to_damping(restitution, stiffness, 1.0))
    scene = Scene(dt=DT, friction=friction, stiffness=stiffness, damping=damping)
    scene.add_plane()
    scene.add_sphere(radius=RADIUS, mass=1.0, pos=(0.0, 0.0, 0.5))
    return scene.build(dtype=dtype)


def landing_x(pos, radius=RADIUS):
    """Where a thrown ball lands after exactly one bounce.

    The landing is the second time the centre height descends through `radius` (the first is
    the bounce), located within its step by linear interpolation of the height. While the
    trajectory keeps the same number of crossings, the result is continuous in it (when the
    crossing moves to the next step the interpolation hands over at the shared sample) and
    smooth between such hand-overs.

    Args:
      pos: (T, 3) ball centre at each step.
      radius: ball radius, m.

    Returns:
      (x, found): x of the landing point, () ; found, () bool, whether the trajectory contains
      a second descending crossing (if not, x is the last x).
    """
    gap = pos[:, 2] - radius
    down = (gap[:-1] > 0.0) & (gap[1:] <= 0.0)
    count = jnp.cumsum(down.astype(jnp.int32))
    found = count[-1] >= 2
    k = jnp.argmax(count >= 2)  # the interval (k, k + 1) of the second crossing
    g0, g1 = gap[k], gap[k + 1]
    # g0 > 0 >= g1 on a crossing; the placeholder keeps the division finite otherwise
    frac = g0 / jnp.where(found, g0 - g1, 1.0)
    x = pos[k, 0] + frac * (pos[k + 1, 0] - pos[k, 0])
    return jnp.where(found, x, pos[-1, 0]), found


def bounce_loss(launch, model, state, target, steps):
    """Squared miss of the landing point: (landing_x - target)².

    Args:
      launch: (2,) launch velocity (vx, vz), m/s.
      model, state: from `bounce_scene`.
      target: () x of the target on the ground, m.
      steps: rollout length (must contain the landing).

    Returns:
      (loss, (x, found, vz)): the loss (), the landing x and found flag of `landing_x`, and
      the ball's vertical velocity at each step (T,).
    """
    zero = jnp.zeros((), launch.dtype)
    vel = jnp.stack([launch[0], zero, launch[1]])[None, :]
    _, traj = rollout(model, state.replace(vel=vel), steps=steps)
    x, found = landing_x(traj.pos[:, 0, :])
    return (x - target) ** 2, (x, found, traj.vel[:, 0, 2])


def optimize_bounce(target=1.0, launch=(0.3, 0.5), iterations=30, learning_rate=0.5,
                    steps=450, restitution=0.9, stiffness=1e4):
    """Fit the launch velocity (vx, vz) so that the ball lands on `target` after one bounce.

    Gradient descent (`optax.sgd` after clipping the gradient norm to 1) on `bounce_loss`,
    with gradients from `jax.value_and_grad` through the rollout (implicit gradients of every
    step). The loss is one squared residual of two parameters, so its minima form a valley
    (every throw that lands on the target). Plain gradient descent converges linearly into it
    (measured: loss 0.65 -> 6e-10, a miss of 0.02 mm, in 20 steps; below that the landing
    point is no longer smooth at the scale of the step timing of the bounce), whereas Adam's
    per-coordinate steps oscillate across the valley and stalled at misses of 1-50 mm in 40
    iterations (learning rates 0.1-0.2, with decays).

    Args:
      target: x of the landing target, m.
      launch: (2,) initial guess (vx, vz), m/s.
      iterations: gradient steps.
      learning_rate: step size (m/s per unit gradient; the gradient has units m²/(m/s)).
      steps: rollout length T (dt = 0.002 s).
      restitution, stiffness: contact of `bounce_scene`.

    Returns:
      A dict of plain numbers: loss curve, landing points, final launch velocity and miss,
      timings (compile_s, mean time per iteration), and the bounce actually simulated
      (restitution requested vs measured).
    """
    if not jax.config.jax_enable_x64:
        raise RuntimeError("optimize_bounce runs in float64: call "
                           "jax.config.update('jax_enable_x64', True) at startup")
    model, state = bounce_scene(restitution, stiffness, dtype=jnp.float64)
    # clipping bounds a step to learning_rate m/s far from the target
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(learning_rate))
    params = jnp.asarray(launch, jnp.float64)
    opt_state = opt.init(params)
    target = jnp.asarray(target, jnp.float64)

    @jit
    def update(params, opt_state):
        (loss, (x, found, vz)), grad = jax.value_and_grad(bounce_loss, has_aux=True)(
            params, model, state, target, steps)
        updates, opt_state = opt.update(grad, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, x, found, grad, vz

    t0 = time.perf_counter()
    compiled = update.lower(params, opt_state).compile()
    t_compile = time.perf_counter() - t0
    history = []
    t0 = time.perf_counter()
    for _ in range(iterations):
        new_params, opt_state, loss, x, found, grad, _ = compiled(params, opt_state)
        history.append({"vx": float(params[0]), "vz": float(params[1]), "loss": float(loss),
                        "landing_x": float(x), "found": bool(found),
                        "grad": [float(g) for g in grad]})
        params = new_params
    t_iter = (time.perf_counter() - t0) / iterations

    # the fitted throw, evaluated once more (same compiled program: its loss is at `params`)
    _, _, loss, x, found, _, vz = compiled(params, opt_state)
    final = {"vx": float(params[0]), "vz": float(params[1]), "loss": float(loss),
             "landing_x": float(x), "found": bool(found)}
    return {
        "target_x": float(target), "initial_launch": [float(v) for v in launch],
        "iterations": iterations, "learning_rate": learning_rate, "steps": steps, "dt": DT,
        "dtype": "float64", "stiffness": stiffness,
        "damping": float(model.geom.damping[0]),
        "restitution_requested": restitution,
        "restitution_of_damping": float(damping_to_restitution(model.geom.damping[0],
                                                               stiffness, 1.0)),
        "restitution_simulated": measured_restitution(np.asarray(vz)),
        "compile_s": t_compile, "seconds_per_iteration": t_iter,
        "initial_loss": history[0]["loss"], "final_loss": final["loss"],
        "initial_miss_m": abs(history[0]["landing_x"] - float(target)),
        "final_miss_m": abs(final["landing_x"] - float(target)),
        "final": final, "history": history,
    }


def measured_restitution(vz, window=50):
    """Restitution of the first bounce as simulated: rebound speed / impact speed.

    Args:
      vz: (T,) vertical velocity of a ball dropped or thrown onto the ground.
      window: steps after the impact within which the ball leaves the ground.

    Returns:
      The fastest upward speed within `window` steps of the fastest descent (the speed at
      separation: after it, gravity only slows the ball), over that descent speed.
    """
    impact = int(np.argmin(vz))   # fastest descent: the step before the contact decelerates it
    return float(np.max(vz[impact:impact + window]) / -vz[impact])


# --- the whole job -------------------------------------------------------------------------

def run_demo(batch=1024, out="results/demo.json", seed=0, steps=150, opt_iterations=30,
             verbose=True):
    """Run both parts, print a report and write all numbers to `out` (JSON).

    Args:
      batch: scenes in the randomized batch (part 1).
      out: path of the JSON file (parent folders are created).
      seed: PRNG seed of part 1.
      steps: steps of part 1 (dt = 0.002 s).
      opt_iterations: gradient steps of part 2.
      verbose: print the report.

    Returns:
      The dict written to `out`.
    """
    t_start = time.perf_counter()
    say = print if verbose else (lambda *a, **k: None)
    say(f"jaxcontact demo: jax {jax.__version__} on {jax.devices()[0].platform} "
        f"({len(jax.devices())} device(s), {os.cpu_count()} cores)")
    say(f"[1/2] {batch} randomized scenes (box + sphere thrown on the ground), {steps} steps "
        f"of {DT} s, float32 ...", flush=True)
    part1 = throw_batch(batch, steps, seed)
    say(f"      compile {part1['compile_s']:.1f} s, run {part1['run_s']:.1f} s: "
        f"{part1['scene_steps_per_s']:,.0f} scene-steps/s "
        f"({part1['scene_steps_per_s_with_compile']:,.0f} with compile)")
    say(f"      solver: {100 * part1['converged_fraction']:.2f}% of steps converged, "
        f"{part1['mean_newton_iterations']:.2f} Newton iterations per step on average, "
        f"{part1['nonfinite_steps']} non-finite; max penetration "
        f"{1e3 * part1['max_penetration_m']:.2f} mm")
    h = part1["mean_final_height_m"]
    say(f"      after {part1['simulated_time_s']:.2f} s: {100 * part1['on_ground_fraction']:.1f}%"
        f" of bodies on the ground (boxes {100 * part1['box_on_ground_fraction']:.1f}%, "
        f"spheres {100 * part1['sphere_on_ground_fraction']:.1f}%), boxes at rest "
        f"{100 * part1['box_at_rest_fraction']:.1f}%; mean height box {h['box']:.4f} m, "
        f"sphere {h['sphere']:.4f} m")

    say(f"[2/2] fit a throw (vx, vz) from (0, 0, 0.5) to land at x = 1.0 m after one bounce "
        f"(gradient descent, {opt_iterations} iterations, gradients through the rollout, "
        f"float64) ...",
        flush=True)
    part2 = optimize_bounce(iterations=opt_iterations)
    hist = part2["history"]
    marks = sorted({i for i in (0, 2, 5, 10, 20) if i < len(hist)} | {len(hist) - 1})
    say(f"      compile {part2['compile_s']:.1f} s, {1e3 * part2['seconds_per_iteration']:.0f}"
        f" ms per iteration (value and gradient)")
    for i in marks:
        say(f"      iter {i:3d}: loss {hist[i]['loss']:.3e}  (vx, vz) = "
            f"({hist[i]['vx']:.4f}, {hist[i]['vz']:.4f})  lands at x = "
            f"{hist[i]['landing_x']:.4f} m")
    fin = part2["final"]
    say(f"      final:    loss {fin['loss']:.3e}  (vx, vz) = ({fin['vx']:.4f}, {fin['vz']:.4f})"
        f"  miss {1e3 * part2['final_miss_m']:.3f} mm (initial miss "
        f"{1e3 * part2['initial_miss_m']:.0f} mm)")
    say(f"      bounce: restitution {part2['restitution_requested']} requested (continuous contact), "
        f"{part2['restitution_simulated']:.3f} simulated at dt = {DT} s")

    report = {
        "jax_version": jax.__version__, "backend": jax.devices()[0].platform,
        "devices": len(jax.devices()), "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "throw_batch": part1, "optimize_bounce": part2,
        "total_s": time.perf_counter() - t_start,
    }
    path = pathlib.Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    say(f"done in {report['total_s']:.1f} s; wrote {path}")
    return report
