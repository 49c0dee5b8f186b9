"""ADD E2 (Geilinger et al. 2020, Fig. 3): the objective landscape of a ball toss over the
initial forward and upward velocity (v_x, v_z), with a fixed spin, at contact stiffness
k_n = 100 and k_n = 1000.

ADD samples the objective and its gradient on a regular grid and finds two local minima (one
and two bounces before the target time), wiggly isolines and incoherent gradients where the
order in which the FEM ball's nodes hit the ground changes, and a smoother landscape for the
softer contact with the same minima, shifted slightly (no numbers are given; grid, ranges
and the hybrid model's stiffness are not stated).

Here the ball is rigid but polyhedral: the convex hull of 42 points on a sphere of radius
0.1 m (density 150 kg/m³, ADD's), whose 42 vertices are its contact points, like ADD's
surface nodes. c_f = 0.4, damping for restitution 0.7 at k_n = 1000 (E8's), dt = 10 ms, 0.8 s
(80 steps: the ball is in the air at the end), float64, spin ω = (0, -6, 0) rad/s (back-spin about y, the throw goes +x). The
target is where a reference throw v = (1.6, 0, 2.4) m/s ends at k_n = 1000. Φ = |x_com(T) −
target|². Each grid point's Φ and ∂Φ/∂(v_x, v_z) come from one rollout and its implicit
adjoint (`jax.value_and_grad`, vmapped).

Measured per stiffness: the three lowest local minima of the grid (each polished by 30 L-BFGS
iterations, with
their bounce counts), and the landscape's roughness as the mean angle between the exact
gradient and the gradient of a smooth quadratic fit through each 3×3 grid neighbourhood
(incoherent gradients give large angles).

Run from the repository root:
    python -m experiments.add_e2_landscape [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import count_bounces, finish_figure, log, parser, save  # noqa: E402

NAME = "add_e2_landscape"
DT, STEPS = 0.01, 80
RADIUS, DENSITY, FRICTION, RESTITUTION = 0.1, 150.0, 0.4, 0.7
STIFFNESSES = (100.0, 1000.0)
SPIN = (0.0, -6.0, 0.0)
REFERENCE = (1.6, 2.4)                 # (v_x, v_z) of the throw that defines the target
VX, VZ = (0.2, 3.4), (0.4, 4.4)        # the grid's ranges, m/s


def sphere_points(n, radius):
    """n nearly uniform points on a sphere (a Fibonacci lattice)."""
    k = np.arange(n) + 0.5
    z = 1.0 - 2.0 * k / n
    phi = np.pi * (1.0 + 5.0 ** 0.5) * k
    r = np.sqrt(1.0 - z * z)
    return radius * np.c_[r * np.cos(phi), r * np.sin(phi), z]


def build(stiffness):
    """The polyhedral ball above the floor; damping gives restitution 0.7 at k_n = 1000."""
    points = sphere_points(42, RADIUS)
    probe = jc.Scene(dt=DT)
    probe.add_mesh(points, density=DENSITY)
    mass = float(probe.build()[0].body.mass[0])
    damping = float(jc.restitution_to_damping(RESTITUTION, 1000.0, mass))
    scene = jc.Scene(dt=DT, friction=FRICTION, stiffness=stiffness, damping=damping)
    scene.add_plane()
    scene.add_mesh(points, density=DENSITY, pos=(0.0, 0.0, RADIUS + 0.3), ang_vel=SPIN)
    return scene.build(), mass


def bounces(path):
    """Impacts: the c.o.m. coming within 5 mm of the circumscribed radius from above."""
    return count_bounces(path, RADIUS + 5e-3)


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 15 if args.quick else 41
    vx, vz = np.linspace(*VX, n), np.linspace(*VZ, n)
    grid = np.stack(np.meshgrid(vx, vz, indexing="xy"), -1).reshape(-1, 2)
    panels, result_panels = [], {}
    (model_ref, state), mass = build(1000.0)

    def throw(model, v):
        s = state.replace(vel=jnp.stack([v[0], 0.0 * v[0], v[1]])[None, :])
        final, traj = jc.rollout(model, s, steps=STEPS)
        return final.pos[0], traj.pos[:, 0, 2]

    target = jc.jit(throw)(model_ref, jnp.asarray(REFERENCE))[0]

    def loss(v, model):
        return jnp.sum((throw(model, v)[0] - target) ** 2)

    value_and_grad = jc.jit(jax.vmap(jax.value_and_grad(loss), in_axes=(0, None)))
    path_of = jc.jit(lambda v, model: throw(model, v)[1])
    for k in STIFFNESSES:
        model = build(k)[0][0]
        t = time.perf_counter()
        chunks = [value_and_grad(jnp.asarray(c), model)
                  for c in np.array_split(grid, max(1, len(grid) // 512))]
        phi = np.concatenate([np.asarray(c[0]) for c in chunks]).reshape(n, n)
        grad = np.concatenate([np.asarray(c[1]) for c in chunks]).reshape(n, n, 2)
        seconds = time.perf_counter() - t
        log(f"k_n = {k:g}: {n}x{n} grid in {seconds:.1f} s")
        minima = sorted(grid_minima(phi), key=lambda ij: phi[ij])[:3]   # the 3 lowest
        polished = []
        for i, j in minima:
            start = jnp.asarray([vx[j], vz[i]])
            found = jc.optim.lbfgs(loss, start, args=(model,), max_iterations=30, rtol=1e-14)
            path = np.asarray(path_of(found.x, model))
            polished.append({"grid": [float(vx[j]), float(vz[i])], "grid_phi": float(phi[i, j]),
                             "v": np.asarray(found.x).tolist(), "phi": found.value,
                             "bounces": bounces(path),
                             "simulations": found.simulations, "status": found.status})
        for m in polished:
            log(f"  minimum at v = {np.round(m['v'], 4)} (grid {np.round(m['grid'], 3)}): "
                f"Φ = {m['phi']:.2e}, {m['bounces']} bounces")
        roughness = gradient_roughness(phi, grad, vx[1] - vx[0], vz[1] - vz[0])
        log(f"  gradient vs local quadratic fit: median angle {roughness['median_deg']:.1f}°, "
            f"{roughness['over_45_deg']:.1%} over 45°")
        panels.append((k, phi, grad))
        result_panels[f"{k:g}"] = {"grid_seconds": seconds, "minima": polished,
                                   "roughness": roughness,
                                   "phi_min_grid": float(phi.min()),
                                   "phi_median_grid": float(np.median(phi))}
    result = {
        "setup": {"dt": DT, "steps": STEPS, "radius": RADIUS, "density": DENSITY,
                  "mass": mass, "contact_points": 42, "friction": FRICTION,
                  "restitution_at_1000": RESTITUTION, "spin": SPIN,
                  "reference_v": REFERENCE, "target": np.asarray(target).tolist(),
                  "grid": {"vx": VX, "vz": VZ, "n": n}, "quick": args.quick},
        "paper": {"minima": "two (one- and two-bounce), same at both stiffnesses, shifted "
                            "slightly", "stiffer": "wigglier isolines, incoherent gradients",
                  "numbers": "none given"},
        "panels": result_panels,
    }
    save(NAME, result, figure(panels, vx, vz, result_panels), args.out_dir)


def grid_minima(phi):
    """Interior grid points lower than their 8 neighbours."""
    found = []
    for i in range(1, phi.shape[0] - 1):
        for j in range(1, phi.shape[1] - 1):
            patch = phi[i - 1:i + 2, j - 1:j + 2]
            if phi[i, j] == patch.min() and np.sum(patch == phi[i, j]) == 1:
                found.append((i, j))
    return found


def gradient_roughness(phi, grad, hx, hz):
    """Angle between the exact gradient and the gradient of a least-squares quadratic fit
    through each interior 3x3 neighbourhood of grid values: a coherent landscape has angles
    near 0, contact-order switches give large ones."""
    offsets = np.array([(a, b) for b in (-1, 0, 1) for a in (-1, 0, 1)], float)
    basis = np.c_[np.ones(9), offsets[:, 0], offsets[:, 1], offsets[:, 0] ** 2,
                  offsets[:, 0] * offsets[:, 1], offsets[:, 1] ** 2]
    pinv = np.linalg.pinv(basis)
    angles = []
    for i in range(1, phi.shape[0] - 1):
        for j in range(1, phi.shape[1] - 1):
            c = pinv @ phi[i - 1:i + 2, j - 1:j + 2].reshape(-1)
            fit = np.array([c[1] / hx, c[2] / hz])
            g = grad[i, j]
            denominator = np.linalg.norm(fit) * np.linalg.norm(g)
            if denominator > 0:
                angles.append(np.degrees(np.arccos(np.clip(fit @ g / denominator, -1, 1))))
    angles = np.asarray(angles)
    return {"median_deg": float(np.median(angles)), "mean_deg": float(np.mean(angles)),
            "over_45_deg": float(np.mean(angles > 45.0)), "points": int(angles.size)}


def figure(panels, vx, vz, result_panels):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4))
    step = max(1, len(vx) // 20)
    for ax, (k, phi, grad) in zip(axes, panels):
        image = ax.contourf(vx, vz, np.log10(phi + 1e-12), levels=30, cmap="viridis")
        ax.contour(vx, vz, np.log10(phi + 1e-12), levels=15, colors="w", linewidths=0.4)
        g = -grad / (np.linalg.norm(grad, axis=-1, keepdims=True) + 1e-30)
        ax.quiver(vx[::step], vz[::step], g[::step, ::step, 0], g[::step, ::step, 1],
                  color="k", scale=30, width=0.003)
        for m in result_panels[f"{k:g}"]["minima"]:
            ax.plot(*m["v"], "r*", ms=11)
            ax.annotate(f"{m['bounces']} b.", m["v"], color="r", xytext=(4, 4),
                        textcoords="offset points")
        ax.set_title(f"k_n = {k:g} N/m: log10 Φ, −∇Φ directions")
        ax.set_xlabel("v_x (m/s)")
        ax.set_ylabel("v_z (m/s)")
        fig.colorbar(image, ax=ax)
    finish_figure(fig, axes, "ADD E2: ball-toss landscape over the initial velocity "
                             "(polyhedral rigid ball, 42 contact points, fixed back-spin)")
    return fig


if __name__ == "__main__":
    main()
