"""ADD E11 (Geilinger et al. 2020, Fig. 11b, Sec. 6.3; supplement Fig. 1): throw a convex
mesh body so that it comes to a target pose after bouncing off the floor and a wall; L-BFGS
with exact gradients against CMA-ES (Hansen's defaults), counting every simulation.

ADD throws a deformable Stanford bunny (2729 elements, ρ = 90, c_f = 0.2 on the floor, 0.4 on
the wall); deformable solids are issue 16, so this is the same problem with a rigid convex
body: the convex hull of an irregular "bunny-like" point set (a body ellipsoid, a head and two
ear tips, 22 points drawn with a fixed seed; its hull has 16 vertices, the body's contact
points), 0.3 kg, about 15 x 10 x 15 cm. Floor z = 0 (c_f = 0.2) and a wall x = 2 m (c_f = 0.4),
ADD's default linear penalty k_n = 1e3 N/m with no contact damping (implicit Euler's numerical
damping gives the bounce its restitution) and ADD's clamped linear friction (Eq. 17).
dt = 10 ms, 150 steps (1.5 s), float64, `jc.Newton(iterations=30)` (every step of every
throw below converges; the default 12 leaves a few impact steps unconverged).

Parameters: the initial linear and angular velocity (6 numbers), as in ADD. Target: the
final pose of a reference throw v = (3, 0.3, 2) m/s, ω = (1, -6, 2) rad/s that hits the floor,
then the wall, and comes to rest against the floor (so an exact solution exists). Objective:
Φ = Σ over the hull vertices of |x_v(T) - x*_v|² (ADD: every mesh node; ADD's regularizer
against falling over is left out: the target pose is a resting pose, so the vertex term
already penalizes any other). Start: v = (2.8, 0.2, 2.2) m/s, ω = (0, -5, 1) rad/s, which
has the reference's contact sequence (floor, floor, wall) but comes to rest on another face.
L-BFGS stops at Φ/Φ₀ < 1e-10 or its iteration cap (60, about ADD's 319 simulations); CMA-ES
(σ₀ = 0.5) is capped at 1000 simulations (ADD ran more than 8000). L-BFGS is also run from a
second start, v = (2.6, 0, 2.4) m/s, ω = (0, -3, 0) rad/s, whose sequence (floor, wall)
differs from the reference's, to show how it fares from another basin.

ADD's E3 (Fig. 4) continuation over k_n is not part of this comparison; it has its own
experiment (`experiments/add_e3_continuation.py`, a similar rigid throw without the wall).

Run from the repository root:
    python -m experiments.add_e11_mesh_throw [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# the second L-BFGS run traces a new closure of the same program: the persistent cache
# saves compiling it again
from experiments._common import use_compile_cache  # noqa: E402

use_compile_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402
from jaxcontact.math import quat_rotate  # noqa: E402

NAME = "add_e11_mesh_throw"
DT, STEPS = 0.01, 150
MASS, HEIGHT, STIFFNESS = 0.3, 0.3, 1e3
FLOOR_FRICTION, WALL_FRICTION, WALL = 0.2, 0.4, 2.0
REFERENCE = (3.0, 0.3, 2.0, 1.0, -6.0, 2.0)
START = (2.8, 0.2, 2.2, 0.0, -5.0, 1.0)
OTHER_START = (2.6, 0.0, 2.4, 0.0, -3.0, 0.0)
SIGMA0, BUDGET, RTOL = 0.5, 1000, 1e-10


def bunny_points(seed=3):
    """(22, 3) points: 14 on a body ellipsoid, 6 on a head sphere, 2 ear tips (m)."""
    rng = np.random.default_rng(seed)

    def blob(n, centre, axes):
        d = rng.standard_normal((n, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        return np.asarray(centre) + d * np.asarray(axes)

    return np.concatenate([blob(14, (0.0, 0.0, 0.0), (0.06, 0.045, 0.045)),
                           blob(6, (0.055, 0.0, 0.04), (0.03, 0.03, 0.03)),
                           np.array([[0.04, 0.015, 0.11], [0.05, -0.015, 0.105]])])


def build():
    """(model, state): the body at rest at HEIGHT above the floor, the wall at x = WALL."""
    scene = jc.Scene(dt=DT, friction=FLOOR_FRICTION, stiffness=STIFFNESS, damping=0.0)
    scene.add_plane()
    scene.add_plane(normal=(-1.0, 0.0, 0.0), offset=-WALL, friction=WALL_FRICTION)
    scene.add_mesh(bunny_points(), mass=MASS, pos=(0.0, 0.0, HEIGHT))
    return scene.build(contact=jc.Contact(friction="linear"), solver=jc.Newton(iterations=30))


def contact_sequence(pos, quat, local, tol=1e-4):
    """ADD Fig. 11's labels: 'f' for each floor impact, 'w' for each wall impact, in order
    (an impact: the first step of a run of steps with a vertex past the plane by > tol)."""
    rot = jax.vmap(lambda q: jax.vmap(lambda v: quat_rotate(q, v))(local))(quat)
    verts = np.asarray(pos[:, None, :] + rot)
    floor = verts[:, :, 2].min(axis=1) < -tol
    wall = verts[:, :, 0].max(axis=1) > WALL + tol
    events = []
    for t in range(len(floor)):
        if floor[t] and (t == 0 or not floor[t - 1]):
            events.append("f")
        if wall[t] and (t == 0 or not wall[t - 1]):
            events.append("w")
    return "".join(events)


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    model, state = build()
    local = model.mesh.vertices[0, :model.mesh.count[0]]

    def throw(x):
        s = state.replace(vel=x[None, :3], ang_vel=x[None, 3:])
        final, traj, infos = jc.rollout(model, s, steps=STEPS, return_info=True)
        verts = final.pos[0] + jax.vmap(lambda v: quat_rotate(final.quat[0], v))(local)
        return verts, traj.pos[:, 0], traj.quat[:, 0], infos

    run = jc.jit(throw)
    t = time.perf_counter()
    target, ref_pos, ref_quat, ref_info = run(jnp.asarray(REFERENCE))
    t_compile = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(run(jnp.asarray(REFERENCE)))
    t_sim = time.perf_counter() - t

    def loss(x):
        return jnp.sum((throw(x)[0] - target) ** 2)

    x0 = jnp.asarray(START)
    log(f"reference throw: contacts {contact_sequence(ref_pos, ref_quat, local)}; one "
        f"simulation {t_sim * 1e3:.0f} ms after {t_compile:.0f} s of compilation")
    t = time.perf_counter()
    iterations = 10 if args.quick else 60
    gradient = jc.optim.lbfgs(loss, x0, max_iterations=iterations, rtol=RTOL)
    t_lbfgs = time.perf_counter() - t
    log(f"L-BFGS: {gradient.status}; {gradient.simulations} simulations, "
        f"{gradient.iterations} iterations, {t_lbfgs:.1f} s")
    t = time.perf_counter()
    other = jc.optim.lbfgs(loss, jnp.asarray(OTHER_START), max_iterations=iterations // 2,
                           rtol=RTOL)
    t_other = time.perf_counter() - t
    log(f"L-BFGS from the other start: {other.status}; {other.simulations} simulations, "
        f"{t_other:.1f} s")
    budget = 100 if args.quick else BUDGET
    t = time.perf_counter()
    free = jc.optim.cmaes(loss, x0, SIGMA0, max_simulations=budget, rtol=RTOL)
    t_cma = time.perf_counter() - t
    log(f"CMA-ES: {free.status}; {free.simulations} simulations, {t_cma:.1f} s")

    first = gradient.history[0]
    population = 4 + int(3 * np.log(6))      # Hansen's default for n = 6

    def cma_at(simulations):
        """CMA-ES's best Φ/Φ₀ within a budget of simulations (whole generations)."""
        k = min(max((simulations - 1) // population, 0), len(free.history) - 1)
        return free.history[k] / first

    outcomes = {}
    for label, x in (("start", x0), ("lbfgs", gradient.x), ("cmaes", free.x),
                     ("other_start", jnp.asarray(OTHER_START)), ("other_lbfgs", other.x)):
        _, pos, quat, info = run(jnp.asarray(x))
        outcomes[label] = {"contacts": contact_sequence(pos, quat, local),
                           "steps_converged": float(jnp.mean(info.converged)),
                           "max_newton_iterations": int(jnp.max(info.iterations)),
                           "path": np.asarray(pos)}
    result = {
        "setup": {"dt": DT, "steps": STEPS, "mass": MASS, "height": HEIGHT,
                  "stiffness": STIFFNESS, "damping": 0.0, "friction_law": "linear (ADD Eq. 17)",
                  "floor_friction": FLOOR_FRICTION, "wall_friction": WALL_FRICTION,
                  "wall_x": WALL, "hull_vertices": int(model.mesh.count[0]),
                  "reference_throw": REFERENCE, "start": START, "sigma0": SIGMA0,
                  "cmaes_budget": budget, "rtol": RTOL, "quick": args.quick,
                  "target_vertices": np.asarray(target).tolist()},
        "paper": {"lbfgs_simulations": 319, "lbfgs_ratio": 4e-4,
                  "cmaes_simulations": "more than 8000", "cmaes_ratio": 1e-2,
                  "body": "deformable Stanford bunny, 2729 elements"},
        "contacts": {"reference": contact_sequence(ref_pos, ref_quat, local),
                     **{k: v["contacts"] for k, v in outcomes.items()}},
        "simulation_seconds": t_sim, "compile_seconds": t_compile,
        "reference_steps_converged": float(jnp.mean(ref_info.converged)),
        "lbfgs": {"simulations": gradient.simulations, "iterations": gradient.iterations,
                  "ratio": gradient.value / first, "converged": gradient.converged,
                  "status": gradient.status, "seconds": t_lbfgs,
                  "x": np.asarray(gradient.x).tolist(), "history": gradient.history,
                  "steps_converged": outcomes["lbfgs"]["steps_converged"]},
        "lbfgs_other_start": {"start": OTHER_START, "simulations": other.simulations,
                              "iterations": other.iterations, "initial": other.history[0],
                              "ratio": other.value / other.history[0], "seconds": t_other,
                              "status": other.status, "history": other.history,
                              "x": np.asarray(other.x).tolist()},
        "cmaes": {"simulations": free.simulations, "generations": free.iterations,
                  "population": population, "ratio": free.value / first,
                  "ratio_at_lbfgs_budget": cma_at(gradient.simulations),
                  "converged": free.converged, "status": free.status, "seconds": t_cma,
                  "x": np.asarray(free.x).tolist(), "history": free.history,
                  "steps_converged": outcomes["cmaes"]["steps_converged"]},
    }

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    # L-BFGS's loss after each iteration against the simulations spent so far is not
    # recorded per trial; spread its iterations evenly over its simulations (as in E8)
    sims_g = np.linspace(1, gradient.simulations, len(gradient.history))
    a.semilogy(sims_g, np.asarray(gradient.history) / first, "o-", ms=3,
               label="L-BFGS (exact gradients)")
    sims_c = 1 + np.arange(len(free.history)) * population
    a.semilogy(sims_c, np.asarray(free.history) / first, "-", label="CMA-ES (best so far)")
    a.plot([319], [4e-4], "C0*", ms=12, label="ADD L-BFGS (bunny)")
    a.plot([8000], [1e-2], "C1*", ms=12, label="ADD CMA-ES (bunny)")
    a.set_xscale("log")
    a.set(xlabel="simulations", ylabel="Φ / Φ₀")
    a.legend(fontsize=7)
    b.axhline(0.0, color="k", lw=1.5)
    b.axvline(WALL, color="k", lw=1.5)
    for label, path in (("start", outcomes["start"]["path"]),
                        ("reference", np.asarray(ref_pos)),
                        ("L-BFGS", outcomes["lbfgs"]["path"]),
                        ("CMA-ES", outcomes["cmaes"]["path"])):
        b.plot(path[:, 0], path[:, 2], label=label)
    tv = np.asarray(target)
    b.plot(tv[:, 0], tv[:, 2], "k.", ms=5, label="target vertices")
    b.set(xlabel="x (m)", ylabel="z (m)", title="centre of mass (floor z = 0, wall x = 2)")
    b.legend(fontsize=7)
    finish_figure(fig, (a, b), "ADD E11 (rigid convex body): floor and wall bounce to a "
                  "target pose, L-BFGS vs CMA-ES")
    for v in outcomes.values():
        v.pop("path")
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
