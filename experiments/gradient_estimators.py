"""Issue 66: gradients that optimize where exact ones stall. `--task` picks the problem
(`experiments/_estimator_tasks.py`): ADD E11 (default; a convex body thrown to a target pose
via the floor and a wall), ADD E3 (a rock to a target pose without continuation), Zhong et
al.'s "hit" (a ball to a target after one bounce), and two built after Suh et al. (ICML
2022): a rolling ball pushing a box (`push`) and a ball thrown over a wall (`wall`).

Methods, each from the same starts (the task's: for E11 seed 0 is E11's start and seed k
that start plus N(0, 0.2²) on every velocity), each with the same budget of simulations:

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
- `cmaes_then_lbfgs`: `jc.optim.cmaes_then_lbfgs`, two thirds of the budget as `cmaes`,
  the rest as `lbfgs` from its best point (CMA-ES chooses the basin, exact gradients
  converge in it).

Each run records its best Φ/Φ₀ against simulations spent; the figure shows the median and
range over seeds, the JSON every run.

Run from the repository root:
    python -m experiments.gradient_estimators [--task e11] [--seeds 5] [--budget 300] [--quick]
(results: gradient_estimators.json for E11, gradient_estimators_<task>.json otherwise)
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
from experiments import _estimator_tasks as estimator_tasks  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "gradient_estimators"
METHODS = ("lbfgs", "lbfgs_restarts", "lbfgs_smoothed", "smoothed_then_exact", "alpha",
           "zeroth", "cmaes", "cmaes_then_lbfgs")


def best_so_far(history, simulations):
    """(simulations, best Φ) pairs from a run's per-iteration history spread evenly over its
    simulations (L-BFGS's trials are not recorded one by one)."""
    best = np.minimum.accumulate(np.asarray(history, float))
    return np.linspace(1, simulations, len(best)), best


def run(method, task, loss, x0, budget, args, seed):
    x0 = jnp.asarray(x0)
    sigma = task.sigma if args.sigma is None else args.sigma
    if method == "cmaes_then_lbfgs":
        return jc.optim.cmaes_then_lbfgs(loss, x0, task.cmaes_sigma, max_simulations=budget,
                                         rtol=task.rtol, seed=seed)
    if method == "smoothed_then_exact":
        first = run("lbfgs_smoothed", task, loss, x0, budget // 2, args, seed)
        second = run("lbfgs", task, task.loss, first.x,
                     max(budget - first.simulations, 1), args, seed)
        # one history in units of the start's loss (the second run starts at the first's
        # best point)
        return dataclasses.replace(
            second, history=first.history + second.history[1:],
            simulations=first.simulations + second.simulations,
            status=f"lbfgs_smoothed: {first.status}; then lbfgs: {second.status}")
    if method == "lbfgs_restarts":
        rng = np.random.default_rng(1000 + seed)
        history, spent, best, best_x, x, runs = [], 0, np.inf, x0, x0, 0
        while spent < budget:
            out = jc.optim.lbfgs(loss, x, max_iterations=budget, rtol=task.rtol,
                                 max_simulations=budget - spent, patience=args.patience)
            spent += out.simulations
            runs += 1
            history += out.history if not history else [min(best, h) for h in out.history]
            if out.value < best:
                best, best_x = out.value, out.x
            if best <= task.rtol * history[0]:     # solved (a zero gradient is a stall)
                break
            x = jnp.asarray(best_x) + sigma * rng.standard_normal(x0.shape)
        first = history[0]
        return jc.optim.OptimResult(
            x=best_x, value=best, grad_norm=float("nan"), iterations=len(history),
            simulations=spent, converged=best <= task.rtol * first, history=history,
            status=f"{runs} runs of L-BFGS, best {best:.3g} ({best / first:.3g} of the initial)")
    if method.startswith("lbfgs"):
        out = jc.optim.lbfgs(loss, x0, max_iterations=budget, rtol=task.rtol,
                             max_simulations=budget)
    elif method == "cmaes":
        out = jc.optim.cmaes(loss, x0, task.cmaes_sigma, max_simulations=budget,
                             rtol=task.rtol, seed=seed)
    else:
        tolerance = None
        if method == "alpha" and args.tolerance is not None:
            probe = jc.optim.Estimator("zeroth", sigma=sigma, samples=args.samples)
            _, g0, _ = jax.jit(lambda x, k: probe(loss, x, k))(x0, jax.random.PRNGKey(seed))
            tolerance = args.tolerance * float(jnp.linalg.norm(g0))
        est = jc.optim.Estimator(method, sigma=sigma, samples=args.samples,
                                 tolerance=tolerance)
        out = jc.optim.descend(loss, x0, est, optax.adam(args.lr), max_simulations=budget,
                               rtol=task.rtol, seed=seed)
    return out


SOLVED = 1e-4        # a run "solves" its start when its best Φ/Φ₀ reaches this (ADD's E11: 4e-4)


def reached(history, simulations, level=SOLVED):
    """Simulations spent when the best Φ/Φ₀ first reached `level` (None if never)."""
    sims, best = best_so_far(history, simulations)
    hit = np.flatnonzero(best <= level)
    return int(sims[hit[0]]) if hit.size else None


def summarize(runs):
    out = {}
    for m, rs in runs.items():
        ratios = [r["ratio"] for r in rs]
        spent = [r["reached"] for r in rs if r["reached"] is not None]
        out[m] = {"median_ratio": float(np.median(ratios)), "best_ratio": float(np.min(ratios)),
                  "worst_ratio": float(np.max(ratios)), "solved": len(spent),
                  "median_simulations_to_solve": float(np.median(spent)) if spent else None}
    return out


def figure(runs, budget, seeds, task):
    """Left: each method's median best-so-far Φ/Φ₀ against simulations; right: every start's
    final Φ/Φ₀ per method (CMA-ES's median marked; on E11 also ADD's L-BFGS result)."""
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
    if task.name == "e11":
        a.plot([319], [4e-4], "k*", ms=10, label="ADD L-BFGS (deformable bunny)")
        b.axhline(4e-4, color="k", lw=1, ls=":", label="ADD's 4e-4")
    a.set(xlabel="simulations", ylabel=f"best Φ / Φ₀, median of {seeds} starts")
    b.axhline(np.median([r["ratio"] for r in runs["cmaes"]]) if "cmaes" in runs else np.nan,
              color="k", lw=1, ls="--", label="CMA-ES median")
    b.set_xticks(range(len(runs)), list(runs), rotation=30, ha="right", fontsize=8)
    b.set(ylabel=f"Φ / Φ₀ after {budget} simulations, each start")
    finish_figure(fig, (a, b), f"{task.title}: {seeds} starts, exact vs smoothed vs "
                  "stochastic gradients vs CMA-ES", legend=7)
    fig.tight_layout()
    return fig


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--task", default="e11", choices=list(estimator_tasks.TASKS))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=300,
                   help="simulations per run (ADD's L-BFGS took 319)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--width", type=float, default=0.05,
                   help="reach of the backward pass's smooth normal law, m")
    p.add_argument("--sigma", type=float, default=None,
                   help="σ of the estimators in the parameters' units (default: the task's)")
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
    task = estimator_tasks.TASKS[args.task](args.width)
    runs = {m: [] for m in args.methods}
    for seed, x0 in enumerate(task.starts(args.seeds)):
        for method in args.methods:
            smoothed = method in ("lbfgs_smoothed", "smoothed_then_exact")
            t = time.perf_counter()
            out = run(method, task, task.smoothed if smoothed else task.loss, x0, args.budget,
                      args, seed)
            first = out.history[0]
            runs[method].append({
                "seed": seed, "start": np.asarray(x0).tolist(), "ratio": out.value / first,
                "simulations": out.simulations, "status": out.status,
                "seconds": time.perf_counter() - t, "initial": first,
                "history": [h / first for h in out.history],
                "reached": reached([h / first for h in out.history], out.simulations),
                "x": np.asarray(out.x).tolist(),
                **({"alpha": out.alpha} if out.alpha is not None else {})})
            log(f"seed {seed} {method}: Φ/Φ₀ {out.value / first:.3g} after "
                f"{out.simulations} simulations ({time.perf_counter() - t:.0f} s)")
    result = {"setup": {**{k: v for k, v in vars(args).items() if k != "out_dir"},
                        "task": task.title, "hard": task.hard, "rtol": task.rtol,
                        "cmaes_sigma": task.cmaes_sigma,
                        "sigma": task.sigma if args.sigma is None else args.sigma,
                        "smoothing": repr(estimator_tasks.smoothing(args.width)),
                        "solved_below": SOLVED},
              "summary": summarize(runs), "runs": runs}
    if task.name == "e11":
        result["paper"] = {"add_lbfgs_simulations": 319, "add_lbfgs_ratio": 4e-4}
    name = NAME if task.name == "e11" else f"{NAME}_{task.name}"
    save(name, result, figure(runs, args.budget, args.seeds, task), args.out_dir)


if __name__ == "__main__":
    main()
