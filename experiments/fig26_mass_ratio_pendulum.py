"""Thesis Fig. 26 (Macklin 2020, §5.6 "Mass Ratio Tests"): a double pendulum of two spheres
with a mass ratio of 10^4:1. Dual (XPBD) iterations stretch the links at a fixed iteration
count; primal descent is "relatively unaffected".

Setup: two spheres (radius 1 cm, no ground, so no contact) hang in series from a world
anchor at the origin by distance springs (`Scene.add_spring`, rest length L = 0.5 m,
k = 1e5 N/m each). The HEAVY sphere (1 kg) hangs BELOW the light one (1e-4 kg): the case the
thesis's Fig. 28 ("a 1D chain of particles with a large mass attached") shows to be ill-
conditioned for the dual, whose Hessian dt^2 J M^-1 J^T + K^-1 is dominated by the light
mass. The springs are stiff for the load: the static stretch m g / k is 2e-4 L. Released
at rest with both links straight at 45 degrees; dt = 1/120 s (two substeps at 60 Hz), 2 s.
Control: the same pendulum with equal masses (1 kg each).

Solvers (same per-step budget B = 20 and 100 for the iterative ones):
  Descent(B)                    primal, block-Jacobi Gauss-Newton preconditioner, alpha 0.5
  Dual(B)                       Jacobi XPBD, mass splitting, update="exact"
  Dual(B, update="incremental") the thesis's fast-projection XPBD update
  Newton(30, tol=1e-8)          reference (the default tol 1e-10 m/s is below the round-off
                                floor of max |M^-1 r| with a 1e-4 kg body, ~1e-9 m/s)
Measured per step: the stretch error of each link |d - L| / L, and StepInfo's residual and
iterations. Unless --quick, the 10^4:1 case is also run at dt = 1/60 s (one step per
frame) as a sensitivity check.

Run from the repository root:
    python -m experiments.fig26_mass_ratio_pendulum [--quick]
(writes docs/experiments/fig26_mass_ratio_pendulum.{json,png}).
"""

from __future__ import annotations

import math
import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "fig26_mass_ratio_pendulum"
G = 9.81
LENGTH, RADIUS = 0.5, 0.01          # m
HEAVY, RATIO = 1.0, 1e4             # kg; the light sphere is HEAVY / RATIO
STIFFNESS = 1e5                     # N/m, both links
ANGLE = 45.0                        # degrees from the vertical
DT, SECONDS = 1.0 / 120.0, 2.0
BUDGETS = (20, 100)
NEWTON = jc.Newton(iterations=30, tol=1e-8)


def solvers(budgets=BUDGETS, incremental=True) -> dict:
    """Named solvers: Newton, then Descent, Dual (and Dual-incremental) at each budget."""
    out = {"newton": NEWTON}
    for b in budgets:
        out[f"descent_{b}"] = jc.Descent(iterations=b)
        out[f"dual_{b}"] = jc.Dual(iterations=b, update="exact")
        if incremental:
            out[f"dual_incr_{b}"] = jc.Dual(iterations=b, update="incremental")
    return out


def chain(solver, masses, stiffnesses, dt, angle=0.0, lengths=(LENGTH, LENGTH)):
    """Two spheres hanging in series from a world anchor at the origin, both links straight
    along `angle` (degrees from the vertical) at the given `lengths`; springs of rest length
    LENGTH. Sphere 0 hangs from the anchor (spring 0), sphere 1 from sphere 0 (spring 1)."""
    a = math.radians(angle)
    d = np.array([math.sin(a), 0.0, -math.cos(a)])
    s = jc.Scene(dt=dt)
    top = s.add_sphere(RADIUS, masses[0], tuple(lengths[0] * d))
    low = s.add_sphere(RADIUS, masses[1], tuple((lengths[0] + lengths[1]) * d))
    s.add_spring(top, -1, stiffness=stiffnesses[0], anchor_b=(0.0, 0.0, 0.0),
                 rest_length=LENGTH)
    s.add_spring(low, top, stiffness=stiffnesses[1], rest_length=LENGTH)
    return s.build(solver=solver)


def _stack(trees):
    return jax.tree.map(lambda *x: jnp.stack(x), *trees)


_ROLLOUTS = {}


def simulate(solver, cases, steps):
    """Roll out every case (kwargs of `chain`) with `solver` in one vmapped, jitted call.

    Returns (link lengths (C, T, 2), residual (C, T), iterations (C, T), result (C, T)).
    """
    models, states = zip(*(chain(solver, **c) for c in cases))

    def one(model, state):
        _, traj, info = jc.rollout(model, state, steps=steps, return_info=True)
        p = traj.pos
        links = jnp.stack([jnp.linalg.norm(p[:, 0], axis=-1),
                           jnp.linalg.norm(p[:, 1] - p[:, 0], axis=-1)], axis=-1)
        return links, info.residual, info.iterations, info.result

    key = (solver, steps)
    if key not in _ROLLOUTS:
        _ROLLOUTS[key] = jc.jit(jax.vmap(one))
    return tuple(np.asarray(x) for x in _ROLLOUTS[key](_stack(models), _stack(states)))


BLOWUP = 1e3  # a stretch error above this (links 1000x their length) counts as a divergence


def summarize(err, residual, iterations, result, dt):
    """Max/final error per link before any divergence (a non-finite step or a blow-up past
    BLOWUP), the time of the divergence, mean residual and iterations."""
    bad = np.nonzero((result == int(jc.Result.NONFINITE)) | ~(err.max(-1) < BLOWUP))[0]
    n = bad[0] if bad.size else len(err)
    ok = err[:n]
    return {"max": ok.max(0).tolist() if n else [math.inf] * 2,
            "final": err[-1].tolist() if not bad.size else [math.inf] * 2,
            "diverged_at_s": float((n + 1) * dt) if bad.size else None,
            "mean_residual": float(np.mean(residual[:n])) if n else math.inf,
            "mean_iterations": float(np.mean(iterations))}


def plot(ax, t, curves, title):
    """Stretch error (max over links, floored at 1e-12) vs time, log scale; 'x' marks a
    divergence."""
    styles = {"newton": ("k", "-"), "descent": ("C0", "-"), "dual": ("C3", "-"),
              "dual_incr": ("C1", "--")}
    for name, err in curves.items():
        kind, _, budget = name.rpartition("_") if name != "newton" else ("newton", "", "")
        color, ls = styles[kind]
        e = np.max(err, axis=-1)
        e = np.where(e < BLOWUP, np.maximum(e, 1e-12), np.nan)
        ax.semilogy(t, e, color=color, ls=ls, lw=0.8 if budget == str(BUDGETS[0]) else 1.8,
                    label=name, zorder=3 if kind == "newton" else 2)
        if np.isnan(e).any():
            i = np.argmax(np.isnan(e))
            ax.semilogy(t[i - 1], e[i - 1], "x", color=color, ms=9, mew=2)
    ax.set(xlabel="time (s)", title=title)


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    budgets = BUDGETS[:1] if args.quick else BUDGETS
    seconds = 0.5 if args.quick else SECONDS
    steps = int(round(seconds / DT))
    light = HEAVY / RATIO
    cases = {"ratio": dict(masses=(light, HEAVY), stiffnesses=(STIFFNESS,) * 2, dt=DT,
                           angle=ANGLE),
             "control": dict(masses=(HEAVY, HEAVY), stiffnesses=(STIFFNESS,) * 2, dt=DT,
                             angle=ANGLE)}
    if not args.quick:  # one step per 60 Hz frame: run 2x the steps, keep the first 2 s
        cases["ratio_dt60"] = {**cases["ratio"], "dt": 2 * DT}
    t0 = time.time()
    runs = {}
    for name, solver in solvers(budgets).items():
        links, res, its, result = simulate(solver, list(cases.values()), steps)
        err = np.abs(links - LENGTH) / LENGTH
        for c, case in enumerate(cases):
            n = steps // 2 if case == "ratio_dt60" else steps
            runs.setdefault(case, {})[name] = (err[c, :n], res[c, :n], its[c, :n],
                                               result[c, :n])
        log(f"{name}: {time.time() - t0:.0f} s")
    summary = {case: {name: summarize(*r, cases[case]["dt"]) for name, r in per.items()}
               for case, per in runs.items()}

    def worst(case, name):  # max over links and time; a divergence counts as infinite
        s = summary[case][name]
        return math.inf if s["diverged_at_s"] else max(s["max"])

    checks = {}
    for b in budgets:
        descent, duals = worst("ratio", f"descent_{b}"), [worst("ratio", f"dual{v}_{b}")
                                                           for v in ("", "_incr")]
        control = max(worst("control", f"{k}_{b}") for k in ("descent", "dual", "dual_incr"))
        checks[b] = {"dual_stretch_large": min(duals) > 0.01,
                     "dual_over_descent_gt_10": min(duals) > 10 * descent,
                     "descent_below_1e-2": descent < 0.01,
                     "control_all_below_1e-3": control < 1e-3}
    agrees = all(all(c.values()) for c in checks.values())
    ref = max(summary["ratio"]["newton"]["max"])
    reason = (f"at {ANGLE:g} deg, dt = 1/120 s: Dual stretches >1% (or diverges) at every "
              f"budget, >10x Descent, whose error stays <1% (Newton's physical stretch "
              f"{ref:.1e}); control 1:1 <1e-3 for all" if agrees else f"checks failed: {checks}")
    diverged = {f"{c}/{n}": s["diverged_at_s"] for c, per in summary.items()
                for n, s in per.items() if s["diverged_at_s"]}
    notes = [
        "The light sphere carries the heavy one: in the dual's Jacobi sweep each iteration "
        "passes the heavy sphere only ~m_light/m_heavy of its support, so it nearly free-falls "
        "and stretches the links.",
        f"Dual update='exact' (library default) then blows up (time in s): {diverged}. The "
        "thesis's incremental update stays finite with the large stretch.",
        "Descent's block-Jacobi Gauss-Newton preconditioner (thesis Eq. 115-116) leaves out the "
        "geometric stiffness T/L of the taut links, which for the light sphere is "
        f"dt^2 2 m_heavy g / (L m_light) = {DT**2 * 2 * HEAVY * G / (LENGTH * light):.0f}x its "
        "mass: the primal is not entirely unaffected. Its error is ~2x the physical stretch at "
        "dt = 1/120 s, with intermittent spikes at dt = 1/60 s (where that ratio is 4x larger).",
        "Newton: the default tol 1e-10 m/s lies below the round-off floor of max |M^-1 r| "
        "(~1e-9 m/s) with a 1e-4 kg body, so tol = 1e-8 is used to report iteration counts."]
    result = {
        "params": {"length_m": LENGTH, "radius_m": RADIUS, "heavy_kg": HEAVY, "ratio": RATIO,
                   "heavy_sphere": "bottom (hanging below the light one)",
                   "stiffness_N_per_m": STIFFNESS, "angle_deg": ANGLE, "dt_s": DT,
                   "seconds": seconds, "budgets": budgets, "newton": repr(NEWTON),
                   "static_stretch_over_L": HEAVY * G / STIFFNESS / LENGTH,
                   "dt2k_over_heavy": DT**2 * STIFFNESS / HEAVY, "quick": args.quick},
        "metric": "stretch error |d - L| / L of [top link, bottom link]: max over time "
                  "(finite part), final; mean StepInfo residual (m/s) and iterations",
        "summary": summary, "checks": checks, "agrees_with_thesis": agrees,
        "reason": reason, "notes": notes, "runtime_s": round(time.time() - t0, 1)}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [c for c in ("ratio", "control", "ratio_dt60") if c in runs]
    titles = {"ratio": f"(a) 1:{RATIO:.0e} light top / heavy bottom, dt = 1/120 s",
              "control": "(b) control 1:1, dt = 1/120 s",
              "ratio_dt60": f"(c) 1:{RATIO:.0e}, dt = 1/60 s (sensitivity)"}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), sharey=True)
    for ax, case in zip(np.atleast_1d(axes), panels):
        dt = cases[case]["dt"]
        curves = {name: r[0] for name, r in runs[case].items()}
        plot(ax, dt * np.arange(1, len(next(iter(curves.values()))) + 1), curves, titles[case])
    np.atleast_1d(axes)[0].set_ylabel("link stretch error |d - L| / L (max of 2 links)")
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="lower right")
    finish_figure(fig, np.atleast_1d(axes), "Fig. 26 reproduction: double pendulum, mass ratio "
                  "1e4 (x: solve diverged)")
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
