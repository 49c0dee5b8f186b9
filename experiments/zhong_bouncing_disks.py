"""Zhong et al. 2021 (NeurIPS), BP5 / BD5: recover contact properties and mass ratios of five
bouncing disks from 5-step trajectory chunks; held-out chunk error and 50-step error growth.

Zhong, Dey, Chakraborty learn, from 800 chunks of 5 time steps (dt = 0.01 s) cut from
100-step trajectories, about half of them with a collision and each starting collision-free
(App. I "Data"), the mass ratios (Sec. 4.3, Table S.2: CM-CD-CLNN [2.0001, 6.0036, 8.0014,
10.0024] for true [2, 6, 8, 10]) and the friction and restitution coefficients (Table 2: to
the third decimal on the homogeneous tasks) of 2D disks in a box, with an L1 trajectory loss
and AdamW (lr 1e-3); they report the relative L1 error of 5-step test chunks (Fig. 3) and
along 50-step test rollouts (Fig. 4), both as plots only.

Ours, in jaxcontact's 3D terms: five spheres ("disks") of BP5's radii [0.05, 0.1, 0.13, 0.15,
0.18] m and masses [0.05, 0.1, 0.3, 0.4, 0.5] kg (ratios [2, 6, 8, 10]; the values of the
authors' code) moving in the plane z = 0 inside the unit box [0, 1]² (4 wall planes), no
gravity, rotating about z (BD5: friction makes them spin). Linear penalty contact k_n = 2e3 N/m
(known), Huber friction, dt = 2 ms: 5 steps per observation, so one observation interval is
Zhong's 0.01 s and a chunk is 5 observations (25 steps). Heterogeneous contact per pair type:
disk geoms μ = 0.1, k_d = 1 N s/m; wall planes μ = 0.5, k_d = 4 N s/m; a pair takes the mean
of its two sides (`jaxcontact.models.contacts.combine`), so disk-disk pairs have μ = 0.1 and
disk-wall pairs μ = 0.3, k_d = 2.5, and each pair its own restitution through its masses (ADD
Eq. 22 with the reduced mass, `jc.damping_to_restitution`).

Learned (8 numbers): μ and k_d of the disk and of the wall type, and the mass ratios m_i/m_1
(i = 2..5; m_1 fixed, inertia 2/5 m r² follows the mass); k_d and the ratios by their logs,
each μ as sigmoid(θ) in (0, 1). Fitted in two stages: masses and damping first with the
frictions held at the start, then all 8 (fitting all at once from the start, μ_wall ran off
to where every wall contact sticks and its gradient vanishes: a local minimum). Data: N_train +
N_test trajectories of 100 observations from random collision-free starts (speeds 0.5-1.5 m/s,
spins ±5 rad/s), one 5-observation chunk from each, alternately with and without a collision
(where a trajectory has one of that kind), each starting collision-free. Loss: the squared
error of positions and of velocities x observation interval (both metres) at the 5
observations of every training chunk, minimized by Gauss-Newton / Levenberg-Marquardt
(`jc.optim.gauss_newton`, forward-mode implicit sensitivities; not the paper's L1 + AdamW).
Start: μ = 0.3 and k_d = 2 for both types, all mass ratios 1.

Relative L1 error of a prediction x̂ against the truth x (positions and velocities, all
observations of the horizon): Σ|x̂ - x| / (Σ|x̂| + Σ|x|); the 50-step curve uses the same ratio
per observation, from the test trajectories' collision-free starts.

Run from the repository root:
    python -m experiments.zhong_bouncing_disks [--quick]
(--quick: 24 training and 8 test chunks instead of 96 and 32, 15 Gauss-Newton iterations)
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
from experiments._common import use_compile_cache  # noqa: E402

use_compile_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "zhong_bouncing_disks"
RADII = (0.05, 0.1, 0.13, 0.15, 0.18)          # m, BP5 (authors' code)
MASSES = (0.05, 0.1, 0.3, 0.4, 0.5)            # kg, ratios [2, 6, 8, 10]
WALLS = (((1.0, 0.0, 0.0), 0.0), ((-1.0, 0.0, 0.0), -1.0),
         ((0.0, 1.0, 0.0), 0.0), ((0.0, -1.0, 0.0), -1.0))   # the unit box [0, 1]²
STIFFNESS = 2e3                                 # N/m, every geom (known, not learned)
DT, SUB = 2e-3, 5                               # s; steps per observation (0.01 s)
CHUNK, LONG, GROWTH = 5, 100, 50                # observations: chunk, trajectory, rollout
# truth and start, as (μ_disk, μ_wall, k_d disk, k_d wall, m2/m1, m3/m1, m4/m1, m5/m1)
TRUE = (0.1, 0.5, 1.0, 4.0, 2.0, 6.0, 8.0, 10.0)
START = (0.3, 0.3, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0)
NAMES = ("mu_disk", "mu_wall", "damping_disk", "damping_wall", "m2/m1", "m3/m1", "m4/m1",
         "m5/m1")
SPEED, SPIN, CLEAR = (0.5, 1.5), 5.0, 0.02      # m/s, rad/s, m (start clearance)
PAPER_RATIOS = {"CM-CD-CLNN (text)": [2.0001, 6.0036, 8.0014, 10.0024],
                "CM-CD-CLNN (Table S.2)": [2.0000, 6.0036, 8.0014, 10.0024],
                "CMr-CD-CLNN (Table S.2)": [1.9998, 6.0004, 8.0033, 9.9997]}
MU_MAX = 1.0                                    # bound of the learned geom frictions
NEWTON_ITERATIONS = 30                          # the default 12 leaves ~0.1% of steps short
LM_DAMPING = 1.0                                # initial Levenberg-Marquardt λ: short first steps
PAIRS = [(i, j) for i in range(5) for j in range(i + 1, 5)]


def build():
    """The BP5-like scene at the true parameters, and its (model, state)."""
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0), stiffness=STIFFNESS)
    for normal, offset in WALLS:
        scene.add_plane(normal=normal, offset=offset, friction=TRUE[1], damping=TRUE[3])
    for r, m in zip(RADII, MASSES):
        scene.add_sphere(r, m, friction=TRUE[0], damping=TRUE[2])
    return scene.build(solver=jc.Newton(iterations=NEWTON_ITERATIONS))


def values(theta):
    """The 8 learned numbers (order of `NAMES`) from θ: μ = MU_MAX sigmoid(θ) (bounded, so an
    estimate that runs off to the sticking regime, where the gradient vanishes, stays
    finite), the rest exp(θ)."""
    return jnp.concatenate([MU_MAX * jax.nn.sigmoid(theta[:2]), jnp.exp(theta[2:])])


def to_theta(p):
    p = jnp.asarray(p)
    mu = p[:2] / MU_MAX
    return jnp.concatenate([jnp.log(mu / (1.0 - mu)), jnp.log(p[2:])])


def with_params(model, theta):
    """`model` at θ (`values`)."""
    p = values(theta)
    n, w = len(RADII), len(WALLS)
    mass = MASSES[0] * jnp.concatenate([jnp.ones((1,), p.dtype), p[4:]])
    inertia = 0.4 * (mass * jnp.asarray(RADII) ** 2)[:, None] * jnp.ones((1, 3))
    geom = model.geom.replace(friction=jnp.full((n,), p[0]), damping=jnp.full((n,), p[2]))
    plane = model.plane.replace(friction=jnp.full((w,), p[1]), damping=jnp.full((w,), p[3]))
    return model.replace(body=model.body.replace(mass=mass, inertia=inertia), geom=geom,
                         plane=plane)


def gaps(pos):
    """Smallest gap (m) over the 20 disk-wall and 10 disk-disk pairs; pos (..., 5, 2)."""
    r = np.asarray(RADII)
    wall = np.concatenate([pos - r[:, None], 1.0 - pos - r[:, None]], axis=-1)
    d = np.stack([np.linalg.norm(pos[..., i, :] - pos[..., j, :], axis=-1) - r[i] - r[j]
                  for i, j in PAIRS], axis=-1)
    return np.minimum(wall.min(axis=(-1, -2)), d.min(axis=-1))


def initial_conditions(rng, count):
    """`count` random collision-free starts: positions (count, 5, 2), velocities, spins."""
    r = np.asarray(RADII)
    pos = np.zeros((count, 5, 2))
    for k in range(count):
        while True:
            p = rng.uniform(r[:, None] + CLEAR, 1.0 - r[:, None] - CLEAR, size=(5, 2))
            if gaps(p) > CLEAR:
                pos[k] = p
                break
    angle = rng.uniform(0, 2 * np.pi, size=(count, 5))
    speed = rng.uniform(*SPEED, size=(count, 5))
    vel = speed[..., None] * np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    spin = rng.uniform(-SPIN, SPIN, size=(count, 5))
    return pos, vel, spin


def batch_states(state, pos, quat, vel, ang_vel):
    """A batch of `state` with the given (B, 5, ·) pos/quat/vel/ang_vel."""
    b = pos.shape[0]
    base = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), state)
    return base.replace(pos=jnp.asarray(pos), quat=jnp.asarray(quat), vel=jnp.asarray(vel),
                        ang_vel=jnp.asarray(ang_vel))


def planar(pos2, vel2, spin):
    """3D pos, quat, vel, ang_vel from planar positions, velocities and z spins."""
    b = pos2.shape[0]
    z = np.zeros(pos2.shape[:-1] + (1,))
    quat = np.broadcast_to(np.array([1.0, 0.0, 0.0, 0.0]), (b, 5, 4))
    ang = np.concatenate([np.zeros(spin.shape + (2,)), spin[..., None]], axis=-1)
    return (np.concatenate([pos2, z], -1), quat, np.concatenate([vel2, z], -1), ang)


def relative_l1(pred, true, axes):
    """Σ|x̂ - x| / (Σ|x̂| + Σ|x|) over `axes`."""
    return (np.sum(np.abs(pred - true), axis=axes)
            / (np.sum(np.abs(pred), axis=axes) + np.sum(np.abs(true), axis=axes)))


def pair_values(theta):
    """Per pair type: μ, k_d (pair means) and the continuous-law restitution of every pair
    (ADD Eq. 22; disk-disk with the reduced mass) at θ."""
    p = np.asarray(values(theta))
    m = MASSES[0] * np.concatenate([[1.0], p[4:]])
    kd_dd, kd_dw = p[2], 0.5 * (p[2] + p[3])
    e_dd = [float(jc.damping_to_restitution(kd_dd, STIFFNESS, m[i] * m[j] / (m[i] + m[j])))
            for i, j in PAIRS]
    e_dw = [float(jc.damping_to_restitution(kd_dw, STIFFNESS, m[i])) for i in range(5)]
    return {"mu_disk_disk": float(p[0]), "mu_disk_wall": float(0.5 * (p[0] + p[1])),
            "damping_disk_disk": float(kd_dd), "damping_disk_wall": float(kd_dw),
            "restitution_disk_disk": e_dd, "restitution_disk_wall": e_dw}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    n_train, n_test = (24, 8) if args.quick else (96, 32)
    n_traj = n_train + n_test
    model, state = build()
    theta_true = to_theta(TRUE)
    theta_start = to_theta(START)
    t_all = time.perf_counter()

    # one program for every long rollout: a batch of (θ, start) pairs, LONG observations
    def long_rollout(theta, s):
        _, traj, infos = jc.rollout(with_params(model, theta), s, steps=LONG * SUB,
                                    return_info=True)
        return traj, infos.converged

    long_batch = jc.jit(jax.vmap(long_rollout))

    # --- data: the true system from random collision-free starts ------------------------
    rng = np.random.default_rng(0)
    pos2, vel2, spin = initial_conditions(rng, n_traj)
    starts = batch_states(state, *planar(pos2, vel2, spin))
    t = time.perf_counter()
    traj, conv = long_batch(jnp.broadcast_to(theta_true, (n_traj, 8)), starts)
    traj = jax.tree.map(np.asarray, traj)
    t_data = time.perf_counter() - t
    log(f"data: {n_traj} trajectories x {LONG * SUB} steps, {t_data:.1f} s (compile included)"
        f"; converged steps {float(jnp.mean(conv)):.4f}")
    step_gap = gaps(traj.pos[..., :2])                    # (B, LONG*SUB), after each step
    fields = {}                                           # (B, LONG + 1, 5, ·) observations
    for name, x0 in (("pos", np.asarray(starts.pos)), ("quat", np.asarray(starts.quat)),
                     ("vel", np.asarray(starts.vel)), ("ang_vel", np.asarray(starts.ang_vel))):
        fields[name] = np.concatenate([x0[:, None], getattr(traj, name)[:, SUB - 1::SUB]], 1)
    obs_gap = np.concatenate([gaps(fields["pos"][:, :1, :, :2]), step_gap[:, SUB - 1::SUB]], 1)

    # one chunk per trajectory, alternately with and without a collision, starting free
    chunk_start, collides = np.zeros(n_traj, int), np.zeros(n_traj, bool)
    for k in range(n_traj):
        free = obs_gap[k, :LONG - CHUNK + 1] > 0
        hit = np.array([step_gap[k, t0 * SUB:(t0 + CHUNK) * SUB].min() < 0
                        for t0 in range(LONG - CHUNK + 1)])
        want = k % 2 == 0
        pick = np.flatnonzero(free & (hit == want))
        if pick.size == 0:
            pick = np.flatnonzero(free)
        chunk_start[k] = rng.choice(pick)
        collides[k] = hit[chunk_start[k]]
    idx = np.arange(n_traj)

    def chunk(name, t0, length):
        return np.stack([fields[name][idx, t0 + i] for i in range(length)], axis=1)

    c_states = batch_states(state, *(chunk(n, chunk_start, 1)[:, 0]
                                     for n in ("pos", "quat", "vel", "ang_vel")))
    target = np.concatenate([chunk("pos", chunk_start + 1, CHUNK),
                             DT * SUB * chunk("vel", chunk_start + 1, CHUNK)], axis=-1)
    train, test = idx[:n_train], idx[n_train:]
    log(f"chunks with a collision: train {int(collides[train].sum())}/{n_train}, "
        f"test {int(collides[test].sum())}/{n_test}")

    # --- learning: Gauss-Newton on the training chunks ------------------------------------
    fmodel = jc.optim.forward_mode(model)
    train_states = jax.tree.map(lambda x: x[train], c_states)
    train_target = jnp.asarray(target[train])

    def predict(theta, s):
        _, tr = jc.rollout(with_params(fmodel, theta), s, steps=CHUNK * SUB)
        return jnp.concatenate([tr.pos[SUB - 1::SUB], DT * SUB * tr.vel[SUB - 1::SUB]], -1)

    def residual(theta):
        return jax.vmap(predict, in_axes=(None, 0))(theta, train_states) - train_target

    def residual_without_friction(rest, mu_theta):
        return residual(jnp.concatenate([mu_theta, rest]))

    t = time.perf_counter()
    # staged: masses and damping first with the frictions held at the start (friction
    # fitted first runs off to sticking walls, a local minimum), then all 8 together
    first = jc.optim.gauss_newton(residual_without_friction, theta_start[2:],
                                  args=(theta_start[:2],),
                                  max_iterations=10 if args.quick else 20, rtol=1e-6,
                                  damping=LM_DAMPING)
    found = jc.optim.gauss_newton(residual, jnp.concatenate([theta_start[:2], first.x]),
                                  max_iterations=15 if args.quick else 30, rtol=1e-12,
                                  damping=LM_DAMPING)
    found.simulations += first.simulations
    t_fit = time.perf_counter() - t
    log(f"stage 1 (masses, damping): {first.status}; {first.iterations} iterations")
    theta_fit = jnp.asarray(found.x)
    log(f"Gauss-Newton: {found.status}; {found.iterations} iterations, {found.simulations} "
        f"simulations, {t_fit:.1f} s (compile included)")
    jac = np.asarray(found.jacobian)
    sigma2 = 2.0 * found.value / max(jac.shape[0] - jac.shape[1], 1)
    std_log = np.sqrt(np.maximum(np.diag(sigma2 * np.linalg.pinv(jac.T @ jac)), 0.0))

    # --- evaluation: held-out chunks and 50-observation rollouts, one batch of n_traj -----
    test_chunks = jax.tree.map(lambda x: x[test], c_states)
    test_starts = jax.tree.map(lambda x: x[test], starts)
    both = jax.tree.map(lambda *xs: jnp.concatenate(xs), test_chunks, test_starts,
                        test_chunks, test_starts)
    thetas = jnp.concatenate([jnp.broadcast_to(theta_fit, (2 * n_test, 8)),
                              jnp.broadcast_to(theta_start, (2 * n_test, 8))])
    if 4 * n_test != n_traj:
        raise ValueError(f"n_train must be 3 n_test (one compiled batch), got {n_train}, "
                         f"{n_test}")
    t = time.perf_counter()
    pred, pred_conv = jax.block_until_ready(long_batch(thetas, both))
    t_eval = time.perf_counter() - t
    pred = jax.tree.map(np.asarray, pred)

    def state_vec(p, v):
        return np.concatenate([p, DT * SUB * v], axis=-1)

    def chunk_error(rows):
        x = state_vec(pred.pos[rows, SUB - 1:CHUNK * SUB:SUB],
                      pred.vel[rows, SUB - 1:CHUNK * SUB:SUB])
        return relative_l1(x, target[test], axes=(1, 2, 3))

    def growth(rows):
        x = state_vec(pred.pos[rows, SUB - 1:GROWTH * SUB:SUB],
                      pred.vel[rows, SUB - 1:GROWTH * SUB:SUB])
        y = state_vec(fields["pos"][test, 1:GROWTH + 1], fields["vel"][test, 1:GROWTH + 1])
        return relative_l1(x, y, axes=(2, 3))             # (n_test, GROWTH)

    fit_chunk = chunk_error(np.arange(n_test))
    start_chunk = chunk_error(2 * n_test + np.arange(n_test))
    fit_growth = growth(n_test + np.arange(n_test))
    start_growth = growth(3 * n_test + np.arange(n_test))
    log(f"held-out 5-step relative L1: learned {fit_chunk.mean():.3g}, start "
        f"{start_chunk.mean():.3g}; 50-step at the end: learned {fit_growth[:, -1].mean():.3g}")

    learned = np.asarray(values(theta_fit))
    params = {name: {"true": TRUE[k], "start": START[k], "learned": float(learned[k]),
                     "relative_error": float(abs(learned[k] - TRUE[k]) / TRUE[k]),
                     "std_theta": float(std_log[k])}
              for k, name in enumerate(NAMES)}
    true_pairs, fit_pairs = pair_values(theta_true), pair_values(theta_fit)
    restitution_error = max(
        float(np.max(np.abs(np.subtract(fit_pairs[k], true_pairs[k]))))
        for k in ("restitution_disk_disk", "restitution_disk_wall"))

    def ci95(x):
        return float(1.96 * np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0

    result = {
        "setup": {"radii": RADII, "masses": MASSES, "stiffness": STIFFNESS, "dt": DT,
                  "steps_per_observation": SUB, "chunk_observations": CHUNK,
                  "trajectory_observations": LONG, "growth_observations": GROWTH,
                  "n_train": n_train, "n_test": n_test, "speed": SPEED, "spin": SPIN,
                  "start": dict(zip(NAMES, START)), "quick": args.quick,
                  "loss": "squared error of positions and velocities x 0.01 s (m), "
                          "Gauss-Newton/Levenberg-Marquardt"},
        "paper": {"mass_ratios_true": [2.0, 6.0, 8.0, 10.0], "mass_ratios": PAPER_RATIOS,
                  "contact_table2": "homogeneous tasks: CM recovers (mu, e_P) to the third "
                                    "decimal, e.g. Gyro (0.100, 0.800); BP5/BD5 per-pair "
                                    "values are not tabulated",
                  "n_train": 800, "n_test": 100, "chunk_errors": "Fig. 3/4, plots only"},
        "chunks_with_collision": {"train": int(collides[train].sum()),
                                  "test": int(collides[test].sum())},
        "learned": params,
        "pairs_true": true_pairs, "pairs_learned": fit_pairs,
        "max_restitution_error": restitution_error,
        "gauss_newton": {"status": found.status, "converged": found.converged,
                         "iterations": found.iterations, "simulations": found.simulations,
                         "history": found.history, "seconds": t_fit},
        "test_chunk_relative_l1": {"learned_mean": float(fit_chunk.mean()),
                                   "learned_ci95": ci95(fit_chunk),
                                   "start_mean": float(start_chunk.mean()),
                                   "start_ci95": ci95(start_chunk),
                                   "with_collision_learned": float(
                                       fit_chunk[collides[test]].mean())
                                   if collides[test].any() else None},
        "growth_relative_l1": {"learned_mean": fit_growth.mean(0).tolist(),
                               "start_mean": start_growth.mean(0).tolist()},
        "steps_converged": {"data": float(jnp.mean(conv)),
                            "evaluation": float(jnp.mean(pred_conv))},
        "seconds": {"data": t_data, "fit": t_fit, "evaluation": t_eval,
                    "total": time.perf_counter() - t_all},
    }

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4))
    a.semilogy(np.arange(len(found.history)), found.history, "o-")
    a.set_xlabel("accepted Gauss-Newton step")
    a.set_ylabel("½ |r|² (m²)")
    steps = np.arange(1, GROWTH + 1)
    for curve, label in ((fit_growth, "learned"), (start_growth, "start guess")):
        mean, band = curve.mean(0), 1.96 * curve.std(0, ddof=1) / np.sqrt(max(n_test, 1))
        b.semilogy(steps, mean, label=label)
        # the 95% CI of the mean; its lower edge floored at a tenth of the mean (log axis)
        b.fill_between(steps, np.maximum(mean - band, 0.1 * mean), mean + band, alpha=0.2)
    b.axvline(CHUNK, color="0.4", ls="--", label="training chunk length")
    b.set_xlabel("observation (0.01 s)")
    b.set_ylabel("relative L1 error vs the true system")
    b.legend()
    k = 0
    for i in range(5):
        line, = c.plot(fields["pos"][test[k], :GROWTH + 1, i, 0],
                       fields["pos"][test[k], :GROWTH + 1, i, 1], "-")
        c.plot(pred.pos[n_test + k, SUB - 1:GROWTH * SUB:SUB, i, 0],
               pred.pos[n_test + k, SUB - 1:GROWTH * SUB:SUB, i, 1], ":",
               color=line.get_color())
        c.add_patch(plt.Circle(fields["pos"][test[k], 0, i, :2], RADII[i], fill=False,
                               color=line.get_color()))
    c.set_xlim(0, 1)
    c.set_ylim(0, 1)
    c.set_aspect("equal")
    c.set_title("test trajectory: true (solid), learned (dotted)", fontsize=9)
    finish_figure(fig, (a, b, c), "Zhong et al. BP5/BD5-like bouncing disks: contact "
                                  "properties and mass ratios from 5-step chunks")
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
