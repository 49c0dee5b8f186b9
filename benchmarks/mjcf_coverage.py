"""Every MuJoCo model of gymnasium's assets and dm_control's suite through `jc.io.load_mjcf`: what
imports, what is named as not imported, whether one second runs converged, passive and under
random controls, and its speed against MJX's at B = 64.

For each model: import it (dm_control's suite models are generated in Python: the first task
of each domain is loaded with `dm_control.suite.load` and its compiled `MjModel` imported;
dm_control is optional, its models are skipped where it is missing), recording the
`MjcfWarning`'s lines; build it (float32 unless `--float64`); run `--seconds` of passive
steps at the file's own time step for `--batch` scenes, each starting at the model's
initial pose with every body spun by N(0, 0.1²) rad/s (seeded), and record the share of
converged steps, the largest Newton iteration count, whether the final state is finite,
compile time and scene-steps/s, and the share of steps whose broad phase overflowed; then the
same second under random controls (each step every actuator's ctrl uniform in its
ctrlrange, or [-1, 1] where it has none, through `MjcfImport.control`), its converged share,
overflow share and finiteness; then, unless `--skip-speed`,
`--speed-steps` passive steps of `--speed-batch` scenes, ours and MJX's
(`benchmarks.mjcf_models.run_mjx`, the file's own solver settings, in a process of its own
given `--mjx-timeout` seconds) one after the other, and their ratio. A model that fails to import or build is recorded with its error, and the next
one runs.

Writes results/<name>.json and prints the table (model, bodies, DOFs, lines not imported,
converged share).

Usage:
    python -m benchmarks.mjcf_coverage [--models hopper dmc/cartpole ...] [--seconds 1]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from benchmarks._common import jax_provenance, log, write_results
from benchmarks.mjcf_models import assets


def sources():
    """(name, source) of every model: gymnasium's files, then dm_control's domains."""
    out = [(path.stem, str(path)) for path in sorted(assets().glob("*.xml"))]
    try:
        from dm_control import suite
    except ImportError:
        log("dm_control is not installed: its suite's models are skipped")
        return out
    first = {}
    for domain, task in suite.ALL_TASKS:
        first.setdefault(domain, task)
    for domain, task in sorted(first.items()):
        out.append((f"dmc/{domain}", (domain, task)))
    return out


def compiled(source):
    if isinstance(source, tuple):
        from dm_control import suite
        return suite.load(*source).physics.model._model
    return source


def run_one(name, source, seconds, batch, dtype, seed, speed_batch, speed_steps,
            mjx_timeout=300, contact="penalty", passive=True):
    """One model's row: import, build, and (where `passive`) a passive rollout, then one
    under random controls, each `seconds` long over `batch` scenes; with `speed_batch`, the
    speed at that batch against MJX."""
    import jax
    import jax.numpy as jnp
    import jaxcontact as jc
    from jaxcontact.compiling import best_time

    row = {"model": name}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)   # its lines: info.skipped
        scene, info = jc.io.load_mjcf(compiled(source), contact=contact)
    row["not_imported"] = list(info.skipped)
    model, state = scene.build(dtype=dtype)
    m = info.mj_model
    steps = max(1, int(round(seconds / float(model.dt))))
    row.update(bodies=model.n_body, mujoco_dofs=int(m.nv), dt=float(model.dt), steps=steps)
    spin = 0.1 * jax.random.normal(jax.random.PRNGKey(seed), (batch,) + state.ang_vel.shape,
                                   dtype)
    states = jax.vmap(lambda w: state.replace(ang_vel=state.ang_vel + w))(spin)

    def run(states):
        return jax.vmap(lambda s: jc.rollout(model, s, steps=steps, return_info=True))(states)

    if passive:
        t0 = time.perf_counter()
        program = jc.jit(run).lower(states).compile()
        row["compile_s"] = round(time.perf_counter() - t0, 2)
        best, (final, _, step_info) = best_time(program, states, repeats=1)
        row.update(steps_per_s=batch * steps / best,
                   converged=float(np.mean(np.asarray(step_info.converged))),
                   iterations_max=int(np.max(np.asarray(step_info.iterations))),
                   overflow=float(np.mean(np.asarray(step_info.overflow))),
                   finite=bool(np.all(np.isfinite(np.asarray(final.pos)))))

    # random controls: ctrl ~ U(ctrlrange) (or U(-1, 1)) afresh each step
    limited = np.asarray(m.actuator_ctrllimited, bool)
    ranges = np.where(limited[:, None], np.asarray(m.actuator_ctrlrange, float), [-1.0, 1.0])
    low, high = jnp.asarray(ranges[:, 0], dtype), jnp.asarray(ranges[:, 1], dtype)

    def policy(_, s, key):
        return info.control(model, s, jax.random.uniform(key, low.shape, dtype, low, high))

    def driven(states, keys):
        return jax.vmap(lambda s, k: jc.rollout(model, s, steps=steps, policy=policy, key=k,
                                                return_info=True))(states, keys)

    keys = jax.random.split(jax.random.PRNGKey(seed + 1), batch)
    final, _, step_info = jc.jit(driven)(states, keys)
    row.update(random_converged=float(np.mean(np.asarray(step_info.converged))),
               random_iterations_max=int(np.max(np.asarray(step_info.iterations))),
               random_overflow=float(np.mean(np.asarray(step_info.overflow))),
               random_finite=bool(np.all(np.isfinite(np.asarray(final.pos)))))

    if speed_batch:
        spin = 0.1 * jax.random.normal(jax.random.PRNGKey(seed), (speed_batch,)
                                       + state.ang_vel.shape, dtype)
        many = jax.vmap(lambda w: state.replace(ang_vel=state.ang_vel + w))(spin)

        def timed(states):
            return jax.vmap(lambda s: jc.rollout(model, s, steps=speed_steps))(states)

        t0 = time.perf_counter()
        program = jc.jit(timed).lower(many).compile()
        ours = {"compile_s": round(time.perf_counter() - t0, 2)}
        best, _ = best_time(program, many, repeats=2)
        ours["steps_per_s"] = speed_batch * speed_steps / best
        row["speed"] = {"batch": speed_batch, "steps": speed_steps, "ours": ours}
        mjx = mjx_in_subprocess(source, speed_batch, speed_steps, seed, mjx_timeout)
        if "steps_per_s" in mjx:
            row["speed"].update(mjx=mjx, ratio=ours["steps_per_s"] / mjx["steps_per_s"])
        else:                          # a model MJX cannot take, or not in the time given
            row["speed"]["mjx_error"] = mjx["error"]
    return row


def mjx_in_subprocess(source, batch, steps, seed, timeout):
    """`benchmarks.mjcf_models.run_mjx` in its own process, given `timeout` seconds (MJX on
    some models, e.g. gymnasium's pusher with its cylinder and meshes, runs minutes per step
    on a CPU): its result, or {"error": why}."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from benchmarks.mjcf_coverage import compiled; "
            "from benchmarks.mjcf_models import run_mjx; "
            f"m = compiled({source!r}); import mujoco; "
            "m = m if isinstance(m, mujoco.MjModel) else mujoco.MjModel.from_xml_path(m); "
            f"print(json.dumps(run_mjx(m, {batch}, {steps}, 2, {seed})))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "MUJOCO_GL": "disable"})
    except subprocess.TimeoutExpired:
        return {"error": f"MJX did not finish {batch} x {steps} steps (compile included) "
                         f"in {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", help="names as in the table (default: all)")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--float64", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed-batch", type=int, default=64)
    p.add_argument("--speed-steps", type=int, default=50)
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--mjx-timeout", type=float, default=300.0,
                   help="seconds MJX is given per model (its own process)")
    p.add_argument("--contact", choices=["penalty", "mujoco"], default="penalty",
                   help="load_mjcf's contact: our penalty defaults or the files' solref / solimp")
    p.add_argument("--name", default="mjcf_coverage")
    args = p.parse_args()

    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    dtype = jnp.float64 if args.float64 else jnp.float32
    rows = []
    for name, source in sources():
        if args.models and name not in args.models:
            continue
        try:
            row = run_one(name, source, args.seconds, args.batch, dtype, args.seed,
                          0 if args.skip_speed else args.speed_batch, args.speed_steps,
                          args.mjx_timeout, args.contact)
        except Exception as error:      # recorded, and the next model runs
            row = {"model": name, "error": f"{type(error).__name__}: {error}"[:500]}
        jax.clear_caches()
        rows.append(row)
        # (written after every model, so that a long run interrupted keeps what it measured)
        write_results({"benchmark": "mjcf_coverage", "provenance": jax_provenance(),
                       "settings": vars(args), "dtype": str(jnp.dtype(dtype)), "rows": rows,
                       "partial": True}, args.name + ".partial")
        if "error" in row:
            log(f"{name}: FAILED {row['error']}")
        else:
            log(f"{name}: {row['bodies']} bodies, {row['mujoco_dofs']} DOFs, "
                f"{len(row['not_imported'])} not imported, converged "
                f"{100 * row['converged']:.1f} % passive, {100 * row['random_converged']:.1f} "
                f"% random controls, overflow {100 * row['overflow']:.1f} % / "
                f"{100 * row['random_overflow']:.1f} %, finite "
                f"{row['finite'] and row['random_finite']}, compile "
                f"{row['compile_s']:.0f} s"
                + (f", {row['speed'].get('ratio', float('nan')):.2f}x MJX at B = "
                   f"{row['speed']['batch']}" if "speed" in row else ""))
    write_results({"benchmark": "mjcf_coverage", "provenance": jax_provenance(),
                   "settings": vars(args), "dtype": str(jnp.dtype(dtype)), "rows": rows},
                  args.name)


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("MUJOCO_GL", "disable")
    main()
