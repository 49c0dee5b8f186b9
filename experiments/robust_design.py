"""Robust design through the simulator: a push whose success is optimized over randomized
friction, against the same push optimized for the nominal scene only (issue 13).

Setup: a box (half edge 5 cm, 1 kg) rests on the ground and is launched along x with speed v;
it should stop at x = 1 m. Friction is uncertain: `jc.domain` draws the box's and the
ground's coefficients each from Uniform(0.3, 0.7) (nominal 0.5), and a contact uses their
mean, so the effective μ has a triangular distribution on [0.3, 0.7]. 150 implicit steps of 10 ms (the box stops within 1.1 s for every μ and
v used here; a run reports the largest final speed), float64, `jc.Newton()`.

Designs of v, each by Adam on the exact gradient through `jc.rollout` (vmapped over the batch):
- nominal: minimize (x_stop(μ = 0.5) - 1)²;
- robust (mean): minimize the mean of (x_stop - 1)² over a batch of 32 draws of μ (fresh
  draws every iteration);
- robust (CVaR 10 %): minimize the mean of the worst 10 % of (x_stop - 1)²
  (`jc.domain.cvar`).

Checks against the closed form of a block sliding to rest, x_stop = v² / (2 μ g) (Coulomb
friction, no tipping: μ < 1 for a cube):
- the nominal design is v = sqrt(2 μ0 g d);
- minimizing E[(v² a - d)²] with a = 1 / (2 μ g) gives v² = d E[a] / E[a²] (computed by
  quadrature over the effective μ, the mean of two uniform draws).

Reported: each design's v and its error distribution on 1000 held-out draws (mean, RMS,
90th percentile of |x_stop - 1|), the closed forms, and wall times.

Run from the repository root:
    python -m experiments.robust_design [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "robust_design"
DT, STEPS = 0.01, 150
HALF, MASS, GRAVITY = 0.05, 1.0, 9.81
TARGET = 1.0                         # m
MU_NOMINAL, MU_RANGE = 0.5, (0.3, 0.7)


def box_scene():
    scene = jc.Scene(dt=DT)
    scene.add_plane(friction=MU_NOMINAL)
    scene.add_box(HALF, MASS, pos=(0.0, 0.0, HALF), friction=MU_NOMINAL)
    return scene.build()


def main():
    p = parser(__doc__.split("\n")[0])
    args = p.parse_args()
    iterations, batch, held_out = (30, 16, 200) if args.quick else (80, 32, 1000)
    model, state = box_scene()
    draw = jc.domain.randomizer(friction=jc.domain.Uniform(*MU_RANGE))

    def stop(v, m):
        final, _, info = jc.rollout(m, state.replace(vel=jnp.asarray([[v, 0.0, 0.0]])),
                                    steps=STEPS, return_info=True)
        return final.pos[0, 0], jnp.mean(info.converged), final.vel[0, 0]

    def batch_stops(v, key, n):
        models, _ = jax.vmap(draw, in_axes=(None, None, 0))(model, state,
                                                            jax.random.split(key, n))
        x, conv, vel = jax.vmap(lambda m: stop(v, m))(models)
        # the contact's μ: the mean of the box's and the ground's (pair parameters)
        return x, conv, vel, 0.5 * (models.geom.friction[:, 0] + models.plane.friction[:, 0])

    objectives = {
        "nominal": lambda v, key: (stop(v, model)[0] - TARGET) ** 2,
        "mean": lambda v, key: jnp.mean((batch_stops(v, key, batch)[0] - TARGET) ** 2),
        "cvar10": lambda v, key: jc.domain.cvar((batch_stops(v, key, batch)[0] - TARGET) ** 2,
                                                0.1),
    }
    v_nominal = float(np.sqrt(2 * MU_NOMINAL * GRAVITY * TARGET))
    grid = np.linspace(*MU_RANGE, 2001)
    a = 1.0 / (2 * 0.5 * (grid[:, None] + grid[None, :]) * GRAVITY)
    v_mean = float(np.sqrt(TARGET * a.mean() / (a ** 2).mean()))
    held = jc.jit(lambda v: batch_stops(v, jax.random.key(12345), held_out))

    designs = {}
    for name, objective in objectives.items():
        step = jc.jit(jax.value_and_grad(objective))
        # 0.05 m/s steps at first, 100 times smaller at the end: the last iterates settle
        optimizer = optax.adam(optax.exponential_decay(0.05, iterations, 0.01))
        v = jnp.asarray(2.5)
        opt_state = optimizer.init(v)
        t0 = time.perf_counter()
        history = []
        for k in range(iterations):
            value, grad = step(v, jax.random.fold_in(jax.random.key(7), k))
            changes, opt_state = optimizer.update(grad, opt_state, v)
            v = optax.apply_updates(v, changes)
            history.append({"iteration": k, "v": float(v), "objective": float(value)})
        seconds = time.perf_counter() - t0
        x, converged, vel, mu = (np.asarray(t) for t in held(v))
        error = np.abs(x - TARGET)
        designs[name] = {"v": float(v), "seconds": seconds, "history": history,
                         "held_out": {"mean_abs_error_m": float(error.mean()),
                                      "rms_error_m": float(np.sqrt((error ** 2).mean())),
                                      "p90_abs_error_m": float(np.percentile(error, 90)),
                                      "worst_abs_error_m": float(error.max()),
                                      "converged": float(converged.mean()),
                                      "max_final_speed": float(np.abs(vel).max())}}
        log(f"{name}: v = {float(v):.4f} m/s, held-out mean |error| "
            f"{designs[name]['held_out']['mean_abs_error_m'] * 100:.2f} cm, p90 "
            f"{designs[name]['held_out']['p90_abs_error_m'] * 100:.2f} cm ({seconds:.0f} s)")

    result = {
        "settings": {"dt": DT, "steps": STEPS, "friction": MU_RANGE, "nominal": MU_NOMINAL,
                     "target_m": TARGET, "batch": batch, "held_out": held_out,
                     "iterations": iterations,
                     "optimizer": "adam on v, learning rate 0.05 decaying to 5e-4"},
        "closed_form": {"v_nominal": v_nominal, "v_mean_squared_error": v_mean},
        "designs": designs,
        "checks": {
            "nominal_matches_closed_form": abs(designs["nominal"]["v"] - v_nominal)
            < 0.01 * v_nominal,
            "mean_matches_closed_form": abs(designs["mean"]["v"] - v_mean) < 0.02 * v_mean,
            # the simulated stop (implicit steps, a rounded box) differs from the closed form
            # by about 1 %: the designs are compared with each other on the simulator too
            "robust_beats_nominal_on_held_out": designs["mean"]["held_out"]["rms_error_m"]
            < designs["nominal"]["held_out"]["rms_error_m"],
        },
    }
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, d in designs.items():
        axes[0].plot([h["v"] for h in d["history"]], label=name)
    axes[0].axhline(v_nominal, ls=":", c="k", lw=0.8)
    axes[0].axhline(v_mean, ls="--", c="k", lw=0.8)
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("launch speed v (m/s)")
    axes[0].set_title("designs (dotted: nominal closed form, dashed: mean-square closed form)",
                      fontsize=8)
    for name, d in designs.items():
        x, _, _, mu = (np.asarray(t) for t in held(jnp.asarray(d["v"])))
        order = np.argsort(mu)
        axes[1].plot(mu[order], x[order] - TARGET, label=f"{name} (v = {d['v']:.3f})")
    axes[1].axhline(0.0, c="k", lw=0.8)
    axes[1].set_xlabel("contact friction μ (held-out draws)")
    axes[1].set_ylabel("x_stop - target (m)")
    finish_figure(fig, axes, "Robust design through the simulator: a push under uncertain "
                  "friction", legend=8)
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
