"""Qiao et al. 2020, Fig. 3 and Table 1: runtime and memory against the number of objects
falling into a pile.

Qiao et al. ("Scalable differentiable physics for learning and control", ICML 2020): Fig. 3
plots forward/backward runtime and memory for 20 to 1000 objects falling into a pile and
claims near-linear growth; Table 1 gives the backward time per step for 100, 200, 300
falling cubes: 0.56, 1.11, 1.65 s (one Xeon core).

Setup here: `jaxcontact.scenes.sphere_pile(N)`: spheres of radius 5 cm and 0.1 kg on a
jittered lattice of about 4 layers in a bin (ground and 4 walls), spacing 2.06 radii, lowest
layer 0.02 radius above the ground, all moving down at 0.5 m/s; k_n = 1e5, k_d = 300, μ = 0.5, Δt = 2 ms. We simulate a
short window of T steps from release (impact and settling of the first layers), not the
paper's whole fall: the per-step cost is what scales. Broad phase "sweep" with a window
wide enough for the lattice (reported), default capacity (6 candidate pairs per sphere,
13 per cube).
Solver: matrix-free Newton (`jc.Newton(linear="cg", iterations=40, early_exit=True)`,
`krylov_iterations=100` for cubes; implicit gradients then use the Krylov adjoint; with the
early exit every Newton and Krylov loop stops at its tolerance), "pseudo_huber" friction
(with the default "huber" law Newton stagnates on many pile steps), float64, CPU. Per N:
forward rollout, and forward + reverse-mode gradient of the mean final height w.r.t. all
initial velocities, each one compiled `jax.jit` program (compile timed separately); memory
from the compiled programs' `memory_analysis()` (XLA's static buffer assignment: arguments,
outputs, temporaries).
Then the same for N = 100, 200, 300 cubes (`shape="box"`, half edge 5 cm): backward time per
step = (gradient time - forward time) / T.

Run:  python -m experiments.pile_scaling [--quick]
      (writes docs/experiments/pile_scaling.{json,png})
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxcontact as jc  # noqa: E402
from jaxcontact import scenes  # noqa: E402
from jaxcontact.models import contacts  # noqa: E402

from experiments._common import finish_figure, log, parser, save  # noqa: E402

SPHERES = (20, 50, 100, 200, 400, 1000)
CUBES = (100, 200, 300)
STEPS, CUBE_STEPS = 20, 10
QUICK_SPHERES, QUICK_CUBES = (20, 50), (100,)
QUICK_STEPS, QUICK_CUBE_STEPS = 10, 4
# matrix-free Newton reaches 1e-6 m/s on these piles, rarely the float64 default 1e-10; the
# impact steps need up to ~25 Newton iterations (the default cap of 12 left 20-75% of the
# steps unconverged), the early exit stops each step when it has converged and each Krylov
# solve when it has reached its (inexact-Newton) tolerance
SOLVER = jc.Newton(linear="cg", tol=1e-6, early_exit=True, iterations=40)
# piles of cubes need up to 100 BiCGSTAB iterations per direction: with the default 40, 3 of
# the 300-cube pile's 10 steps stalled and the pile diverged. Spheres keep the default: the
# directions that do not converge in 40 iterations do not converge in 100 either (their cost
# nearly doubles, the Newton iterations stay the same).
CUBE_SOLVER = dataclasses.replace(SOLVER, krylov_iterations=100)
# the default "huber" friction makes Newton stagnate (residual 0.1-1 m/s) on many pile steps
CONTACT = jc.Contact(friction="pseudo_huber")
QIAO_TABLE1_S = {100: 0.56, 200: 1.11, 300: 1.65}
# objects start nearly touching (gaps of 0.02-0.1 radius) and moving down at 0.5 m/s, so
# contacts form within the first few steps of the short timed window
# horizontal jitter ±0.02 radius: neighbours start 1-3 mm apart, never overlapping
LAYOUT = {"base_height": 1.02, "spacing": 2.06, "jitter": 0.02}   # in radii
# cubes sit face to face: 2.08 half edges and ±0.02 jitter leave 2-4 mm gaps
CUBE_LAYOUT = {"base_height": 1.02, "spacing": 2.08, "jitter": 0.02}
DROP_SPEED = 0.5


def broad_phase(scene, shape):
    """Sweep window covering the lattice columns within reach of the initial layout (+ slack):
    two for spheres, three for cubes (bounding spheres of radius √3 half edges reach 1.8
    columns either side; two were too few for 300 cubes, which overflowed)."""
    info = scene.info
    window = (3 if shape == "box" else 2) * info["side"] * info["layers"] + 8
    return jc.BroadPhase(mode="sweep", window=window)


def memory(compiled):
    m = compiled.memory_analysis()
    if m is None:
        return None
    out = {k: int(getattr(m, k)) for k in ("argument_size_in_bytes", "output_size_in_bytes",
                                           "temp_size_in_bytes", "alias_size_in_bytes",
                                           "generated_code_size_in_bytes") if hasattr(m, k)}
    out["total_mib"] = (out.get("argument_size_in_bytes", 0) + out.get("output_size_in_bytes", 0)
                        + out.get("temp_size_in_bytes", 0)
                        - out.get("alias_size_in_bytes", 0)) / 2 ** 20
    return out


def run(n, steps, shape):
    r = 0.05
    layout = {k: v * r for k, v in (CUBE_LAYOUT if shape == "box" else LAYOUT).items()}
    scene = scenes.sphere_pile(n, shape=shape, radius=r, drop_speed=DROP_SPEED, **layout)
    bp = broad_phase(scene, shape)
    solver = CUBE_SOLVER if shape == "box" else SOLVER
    model, state = scene.build(contact=CONTACT, solver=solver, broad_phase=bp)

    def forward(model, state):
        final, _, info = jc.rollout(model, state, steps=steps, return_info=True)
        return final, info

    def loss(vel, model, state):
        final, _ = jc.rollout(model, state.replace(vel=vel), steps=steps)
        return jnp.mean(final.pos[:, 2])

    row = {"n": n, "shape": shape, "steps": steps, "window": bp.window,
           "capacity": next(t.capacity for t in model.terms
                            if isinstance(t, contacts.BodyPair)),
           "contact_rows": contacts.n_rows(model)}
    results = {}
    for name, fn, args in (("forward", forward, (model, state)),
                           ("gradient", jax.value_and_grad(loss), (state.vel, model, state))):
        start = time.perf_counter()
        compiled = jc.jit(fn).lower(*args).compile()
        row[f"compile_{name}_s"] = time.perf_counter() - start
        row[f"memory_{name}"] = memory(compiled)
        best = float("inf")
        for _ in range(2 if n <= 100 else 1):   # best of 2 where cheap
            start = time.perf_counter()
            results[name] = jax.block_until_ready(compiled(*args))
            best = min(best, time.perf_counter() - start)
        row[f"{name}_s"] = best
        row[f"{name}_s_per_step"] = row[f"{name}_s"] / steps
    row["backward_s_per_step"] = (row["gradient_s"] - row["forward_s"]) / steps
    final, info = results["forward"]
    info = jax.tree.map(np.asarray, info)
    value, grad = results["gradient"]
    row.update({
        "overflow_steps": int(info.overflow.sum()),
        "converged_fraction": float(info.converged.mean()),
        "mean_iterations": float(info.iterations.mean()),
        "max_residual": float(info.residual.max()),
        "max_penetration_m": float(info.max_penetration.max()),
        "active_contacts_last": int(info.active_contacts[-1]),
        "grad_finite": bool(jnp.all(jnp.isfinite(grad))),
        "inside_bin": bool(np.all(np.abs(np.asarray(final.pos[:, :2]))
                                  <= scene.info["bin_half"])),
    })
    log(f"{shape:6s} N={n:5d}  fwd {row['forward_s_per_step'] * 1e3:8.1f} ms/step  bwd "
        f"{row['backward_s_per_step'] * 1e3:8.1f} ms/step  mem fwd "
        f"{(row['memory_forward'] or {}).get('total_mib', float('nan')):.1f} MiB grad "
        f"{(row['memory_gradient'] or {}).get('total_mib', float('nan')):.1f} MiB  compile "
        f"{row['compile_forward_s']:.0f}+{row['compile_gradient_s']:.0f} s  overflow "
        f"{row['overflow_steps']}  converged {row['converged_fraction']:.2f}  contacts "
        f"{row['active_contacts_last']}")
    return row


def loglog_slope(ns, y):
    """Slope of log y against log N (None with fewer than 2 points or non-positive y)."""
    if len(ns) < 2 or min(y) <= 0:
        return None
    slope, _ = np.polyfit(np.log(ns), np.log(y), 1)
    return float(slope)


def plot(spheres, cubes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = np.array([r["n"] for r in spheres])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    if not spheres:
        ns, spheres = np.array([1]), [{"n": 1, "forward_s_per_step": np.nan,
                                      "backward_s_per_step": np.nan, "memory_forward": None,
                                      "memory_gradient": None}]
    axes[0].loglog(ns, [r["forward_s_per_step"] for r in spheres], "o-", label="forward")
    axes[0].loglog(ns, [r["backward_s_per_step"] for r in spheres], "s-", label="backward")
    axes[0].loglog(ns, ns * spheres[0]["forward_s_per_step"] / ns[0], "k:", label="linear")
    axes[0].set(xlabel="objects N", ylabel="s per step", title="(a) spheres: runtime per step")
    for key, label in (("memory_forward", "forward"), ("memory_gradient", "forward+gradient")):
        mem = [(r[key] or {}).get("total_mib", np.nan) for r in spheres]
        axes[1].loglog(ns, mem, "o-", label=label)
    axes[1].set(xlabel="objects N", ylabel="MiB (XLA memory_analysis)",
                title="(b) spheres: compiled program memory")
    good = [r for r in cubes if r["converged_fraction"] == 1.0]
    bad = [r for r in cubes if r["converged_fraction"] < 1.0]
    axes[2].plot([r["n"] for r in good], [r["backward_s_per_step"] for r in good], "o-",
                 label="jaxcontact")
    if bad:
        axes[2].plot([r["n"] for r in bad], [r["backward_s_per_step"] for r in bad], "rx",
                     label="jaxcontact, unconverged (diverged): not a result")
    axes[2].plot(list(QIAO_TABLE1_S), list(QIAO_TABLE1_S.values()), "s--",
                 label="Qiao Table 1 (1 Xeon core)")
    axes[2].set(xlabel="cubes N", ylabel="backward s per step", title="(c) cubes: backward time")
    return finish_figure(fig, axes, "Qiao et al. Fig. 3 / Table 1 analogue: objects falling "
                         "into a pile (float64, CPU)", legend=8)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--spheres", type=int, nargs="*", help="sphere counts (default all)")
    p.add_argument("--cubes", type=int, nargs="*", help="cube counts (default all)")
    p.add_argument("--previous", type=pathlib.Path,
                   help="an earlier pile_scaling.json whose rows fill in the counts not run")
    args = p.parse_args()
    if args.quick:
        sphere_ns, cube_ns, steps, cube_steps = QUICK_SPHERES, QUICK_CUBES, QUICK_STEPS, \
            QUICK_CUBE_STEPS
    else:
        sphere_ns, cube_ns, steps, cube_steps = SPHERES, CUBES, STEPS, CUBE_STEPS
    sphere_ns = sphere_ns if args.spheres is None else tuple(args.spheres)
    cube_ns = cube_ns if args.cubes is None else tuple(args.cubes)
    start = time.perf_counter()
    spheres = [run(n, steps, "sphere") for n in sphere_ns]
    cubes = [run(n, cube_steps, "box") for n in cube_ns]
    previous_wall = 0.0
    if args.previous:
        old = json.loads(args.previous.read_text())
        previous_wall = old.get("total_wall_s", 0.0)
        spheres = sorted(spheres + [r for r in old["spheres"] if r["n"] not in sphere_ns],
                         key=lambda r: r["n"])
        cubes = sorted(cubes + [r for r in old["cubes"] if r["n"] not in cube_ns],
                       key=lambda r: r["n"])
        sphere_ns = tuple(r["n"] for r in spheres)
        cube_ns = tuple(r["n"] for r in cubes)
    ns = [r["n"] for r in spheres]
    slopes = {
        "forward_time": loglog_slope(ns, [r["forward_s_per_step"] for r in spheres]),
        "backward_time": loglog_slope(ns, [r["backward_s_per_step"] for r in spheres]),
        "memory_forward": loglog_slope(ns, [r["memory_forward"]["total_mib"] for r in spheres])
        if all(r["memory_forward"] for r in spheres) else None,
        "memory_gradient": loglog_slope(ns, [r["memory_gradient"]["total_mib"]
                                             for r in spheres])
        if all(r["memory_gradient"] for r in spheres) else None,
        "cube_backward_time": loglog_slope([r["n"] for r in cubes],
                                           [r["backward_s_per_step"] for r in cubes]),
    }
    result = {
        "params": {"sphere_ns": list(sphere_ns), "cube_ns": list(cube_ns), "steps": steps,
                   "cube_steps": cube_steps, "dt_s": 0.002, "radius_or_half_edge_m": 0.05,
                   "mass_kg": 0.1, "k_n": 1e5, "k_d": 300.0, "mu": 0.5, "dtype": "float64",
                   "backend": jax.default_backend(), "solver": repr(SOLVER),
                   "cube_solver": repr(CUBE_SOLVER),
                   "contact": repr(CONTACT),
                   "window": "short window of `steps` steps from release, objects placed "
                             "0.02-0.1 radius above the ground/each other on a jittered "
                             "lattice of ~4 layers, moving down at 0.5 m/s (not the paper's "
                             "full fall)", "layout_in_radii": LAYOUT,
                   "cube_layout_in_half_edges": CUBE_LAYOUT,
                   "drop_speed_m_s": DROP_SPEED,
                   "loss": "mean final height; gradient w.r.t. all initial velocities",
                   "quick": args.quick},
        "spheres": spheres,
        "cubes": cubes,
        "loglog_slopes": slopes,
        "qiao_table1_backward_s_per_step": QIAO_TABLE1_S,
        "claims": {
            "near_linear_growth": {
                "agrees": all(slopes[k] is not None and slopes[k] < 1.3
                              for k in ("forward_time", "backward_time")),
                "reason": "log-log slopes: " + ", ".join(
                    f"{k} {v:.2f}" if v is not None else f"{k} n/a"
                    for k, v in slopes.items())},
            "steps_converged": {
                "agrees": all(r["converged_fraction"] == 1.0 for r in spheres + cubes),
                "reason": "fraction of converged steps: " + ", ".join(
                    f"{r['shape']} {r['n']}: {r['converged_fraction']:.2f}"
                    for r in spheres + cubes)},
            "no_overflow": {
                "agrees": all(r["overflow_steps"] == 0 for r in spheres + cubes),
                "reason": "steps with broad-phase overflow: " + ", ".join(
                    f"{r['shape']} {r['n']}: {r['overflow_steps']}" for r in spheres + cubes)},
        },
        "notes": ["Backward time per step = (forward+gradient time - forward time) / steps; "
                  "best of 2 timed runs after compilation (1 above N = 100); the machine is "
                  "shared, see provenance.",
                  "Memory is XLA's static buffer assignment of each compiled program "
                  "(arguments + outputs + temporaries - aliased), not a measured process peak.",
                  "Qiao's times are one Xeon core, a different machine and method: compare "
                  "growth, not absolute values."],
        "total_wall_s": round(time.perf_counter() - start, 1) + previous_wall,
    }
    save("pile_scaling", result, plot(spheres, cubes), args.out_dir)


if __name__ == "__main__":
    main()
