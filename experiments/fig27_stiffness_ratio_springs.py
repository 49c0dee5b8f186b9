"""Thesis Fig. 27 (Macklin 2020, §5.6 "Stiffness Ratio Tests"): two point masses hanging in
series by springs whose stiffnesses differ by 10^4:1, the LOWER spring the stiffer. Primal
descent converges slowly for the top spring ("significant stretching"); the dual is correct.

Setup: two spheres of 1 kg (radius 1 cm, no ground) hang vertically from a world anchor at
the origin: the top spring (anchor - sphere 0, k_top = 1e4 N/m) and the lower spring
(sphere 0 - sphere 1, k_low = 1e4 k_top = 1e8 N/m), both of rest length L = 0.5 m. Both are
stiff enough to easily support the masses: the top spring carries both weights with a static
stretch 2 m g / k_top = 0.4% of L, the lower one m g / k_low. The chain starts at rest at this
static equilibrium, which implicit Euler keeps exactly, so any change of a spring's length is
solver error. dt = 1/120 s (two substeps at 60 Hz), 2 s. Control: k_low = k_top (1:1).
Solvers: Newton (reference), Descent and Dual (update="exact") at budgets of 20 and 100
iterations per step (built by fig26's `solvers`).
Measured per step: the error of each spring's length vs its exact static length, relative to
L, and StepInfo's residual and iterations.

Run from the repository root:
    python -m experiments.fig27_stiffness_ratio_springs [--quick]
(writes docs/experiments/fig27_stiffness_ratio_springs.{json,png}).
"""

from __future__ import annotations

import math
import time

import numpy as np  # noqa: E402  (fig26 enables float64 before anything touches JAX)

from experiments._common import log, parser, save  # noqa: E402
from experiments.fig26_mass_ratio_pendulum import (  # noqa: E402
    BUDGETS, DT, G, LENGTH, SECONDS, plot, simulate, solvers, summarize)

NAME = "fig27_stiffness_ratio_springs"
MASS = 1.0                 # kg, each sphere
K_TOP, RATIO = 1e4, 1e4    # N/m; the lower spring is RATIO times stiffer


def static_lengths(k_top, k_low, mass=MASS):
    """Exact static lengths of the series chain: the top spring carries both weights."""
    return LENGTH + 2 * mass * G / k_top, LENGTH + mass * G / k_low


def case(k_low, dt=DT):
    """`chain` kwargs for the chain hanging at rest at its static equilibrium."""
    return dict(masses=(MASS, MASS), stiffnesses=(K_TOP, k_low), dt=dt,
                lengths=static_lengths(K_TOP, k_low))


def run(names, cases, steps):
    """Per case and solver: (error vs static length / L (T, 2), residual, iterations, result)."""
    out = {}
    for name, solver in names.items():
        links, res, its, result = simulate(solver, list(cases.values()), steps)
        for c, (label, kw) in enumerate(cases.items()):
            err = np.abs(links[c] - np.asarray(kw["lengths"])) / LENGTH
            out.setdefault(label, {})[name] = (err, res[c], its[c], result[c])
    return out


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    budgets = BUDGETS[:1] if args.quick else BUDGETS
    seconds = 0.5 if args.quick else SECONDS
    steps = int(round(seconds / DT))
    cases = {"ratio": case(RATIO * K_TOP), "control": case(K_TOP)}
    t0 = time.time()
    runs = run(solvers(budgets, incremental=False), cases, steps)
    log(f"simulated in {time.time() - t0:.0f} s")
    summary = {c: {name: summarize(*r, DT) for name, r in per.items()}
               for c, per in runs.items()}
    static_top = 2 * MASS * G / K_TOP / LENGTH  # top spring's static stretch / L

    def top(c, name):  # worst top-spring error; a divergence counts as infinite
        s = summary[c][name]
        return math.inf if s["diverged_at_s"] else s["max"][0]

    checks = {}
    for b in budgets:
        descent, dual = top("ratio", f"descent_{b}"), top("ratio", f"dual_{b}")
        control = max(max(summary["control"][f"{k}_{b}"]["max"]) for k in ("descent", "dual"))
        checks[b] = {"descent_top_error_gt_10pct_of_static_stretch": descent > 0.1 * static_top,
                     "descent_over_dual_gt_10": descent > 10 * dual,
                     "dual_top_error_lt_1pct_of_static_stretch": dual < 0.01 * static_top,
                     "control_all_lt_1pct_of_static_stretch": control < 0.01 * static_top}
    agrees = all(all(c.values()) for c in checks.values())
    reason = ("Descent's top-spring length error is >10% of its static stretch and >10x the "
              "Dual's at every budget; Dual <1% of it; 1:1 control <1% for all" if agrees
              else f"checks failed: {checks}")
    result = {
        "params": {"mass_kg": MASS, "length_m": LENGTH, "k_top_N_per_m": K_TOP,
                   "k_low_N_per_m": RATIO * K_TOP, "ratio": RATIO, "stiffer": "lower spring",
                   "start": "at rest at the exact static equilibrium, hanging vertically",
                   "static_lengths_m": static_lengths(K_TOP, RATIO * K_TOP),
                   "static_stretch_over_L": [static_top, MASS * G / (RATIO * K_TOP) / LENGTH],
                   "dt_s": DT, "seconds": seconds, "budgets": budgets, "quick": args.quick},
        "metric": "|d - d_static| / L of [top spring, lower spring]: max over time, final; "
                  "mean StepInfo residual (m/s) and iterations",
        "summary": summary, "checks": checks, "agrees_with_thesis": agrees, "reason": reason,
        "runtime_s": round(time.time() - t0, 1)}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2), sharey=True)
    t = DT * np.arange(1, steps + 1)
    titles = {"ratio": f"(a) k_low / k_top = {RATIO:.0e}", "control": "(b) control 1:1"}
    for ax, c in zip(axes, ("ratio", "control")):
        plot(ax, t, {name: r[0] for name, r in runs[c].items()}, titles[c])
        ax.axhline(static_top, color="gray", lw=0.8, ls=":")
    axes[0].set_ylabel("|d - d_static| / L (max of 2 springs, floor 1e-12)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Fig. 27 reproduction: series springs, lower 1e4x stiffer "
                 "(dotted: top spring's static stretch / L)", fontsize=10)
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
