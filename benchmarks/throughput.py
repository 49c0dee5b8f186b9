"""Forward throughput of the `box_drop` reference scene (`jc.scenes.box_drop`), with MJX anchors.

`--scene boxes8` runs its variant instead (`jc.scenes.box_drop(8)`): 8 boxes per scene in a
2 x 4 grid with 1 cm gaps between faces, each with its own random velocities (z_mean is then
the mean over the boxes of a scene).

One free box (half size 0.05 m, 1 kg, friction 0.5) dropped from z = 0.3 m onto the ground plane,
per scene a random initial linear and angular velocity ~ N(0, 1) per axis (PRNGKey(0),
`initial_states`: MJX starts from the same numbers), dt = 0.002 s, 500 steps, batched with
`jax.vmap` over states (the model is shared). For every batch size and dtype it reports:

  compile_s       lower + compile of the jitted batched rollout (AOT, no execution)
  first_call_s    compile_s + the first execution (MJX's are measured the same way)
  steps_per_s     B * steps / best wall time of the compiled call (block_until_ready)
  sanity          mean final z (should be ~0.05), fraction of converged steps, solver iterations
                  (`newton_iterations_*`: the iterations of whichever `--solver` ran)

`--solver` picks the solver (newton: dense jc.Newton, the default; newton_cg:
jc.Newton(linear="cg"); descent: jc.Descent; dual: jc.Dual), `--solver-iterations` its
iteration count (library default otherwise); both are recorded in the JSON (`config`, and
each dtype's `solver` settings). The MJX anchors run the same way whatever the solver, so the
ratio jaxcontact/MJX of every solver comes from one run.

Timing: the first execution after compilation counts as one of the `--repeats` runs; further runs
are skipped once a single run took longer than `--max-repeat-s` (long runs vary little, and a
batch of 4096 scenes takes many minutes on 2 cores), and short runs are repeated beyond
`--repeats` until `--min-time-s` of runs is sampled (a minimum of 3 runs of 0.1 s on a shared
machine is noisy). `runs_s` lists every run.

float64 needs the global `jax_enable_x64`, so every dtype runs in its own subprocess of this
script (hidden `--worker DTYPE` mode); one invocation covers all dtypes. Then MJX
(`python -m benchmarks.mjx`, one process per batch size) runs the same scene, the same steps
and batches, tuned (4 iterations, line search 8: the fair anchor) and with MuJoCo's default
settings, and the ratio jaxcontact/MJX (both float32) is reported per batch, with MuJoCo C's
rates (`mujoco_c`).

Prints a JSON document to stdout, writes it to results/<name>.json and a table to stderr.

Usage:
    python -m benchmarks.throughput                 # full run (slow at B=4096)
    python -m benchmarks.throughput --quick         # B = 1, 64 and 100 steps: smoke test
    python -m benchmarks.throughput --solver-iterations 6 --no-early-exit --name tp_scan6
    python -m benchmarks.throughput --solver dual --batch 1024 --dtypes float32 \
        --skip-mjx-default                          # -> results/throughput_dual.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

from benchmarks._common import (compiler_options, jit, log, provenance,  # noqa: E402
                                run_subprocess, timed_runs, write_results)

DTYPES = ("float32", "float64")
SOLVERS = ("newton", "newton_cg", "descent", "dual")


# --------------------------------------------------------------------------------------------
# worker: one dtype, all batch sizes (runs in its own process)


def make_solver(jc, name, iterations=None, early_exit=None):
    """The `--solver` choice (SOLVERS) as a jaxcontact solver; library defaults for what is not
    given (tol: 3e-4 m/s in float32, 1e-10 in float64; early_exit True)."""
    kw = {} if early_exit is None else {"early_exit": early_exit}
    if iterations is not None:
        kw["iterations"] = iterations
    if name == "newton_cg":
        kw["linear"] = "cg"
    return {"newton": jc.Newton, "newton_cg": jc.Newton, "descent": jc.Descent,
            "dual": jc.Dual}[name](**kw)


SCENES = ("box_drop", "boxes8")
# (option, type, default, help) of the subprocesses' limits
LIMITS = (
    ("--mjx-timeout", float, 3600.0, "wall-time limit of one MJX process (s)"),
    ("--mjx-retries", int, 2, "retries of a hung or timed-out MJX process"),
    ("--hang-s", float, 180.0, "kill a subprocess whose CPU time has stood still this long (s)"),
    ("--worker-timeout", float, None, "time limit of a jaxcontact worker (s; default: none)"),
)


def n_boxes_of(scene):
    return {"box_drop": 1, "boxes8": 8}[scene]


def box_drop_scene(dtype, solver, n_boxes=1):
    import jaxcontact as jc

    return jc.scenes.box_drop(n_boxes).build(solver=solver, dtype=dtype)


def initial_states(state, batch):
    """B copies of `state` with v, ω ~ N(0, 1) per axis and box, drawn in float32 (so that both
    dtypes start from the same numbers; `benchmarks.mjx` starts MJX from these too)."""
    import jax
    import jax.numpy as jnp

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    dtype = state.pos.dtype
    n = state.pos.shape[0]
    v = jax.random.normal(k1, (batch, n, 3), jnp.float32).astype(dtype)
    w = jax.random.normal(k2, (batch, n, 3), jnp.float32).astype(dtype)
    # the boxes start upright: their body frames are the world frame, so MJX's (body-frame)
    # angular qvel and jaxcontact's world-frame ang_vel are the same numbers
    return jax.vmap(lambda a, b: state.replace(vel=a, ang_vel=b))(v, w)


def batched_rollout(model, steps):
    """The jitted, vmapped `jc.rollout` of `model` over a batch of states, with its StepInfo:
    the program every box_drop benchmark measures."""
    import jax

    import jaxcontact as jc

    return jit(jax.vmap(lambda s: jc.rollout(model, s, steps=steps, return_info=True)))


def run_worker(args):
    import jax

    if args.worker == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxcontact as jc
    from jaxcontact.models.contacts import n_rows

    dtype = jnp.dtype(args.worker)
    solver = make_solver(jc, args.solver, args.solver_iterations, args.early_exit)
    model, state = box_drop_scene(dtype, solver, n_boxes_of(args.scene))
    steps = args.steps
    assert model.geom.size.dtype == dtype, (model.geom.size.dtype, dtype)

    rows = []
    for batch in args.batch:
        states = initial_states(state, batch)
        fn = batched_rollout(model, steps)

        t0 = time.perf_counter()
        compiled = fn.lower(states).compile()
        compile_s = time.perf_counter() - t0

        runs, out = timed_runs(compiled, states, repeats=args.repeats, max_runs=args.max_runs,
                               min_time_s=args.min_time_s, max_repeat_s=args.max_repeat_s)
        best = min(runs)
        final, _traj, info = out
        z = jnp.mean(final.pos[:, :, 2], axis=1)  # per scene, over its boxes
        finite = jnp.all(jnp.isfinite(final.pos.reshape(batch, -1)), axis=-1)
        row = {
            "batch": batch,
            "compile_s": compile_s,
            "compiler_options": compiler_options(),
            "first_call_s": compile_s + runs[0],
            "runs_s": runs,
            "best_s": best,
            "steps_per_s": batch * steps / best,
            "z_mean": float(jnp.mean(z)),
            "z_min": float(jnp.min(z)),
            "z_max": float(jnp.max(z)),
            "finite_fraction": float(jnp.mean(finite)),
            "converged_fraction": float(jnp.mean(info.converged)),
            "nonfinite_step_fraction": float(jnp.mean(info.result == int(jc.Result.NONFINITE))),
            "newton_iterations_mean": float(jnp.mean(info.iterations)),
            "newton_iterations_max": int(jnp.max(info.iterations)),
            "max_penetration": float(jnp.max(info.max_penetration)),
        }
        rows.append(row)
        log(f"  [{args.worker} B={batch}] compile {compile_s:.1f} s, best {best:.3f} s "
            f"({row['steps_per_s']:.0f} steps/s), z_mean {row['z_mean']:.4f}, "
            f"converged {row['converged_fraction']:.4f}, "
            f"iters {row['newton_iterations_mean']:.2f}/{row['newton_iterations_max']}")
        del out, final, _traj, info, compiled, fn

    print(json.dumps({
        "dtype": args.worker,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "solver": dataclasses.asdict(model.solver),
        "contact_candidates": n_rows(model),
        "rows": rows,
    }))


# --------------------------------------------------------------------------------------------
# driver


def worker_command(args, dtype):
    cmd = [sys.executable, "-m", "benchmarks.throughput", "--worker", dtype,
           "--batch", *args.batch, "--steps", args.steps, "--repeats", args.repeats,
           "--max-repeat-s", args.max_repeat_s, "--min-time-s", args.min_time_s,
           "--scene", args.scene]
    if args.solver_iterations is not None:
        cmd += ["--solver-iterations", args.solver_iterations]
    if args.early_exit is False:
        cmd += ["--no-early-exit"]
    cmd += ["--solver", args.solver]
    return cmd


def mjx_rows(result):
    if not result or "rows" not in result:
        return {}
    return {r["batch"]: r for r in result["rows"]}


def compare(jc_result, mjx_result, label):
    """Per batch: jaxcontact float32 steps/s over MJX (float32) steps/s."""
    jc_by_b = {r["batch"]: r for r in (jc_result or {}).get("rows", [])}
    out = []
    for b, m in sorted(mjx_rows(mjx_result).items()):
        j = jc_by_b.get(b)
        out.append({
            "batch": b, "anchor": label,
            "jaxcontact_steps_per_s": j["steps_per_s"] if j else None,
            "mjx_steps_per_s": m["steps_per_s"],
            "ratio": j["steps_per_s"] / m["steps_per_s"] if j else None,
            "jaxcontact_compile_s": j["compile_s"] if j else None,
            "mjx_compile_s": m["compile_s"],
            "mjx_first_call_s": m["first_call_s"],
            "mjx_z_mean": m["z_mean"],
        })
    return out


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(doc):
    log("")
    log(f"{doc['scene']}, {doc['config']['steps']} steps, solver {doc['config']['solver_label']}")
    hdr = (f"{'dtype':8} {'B':>5} {'compile s':>9} {'1st call s':>10} {'steps/s':>10} "
           f"{'z_mean':>7} {'conv':>6} {'it mean':>7} {'it max':>6}")
    log(hdr)
    log("-" * len(hdr))
    for dtype, res in doc["jaxcontact"].items():
        if "error" in res:
            log(f"{dtype:8} ERROR {res['error']}")
            continue
        for r in res["rows"]:
            log(f"{dtype:8} {r['batch']:>5} {r['compile_s']:>9.1f} {r['first_call_s']:>10.1f} "
                f"{r['steps_per_s']:>10.0f} {r['z_mean']:>7.4f} {r['converged_fraction']:>6.3f} "
                f"{r['newton_iterations_mean']:>7.2f} {r['newton_iterations_max']:>6d}")
    comps = doc.get("comparison", [])
    if comps:
        log("")
        hdr = (f"{'anchor':12} {'B':>5} {'jc f32 st/s':>11} {'mjx st/s':>10} {'jc/mjx':>7} "
               f"{'mjx compile s':>13} {'mjx z':>6}")
        log(hdr)
        log("-" * len(hdr))
        for c in comps:
            log(f"{c['anchor']:12} {c['batch']:>5} {fmt(c['jaxcontact_steps_per_s'], '11.0f')} "
                f"{c['mjx_steps_per_s']:>10.0f} {fmt(c['ratio'], '7.3f')} "
                f"{c['mjx_compile_s']:>13.1f} {c['mjx_z_mean']:>6.3f}")
    for key in ("mjx_tuned", "mjx_default"):
        m = doc.get(key)
        if m and "error" in m:
            log(f"{key}: ERROR {m['error']}")
        elif m and "mujoco_c" in m:
            c = m["mujoco_c"]
            log(f"{key}: MuJoCo C {c['steps_per_s_1thread']:.0f} steps/s on one thread (Python "
                f"loop), {fmt(c.get('steps_per_s_rollout'), '.0f')} with mujoco.rollout on "
                f"{c.get('rollout_threads')} threads")
        for r in (m or {}).get("per_batch", []):
            if r["error"] or r["failed_attempts"]:
                log(f"{key} B={r['batch']}: failed attempts {r['failed_attempts']}"
                    + (f", final error {r['error']}" if r["error"] else ", then succeeded"))
    log(f"written to {doc['output']}")


def run_anchor(args, key, flags):
    """`benchmarks.mjx` on the scene, one process per batch size (so that a hung run costs only
    its batch and is retried alone), merged into one result shaped like a single run's; MuJoCo
    C's rates are measured in the first process only."""
    merged = {"rows": [], "per_batch": []}
    env = None
    if args.mjx_xla_flags is not None:
        env = dict(os.environ, XLA_FLAGS=args.mjx_xla_flags)
        merged["xla_flags"] = args.mjx_xla_flags
    for i, batch in enumerate(args.batch):
        cmd = [sys.executable, "-m", "benchmarks.mjx", args.scene, "--batch", batch,
               "--steps", args.steps, "--repeats", args.repeats, "--min-time-s", args.min_time_s,
               "--max-repeat-s", args.max_repeat_s, *flags, *([] if i == 0 else ["--no-mujoco-c"])]
        attempts = []
        for attempt in range(1 + args.mjx_retries):
            res = run_subprocess(cmd, f"{key} B={batch}", timeout=args.mjx_timeout,
                                 hang_s=args.hang_s, stream_stderr=False, env=env)
            attempts.append(res.get("error"))
            if not res.get("timed_out"):
                break
            if attempt < args.mjx_retries:
                log(f"[{key} B={batch}] {res['error']}: retrying")
        merged["per_batch"].append({"batch": batch, "wall_s": res.get("wall_s"),
                                    "error": res.get("error"),
                                    "failed_attempts": attempts[:-1]})
        if "rows" not in res:
            continue
        merged["rows"] += res["rows"]
        for k in ("scene", "steps", "iterations", "ls_iterations", "dtype", "mujoco", "jax",
                  "mujoco_c"):
            if k in res:
                merged.setdefault(k, res[k])
    if not merged["rows"]:
        merged["error"] = "; ".join(f"B={r['batch']}: {r['error']}" for r in merged["per_batch"])
    return merged


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", choices=SCENES, default="box_drop",
                   help="box_drop: one box per scene; boxes8: 8 boxes in a 2 x 4 grid")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 64, 1024, 4096])
    p.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per batch (best is kept)")
    p.add_argument("--max-repeat-s", type=float, default=300.0,
                   help="skip further repeats once one run took longer than this (s)")
    p.add_argument("--min-time-s", type=float, default=2.0,
                   help="short runs: keep repeating until this much run time is sampled")
    p.add_argument("--max-runs", type=int, default=50, help=argparse.SUPPRESS)
    p.add_argument("--solver", choices=SOLVERS, default="newton",
                   help="newton: jc.Newton() (dense, default); newton_cg: "
                        "jc.Newton(linear='cg'); descent: jc.Descent(); dual: jc.Dual()")
    p.add_argument("--solver-iterations", type=int, default=None,
                   help="iterations=... of the --solver; default: the library's default "
                        "(50 for each)")
    p.add_argument("--no-early-exit", dest="early_exit", action="store_const", const=False,
                   default=None, help="early_exit=False for the --solver (every scene pays "
                   "every iteration, a scan); default: the library's (True: a while loop that "
                   "stops once the batch has converged)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: batches 1 and 64, 100 steps")
    anchors = p.add_argument_group("MJX (python -m benchmarks.mjx)")
    anchors.add_argument("--skip-mjx", action="store_true", help="no MJX anchor")
    anchors.add_argument("--skip-mjx-default", action="store_true",
                         help="MJX tuned only (4 iterations, line search 8), not also MuJoCo's "
                              "default settings")
    anchors.add_argument("--mjx-xla-flags", default=None,
                         help="XLA_FLAGS for the MJX runs, e.g. "
                              "--xla_cpu_multi_thread_eigen=false (recorded in the JSON; "
                              "changes MJX's speed)")
    limits = p.add_argument_group("limits of the subprocesses")
    for flag, kind, default, text in LIMITS:
        limits.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument("--jaxcontact-from", type=pathlib.Path, default=None,
                   help="reuse the jaxcontact numbers of a previous results JSON and only run "
                        "the MJX anchors (re-anchoring without the slow part)")
    p.add_argument("--name", default=None,
                   help="results/<name>.json (default: throughput, or throughput_<solver> for "
                        "a --solver other than newton)")
    p.add_argument("--worker", choices=DTYPES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps = [1, 64], 100
    if args.steps < 1 or args.repeats < 1 or any(b < 1 for b in args.batch):
        p.error("--steps, --repeats and --batch must be positive")

    if args.name is None:
        args.name = "throughput" if args.solver == "newton" else f"throughput_{args.solver}"

    if args.worker:
        run_worker(args)
        return

    t_start = time.perf_counter()
    newton = args.solver.startswith("newton")
    parts = (["linear=cg"] if args.solver == "newton_cg" else []) + [
        f"iterations={args.solver_iterations or 'default'}",
        f"early_exit={'default' if args.early_exit is None else args.early_exit}"]
    solver_label = (f"{'Newton' if newton else args.solver.capitalize()}"
                    f"({', '.join(parts)})")
    doc = {
        "benchmark": "throughput",
        "scene": args.scene,
        "config": {"batch": args.batch, "dtypes": args.dtypes, "steps": args.steps,
                   "repeats": args.repeats, "max_repeat_s": args.max_repeat_s,
                   "min_time_s": args.min_time_s,
                   "solver": args.solver, "solver_iterations": args.solver_iterations,
                   "early_exit": args.early_exit,
                   "solver_label": solver_label, "quick": args.quick,
                   "mjx_xla_flags": args.mjx_xla_flags,
                   "xla_flags_env": os.environ.get("XLA_FLAGS")},
        "provenance": provenance(),
        "jaxcontact": {},
    }
    if args.jaxcontact_from:
        previous = json.loads(args.jaxcontact_from.read_text())
        for key in ("batch", "steps", "solver", "solver_iterations"):
            # results from before --solver ran the default newton
            was = previous["config"].get(key, "newton" if key == "solver" else None)
            if was != doc["config"][key]:
                log(f"warning: --jaxcontact-from ran {key}={was}, "
                    f"this run {key}={doc['config'][key]}")
        doc["jaxcontact"] = {k: v for k, v in previous["jaxcontact"].items() if k in args.dtypes}
        doc["jaxcontact_reused_from"] = {"path": str(args.jaxcontact_from),
                                         "config": previous["config"],
                                         "provenance": previous["provenance"]}
    else:
        for dtype in args.dtypes:
            doc["jaxcontact"][dtype] = run_subprocess(worker_command(args, dtype),
                                                      f"jaxcontact {dtype}",
                                                      timeout=args.worker_timeout,
                                                      hang_s=args.hang_s)

    comparison = []
    if not args.skip_mjx:
        anchors = [("mjx_tuned", ["--tuned"])]
        if not args.skip_mjx_default:
            anchors.append(("mjx_default", []))
        for key, flags in anchors:
            doc[key] = run_anchor(args, key, flags)
            comparison += compare(doc["jaxcontact"].get("float32"), doc[key],
                                  key.removeprefix("mjx_"))
    doc["comparison"] = comparison
    doc["provenance"]["loadavg_end"] = list(os.getloadavg())
    doc["total_wall_s"] = time.perf_counter() - t_start

    write_results(doc, args.name)
    print_table(doc)
    failed = [k for k, v in doc["jaxcontact"].items() if "error" in v]
    if failed:
        sys.exit(f"jaxcontact worker(s) failed: {failed}")


if __name__ == "__main__":
    main()
