"""Identification of a soft cube's Young's modulus and viscosity from its observed motion
(Macklin's thesis Ch. 7.3, ∇Sim: material parameters of an FEM solid recovered from a
bouncing trajectory by gradients through the simulator; here with 3D vertex observations,
∇Sim's "strong supervision", not rendered images).

Setup (ours; ∇Sim gives no scene parameters for its deformable runs):
  - a 0.1 m cube, `box_tets` with 3 x 3 x 3 cells: 162 tetrahedra, 64 vertices, 1 kg
    (ρ = 1000 kg/m³), stable Neo-Hookean (∇Sim's material, thesis Eq. 158), ν = 0.3 known;
    truth E = 1e4 Pa, η = 10 Pa s (ADD's Green-strain-rate viscosity).
  - dropped tilted (25° about x, 15° about y) from 0.15 m with v = (0.5, 0, 0) m/s onto a
    plane: it lands on a corner, bounces, tumbles and wobbles; 0.6 s, dt = 2 ms (300 steps),
    float64.
  - contact per vertex (points): linear penalty k_n = 1e4 N/m, no contact damping (the
    bounce comes from the material), huber friction μ = 0.5 with stick stiffness
    k_f = 100 N s/m (`jc.Contact(friction_stiffness=100)`; the default 1e4 left 2-4 % of
    the steps unconverged on a 48-tetrahedron version of this cube; ADD's own k_t = k_n Δt
    would be 20 N s/m).
    Newton with up to 30 iterations (the default 12 left 1-2 impact steps at residuals of
    1e-8 to 2e-6 m/s at some parameter values), BiCGSTAB directions at 192 unknowns,
    tol 1e-10 m/s.
  - observations: all 64 vertex positions every 4th step (125 Hz, an OptiTrack-like rate),
    75 frames, noise-free and with i.i.d. Gaussian noise σ = 1 mm per coordinate.
Unknowns x = (ln E, ln η) (one value for every tetrahedron). Starts 3x off the truth:
A = (3 E, η / 3) and B = (E / 3, 3 η).
Estimators:
  - Gauss-Newton / Levenberg-Marquardt on the position residuals (mm) with forward-mode
    sensitivities (`jc.optim.gauss_newton`, initial λ = 1: with the default 1e-3 the first,
    nearly undamped step from A lands at η ≈ 0.0016 Pa s, where ∂r/∂ln η vanishes, and it
    stalls there; one Jacobian = one rollout with 2 tangents);
  - L-BFGS (`jc.optim.lbfgs`) on the mean squared residual (mm²) with reverse-mode implicit
    gradients, from start A on the noisy data, at most 30 iterations or |∇| <= 1e-3 (every
    line-search trial counted).
Reported: estimates, relative errors, iterations, simulations, wall time, Gauss-Newton's
standard deviations, and the fraction of converged steps of the rollouts at the starts,
truth and estimates.

Run from the repository root:
    python -m experiments.soft_cube_identification [--quick]
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

NAME = "soft_cube_identification"
SIZE, DIVISIONS = 0.1, 3
DENSITY, POISSON, MATERIAL = 1000.0, 0.3, "stable_neo_hookean"
YOUNGS, VISCOSITY = 1e4, 10.0           # the truth
TILT = (25.0, 15.0)                     # degrees about x, then y
HEIGHT, VEL = 0.15, (0.5, 0.0, 0.0)
FRICTION, STIFFNESS, FRICTION_STIFFNESS = 0.5, 1e4, 100.0
DT, STEPS, EVERY = 0.002, 300, 4
NOISE = 1e-3
GN_DAMPING = 1.0                        # Levenberg-Marquardt's initial λ (default 1e-3)
STARTS = {"A": (3.0, 1.0 / 3.0), "B": (1.0 / 3.0, 3.0)}   # factors on (E, η)


def build():
    verts, tets = jc.meshes.box_tets((SIZE,) * 3, (DIVISIONS,) * 3)
    ax, ay = np.radians(TILT)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    verts = verts @ (rx @ ry).T
    scene = jc.Scene(dt=DT, friction=FRICTION, stiffness=STIFFNESS, damping=0.0)
    scene.add_plane()
    scene.add_solid(verts, tets, density=DENSITY, youngs_modulus=YOUNGS, poisson_ratio=POISSON,
                    viscosity=VISCOSITY, material=MATERIAL, pos=(0.0, 0.0, HEIGHT), vel=VEL)
    model, state = scene.build(contact=jc.Contact(friction_stiffness=FRICTION_STIFFNESS),
                               solver=jc.Newton(iterations=30))
    return model, state, len(tets)


def with_material(model, x):
    """The model with E = exp(x[0]) and η = exp(x[1]) in every tetrahedron."""
    solid = model.solid
    return model.replace(solid=solid.replace(
        youngs_modulus=jnp.full_like(solid.youngs_modulus, jnp.exp(x[0])),
        viscosity=jnp.full_like(solid.viscosity, jnp.exp(x[1]))))


def simulate(x, model, state):
    """Observed frames (F, V, 3) (every EVERY-th step), the full trajectory and step infos."""
    _, traj, info = jc.rollout(with_material(model, x), state, steps=STEPS, return_info=True)
    return traj.particle_pos[EVERY - 1::EVERY], traj.particle_pos, info


def residual(x, model, state, observed):
    """Position residuals in mm (the Gauss-Newton residual)."""
    return 1e3 * (simulate(x, model, state)[0] - observed)


def mean_square(x, model, state, observed):
    """The L-BFGS loss: mean squared position residual, mm²."""
    return jnp.mean(residual(x, model, state, observed) ** 2)


def start_point(name):
    fe, fv = STARTS[name]
    return jnp.log(jnp.array([fe * YOUNGS, fv * VISCOSITY]))


def summary(x):
    e, eta = float(np.exp(x[0])), float(np.exp(x[1]))
    return {"E": e, "eta": eta, "E_rel_error": e / YOUNGS - 1, "eta_rel_error": eta / VISCOSITY - 1}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    _common.use_compile_cache()
    model, state, n_tets = build()
    fmodel = jc.optim.forward_mode(model)
    log(f"{n_tets} tetrahedra, {model.n_particle} vertices, "
        f"{float(jnp.sum(model.particle_masses)):.3f} kg")
    run = jc.jit(simulate)
    truth = jnp.log(jnp.array([YOUNGS, VISCOSITY]))
    t = time.perf_counter()
    clean, clean_path, info = run(truth, model, state)
    jax.block_until_ready(clean)
    log(f"truth rollout: converged {float(jnp.mean(info.converged)):.4f} "
        f"({time.perf_counter() - t:.1f} s with compilation)")
    t = time.perf_counter()
    jax.block_until_ready(run(truth, model, state)[0])
    t_rollout = time.perf_counter() - t
    rng = np.random.default_rng(0)
    noisy = clean + jnp.asarray(rng.normal(0.0, NOISE, clean.shape))
    data = {"clean": clean, "noisy": noisy}

    converged = {"truth": float(jnp.mean(info.converged))}
    for name in STARTS:
        converged[f"start_{name}"] = float(jnp.mean(run(start_point(name), model, state)[2]
                                                    .converged))

    cases = ([("A", "clean"), ("A", "noisy")] if args.quick
             else [("A", "clean"), ("B", "clean"), ("A", "noisy"), ("B", "noisy")])
    fits = {}
    for start, kind in cases:
        t = time.perf_counter()
        found = jc.optim.gauss_newton(residual, start_point(start),
                                      args=(fmodel, state, data[kind]),
                                      max_iterations=10 if args.quick else 30,
                                      xtol=1e-10, rtol=1e-10, damping=GN_DAMPING)
        seconds = time.perf_counter() - t
        x = np.asarray(found.x)
        # standard deviations of (ln E, ln η), i.e. relative ones, from σ²(JᵀJ)⁻¹
        # (residuals in mm: σ² in mm²; J in mm per unit ln)
        m = found.jacobian.shape[0]
        sigma2 = 2.0 * found.value / max(m - 2, 1)
        cov = sigma2 * np.linalg.pinv(np.asarray(found.jacobian.T @ found.jacobian))
        final = run(jnp.asarray(x), model, state)[2]
        key = f"gauss_newton_{start}_{kind}"
        fits[key] = {"start": start, "data": kind, **summary(x),
                     "rel_std": np.sqrt(np.diag(cov)).tolist(),
                     "rms_mm": float(np.sqrt(2.0 * found.value / m)),
                     "iterations": found.iterations, "simulations": found.simulations,
                     "converged": found.converged, "status": found.status, "seconds": seconds,
                     "history": found.history,
                     "steps_converged": float(jnp.mean(final.converged))}
        converged[key] = fits[key]["steps_converged"]
        r = fits[key]
        log(f"GN {start}/{kind}: E {r['E']:.6g} ({r['E_rel_error']:+.2e}), η {r['eta']:.6g} "
            f"({r['eta_rel_error']:+.2e}); rms {r['rms_mm']:.4f} mm; {found.iterations} it, "
            f"{found.simulations} sims, {seconds:.0f} s; {found.status}")

    # L-BFGS from A on the noisy data (reverse-mode implicit gradients)
    t = time.perf_counter()
    best = jc.optim.lbfgs(mean_square, start_point("A"), args=(model, state, noisy),
                          max_iterations=10 if args.quick else 30, rtol=1e-12,
                          gtol=1e-3)
    seconds = time.perf_counter() - t
    x = np.asarray(best.x)
    final = run(jnp.asarray(x), model, state)[2]
    fits["lbfgs_A_noisy"] = {"start": "A", "data": "noisy", **summary(x),
                             "rms_mm": float(np.sqrt(best.value)),
                             "iterations": best.iterations, "simulations": best.simulations,
                             "converged": best.converged, "status": best.status,
                             "seconds": seconds, "history": best.history,
                             "steps_converged": float(jnp.mean(final.converged))}
    converged["lbfgs_A_noisy"] = fits["lbfgs_A_noisy"]["steps_converged"]
    r = fits["lbfgs_A_noisy"]
    log(f"L-BFGS A/noisy: E {r['E']:.6g} ({r['E_rel_error']:+.2e}), η {r['eta']:.6g} "
        f"({r['eta_rel_error']:+.2e}); rms {r['rms_mm']:.4f} mm; {best.iterations} it, "
        f"{best.simulations} sims, {seconds:.0f} s; {best.status}")

    start_path = run(start_point("A"), model, state)[1]
    fit_key = "gauss_newton_A_noisy"
    fit_x = jnp.log(jnp.array([fits[fit_key]["E"], fits[fit_key]["eta"]]))
    fit_path = run(fit_x, model, state)[1]
    result = {
        "setup": {"size": SIZE, "divisions": DIVISIONS, "tetrahedra": n_tets,
                  "vertices": int(model.n_particle), "density": DENSITY,
                  "poisson_ratio": POISSON, "material": MATERIAL,
                  "youngs_modulus_true": YOUNGS, "viscosity_true": VISCOSITY,
                  "tilt_deg": TILT, "height": HEIGHT, "vel": VEL, "friction": FRICTION,
                  "contact_stiffness": STIFFNESS, "contact_damping": 0.0,
                  "contact": "linear normal, huber friction",
                  "friction_stiffness": FRICTION_STIFFNESS, "dt": DT, "steps": STEPS,
                  "observed_every": EVERY, "frames": int(clean.shape[0]), "noise": NOISE,
                  "starts": STARTS, "solver": "Newton(iterations=30)",
                  "levenberg_marquardt_initial_damping": GN_DAMPING, "quick": args.quick,
                  "rollout_seconds": t_rollout},
        "paper": {"source": "Macklin thesis §7.3 (∇Sim) Table 11, deformable solids (bouncing "
                            "spheres and beams), 100 instances",
                  "strong_supervision_rel_mae": {"mu": 0.0025, "lambda": 0.0024,
                                                 "per_particle_mass": 0.032},
                  "image_supervision_rel_mae": {"mu": 0.0054, "lambda": 0.0056,
                                                "per_particle_mass": 0.048},
                  "note": "∇Sim identifies Lamé μ, λ (not E and viscosity), semi-implicit "
                          "Euler, gradient descent; no noise level, iteration counts or "
                          "starting errors given"},
        "fits": fits,
        "steps_converged": converged,
        "all_steps_converged": bool(all(v == 1.0 for v in converged.values())),
    }
    save(NAME, result, figure(fits, clean, noisy, clean_path, start_path, fit_path, model),
         args.out_dir)


def figure(fits, clean, noisy, true_path, start_path, fit_path, model):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.2))
    for key, r in fits.items():
        h = np.asarray(r["history"])
        style = "o-" if key.startswith("gauss") else "s--"
        label = ("Gauss-Newton " if key.startswith("gauss") else "L-BFGS ") + \
            f"{r['start']}, {r['data']}"
        if key.startswith("gauss"):
            h = 2.0 * h / (np.asarray(clean).size)          # ½|r|² -> mean square (mm²)
        a.semilogy(np.arange(len(h)), h, style, ms=3, label=label)
    a.axhline(1.0, color="0.5", ls=":", label="noise floor 1 mm²")
    a.set_xlabel("iteration")
    a.set_ylabel("mean squared residual (mm²)")
    a.legend(fontsize=7)
    m = np.asarray(model.particle_masses)
    t = DT * (1 + np.arange(true_path.shape[0]))
    tf = t[EVERY - 1::EVERY]
    for path, label, style in ((start_path, "start A (3E, η/3)", "--"),
                               (true_path, "truth", "-"), (fit_path, "Gauss-Newton fit", ":")):
        com = np.einsum("tvk,v->tk", np.asarray(path), m) / m.sum()
        b.plot(t, com[:, 2], style, label=f"{label}")
    com_obs = np.einsum("tvk,v->tk", np.asarray(noisy), m) / m.sum()
    b.plot(tf, com_obs[:, 2], "k.", ms=3, label="observed (1 mm noise)")
    b.set_xlabel("t (s)")
    b.set_ylabel("centre of mass z (m)")
    b.legend(fontsize=7)
    vertex = int(np.argmin(np.asarray(true_path)[0, :, 2]))      # the first corner to land
    for path, label, style in ((start_path, "start A", "--"), (true_path, "truth", "-"),
                               (fit_path, "Gauss-Newton fit", ":")):
        c.plot(t, np.asarray(path)[:, vertex, 2], style, label=label)
    c.plot(tf, np.asarray(noisy)[:, vertex, 2], "k.", ms=3, label="observed")
    c.set_xlabel("t (s)")
    c.set_ylabel(f"vertex {vertex} z (m)")
    c.legend(fontsize=7)
    finish_figure(fig, (a, b, c), "Soft cube (162 tets): E and η from the observed bounce")
    return fig


if __name__ == "__main__":
    main()
