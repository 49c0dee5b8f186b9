"""Zhong, Dey, Chakraborty (NeurIPS 2021), CP3 and CP3-e: a learned potential (a network of
the generalized positions) and the contact's friction and damping, learned jointly from 5-step
trajectory chunks of a 3-link chained pendulum whose lowest mass hits the ground.

The paper's CP3 tasks (Sec. 4, Table 1, App. H): three point masses at the joints of massless
links hanging from a pivot, joints of different sizes, only the lowest mass can reach the
ground; CP3-e is elastic and frictionless (e_P = 1, μ = 0), CP3 inelastic with friction
(e_P = 0, μ = 0.5). Zhong et al. learn V(x) (an MLP) and the masses with a CLNN, and (μ, e_P)
through their impulse contact model, from 800 chunks of 5 steps (dt = 0.01 s) cut from
100-step trajectories, about half of them with a collision; Table 2 gives the learned (μ, e_P).

Here (jaxcontact's own physics, not Zhong's): the masses are particles (3-DOF point masses;
the joints' sizes are their contact radii) in the x-z plane, the links are stiff springs (a
user term, k = 1e5 N/m), and the ground is the smoothed penalty contact of jaxcontact (linear
normal law k_n = 2e3 N/m with damping k_d, Huber friction μ), stepped by the implicit solver at
dt = 2 ms, observed every 10 ms (Zhong's dt). The restitution is therefore not a parameter: it
is the damping k_d, reported as the damping ratio ζ = k_d / (2 sqrt(k_n m₃)), as the point-mass
restitution it implies (ADD Eq. 22, `jc.damping_to_restitution`, m₃ the lowest mass), and as
the restitution measured by dropping that mass on the ground in the same simulator (which
includes implicit Euler's numerical damping: even k_d = 0 does not bounce back fully). The
truth for CP3 is e = 0, i.e. critical damping ζ = 1; for CP3-e, ζ = 0.

Two models per task, fitted to the same chunks:
- network: the potential is `jc.learned.add_network_energy`, an MLP (two hidden layers of 32,
  softplus) of the link angles (sin θ_i, cos θ_i) from `jc.learned.chain_angles` (the
  Lagrangian-network variant: V of generalized positions), gravity switched off, learned with
  (μ, k_d); the masses are known (Zhong also learn mass ratios; we do not).
- known potential: true gravity, only (μ, k_d) learned.

Optimizer: `jc.optim.lbfgs` (full batch, mean squared error of positions and velocities at
the observed steps) rather than the paper's AdamW (lr 1e-3, ~1000 epochs): the data set is
small and the simulator deterministic, so full-batch quasi-Newton needs far fewer rollouts,
which is what a 2-core CPU can afford. Reported (as in the paper): relative L1 error
Σ|pred - true| / Σ|true| of positions and velocities over 5-step test chunks (Fig. 3), its
growth along 50-step test rollouts (Fig. 4, a plot), and the learned contact parameters
beside Table 2.

Run from the repository root:
    python -m experiments.zhong_learned_dynamics [--quick]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import flax.linen as nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "zhong_learned_dynamics"
G = 9.81
DT_OBS, SUB = 0.01, 5                  # observed every 10 ms (Zhong), 5 implicit steps each
DT = DT_OBS / SUB
CHUNK, HORIZON, LENGTH = 5, 50, 100    # training chunk, test rollout, generated trajectory
LINKS = (1.0, 1.0, 1.0)                # m; only the lowest mass can reach the ground
RADII = (0.08, 0.1, 0.15)              # m: the joints' different sizes (contact radii)
PIVOT = (0.0, 0.0, 2.2)
K_N, K_LINK = 2e3, 1e5                 # N/m: ground contact, link springs
HIDDEN, SCALE = (32, 32), 10.0         # network widths; J per unit of its output
TIME_SCALE = CHUNK * DT_OBS            # s: velocities enter the loss as displacements
# true masses and contact (masses from the authors' code, see the digest's Part D)
TASKS = {"CP3-e": {"mass": (0.2, 0.13, 0.15), "friction": 0.0, "restitution": 1.0},
         "CP3": {"mass": (0.1, 0.2, 0.15), "friction": 0.5, "restitution": 0.0}}
PAPER = {"CP3-e": {"CM": (0.000, 1.000), "CMr": (0.002, 1.000)},
         "CP3": {"CM": (0.500, 0.004), "CMr": (0.500, 0.023)}}
START = (0.25, 0.5)                    # initial guesses of μ and ζ


class Potential(nn.Module):
    """V(features): two softplus layers and a linear output (smooth: Newton takes its
    Hessian)."""

    @nn.compact
    def __call__(self, x):
        for width in HIDDEN:
            x = nn.softplus(nn.Dense(width)(x))
        return nn.Dense(1)(x)


def angle_features(local):
    """(sin θ_i, cos θ_i) of the three link angles: the network's generalized positions."""
    theta = jc.learned.chain_angles(local.particle_pos, jnp.asarray(PIVOT))
    return jnp.concatenate([jnp.sin(theta), jnp.cos(theta)])


def links(local, prm):
    """Stiff springs k/2 (|p_i - p_{i-1}| - L_i)², p_{-1} the pivot: the massless links."""
    points = local.particle_pos
    start = jnp.concatenate([prm["pivot"][None, :], points[:-1]])
    stretch = jc.math.safe_norm(points - start) - prm["length"]
    return 0.5 * prm["stiffness"] * jnp.sum(stretch ** 2)


def chain_points(theta):
    """(3, 3) joint positions of link angles θ (B-broadcast over a leading axis)."""
    theta = np.asarray(theta)
    steps = np.stack([-np.sin(theta), np.zeros_like(theta), -np.cos(theta)], -1)
    return np.asarray(PIVOT) + np.cumsum(np.asarray(LINKS)[:, None] * steps, axis=-2)


def build():
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, -G))
    scene.add_plane(friction=0.5, stiffness=K_N, damping=0.0)
    start = chain_points(np.array([0.5, 0.5, 0.5]))
    ps = [scene.add_particle(0.1, tuple(start[i]), radius=RADII[i], friction=0.5,
                             stiffness=K_N, damping=0.0) for i in range(3)]
    scene.add_energy(links, particles=[ps],
                     params={"pivot": np.asarray([PIVOT]), "length": np.asarray([LINKS]),
                             "stiffness": np.array([K_LINK])})
    module = Potential()
    init = module.init(jax.random.key(0), jnp.zeros(6))
    net = jc.learned.add_network_energy(scene, module, init, particles=[ps],
                                        features=angle_features, scale=SCALE)
    model, state = scene.build(dtype=jnp.float64)
    return model, state, net


def f64(x):
    """A strongly typed float64 array (weak types would compile a second program)."""
    return jnp.asarray(np.asarray(x, np.float64))


def critical(mass):
    return 2.0 * np.sqrt(K_N * mass[2])


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    batch = 16 if args.quick else 32
    iterations = 25 if args.quick else 800
    model, state0, net = build()
    rng = np.random.default_rng(0)

    def configure(theta):
        """The model of θ: network weights, masses, gravity, μ and ζ."""
        m = jc.learned.with_network_params(model, net, theta["net"])
        damping = theta["zeta"] * 2.0 * jnp.sqrt(K_N * theta["mass"][2])
        particle = m.particle.replace(mass=theta["mass"],
                                      friction=jnp.full(3, 1.0) * theta["mu"],
                                      damping=jnp.full(3, 1.0) * damping)
        plane = m.plane.replace(friction=jnp.reshape(theta["mu"], (1,)),
                                damping=jnp.reshape(damping, (1,)))
        return m.replace(particle=particle, plane=plane, gravity=theta["gravity"])

    def simulate(theta, starts):
        """CHUNK observed steps (CHUNK * SUB implicit steps) from each of a batch of states:
        (final states, positions (B, CHUNK*SUB, 3, 3), velocities, converged)."""
        m = configure(theta)
        final, traj, info = jax.vmap(
            lambda s: jc.rollout(m, s, steps=CHUNK * SUB, return_info=True))(starts)
        return final, traj.particle_pos, traj.particle_vel, info.converged

    run = jc.jit(simulate)

    def batch_states(pos, vel):
        tile = jax.tree.map(lambda x: jnp.broadcast_to(x, (pos.shape[0],) + x.shape), state0)
        return tile.replace(particle_pos=jnp.asarray(pos), particle_vel=jnp.asarray(vel),
                            time=jnp.zeros(pos.shape[0]))

    def truth(task):
        t = TASKS[task]
        mass = np.asarray(t["mass"])
        zeta = float(jc.restitution_to_damping(t["restitution"], K_N, mass[2])) / critical(mass)
        return {"net": jax.tree.map(jnp.zeros_like, jc.learned.network_params(model, net)),
                "mass": f64(mass), "gravity": f64([0.0, 0.0, -G]),
                "mu": f64(t["friction"]), "zeta": f64(zeta)}

    def long_rollout(theta, pos, vel, chunks):
        """Observed positions and velocities (B, 1 + chunks*CHUNK, 3, 3) and per observed
        interval whether the lowest mass touched the ground (B, chunks*CHUNK)."""
        obs_p, obs_v, touch, ok = [pos], [vel], [], True
        s = batch_states(pos, vel)
        for _ in range(chunks):
            s, p, v, conv = run(theta, s)
            ok = ok and bool(jnp.all(conv))
            p, v = np.asarray(p), np.asarray(v)
            obs_p.append(p[:, SUB - 1::SUB])
            obs_v.append(v[:, SUB - 1::SUB])
            gap = (p[:, :, 2, 2] - RADII[2]).reshape(p.shape[0], CHUNK, SUB)
            touch.append(np.any(gap < 0.0, axis=-1))
        return (np.concatenate([obs_p[0][:, None]] + obs_p[1:], 1),
                np.concatenate([obs_v[0][:, None]] + obs_v[1:], 1),
                np.concatenate(touch, 1), ok)

    def initial_conditions(n):
        """Collision-free starts: link angles in ±1.3 rad, at rest, lowest mass 5 cm up."""
        out = []
        while len(out) < n:
            th = rng.uniform(-1.3, 1.3, 3)
            if chain_points(th)[2, 2] > RADII[2] + 0.05:
                out.append(chain_points(th))
        return np.stack(out)

    def make_data(task, n):
        """n chunks of CHUNK observed steps, one per generated trajectory, about half with a
        collision (and every chunk starting collision-free), plus the trajectories."""
        pos = initial_conditions(n)
        p, v, touch, ok = long_rollout(truth(task), pos, np.zeros_like(pos), LENGTH // CHUNK)
        free = p[:, :, 2, 2] - RADII[2] > 0.0               # (n, LENGTH + 1)
        starts, hits = [], 0
        for i in range(n):
            window = np.array([touch[i, s:s + CHUNK].any() for s in range(LENGTH - CHUNK)])
            ok_start = free[i, :LENGTH - CHUNK]
            want = i % 2 == 0                                 # even: a collision if any
            pick = np.flatnonzero(ok_start & (window == want))
            if len(pick) == 0:
                pick = np.flatnonzero(ok_start)
            s = int(rng.choice(pick))
            starts.append(s)
            hits += bool(window[s])
        idx = np.arange(n)
        s = np.asarray(starts)
        chunk = {"start_pos": p[idx, s], "start_vel": v[idx, s],
                 "pos": np.stack([p[i, s[i] + 1:s[i] + 1 + CHUNK] for i in idx]),
                 "vel": np.stack([v[i, s[i] + 1:s[i] + 1 + CHUNK] for i in idx])}
        return chunk, {"pos": p, "vel": v}, hits, ok

    def loss(x, start_pos, start_vel, pos, vel, mass, gravity, use_net):
        theta = {"net": jax.tree.map(lambda w: use_net * w, x["net"]), "mass": mass,
                 "gravity": gravity, "mu": x["contact"][0] ** 2, "zeta": x["contact"][1] ** 2}
        _, p, v, _ = simulate(theta, batch_states(start_pos, start_vel))
        dp = p[:, SUB - 1::SUB] - pos
        dv = (v[:, SUB - 1::SUB] - vel) * TIME_SCALE
        return (jnp.mean(dp ** 2) + jnp.mean(dv ** 2)) / 1e-6

    def relative_l1(p, v, tp, tv):
        err = np.abs(p - tp).sum(axis=(-1, -2)) + np.abs(v - tv).sum(axis=(-1, -2))
        ref = np.abs(tp).sum(axis=(-1, -2)) + np.abs(tv).sum(axis=(-1, -2))
        return err, ref

    results, curves, samples = {}, {}, {}
    t_all = time.perf_counter()
    for task in TASKS:
        t0 = time.perf_counter()
        train, _, train_hits, ok_train = make_data(task, batch)
        test, test_traj, test_hits, ok_test = make_data(task, batch)
        log(f"{task}: data in {time.perf_counter() - t0:.1f} s; collisions in "
            f"{train_hits}/{batch} training and {test_hits}/{batch} test chunks")
        true = truth(task)
        task_out = {"data": {"train_chunks": batch, "train_with_collision": train_hits,
                             "test_chunks": batch, "test_with_collision": test_hits,
                             "solves_converged": ok_train and ok_test}}
        for variant, use_net, gravity in (("network", 1.0, 0.0), ("known_potential", 0.0, -G)):
            x0 = {"net": jc.learned.network_params(model, net),
                  "contact": jnp.sqrt(f64(START))}
            data = tuple(jnp.asarray(train[k]) for k in ("start_pos", "start_vel", "pos", "vel"))
            fit_args = data + (true["mass"], f64([0.0, 0.0, gravity]), f64(use_net))
            t0 = time.perf_counter()
            res = jc.optim.lbfgs(loss, x0, args=fit_args, max_iterations=iterations,
                                 rtol=1e-12)
            seconds = time.perf_counter() - t0
            mu, zeta = (float(c) ** 2 for c in res.x["contact"])
            mass = np.asarray(true["mass"])
            kd = zeta * critical(mass)
            e_model = float(jc.damping_to_restitution(kd, K_N, mass[2]))
            theta = {"net": jax.tree.map(lambda w: use_net * w, res.x["net"]),
                     "mass": true["mass"], "gravity": f64([0.0, 0.0, gravity]),
                     "mu": f64(mu), "zeta": f64(zeta)}
            # 5-step test chunks
            _, p, v, _ = run(theta, batch_states(test["start_pos"], test["start_vel"]))
            err, ref = relative_l1(np.asarray(p)[:, SUB - 1::SUB], np.asarray(v)[:, SUB - 1::SUB],
                                   test["pos"], test["vel"])
            chunk_rel = err.sum(axis=1) / ref.sum(axis=1)
            # 50-step rollouts from the test trajectories' starts
            lp, lv, _, ok_long = long_rollout(theta, test_traj["pos"][:, 0],
                                              test_traj["vel"][:, 0], HORIZON // CHUNK)
            e_long, r_long = relative_l1(lp[:, 1:], lv[:, 1:], test_traj["pos"][:, 1:HORIZON + 1],
                                         test_traj["vel"][:, 1:HORIZON + 1])
            curves[(task, variant)] = (e_long / r_long).mean(axis=0)
            if variant == "network":
                samples[task] = (test_traj["pos"][0, :HORIZON + 1, 2], lp[0, :, 2])
                task_out["sample_start_angles"] = np.asarray(jc.learned.chain_angles(
                    test_traj["pos"][0, 0], jnp.asarray(PIVOT))).tolist()
            task_out[variant] = {
                "friction": mu, "damping": kd, "damping_ratio": zeta,
                "restitution_eq22": e_model,
                "test_chunk_relative_l1": {"mean": float(chunk_rel.mean()),
                                           "ci95": float(1.96 * chunk_rel.std(ddof=1)
                                                         / np.sqrt(len(chunk_rel)))},
                "rollout50_relative_l1_final": float(curves[(task, variant)][-1]),
                "rollout50_relative_l1": curves[(task, variant)].tolist(),
                "rollouts_converged": ok_long,
                "lbfgs": {"iterations": res.iterations, "simulations": res.simulations,
                          "loss_ratio": res.value / res.history[0], "status": res.status,
                          "seconds": seconds}}
            log(f"{task} {variant}: μ {mu:.4f} (truth {TASKS[task]['friction']}), ζ {zeta:.4f}"
                f", e(Eq. 22) {e_model:.3f}; test chunk rel. L1 {chunk_rel.mean():.2e}; "
                f"50-step {curves[(task, variant)][-1]:.2e}; {res.iterations} it, "
                f"{seconds:.0f} s ({res.status})")
            if variant == "network":
                task_out["potential"] = potential_error(res.x["net"], test_traj["pos"], mass)
        results[task] = task_out

    drop = measured_restitution(results)
    for task in TASKS:
        for key, value in drop[task].items():
            results[task].setdefault(key, {})["restitution_measured"] = value

    result = {
        "setup": {"dt": DT, "observed_dt": DT_OBS, "chunk": CHUNK, "horizon": HORIZON,
                  "trajectory_length": LENGTH, "links": LINKS, "radii": RADII, "pivot": PIVOT,
                  "contact_stiffness": K_N, "link_stiffness": K_LINK, "hidden": HIDDEN,
                  "network_scale_J": SCALE, "tasks": TASKS, "start_mu_zeta": START,
                  "optimizer": "jc.optim.lbfgs, full batch", "max_iterations": iterations,
                  "quick": args.quick},
        "paper_table2": PAPER,
        "paper_chunks": 800,
        "results": results,
        "seconds": time.perf_counter() - t_all,
    }

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    steps = np.arange(1, HORIZON + 1)
    for ax, task in zip(axes[:2], TASKS):
        for variant, style in (("network", "-"), ("known_potential", "--")):
            ax.semilogy(steps, curves[(task, variant)], style, label=variant.replace("_", " "))
        ax.axvline(CHUNK, color="0.5", ls=":", label="training chunk length")
        ax.set_xlabel("observed step (10 ms)")
        ax.set_ylabel("relative L1 error")
        ax.set_title(task)
        ax.legend()
    for task, color in zip(TASKS, ("C0", "C1")):
        true_z, pred_z = samples[task]
        t = DT_OBS * np.arange(len(true_z))
        axes[2].plot(t, true_z[:, 2], color=color, label=f"{task} true")
        axes[2].plot(t, pred_z[:, 2], color=color, ls="--", label=f"{task} network")
    axes[2].axhline(RADII[2], color="0.5", ls=":", label="ground contact")
    axes[2].set_xlabel("t (s)")
    axes[2].set_ylabel("lowest mass z (m)")
    axes[2].legend(fontsize=7)
    finish_figure(fig, axes, "Zhong et al. 2021 CP3 / CP3-e: learned potential V(θ) and contact "
                  "(μ, k_d); error along 50-step test rollouts (their Fig. 4)")
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 0.95))
    save(NAME, result, fig, args.out_dir)


def potential_error(params, trajectories, mass):
    """Relative RMS error of the learned V(θ) - mean against the true Σ m_i g z_i - mean over
    the test trajectories' configurations (a potential is known up to a constant)."""
    module = Potential()
    points = trajectories.reshape(-1, 3, 3)
    feats = jax.vmap(lambda q: angle_features(jc.Local(
        pos=jnp.zeros((0, 3)), quat=jnp.zeros((0, 4)), vel=jnp.zeros((0, 3)),
        ang_vel=jnp.zeros((0, 3)), particle_pos=q, particle_vel=jnp.zeros_like(q))))(
        jnp.asarray(points))
    learned = SCALE * np.asarray(jax.vmap(lambda f: module.apply(params, f)[0])(feats))
    true = G * (points[:, :, 2] @ mass)
    learned, true = learned - learned.mean(), true - true.mean()
    return {"relative_rms": float(np.sqrt(np.mean((learned - true) ** 2) / np.mean(true ** 2))),
            "configurations": int(len(points))}


def measured_restitution(results):
    """The lowest mass dropped at 3 m/s on the ground (μ = 0) with each fitted k_d: the
    restitution the simulator gives (implicit Euler's numerical damping included)."""
    rows = [(task, key) for task in TASKS for key in ("truth", "network", "known_potential")]
    damping = []
    for task, key in rows:
        mass = np.asarray(TASKS[task]["mass"])
        if key == "truth":
            damping.append(float(jc.restitution_to_damping(TASKS[task]["restitution"], K_N,
                                                           mass[2])))
        else:
            damping.append(results[task][key]["damping"])
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, -G))
    scene.add_plane(friction=0.0, stiffness=K_N, damping=0.0)
    scene.add_particle(0.15, (0.0, 0.0, RADII[2] + 0.05), vel=(0.0, 0.0, -3.0),
                       radius=RADII[2], friction=0.0, stiffness=K_N, damping=0.0)
    model, state = scene.build(dtype=jnp.float64)

    def bounce(kd, mass):
        m = model.replace(particle=model.particle.replace(damping=jnp.reshape(kd, (1,)),
                                                          mass=jnp.reshape(mass, (1,))),
                          plane=model.plane.replace(damping=jnp.reshape(kd, (1,))))
        _, traj = jc.rollout(m, state, steps=int(0.15 / DT))
        return jnp.max(traj.particle_vel[:, 0, 2]) / 3.0

    masses = [TASKS[task]["mass"][2] for task, _ in rows]
    e = np.asarray(jc.jit(jax.vmap(bounce))(jnp.asarray(damping), jnp.asarray(masses)))
    out = {task: {} for task in TASKS}
    for (task, key), value in zip(rows, e):
        out[task][key] = max(float(value), 0.0)
    return out


if __name__ == "__main__":
    main()
