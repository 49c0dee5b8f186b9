"""Qiao et al. 2020 (Sec. 5, Fig. 9): parameter estimation through a collision. Two cubes
start with opposite velocities ±v and collide; find the mass m1 of the left one so that the
total momentum after the collision is p = m1 v1' + m2 v2' = (3, 0, 0). They start from
m1 = m2 = 1 (p = 0) and reach m1 = 5.4 after 90 gradient steps.

Closed form: the collision conserves momentum, so p = (m1 - m2) v and m1 = m2 + 3 / v. Qiao
et al. do not give v; m1 = 5.4 means v = 3 / 4.4 = 0.682 m/s, which we use, so the answer
is 5.4 exactly (implicit Euler with pair forces conserves momentum exactly too).

Setup: two 0.1 m cubes (convex meshes of their 8 corners; m2 = 1 kg), no gravity, no floor, 0.25 m apart, v = ±0.682 m/s along
x, k_n = 1e4 N/m, damping for restitution 0.5, dt = 10 ms, 0.6 s (60 steps), float64.
Parameter: θ = log m1 (positive mass). Loss: |p(T) - (3, 0, 0)|², p(T) summed from the final
velocities and masses. Optimizers, every simulation counted: plain gradient descent (as
Qiao et al., optax SGD, step 0.02 on θ), L-BFGS, Gauss-Newton on the residual p(T) - p*
(forward sensitivities), and CMA-ES (Hansen's defaults, σ0 = 0.5).

Run from the repository root:
    python -m experiments.qiao_two_cubes [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "qiao_two_cubes"
DT, STEPS = 0.01, 60
HALF, GAP, STIFFNESS, RESTITUTION = 0.05, 0.25, 1e4, 0.5
TARGET = 3.0
SPEED = TARGET / 4.4               # so that m1 = 5.4 (Qiao's answer) is exact
TOL = 1e-10                        # stop at loss <= TOL x the initial loss


def build():
    damping = float(jc.restitution_to_damping(RESTITUTION, STIFFNESS, 0.5))
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0), stiffness=STIFFNESS, damping=damping,
                     friction=0.5)
    # cubes as convex meshes (8 vertices against 6 face planes each way): the same cube as
    # `add_box`, with a collider that compiles in seconds rather than minutes
    corners = HALF * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    scene.add_mesh(corners, mass=1.0, pos=(-(GAP / 2 + HALF), 0.0, 0.0), vel=(SPEED, 0.0, 0.0))
    scene.add_mesh(corners, mass=1.0, pos=(GAP / 2 + HALF, 0.0, 0.0), vel=(-SPEED, 0.0, 0.0))
    return scene.build()


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    model, state = build()
    forward = jc.optim.forward_mode(model)
    target = jnp.array([TARGET, 0.0, 0.0])

    def momentum(theta, m):
        mass = m.body.mass.at[0].set(jnp.exp(theta[0]))
        # the inertia scales with the mass (a uniform cube)
        inertia = m.body.inertia.at[0].set(m.body.inertia[1] * jnp.exp(theta[0]))
        m = m.replace(body=m.body.replace(mass=mass, inertia=inertia))
        final, _ = jc.rollout(m, state, steps=STEPS)
        return jnp.sum(mass[:, None] * final.vel, axis=0)

    def loss(theta):
        return jnp.sum((momentum(theta, model) - target) ** 2)

    def residual(theta):
        return momentum(theta, forward) - target

    theta0 = jnp.zeros(1)
    first = float(jc.jit(loss)(theta0))
    log(f"start: p = {np.asarray(jc.jit(lambda t: momentum(t, model))(theta0)).round(6)}")
    rows = {}

    t = time.perf_counter()
    opt = optax.sgd(0.02)
    step = jc.jit(lambda th, s: (lambda v, g: (*opt.update(g, s, th), v))(
        *jax.value_and_grad(loss)(th)))
    theta, opt_state, history = theta0, opt.init(theta0), []
    cap = 200 if args.quick else 2000
    for _ in range(cap):
        updates, opt_state, value = step(theta, opt_state)
        history.append(float(value))
        if value <= TOL * first:
            break
        theta = optax.apply_updates(theta, updates)
    rows["gradient_descent"] = summary(history, theta, len(history), len(history),
                                       history[-1] <= TOL * first, time.perf_counter() - t)
    for name, run in (
            ("lbfgs", lambda: jc.optim.lbfgs(loss, theta0, rtol=TOL, max_iterations=50)),
            ("gauss_newton", lambda: jc.optim.gauss_newton(residual, theta0, ftol=0.5 * TOL * first,
                                                           max_iterations=30)),
            ("cmaes", lambda: jc.optim.cmaes(loss, theta0, 0.5, rtol=TOL,
                                             max_simulations=300 if args.quick else 3000))):
        t = time.perf_counter()
        found = run()
        value = float(jc.jit(loss)(found.x))
        rows[name] = summary(found.history, found.x, found.iterations, found.simulations,
                             value <= TOL * first, time.perf_counter() - t, found.status)
    for name, row in rows.items():
        log(f"{name}: m1 = {row['m1']:.6f}, {row['iterations']} iterations, "
            f"{row['simulations']} simulations, loss ratio {row['ratio_vs_start']:.2e}, "
            f"{row['seconds']:.1f} s")
    p_final = np.asarray(jc.jit(lambda t: momentum(t, model))(jnp.asarray(rows["lbfgs"]["theta"])))
    result = {
        "setup": {"dt": DT, "steps": STEPS, "half": HALF, "gap": GAP, "speed": SPEED,
                  "stiffness": STIFFNESS, "restitution": RESTITUTION, "target": TARGET,
                  "tol": TOL, "sgd_step": 0.02, "quick": args.quick},
        "paper": {"m1": 5.4, "gradient_steps": 90, "v": "not given (m1 = 5.4 implies 0.682)"},
        "closed_form_m1": 1.0 + TARGET / SPEED,
        "momentum_at_lbfgs_answer": p_final.tolist(),
        "start_loss": first,
        "methods": {k: {kk: vv for kk, vv in v.items() if kk != "history"}
                    for k, v in rows.items()},
    }
    for name in rows:
        result["methods"][name]["m1_error"] = rows[name]["m1"] - (1.0 + TARGET / SPEED)
    save(NAME, result, figure(rows, first), args.out_dir)


def summary(history, theta, iterations, simulations, reached, seconds, status=""):
    return {"m1": float(np.exp(np.asarray(theta)[0])), "theta": np.asarray(theta).tolist(),
            "iterations": int(iterations), "simulations": int(simulations),
            "reached_tol": bool(reached), "ratio_vs_start": history[-1] / history[0]
            if history and history[0] else float("nan"), "seconds": seconds,
            "status": status, "history": list(map(float, history))}


def figure(rows, first):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, row in rows.items():
        h = np.asarray(row["history"]) / first
        sims = np.linspace(1, row["simulations"], len(h))
        ax.semilogy(sims, np.maximum(h, 1e-30), "o-" if len(h) < 40 else "-", ms=3,
                    label=f"{name}: m1 = {row['m1']:.4f}")
    ax.axhline(TOL, color="0.5", ls=":", label="tolerance")
    ax.set_xscale("log")
    ax.set_xlabel("simulations")
    ax.set_ylabel("loss / initial loss")
    ax.legend(fontsize=8)
    finish_figure(fig, [ax], "Qiao et al. Fig. 9: two cubes, m1 for momentum (3, 0, 0) "
                             "(closed form 5.4)")
    return fig


if __name__ == "__main__":
    main()
