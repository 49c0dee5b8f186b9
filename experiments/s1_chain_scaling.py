"""ADD supplement S1 (Fig. 3): computation time against the number of rigid bodies in a chain.

ADD: a chain of N rigid bodies, the first hung from two world springs, each next one from
the previous by two springs; ground contact k_n = 1e3, k_d = 1e-3, μ = 0.5; t = 2 s at
Δt = 1/500 s. Their Fig. 3 plots computation time against N (values not given in the text;
the claim read from it is that the time grows about linearly in N).

Setup here: `jaxcontact.scenes.spring_chain(N)` (0.1 kg links of 10 x 4 x 4 cm, springs
1e4 N/m, released horizontally at 0.6 of the chain length so that the chain swings down
and lies partly on the ground; no link-link collision, as in the paper). Per N: the
forward rollout of T steps, and the forward rollout plus the reverse-mode gradient of the
final mean link height with respect to all spring stiffnesses (implicit gradients, the
default `ad="vjp"`), each one `jax.jit` program, timed with `time.perf_counter` around
`jax.block_until_ready` after a separate compile (`lower().compile()`). float64, CPU,
solver `jc.Newton(early_exit=True)` (dense; stops at tol 1e-10 instead of running all 12
iterations). We fit time per step = a + b N and report R².

Run:  python -m experiments.s1_chain_scaling [--quick]
      (writes docs/experiments/s1_chain_scaling.{json,png})
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxcontact as jc  # noqa: E402
from jaxcontact import scenes  # noqa: E402
from jaxcontact.compiling import best_time  # noqa: E402

from experiments._common import finish_figure, log, parser, save  # noqa: E402

NS = (1, 2, 5, 10, 20, 30, 40)
QUICK_NS = (1, 4, 8)
STEPS = 1000          # 2 s at 1/500 s
QUICK_STEPS = 100
SOLVERS = {"dense": jc.Newton(early_exit=True),
           # matrix-free: conjugate gradients with the block preconditioner, O(N) per iteration
           "cg": jc.Newton(linear="cg", early_exit=True)}
SOLVER = SOLVERS["dense"]


def programs(model, state, steps):
    """Compiled forward and forward+gradient programs, and their compile times."""

    def forward(model, state):
        final, _, info = jc.rollout(model, state, steps=steps, return_info=True)
        return final, info

    def loss(stiffness, model, state):
        m = model.replace(spring=model.spring.replace(stiffness=stiffness))
        final, _ = jc.rollout(m, state, steps=steps)
        return jnp.mean(final.pos[:, 2])

    grad = jax.value_and_grad(loss)
    out = {}
    for name, fn, args in (("forward", forward, (model, state)),
                           ("gradient", grad, (model.spring.stiffness, model, state))):
        start = time.perf_counter()
        compiled = jc.jit(fn).lower(*args).compile()
        out[name] = (compiled, args, time.perf_counter() - start)
    return out


def fit(ns, y):
    slope, intercept = np.polyfit(ns, y, 1)
    pred = slope * np.asarray(ns) + intercept
    ss_res = float(np.sum((np.asarray(y) - pred) ** 2))
    ss_tot = float(np.sum((np.asarray(y) - np.mean(y)) ** 2))
    return {"slope_ms_per_body": slope * 1e3, "intercept_ms": intercept * 1e3,
            "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0}


def run(n, steps):
    model, state = scenes.spring_chain(n).build(solver=SOLVER)  # SOLVER: set by main()
    progs = programs(model, state, steps)
    repeats = 2 if n <= 10 else 1
    compiled, args = progs["forward"][:2]
    t_fwd, (final, info) = best_time(compiled, *args, repeats=repeats)
    compiled, args = progs["gradient"][:2]
    t_grad, (value, grad) = best_time(compiled, *args, repeats=repeats)
    info = jax.tree.map(np.asarray, info)
    row = {
        "n": n, "steps": steps,
        "forward_s": t_fwd, "gradient_s": t_grad,
        "forward_ms_per_step": 1e3 * t_fwd / steps,
        "gradient_ms_per_step": 1e3 * t_grad / steps,
        "compile_forward_s": progs["forward"][2], "compile_gradient_s": progs["gradient"][2],
        "converged_fraction": float(info.converged.mean()),
        "mean_iterations": float(info.iterations.mean()),
        "max_residual": float(info.residual.max()),
        "max_penetration_m": float(info.max_penetration.max()),
        "steps_with_contact": int((info.active_contacts > 0).sum()),
        "first_contact_s": (float(np.argmax(info.active_contacts > 0) + 1) * float(model.dt)
                            if (info.active_contacts > 0).any() else None),
        "loss_mean_final_height_m": float(value),
        "grad_norm": float(jnp.linalg.norm(grad)),
        "grad_finite": bool(jnp.all(jnp.isfinite(grad))),
    }
    log(f"N={n:3d}  fwd {row['forward_ms_per_step']:.3f} ms/step  fwd+grad "
        f"{row['gradient_ms_per_step']:.3f} ms/step  compile {row['compile_forward_s']:.1f}+"
        f"{row['compile_gradient_s']:.1f} s  converged {row['converged_fraction']:.3f}  "
        f"contact from {row['first_contact_s']} s")
    return row


def plot(rows, fits):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = np.array([r["n"] for r in rows])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, color in (("forward_ms_per_step", "forward", "C0"),
                              ("gradient_ms_per_step", "forward + gradient", "C1")):
        y = np.array([r[key] for r in rows])
        f = fits[key]
        axes[0].plot(ns, y, "o", color=color, label=f"{label} (R² = {f['r2']:.3f})")
        xx = np.linspace(0, ns.max(), 50)
        axes[0].plot(xx, f["intercept_ms"] + f["slope_ms_per_body"] * xx, "--", color=color)
    axes[0].set(xlabel="bodies N", ylabel="wall time per step (ms)",
                title="(a) time per step, linear fits")
    axes[0].legend(fontsize=8)
    axes[1].plot(ns, [r["compile_forward_s"] for r in rows], "o-", label="forward")
    axes[1].plot(ns, [r["compile_gradient_s"] for r in rows], "s-", label="forward + gradient")
    axes[1].set(xlabel="bodies N", ylabel="compile time (s)", title="(b) compile time")
    axes[1].legend(fontsize=8)
    return finish_figure(fig, axes, f"ADD S1 chain: {rows[0]['steps']} steps at dt = 1/500 s, "
                         "float64, CPU, Newton (dense)")


def main() -> None:
    global SOLVER
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--solver", choices=sorted(SOLVERS), default="dense",
                   help="dense Newton (default) or matrix-free Newton (writes "
                        "s1_chain_scaling_cg.*)")
    args = p.parse_args()
    SOLVER = SOLVERS[args.solver]
    ns, steps = (QUICK_NS, QUICK_STEPS) if args.quick else (NS, STEPS)
    start = time.perf_counter()
    rows = [run(n, steps) for n in ns]
    fits = {key: fit([r["n"] for r in rows], [r[key] / 1e3 for r in rows])
            for key in ("forward_ms_per_step", "gradient_ms_per_step")}
    ratio = [r["gradient_s"] / r["forward_s"] for r in rows]
    result = {
        "params": {"ns": list(ns), "steps": steps, "dt_s": 1 / 500, "duration_s": steps / 500,
                   "dtype": "float64", "backend": jax.default_backend(), "solver": repr(SOLVER),
                   "link_half_m": [0.05, 0.02, 0.02], "link_mass_kg": 0.1,
                   "spring_stiffness_N_per_m": 1e4, "ground_k_n": 1e3, "ground_k_d": 1e-3,
                   "mu": 0.5, "loss": "mean final link height; gradient w.r.t. all 2N spring "
                   "stiffnesses (reverse mode, implicit)", "quick": args.quick},
        "rows": rows,
        "linear_fit_time_per_step": fits,
        "gradient_over_forward_time": ratio,
        "claims": {
            "time_grows_about_linearly_in_N": {
                "agrees": bool(min(f["r2"] for f in fits.values()) > 0.95),
                "reason": "linear fits of time per step vs N: R² = "
                          + ", ".join(f"{k} {v['r2']:.3f}" for k, v in fits.items())},
            "chain_reaches_the_ground": {
                "agrees": all(r["steps_with_contact"] > 0 for r in rows),
                "reason": "first contact at " + ", ".join(
                    f"N={r['n']}: {r['first_contact_s']} s" for r in rows)},
        },
        "notes": ["Times are the best of 2 runs for N <= 10, one run above; compile time "
                  "excluded and reported separately.",
                  "The machine is shared (2 cores, other jobs running): absolute times are "
                  "noisy; see provenance."],
        "total_wall_s": round(time.perf_counter() - start, 1),
    }
    name = "s1_chain_scaling" + ("" if args.solver == "dense" else "_" + args.solver)
    save(name, result, plot(rows, fits), args.out_dir)


if __name__ == "__main__":
    main()
