"""A compliant legged robot walks forward under hand-written periodic motor targets.

ADD (Geilinger et al. 2020), Fig. 1 and Table 2 "compliant robot": rigid links, soft hinges
and low-gain position motors (Eq. 24-26). Here the quadruped of `jc.scenes.legged_robot`
follows the trot of `jc.scenes.trot_targets` (no optimization), ramped in over 0.5 s.

Claims checked: the torso moves forward (+x) by more than 0.2 m in 3 s, stays upright (its z
axis within 15° of vertical) and at standing height. The whole trajectory (positions and
quaternions of every body, every step) is written to `robot_walk_trajectory.json` next to the
result, for viewing.

Usage: python -m experiments.robot_walk [--quick] [--out-dir DIR]
"""

from __future__ import annotations

import json
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import jaxcontact as jc  # noqa: E402
from jaxcontact import scenes  # noqa: E402
from jaxcontact.math import quat_rotate  # noqa: E402

from experiments._common import finish_figure, log, parser, save  # noqa: E402

DURATION, QUICK_DURATION, RAMP = 3.0, 1.0, 0.5


def walk(duration):
    scene = scenes.legged_robot()
    model, state = scene.build(dtype=jnp.float64)
    steps = round(duration / float(model.dt))
    t = (np.arange(steps) + 1) * float(model.dt)
    targets = scenes.trot_targets(t) * np.minimum(t / RAMP, 1.0)[:, None]
    n = model.n_body
    controls = jc.Control(force=jnp.zeros((steps, n, 3)), torque=jnp.zeros((steps, n, 3)),
                          motor=jnp.asarray(targets))
    start = time.perf_counter()
    run = jc.jit(lambda m, s, c: jc.rollout(m, s, c, return_info=True))
    final, traj, info = jax.block_until_ready(run(model, state, controls))
    wall = time.perf_counter() - start
    return scene, model, state, t, targets, traj, info, wall


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    duration = QUICK_DURATION if args.quick else DURATION
    scene, model, state, t, targets, traj, info, wall = walk(duration)
    torso = scene.info["torso"]
    pos = np.asarray(traj.pos[:, torso])
    up = np.asarray(jax.vmap(lambda q: quat_rotate(q, jnp.asarray([0.0, 0.0, 1.0])))(
        traj.quat[:, torso]))
    tilt = np.degrees(np.arccos(np.clip(up[:, 2], -1.0, 1.0)))
    start_z = float(state.pos[torso, 2])
    forward = float(pos[-1, 0] - state.pos[torso, 0])
    result = {
        "scene": "jc.scenes.legged_robot() with jc.scenes.trot_targets, ramped over 0.5 s",
        "dt": float(model.dt), "steps": len(t), "duration_s": duration,
        "forward_distance_m": forward,
        "mean_speed_m_s": forward / duration,
        "lateral_drift_m": float(pos[-1, 1] - state.pos[torso, 1]),
        "max_tilt_deg": float(tilt.max()),
        "torso_height_range_m": [float(pos[:, 2].min()), float(pos[:, 2].max())],
        "start_height_m": start_z,
        "converged_fraction": float(np.mean(info.converged)),
        "max_residual": float(np.max(info.residual)),
        "mean_iterations": float(np.mean(info.iterations)),
        "wall_s_with_compile": round(wall, 2),
        "claims": {
            "walks_forward_over_0.2m": forward > (0.2 if not args.quick else 0.02),
            "upright_within_15deg": bool(tilt.max() < 15.0),
            "keeps_height": bool(pos[:, 2].min() > 0.8 * start_z),
        },
    }
    trajectory = {"dt": float(model.dt), "bodies": {k: v for k, v in scene.info.items()
                                                    if k in ("torso", "thighs", "shanks")},
                  "shapes": [int(s) for s in model.geom.shape],
                  "size": np.asarray(model.geom.size).tolist(),
                  "pos": np.asarray(traj.pos).round(5).tolist(),
                  "quat": np.asarray(traj.quat).round(6).tolist(),
                  "motor_targets": np.asarray(targets).round(5).tolist()}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "robot_walk_trajectory.json").write_text(json.dumps(trajectory) + "\n")
    log(f"forward {forward:.3f} m, max tilt {tilt.max():.1f} deg, "
        f"converged {result['converged_fraction']:.3f}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    axes[0].plot(t, pos[:, 0], label="x (forward)")
    axes[0].plot(t, pos[:, 1], label="y")
    axes[0].set_xlabel("t (s)"), axes[0].set_ylabel("torso position (m)"), axes[0].legend()
    axes[1].plot(t, pos[:, 2]), axes[1].set_xlabel("t (s)"), axes[1].set_ylabel("torso z (m)")
    axes[2].plot(t, targets[:, 0], label="front-left hip target")
    axes[2].plot(t, targets[:, 1], label="front-left knee target")
    axes[2].set_xlabel("t (s)"), axes[2].set_ylabel("rad"), axes[2].legend(fontsize=7)
    finish_figure(fig, axes, f"Compliant quadruped, open-loop trot: {forward:.2f} m in "
                             f"{duration:.0f} s, max tilt {tilt.max():.1f}°")
    save("robot_walk", result, fig, args.out_dir)


if __name__ == "__main__":
    main()
