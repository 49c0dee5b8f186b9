"""Issue 66 on Qiao et al.'s pusher: policy learning through the simulator (APG) with exact
gradients against backward-smoothed ones and randomized-smoothing estimates, the same seeds.

The task, network, batch, optimizer and held-out evaluation are those of
`experiments/qiao_learning_control.py` (a ball driven by a horizontal force pushes a box to a
random target in 1 s; 100 held-out targets; the box's distance to the target at t = 1 s).
There, one APG seed of five stayed at the start distance: its first pushes stay below the
box's static friction, so the box does not move and the exact gradient of the distance
through a stuck box is nearly zero.

Here each seed trains twice from the same initial network: with exact implicit gradients,
and with the backward pass smoothed (`jc.Implicit(smoothing=jc.Contact(...))`: friction
regularized `--regularization` times the velocity change a load gives per step instead of
1e-3, so a stuck box creeps in the linearization and its gradient reaches the policy, and a
smooth normal law reaching out `--width` m). The forward simulation, and so every reported
distance, is the exact one in both. Two more runs per seed estimate each update's gradient
(`train(estimator=...)`) over the network's 11k parameters from `--samples` perturbed
copies of the window (σ = `--sigma`, not tuned): Suh et al.'s α-order mix and the
zeroth-order estimate (evolution strategies). CMA-ES is not run: its covariance over 11k
parameters is 120M numbers.

Run from the repository root:
    python -m experiments.qiao_pusher_smoothing [--seeds 5] [--kinds ...] [--quick]
"""

from __future__ import annotations

import time

import flax.linen as nn
import jax
import numpy as np

import jaxcontact as jc
from experiments import qiao_learning_control as qiao
from experiments._common import finish_figure, log, parser, save
from jaxcontact import control

NAME = "qiao_pusher_smoothing"
KINDS = ("exact", "smoothed", "alpha", "zeroth")


def make_push(smoothing):
    adjoint = "auto" if smoothing is None else jc.Implicit(smoothing=smoothing)
    return control.pusher_task(solver=jc.Newton(iterations=30, adjoint=adjoint),
                               dtype=qiao.DTYPE)


def figure(runs, start_distance):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (kind, rs) in enumerate(runs.items()):
        for k, r in enumerate(rs):
            steps = [c["steps"] for c in r["curve"]]
            a.plot(steps, [c["distance"] for c in r["curve"]], color=f"C{i}", alpha=0.7,
                   label=kind if k == 0 else None)
        finals = [r["curve"][-1]["distance"] for r in rs]
        b.plot(np.arange(len(finals)), finals, "o", color=f"C{i}", label=kind)
    for ax in (a, b):
        ax.axhline(start_distance, color="k", lw=1, ls=":", label="start distance")
    b.set_xticks(range(len(next(iter(runs.values())))))
    a.set(xlabel="simulator steps", ylabel="held-out distance to target, m")
    b.set(xlabel="seed", ylabel="final held-out distance, m")
    a.set_xscale("symlog", linthresh=1e4)
    a.set_xlim(left=0)
    finish_figure(fig, (a, b), "Qiao pusher: APG with exact, backward-smoothed and estimated "
                  "gradients", legend=8)
    fig.tight_layout()
    return fig


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--updates", type=int, default=None)
    p.add_argument("--regularization", type=float, default=0.3,
                   help="the backward pass's friction regularization σ (the model's: 1e-3)")
    p.add_argument("--width", type=float, default=0.02,
                   help="the backward pass's smooth normal law's reach, m")
    p.add_argument("--sigma", type=float, default=0.02,
                   help="the estimators' σ on every network parameter")
    p.add_argument("--samples", type=int, default=8, help="the estimators' N")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    args = p.parse_args()
    seeds = 1 if args.quick else args.seeds
    updates = args.updates or (20 if args.quick else 150)
    smoothing = jc.Contact(normal="smooth", smooth_width=args.width,
                           friction_regularization=args.regularization)
    estimate = {order: jc.optim.Estimator(order, sigma=args.sigma, samples=args.samples)
                for order in ("alpha", "zeroth")}
    kinds = {"exact": (None, None), "smoothed": (smoothing, None),
             "alpha": (None, estimate["alpha"]), "zeroth": (None, estimate["zeroth"])}
    kinds = {k: kinds[k] for k in args.kinds}
    runs, seconds = {k: [] for k in kinds}, {}
    for kind, (smooth, estimator) in kinds.items():
        push = make_push(smooth)
        policy = push.mlp_policy(hidden=qiao.HIDDEN, activation=nn.relu,
                                 output_scale=qiao.OUTPUT_SCALE)
        optimizer = qiao._apg_optimizer(qiao.APG_LR)
        t = time.perf_counter()
        for seed in range(seeds):
            runs[kind].append(qiao.run_apg(push, policy, seed, updates, optimizer,
                                           estimator=estimator))
            log(f"{kind} seed {seed}: held-out distance "
                f"{runs[kind][-1]['curve'][-1]['distance']:.3f} m")
        seconds[kind] = time.perf_counter() - t
    push = make_push(None)
    start_distance = float(np.mean(np.linalg.norm(np.asarray(jax.vmap(
        lambda k: push.task.initial(k)[1].pos[0, :2])(
            jax.random.split(jax.random.key(qiao.EVAL_KEY), qiao.EVAL_TARGETS))), axis=1)))
    finals = {k: [r["curve"][-1]["distance"] for r in rs] for k, rs in runs.items()}
    # a seed "learns" when it brings the held-out distance below 80 % of the start's
    learned = {k: int(np.sum(np.asarray(v) < 0.8 * start_distance)) for k, v in finals.items()}
    result = {
        "task": "jaxcontact.control.pusher_task, as experiments/qiao_learning_control.py",
        "apg": {"updates": updates, "batch": qiao.APG_BATCH,
                "optimizer": f"adam({qiao.APG_LR}, b1=0.95)", "hidden": qiao.HIDDEN},
        "smoothing": repr(smoothing), "estimators": {k: repr(v) for k, v in estimate.items()},
        "seeds": seeds, "start_distance_m": start_distance,
        "summary": {"final_distance_per_seed": finals,
                    "final_distance_mean": {k: float(np.mean(v)) for k, v in finals.items()},
                    "seeds_learned": learned, "wall_seconds": seconds},
        "runs": runs,
    }
    log(f"final distances: {finals}; learned (< 80 % of {start_distance:.3f} m): {learned}")
    save(NAME, result, figure(runs, start_distance), args.out_dir)


if __name__ == "__main__":
    main()
