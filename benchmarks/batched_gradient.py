"""Gradient throughput of the batched `box_drop` rollout (issue 12's gradient targets).

The box_drop reference scene (`jc.scenes.box_drop()`: one box, half size 0.05 m, 1 kg, friction
0.5, dropped from z = 0.3 m with N(0, 1) linear and angular velocities, dt = 0.002 s), float32,
`scene.build()` defaults, batched with `jax.vmap` over B states. Loss: the mean over the batch
of the box's final height after `--steps` steps; its gradient is taken with respect to every
scene's initial linear and angular velocity (implicit gradients of every step).

For each batch size it reports:

  forward_compile_s   lower + compile of the jitted batched rollout (final states only)
  grad_compile_s      lower + compile of the jitted `value_and_grad` of the loss
  forward_s, grad_s   best wall times, interleaved rounds (`_common.best_of_interleaved`)
  grad_over_forward   grad_s / forward_s (issue 12: at most 3 at B = 1024, 100 steps)
  gradient_finite     every entry of the gradient is finite

Usage:
    python -m benchmarks.batched_gradient [--batch 1 1024] [--steps 100] [--name NAME]
Writes results/<name>.json (default name: batched_gradient).
"""

from __future__ import annotations

import argparse

from benchmarks._common import (best_of_interleaved, jax_provenance, jit, log, timed_compile,  # noqa: E402
                     write_results)
from benchmarks.throughput import box_drop_scene, initial_states  # noqa: E402


def measure(batch, steps):
    import jax
    import jax.numpy as jnp

    import jaxcontact as jc

    model, state = box_drop_scene(jnp.float32, None)
    states = initial_states(state, batch)
    velocities = (states.vel, states.ang_vel)

    def final_heights(velocities):
        def one(v, w):
            final = jc.rollout(model, state.replace(vel=v, ang_vel=w), steps=steps)[0]
            return final.pos[0, 2]
        return jax.vmap(one)(*velocities)

    def loss(velocities):
        return jnp.mean(final_heights(velocities))

    forward, forward_compile = timed_compile(jit(final_heights), velocities)
    grad, grad_compile = timed_compile(jit(jax.value_and_grad(loss)), velocities)
    best, rounds = best_of_interleaved({"forward": forward, "grad": grad}, velocities)
    value, gradient = grad(velocities)
    finite = all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(gradient))
    row = {"batch": batch, "steps": steps, "forward_compile_s": forward_compile,
           "grad_compile_s": grad_compile, "forward_s": best["forward"], "grad_s": best["grad"],
           "grad_over_forward": best["grad"] / best["forward"], "rounds": rounds,
           "loss": float(value), "gradient_finite": finite,
           "scene_steps_per_s_forward": batch * steps / best["forward"]}
    log(f"B={batch}: compile forward {forward_compile:.1f} s, value_and_grad "
        f"{grad_compile:.1f} s; forward {best['forward']:.3f} s, value_and_grad "
        f"{best['grad']:.3f} s (ratio {row['grad_over_forward']:.2f}); loss {float(value):.4f}, "
        f"gradient finite: {finite}")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 1024])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--name", default="batched_gradient")
    args = parser.parse_args()
    rows = [measure(batch, args.steps) for batch in args.batch]
    write_results({"provenance": jax_provenance(), "scene": "box_drop, float32, defaults",
                   "rows": rows}, args.name)


if __name__ == "__main__":
    main()
