"""gymnasium's MuJoCo models through `jc.io.from_mjcf`, run passively, beside MJX on the same file.

For each model (gymnasium's assets: humanoid, hopper, reacher, ant, ...): import it (the
import's warnings are recorded), build it with the library's defaults (float32 unless
`--float64`), and run B scenes for `--steps` steps at the file's own time step, each scene
starting from the model's initial pose with joint velocities ~ N(0, 0.1²) (seeded), no
control. Recorded: compile time of the jitted batched rollout (lower + compile), the best of
`--repeats` runs (scene-steps/s), the share of converged steps and Newton's iterations. Then
MJX (`mujoco.mjx`, MuJoCo's default solver settings for the file, the same initial velocity
noise) on the same file, batch and steps, in the same process: compile time and
scene-steps/s, and the ratio jaxcontact / MJX.

`--devices D` splits the host CPU into D XLA devices and shards both simulators' batches
over them (`jc.parallel.shard_batch` and `jc.map_batch` for ours, the same `NamedSharding`
for MJX's initial velocities, partitioned by GSPMD): each device steps its slice on its own thread. Without it (default) XLA's
intra-op threads are the only parallelism, which MJX's large batched operations use and our
per-scene working sets (`solvers.loop`) do not (design note 60).

Writes results/<name>.json.

Usage:
    python -m benchmarks.mjcf_models --models humanoid --batch 16 64 --steps 100
    python -m benchmarks.mjcf_models --models hopper reacher ant --batch 1 --steps 200 --skip-mjx
    python -m benchmarks.mjcf_models --models humanoid --batch 16 64 --devices 2
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time
import warnings

import numpy as np

from benchmarks._common import jax_provenance, jit, log, write_results  # noqa: E402


def assets():
    import gymnasium

    return pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"


def run_ours(path, batch, steps, dtype, repeats, seed):
    import jax
    import jaxcontact as jc
    from jaxcontact.compiling import best_time

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", jc.io.MjcfWarning)
        scene = jc.io.from_mjcf(str(path))
    model, state = scene.build(dtype=dtype)
    key = jax.random.PRNGKey(seed)
    k1, k2 = jax.random.split(key)
    # a small random spin of every body about its own centre (joint velocities are not our
    # coordinates: bodies are maximal coordinates, joints penalties)
    spin = 0.1 * jax.random.normal(k1, (batch,) + state.ang_vel.shape, dtype)
    states = jc.parallel.shard_batch(
        jax.vmap(lambda w: state.replace(ang_vel=state.ang_vel + w))(spin))

    def run(states):
        return jax.vmap(lambda s: jc.rollout(model, s, steps=steps, return_info=True))(states)

    if len(jax.devices()) > 1:   # each device its slice, its loops its own (jc.map_batch)
        run = jc.map_batch(run)

    t0 = time.perf_counter()
    compiled = jit(run).lower(states).compile()
    compile_s = time.perf_counter() - t0
    best, (final, _, info) = best_time(compiled, states, repeats=repeats)
    iterations = np.asarray(info.iterations)
    return {"warnings": sorted({str(w.message).split(":")[0] for w in caught}),
            "bodies": model.n_body, "dt": float(model.dt), "compile_s": round(compile_s, 2),
            "run_s": round(best, 3), "steps_per_s": batch * steps / best,
            "converged": float(np.mean(np.asarray(info.converged))),
            "iterations_mean": float(iterations.mean()), "iterations_max": int(iterations.max()),
            "finite": bool(np.all(np.isfinite(np.asarray(final.pos))))}


def run_mjx(path, batch, steps, repeats, seed):
    """MJX's rollout of the model at `path` (or a compiled `mujoco.MjModel`, changed in place
    where MJX needs it): `batch` scenes of `steps` steps from qpos0, qvel ~ N(0, 0.1²)."""
    import jax
    import mujoco
    from mujoco import mjx

    from jaxcontact.compiling import best_time

    m = path if isinstance(path, mujoco.MjModel) else mujoco.MjModel.from_xml_path(str(path))
    changed = {}
    if m.opt.solver == mujoco.mjtSolver.mjSOL_PGS:   # MJX has no PGS: MuJoCo's default solver
        m.opt.solver, m.opt.iterations, m.opt.ls_iterations = mujoco.mjtSolver.mjSOL_NEWTON, 100, 50
        changed["solver"] = "PGS -> Newton (MuJoCo's defaults: iterations 100, ls 50)"
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)
    qvel = 0.1 * jax.random.normal(jax.random.PRNGKey(seed), (batch, m.nv))
    mesh = jax.make_mesh((len(jax.devices()),), ("batch",),
                         axis_types=(jax.sharding.AxisType.Auto,))
    qvel = jax.device_put(qvel, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch")))

    def run(qvel):
        def one(v):
            d = d0.replace(qvel=v)
            d, _ = jax.lax.scan(lambda c, _: (mjx.step(mx, c), None), d, None, length=steps)
            return d.qpos
        return jax.vmap(one)(qvel)

    t0 = time.perf_counter()
    compiled = jax.jit(run).lower(qvel).compile()
    compile_s = time.perf_counter() - t0
    best, qpos = best_time(compiled, qvel, repeats=repeats)
    return {"compile_s": round(compile_s, 2), "run_s": round(best, 3),
            "steps_per_s": batch * steps / best, "dt": float(m.opt.timestep),
            "iterations": int(m.opt.iterations), "ls_iterations": int(m.opt.ls_iterations),
            "changed": changed, "integrator": str(mujoco.mjtIntegrator(m.opt.integrator)),
            "finite": bool(np.all(np.isfinite(np.asarray(qpos))))}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["humanoid"])
    p.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--float64", action="store_true")
    p.add_argument("--skip-mjx", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--devices", type=int, default=1,
                   help="host CPU devices the batches are sharded over (module docstring)")
    p.add_argument("--name", default="mjcf_models")
    args = p.parse_args()
    if args.devices > 1:   # before jax is imported
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={args.devices}")

    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    dtype = jnp.float64 if args.float64 else jnp.float32
    rows = []
    for name in args.models:
        path = assets() / f"{name}.xml"
        for batch in args.batch:
            row = {"model": name, "batch": batch, "steps": args.steps,
                   "ours": run_ours(path, batch, args.steps, dtype, args.repeats, args.seed)}
            jax.clear_caches()
            ours = row["ours"]
            log(f"{name} B={batch}: ours {ours['steps_per_s']:.0f} steps/s (compile "
                f"{ours['compile_s']:.1f} s), converged {100 * ours['converged']:.2f} %, "
                f"iterations {ours['iterations_mean']:.2f}/{ours['iterations_max']}")
            if not args.skip_mjx:
                row["mjx"] = run_mjx(path, batch, args.steps, args.repeats, args.seed)
                row["ratio"] = row["ours"]["steps_per_s"] / row["mjx"]["steps_per_s"]
                jax.clear_caches()
                log(f"{name} B={batch}: MJX {row['mjx']['steps_per_s']:.0f} steps/s (compile "
                    f"{row['mjx']['compile_s']:.1f} s), ratio {row['ratio']:.2f}")
            rows.append(row)
    write_results({"benchmark": "mjcf_models", "provenance": jax_provenance(),
                   "settings": vars(args), "dtype": str(jnp.dtype(dtype)), "rows": rows},
                  args.name)


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
