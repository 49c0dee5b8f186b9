"""ADD E8 (Geilinger et al. 2020, Fig. 10a) with a deformable ball: throw a soft FEM ball so
that its centre of mass is on a point target at the final time, in flight after one bounce;
L-BFGS with exact (implicit) gradients against CMA-ES (Hansen's defaults), counting every
simulation. The rigid version is `add_e8_ball_toss.py`.

ADD's ball: E = 2e4 Pa, η = 0.0125 Pa s, ρ = 150 kg/m³, c_f = 0.4, 451 elements, linear
penalty contact with k_t = k_n Δt (their Eq. 17), BDF2 (Δt not given); L-BFGS needs 4, 24
and 28 simulations for the zero-, one- and two-bounce targets, CMA-ES 1042 (two bounces,
to Φ/Φ₀ ≈ 1e-6). Ours:
  - `jc.meshes.ball_tets(0.1, 3)`: radius 0.1 m, 162 tetrahedra, 64 vertices, 0.553 kg;
    Neo-Hookean (ADD's law), E = 2e4 Pa, ν = 0.3 (ADD gives none), η = 0.0125 Pa s,
    ρ = 150 kg/m³ (ADD's values).
  - contact per vertex (points): linear penalty k_n = 1e4 N/m per vertex (ADD's default
    1e3 lets this ball sink 1.8 cm), no contact damping (the bounce comes from the
    material, as in ADD), ADD's clamped linear friction (`jc.Contact(friction="linear")`,
    k_t = k_n Δt = 100 N s/m), c_f = 0.4.
  - implicit Euler, dt = 10 ms, 0.6 s (60 steps), float64; Newton with up to 30 iterations
    and tol = 1e-6 m/s (with the default 1e-10 the BiCGSTAB directions at 192 unknowns
    stall at residuals of 1e-7 to 6e-7 m/s on up to 18 % of the free-flight steps of
    the spinning ball, while dense directions converge in 3 iterations).
  - Unknowns: the initial velocity of every vertex, v + ω × (x - c) (a rigid throw with
    spin): 6 numbers, as in ADD. The target is where a reference throw v = (2, 0.3, 2) m/s,
    ω = (0, -8, 0) rad/s has its centre of mass at T = 0.6 s: it lands at about 0.48 s and
    is near the top of its bounce at T. Both optimizers start at v = (1.5, 0, 1.6), ω = 0
    (which also lands once before T). Φ = |x_com(T) - target|².
  - One bounce, not ADD's two: implicit Euler at dt = 10 ms takes most of the soft ball's
    energy at each landing (the second hop rises about 1 cm), and a target on the ball
    rolling afterwards makes the landscape rugged (the c.o.m. height of a rolling faceted
    FEM ball oscillates): L-BFGS stalled there at Φ/Φ₀ ≈ 2e-5 in a 20-iteration trial.
  - L-BFGS runs to Φ/Φ₀ < 1e-10 (or 60 iterations); CMA-ES (population 9) from σ₀ = 0.5
    (as the rigid version) and from σ₀ = 0.1 (staying near the start's contact sequence),
    each to ADD's CMA-ES level Φ/Φ₀ < 1e-6 or a budget of simulations (`--cmaes-budget`,
    default 300 each: every CMA-ES generation is a vmapped batch of FEM rollouts, ~1-2 s
    per simulation on 2 shared cores).
  - The gradient at the start is checked against central finite differences (h = 1e-5).

Run from the repository root:
    python -m experiments.add_e8_soft_ball_throw [--quick] [--cmaes-budget N]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from experiments import _common  # noqa: E402
import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "add_e8_soft_ball_throw"
RADIUS, DIVISIONS = 0.1, 3
YOUNGS, POISSON, VISCOSITY, DENSITY, MATERIAL = 2e4, 0.3, 0.0125, 150.0, "neo_hookean"
FRICTION, STIFFNESS = 0.4, 1e4
HEIGHT = 0.3                       # initial centre height (the ball 0.2 m above the floor)
DT, STEPS = 0.01, 60
TOL = 1e-6
REFERENCE = (2.0, 0.3, 2.0, 0.0, -8.0, 0.0)
START = (1.5, 0.0, 1.6, 0.0, 0.0, 0.0)
RTOL_LBFGS, RTOL_CMAES = 1e-10, 1e-6
SIGMAS = (0.5, 0.1)                # CMA-ES initial step sizes (m/s and rad/s)


def build():
    verts, tets = jc.meshes.ball_tets(RADIUS, DIVISIONS)
    scene = jc.Scene(dt=DT, friction=FRICTION, stiffness=STIFFNESS, damping=0.0)
    scene.add_plane()
    scene.add_solid(verts, tets, density=DENSITY, youngs_modulus=YOUNGS, poisson_ratio=POISSON,
                    viscosity=VISCOSITY, material=MATERIAL, pos=(0.0, 0.0, HEIGHT))
    model, state = scene.build(contact=jc.Contact(friction="linear"),
                               solver=jc.Newton(iterations=30, tol=TOL))
    return model, state, len(tets)


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--cmaes-budget", type=int, default=300,
                   help="most CMA-ES simulations per step size (default 300)")
    args = p.parse_args()
    _common.use_compile_cache()
    model, state, n_tets = build()
    mass = model.particle_masses
    rest = state.particle_pos
    centre = jnp.sum(rest * mass[:, None], 0) / jnp.sum(mass)
    log(f"{n_tets} tetrahedra, {model.n_particle} vertices, {float(jnp.sum(mass)):.4f} kg")

    def throw(x):
        vel = x[None, :3] + jnp.cross(jnp.broadcast_to(x[3:], rest.shape), rest - centre)
        _, traj, info = jc.rollout(model, state.replace(particle_vel=vel), steps=STEPS,
                                   return_info=True)
        com = jnp.einsum("tvk,v->tk", traj.particle_pos, mass) / jnp.sum(mass)
        return com, jnp.min(traj.particle_pos[..., 2], axis=1), info

    run = jc.jit(throw)
    ref_com, ref_low, ref_info = run(jnp.asarray(REFERENCE))
    target = ref_com[-1]

    def loss(x):
        return jnp.sum((throw(x)[0][-1] - target) ** 2)

    def landings(low):
        """Contact episodes (lowest vertex below the floor) that follow >= 3 airborne steps:
        the landings; a bounce is a landing after the first."""
        touch = np.asarray(low) < 0.0
        count, air = 0, 3
        for t in touch:
            if t and air >= 3:
                count += 1
            air = 0 if t else air + 1
        return count

    x0 = jnp.asarray(START)
    _, start_low, start_info = run(x0)
    log(f"reference throw: {landings(ref_low)} landings, ends at "
        f"{np.asarray(target).round(4)}; converged {float(jnp.mean(ref_info.converged)):.3f}")

    # the implicit gradient at the start against central finite differences
    t = time.perf_counter()
    value_grad = jc.jit(jax.value_and_grad(loss))
    phi0, g = value_grad(x0)
    h = 1e-5
    value = jc.jit(loss)
    fd = np.array([(float(value(x0.at[i].add(h))) - float(value(x0.at[i].add(-h)))) / (2 * h)
                   for i in range(6)])
    g = np.asarray(g)
    grad_check = {"implicit": g.tolist(), "central_fd_h1e-5": fd.tolist(),
                  "max_rel_error": float(np.max(np.abs(g - fd)) / np.max(np.abs(fd))),
                  "seconds": time.perf_counter() - t}
    log(f"Φ0 = {float(phi0):.4g}; gradient {g.round(5)}; FD {fd.round(5)}; max rel. error "
        f"{grad_check['max_rel_error']:.2e}")

    t = time.perf_counter()
    gradient = jc.optim.lbfgs(loss, x0, max_iterations=20 if args.quick else 60,
                              rtol=RTOL_LBFGS)
    t_lbfgs = time.perf_counter() - t
    log(f"L-BFGS: {gradient.status}; {gradient.simulations} simulations, "
        f"{gradient.iterations} iterations, {t_lbfgs:.1f} s")
    budget = 60 if args.quick else args.cmaes_budget
    free, t_cma = {}, {}
    for sigma in SIGMAS:
        t = time.perf_counter()
        free[sigma] = jc.optim.cmaes(loss, x0, sigma, max_simulations=budget, rtol=RTOL_CMAES)
        t_cma[sigma] = time.perf_counter() - t
        log(f"CMA-ES σ0 = {sigma:g}: {free[sigma].status}; {free[sigma].simulations} "
            f"simulations, {t_cma[sigma]:.1f} s")

    com_g, low_g, info_g = run(jnp.asarray(gradient.x))
    finals = {sigma: run(jnp.asarray(f.x)) for sigma, f in free.items()}
    com_0 = run(x0)[0]
    # simulations L-BFGS needed to pass CMA-ES's final ratio and ADD's 1e-6 (iterations
    # spread evenly over the simulations, as in the plot)
    hist_g = np.asarray(gradient.history) / gradient.history[0]
    sims_g = np.linspace(1, gradient.simulations, len(hist_g))

    def lbfgs_sims_to(ratio):
        hit = np.nonzero(hist_g <= ratio)[0]
        return float(sims_g[hit[0]]) if len(hit) else None

    cmaes = {}
    for sigma, f in free.items():
        ratio = f.value / f.history[0]
        cmaes[f"sigma0={sigma:g}"] = {
            "sigma0": sigma, "simulations": f.simulations, "generations": f.iterations,
            "ratio": ratio, "converged": f.converged, "status": f.status,
            "seconds": t_cma[sigma], "x": np.asarray(f.x).tolist(), "history": f.history,
            "landings": landings(finals[sigma][1]),
            "lbfgs_simulations_to_this_ratio": lbfgs_sims_to(ratio),
            "steps_converged": float(jnp.mean(finals[sigma][2].converged))}
    result = {
        "setup": {"radius": RADIUS, "divisions": DIVISIONS, "tetrahedra": n_tets,
                  "vertices": int(model.n_particle), "mass": float(jnp.sum(mass)),
                  "youngs_modulus": YOUNGS, "poisson_ratio": POISSON, "viscosity": VISCOSITY,
                  "density": DENSITY, "material": MATERIAL, "friction": FRICTION,
                  "friction_law": "linear (ADD Eq. 17), k_t = k_n dt",
                  "contact_stiffness": STIFFNESS, "contact_damping": 0.0, "dt": DT,
                  "steps": STEPS, "solver": f"Newton(iterations=30, tol={TOL:g})",
                  "reference_throw": REFERENCE, "start": START,
                  "target": np.asarray(target).tolist(), "rtol_lbfgs": RTOL_LBFGS,
                  "rtol_cmaes": RTOL_CMAES, "sigma0": SIGMAS, "cmaes_budget": budget,
                  "quick": args.quick},
        "paper": {"lbfgs_simulations": 28, "lbfgs_ratio": 1e-25, "cmaes_simulations": 1042,
                  "cmaes_ratio": 1e-6, "cmaes_time": "2 h 15 min",
                  "body": "deformable ball, 451 elements, E = 2e4, η = 0.0125, ρ = 150, "
                          "c_f = 0.4; t_sim 8.62 s, t_opt 265 s for the two-bounce row"},
        "landings": {"reference": landings(ref_low), "start": landings(start_low),
                     "lbfgs": landings(low_g)},
        "gradient_check": grad_check,
        "lbfgs": {"simulations": gradient.simulations, "iterations": gradient.iterations,
                  "ratio": gradient.value / gradient.history[0],
                  "converged": gradient.converged, "status": gradient.status,
                  "seconds": t_lbfgs, "x": np.asarray(gradient.x).tolist(),
                  "history": gradient.history,
                  "simulations_to_1e-6": lbfgs_sims_to(1e-6),
                  "steps_converged": float(jnp.mean(info_g.converged))},
        "cmaes": cmaes,
        "steps_converged": {"reference": float(jnp.mean(ref_info.converged)),
                            "start": float(jnp.mean(start_info.converged)),
                            "lbfgs": float(jnp.mean(info_g.converged)),
                            **{f"cmaes_sigma0={s:g}": float(jnp.mean(f[2].converged))
                               for s, f in finals.items()}},
    }
    paths = [(com_0, "start"), (ref_com, "reference"), (com_g, "L-BFGS")]
    paths += [(finals[s][0], f"CMA-ES σ0 = {s:g}") for s in SIGMAS]
    save(NAME, result, figure(gradient, free, paths, target), args.out_dir)


def figure(gradient, free, paths, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    first = gradient.history[0]
    # L-BFGS: iterations spread evenly over its simulations (the loss of each line-search
    # trial is not recorded)
    sims_g = np.linspace(1, gradient.simulations, len(gradient.history))
    a.semilogy(sims_g, np.asarray(gradient.history) / first, "o-", ms=3,
               label="L-BFGS (implicit gradients)")
    for sigma, f in free.items():
        sims_c = 1 + np.arange(len(f.history)) * ((f.simulations - 1)
                                                  / max(len(f.history) - 1, 1))
        a.semilogy(sims_c, np.asarray(f.history) / first, "-", label=f"CMA-ES, σ0 = {sigma:g}")
    a.axhline(RTOL_LBFGS, color="0.5", ls=":", label="Φ/Φ₀ = 1e-10")
    a.axhline(RTOL_CMAES, color="0.7", ls="--", label="Φ/Φ₀ = 1e-6 (ADD's CMA-ES)")
    a.set_xscale("log")
    a.set_xlabel("simulations")
    a.set_ylabel("Φ / Φ₀")
    a.legend(fontsize=8)
    for path, label in paths:
        p = np.asarray(path)
        b.plot(p[:, 0], p[:, 2], label=label)
    b.plot([target[0]], [target[2]], "k*", ms=10, label="target")
    b.set_xlabel("centre of mass x (m)")
    b.set_ylabel("centre of mass z (m)")
    b.legend(fontsize=8)
    finish_figure(fig, (a, b), "ADD E8 with a soft FEM ball (162 tets): throw to a point "
                               "target in flight after one bounce")
    return fig


if __name__ == "__main__":
    main()
