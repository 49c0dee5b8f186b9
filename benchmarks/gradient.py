"""Gradients through contact: the `sphere_slide` and `grad_bounce` reference scenes, float64.

sphere_slide (`benchmarks.mjx.sphere_scene`): a solid sphere (r = 0.05 m, 1 kg, friction 0.5
on a plane of friction 0.5) resting at z = 0.05 with v0 = (1, 0, 0), dt = 0.002 s, 500 steps.
Loss = final x.
  - value and reverse-mode gradient dx(T)/dv0 (`jax.value_and_grad`, implicit VJP),
  - forward mode (`jax.jvp` through a second model built with `jc.Newton(ad="jvp")`),
  - central finite differences at h = 1e-3, 1e-4, 1e-5,
  - the Coulomb closed form x(T) = 5/7 v0 T + 2 v0² / (49 μ g), dx/dv0 = 5/7 T + 4 v0 / (49 μ g)
    (the README's formula for the sliding time t_s = 2 v0 / (7 μ g) < T, worked out),
  - time of value_and_grad over time of a forward rollout (both jitted, best of >= 3 rounds,
    interleaved, more rounds until --min-time-s has passed),
  - compiled temporary memory for several T (linear fit: bytes per step) and for two solver
    iteration caps at the same T (implicit gradients must not store the iterations).
grad_bounce: a sphere thrown from (0, 0, 0.5) with velocity (vx, 0, vz), T = 1 s; loss = squared
distance of the final position to (1, 0, 0.05); reverse gradient vs central differences at three
(vx, vz) and the count of non-finite gradients.
Then MJX runs both scenes, float64, the same steps and points (`python -m benchmarks.mjx
sphere_slide` and `grad_bounce`, MuJoCo's MJCF written from the same scenes) for side-by-side
numbers.

Prints a JSON document to stdout, writes it to results/<name>.json and a summary to stderr.

Usage:
    python -m benchmarks.gradient            # full run (a few minutes, mostly compilation)
    python -m benchmarks.gradient --quick    # 100 steps, small memory sweep, one bounce point
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402

from benchmarks._common import (best_of_interleaved, jax_provenance, jit, log,  # noqa: E402
                                run_subprocess, timed_compile, write_results)
from benchmarks.mjx import (BOUNCE_POINTS, BOUNCE_START, BOUNCE_TARGET, DT,  # noqa: E402
                            FRICTION as MU, SLIDE_START, sphere_scene)

G = 9.81


def run_mjx(scene, *flags):
    """`python -m benchmarks.mjx scene flags...` (float64); its JSON, or a dict with the error."""
    return run_subprocess([sys.executable, "-m", "benchmarks.mjx", scene, *flags],
                          f"mjx {scene}", stream_stderr=False)


# --------------------------------------------------------------------------------------------
# measurement helpers (timed_compile, best_of_interleaved: _common.py)


def temp_bytes(compiled):
    mem = compiled.memory_analysis()
    return None if mem is None else int(mem.temp_size_in_bytes)


def rel_err(value, reference):
    if value is None or reference is None or not math.isfinite(value):
        return None
    return abs(value - reference) / max(abs(reference), 1e-300)


def linear_fit(xs, ys):
    """Least-squares y = a + b x; slope, intercept, R², bytes per step and increments."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(xs, ys, 1)
    pred = a + b * xs
    ss_tot = float(np.sum((ys - ys.mean()) ** 2))
    r2 = 1.0 - float(np.sum((ys - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    increments = [float((ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])) for i in range(len(xs) - 1)]
    return {"slope_bytes_per_step": float(b), "intercept_bytes": float(a), "r2": r2,
            "bytes_per_step_each": [float(y / x) for x, y in zip(xs, ys)],
            "incremental_bytes_per_step": increments}


# --------------------------------------------------------------------------------------------
# scenes


def newton(args, **kw):
    """jc.Newton with the --solver-iterations cap (library default if not given)."""
    if args.solver_iterations is not None:
        kw.setdefault("iterations", args.solver_iterations)
    return jc.Newton(**kw)


def sphere_model(pos, solver=None):
    return sphere_scene(pos).build(solver=solver, dtype=jnp.float64)


def slide_start(state, v0):
    return state.replace(vel=state.vel.at[0, 0].set(v0))


def bounce_start(state, v):
    return state.replace(vel=state.vel.at[0, 0].set(v[0]).at[0, 2].set(v[1]))


def slide_loss(model, state, steps):
    """v0 -> x of the sphere after `steps` steps."""
    def loss(v0):
        final, _ = jc.rollout(model, slide_start(state, v0), steps=steps)
        return final.pos[0, 0]
    return loss


def bounce_loss(model, state, steps):
    """(vx, vz) -> squared distance of the final position to the target."""
    target = jnp.asarray(BOUNCE_TARGET, dtype=jnp.float64)

    def loss(v):
        final, _ = jc.rollout(model, bounce_start(state, v), steps=steps)
        return jnp.sum((final.pos[0] - target) ** 2)
    return loss


def solver_diagnostics(model, state, start, steps):
    """A jitted p -> summary of the StepInfo of the rollout from start(state, p).

    Kept apart from the losses so that their timing and memory are not affected. Implicit
    gradients are exact only at converged solves: unconverged steps explain gradient errors.
    """
    @jit
    def diag(p):
        _, _, info = jc.rollout(model, start(state, p), steps=steps, return_info=True)
        return {"converged_fraction": jnp.mean(info.converged),
                "unconverged_steps": jnp.sum(~info.converged),
                "max_residual": jnp.max(info.residual),
                "newton_iterations_mean": jnp.mean(info.iterations),
                "newton_iterations_max": jnp.max(info.iterations),
                "max_penetration": jnp.max(info.max_penetration)}

    def run(p):
        return {k: (int(v) if jnp.issubdtype(v.dtype, jnp.integer) else float(v))
                for k, v in diag(p).items()}
    return run


def closed_form_slide(v0, T, mu=MU, g=G):
    """Coulomb sphere sliding then rolling (README): x(T) and dx(T)/dv0.

    t_s = 2 v0 / (7 μ g); for t_s <= T, x = v0 t_s - ½ μ g t_s² + 5/7 v0 (T - t_s)
    = 5/7 v0 T + 2 v0² / (49 μ g), so dx/dv0 = 5/7 T + 4 v0 / (49 μ g). If the sphere still
    slides at T: x = v0 T - ½ μ g T², dx/dv0 = T.
    """
    ts = 2.0 * v0 / (7.0 * mu * g)
    if ts <= T:
        x = v0 * ts - 0.5 * mu * g * ts**2 + 5.0 / 7.0 * v0 * (T - ts)
        return x, 5.0 / 7.0 * T + 4.0 * v0 / (49.0 * mu * g), ts
    return v0 * T - 0.5 * mu * g * T**2, T, ts


# --------------------------------------------------------------------------------------------
# sphere_slide


def sphere_slide(args):
    v0 = jnp.asarray(1.0, jnp.float64)
    T = args.steps
    model, state = sphere_model(SLIDE_START, newton(args))
    model_fwd, _ = sphere_model(SLIDE_START, newton(args, ad="jvp"))
    loss = slide_loss(model, state, T)
    out = {"steps": T, "t_final": T * DT, "solver": dataclasses.asdict(model.solver)}

    log(f"[sphere_slide] compiling forward, value_and_grad, jvp (T={T})")
    f_c, out["compile_forward_s"] = timed_compile(jit(loss), v0)
    vg_c, out["compile_value_and_grad_s"] = timed_compile(jit(jax.value_and_grad(loss)), v0)
    jvp_fn = jit(lambda v: jax.jvp(slide_loss(model_fwd, state, T), (v,), (jnp.ones_like(v),)))
    jvp_c, out["compile_jvp_s"] = timed_compile(jvp_fn, v0)

    x, grad = (float(a) for a in vg_c(v0))
    x_jvp, grad_jvp = (float(a) for a in jvp_c(v0))
    fd = {}
    for h in args.fd_h:
        fd[f"{h:g}"] = float((f_c(v0 + h) - f_c(v0 - h)) / (2 * h))
    x_ref, g_ref, ts = closed_form_slide(1.0, T * DT)
    out.update({
        "x": x, "x_forward_rollout": float(f_c(v0)), "grad_reverse": grad,
        "x_jvp_model": x_jvp, "grad_forward_mode": grad_jvp, "fd": fd,
        "closed_form": {"x": x_ref, "grad": g_ref, "t_slide_end": ts, "mu": MU, "g": G},
        "rel_err_vs_closed_form": {
            "x": rel_err(x, x_ref), "grad_reverse": rel_err(grad, g_ref),
            "grad_forward_mode": rel_err(grad_jvp, g_ref),
            **{f"fd_{h}": rel_err(v, g_ref) for h, v in fd.items()}},
        "rel_diff_reverse_vs_fd": {h: rel_err(grad, v) for h, v in fd.items()},
        "rel_diff_reverse_vs_forward_mode": rel_err(grad, grad_jvp),
        "solver_diagnostics": solver_diagnostics(model, state, slide_start, T)(v0),
    })

    log("[sphere_slide] timing")
    best, rounds = best_of_interleaved({"forward": f_c, "value_and_grad": vg_c, "jvp": jvp_c},
                                       v0, repeats=args.repeats, min_time_s=args.min_time_s)
    t_f, t_vg, t_jvp = best["forward"], best["value_and_grad"], best["jvp"]
    out["timing"] = {"forward_s": t_f, "value_and_grad_s": t_vg, "jvp_s": t_jvp,
                     "value_and_grad_over_forward": t_vg / t_f, "jvp_over_forward": t_jvp / t_f,
                     "rounds": rounds}
    log(f"  forward {t_f:.4f} s, value_and_grad {t_vg:.4f} s ({t_vg / t_f:.2f}x), "
        f"jvp {t_jvp:.4f} s ({t_jvp / t_f:.2f}x), best of {rounds}")

    # memory over T: value_and_grad and forward, default solver
    log(f"[sphere_slide] memory for T = {args.mem_steps}")
    rows = []
    for Tm in args.mem_steps:
        if Tm == T:
            g_bytes, f_bytes = temp_bytes(vg_c), temp_bytes(f_c)
        else:
            lm = slide_loss(model, state, Tm)
            g_bytes = temp_bytes(jit(jax.value_and_grad(lm)).lower(v0).compile())
            f_bytes = temp_bytes(jit(lm).lower(v0).compile())
        rows.append({"steps": Tm, "grad_temp_bytes": g_bytes, "forward_temp_bytes": f_bytes})
        log(f"  T={Tm}: value_and_grad temp {g_bytes} B, forward temp {f_bytes} B")
    mem = {"rows": rows}
    if len(rows) >= 2 and all(r["grad_temp_bytes"] is not None for r in rows):
        Ts = [r["steps"] for r in rows]
        fit = linear_fit(Ts, [r["grad_temp_bytes"] for r in rows])
        inc = fit["incremental_bytes_per_step"]
        spread = (max(inc) - min(inc)) / max(abs(np.mean(inc)), 1e-300)
        linear = fit["r2"] > 0.999 and spread < 0.1 and fit["slope_bytes_per_step"] > 0
        mem["grad_fit"] = fit
        mem["forward_fit"] = linear_fit(Ts, [r["forward_temp_bytes"] for r in rows])
        mem["grad_linear_in_T"] = bool(linear)
        mem["statement"] = (
            f"value_and_grad temporary memory {'grows linearly' if linear else 'does NOT grow linearly'}"
            f" in T: {fit['slope_bytes_per_step']:.0f} bytes/step (R² = {fit['r2']:.6f}, "
            f"incremental bytes/step {', '.join(f'{v:.0f}' for v in inc)}); forward "
            f"{mem['forward_fit']['slope_bytes_per_step']:.1f} bytes/step")
        log("  " + mem["statement"])
    out["memory"] = mem

    # memory (and result) against the solver's iteration cap at the same T
    log(f"[sphere_slide] iteration caps {args.iteration_caps} at T={T}")
    caps = []
    for it in args.iteration_caps:
        m_it, s_it = sphere_model(SLIDE_START, jc.Newton(iterations=it))
        c = jit(jax.value_and_grad(slide_loss(m_it, s_it, T))).lower(v0).compile()
        xv, gv = (float(a) for a in c(v0))
        caps.append({"iterations": it, "grad_temp_bytes": temp_bytes(c), "x": xv, "grad": gv})
        log(f"  iterations={it}: temp {caps[-1]['grad_temp_bytes']} B, x {xv:.6f}, grad {gv:.6f}")
    caps.append({"iterations": model.solver.iterations, "grad_temp_bytes": temp_bytes(vg_c),
                 "x": x, "grad": grad, "default": True})
    caps.sort(key=lambda r: r["iterations"])
    b = [r["grad_temp_bytes"] for r in caps]
    grows = None
    if len(caps) >= 2 and None not in b:
        grows = bool(b[-1] > 1.01 * b[0])
    out["iteration_caps"] = {"rows": caps, "grad_memory_grows_with_iterations": grows,
                             "max_over_min_bytes": (max(b) / min(b)) if None not in b else None}
    return out


# --------------------------------------------------------------------------------------------
# grad_bounce


def grad_bounce(args):
    model, state = sphere_model(BOUNCE_START, newton(args))
    steps = args.bounce_steps
    diag = solver_diagnostics(model, state, bounce_start, steps)
    loss = bounce_loss(model, state, steps)
    v_init = jnp.asarray(BOUNCE_POINTS[0], jnp.float64)
    log(f"[grad_bounce] compiling ({steps} steps)")
    f_c, compile_f = timed_compile(jit(loss), v_init)
    vg_c, compile_g = timed_compile(jit(jax.value_and_grad(loss)), v_init)
    rows = []
    for vx, vz in BOUNCE_POINTS[:args.bounce_points]:
        v = jnp.asarray((vx, vz), jnp.float64)
        value, g = vg_c(v)
        g = np.asarray(g, float)
        fd = {}
        for h in args.bounce_h:
            e = np.eye(2) * h
            fd[f"{h:g}"] = [float((f_c(v + e[i]) - f_c(v - e[i])) / (2 * h)) for i in range(2)]
        ref = np.asarray(fd[f"{args.bounce_h[0]:g}"])
        finite = bool(np.all(np.isfinite(g)))
        rows.append({
            "v": [vx, vz], "loss": float(value), "grad": g.tolist(), "fd": fd,
            "finite": finite, "nonfinite_components": int(np.sum(~np.isfinite(g))),
            "fd_h_reference": args.bounce_h[0],
            "rel_err_vs_fd": (float(np.linalg.norm(g - ref) / max(np.linalg.norm(ref), 1e-300))
                              if finite else None),
            "abs_err_vs_fd": (np.abs(g - ref).tolist() if finite else None),
            "solver_diagnostics": diag(v),
        })
        log(f"  v={vx, vz}: loss {float(value):.6f}, grad {g}, fd {ref}, "
            f"rel err {rows[-1]['rel_err_vs_fd']}, unconverged steps "
            f"{rows[-1]['solver_diagnostics']['unconverged_steps']}")
    return {"steps": steps, "t_final": steps * DT, "target": list(BOUNCE_TARGET),
            "solver": dataclasses.asdict(model.solver),
            "compile_forward_s": compile_f, "compile_value_and_grad_s": compile_g,
            "rows": rows, "nonfinite_gradients": sum(r["nonfinite_components"] for r in rows),
            "nonfinite_points": sum(not r["finite"] for r in rows)}


# --------------------------------------------------------------------------------------------
# report


def side_by_side(doc):
    slide, mjx = doc["sphere_slide"], doc.get("mjx_sphere_slide") or {}
    cf = slide["closed_form"]
    fd_jc = slide["fd"].get("0.0001")
    rows = [
        ("x(T)", slide["x"], mjx.get("x"), cf["x"]),
        ("dx/dv0 reverse", slide["grad_reverse"], mjx.get("grad"), cf["grad"]),
        ("dx/dv0 forward mode", slide["grad_forward_mode"], None, cf["grad"]),
        ("dx/dv0 FD h=1e-3", slide["fd"].get("0.001"), (mjx.get("fd") or {}).get("0.001"),
         cf["grad"]),
        ("dx/dv0 FD h=1e-4", fd_jc, (mjx.get("fd") or {}).get("0.0001"), cf["grad"]),
        ("grad/forward time", slide["timing"]["value_and_grad_over_forward"],
         mjx.get("grad_over_forward"), None),
        ("grad temp bytes", next((r["grad_temp_bytes"] for r in slide["memory"]["rows"]
                                  if r["steps"] == slide["steps"]), None),
         mjx.get("grad_temp_bytes"), None),
    ]
    table = [{"quantity": q, "jaxcontact": a, "mjx": b, "closed_form": c,
              "jaxcontact_rel_err": rel_err(a, c) if c is not None and a is not None else None,
              "mjx_rel_err": rel_err(b, c) if c is not None and b is not None else None}
             for q, a, b, c in rows]
    bounce = []
    mjx_b = {tuple(r["v"]): r for r in (doc.get("mjx_grad_bounce") or {}).get("rows", [])}
    for r in doc["grad_bounce"]["rows"]:
        m = mjx_b.get(tuple(r["v"]), {})
        bounce.append({"v": r["v"], "jaxcontact_grad": r["grad"],
                       "jaxcontact_fd": r["fd"][f"{r['fd_h_reference']:g}"],
                       "jaxcontact_rel_err": r["rel_err_vs_fd"],
                       "mjx_grad": m.get("grad"), "mjx_fd": m.get("fd"),
                       "mjx_rel_err": (float(np.linalg.norm(np.subtract(m["grad"], m["fd"]))
                                             / max(np.linalg.norm(m["fd"]), 1e-300))
                                       if m and m.get("finite") else None),
                       "mjx_finite": m.get("finite")})
    return {"sphere_slide": table, "grad_bounce": bounce}


def fmt(x, spec=".6g"):
    if x is None:
        return "-"
    if isinstance(x, (list, tuple)):
        return "(" + ", ".join(format(v, spec) for v in x) + ")"
    return format(x, spec)


def print_summary(doc):
    sbs = doc["side_by_side"]
    s = doc["sphere_slide"]
    log()
    log(f"sphere_slide, float64, T = {s['t_final']:g} s ({s['steps']} steps)")
    log(f"{'quantity':22} {'jaxcontact':>12} {'rel err':>9} {'MJX':>12} {'rel err':>9} "
        f"{'closed form':>12}")
    for r in sbs["sphere_slide"]:
        log(f"{r['quantity']:22} {fmt(r['jaxcontact']):>12} {fmt(r['jaxcontact_rel_err'], '.2e'):>9}"
            f" {fmt(r['mjx']):>12} {fmt(r['mjx_rel_err'], '.2e'):>9} {fmt(r['closed_form']):>12}")
    d = s["solver_diagnostics"]
    log(f"solver: {s['solver']['iterations']} iterations cap; unconverged steps "
        f"{d['unconverged_steps']}, max residual {d['max_residual']:.2e}, Newton iterations "
        f"mean {d['newton_iterations_mean']:.2f} max {d['newton_iterations_max']}")
    m = s["memory"]
    if "statement" in m:
        log(m["statement"])
    ic = s["iteration_caps"]
    log("grad temp bytes by iteration cap: " + ", ".join(
        f"{r['iterations']}: {r['grad_temp_bytes']}" for r in ic["rows"])
        + f" (grows with iterations: {ic['grad_memory_grows_with_iterations']})")
    b = doc["grad_bounce"]
    log()
    log(f"grad_bounce, float64, T = {b['t_final']:g} s; non-finite gradient components: "
        f"{b['nonfinite_gradients']}; solver {b['solver']['iterations']} iterations cap")
    log(f"{'(vx, vz)':12} {'jc grad':>24} {'jc FD':>24} {'rel err':>8} {'MJX grad':>24} "
        f"{'MJX FD':>24} {'rel err':>8}")
    for r in sbs["grad_bounce"]:
        log(f"{fmt(r['v'], 'g'):12} {fmt(r['jaxcontact_grad'], '.5g'):>24} "
            f"{fmt(r['jaxcontact_fd'], '.5g'):>24} {fmt(r['jaxcontact_rel_err'], '.1e'):>8} "
            f"{fmt(r['mjx_grad'], '.5g'):>24} {fmt(r['mjx_fd'], '.5g'):>24} "
            f"{fmt(r['mjx_rel_err'], '.1e'):>8}")
    for r in b["rows"]:
        d = r["solver_diagnostics"]
        if d["unconverged_steps"]:
            log(f"  WARNING v={tuple(r['v'])}: {d['unconverged_steps']} unconverged steps (max "
                f"residual {d['max_residual']:.2e}, iteration cap {b['solver']['iterations']}): "
                "implicit gradients are only exact at converged solves")
    for key in ("mjx_sphere_slide", "mjx_grad_bounce"):
        if doc.get(key) and "error" in doc[key]:
            log(f"{key}: ERROR {doc[key]['error']}")
    log(f"written to {doc['output']}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=500, help="sphere_slide steps")
    p.add_argument("--fd-h", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5])
    p.add_argument("--mem-steps", type=int, nargs="+", default=[100, 500, 2000],
                   help="T values of the memory sweep")
    p.add_argument("--iteration-caps", type=int, nargs="+", default=[8, 24],
                   help="Newton iteration caps compared for gradient memory at T = --steps")
    p.add_argument("--bounce-steps", type=int, default=500, help="grad_bounce steps (T = 1 s)")
    p.add_argument("--bounce-points", type=int, default=len(BOUNCE_POINTS),
                   help="how many of the (vx, vz) points to evaluate")
    p.add_argument("--bounce-h", type=float, nargs="+", default=[1e-4, 1e-5],
                   help="FD steps for grad_bounce; the first is the reference")
    p.add_argument("--repeats", type=int, default=3, help="minimum timing rounds (best kept)")
    p.add_argument("--min-time-s", type=float, default=5.0,
                   help="keep adding timing rounds until this much time has passed")
    p.add_argument("--solver-iterations", type=int, default=None,
                   help="jc.Newton(iterations=...) for every model except the --iteration-caps "
                        "sweep; default: the library's default")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 100 steps, memory at T = 25 50 100, one bounce point")
    p.add_argument("--skip-mjx", action="store_true", help="no MJX runs")
    p.add_argument("--name", default="gradient", help="results/<name>.json")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.mem_steps, args.bounce_points = 100, [25, 50, 100], 1
    args.mem_steps = sorted(set(args.mem_steps))

    t0 = time.perf_counter()
    doc = {"benchmark": "gradient", "dtype": "float64",
           "config": vars(args),
           "provenance": jax_provenance()}
    doc["sphere_slide"] = sphere_slide(args)
    doc["grad_bounce"] = grad_bounce(args)
    if not args.skip_mjx:
        doc["mjx_sphere_slide"] = run_mjx("sphere_slide", "--steps", args.steps,
                                          "--repeats", args.repeats, "--min-time-s",
                                          args.min_time_s)
        doc["mjx_grad_bounce"] = run_mjx("grad_bounce", "--steps", args.bounce_steps,
                                         "--points", args.bounce_points)
    doc["side_by_side"] = side_by_side(doc)
    doc["provenance"]["loadavg_end"] = list(os.getloadavg())
    doc["total_wall_s"] = time.perf_counter() - t0

    write_results(doc, args.name)
    print_summary(doc)


if __name__ == "__main__":
    main()
