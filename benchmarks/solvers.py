"""Convergence of the solver family on one representative step of three ill-conditioned scenes.

    python -m benchmarks.solvers            # full sweep (many compilations: tens of minutes)
    python -m benchmarks.solvers --quick    # iterations 1 3 10 30 100: smoke test

Solvers (float64, tol = --tol, default 1e-8 m/s, otherwise library defaults):
  newton           jc.Newton()                     dense Hessian, Cholesky
  newton_cg        jc.Newton(linear="cg")          matrix-free, preconditioned CG
  descent          jc.Descent()                    block-Jacobi preconditioned descent
  dual             jc.Dual()                       Jacobi XPBD with mass splitting
  dual_exact       jc.Dual(update="exact")         only if asked for with --solvers
(each with the library's defaults otherwise, recorded per solver in the JSON as `settings`)

Scenes (dt = 0.002 s, gravity -9.81 z):
  mass_ratio       double pendulum of two spheres on stiff distance springs (k = 1e8 N/m)
                   from a world anchor: light 0.1 kg above, heavy 1000 kg below (1e4:1),
                   released from angles 0.3 and 0.6 rad
  stiffness_ratio  two 1 kg masses hanging in series from a world anchor: upper spring
                   1e3 N/m, lower 1e7 N/m (1e4:1), released off equilibrium with a kick
  contact          a box (half size 0.05 m, 1 kg, friction 0.5) landing upright on a plane
                   at 0.5 m/s, sliding at 1 m/s and spinning at 3 rad/s (box_drop-like;
                   4 corners in contact at the representative step, huber friction)

Each scene is advanced --warmup steps with a tight dense Newton (tol 1e-11, 50 iterations);
the step from that state is the representative step, the same for every solver. Its
reference solution is the same dense Newton (tol 1e-11 lies below the rounding floor of the
stiff scenes, ~k eps |x| dt / m ~ 1e-10 m/s for mass_ratio: Newton runs to its best there).
For every solver and every iteration count k of the sweep (each a static setting, so each
its own compiled `jc.jit(jc.step)`), it records:

  residual         max |M⁻¹ r| (m/s) after the step (StepInfo.residual)
  iterations_used  StepInfo.iterations (< k once max |M⁻¹ r| <= tol: the solver stops there)
  velocity_error   max |v - v_ref| over linear and angular velocities of the bodies
  compile_s        lower + compile of that step (AOT); scenes of the same structure (the two
                   spring scenes) share compiled programs: compile_reused_from names the scene
                   whose compilation was reused and whose compile time is reported
  step_s           best wall time of one call of the compiled step (block_until_ready;
                   includes dispatch, ~10-50 µs), over >= --repeats calls and --min-time-s
Per solver and scene: iterations_to_tol (StepInfo.iterations at the first k that converged:
exact, the iterate count at which max |M⁻¹ r| <= tol first held), step_s at that k, and, if
no k converged, the smallest residual of the sweep (stalled_at) with the reduction over the
sweep's last step (last_reduction, per iteration too; `stalled` if it is above 0.9, else the
solver is just slow).
Once a k has converged, larger k reproduce the same iterate (solvers freeze converged
scenes), so the sweep of that solver stops there unless --full-sweep.

Writes results/<name>.json (printed to stdout), results/<name>.png (residual vs iterations,
one panel per scene, one line per solver) and a summary table to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from jaxcontact.models.contacts import n_rows  # noqa: E402

from benchmarks._common import (RESULTS, best_of_interleaved, jax_provenance, jit, log,  # noqa: E402
                     timed_compile, write_results)

DT = 0.002
SWEEP = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
QUICK_SWEEP = (1, 3, 10, 30, 100)
STALL_RATIO = 0.9
REFERENCE_TOL = 1e-11  # below the rounding floor of the stiff scenes: Newton runs to its best
STYLE = {"newton": {"marker": "o", "ls": "-"},
         "newton_cg": {"marker": "s", "ls": "--", "mfc": "none"},
         "descent": {"marker": "v", "ls": "-"},
         "dual": {"marker": "D", "ls": "-"},
         "dual_exact": {"marker": "d", "ls": "--"}}
SOLVERS = {
    "newton": lambda k, tol: jc.Newton(iterations=k, tol=tol),
    "newton_cg": lambda k, tol: jc.Newton(iterations=k, tol=tol, linear="cg"),
    "descent": lambda k, tol: jc.Descent(iterations=k, tol=tol),
    "dual": lambda k, tol: jc.Dual(iterations=k, tol=tol),
    # not run by default (--solvers ... dual_exact): Dual's other update
    "dual_exact": lambda k, tol: jc.Dual(iterations=k, tol=tol, update="exact"),
}
DEFAULT_SOLVERS = ("newton", "newton_cg", "descent", "dual")


# --------------------------------------------------------------------------------------------
# scenes


def mass_ratio_scene():
    """Double pendulum: anchor -> stiff spring -> light sphere -> stiff spring -> heavy sphere."""
    light, heavy, k, length = 0.1, 1000.0, 1e8, 0.5
    anchor = np.array([0.0, 0.0, 1.0])
    p1 = anchor + length * np.array([math.sin(0.3), 0.0, -math.cos(0.3)])
    p2 = p1 + length * np.array([math.sin(0.6), 0.0, -math.cos(0.6)])
    s = jc.Scene(dt=DT)
    a = s.add_sphere(0.02, light, tuple(p1))
    b = s.add_sphere(0.05, heavy, tuple(p2))
    s.add_spring(a, -1, stiffness=k, anchor_b=tuple(anchor), rest_length=length)
    s.add_spring(b, a, stiffness=k, rest_length=length)
    return s, {"masses_kg": [light, heavy], "mass_ratio": heavy / light, "stiffness": k,
               "length_m": length, "angles_rad": [0.3, 0.6]}


def stiffness_ratio_scene():
    """Two equal masses in series: anchor -> soft spring -> mass -> stiff spring -> mass."""
    m, k_soft, k_stiff, rest = 1.0, 1e3, 1e7, 0.3
    s = jc.Scene(dt=DT)
    # off equilibrium: the soft spring at its rest length (it stretches by 2 m g / k_soft =
    # 2 cm at rest), the lower mass kicked sideways and down
    a = s.add_sphere(0.02, m, (0.0, 0.0, 1.0 - rest))
    b = s.add_sphere(0.02, m, (0.0, 0.0, 1.0 - 2 * rest), vel=(0.5, 0.0, -0.3))
    s.add_spring(a, -1, stiffness=k_soft, anchor_b=(0.0, 0.0, 1.0), rest_length=rest)
    s.add_spring(b, a, stiffness=k_stiff, rest_length=rest)
    return s, {"masses_kg": [m, m], "stiffness": [k_soft, k_stiff],
               "stiffness_ratio": k_stiff / k_soft, "rest_m": rest}


def contact_scene():
    """box_drop-like: a box landing flat on the plane, sliding and spinning about z."""
    z, vel, ang_vel = 0.0505, (1.0, 0.3, -0.5), (0.0, 0.0, 3.0)
    s = jc.Scene(dt=DT)
    s.add_plane(friction=0.5)
    s.add_box(0.05, 1.0, (0.0, 0.0, z), vel=vel, ang_vel=ang_vel, friction=0.5)
    return s, {"half_size_m": 0.05, "mass_kg": 1.0, "friction": 0.5, "z0_m": z,
               "vel": list(vel), "ang_vel": list(ang_vel)}


SCENES = {"mass_ratio": mass_ratio_scene, "stiffness_ratio": stiffness_ratio_scene,
          "contact": contact_scene}


def representative_state(name, warmup):
    """(scene parameters, reference model, state after `warmup` tightly solved steps, the
    largest residual of those steps)."""
    scene, params = SCENES[name]()
    ref_solver = jc.Newton(iterations=50, tol=REFERENCE_TOL)
    model, state = scene.build(solver=ref_solver, dtype=jnp.float64)
    warmup_residual = None
    if warmup:
        state, _, info = jit(lambda m, s: jc.rollout(m, s, steps=warmup,
                                                         return_info=True))(model, state)
        warmup_residual = float(jnp.max(info.residual))
        log(f"  warm-up: max residual {warmup_residual:.2e} (dense Newton, tol "
            f"{REFERENCE_TOL:g}, 50 iterations)")
    return params, model, state, warmup_residual


# --------------------------------------------------------------------------------------------
# measurement


def velocities(state):
    return np.concatenate([np.asarray(state.vel).ravel(), np.asarray(state.ang_vel).ravel()])


# compiled steps by program structure: scenes of the same structure (mass_ratio and
# stiffness_ratio: two spheres, two springs; only leaf values differ) share one compilation
_COMPILED = {}


def compiled_step(model, state, scene):
    """(compiled jc.step, its compile time, the scene it was first compiled for)."""
    key = (jax.tree.structure((model, state)),
           tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves((model, state))))
    if key not in _COMPILED:
        _COMPILED[key] = (*timed_compile(jit(jc.step), model, state), scene)
    return _COMPILED[key]


def measure(scene, model, state, solver, ref_vel, args):
    """Compile (or reuse) and run one step of `model` with `solver` from `state`."""
    m = model.replace(solver=solver)
    compiled, compile_s, compiled_for = compiled_step(m, state, scene)
    new, info = compiled(m, state)
    best, rounds = best_of_interleaved({"step": compiled}, m, state, repeats=args.repeats,
                                       min_time_s=args.min_time_s)
    return {
        "iterations": solver.iterations,
        "residual": float(info.residual),
        "iterations_used": int(info.iterations),
        "converged": bool(info.converged),
        "result": jc.Result(int(info.result)).name,
        "velocity_error": float(np.max(np.abs(velocities(new) - ref_vel))),
        "active_contacts": int(info.active_contacts),
        "compile_s": compile_s,
        "compile_reused_from": None if compiled_for == scene else compiled_for,
        "step_s": best["step"],
        "timing_rounds": rounds,
    }


def sweep_solver(scene, name, model, state, ref_vel, args):
    rows = []
    for k in args.sweep:
        row = measure(scene, model, state, SOLVERS[name](k, args.tol), ref_vel, args)
        rows.append(row)
        log(f"    {name:16} k={k:5d}: residual {row['residual']:.3e}, used "
            f"{row['iterations_used']:5d}, |v-v_ref| {row['velocity_error']:.2e}, "
            f"step {row['step_s'] * 1e3:8.3f} ms, compile {row['compile_s']:.1f} s"
            + (f" (reused from {row['compile_reused_from']})" if row["compile_reused_from"]
               else ""))
        if not math.isfinite(row["residual"]):
            log(f"    {name}: non-finite residual at k={k}: stopping its sweep")
            break
        if row["converged"] and not args.full_sweep:
            break
    first = next((r for r in rows if r["converged"]), None)
    residuals = [r["residual"] for r in rows if math.isfinite(r["residual"])]
    out = {"settings": dataclasses.asdict(SOLVERS[name](args.sweep[0], args.tol)),
           "sweep": rows,
           "converged": first is not None,
           "iterations_to_tol": first["iterations_used"] if first else None,
           "cap_at_tol": first["iterations"] if first else None,
           "step_s_at_tol": first["step_s"] if first else None,
           "velocity_error_at_tol": first["velocity_error"] if first else None,
           "best_residual": min(residuals) if residuals else None,
           "compile_s_mean": float(np.mean([r["compile_s"] for r in rows])),
           "compile_s_total": float(np.sum([r["compile_s"] for r in rows])),
           "compile_s_spent": float(np.sum([r["compile_s"] for r in rows
                                            if not r["compile_reused_from"]]))}
    out["settings"].pop("iterations")
    if first is None:
        # not converged within the sweep: the smallest residual reached, and whether the last
        # step of the sweep still made progress (ratio of the last two residuals, and that
        # ratio per iteration; above STALL_RATIO it counts as stalled rather than slow)
        out["stalled_at"] = out["best_residual"]
        if len(rows) >= 2 and rows[-2]["residual"] and math.isfinite(rows[-1]["residual"]):
            ratio = rows[-1]["residual"] / rows[-2]["residual"]
            out["last_reduction"] = ratio
            out["last_reduction_per_iteration"] = ratio ** (
                1.0 / (rows[-1]["iterations"] - rows[-2]["iterations"]))
            out["stalled"] = ratio > STALL_RATIO
    return out


def run_scene(name, args):
    log(f"[{name}] warm-up {args.warmup} steps")
    params, model, state, warmup_residual = representative_state(name, args.warmup)
    ref_compiled, _ = timed_compile(jit(jc.step), model, state)
    ref_state, ref_info = ref_compiled(model, state)
    ref = {"solver": dataclasses.asdict(model.solver), "residual": float(ref_info.residual),
           "iterations": int(ref_info.iterations), "converged": bool(ref_info.converged),
           "active_contacts": int(ref_info.active_contacts),
           "max_penetration": float(ref_info.max_penetration)}
    log(f"  reference: residual {ref['residual']:.2e} after {ref['iterations']} Newton "
        f"iterations, {ref['active_contacts']} active contacts")
    ref_vel = velocities(ref_state)
    out = {"params": params, "n_body": model.n_body, "n_spring": model.spring.size,
           "contact_candidates": n_rows(model), "warmup_steps": args.warmup,
           "warmup_max_residual": warmup_residual,
           "state": {"pos": np.asarray(state.pos).tolist(), "vel": np.asarray(state.vel).tolist(),
                     "ang_vel": np.asarray(state.ang_vel).tolist()},
           "reference": ref, "solvers": {}}
    for solver in args.solvers:
        t0 = time.perf_counter()
        out["solvers"][solver] = sweep_solver(name, solver, model, state, ref_vel, args)
        out["solvers"][solver]["wall_s"] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------------------------
# report


def plot(doc, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenes = doc["scenes"]
    fig, axes = plt.subplots(1, len(scenes), figsize=(5.2 * len(scenes), 4.2), squeeze=False)
    for ax, (scene, res) in zip(axes[0], scenes.items()):
        for solver, sres in res["solvers"].items():
            rows = [r for r in sres["sweep"] if math.isfinite(r["residual"])]
            if not rows:
                continue
            # a converged solve stops at iterations_used: plot it there, not at the cap
            ks = [r["iterations_used"] if r["converged"] else r["iterations"] for r in rows]
            line, = ax.loglog(ks, [max(r["residual"], 1e-17) for r in rows], ms=5,
                              label=solver, **STYLE.get(solver, {}))
            first = next((r for r in rows if r["converged"]), None)
            if first is not None:
                ax.plot([first["iterations_used"]], [max(first["residual"], 1e-17)], "*",
                        ms=12, color=line.get_color())
        ax.axhline(doc["config"]["tol"], color="k", ls="--", lw=0.8, label="tol")
        ax.set_title(scene)
        ax.set_xlabel("iterations")
        ax.set_ylabel("max |M⁻¹ r| after the step (m/s)")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9,
               bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(f"residual vs iterations, one step after {doc['config']['warmup']} warm-up "
                 "steps (float64; ★ first converged)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_summary(doc):
    log("")
    ks = doc["config"]["sweep"]
    hdr = (f"{'scene':16} {'solver':16} {'it to tol':>10} {'cap':>5} {'ms/step':>8} "
           f"{'compile s':>9} " + " ".join(f"{'r@' + str(k):>9}" for k in ks))
    log(f"tol = {doc['config']['tol']:g} m/s; it to tol: iterations used at the first "
        "converged cap; ms/step: best time of one step at that cap (a scan runs all `cap` "
        "iterations, masked after convergence); compile s: mean per cap (shared programs "
        "count where first compiled); r@k: residual after a step capped at k iterations "
        "(- : not run, converged at a smaller cap)")
    log(hdr)
    log("-" * len(hdr))
    for scene, res in doc["scenes"].items():
        for solver, s in res["solvers"].items():
            by_k = {r["iterations"]: r["residual"] for r in s["sweep"]}
            it = (str(s["iterations_to_tol"]) if s["converged"]
                  else f">{s['sweep'][-1]['iterations']}")
            ms = f"{s['step_s_at_tol'] * 1e3:.3f}" if s["converged"] else "-"
            cap = str(s["cap_at_tol"]) if s["converged"] else "-"
            log(f"{scene:16} {solver:16} {it:>10} {cap:>5} {ms:>8} {s['compile_s_mean']:>9.1f} "
                + " ".join(f"{by_k[k]:>9.1e}" if k in by_k else f"{'-':>9}" for k in ks))
    for scene, res in doc["scenes"].items():
        for solver, s in res["solvers"].items():
            if not s["converged"]:
                last = s["sweep"][-1]["iterations"]
                how = ("STALLS" if s.get("stalled") else "still decreasing") + (
                    f": x{s['last_reduction']:.3g} over the last step of the sweep, "
                    f"x{s['last_reduction_per_iteration']:.4g} per iteration"
                    if "last_reduction" in s else "")
                log(f"NOT CONVERGED in {last} iterations: {scene}/{solver}, best residual "
                    f"{s['stalled_at']:.2e} ({how})")
    log(f"written to {doc['output']} and {doc['plot']}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", type=int, nargs="+", default=list(SWEEP),
                   help="iteration counts (each a separate compilation)")
    p.add_argument("--solvers", nargs="+", choices=list(SOLVERS), default=list(DEFAULT_SOLVERS))
    p.add_argument("--scenes", nargs="+", choices=list(SCENES), default=list(SCENES))
    p.add_argument("--tol", type=float, default=1e-8, help="residual tolerance (m/s)")
    p.add_argument("--warmup", type=int, default=20,
                   help="steps before the representative one")
    p.add_argument("--repeats", type=int, default=5, help="minimum timed calls per setting")
    p.add_argument("--min-time-s", type=float, default=0.5,
                   help="keep timing calls of a setting until this much time has passed")
    p.add_argument("--full-sweep", action="store_true",
                   help="run every iteration count even after a solver has converged")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: sweep {' '.join(map(str, QUICK_SWEEP))}, 3 timed calls, "
                        "0.1 s timing")
    p.add_argument("--name", default="solvers", help="results/<name>.json and .png")
    args = p.parse_args(argv)
    if args.quick:
        args.sweep, args.repeats, args.min_time_s = list(QUICK_SWEEP), 3, 0.1
    args.sweep = sorted(set(args.sweep))
    if args.sweep[0] < 1:
        p.error("--sweep values must be >= 1")

    t0 = time.perf_counter()
    doc = {"benchmark": "solvers", "dtype": "float64",
           "config": {"sweep": args.sweep, "solvers": args.solvers, "scenes": args.scenes,
                      "tol": args.tol, "warmup": args.warmup, "dt": DT,
                      "reference_tol": REFERENCE_TOL, "repeats": args.repeats,
                      "min_time_s": args.min_time_s, "full_sweep": args.full_sweep,
                      "quick": args.quick},
           "provenance": jax_provenance(), "scenes": {}}
    for name in args.scenes:
        doc["scenes"][name] = run_scene(name, args)
    doc["provenance"]["loadavg_end"] = list(os.getloadavg())
    doc["total_wall_s"] = time.perf_counter() - t0
    png = RESULTS / f"{args.name}.png"
    doc["plot"] = str(png)
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(doc, png)
    write_results(doc, args.name)
    print_summary(doc)


if __name__ == "__main__":
    main()
