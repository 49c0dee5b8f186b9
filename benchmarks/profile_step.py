"""Where a batched `box_drop` (or `boxes8`) rollout spends its time, on whatever backend runs it.

Times the jitted batched rollout (as `throughput.py` does, fewer runs), then records one more
run with `jax.profiler` and sums the trace's device events by name: how many kernels (or,
on the CPU, XLA operations) a step launches and which take the time. On a GPU each solver
iteration is many small kernels, so their count per step matters as much as their work.

`--no-branch` evaluates every `loop.where_needed` computation for the whole batch and selects
per scene (`branch=False`), instead of a `lax.cond` on "some scene needs it": the comparison
that says what the conditionals cost on a backend where each one waits for its predicate.

Prints a JSON document (stdout) and a table (stderr); `--out DIR` keeps the trace there.

Usage:
    python -m benchmarks.profile_step --batch 1024 --steps 100 --second
    python -m benchmarks.profile_step --batch 4096 --no-branch --out /tmp/prof
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pathlib
import tempfile
import time

from benchmarks._common import jax_provenance, log  # noqa: E402
from benchmarks.throughput import batched_rollout, box_drop_scene, initial_states, n_boxes_of  # noqa: E402


def trace_events(log_dir):
    """The complete ('X') events of the perfetto trace under `log_dir`, with their process and
    thread names."""
    path = next(pathlib.Path(log_dir).rglob("perfetto_trace.json.gz"))
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    pnames, tnames = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pnames[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tnames[(e["pid"], e["tid"])] = e["args"]["name"]
    out = []
    for e in events:
        if e.get("ph") == "X":
            out.append((pnames.get(e["pid"], str(e["pid"])), tnames.get((e["pid"], e["tid"]), ""),
                        e["name"], float(e.get("dur", 0.0))))
    return out


def summarize(events, steps, top):
    """Device events (GPU streams, else the XLA CPU client's operations) summed by name. GPU
    kernels do not overlap on one stream; the CPU's events nest (a while loop contains its
    body's operations), so there the busy time counts some time twice."""
    device = [e for e in events if "/device:GPU" in e[0] or "/device:TPU" in e[0]]
    where = "device"
    if not device:
        device = [e for e in events if "/host:CPU" in e[0] and "XLA" in e[1].upper()] or events
        where = "host"
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for _, _, name, dur in device:
        by_name[name][0] += 1
        by_name[name][1] += dur
    total = sum(v[1] for v in by_name.values())
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    return {"where": where, "events": len(device), "events_per_step": len(device) / steps,
            "busy_us_per_step": total / steps,
            "top": [{"name": k, "count": v[0], "us": v[1], "share": v[1] / total if total else 0}
                    for k, v in rows]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scene", choices=("box_drop", "boxes8"), default="box_drop")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100, help="steps of the timed rollout")
    p.add_argument("--second", action="store_true",
                   help="time and trace the second window of --steps steps (one compiled "
                        "rollout: the first run moves the scenes on); at 100 steps, the impacts")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-branch", action="store_true")
    p.add_argument("--no-trace", action="store_true",
                   help="time only: parsing a trace of 100 steps at B = 4096 on a GPU "
                        "(~1M kernels) takes minutes")
    p.add_argument("--float64", action="store_true")
    p.add_argument("--out", type=pathlib.Path, default=None)
    args = p.parse_args()

    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxcontact as jc
    from jaxcontact.solvers import loop

    if args.no_branch:
        where_needed = loop.where_needed
        loop.where_needed = lambda *a, **k: where_needed(*a, **{**k, "branch": False})

    dtype = jnp.float64 if args.float64 else jnp.float32
    model, state = box_drop_scene(dtype, jc.Newton(), n_boxes_of(args.scene))
    states = initial_states(state, args.batch)

    result = {"benchmark": "profile_step", "config": vars(args) | {"out": str(args.out)},
              "provenance": jax_provenance(), "devices": [str(d) for d in jax.devices()]}
    fn = batched_rollout(model, args.steps)
    t0 = time.perf_counter()
    compiled = fn.lower(states).compile()
    result["compile_s"] = time.perf_counter() - t0
    if args.second:
        states = jax.block_until_ready(compiled(states)[0])
    runs = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(states))
        runs.append(time.perf_counter() - t0)
    iters = out[2].iterations  # (batch, steps)
    result.update(runs_s=runs, steps_per_s=args.batch * args.steps / min(runs),
                  ms_per_step=1e3 * min(runs) / args.steps,
                  iterations_mean=float(jnp.mean(iters)),
                  batch_loop_iterations_per_step=float(jnp.mean(jnp.max(iters, axis=0))))
    variant = (" no-branch" if args.no_branch else "") + (" loops" if args.loop_eliminations else "")
    log(f"[{args.scene} B={args.batch}{variant}] compile "
        f"{result['compile_s']:.1f} s, {result['steps_per_s']:.0f} scene-steps/s, "
        f"{result['ms_per_step']:.2f} ms/step, batch loop iterations/step "
        f"{result['batch_loop_iterations_per_step']}")

    if args.no_trace:
        print(json.dumps(result))
        return
    log_dir = args.out or pathlib.Path(tempfile.mkdtemp(prefix="jc_profile_"))
    with jax.profiler.trace(str(log_dir), create_perfetto_trace=True):
        jax.block_until_ready(compiled(states))
    result["trace"] = summarize(trace_events(log_dir), args.steps, args.top)
    t = result["trace"]
    log(f"{t['where']} events per step {t['events_per_step']:.0f}, busy "
        f"{t['busy_us_per_step']:.0f} us per step")
    for r in t["top"]:
        log(f"  {r['us'] / args.steps:9.1f} us/step {r['count'] / args.steps:7.1f}/step "
            f"{100 * r['share']:5.1f} %  {r['name'][:90]}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
