"""Thesis Fig. 36 (Macklin 2020, "Differentiability"): optimize the starting impulse of a
bouncing ball so that, after two contact events, it hits a target at t = 0.5 s.

Setup: a ball (radius 0.05 m, 1 kg) at rest at height 0.3 m above a ground plane receives an
impulse J = (J_x, 0, J_z) at t = 0 (v0 = J / m). Contact: k_n = 1e4 N/m, damping from
`jc.restitution_to_damping(0.7, ...)` (ADD Eq. 22; the implicit step adds numerical damping:
the simulated bounce is e ~ 0.54), Coulomb mu = 0.5, and smoothed laws as the thesis argues
for ("the contact forces may be smoothed to provide C2 continuity"): the C2 normal law with
a 5 mm width and pseudo-Huber friction (eps = 0.01 m/s). 250 implicit steps of dt = 2 ms
(t = 0.5 s), float64. Loss: |p(0.5 s) - target|^2, target (0.7, 0, 0.065) m, 1.5 cm above the
touching height just after the second bounce. Gradient: `jax.value_and_grad` through
`jc.rollout` (implicit adjoint of every Newton solve, `jc.Newton()` defaults); optimizer:
`optax.lbfgs` with its zoom line search. The initial guess J = (1.0, -0.3) N s also bounces
twice and ends 0.29 m from the target. Unless --quick, the same optimization is repeated
with the library's default laws (linear normal force, Huber friction: C1 only) to compare.

Recorded: per L-BFGS iteration the loss, gradient norm and function evaluations (one value
and gradient each); the final miss; the impacts (runs of steps with a penetrating contact)
of the initial and optimized throws; convergence of every step's solve; the gradient at the
initial guess vs central finite differences (h = 1e-6).

Any target above the ground can also be reached by a throw that never bounces (a parabola
from the start has its lowest point on [0, 0.5 s] at an end). The two-bounce solution is the
one L-BFGS reaches from the two-bounce initial guess; the script asserts both have 2 impacts.

Run from the repository root:
    python -m experiments.fig36_trajectory_optimization [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import log, parser, save  # noqa: E402

NAME = "fig36_trajectory_optimization"
DT, STEPS = 0.002, 250            # 0.5 s
RADIUS, MASS, HEIGHT = 0.05, 1.0, 0.3
STIFFNESS, RESTITUTION, FRICTION = 1e4, 0.7, 0.5
SMOOTH = jc.Contact(normal="smooth", smooth_width=0.005, friction="pseudo_huber",
                    friction_eps=0.01)
TARGET = (0.7, 0.0, 0.065)        # m
INITIAL_IMPULSE = (1.0, -0.3)     # (J_x, J_z), N s
FD_STEP = 1e-6


def ball_scene(contact=SMOOTH):
    """(model, state): the ball at rest at height HEIGHT above the ground, float64."""
    damping = float(jc.restitution_to_damping(RESTITUTION, STIFFNESS, MASS))
    scene = jc.Scene(dt=DT, friction=FRICTION, stiffness=STIFFNESS, damping=damping)
    scene.add_plane()
    scene.add_sphere(RADIUS, MASS, pos=(0.0, 0.0, HEIGHT))
    return scene.build(contact=contact, solver=jc.Newton(), dtype=jnp.float64)


def simulate(impulse, model, state, steps=STEPS):
    """Roll out the throw of impulse (J_x, J_z): returns (traj, infos) of `jc.rollout`."""
    v0 = jnp.stack([impulse[0], 0.0, impulse[1]]) / model.body.mass[0]
    _, traj, infos = jc.rollout(model, state.replace(vel=state.vel.at[0].set(v0)),
                                steps=steps, return_info=True)
    return traj, infos


def loss_fn(impulse, model, state, target, steps=STEPS):
    """Squared distance (m²) from the ball centre at the end of the rollout to the target."""
    traj, _ = simulate(impulse, model, state, steps)
    return jnp.sum((traj.pos[-1, 0] - target) ** 2)


_simulate = jc.jit(simulate, static_argnums=3)


def count_impacts(active_contacts):
    """Number of contact events: maximal runs of consecutive steps with an active contact."""
    a = np.asarray(active_contacts) > 0
    return int(np.sum(a[1:] & ~a[:-1]) + a[0])


def central_fd(f, x, h=FD_STEP):
    """Central finite-difference gradient of f: R^n -> R at x."""
    x = np.asarray(x, dtype=float)
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])


def fd_loss(model, state, target, steps=STEPS):
    """The loss as a plain function of a NumPy impulse (forward rollouts only)."""
    def f(impulse):
        traj, _ = _simulate(jnp.asarray(impulse), model, state, steps)
        return float(np.sum((np.asarray(traj.pos[-1, 0]) - np.asarray(target)) ** 2))
    return f


def optimize(model, state, target, impulse0, iterations, steps=STEPS, tol=1e-14):
    """L-BFGS (optax, zoom line search) on the impulse; stops once the loss is below tol (m²).

    Returns (impulse, history, compile_s): one history entry per iteration with the impulse,
    loss and gradient there and the function evaluations (value and gradient) it took.
    """
    # one jitted loss: its two uses below (first evaluation, line search) are traced once
    f = jc.jit(lambda p: loss_fn(p, model, state, target, steps))
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(f)

    @jc.jit
    def iterate(params, opt_state):
        value, grad = value_and_grad(params, state=opt_state)
        updates, opt_state = opt.update(grad, opt_state, params, value=value, grad=grad,
                                        value_fn=f)
        evals = optax.tree_utils.tree_get(opt_state, "num_linesearch_steps")
        return optax.apply_updates(params, updates), opt_state, value, grad, evals

    params = jnp.asarray(impulse0, jnp.float64)
    opt_state = opt.init(params)
    t0 = time.perf_counter()
    iterate = iterate.lower(params, opt_state).compile()
    compile_s = time.perf_counter() - t0
    history = []
    for i in range(iterations):
        new_params, opt_state, value, grad, evals = iterate(params, opt_state)
        history.append({"iteration": i, "impulse": np.asarray(params).tolist(),
                        "loss": float(value), "grad": np.asarray(grad).tolist(),
                        "grad_norm": float(jnp.linalg.norm(grad)),
                        # iteration 0 also evaluates the initial guess
                        "function_evals": int(evals) + (i == 0)})
        log(f"  iter {i:2d}: loss {float(value):.3e}  |grad| {history[-1]['grad_norm']:.2e}  "
            f"evals {history[-1]['function_evals']}")
        params = new_params
        if float(value) < tol:
            break
    return params, history, compile_s


def summarize(impulse, model, state, target, steps=STEPS):
    """Centre path (x, z) from t = 0, impacts, solver convergence and miss of one throw."""
    traj, infos = _simulate(jnp.asarray(impulse), model, state, steps)
    pos = np.concatenate([np.asarray(state.pos[None, 0]), np.asarray(traj.pos[:, 0])])
    return {"impulse": np.asarray(impulse).tolist(), "x": pos[:, 0], "z": pos[:, 2],
            "impacts": count_impacts(infos.active_contacts),
            "all_converged": bool(np.all(infos.converged)),
            "max_residual": float(np.max(infos.residual)),
            "max_newton_iterations": int(np.max(infos.iterations)),
            "max_penetration_m": float(np.max(infos.max_penetration)),
            "miss_m": float(np.linalg.norm(pos[-1] - np.asarray(target)))}


def run(contact, iterations):
    """Optimize with one contact law; returns (initial, final summaries, history, timings)."""
    model, state = ball_scene(contact)
    target = jnp.asarray(TARGET)
    t0 = time.perf_counter()
    impulse, history, compile_s = optimize(model, state, target, INITIAL_IMPULSE, iterations)
    timing = {"compile_s": compile_s, "optimize_s": time.perf_counter() - t0 - compile_s}
    initial = summarize(INITIAL_IMPULSE, model, state, target)
    final = summarize(impulse, model, state, target)
    log(f"  final impulse {final['impulse']} N s, miss {final['miss_m']:.2e} m, impacts "
        f"{initial['impacts']} -> {final['impacts']}, converged {final['all_converged']}")
    return model, state, initial, final, history, timing


def plot(initial, final, histories):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 3.6), gridspec_kw={"width_ratios": [1.8, 1]})
    ax.axhline(0.0, color="k", lw=1.5)
    ax.axhline(RADIUS, color="0.7", lw=0.8, ls=":", label="centre height at touch")
    ax.plot(initial["x"], initial["z"], "C0--",
            label=f"initial guess ({initial['impacts']} impacts)")
    ax.plot(final["x"], final["z"], "C1-", label=f"optimized ({final['impacts']} impacts)")
    ax.plot(TARGET[0], TARGET[2], "r*", ms=12, label="target at t = 0.5 s")
    for path, c in ((initial, "C0"), (final, "C1")):
        ax.add_patch(plt.Circle((path["x"][-1], path["z"][-1]), RADIUS, fc="none", ec=c))
    ax.add_patch(plt.Circle((0.0, HEIGHT), RADIUS, fc="0.85", ec="k"))
    ax.set(xlabel="x (m)", ylabel="z (m)", aspect="equal", ylim=(-0.02, HEIGHT + 0.08),
           title="ball centre from 0 to 0.5 s (smoothed contact)")
    ax.legend(fontsize=7, loc="upper right")
    for label, hist in histories.items():
        bx.semilogy([h["iteration"] for h in hist], [h["loss"] for h in hist], "o-", ms=3,
                    label=label)
    bx.set(xlabel="L-BFGS iteration", ylabel="loss |p(0.5 s) - target|² (m²)", title="loss")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    iterations = 8 if args.quick else 30
    laws = {"smoothed (C2 normal, pseudo-Huber)": SMOOTH}
    if not args.quick:
        laws["default (linear normal, Huber)"] = jc.Contact()
    t_start = time.perf_counter()
    runs = {}
    for label, contact in laws.items():
        log(f"{label}:")
        runs[label] = run(contact, iterations)

    model, state, initial, final, history, timing = runs[next(iter(laws))]
    assert initial["impacts"] == 2 and final["impacts"] == 2, (initial["impacts"], final["impacts"])
    assert final["all_converged"], "a Newton solve did not converge on the optimized throw"
    grad = np.asarray(history[0]["grad"])
    fd = central_fd(fd_loss(model, state, jnp.asarray(TARGET)), INITIAL_IMPULSE)
    fd_rel = float(np.linalg.norm(grad - fd) / np.linalg.norm(fd))
    log(f"gradient at the initial guess: adjoint {grad}, FD {fd}, rel. error {fd_rel:.2e}")

    def record(initial, final, history, timing):
        drop = ("x", "z")
        return {"iterations": len(history),
                "function_evals": sum(h["function_evals"] for h in history),
                "initial_loss": history[0]["loss"], "final_loss": final["miss_m"] ** 2,
                "initial_miss_m": initial["miss_m"], "final_miss_m": final["miss_m"],
                "final_impulse": final["impulse"],
                "impacts": {"initial": initial["impacts"], "optimized": final["impacts"]},
                "optimized_trajectory": {k: v for k, v in final.items() if k not in drop},
                "initial_trajectory": {k: v for k, v in initial.items() if k not in drop},
                **timing, "history": history}

    result = {
        "reproduces": "Macklin 2020 thesis Fig. 36: a ball hits a target at t = 0.5 s after "
                      "two contact events; starting impulse fitted with adjoint gradients + "
                      "L-BFGS",
        "quick": args.quick,
        "setup": {"dt": DT, "steps": STEPS, "t_end": DT * STEPS, "radius": RADIUS,
                  "mass": MASS, "start": [0.0, 0.0, HEIGHT], "stiffness": STIFFNESS,
                  "restitution_requested": RESTITUTION,
                  "damping": float(model.geom.damping[0]), "friction": FRICTION,
                  "contact": {"normal": SMOOTH.normal, "smooth_width": SMOOTH.smooth_width,
                              "friction": SMOOTH.friction, "friction_eps": SMOOTH.friction_eps},
                  "solver": "jc.Newton() defaults (ad='vjp')", "dtype": "float64",
                  "target": list(TARGET), "loss": "|p(t_end) - target|^2 (m^2)",
                  "parameters": "impulse (J_x, J_z) in N s at t = 0, v0 = J / m",
                  "initial_impulse": list(INITIAL_IMPULSE),
                  "optimizer": f"optax.lbfgs() (memory 10, zoom line search), at most "
                               f"{iterations} iterations, stop at loss < 1e-14 m^2"},
        **record(initial, final, history, timing),
        "gradient_check": {"at": "initial guess", "fd_step": FD_STEP, "adjoint": grad.tolist(),
                           "central_fd": fd.tolist(), "relative_error": fd_rel},
        "comparison": {label: record(*r[2:]) for label, r in list(runs.items())[1:]},
        "total_s": time.perf_counter() - t_start,
    }
    histories = {label: r[4] for label, r in runs.items()}
    save(NAME, result, plot(initial, final, histories), args.out_dir)


if __name__ == "__main__":
    main()
