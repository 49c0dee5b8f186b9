"""Real data (issue 17): identify a real cube's contact from 550 motion-capture tosses
(ContactNets, CoRL 2020) and predict the held-out tosses, against MuJoCo fitted by CMA-ES.

Data: `jc.data` (0.1048 m cube, 0.37 kg, 148 Hz, 85-139 samples per toss). Split: the 550
tosses are permuted with `np.random.default_rng(0)`; the first 80 % train, the rest test.

Our fit (multiple shooting): windows of `WINDOW` samples, one every `WINDOW` samples of the
training tosses (a subset of `FIT_TOSSES` of them), each simulated from its observed first
sample for `WINDOW` steps (Δt = the sample period); the residual is the predicted minus the
observed positions of the cube's 8 corners after every step. Parameters: Coulomb μ, normal
stiffness k_n (N/m, `linear` law), normal damping k_d (N s/m) and the ground's height δ (the
tracked cube rests 1-2 mm lower than its nominal size allows: `jc.data`), with the same μ,
k_n, k_d on the cube and the ground. Solved by `jc.optim.gauss_newton` (Levenberg-Marquardt,
forward-mode sensitivities through the implicit steps) in x = (log μ, log k_n, log k_d,
δ / 1 mm) from the nominal values (μ = 0.15, our defaults k_n = 1e5, k_d = 300, δ = 0).
Uncertainty: the Gauss-Newton covariance σ² (JᵀJ)⁻¹ (it treats every corner residual as
independent, so it is optimistic), and a bootstrap over training tosses (refits on tosses
resampled with replacement).

MuJoCo (`_mujoco_cube.py`): the same cube and windows, friction and solref = (timeconst,
dampratio) fitted by CMA-ES on the same loss, with the same number of window simulations as
our fit used (a forward-mode Jacobian of P parameters counted as 1 + P simulations per window),
then run on to three times that to show where it goes.

Evaluation on the held-out tosses: every toss simulated from its first observed sample to its
end; errors of the centre (cm and cube widths) and orientation (degrees) at 0.1 s, 0.3 s and
the last sample, and whether the face that ends up is the observed one.

Needs `mujoco`, `cma` and `matplotlib` (`pip install -e ".[test]"` has them). Run from the
repository root (2 cores: about 8 minutes; `--quick` about 2):
    python -m experiments.real_cube_tosses [--quick]
(writes docs/experiments/real_cube_tosses.{json,png,html}).
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from jaxcontact import data  # noqa: E402
from experiments._common import finish_figure, log, parser, save, use_compile_cache  # noqa: E402
from experiments import _mujoco_cube as mjc  # noqa: E402

NAME = "real_cube_tosses"
TRAIN_SHARE = 0.8
WINDOW = 16                     # samples per shooting window (0.109 s)
FIT_TOSSES = 96                 # training tosses whose windows enter the fit
MAX_ITERATIONS = 20             # Gauss-Newton steps (accepted and rejected)
BOOTSTRAP = 3                   # refits on resampled training tosses
BOOTSTRAP_ITERATIONS = 6        # Gauss-Newton steps of each, from the estimate
CMAES_EXTRA = 3                 # CMA-ES runs on to this multiple of our simulations
MODELS = ("ours_nominal", "ours_fitted", "mujoco_nominal", "mujoco_fitted")
NOMINAL = {"friction": data.FRICTION, "stiffness": 1e5, "damping": 300.0, "ground_mm": 0.0}
HORIZONS = {"0.1 s": 0.1, "0.3 s": 0.3, "end": None}
WIDTH = data.EDGE


def to_x(p):
    return jnp.array([np.log(p["friction"]), np.log(p["stiffness"]), np.log(p["damping"]),
                      p["ground_mm"]])


def from_x(x):
    x = np.asarray(x, float)
    return {"friction": float(np.exp(x[0])), "stiffness": float(np.exp(x[1])),
            "damping": float(np.exp(x[2])), "ground_mm": float(x[3])}


def angle_deg(q0, q1):
    return np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(q0 * q1, -1)), 0.0, 1.0)))


def up_face(quat):
    """The body axis (±x, ±y, ±z as 0-5) that points up."""
    w, v = quat[..., :1], quat[..., 1:]
    ez = np.array([0.0, 0.0, 1.0])
    # Rᵀ e_z: the world's up direction in the body frame
    t = 2.0 * np.cross(-v, ez)
    up = ez + w * t + np.cross(-v, t)
    axis = np.argmax(np.abs(up), -1)
    sign = np.take_along_axis(up, axis[..., None], -1)[..., 0] > 0
    return 2 * axis + (~sign)


def predict_ours(model, tosses, ids):
    """(pos, quat) (K, T_max, ...) of full rollouts from each toss's first sample."""
    steps = int(max(tosses.lengths[ids])) - 1
    starts = [data.initial_state(model, tosses.toss(int(k)), 0) for k in ids]
    start = jax.tree.map(lambda *x: jnp.stack(x), *starts)
    run = jc.jit(jax.vmap(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True),
                           in_axes=(None, 0)))
    final, traj, info = run(model, start)
    pos = np.concatenate([np.asarray(start.pos[:, None, 0]), np.asarray(traj.pos[:, :, 0])], 1)
    quat = np.concatenate([np.asarray(start.quat[:, None, 0]),
                           np.asarray(traj.quat[:, :, 0])], 1)
    converged = np.asarray(info.converged)
    valid = np.arange(steps)[None, :] < (tosses.lengths[ids] - 1)[:, None]
    return pos, quat, float(converged[valid].mean())


def scores(tosses, ids, pos, quat):
    """Errors at the horizons and the rest face, against the observed tosses."""
    out = {}
    lengths = tosses.lengths[ids]
    for name, t in HORIZONS.items():
        index = (lengths - 1 if t is None
                 else np.minimum(int(round(t / data.SAMPLE_PERIOD)), lengths - 1))
        obs = [tosses.toss(int(k)) for k in ids]
        err = np.array([np.linalg.norm(pos[j, i] - o.pos[i]) for j, (i, o)
                        in enumerate(zip(index, obs))])
        rot = np.array([angle_deg(quat[j, i], o.quat[i]) for j, (i, o)
                        in enumerate(zip(index, obs))])
        out[name] = {"position_cm_mean": 100 * float(err.mean()),
                     "position_cm_p90": 100 * float(np.percentile(err, 90)),
                     "position_widths_mean": float(err.mean() / WIDTH),
                     "position_widths_p90": float(np.percentile(err, 90) / WIDTH),
                     "orientation_deg_mean": float(rot.mean()),
                     "orientation_deg_p90": float(np.percentile(rot, 90))}
    last = lengths - 1
    face_pred = up_face(np.stack([quat[j, i] for j, i in enumerate(last)]))
    face_obs = up_face(np.stack([tosses.toss(int(k)).quat[-1] for k in ids]))
    out["rest_face_right"] = float(np.mean(face_pred == face_obs))
    return out


def predict_mujoco(sim, params, tosses, ids):
    """(pos, quat) (K, T_max, ...) of MuJoCo rollouts from each toss's first sample (padded
    with the last state)."""
    steps = int(max(tosses.lengths[ids])) - 1
    pos = np.zeros((len(ids), steps + 1, 3))
    quat = np.zeros((len(ids), steps + 1, 4))
    for j, k in enumerate(ids):
        toss = tosses.toss(int(k))
        p, q = mjc.rollout(sim, params, toss, 0, len(toss.time) - 1)
        pos[j], quat[j] = p[-1], q[-1]
        pos[j, :len(p)], quat[j, :len(q)] = p, q
    return pos, quat


def error_curve(tosses, ids, pos):
    """Median centre error (m) against the sample index, over the tosses still running."""
    steps = pos.shape[1]
    err = np.full((len(ids), steps), np.nan)
    for j, k in enumerate(ids):
        o = tosses.toss(int(k))
        n = len(o.time)
        err[j, :n] = np.linalg.norm(pos[j, :n] - o.pos, axis=-1)
    return np.nanmedian(err, 0)


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    use_compile_cache()
    t0 = time.perf_counter()
    tosses = data.load_tosses()
    order = np.random.default_rng(0).permutation(tosses.size)
    cut = int(round(TRAIN_SHARE * tosses.size))
    train, test = np.sort(order[:cut]), np.sort(order[cut:])
    fit_count = 24 if args.quick else FIT_TOSSES
    fit_ids = np.sort(np.random.default_rng(1).choice(train, fit_count, replace=False))
    model, _ = data.cube_scene().build()
    win = data.windows(model, tosses, fit_ids, WINDOW)
    log(f"{len(train)} training and {len(test)} test tosses; {len(win.toss)} windows of "
        f"{WINDOW} samples from {fit_count} training tosses")

    # --- our fit -------------------------------------------------------------------------
    fit_model = jc.optim.forward_mode(model)
    def residual(x, w):
        return data.window_residual(fit_model, x, w)

    x0 = to_x(NOMINAL)
    t = time.perf_counter()
    found = jc.optim.gauss_newton(residual, x0, args=(win,), max_iterations=MAX_ITERATIONS,
                                  rtol=1e-6)
    t_fit = time.perf_counter() - t
    estimate = from_x(found.x)
    r = np.asarray(residual(found.x, win))
    J = np.asarray(found.jacobian)
    sigma2 = float(r @ r) / (len(r) - len(x0))
    cov = sigma2 * np.linalg.pinv(J.T @ J)   # a parameter the data do not determine (damping -> 0) leaves J.T J singular
    std_x = np.sqrt(np.diag(cov))
    log(f"fit: {estimate} in {t_fit:.0f} s, {found.iterations} it., {found.simulations} "
        f"evaluations, status {found.status}; corner rms {np.sqrt(np.mean(r ** 2)) * 1e3:.2f} "
        f"mm (start {np.sqrt(2 * found.history[0] / len(r)) * 1e3 if found.history else 0:.2f})")

    boots = []
    for b in range(2 if args.quick else BOOTSTRAP):
        rng = np.random.default_rng(100 + b)
        pick = rng.choice(fit_ids, len(fit_ids), replace=True)
        bwin = data.windows(model, tosses, pick, WINDOW)
        again = jc.optim.gauss_newton(residual, found.x, args=(bwin,),
                                      max_iterations=BOOTSTRAP_ITERATIONS,
                                      rtol=1e-6)
        boots.append(np.asarray(again.x))
        log(f"bootstrap {b}: {from_x(again.x)}")
    boots = np.array(boots)

    # --- MuJoCo: friction and solref by CMA-ES on the same windows --------------------------
    sim = mjc.CubeSim(cone="elliptic")
    mj_windows = [(int(k), int(i), WINDOW) for k, i in zip(win.toss, win.first)]
    # our simulations in window rollouts: every evaluation counted as a Jacobian (1 + P)
    ours_simulations = found.simulations * (1 + len(x0)) * len(mj_windows)
    t = time.perf_counter()
    cma = mjc.fit_cmaes(sim, tosses, mj_windows, CMAES_EXTRA * ours_simulations, seed=0)
    t_cma = time.perf_counter() - t
    history = np.array(cma["history"], float)
    at_budget = float(history[history[:, 0] <= ours_simulations, 1].min())
    mj_start = mjc.window_loss(sim, mjc.DEFAULT_PARAMS, tosses, mj_windows)
    log(f"MuJoCo CMA-ES: {cma['params']} loss {cma['loss']:.3e} m² (start {mj_start:.3e}, "
        f"{at_budget:.3e} at our budget of {ours_simulations} window simulations) in "
        f"{t_cma:.0f} s, {cma['simulations']} simulations")
    ours_loss = 3.0 * float(np.mean(r ** 2))      # mean |corner error|² (m²), as MuJoCo's
    r0 = np.asarray(residual(x0, win))
    ours_start = 3.0 * float(np.mean(r0 ** 2))

    # --- predictions on the held-out tosses ----------------------------------------------
    predictions = {}
    for name, params in (("mujoco_nominal", mjc.DEFAULT_PARAMS),
                         ("mujoco_fitted", mjc.Params(*cma["params"]))):
        t = time.perf_counter()
        predictions[name] = predict_mujoco(sim, params, tosses, test)
        predictions[name + "_converged"] = None
        log(f"{name}: {len(test)} held-out tosses in {time.perf_counter() - t:.1f} s")
    for name, x in (("ours_nominal", x0), ("ours_fitted", found.x)):
        t = time.perf_counter()
        pos, quat, conv = predict_ours(data.with_contact(model, x), tosses, test)
        predictions[name] = (pos, quat)
        log(f"{name}: {len(test)} held-out tosses in {time.perf_counter() - t:.1f} s, "
            f"{conv:.4f} of the steps converged")
        predictions[name + "_converged"] = conv

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    time_axis = data.SAMPLE_PERIOD * np.arange(int(max(tosses.lengths[test])))
    for name in MODELS:
        axes[2].plot(time_axis, 100 * error_curve(tosses, test, predictions[name][0]),
                     label=name)
    axes[2].set(xlabel="time (s)", ylabel="median centre error (cm)", yscale="log",
                title=f"{len(test)} held-out tosses")
    axes[2].legend(fontsize=8)
    for ax, j in zip(axes[:2], (0, 1)):
        toss = tosses.toss(int(test[j]))
        n = len(toss.time)
        ax.plot(toss.time, toss.pos[:, 2], "k.", label="measured")
        for name in MODELS:
            ax.plot(toss.time, predictions[name][0][j, :n, 2], label=name)
        ax.set(xlabel="time (s)", ylabel="centre height z (m)",
               title=f"held-out toss {int(test[j])}")
        ax.legend(fontsize=8)
    finish_figure(fig, axes, "Real cube tosses: held-out predictions")

    result = {
        "setup": {"tosses": tosses.size, "train": len(train), "test": len(test),
                  "fit_tosses": fit_count, "window_samples": WINDOW,
                  "windows": len(win.toss), "dt_s": data.SAMPLE_PERIOD, "quick": args.quick,
                  "nominal": NOMINAL},
        "fit": {"estimate": estimate,
                "std_gauss_newton": dict(zip(("log_friction", "log_stiffness",
                                              "log_damping", "ground_mm"), std_x.tolist())),
                "bootstrap": [from_x(b) for b in boots],
                "iterations": found.iterations, "evaluations": found.simulations,
                "status": found.status, "seconds": t_fit,
                "window_loss_m2": ours_loss, "window_loss_start_m2": ours_start,
                "corner_rms_mm": 1e3 * float(np.sqrt(ours_loss)),
                "window_simulations": ours_simulations},
        "mujoco": {"cone": "elliptic", "substeps": 4,
                   "estimate": dict(zip(("friction", "timeconst", "dampratio"),
                                        map(float, cma["params"]))),
                   "window_loss_m2": float(cma["loss"]), "window_loss_start_m2": mj_start,
                   "window_loss_at_our_budget_m2": at_budget,
                   "corner_rms_mm": 1e3 * float(np.sqrt(cma["loss"])),
                   "simulations": cma["simulations"], "seconds": t_cma,
                   "history": history.tolist()},
        "held_out": {name: {**scores(tosses, test, *predictions[name]),
                            "steps_converged": predictions[name + "_converged"]}
                     for name in MODELS},
        "runtime_s": round(time.perf_counter() - t0, 1),
    }
    save(NAME, result, fig, args.out_dir)
    viewer(model, tosses, int(test[0]), predictions["ours_fitted"], args.out_dir)


def viewer(model, tosses, k, prediction, out_dir):
    """An HTML viewer of held-out toss k: our fitted prediction (the cube at the toss's
    place) next to the measurement (the cube 0.3 m to its side)."""
    toss = tosses.toss(k)
    n = len(toss.time)
    scene = data.cube_scene()
    scene.add_box(data.EDGE / 2, mass=data.MASS, pos=(0.0, 0.3, data.EDGE / 2))
    both, state = scene.build()
    side = np.array([0.0, 0.3, 0.0])
    pos = np.stack([prediction[0][0, :n], toss.pos + side], 1)
    quat = np.stack([prediction[1][0, :n], toss.quat], 1)
    traj = state.replace(pos=jnp.asarray(pos), quat=jnp.asarray(quat),
                         vel=jnp.zeros_like(jnp.asarray(pos)),
                         ang_vel=jnp.zeros_like(jnp.asarray(pos)),
                         time=jnp.asarray(toss.time),
                         particle_pos=jnp.zeros((n, 0, 3)), particle_vel=jnp.zeros((n, 0, 3)))
    path = out_dir / f"{NAME}.html"
    jc.viz.save_html(both, traj, str(path), title=f"toss {k}: prediction (front) and "
                     "measurement (behind, +0.3 m in y)")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
