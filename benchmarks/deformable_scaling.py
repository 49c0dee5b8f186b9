"""Cost of deformables against their element count (issue 16, point 5): FEM solids and cloth
from about 1,000 to 10,000 elements, forward steps and implicit gradients, float64, CPU.

Solids: a slab of Kuhn tetrahedra (`jc.meshes.box_tets`, cells of 2 cm, so the slab grows
with the count) standing on a plane, released squeezed by 5 % in height: E = 1e5 Pa, ν = 0.3, ρ = 1000 kg/m³, η = 1 Pa s,
stable Neo-Hookean, dt = 2 ms, `jc.Contact(normal="power")` (with the default linear law
Newton converges on 40 % of these steps: design note 28). Cloth: a square sheet of `jc.meshes.grid` (2 cm squares),
pinned at its four corners, sagging under gravity: k = 1e3 N/m, D = 1e-4 N m, ρ_A = 0.2
kg/m², c = 0.05 N s/m, dt = 5 ms. Default solver settings (Newton, block-sparse Jacobian,
BiCGSTAB preconditioned by block-Jacobi, or by the multilevel V-cycle for cloth of 1,000
particles or more; implicit gradients by the Krylov adjoint); `--preconditioner` forces one.

For each size: compile times, the best wall time of a `steps`-step rollout and of the reverse
gradient of a scalar of its final state with respect to E (solids) or k (cloth), per step;
the converged fraction and mean Newton iterations; then the log-log slope of time against
element count (1 = linear).

Usage:
    python -m benchmarks.deformable_scaling [--quick] [--steps 10] [--kind solid|cloth|both]
        [--preconditioner auto|block_jacobi|multilevel]
"""

from __future__ import annotations

import argparse

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402

from benchmarks._common import (best_of_interleaved, jax_provenance, jit, log,  # noqa: E402
                     timed_compile, write_results)

CELL = 0.02
SOLIDS = {1000: (8, 5, 4), 2500: (12, 7, 5), 5000: (15, 9, 6), 10000: (20, 12, 7)}
CLOTHS = {1000: 23, 2500: 35, 5000: 50, 10000: 71}


def solid_scene(divisions):
    size = tuple(CELL * n for n in divisions)
    verts, tets = jc.meshes.box_tets(size, divisions)
    scene = jc.Scene(dt=0.002)
    scene.add_plane()
    scene.add_solid(verts, tets, density=1000.0, youngs_modulus=1e5, poisson_ratio=0.3,
                    viscosity=1.0, material="stable_neo_hookean", pos=(0.0, 0.0, size[2] / 2))
    model, state = scene.build(contact=jc.Contact(normal="power"))
    state = state.replace(particle_pos=state.particle_pos * jnp.array([[1.0, 1.0, 0.95]]))

    def with_param(m, log_value):
        return m.replace(solid=m.solid.replace(
            youngs_modulus=jnp.full_like(m.solid.youngs_modulus, jnp.exp(log_value))))

    return model, state, len(tets), with_param, jnp.log(1e5)


def cloth_scene(n):
    verts, tris = jc.meshes.grid((CELL * n, CELL * n), (n, n))
    scene = jc.Scene(dt=0.005)
    index = scene.add_cloth(verts, tris, density=0.2, stretch_stiffness=1e3,
                            bend_stiffness=1e-4, damping=0.05, pos=(0.0, 0.0, 1.0))
    radius = np.linalg.norm(verts[:, :2], axis=1)
    for p in index[radius > radius.max() - 1e-9]:
        scene.attach(int(p), -1, stiffness=1e4)
    model, state = scene.build()

    def with_param(m, log_value):
        return m.replace(cloth=m.cloth.replace(
            stretch_stiffness=jnp.full_like(m.cloth.stretch_stiffness, jnp.exp(log_value))))

    return model, state, len(tris), with_param, jnp.log(1e3)


def measure(kind, size, build, steps, preconditioner="auto"):
    model, state, elements, with_param, x0 = build(size)
    model = model.replace(solver=jc.Newton(
        preconditioner=preconditioner, adjoint=jc.Implicit(preconditioner=preconditioner)))
    n_particles = int(state.particle_pos.shape[0])
    log(f"{kind} {elements} elements, {n_particles} particles")

    def forward(m, s):
        final, _, info = jc.rollout(m, s, steps=steps, return_info=True)
        return final.particle_pos, info

    def loss(x, m, s):
        final, _ = jc.rollout(with_param(m, x), s, steps=steps)
        return jnp.mean(final.particle_pos[:, 2])

    run, compile_forward = timed_compile(jit(forward), model, state)
    grad, compile_gradient = timed_compile(jit(jax.grad(loss)), x0, model, state)
    _, info = run(model, state)
    g = float(grad(x0, model, state))
    best, rounds = best_of_interleaved(
        {"forward": lambda: run(model, state), "gradient": lambda: grad(x0, model, state)},
        repeats=2, min_time_s=1.0)
    row = {"kind": kind, "elements": elements, "particles": n_particles, "steps": steps,
           "preconditioner": preconditioner,
           "compile_forward_s": compile_forward, "compile_gradient_s": compile_gradient,
           "forward_ms_per_step": 1e3 * best["forward"] / steps,
           "gradient_ms_per_step": 1e3 * best["gradient"] / steps,
           "converged": float(jnp.mean(info.converged)),
           "newton_iterations": float(jnp.mean(info.iterations)),
           "gradient": g, "gradient_finite": bool(np.isfinite(g)), "rounds": rounds}
    log(f"  forward {row['forward_ms_per_step']:.1f} ms/step, gradient "
        f"{row['gradient_ms_per_step']:.1f} ms/step, compile {compile_forward:.0f} + "
        f"{compile_gradient:.0f} s, converged {row['converged']:.2f}, "
        f"{row['newton_iterations']:.1f} iterations")
    return row


def slope(rows, key):
    x = np.log([r["elements"] for r in rows])
    y = np.log([r[key] for r in rows])
    return float(np.polyfit(x, y, 1)[0]) if len(rows) > 1 else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1k and 2.5k elements only")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--kind", choices=("solid", "cloth", "both"), default="both",
                   help="which deformable to measure (default both)")
    p.add_argument("--sizes", type=int, nargs="+", choices=sorted(SOLIDS),
                   help="element counts to measure (default all, or 1000 2500 with --quick)")
    p.add_argument("--preconditioner", choices=("auto", "block_jacobi", "multilevel"),
                   default="auto", help="of the Krylov solves, forward and adjoint "
                   "(default auto: multilevel for cloth of 1,000 particles or more)")
    p.add_argument("--name", default=None,
                   help="results/<name>.json (default: deformable_scaling, with the options "
                        "that differ from the defaults appended)")
    args = p.parse_args()
    sizes = args.sizes or ([1000, 2500] if args.quick else [1000, 2500, 5000, 10000])
    doc = {"benchmark": "deformable_scaling", "provenance": jax_provenance(),
           "steps": args.steps, "rows": []}
    for kind, build, table in (("solid", solid_scene, SOLIDS), ("cloth", cloth_scene, CLOTHS)):
        if args.kind not in (kind, "both"):
            continue
        rows = [measure(kind, table[n], build, args.steps, args.preconditioner)
                for n in sizes]
        doc["rows"] += rows
        doc[f"{kind}_slope_forward"] = slope(rows, "forward_ms_per_step")
        doc[f"{kind}_slope_gradient"] = slope(rows, "gradient_ms_per_step")
        if len(rows) > 1:
            log(f"{kind}: log-log slope forward {doc[f'{kind}_slope_forward']:.2f}, gradient "
                f"{doc[f'{kind}_slope_gradient']:.2f}")
    write_results(doc, args.name or "deformable_scaling" + ("_quick" if args.quick else "")
                  + ("" if args.kind == "both" else f"_{args.kind}")
                  + ("" if args.preconditioner == "auto" else f"_{args.preconditioner}")
                  + ("" if args.sizes is None else "_" + "-".join(map(str, args.sizes))))


if __name__ == "__main__":
    main()
