"""Thesis Sec. 7 (Fig. 17), material extension: co-rotational linear elasticity against
Stable Neo-Hookean (thesis Eq. 158) under large stretch, E = 1e5 Pa, ν = 0.45. The thesis
shows "high volume loss for the linear model"; Stable Neo-Hookean keeps the volume.

Two setups (ours; the thesis gives no sizes):
- **Roller ends** (uniform stretch): 0.2 x 0.1 x 0.1 m bars (`box_tets`, 2 x 1 x 1 cells),
  their end vertices held at x = λ X by a stiff user energy on x only (1e10 N/m), free
  sideways, so F = diag(λ, s, s) exactly. λ from 1.1 to 2, ν = 0.3, 0.45, 0.49, three
  materials (`stable_neo_hookean`, ADD's `neo_hookean`, `corotational`). The simulated
  lateral stretch s is compared with each energy's closed form (derived by hand):
    corotational        s = 1 − ν (λ − 1), so J = λ s² falls below 1 once λ − 1 ~ 1 − 2ν;
    stable Neo-Hookean  J = 1 + μ/λ' (1 − 1/λ), λ' = λ_L + μ: 1 + O(1 − 2ν) at any λ;
    Neo-Hookean         μ (s² − 1) + λ_L log J = 0.
- **Clamped ends** (the thesis' picture): a 0.4 x 0.1 x 0.1 m bar, 8 x 2 x 2 cells (192
  tetrahedra), both end faces tied to world points (1e10 N/m) and pulled to λ = 1.5, ν =
  0.45: the volume ratio J of every tetrahedron, and of the whole bar.

Each case is one implicit step of dt = 1 s from the uniformly stretched bar (its lateral
dynamics are 100x faster, so the step lands on the static equilibrium), Newton, float64.

Run from the repository root:
    python -m experiments.thesis_material_extension [--quick]
(writes docs/experiments/thesis_material_extension.{json,png}).
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save, use_compile_cache  # noqa: E402
from jaxcontact.models import elasticity  # noqa: E402

NAME = "thesis_material_extension"
E = 1e5
DENSITY = 1000.0
MATERIALS = ("stable_neo_hookean", "neo_hookean", "corotational")
NUS = (0.3, 0.45, 0.49)
STRETCHES = (1.1, 1.25, 1.5, 1.75, 2.0)
HOLD = 1e10                     # N/m, the rollers and the clamps
DT = 1.0


def closed_lateral(material, nu, stretch):
    """s of F = diag(λ, s, s) with zero lateral stress (module docstring)."""
    mu, lam = elasticity.lame(E, nu)
    if material == "corotational":
        return 1 - nu * (stretch - 1)
    if material == "stable_neo_hookean":
        return float(np.sqrt((1 + mu / (lam + mu) * (1 - 1 / stretch)) / stretch))
    return brentq(lambda s: mu * (s * s - 1) + lam * np.log(stretch * s * s), 0.2, 1.2)


def rollers(quick):
    """The roller-end sweep: one scene of a bar per (ν, material), one compiled step."""
    verts, tets = jc.meshes.box_tets((0.2, 0.1, 0.1), (2, 1, 1))
    ends = np.isclose(np.abs(verts[:, 0]), 0.1)
    nus = NUS[1:] if quick else NUS
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
    cases, held = [], []
    for k, nu in enumerate(nus):
        for j, material in enumerate(MATERIALS):
            index = scene.add_solid(verts, tets, density=DENSITY, youngs_modulus=E,
                                    poisson_ratio=nu, material=material,
                                    pos=(0.0, 0.3 * j, 0.3 * k))
            cases.append((nu, material, index))
            held.append(index[ends])
    held = np.concatenate(held)
    rest_x = np.tile(verts[ends, 0], len(cases))
    scene.add_energy(lambda local, p: 0.5 * HOLD * (local.particle_pos[0, 0] - p["x"]) ** 2,
                     particles=held[:, None], params={"x": rest_x})
    model, state = scene.build(solver=jc.Newton(iterations=30))
    step = jc.jit(lambda m, s: jc.rollout(m, s, steps=1, return_info=True))
    rows = []
    for stretch in (STRETCHES[::2] if quick else STRETCHES):
        m = model.replace(energy=({"x": jnp.asarray(stretch * rest_x)},))
        start = state.replace(particle_pos=state.particle_pos.at[:, 0].multiply(stretch))
        t = time.perf_counter()
        final, _, info = jax.block_until_ready(step(m, start))
        seconds = time.perf_counter() - t
        for nu, material, index in cases:
            x = np.asarray(final.particle_pos[index])
            axial = float(np.ptp(x[:, 0]) / 0.2)
            lateral = float(np.mean(np.ptp(x[:, 1:], axis=0)) / 0.1)
            s = closed_lateral(material, nu, axial)
            rows.append({"stretch": stretch, "nu": nu, "material": material,
                         "axial": axial, "lateral": lateral, "lateral_closed": s,
                         "volume_ratio": axial * lateral ** 2,
                         "volume_ratio_closed": axial * s * s,
                         "lateral_rel_error": lateral / s - 1,
                         "converged": bool(info.converged.all()),
                         "residual_m_s": float(info.residual[0]),
                         "newton_iterations": int(info.iterations[0]),
                         "seconds": seconds})
        log(f"λ = {stretch}: " + ", ".join(
            f"{r['material'][:6]} ν={r['nu']} J={r['volume_ratio']:.4f} "
            f"({r['lateral_rel_error']:+.1e})" for r in rows[-len(cases):]))
    return rows


def clamped(quick):
    """The clamped bar at λ = 1.5, ν = 0.45: per-tetrahedron J, Stable Neo-Hookean against
    co-rotational."""
    stretch, nu = 1.5, 0.45
    cells = (4, 1, 1) if quick else (8, 2, 2)
    verts, tets = jc.meshes.box_tets((0.4, 0.1, 0.1), cells)
    ends = np.isclose(np.abs(verts[:, 0]), 0.2)
    out = {}
    for material in ("stable_neo_hookean", "corotational"):
        scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
        index = scene.add_solid(verts, tets, density=DENSITY, youngs_modulus=E,
                                poisson_ratio=nu, material=material)
        for p in index[ends]:
            anchor = verts[p - index[0]] * np.array([stretch, 1.0, 1.0])
            scene.attach(int(p), -1, anchor, stiffness=HOLD)
        model, state = scene.build(solver=jc.Newton(iterations=30))
        start = state.replace(particle_pos=state.particle_pos.at[:, 0].multiply(stretch))
        final, _, info = jc.jit(lambda s: jc.rollout(model, s, steps=1,
                                                      return_info=True))(start)
        x = np.asarray(final.particle_pos)
        volumes = jc.meshes.tet_volumes(x, tets) / jc.meshes.tet_volumes(verts, tets)
        out[material] = {"converged": bool(info.converged.all()),
                         "residual_m_s": float(info.residual[0]),
                         "volume_ratio_total": float(np.sum(jc.meshes.tet_volumes(x, tets))
                                                     / np.sum(jc.meshes.tet_volumes(verts,
                                                                                    tets))),
                         "tet_volume_ratio_min": float(volumes.min()),
                         "tet_volume_ratio_max": float(volumes.max()),
                         "tet_volume_ratio": volumes.tolist(),
                         "centroids": x[tets].mean(1).tolist(),
                         "waist": float(np.ptp(x[np.isclose(verts[:, 0], 0.0), 1]) / 0.1)}
        log(f"clamped {material}: total J {out[material]['volume_ratio_total']:.4f}, "
            f"per tet [{volumes.min():.3f}, {volumes.max():.3f}], mid-width "
            f"{out[material]['waist']:.4f}, converged {out[material]['converged']}")
    return {"stretch": stretch, "nu": nu, "cells": cells, "tetrahedra": len(tets), **out}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    use_compile_cache()
    t0 = time.perf_counter()
    sweep = rollers(args.quick)
    bar = clamped(args.quick)
    worst = max(abs(r["lateral_rel_error"]) for r in sweep)
    at = {(r["nu"], r["material"]): r["volume_ratio"] for r in sweep if r["stretch"] == 1.5}
    result = {
        "setup": {"youngs_modulus": E, "density": DENSITY, "nus": NUS, "stretches": STRETCHES,
                  "hold_N_m": HOLD, "dt": DT, "quick": args.quick},
        "paper": {"claim": "linear co-rotational: high volume loss; Stable Neo-Hookean "
                           "preserves volume (E = 1e5 Pa, nu = 0.45)", "figure": 17},
        "rollers": sweep,
        "clamped": bar,
        "checks": {"lateral_matches_closed_form_max_rel_error": worst,
                   "all_converged": all(r["converged"] for r in sweep)
                   and bar["stable_neo_hookean"]["converged"]
                   and bar["corotational"]["converged"],
                   "volume_at_1_5": {f"{m} nu={nu}": j for (nu, m), j in at.items()}},
        "runtime_s": round(time.perf_counter() - t0, 1),
    }
    save(NAME, result, figure(sweep, bar), args.out_dir)


def figure(sweep, bar):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 7.5))
    a = fig.add_subplot(2, 2, (1, 3))
    colors = {"stable_neo_hookean": "C3", "neo_hookean": "C0", "corotational": "k"}
    styles = {0.3: ":", 0.45: "-", 0.49: "--"}
    grid = np.linspace(1.0, 2.0, 101)
    for (nu, material) in sorted({(r["nu"], r["material"]) for r in sweep}):
        pts = [r for r in sweep if r["nu"] == nu and r["material"] == material]
        closed = [g * closed_lateral(material, nu, g) ** 2 for g in grid]
        a.plot(grid, closed, styles[nu], color=colors[material], lw=1.2,
               label=f"{material}, ν = {nu}")
        a.plot([r["axial"] for r in pts], [r["volume_ratio"] for r in pts], "o",
               color=colors[material], ms=4)
    a.axhline(1.0, color="0.6", lw=0.8)
    a.set_xlabel("stretch λ")
    a.set_ylabel("volume ratio J = λ s²")
    a.set_title("roller ends (uniform F): lines closed form, dots simulated", fontsize=9)
    a.legend(fontsize=7, ncol=1)
    vmin = min(bar[m]["tet_volume_ratio_min"] for m in ("stable_neo_hookean", "corotational"))
    vmax = max(bar[m]["tet_volume_ratio_max"] for m in ("stable_neo_hookean", "corotational"))
    axes = [a]
    for row, material in enumerate(("stable_neo_hookean", "corotational")):
        b = fig.add_subplot(2, 2, 2 * row + 2)
        c = np.asarray(bar[material]["centroids"])
        sc = b.scatter(c[:, 0], c[:, 1], c=bar[material]["tet_volume_ratio"], cmap="coolwarm",
                       vmin=vmin, vmax=vmax, s=18)
        b.set_aspect("equal")
        b.set_title(f"clamped, λ = {bar['stretch']}, ν = {bar['nu']}: {material}, total J = "
                    f"{bar[material]['volume_ratio_total']:.3f}", fontsize=9)
        b.set_xlabel("x (m)")
        b.set_ylabel("y (m), tetrahedron centroids")
        fig.colorbar(sc, ax=b, label="J per tetrahedron")
        axes.append(b)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return finish_figure(fig, axes, "Thesis Fig. 17: material extension, E = 1e5 Pa")


if __name__ == "__main__":
    main()
