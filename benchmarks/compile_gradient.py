"""Cold compile time of a reverse gradient through box-on-box contact (issue 63's figure).

A 1 kg box (half edge 5 cm) rests on the ground; a second one is thrown onto it from 15 cm
above (v = (0.3, 0.1, -2) m/s, ω = (1, -2, 0.5) rad/s), dt = 2 ms, 60 steps, float64. Loss:
the sum of the thrown box's final coordinates; gradient with respect to its initial
velocity (`jax.grad`, implicit reverse mode). Recorded: the seconds of `jax.jit(...).lower`
and of `.compile()` in this fresh process, whether the gradient is finite, the converged
share of the rollout's steps and the mean Newton iterations. Writes results/<name>.json.

Usage:
    python -m benchmarks.compile_gradient [--steps 60] [--name compile_gradient]
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from benchmarks._common import log, provenance, write_results  # noqa: E402


def box_onto_box():
    scene = jc.Scene(dt=0.002, friction=0.5)
    scene.add_plane()
    scene.add_box(0.05, 1.0, (0.0, 0.0, 0.05))
    thrown = scene.add_box(0.05, 1.0, (0.02, 0.01, 0.20), vel=(0.3, 0.1, -2.0),
                           ang_vel=(1.0, -2.0, 0.5))
    model, state = scene.build(dtype=jnp.float64)
    return model, state, thrown


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--name", default="compile_gradient")
    args = p.parse_args(argv)
    model, state, thrown = box_onto_box()

    def rollout(v):
        return jc.rollout(model, state.replace(vel=state.vel.at[thrown].set(v)),
                          steps=args.steps, return_info=True)

    def loss(v):
        return jnp.sum(rollout(v)[0].pos[thrown])

    v0 = state.vel[thrown]
    start = time.perf_counter()
    lowered = jax.jit(jax.grad(loss)).lower(v0)
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    grad = np.asarray(compiled(v0))
    _, _, info = jax.jit(rollout)(v0)
    row = {"scene": "box_onto_box", "steps": args.steps, "lower_s": round(lower_s, 2),
           "compile_s": round(compile_s, 2), "total_s": round(lower_s + compile_s, 2),
           "gradient": grad.tolist(), "finite": bool(np.all(np.isfinite(grad))),
           "converged": float(np.mean(np.asarray(info.converged))),
           "iterations_mean": float(np.mean(np.asarray(info.iterations)))}
    log(f"box_onto_box, {args.steps} steps: lower {lower_s:.1f} s + compile {compile_s:.1f} s")
    write_results({"benchmark": "compile_gradient", "provenance": provenance(), **row},
                  args.name)


if __name__ == "__main__":
    main()
