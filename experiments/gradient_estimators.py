"""Issue 66: gradients that optimize where exact ones stall, on ADD E11 (a convex body thrown
to a target pose via the floor and a wall; `experiments/add_e11_mesh_throw.py` has the task
and its exact-gradient L-BFGS against CMA-ES).

Methods, each from the same starts (seed 0: E11's start; seed k: that start plus N(0, 0.2²)
on every velocity, drawn with seed k), each with the same budget of simulations:

- `lbfgs`: L-BFGS on exact implicit gradients (`jc.optim.lbfgs`).
- `lbfgs_restarts`: `lbfgs` until it stalls (the loss has not halved in `--patience`
  iterations); each next run starts from the best point so far plus N(0, `--sigma`²) on
  every velocity (a gradient method with perturbed restarts, the simplest way out of a
  basin where it stalls).
- `lbfgs_smoothed`: L-BFGS on backward-smoothed gradients: each step simulated exactly,
  differentiated as the step with a smooth normal law reaching out `--width` m
  (`jc.Implicit(smoothing=jc.Contact(normal="smooth", smooth_width=width, ...))`); its
  line search sees the exact loss.
- `smoothed_then_exact`: half the budget as `lbfgs_smoothed`, the rest as `lbfgs` from
  where it stopped (smoothing to leave a basin where exact gradients stall, exact gradients
  to converge).
- `alpha`, `zeroth`: Adam (`--lr`) on randomized-smoothing estimates (`jc.optim.Estimator`,
  σ = `--sigma` on every velocity, N = `--samples` simulations an estimate; α-order with
  inverse-variance weights, or with `--tolerance`, Suh et al.'s γ = that multiple of ‖ĝ₀‖
  at the start).
- `cmaes`: CMA-ES (σ₀ = 0.5, Hansen's population), E11's baseline.
- `cmaes_then_lbfgs`: two thirds of the budget as `cmaes`, the rest as `lbfgs` from its
  best point (CMA-ES chooses the basin, exact gradients converge in it).

Each run records its best Φ/Φ₀ against simulations spent; the figure shows the median and
range over seeds, the JSON every run.

Run from the repository root:
    python -m experiments.gradient_estimators [--seeds 5] [--budget 300] [--quick]
"""

from __future__ import annotations

import dataclasses
import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
from experiments._common import use_compile_cache  # noqa: E402

use_compile_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments import add_e11_mesh_throw as e11  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402
from jaxcontact.math import quat_rotate  # noqa: E402

NAME = "gradient_estimators"
METHODS = ("lbfgs", "lbfgs_restarts", "lbfgs_smoothed", "smoothed_then_exact", "alpha",
           "zeroth", "cmaes", "cmaes_then_lbfgs")


def task(smoothing=None):
    """(loss, target) of E11: Φ(x) = Σ_v |x_v(T) - x*_v|² over the hull's vertices, x the
    initial (v, ω); with `smoothing`, the backward pass's contact laws."""
    model, state = e11.build()
    if smoothing is not None:
        model = model.replace(solver=jc.Newton(iterations=30,
                                               adjoint=jc.Implicit(smoothing=smoothing)))
    local = model.mesh.vertices[0, :model.mesh.count[0]]

    def vertices(x):
        s = state.replace(vel=x[None, :3], ang_vel=x[None, 3:])
        final, _ = jc.rollout(model, s, steps=e11.STEPS)
        return final.pos[0] + jax.vmap(lambda v: quat_rotate(final.quat[0], v))(local)

    target = jc.jit(vertices)(jnp.asarray(e11.REFERENCE))

    def loss(x):
        return jnp.sum((vertices(x) - target) ** 2)

    return loss


def starts(seeds):
    rng = [np.random.default_rng(k) for k in range(seeds)]
    return [np.asarray(e11.START) + (0.0 if k == 0 else 0.2 * r.standard_normal(6))
            for k, r in enumerate(rng)]


def best_so_far(history, simulations):
    """(simulations, best Φ) pairs from a run's per-iteration history spread evenly over its
    simulations (L-BFGS's trials are not recorded one by one)."""
    best = np.minimum.accumulate(np.asarray(history, float))
    return np.linspace(1, simulations, len(best)), best


def run(method, loss, x0, budget, args, seed, exact=None):
    x0 = jnp.asarray(x0)
    phases = {"cmaes_then_lbfgs": ("cmaes", loss, 2 * budget // 3),
              "smoothed_then_exact": ("lbfgs_smoothed", exact, budget // 2)}
    if method in phases:
        name, second_loss, share = phases[method]
        first = run(name, loss, x0, share, args, seed)
        second = run("lbfgs", second_loss, first.x, max(budget - first.simulations, 1),
                     args, seed)
        # one history in units of the start's loss (the second run starts at the first's
        # best point)
        return dataclasses.replace(
            second, history=first.history + second.history[1:],
            simulations=first.simulations + second.simulations,
            status=f"{name}: {first.status}; then lbfgs: {second.status}")
    if method == "lbfgs_restarts":
        rng = np.random.default_rng(1000 + seed)
        history, spent, best, best_x, x, runs = [], 0, np.inf, x0, x0, 0
        while spent < budget:
            out = jc.optim.lbfgs(loss, x, max_iterations=budget, rtol=e11.RTOL,
                                 max_simulations=budget - spent, patience=args.patience)
            spent += out.simulations
            runs += 1
            history += out.history if not history else [min(best, h) for h in out.history]
            if out.value < best:
                best, best_x = out.value, out.x
            if out.converged:
                break
            x = jnp.asarray(best_x) + args.sigma * rng.standard_normal(6)
        first = history[0]
        return jc.optim.OptimResult(
            x=best_x, value=best, grad_norm=float("nan"), iterations=len(history),
            simulations=spent, converged=best <= e11.RTOL * first, history=history,
            status=f"{runs} runs of L-BFGS, best {best:.3g} ({best / first:.3g} of the initial)")
    if method.startswith("lbfgs"):
        out = jc.optim.lbfgs(loss, x0, max_iterations=budget, rtol=e11.RTOL,
                             max_simulations=budget)
    elif method == "cmaes":
        out = jc.optim.cmaes(loss, x0, e11.SIGMA0, max_simulations=budget, rtol=e11.RTOL,
                             seed=seed)
    else:
        tolerance = None
        if method == "alpha" and args.tolerance is not None:
            probe = jc.optim.Estimator("zeroth", sigma=args.sigma, samples=args.samples)
            _, g0, _ = jax.jit(lambda x, k: probe(loss, x, k))(x0, jax.random.PRNGKey(seed))
            tolerance = args.tolerance * float(jnp.linalg.norm(g0))
        est = jc.optim.Estimator(method, sigma=args.sigma, samples=args.samples,
                                 tolerance=tolerance)
        out = jc.optim.descend(loss, x0, est, optax.adam(args.lr), max_simulations=budget,
                               rtol=e11.RTOL, seed=seed)
    return out


def figure(runs, budget, seeds):
    """Left: each method's median best-so-far Φ/Φ₀ against simulations; right: every start's
    final Φ/Φ₀ per method (ADD's L-BFGS result and CMA-ES's median marked)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    grid = np.arange(1, budget + 1)
    for i, (method, rs) in enumerate(runs.items()):
        curves = []
        for r in rs:
            sims, best = best_so_far(r["history"], r["simulations"])
            curves.append(np.interp(grid, sims, best, right=best[-1]))
        a.semilogy(grid, np.median(np.asarray(curves), axis=0), color=f"C{i}", label=method)
        finals = [r["ratio"] for r in rs]
        b.semilogy(np.full(len(finals), i) + np.linspace(-0.2, 0.2, len(finals)), finals, "o",
                   color=f"C{i}", ms=5)
    a.plot([319], [4e-4], "k*", ms=10, label="ADD L-BFGS (deformable bunny)")
    a.set(xlabel="simulations", ylabel=f"best Φ / Φ₀, median of {seeds} starts")
    b.axhline(np.median([r["ratio"] for r in runs["cmaes"]]) if "cmaes" in runs else np.nan,
              color="k", lw=1, ls="--", label="CMA-ES median")
    b.axhline(4e-4, color="k", lw=1, ls=":", label="ADD's 4e-4")
    b.set_xticks(range(len(runs)), list(runs), rotation=30, ha="right", fontsize=8)
    b.set(ylabel=f"Φ / Φ₀ after {budget} simulations, each start")
    finish_figure(fig, (a, b), f"ADD E11: {seeds} starts, exact vs smoothed vs stochastic "
                  "gradients vs CMA-ES", legend=7)
    fig.tight_layout()
    return fig


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=300,
                   help="simulations per run (ADD's L-BFGS took 319)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--width", type=float, default=0.05,
                   help="reach of the backward pass's smooth normal law, m")
    p.add_argument("--sigma", type=float, default=0.2, help="σ of the estimators, m/s, rad/s")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--tolerance", type=float, default=None,
                   help="α-order's γ as a multiple of ‖ĝ₀‖ at the start (default: none, "
                        "inverse-variance weights only: with 8 samples in 6 dimensions ĝ₀'s "
                        "confidence half-width exceeds γ = 0.5 ‖ĝ₀‖ and α is 0 throughout)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--patience", type=int, default=10,
                   help="lbfgs_restarts: iterations in which the loss must halve")
    args = p.parse_args()
    if args.quick:
        args.seeds, args.budget = 2, 40
    smoothing = jc.Contact(normal="smooth", smooth_width=args.width, friction="linear")
    losses = {"exact": task(), "smoothed": task(smoothing)}
    runs = {m: [] for m in args.methods}
    for seed, x0 in enumerate(starts(args.seeds)):
        for method in args.methods:
            smoothed = method in ("lbfgs_smoothed", "smoothed_then_exact")
            loss = losses["smoothed" if smoothed else "exact"]
            t = time.perf_counter()
            out = run(method, loss, x0, args.budget, args, seed, exact=losses["exact"])
            first = out.history[0]
            runs[method].append({
                "seed": seed, "start": np.asarray(x0).tolist(), "ratio": out.value / first,
                "simulations": out.simulations, "status": out.status,
                "seconds": time.perf_counter() - t, "initial": first,
                "history": [h / first for h in out.history],
                "x": np.asarray(out.x).tolist(),
                **({"alpha": out.alpha} if out.alpha is not None else {})})
            log(f"seed {seed} {method}: Φ/Φ₀ {out.value / first:.3g} after "
                f"{out.simulations} simulations ({time.perf_counter() - t:.0f} s)")
    summary = {m: {"median_ratio": float(np.median([r["ratio"] for r in rs])),
                   "best_ratio": float(np.min([r["ratio"] for r in rs])),
                   "worst_ratio": float(np.max([r["ratio"] for r in rs]))}
               for m, rs in runs.items()}
    result = {"setup": {**{k: v for k, v in vars(args).items() if k != "out_dir"},
                        "task": "ADD E11 (experiments/add_e11_mesh_throw.py)",
                        "smoothing": repr(smoothing)},
              "paper": {"add_lbfgs_simulations": 319, "add_lbfgs_ratio": 4e-4},
              "summary": summary, "runs": runs}

    save(NAME, result, figure(runs, args.budget, args.seeds), args.out_dir)


if __name__ == "__main__":
    main()
