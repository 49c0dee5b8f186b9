"""Compile time and steady-state time per step of representative scenes, with default settings.

The before/after measurement of the terms rebuild (issue 11): it uses only the public API
(`jc.Scene`, `jaxcontact.scenes`, `jc.rollout`) so that the same script runs on any commit.
Every case runs in its own subprocess (float64 needs the global x64 flag, and a case that does
not finish within `--timeout` s is recorded as such instead of blocking the others):

  box_drop_b1, box_drop_b1024   `scenes.box_drop()`: one free box (0.05 m, 1 kg) dropped from
                                z = 0.3 m with N(0, 1) linear and angular velocities
                                (PRNGKey(0)), float32, 500 steps, vmapped over B scenes
  s1_chain_10, s1_chain_40      ADD S1: `scenes.spring_chain(N)`, float64, 100 steps
  ball_chain_10, ball_chain_40  N boxes (0.05 x 0.02 x 0.02 m, 0.1 kg) end to end, joined by
                                ball joints (first to the world), colliding with the ground and
                                with each other (joined neighbours excluded), float64, 100 steps
                                (0.2 s: the chain swings down and touches nothing yet)
  ball_chain_10_1s, _40_1s      the same for 500 steps (1 s): the chain hits the ground and
                                folds onto itself
  pile_100, pile_400            `scenes.sphere_pile(N)`, float64, 100 steps
  pile_*_frictionless           the same piles without friction (friction=0.0): how much of
                                the piles' cost is friction's (design note 56)

Every scene is built with `scene.build()` defaults (solver, broad phase), except the dtype.
Per case: compile_s (lower + compile of the jitted rollout), ms_per_step (best wall time of
the compiled call over `--repeats` runs / steps), converged (fraction of steps whose
`StepInfo.converged` holds), iterations_mean (solver iterations per step; not for box_drop)
and a physical sanity number.

Usage:
    python -m benchmarks.step_cost [--cases box_drop_b1 s1_chain_10 ...] [--name NAME]
Writes results/<name>.json (default name: step_cost).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks._common import (REPO, compiler_options, jit, log, provenance,  # noqa: E402
                                write_results)

CASES = ("box_drop_b1", "box_drop_b1024", "s1_chain_10", "s1_chain_40", "ball_chain_10",
         "ball_chain_40", "ball_chain_10_1s", "ball_chain_40_1s", "pile_100", "pile_400",
         "pile_100_frictionless", "pile_400_frictionless")
# what a run without --cases measures (the frictionless piles are a probe: design note 56)
DEFAULT_CASES = tuple(case for case in CASES if not case.endswith("_frictionless"))


def _box_drop(jc, jax, jnp, batch):
    model, state = jc.scenes.box_drop().build(dtype=jnp.float32)
    kv, kw = jax.random.split(jax.random.PRNGKey(0))
    vel = jax.random.normal(kv, (batch, 1, 3), jnp.float32)
    ang = jax.random.normal(kw, (batch, 1, 3), jnp.float32)
    states = jax.vmap(lambda v, w: state.replace(vel=v, ang_vel=w))(vel, ang)

    def run(states):
        def one(s):
            final, _, info = jc.rollout(model, s, steps=500, return_info=True)
            return final.pos[0, 2], info.converged
        return jax.vmap(one)(states)

    def sanity(out):
        return {"z_mean": float(jnp.mean(out[0]))}

    return run, states, 500, sanity


def _ball_chain(jc, n):
    half = (0.05, 0.02, 0.02)
    scene = jc.Scene(dt=0.002)
    scene.add_plane()
    height = 0.3
    links = [scene.add_box(half, 0.1, pos=(0.05 + 0.1 * i, 0.0, height)) for i in range(n)]
    scene.add_joint("ball", links[0], -1, anchor=(0.0, 0.0, height), stiffness=1e4)
    for i, (a, b) in enumerate(zip(links, links[1:])):  # link i spans x in [0.1 i, 0.1 (i+1)]
        scene.add_joint("ball", b, a, anchor=(0.1 * (i + 1), 0.0, height), stiffness=1e4)
    return scene


def _scene_case(jc, jax, jnp, scene, steps):
    model, state = scene.build(dtype=jnp.float64)

    def run(state):
        final, _, info = jc.rollout(model, state, steps=steps, return_info=True)
        return final.pos, info.converged, info.iterations, info.overflow

    def sanity(out):
        # (steps whose broad phase dropped candidate pairs: their physics is not the scene's)
        return {"z_min": float(jnp.min(out[0][:, 2])), "z_mean": float(jnp.mean(out[0][:, 2])),
                "overflow_steps": int(jnp.sum(out[3]))}

    return run, state, steps, sanity


def worker(case):
    """Run one case in this process; print its JSON row."""
    if not case.startswith("box_drop"):
        os.environ.setdefault("JAX_ENABLE_X64", "1")
    import jax
    import jax.numpy as jnp

    import jaxcontact as jc
    from jaxcontact import scenes

    if case.startswith("box_drop"):
        run, arg, steps, sanity = _box_drop(jc, jax, jnp, int(case.split("_b")[1]))
        batch = int(case.split("_b")[1])
    else:
        batch = 1
        steps = 100
        if case.startswith("s1_chain"):
            scene = scenes.spring_chain(int(case.rsplit("_", 1)[1]))
        elif case.startswith("ball_chain"):
            scene = _ball_chain(jc, int(case.split("_")[2]))
            steps = 500 if case.endswith("_1s") else 100
        elif case.startswith("pile_"):
            kwargs = {"friction": 0.0} if case.endswith("_frictionless") else {}
            scene = scenes.sphere_pile(int(case.split("_")[1]), **kwargs)
        else:
            raise SystemExit(f"unknown case {case!r}")
        run, arg, steps, sanity = _scene_case(jc, jax, jnp, scene, steps)
    start = time.perf_counter()
    compiled = jit(run).lower(arg).compile()
    compile_s = time.perf_counter() - start
    runs = []
    out = None
    for _ in range(REPEATS):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(arg))
        runs.append(time.perf_counter() - start)
        if runs[-1] > 60.0:
            break
    row = {"case": case, "batch": batch, "steps": steps, "compile_s": compile_s,
           "ms_per_step": 1e3 * min(runs) / steps,
           "scene_steps_per_s": batch * steps / min(runs), "runs_s": runs,
           "converged": float(jnp.mean(out[1])), "compiler_options": compiler_options(),
           **({"iterations_mean": float(jnp.mean(out[2]))} if len(out) > 2 else {}),
           **sanity(out)}
    print("ROW " + json.dumps(row), flush=True)


REPEATS = 3


def main():
    global REPEATS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), choices=CASES)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="step_cost")
    parser.add_argument("--worker")
    args = parser.parse_args()
    REPEATS = args.repeats
    if args.worker:
        worker(args.worker)
        return
    rows = []
    for case in args.cases:
        log(f"{case} ...")
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.step_cost", "--worker", case,
                                   "--repeats", str(args.repeats)], capture_output=True,
                                  text=True, timeout=args.timeout, cwd=REPO)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
            if lines:
                row = json.loads(lines[-1][4:])
            else:
                row = {"case": case, "error": proc.stderr[-2000:]}
        except subprocess.TimeoutExpired:
            row = {"case": case, "timed_out_s": args.timeout}
        row["wall_s"] = time.perf_counter() - start
        log(f"  {json.dumps(row)}")
        rows.append(row)
    doc = {"provenance": provenance(), "cases": rows}
    write_results(doc, args.name)


if __name__ == "__main__":
    main()
