"""Is the step itself stable for a capsule spinning about its own axis on the ground?

The convergence grid's worst float32 cells (`benchmarks/convergence.py`) were capsules lying
on their side that slide and spin up under friction at dt = 1e-2 (design note 41). In float64
the same rollouts converged, but their transverse angular velocity (ω_x, ω_z, zero in exact
arithmetic) grew about 4.6x per step once the spin passed ~15 rad/s, until the capsule rolled.
In float32, rounding seeded that growth at 1e-7 rather than 1e-14 and the solver met
tumbling states it could not solve. The cause was the contact damper, which read n̄·v_rel
with the lever at the end of the step; it now reads the gap's rate over the step, and this
experiment measures what is left. It isolates the growth from friction and from the
solver's tolerance.

Setup: a capsule (radius 3 cm, half length 5 cm, 1 kg, its axis along y), lying on a
frictionless plane (contact stiffness 1e5 N/m), spinning about its axis
at W rad/s, with a transverse perturbation of 1e-12 rad/s on ω_x and ω_z; no sliding. For
dt in {1e-3, 3e-3, 1e-2} and W in {5, 10, 20, 36, 50} rad/s, float64, `scene.build()`'s
default Newton (one compiled program per dt, the spins batched): the growth per step of
|(ω_x, ω_z)|: the least-squares slope of its logarithm over the last 4/5 of 0.25 s (about
one precession period at 36 rad/s), as a rate (1/s) and per step. Critically damped contact
and undamped contact. The spin is about the axis of least inertia (0.0004 against 0.0019
kg m²), which energy dissipation makes unstable even in continuous time (the major-axis
rule), so only the part of the rate that grows with dt is the discretization's.

Run from the repository root:
    python -m experiments.spinning_capsule_stability [--quick]
"""

from __future__ import annotations



import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from experiments import _common  # noqa: E402
import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "spinning_capsule_stability"
RADIUS, HALF_LENGTH, MASS = 0.03, 0.05, 1.0
STIFFNESS = 1e5
DTS = (1e-3, 3e-3, 1e-2)
SPINS = (5.0, 10.0, 20.0, 36.0, 50.0)
PERTURBATION = 1e-12
HORIZON = 0.25   # s: about the precession period of the transverse spin at 36 rad/s
DAMPING_RATIOS = (1.0, 0.0)


def growth_per_step(dt, spins, horizon, damping_ratio=1.0):
    """Per spin: the growth rate (1/s) and per step of the transverse spin's magnitude from
    a fifth of the horizon to its end (a geometric mean over more than one precession
    period, whose ellipse alone would make |δω| swing), and the converged fraction."""
    steps = int(round(horizon / dt))
    first = steps // 5
    scene = jc.Scene(dt=dt)
    damping = damping_ratio * 2.0 * np.sqrt(STIFFNESS * MASS)
    scene.add_plane(friction=0.0, stiffness=STIFFNESS, damping=damping)
    lying = (np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0)   # the axis along y
    scene.add_capsule(RADIUS, HALF_LENGTH, MASS, pos=(0.0, 0.0, RADIUS), quat=lying,
                      friction=0.0, stiffness=STIFFNESS, damping=damping)
    model, state = scene.build(dtype=jnp.float64)

    @jc.jit
    def run(spin):
        w = jnp.stack([PERTURBATION, spin, PERTURBATION])[None, :]
        _, traj, info = jc.rollout(model, state.replace(ang_vel=w), steps=steps,
                                   return_info=True)
        return traj.ang_vel[:, 0], info.converged

    rows = []
    for spin in spins:
        ang_vel, converged = map(np.asarray, run(jnp.float64(spin)))
        transverse = np.linalg.norm(ang_vel[:, [0, 2]], axis=1)
        # the slope of log |δω| over the window, least squares
        times = dt * np.arange(first, steps)
        rate = np.polyfit(times, np.log(transverse[first:]), 1)[0]
        growth = np.exp(rate * dt)
        rows.append({"dt": dt, "damping_ratio": damping_ratio, "spin": spin,
                     "spin_dt": spin * dt, "rate_per_s": float(rate), "growth": float(growth),
                     "transverse_end": float(transverse[-1]),
                     "converged": float(converged.mean())})
        log(f"ζ={damping_ratio:g} dt={dt:g} W={spin:g} (W dt={spin * dt:.3f}): "
            f"rate {rate:.1f}/s, {growth:.3f}/step, |δω| {transverse[first]:.2e} -> "
            f"{transverse[-1]:.2e}, converged {converged.mean():.3f}")
    return rows


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    _common.use_compile_cache()
    horizon = HORIZON / 5 if args.quick else HORIZON
    rows = [r for zeta in DAMPING_RATIOS for dt in DTS
            for r in growth_per_step(dt, SPINS, horizon, zeta)]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, zeta in zip(axes, DAMPING_RATIOS):
        for dt in DTS:
            mine = [r for r in rows if r["dt"] == dt and r["damping_ratio"] == zeta]
            ax.plot([r["spin"] for r in mine], [r["rate_per_s"] for r in mine], "o-",
                    label=f"dt = {dt:g} s")
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xlabel("spin about the axis (rad/s)")
        ax.set_title(f"contact damping ratio {zeta:g}", fontsize=9)
        ax.legend()
    axes[0].set_ylabel("growth rate of the transverse spin (1/s)")
    finish_figure(fig, axes, "A capsule spinning about its axis on a frictionless plane")
    worst = max(rows, key=lambda r: r["growth"])
    save(NAME, {"setup": {"radius": RADIUS, "half_length": HALF_LENGTH, "mass": MASS,
                          "stiffness": STIFFNESS, "perturbation": PERTURBATION,
                          "horizon_s": horizon},
                "rows": rows, "worst": worst}, fig, args.out_dir)


if __name__ == "__main__":
    main()
