"""How often a step converges, over a grid of single-body contact scenes (issue 11, point 7).

One body (sphere r = 5 cm, cube of half edge 5 cm, or capsule r = 3 cm, half length 5 cm lying
on its side) on the ground plane, over the grid

  mass    0.01, 0.1, 1, 10, 100 kg    (inertia scaled with it)
  dt      1e-4, 1e-3, 3e-3, 1e-2 s
  mu      0, 0.5, 1, 1.5
  motion  resting  (at rest, just touching),
          sliding  (2 m/s along x, no spin),
          rolling  (1 m/s along x with the rolling spin v / r; a cube tips over its edge),
          tumbling (thrown down at 2 m/s from 1.5 sizes up with a random spin of ~10 rad/s,
                    two seeds)

Contact: stiffness k_n = 1e5 N/m per kg above 1 kg (1e5 below), critically damped
(k_d = 2 sqrt(k_n m), the regime of the light tumbling cube in the issue), default `huber`
friction. Every cell runs `--steps` steps (default 100) of `scene.build()`'s default solver
(`jc.Newton()`, or the `--newton KEY=VALUE` settings given) in float64 and float32; all cells
of a shape and precision are one vmapped batch (the grid values are `Model` leaves), so each
costs one compilation.

Reports per precision: the fraction of steps converged (target: 99.9 % in float64, 99.5 % in
float32), broken down by shape, mass, dt, mu and motion, the largest residual, and the worst
cells. Writes results/<name>.json (default name: convergence).

Usage:
    python -m benchmarks.convergence [--steps 100] [--shapes sphere box capsule]
                                     [--dtypes float64 float32] [--newton iterations=20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import numpy as np

from benchmarks._common import REPO, jax_provenance, jit, log, write_results  # noqa: E402

MASSES = (0.01, 0.1, 1.0, 10.0, 100.0)
DTS = (1e-4, 1e-3, 3e-3, 1e-2)
MUS = (0.0, 0.5, 1.0, 1.5)
MOTIONS = ("resting", "sliding", "rolling", "tumbling_0", "tumbling_1")
SHAPES = ("sphere", "box", "capsule")
TARGET = {"float64": 0.9999, "float32": 0.999}   # issue 63; iterations: mean <= 4, p99 <= 12
ITERATION_TARGET = {"mean": 4.0, "p99": 12.0}


def cells():
    return list(itertools.product(MASSES, DTS, MUS, MOTIONS))


def _parse_value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


def run_case(shape, dtype_name, steps, newton):
    """Run every cell of one shape in one precision; returns per-cell converged fractions."""
    import jax

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    import jax.numpy as jnp
    import numpy as np

    import jaxcontact as jc

    dtype = jnp.dtype(dtype_name)
    scene = jc.Scene(dt=1e-3)
    scene.add_plane(friction=0.5)
    lying = (np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0)   # capsule axis along y
    if shape == "sphere":
        size, radius = 0.05, 0.05
        scene.add_sphere(radius, 1.0, pos=(0.0, 0.0, size))
    elif shape == "box":
        size, radius = 0.05, 0.05
        scene.add_box(size, 1.0, pos=(0.0, 0.0, size))
    else:
        size, radius = 0.03, 0.03
        scene.add_capsule(0.03, 0.05, 1.0, pos=(0.0, 0.0, size), quat=lying)
    solver = jc.Newton(**newton)
    model, state = scene.build(solver=solver, dtype=dtype)
    grid = cells()
    mass = np.array([c[0] for c in grid])
    stiffness = 1e5 * np.maximum(mass, 1.0)
    damping = 2.0 * np.sqrt(stiffness * mass)
    rng = np.random.default_rng(0)
    spin = rng.normal(0.0, 10.0 / np.sqrt(3.0), size=(2, 3))
    vel, ang_vel, height = [], [], []
    for (_, _, _, motion) in grid:
        if motion == "resting":
            v, w, z = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), size
        elif motion == "sliding":
            v, w, z = (2.0, 0.0, 0.0), (0.0, 0.0, 0.0), size
        elif motion == "rolling":
            v, w, z = (1.0, 0.0, 0.0), (0.0, 1.0 / radius, 0.0), size
        else:
            v, w, z = (1.0, 0.5, -2.0), tuple(spin[int(motion[-1])]), 1.5 * size
        vel.append(v)
        ang_vel.append(w)
        height.append(z)

    def arr(x):
        return jnp.asarray(np.asarray(x, float), dtype)

    scale = arr(mass)   # the built body has mass 1: inertia scales with mass
    models = jax.vmap(lambda m, k, c, mu, dt: model.replace(
        body=model.body.replace(mass=model.body.mass * m, inertia=model.body.inertia * m),
        geom=model.geom.replace(stiffness=jnp.full_like(model.geom.stiffness, k),
                                damping=jnp.full_like(model.geom.damping, c),
                                friction=jnp.full_like(model.geom.friction, mu)),
        plane=model.plane.replace(stiffness=jnp.full_like(model.plane.stiffness, k),
                                  damping=jnp.full_like(model.plane.damping, c),
                                  friction=jnp.full_like(model.plane.friction, mu)),
        dt=dt))(scale, arr(stiffness), arr(damping), arr([c[2] for c in grid]),
                arr([c[1] for c in grid]))
    pos = np.zeros((len(grid), 1, 3))
    pos[:, 0, 2] = height
    states = state.replace(pos=arr(pos), quat=jnp.broadcast_to(state.quat, (len(grid), 1, 4)),
                           vel=arr(vel)[:, None], ang_vel=arr(ang_vel)[:, None],
                           time=jnp.zeros((len(grid),), dtype),
                           particle_pos=jnp.zeros((len(grid), 0, 3), dtype),
                           particle_vel=jnp.zeros((len(grid), 0, 3), dtype))

    @jit
    def run(models, states):
        def one(m, s):
            final, _, info = jc.rollout(m, s, steps=steps, return_info=True)
            return info.converged, info.residual, info.tolerance, final.pos, info.iterations
        return jax.vmap(one)(models, states)

    t0 = time.perf_counter()
    compiled = run.lower(models, states).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    converged, residual, tolerance, final_pos, iterations = jax.block_until_ready(
        compiled(models, states))
    run_s = time.perf_counter() - t0
    converged, residual = np.asarray(converged), np.asarray(residual)
    iterations = np.asarray(iterations)
    return {
        "shape": shape, "dtype": dtype_name, "steps": steps, "compile_s": compile_s,
        "run_s": run_s,
        "cells": [{"mass": c[0], "dt": c[1], "mu": c[2], "motion": c[3],
                   "converged": float(converged[i].mean()),
                   "max_residual": float(np.nanmax(np.where(np.isfinite(residual[i]),
                                                            residual[i], np.inf))),
                   "max_tolerance": float(np.asarray(tolerance[i]).max()),
                   "final_z": float(np.asarray(final_pos)[i, 0, 2]),
                   # how many steps took k iterations, k = 0, 1, ... (for the percentiles)
                   "iteration_counts": np.bincount(iterations[i]).tolist()}
                  for i, c in enumerate(grid)],
    }


def summarize(cases):
    """Converged fractions overall and by every factor, per precision."""
    out = {}
    for dtype in sorted({c["dtype"] for c in cases}):
        rows = [dict(cell, shape=c["shape"]) for c in cases if c["dtype"] == dtype
                for cell in c["cells"]]
        by = {}
        for factor in ("shape", "mass", "dt", "mu", "motion"):
            groups = {}
            for r in rows:
                key = r[factor]
                key = "tumbling" if factor == "motion" and key.startswith("tumbling") else key
                groups.setdefault(str(key), []).append(r["converged"])
            by[factor] = {k: sum(v) / len(v) for k, v in groups.items()}
        fraction = sum(r["converged"] for r in rows) / len(rows)
        worst = sorted(rows, key=lambda r: r["converged"])[:10]
        counts = np.zeros(max(len(r["iteration_counts"]) for r in rows))
        for r in rows:
            counts[:len(r["iteration_counts"])] += r["iteration_counts"]
        mean = float(np.dot(np.arange(len(counts)), counts) / counts.sum())
        p99 = int(np.searchsorted(np.cumsum(counts) / counts.sum(), 0.99))
        out[dtype] = {"converged": fraction, "target": TARGET[dtype],
                      "meets_target": fraction >= TARGET[dtype],
                      "iterations_mean": mean, "iterations_p99": p99,
                      "iterations_max": len(counts) - 1,
                      "meets_iteration_target": (mean <= ITERATION_TARGET["mean"]
                                                 and p99 <= ITERATION_TARGET["p99"]),
                      "by": by,
                      "cells_below_full": sum(r["converged"] < 1.0 for r in rows),
                      "cells": len(rows),
                      "max_residual": max(r["max_residual"] for r in rows),
                      "worst": worst}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"],
                        choices=["float64", "float32"])
    parser.add_argument("--newton", nargs="*", default=[], metavar="KEY=VALUE",
                        help="jc.Newton settings (default: the defaults)")
    parser.add_argument("--name", default="convergence")
    parser.add_argument("--case", help=argparse.SUPPRESS)   # worker: shape,dtype
    args = parser.parse_args()
    newton = dict((kv.split("=", 1)[0], _parse_value(kv.split("=", 1)[1]))
                  for kv in args.newton)
    if args.case:
        shape, dtype = args.case.split(",")
        print(json.dumps(run_case(shape, dtype, args.steps, newton)))
        return
    cases = []
    for dtype in args.dtypes:
        for shape in args.shapes:
            log(f"{shape} {dtype}: {len(cells())} cells x {args.steps} steps")
            cmd = [sys.executable, "-m", "benchmarks.convergence", "--case", f"{shape},{dtype}",
                   "--steps", str(args.steps), "--newton", *args.newton]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
            if done.returncode != 0:
                log(done.stderr[-3000:])
                raise SystemExit(f"case {shape} {dtype} failed")
            case = json.loads(done.stdout.strip().splitlines()[-1])
            frac = sum(c["converged"] for c in case["cells"]) / len(case["cells"])
            log(f"  converged {100 * frac:.2f} %  (compile {case['compile_s']:.1f} s, "
                f"run {case['run_s']:.1f} s)")
            cases.append(case)
    summary = summarize(cases)
    for dtype, s in summary.items():
        log(f"{dtype}: {100 * s['converged']:.3f} % of steps converged (target "
            f"{100 * s['target']:.2f} %), largest residual {s['max_residual']:.3g}; "
            f"iterations mean {s['iterations_mean']:.2f}, p99 {s['iterations_p99']}, max "
            f"{s['iterations_max']}")
        for factor, groups in s["by"].items():
            log(f"  {factor:7s} " + "  ".join(f"{k}: {100 * v:.2f}" for k, v in groups.items()))
    write_results({"provenance": jax_provenance(), "newton": newton, "summary": summary,
                   "cases": cases}, args.name)


if __name__ == "__main__":
    main()
