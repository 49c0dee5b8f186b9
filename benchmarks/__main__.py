"""Run the benchmark suite and summarize it in one JSON document and one table (`make bench`).

    python -m benchmarks [--quick] [--only NAME ...] [--out-dir DIR] [--timeout S] [--list]

Each benchmark of SUITE runs in its own process, `python -m benchmarks.<module> ARGS --name
NAME` (its quick arguments with `--quick`), one after another, its output in
DIR/logs/<name>.log and its results in DIR/<name>.json (`_common.RESULTS_ENV` points
`write_results` there). The comparisons with MuJoCo MJX are measured in the same run: the
benchmarks that have them start `python -m benchmarks.mjx` themselves.

DIR/summary.json holds, per benchmark, its command, exit status, wall time and results, and
one row per measured case: ours (scene-steps per second, seconds, or whatever the case
measures), MJX's in the same run, the ratio ours / MJX, and compile times; DIR/summary.md is
that table. A benchmark that fails (exit status, time limit, no results) is recorded as failed
and the next one runs; the exit status is 1 if any failed.

On two quiet cores the full suite takes about 40 minutes (estimated from its parts' earlier
runs) and `--quick` about 3 (2 min 18 s measured; 6 min 34 s with other jobs loading the
cores); compiling dominates both. `--quick` runs the benchmarks that have quick arguments,
with those (`--quick --list` shows the commands); `--only` runs the named ones (with
`--quick`, a benchmark without quick arguments runs its full ones).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys
import time

from benchmarks._common import REPO, RESULTS_ENV, provenance

DEFAULT_OUT = REPO / "results" / "benchmarks"


# --------------------------------------------------------------------------------------------
# rows of the summary: one per measured case, from a benchmark's JSON document


def row(case, metric, ours, mjx=None, compile_s=None, mjx_compile_s=None, note=None):
    """One row of the summary; `ratio` is ours / MJX where both were measured."""
    measured = all(isinstance(v, (int, float)) for v in (ours, mjx))
    ratio = ours / mjx if measured and mjx else None
    return {"case": case, "metric": metric, "ours": ours, "mjx": mjx, "ratio": ratio,
            "compile_s": compile_s, "mjx_compile_s": mjx_compile_s, "note": note}


def throughput_rows(doc):
    """Per batch size: float32 against each MJX anchor, float64 alone; MuJoCo C's rates."""
    scene, steps = doc.get("scene", "box_drop"), doc["config"]["steps"]
    rows, compared = [], set()
    for c in doc.get("comparison", []):
        compared.add(c["batch"])
        rows.append(row(f"{scene} B={c['batch']}, {steps} steps, float32 (MJX {c['anchor']})",
                        "scene-steps/s", c["jaxcontact_steps_per_s"], c["mjx_steps_per_s"],
                        c.get("jaxcontact_compile_s"), c["mjx_compile_s"],
                        f"MJX z_mean {c['mjx_z_mean']:.3f}"))
    for dtype, result in doc["jaxcontact"].items():
        if "error" in result:
            rows.append(row(f"{scene}, {dtype}", "scene-steps/s", None, note=result["error"]))
        for r in result.get("rows", []):
            if dtype != "float32" or r["batch"] not in compared:
                rows.append(row(f"{scene} B={r['batch']}, {steps} steps, {dtype}",
                                "scene-steps/s", r["steps_per_s"], compile_s=r["compile_s"]))
    for key in ("mjx_tuned", "mjx_default"):
        anchor = doc.get(key) or {}
        if "error" in anchor:
            rows.append(row(f"{scene}, MJX {key[4:]}", "scene-steps/s", None,
                            note=f"MJX failed: {anchor['error']}"))
        c = anchor.get("mujoco_c")
        if c and key == "mjx_tuned":
            rollout = (f"{c['steps_per_s_rollout']:,.0f} with mujoco.rollout on "
                       f"{c['rollout_threads']} threads, " if "steps_per_s_rollout" in c else "")
            rows.append(row(f"{scene}, {steps} steps: MuJoCo C", "scene-steps/s", None,
                            note=f"MuJoCo C: {rollout}{c['steps_per_s_1thread']:,.0f} in a "
                                 "Python loop on one thread"))
    return rows


def gradient_rows(doc):
    """sphere_slide's times and gradient error, grad_bounce's gradient errors, beside MJX's."""
    slide, bounce = doc["sphere_slide"], doc["grad_bounce"]
    m_slide = doc.get("mjx_sphere_slide") or {}
    m_bounce = doc.get("mjx_grad_bounce") or {}
    t = slide["timing"]
    case = f"sphere_slide, {slide['steps']} steps, float64"
    rows = [row(f"{case}: value_and_grad", "s", t["value_and_grad_s"],
                m_slide.get("value_and_grad_s"), slide["compile_value_and_grad_s"],
                m_slide.get("compile_value_and_grad_s"),
                f"{t['value_and_grad_over_forward']:.2f}x our forward"),
            row(f"{case}: forward", "s", t["forward_s"], m_slide.get("forward_s"),
                slide["compile_forward_s"], m_slide.get("compile_forward_s"))]
    reverse = next(r for r in doc["side_by_side"]["sphere_slide"]
                   if r["quantity"] == "dx/dv0 reverse")
    rows.append(row(f"{case}: dx/dv0 against the closed form", "relative error",
                    reverse["jaxcontact_rel_err"], reverse["mjx_rel_err"]))
    for i, r in enumerate(doc["side_by_side"]["grad_bounce"]):
        first = i == 0
        rows.append(row(f"grad_bounce v={tuple(r['v'])}, {bounce['steps']} steps: gradient "
                        "against central differences", "relative error",
                        r["jaxcontact_rel_err"], r["mjx_rel_err"],
                        bounce["compile_value_and_grad_s"] if first else None,
                        m_bounce.get("compile_value_and_grad_s") if first else None))
    for key, m in (("sphere_slide", m_slide), ("grad_bounce", m_bounce)):
        if "error" in m:
            rows.append(row(f"{key}: MJX", "-", None, note=f"MJX failed: {m['error']}"))
    return rows


def mjcf_models_rows(doc):
    return [row(f"{r['model']} B={r['batch']}, {r['steps']} steps, {doc['dtype']}",
                "scene-steps/s", r["ours"]["steps_per_s"], (r.get("mjx") or {}).get("steps_per_s"),
                r["ours"]["compile_s"], (r.get("mjx") or {}).get("compile_s"),
                f"converged {r['ours']['converged']:.4f}")
            for r in doc["rows"]]


def mjcf_coverage_rows(doc):
    rows = []
    for r in doc["rows"]:
        if "error" in r:
            rows.append(row(r["model"], "scene-steps/s", None, note=f"failed: {r['error'][:80]}"))
            continue
        rows.append(row(f"{r['model']}: {r['bodies']} bodies, {r['mujoco_dofs']} DOFs, "
                        f"{r['steps']} steps", "scene-steps/s", r["steps_per_s"],
                        compile_s=r["compile_s"],
                        note=f"converged {r['converged']:.4f}, not imported "
                             f"{len(r['not_imported'])}, finite {r['finite']}"))
    return rows


def step_cost_rows(doc):
    rows = []
    for c in doc["cases"]:
        if "scene_steps_per_s" not in c:
            rows.append(row(c["case"], "scene-steps/s", None,
                            note="timed out" if "timed_out_s" in c else "failed"))
            continue
        rows.append(row(f"{c['case']} B={c['batch']}, {c['steps']} steps", "scene-steps/s",
                        c["scene_steps_per_s"], compile_s=c["compile_s"],
                        note=f"{c['ms_per_step']:.3g} ms/step, converged {c['converged']:.4f}"))
    return rows


def batched_gradient_rows(doc):
    return [row(f"box_drop B={r['batch']}, {r['steps']} steps, float32: value_and_grad", "s",
                r["grad_s"], compile_s=r["grad_compile_s"],
                note=f"{r['grad_over_forward']:.2f}x forward, finite {r['gradient_finite']}")
            for r in doc["rows"]]


def compile_gradient_rows(doc):
    return [row(f"{doc['scene']}, {doc['steps']} steps, float64: reverse gradient",
                "lower + compile s", doc["total_s"], compile_s=doc["compile_s"],
                note=f"finite {doc['finite']}, converged {doc['converged']:.4f}")]


def deformable_scaling_rows(doc):
    return [row(f"{r['kind']}, {r['elements']} elements, {r['steps']} steps, float64",
                "ms/step", r["forward_ms_per_step"], compile_s=r["compile_forward_s"],
                note=f"gradient {r['gradient_ms_per_step']:.3g} ms/step, converged "
                     f"{r['converged']:.3f}")
            for r in doc["rows"]]


def convergence_rows(doc):
    return [row(f"grid of {s['cells']} cells, {dtype}", "% of steps not converged",
                100 * (1 - s["converged"]),
                note=f"target at most {100 * (1 - s['target']):.2g} %, iterations mean "
                     f"{s['iterations_mean']:.2f}, p99 {s['iterations_p99']}")
            for dtype, s in doc["summary"].items()]


def fuzz_rows(doc):
    return [row(f"{t['scenes']} random scenes, {dtype}", "% of steps not converged",
                100 * (1 - t["converged"]),
                note=f"non-finite {t['non_finite']}, targets met: {doc['passed']}")
            for dtype, t in doc["totals"].items()]


# --------------------------------------------------------------------------------------------
# the suite


@dataclasses.dataclass(frozen=True)
class Bench:
    """One benchmark of the suite: `python -m <module> <full or quick args> --name <name>`,
    summarized by `rows`; no quick args: not part of `--quick`."""

    name: str
    module: str
    rows: object
    full: tuple = ()
    quick: tuple | None = None


SUITE = (
    Bench("throughput", "benchmarks.throughput", throughput_rows,
          full=("--batch", "1", "64", "1024", "--max-repeat-s", "60"),
          quick=("--quick", "--dtypes", "float32", "--skip-mjx-default", "--min-time-s", "1")),
    Bench("throughput_boxes8", "benchmarks.throughput", throughput_rows,
          full=("--scene", "boxes8", "--batch", "1", "64", "--dtypes", "float32",
                "--skip-mjx-default", "--max-repeat-s", "60")),
    # 200 bounce steps (0.4 s): the thrown sphere lands at 0.32 s, so its gradient crosses contact
    Bench("gradient", "benchmarks.gradient", gradient_rows,
          quick=("--quick", "--bounce-steps", "200", "--iteration-caps", "8",
                 "--min-time-s", "1")),
    Bench("mjcf_models", "benchmarks.mjcf_models", mjcf_models_rows,
          full=("--models", "humanoid", "--batch", "16", "64")),
    Bench("mjcf_coverage", "benchmarks.mjcf_coverage", mjcf_coverage_rows,
          quick=("--models", "inverted_pendulum", "dmc/cartpole", "--seconds", "0.2")),
    Bench("batched_gradient", "benchmarks.batched_gradient", batched_gradient_rows,
          quick=("--batch", "16", "--steps", "20")),
    Bench("compile_gradient", "benchmarks.compile_gradient", compile_gradient_rows),
    Bench("step_cost", "benchmarks.step_cost", step_cost_rows,
          full=("--cases", "box_drop_b1", "box_drop_b1024", "s1_chain_10", "s1_chain_40",
                "ball_chain_10", "pile_100"),
          quick=("--cases", "box_drop_b1", "s1_chain_10", "--repeats", "2")),
    Bench("deformable_scaling", "benchmarks.deformable_scaling", deformable_scaling_rows,
          full=("--quick", "--steps", "5")),
    Bench("convergence", "benchmarks.convergence", convergence_rows,
          quick=("--shapes", "box", "--dtypes", "float32", "--steps", "20")),
    Bench("fuzz", "benchmarks.fuzz", fuzz_rows,
          full=("--structures", "1", "--scenes", "128", "--steps", "20")),
)


def command(bench, quick):
    args = bench.quick if quick and bench.quick is not None else bench.full
    return [sys.executable, "-m", bench.module, *args, "--name", bench.name]


def run(bench, quick, out_dir, timeout):
    """Run one benchmark; its record: command, status, wall time, rows, results."""
    cmd = command(bench, quick)
    log_path = out_dir / "logs" / f"{bench.name}.log"
    result_path = out_dir / f"{bench.name}.json"
    result_path.unlink(missing_ok=True)  # never summarize a previous run's results
    env = dict(os.environ, **{RESULTS_ENV: str(out_dir)})
    start = time.perf_counter()
    with log_path.open("w") as log:
        try:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    record = {"benchmark": bench.name, "command": " ".join(["python", *cmd[1:]]), "exit": code,
              "wall_s": round(time.perf_counter() - start, 1), "log": str(log_path),
              "results": None, "rows": []}
    if code is None:
        record["error"] = f"timed out after {timeout:.0f} s"
    elif code != 0:
        record["error"] = f"exit status {code}"
    if result_path.exists():
        record["results"] = str(result_path)
        try:
            doc = json.loads(result_path.read_text())
            record["rows"] = [dict(r, benchmark=bench.name) for r in bench.rows(doc)]
        except (ValueError, KeyError, TypeError, StopIteration) as e:
            record.setdefault("error", f"summary failed: {type(e).__name__}: {e}")
        else:
            record["result"] = doc
    elif code == 0:
        record["error"] = f"no results ({result_path.name} not written)"
    record["status"] = "failed" if "error" in record else "ok"
    return record


def fmt(x):
    """A number for the table: thousands separated, 3 significant digits below 1000."""
    if x is None:
        return ""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def table(records):
    lines = ["| benchmark | case | metric | ours | MJX (same run) | ours / MJX | compile s: ours "
             "/ MJX | status | wall s | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rec in records:
        status = "ok" if rec["status"] == "ok" else f"FAILED: {rec['error']}"
        rows = rec["rows"] or [row("-", "-", None)]
        for i, r in enumerate(rows):
            compile_s = " / ".join(fmt(v) for v in (r["compile_s"], r["mjx_compile_s"])
                                   if v is not None)
            ratio = f"{r['ratio']:.3g}x" if r["ratio"] is not None else ""
            head = (rec["benchmark"], status, fmt(rec["wall_s"])) if i == 0 else ("", "", "")
            note = (r["note"] or "").replace("|", "/")
            lines.append(f"| {head[0]} | {r['case']} | {r['metric']} | {fmt(r['ours'])} | "
                         f"{fmt(r['mjx'])} | {ratio} | {compile_s} | {head[1]} | {head[2]} | "
                         f"{note} |")
    return "\n".join(lines) + "\n"


def write_summary(records, out_dir, quick, started):
    doc = {"suite": "quick" if quick else "full", "provenance": started,
           "wall_s": round(sum(r["wall_s"] for r in records), 1),
           "failed": [r["benchmark"] for r in records if r["status"] != "ok"],
           "rows": [r for rec in records for r in rec["rows"]],
           "benchmarks": records}
    (out_dir / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out_dir / "summary.md").write_text(
        f"# Benchmarks ({doc['suite']} suite, {started.get('time_start')}, git "
        f"{(started.get('git_head') or '?')[:10]})\n\n" + table(records))
    return doc


def run_suite(benches, *, quick=False, out_dir=DEFAULT_OUT, timeout=None):
    """Run `benches` one after another and write the summary; the exit status (0: all ok)."""
    out_dir = pathlib.Path(out_dir)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    started = provenance()
    records = []
    for bench in benches:
        print(f"[benchmarks] {bench.name}: python {' '.join(command(bench, quick)[1:])}",
              file=sys.stderr, flush=True)
        records.append(run(bench, quick, out_dir, timeout))
        r = records[-1]
        print(f"[benchmarks] {bench.name}: {r['status']}"
              f"{' (' + r['error'] + ')' if 'error' in r else ''}, {r['wall_s']} s",
              file=sys.stderr, flush=True)
        write_summary(records, out_dir, quick, started)  # so far, should the suite be stopped
    print(table(records))
    print(f"written: {out_dir / 'summary.json'}, {out_dir / 'summary.md'}", file=sys.stderr)
    return 0 if all(r["status"] == "ok" for r in records) else 1


def main(argv=None):
    names = [b.name for b in SUITE]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--quick", action="store_true",
                   help="the short suite: the benchmarks with quick arguments, with those")
    p.add_argument("--only", nargs="+", choices=names, metavar="NAME",
                   help=f"run only these, in the suite's order ({', '.join(names)})")
    p.add_argument("--out-dir", type=pathlib.Path, default=DEFAULT_OUT,
                   help=f"where the results go (default {DEFAULT_OUT.relative_to(REPO)})")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per benchmark (default 1800, 600 with --quick)")
    p.add_argument("--list", action="store_true", help="print the suite's commands and exit")
    args = p.parse_args(argv)
    benches = [b for b in SUITE if (b.name in args.only if args.only else
                                    not args.quick or b.quick is not None)]
    if args.list:
        for b in benches:
            print(" ".join(["python", *command(b, args.quick)[1:]]))
        return 0
    timeout = args.timeout or (600.0 if args.quick else 1800.0)
    return run_suite(benches, quick=args.quick, out_dir=args.out_dir, timeout=timeout)


if __name__ == "__main__":
    sys.exit(main())
