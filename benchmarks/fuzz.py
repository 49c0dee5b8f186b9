"""Robustness: thousands of random scenes, stepped and differentiated in one process (issue 63).

`--structures` random scene structures (`jc.scenes.random_structure`: 1-8 bodies of every
shape, sphere, rounded box, capsule and convex mesh, plus 0-3 particles, on a ground plane),
each compiled once per dtype as one program: a batch of scenes drawn by
`scenes.randomize_scene` (masses 1e-3 to 1e3 kg, contact stiffness 1e2 to 1e7 N/m, damping
up to critical, μ 0 to 2, Δt 1e-4 to 2e-2 s, thrown with random spin), `--steps` steps each,
with the reverse-mode gradient of Σ x_T + 0.1 Σ v_T with respect to the initial velocities,
spins, masses and friction coefficients. `--scenes` scenes per dtype in all, spread evenly
over the structures.

Asserted per run (exit code 1 if not): every state and gradient finite, at least 99.9 % of
steps converged, the process's peak resident memory within 4 GB (compiled programs are
dropped after each structure). Writes results/<name>.json: per structure and dtype the
converged share, iterations (mean, p99, max), largest residual, compile and run times, and
the keys of failing scenes (`--structures`/`--seed` reproduce them).

Usage:
    python -m benchmarks.fuzz                          # 32 structures, 10,000 scenes per dtype
    python -m benchmarks.fuzz --structures 4 --scenes 256
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import resource
import sys
import time

import numpy as np

from benchmarks._common import jax_provenance, jit, log, write_results  # noqa: E402

TARGET_CONVERGED = 0.999
MEMORY_LIMIT_GB = 4.0


def scalar(final):
    return (final.pos.sum() + final.particle_pos.sum()
            + 0.1 * (final.vel.sum() + final.ang_vel.sum() + final.particle_vel.sum()))


def program(info, steps):
    """One compiled batch: keys (B, 2) -> finite flags, convergence and iteration counts."""
    import jax
    import jax.numpy as jnp
    import jaxcontact as jc
    from jaxcontact import scenes

    def one(model, state, key):
        model, state = scenes.randomize_scene(model, state, info, key)

        def loss(vel, ang_vel, particle_vel, mass, friction):
            m = model.replace(body=model.body.replace(mass=mass),
                              geom=model.geom.replace(friction=friction))
            s = state.replace(vel=vel, ang_vel=ang_vel, particle_vel=particle_vel)
            final, _, infos = jc.rollout(m, s, steps=steps, return_info=True)
            return scalar(final), (final, infos)

        (value, (final, infos)), grads = jax.value_and_grad(loss, argnums=range(5),
                                                            has_aux=True)(
            state.vel, state.ang_vel, state.particle_vel, model.body.mass, model.geom.friction)
        finite_state = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x))
                                          for x in jax.tree.leaves(final)]))
        finite_grad = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in grads]))
        return {"finite_state": finite_state & jnp.isfinite(value),
                "finite_gradient": finite_grad, "converged": infos.converged,
                "iterations": infos.iterations, "residual": infos.residual,
                "contacts": infos.active_contacts, "dt": model.dt}

    return jit(jax.vmap(one, in_axes=(None, None, 0)))


def run_structure(index, seed, dtype_name, count, steps, chunk):
    import jax
    import jax.numpy as jnp
    from jaxcontact import scenes

    scene = scenes.random_structure(seed * 1000 + index)
    model, state = scene.build(dtype=getattr(jnp, dtype_name))
    fn = program(scene.info, steps)
    keys = jax.random.split(jax.random.PRNGKey(seed * 1000 + index), count)
    outs, compile_s, run_s = [], None, 0.0
    for start in range(0, count, chunk):
        batch = keys[start:start + chunk]
        if batch.shape[0] < chunk:   # one program: pad the last chunk
            batch = jnp.concatenate([batch, keys[:chunk - batch.shape[0]]])
        t0 = time.perf_counter()
        if compile_s is None:
            compiled = fn.lower(model, state, batch).compile()
            compile_s = time.perf_counter() - t0
            t0 = time.perf_counter()
        out = jax.tree.map(np.asarray, compiled(model, state, batch))
        run_s += time.perf_counter() - t0
        outs.append(jax.tree.map(lambda x: x[:min(chunk, count - start)], out))
    out = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    bad = ~(out["finite_state"] & out["finite_gradient"] & out["converged"].all(axis=1))
    iterations = out["iterations"].reshape(-1)
    record = {
        "structure": index, "shapes": scene.info["shapes"],
        "particles": scene.info["n_particle"], "dtype": dtype_name, "scenes": count,
        "steps": int(out["converged"].size), "converged": float(out["converged"].mean()),
        "non_finite_states": int((~out["finite_state"]).sum()),
        "non_finite_gradients": int((~out["finite_gradient"]).sum()),
        "steps_with_contact": float((out["contacts"] > 0).mean()),
        "iterations_mean": float(iterations.mean()),
        "iterations_p99": float(np.percentile(iterations, 99)),
        "iterations_max": int(iterations.max()),
        "largest_residual": float(out["residual"].max()),
        "failing_scenes": np.flatnonzero(bad)[:20].tolist(),
        "compile_s": round(compile_s, 2), "run_s": round(run_s, 2),
    }
    jax.clear_caches()
    gc.collect()
    libc = ctypes.CDLL(None)
    if hasattr(libc, "malloc_trim"):   # glibc: hand freed heap back to the OS
        libc.malloc_trim(0)
    return record, out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--structures", type=int, default=32)
    p.add_argument("--scenes", type=int, default=10_000, help="scenes per dtype, in all")
    p.add_argument("--steps", type=int, default=40)
    # (a chunk's reverse pass keeps every step's linearized problem: 64 scenes of 8 bodies
    # peaked at 3.6 GB in one call, 16 at 2.4 GB, at the same speed)
    p.add_argument("--chunk", type=int, default=16, help="scenes per compiled call")
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="fuzz")
    args = p.parse_args()

    import jax

    jax.config.update("jax_enable_x64", True)
    per = math.ceil(args.scenes / args.structures)
    records, totals = [], {}
    t_start = time.perf_counter()
    for dtype_name in args.dtypes:
        converged = steps = 0
        non_finite = 0
        for i in range(args.structures):
            record, out = run_structure(i, args.seed, dtype_name, per, args.steps,
                                        min(args.chunk, per))
            records.append(record)
            converged += int(out["converged"].sum())
            steps += int(out["converged"].size)
            non_finite += record["non_finite_states"] + record["non_finite_gradients"]
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
            log(f"{dtype_name} structure {i:2d} {'+'.join(record['shapes'])}"
                f"+{record['particles']}p: converged {100 * record['converged']:.3f} %, "
                f"iterations mean {record['iterations_mean']:.2f} p99 "
                f"{record['iterations_p99']:.0f} max {record['iterations_max']}, non-finite "
                f"{record['non_finite_states']}/{record['non_finite_gradients']}, compile "
                f"{record['compile_s']:.1f} s, run {record['run_s']:.1f} s, peak {peak:.2f} GB")
        totals[dtype_name] = {"scenes": per * args.structures, "steps": steps,
                              "converged": converged / steps, "non_finite": non_finite}
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    ok = (all(t["converged"] >= TARGET_CONVERGED and t["non_finite"] == 0
              for t in totals.values()) and peak_gb <= MEMORY_LIMIT_GB)
    doc = {"benchmark": "fuzz", "provenance": jax_provenance(), "settings": vars(args),
           "targets": {"converged": TARGET_CONVERGED, "memory_gb": MEMORY_LIMIT_GB},
           "totals": totals, "peak_memory_gb": round(peak_gb, 3), "passed": ok,
           "wall_s": round(time.perf_counter() - t_start, 1), "structures": records}
    write_results(doc, args.name)
    for name, t in totals.items():
        log(f"{name}: {t['scenes']} scenes, {100 * t['converged']:.3f} % of {t['steps']} steps "
            f"converged, {t['non_finite']} non-finite")
    log(f"peak memory {peak_gb:.2f} GB; {'PASSED' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
