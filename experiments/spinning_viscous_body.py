"""ADD (Geilinger et al. 2020) Sec. 5.1, Eq. 19: viscosity on the Green strain rate keeps a
spinning body's spin. ADD damps a deformable body with the dissipation potential
D = V η |Ė|², Ė = ½ (ḞᵀF + FᵀḞ), the rate of the Green strain, which is zero for every rigid
motion. Their claim: such a body, spinning in free flight, keeps its angular momentum while
its internal elastic oscillations decay; the naive damper D = V η |sym(Ḟ)|² (the small-strain
rate) is not rotation invariant (for F = R turning at Ω, sym(Ω R) ≠ 0 once R ≠ I) and so
also damps the spin itself. The paper shows this qualitatively; it gives no numbers.

Setup (ours): a 0.12 x 0.1 x 0.1 m block (`box_tets`, 4 x 3 x 3 cells, 216 tetrahedra,
80 vertices), Neo-Hookean, E = 1 kPa, ν = 0.3, ρ = 1000 kg/m³, no gravity, no contact.
It starts stretched 10 % along x and spinning rigidly at ω = 3 rad/s about z (the axis of
its largest moment of inertia, so the spin is stable). dt = 2 ms (elastic periods of ~0.25 s
span ~100 steps, so implicit Euler's own damping is slow), 2 s (1000 steps), float64, Newton.
Three runs, one compiled program (η values are parameter leaves):
  - η = 0 (elastic only; implicit Euler's numerical damping is all there is),
  - the built-in viscosity η = 5 Pa s on the Green strain rate (`add_solid(viscosity=)`),
  - the naive damper D = V η |sym(Ḟ)|², η = 5 Pa s, as a user dissipation term
    (`scene.add_energy(..., dissipation=True)`, one element per tetrahedron).
And η = 0 once more at dt / 4 (the same program called 4 times), to show that what L_z
the elastic run loses is implicit Euler's own damping (first order in dt).
Measured: angular momentum about the centre of mass L_z(t) (kept fraction at the end),
strain energy Σ V ψ(F) (`jc.observe.strain_energy`) and its oscillation about the spinning
equilibrium.

Run from the repository root:
    python -m experiments.spinning_viscous_body [--quick]
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
from jaxcontact.models.elasticity import deformation_gradient  # noqa: E402

NAME = "spinning_viscous_body"
SIZE, DIVISIONS = (0.12, 0.1, 0.1), (4, 3, 3)
DENSITY, YOUNGS, POISSON = 1000.0, 1e3, 0.3
ETA = 5.0                       # Pa s, for both dampers
OMEGA = 3.0                     # rad/s about z
STRETCH = 1.10                  # initial stretch along x
DT, STEPS = 0.002, 1000


def naive_damper(local, prm):
    """D = V η |sym(Ḟ)|² (W) of one tetrahedron, Ḟ = [v1 − v0, v2 − v0, v3 − v0] D_m⁻¹."""
    rate = deformation_gradient(local.particle_vel, prm["rest_inverse"])
    sym = 0.5 * (rate + rate.T)
    return prm["volume"] * prm["eta"] * jnp.sum(sym * sym)


def build():
    verts, tets = jc.meshes.box_tets(SIZE, DIVISIONS)

    def scene_with(extra):
        scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
        p = scene.add_solid(verts, tets, density=DENSITY, youngs_modulus=YOUNGS,
                            poisson_ratio=POISSON, viscosity=0.0)
        if extra is not None:
            scene.add_energy(naive_damper, particles=p[tets], params=extra, dissipation=True)
        return scene

    # a first build for the tetrahedra's D_m⁻¹ and V, the parameters of the naive damper
    bare, _ = scene_with(None).build()
    params = {"rest_inverse": bare.solid.rest_inverse, "volume": bare.solid.volume,
              "eta": jnp.zeros(len(tets))}
    return scene_with(params).build()


def initial_state(state):
    """The block stretched along x about its centre, spinning rigidly at OMEGA about z."""
    pos = state.particle_pos * jnp.array([[STRETCH, 1.0, 1.0]])
    omega = jnp.array([0.0, 0.0, OMEGA])
    vel = jnp.cross(jnp.broadcast_to(omega, pos.shape), pos)
    return state.replace(particle_pos=pos, particle_vel=vel)


def with_damping(model, builtin, naive):
    solid = model.solid.replace(viscosity=jnp.full_like(model.solid.viscosity, builtin))
    term = dict(model.energy[0], eta=jnp.full_like(model.energy[0]["eta"], naive))
    return model.replace(solid=solid, energy=(term,))


def angular_momentum(model, pos, vel):
    """L (…, 3) about the centre of mass, kg m²/s."""
    m = model.particle_masses[:, None]
    centre = jnp.sum(m * pos, -2, keepdims=True) / jnp.sum(m)
    return jnp.sum(m * jnp.cross(pos - centre, vel), -2)


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    _common.use_compile_cache()
    steps = 250 if args.quick else STEPS
    model, state = build()
    start = initial_state(state)
    log(f"{model.solid.size} tetrahedra, {model.n_particle} vertices, mass "
        f"{float(jnp.sum(model.particle_masses)):.3f} kg")
    run = jc.jit(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True))
    observe = jc.jit(jax.vmap(lambda m, p, v: (angular_momentum(m, p, v),
                                                 jc.observe.strain_energy(
                                                     m, start.replace(particle_pos=p))),
                               in_axes=(None, 0, 0)))
    cases = {"elastic": ("eta = 0", 0.0, 0.0),
             "green": (f"Green strain rate (built-in), eta = {ETA:g}", ETA, 0.0),
             "naive": (f"naive sym(F dot) damper, eta = {ETA:g}", 0.0, ETA)}
    rows, curves = {}, {}
    L0 = float(angular_momentum(model, start.particle_pos, start.particle_vel)[2])
    E0 = float(jc.observe.strain_energy(model, start))
    for key, (label, builtin, naive) in cases.items():
        m = with_damping(model, builtin, naive)
        t = time.perf_counter()
        _, traj, info = run(m, start)
        jax.block_until_ready(traj)
        seconds = time.perf_counter() - t
        pos = jnp.concatenate([start.particle_pos[None], traj.particle_pos])
        vel = jnp.concatenate([start.particle_vel[None], traj.particle_vel])
        L, energy = (np.asarray(a) for a in observe(m, pos, vel))
        Lz = L[:, 2]
        last = len(Lz) // 5                      # the last fifth of the run
        tail = energy[-last:]
        rows[key] = {
            "label": label, "eta_builtin": builtin, "eta_naive": naive,
            "angular_momentum_kept": Lz[-1] / L0,
            "angular_momentum_kept_at_half": Lz[len(Lz) // 2] / L0,
            "spin_rate_end_estimate": OMEGA * Lz[-1] / L0,
            "strain_energy_start": E0, "strain_energy_end": float(energy[-1]),
            "strain_energy_end_ratio": float(energy[-1]) / E0,
            "strain_energy_tail_mean": float(tail.mean()),
            "strain_energy_tail_oscillation": float(tail.max() - tail.min()),
            "converged_fraction": float(np.mean(np.asarray(info.converged))),
            "mean_iterations": float(np.mean(np.asarray(info.iterations))),
            "seconds": seconds}
        curves[key] = (Lz / L0, energy)
        r = rows[key]
        log(f"{label}: L_z kept {r['angular_momentum_kept']:.4f} (at T/2 "
            f"{r['angular_momentum_kept_at_half']:.4f}), strain energy {E0:.3e} -> "
            f"{r['strain_energy_end']:.3e} J (last fifth: mean {r['strain_energy_tail_mean']:.3e}, "
            f"peak-to-peak {r['strain_energy_tail_oscillation']:.2e}), converged "
            f"{r['converged_fraction']:.3f}, {seconds:.1f} s")
    if not args.quick:
        # implicit Euler's own loss of angular momentum: the η = 0 run again at dt / 4 (the
        # same compiled rollout, called 4 times)
        m = with_damping(model, 0.0, 0.0).replace(dt=model.dt / 4)
        s, t, ok = start, time.perf_counter(), []
        for _ in range(4):
            s, _, info = run(m, s)
            ok.append(np.asarray(info.converged))
        Lz = float(angular_momentum(m, s.particle_pos, s.particle_vel)[2])
        rows["elastic_dt_over_4"] = {"label": "eta = 0, dt / 4", "dt": DT / 4,
                                     "angular_momentum_kept": Lz / L0,
                                     "converged_fraction": float(np.mean(ok)),
                                     "seconds": time.perf_counter() - t}
        log(f"eta = 0 at dt / 4: L_z kept {Lz / L0:.4f}")
    green, elastic, naive = rows["green"], rows["elastic"], rows["naive"]
    claims = {
        "green_keeps_spin": {
            "paper": "viscosity on the Green strain rate does not damp rigid rotation",
            "here": f"L_z kept {green['angular_momentum_kept']:.4f} vs "
                    f"{elastic['angular_momentum_kept']:.4f} with eta = 0",
            "agrees_with_paper": bool(abs(green["angular_momentum_kept"]
                                          - elastic["angular_momentum_kept"]) < 0.02)},
        "green_damps_oscillation": {
            "paper": "internal elastic oscillations decay",
            "here": f"strain-energy peak-to-peak over the last fifth "
                    f"{green['strain_energy_tail_oscillation']:.2e} J vs "
                    f"{elastic['strain_energy_tail_oscillation']:.2e} J with eta = 0 "
                    f"(start {E0:.2e} J)",
            "agrees_with_paper": bool(green["strain_energy_tail_oscillation"]
                                      < 0.1 * elastic["strain_energy_tail_oscillation"])},
        "naive_damps_spin": {
            "paper": "a damper on sym(F dot) is not rotation invariant and damps the spin",
            "here": f"L_z kept {naive['angular_momentum_kept']:.4f}",
            "agrees_with_paper": bool(naive["angular_momentum_kept"]
                                      < 0.5 * elastic["angular_momentum_kept"])},
    }
    result = {
        "setup": {"size": SIZE, "divisions": DIVISIONS, "tetrahedra": int(model.solid.size),
                  "vertices": int(model.n_particle), "density": DENSITY,
                  "youngs_modulus": YOUNGS, "poisson_ratio": POISSON, "material": "neo_hookean",
                  "eta": ETA, "omega": OMEGA, "stretch_x": STRETCH, "dt": DT, "steps": steps,
                  "solver": "Newton (defaults)", "quick": args.quick},
        "paper": "qualitative (Sec. 5.1, Eq. 19): spin kept with Green-strain-rate viscosity, "
                 "oscillations decay; no numbers",
        "angular_momentum_start": L0, "strain_energy_start": E0,
        "runs": rows, "claims": claims,
    }
    save(NAME, result, figure(curves, steps), args.out_dir)


def figure(curves, steps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = DT * np.arange(steps + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    labels = {"elastic": "η = 0", "green": f"Green strain rate, η = {ETA:g} (ADD Eq. 19)",
              "naive": f"naive sym(Ḟ) damper, η = {ETA:g}"}
    for key, (L, energy) in curves.items():
        a.plot(t, L, label=labels[key])
        b.semilogy(t, np.maximum(energy, 1e-12), label=labels[key])
    a.set_xlabel("time (s)")
    a.set_ylabel("L_z / L_z(0) about the centre of mass")
    a.legend(fontsize=8)
    b.set_xlabel("time (s)")
    b.set_ylabel("strain energy (J)")
    b.legend(fontsize=8)
    finish_figure(fig, [a, b], "ADD Sec. 5.1: a spinning, stretched block in free flight")
    return fig


if __name__ == "__main__":
    main()
