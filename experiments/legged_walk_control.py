"""Issue 13: a closed-loop legged task. A policy for `jc.scenes.legged_robot` is trained
through the simulator (analytic policy gradients, `jaxcontact.control.train`) and with Brax
PPO through the adapter (`BraxEnv`) at equal simulator steps, and both are evaluated on
held-out randomizations.

Task (`jaxcontact.control.walk_task`): the quadruped walks +x for 2 s (100 steps of 20 ms,
float64, `jc.Newton(iterations=30)`); at each reset every body's and the ground's friction is
drawn in U(0.4, 1.2) and the torso's mass in 2 kg × U(0.7, 1.3). The policy is a memoryless
MLP on 28 observations (torso height, gravity in the torso frame, torso velocities in the
torso frame, hinge angles and rates, a 2 Hz phase clock). Its 8 actions in [-1, 1] are
residual motor targets, 0.3 rad at ±1, added to the hand-written trot
(`jc.scenes.trot_targets`): a zero action walks the open-loop trot. Reward per step: the
torso's forward velocity (m/s) - 0.02 mean(a²) - 5 (1 - up_z); an episode ends early when the
torso tilts past 60° or drops below half its height.

The reward also pays 1 per step the episode lasts (`alive_bonus=1`), so that a fall costs
the rest of the episode.

- APG + critic: `train` with windows of 25 steps, a batch of 8 environments, Adam 1e-3,
  gradients clipped to norm 1; an MLP 28-64-64-8 (tanh). Each window is closed by a learned
  value (`jaxcontact.control.Critic`: an MLP 28-64-64-1 (tanh) on the same observations,
  γ = 0.95, TD(λ = 0.95) targets, 16 Adam 1e-3 steps per update; SHAC). Simulator steps =
  updates × batch × window.
- APG, windows only: the same without the critic. The bonus is a constant, so it gives no
  gradient here, and a window's objective does not see what a fall costs after the window.
- PPO: `brax.training.agents.ppo.train` on `BraxEnv` of the same task, docs/guide/control.md's
  example settings scaled to the task (16 environments, unroll 10, 4 minibatches of 16, 8 passes,
  learning rate 1e-3, discount 0.97, entropy 1e-2, normalized observations), Brax's default
  networks (policy 4 × 32, value 5 × 256, swish), `num_timesteps` = APG's step count. Brax's
  evaluator is off (`run_evals=False`: compiling it costs minutes); its learning curve is the
  rolling mean reward of the training episodes (`log_training_metrics`).
- Evaluation: 32 held-out draws (a key no training run uses), one deterministic 2 s episode
  each: forward distance of the torso (up to a fall), falls, return. References: the
  untrained MLP and the open-loop trot (zero action).

Wall times are for one CPU core; run single-threaded and pinned, as the numbers in
docs/experiments.md were:
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        taskset -c 1 python -m experiments.legged_walk_control [--quick] [--seeds 3]
Compilation dominates short runs (the step's programs take minutes to compile on one core);
the script keeps a persistent compilation cache in .jax_cache/, so re-runs of the same
settings reuse the programs. (tests/conftest.py's compile-for-speed flags, tried, cut the
compilation of the training update by only ~10 % here and slowed its steps: not used.)
"""

from __future__ import annotations

import math
import pathlib
import time
from functools import partial


import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
from experiments._common import use_compile_cache  # noqa: E402

use_compile_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from jaxcontact import control  # noqa: E402
from jaxcontact.math import quat_rotate  # noqa: E402
from jaxcontact.step import step as physics_step  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "legged_walk_control"
DT, EPISODE = 0.02, 100
SOLVER = jc.Newton(iterations=30)
ALIVE_BONUS = 1.0
CRITIC = dict(hidden=(64, 64), discount=0.95, lam=0.95, iterations=16)
WINDOW, BATCH, HIDDEN, LR = 25, 8, (64, 64), 1e-3
UPDATES, QUICK_UPDATES = 80, 6
PPO = dict(num_envs=16, batch_size=16, num_minibatches=4, unroll_length=10,
           num_updates_per_batch=8, learning_rate=1e-3, discounting=0.97, entropy_cost=1e-2,
           normalize_observations=True)
# one epoch: Brax rounds num_timesteps up to a multiple of epochs x 640 (16 x 10 x 4) steps,
# and one epoch keeps it equal to APG's count (updates x 200) for updates a multiple of 16,
# as the default 80 (--quick's 6 updates: 1200 steps, PPO 1280); the curve comes from
# the training episodes, logged every PPO_LOG_STEPS (Brax's evaluator is off: compiling it
# costs minutes)
PPO_EPOCHS, PPO_LOG_STEPS = 1, 1280
EVAL_DRAWS, QUICK_EVAL_DRAWS = 32, 8
HELD_OUT = 2**31 - 1          # the evaluation key's seed; training keys use the run's seed
NONFINITE_REWARD = -2.0       # below any reward a step can earn (|v_x| << 1 m/s here)
OPTIMIZER = optax.adam(LR)    # one object: every seed reuses the compiled update


def make_task():
    return control.walk_task(dt=DT, episode_length=EPISODE, solver=SOLVER, dtype=jnp.float64,
                             alive_bonus=ALIVE_BONUS)


@partial(jc.jit, static_argnames=("rules", "observe", "act", "action_fn"))
def _episodes(scene, params, keys, *, rules, observe, act, action_fn):
    """One deterministic episode per key from the task's reset; per episode: forward
    distance of the torso (body 0; m, up to a fall), fell, return, converged fraction, and
    over the episode's steps the largest torso tilt (deg), the lowest torso height (m), the
    largest torso speed along x (m/s) and the largest solver residual (m/s)."""

    def one(key):
        model, state = rules.initial(scene, key)
        x0 = state.pos[0, 0]

        def body(c, _):
            state, alive, x, ret = c
            control_ = act(model, state, action_fn(params, observe(model, state)))
            new, info = physics_step(model, state, control_)
            ret = ret + jnp.where(alive, rules.reward(model, state, control_, new), 0.0)
            x = jnp.where(alive, new.pos[0, 0], x)
            alive = alive & ~rules.done(model, new)
            up_z = quat_rotate(new.quat[0], jnp.asarray([0.0, 0.0, 1.0], x.dtype))[2]
            tilt = jnp.degrees(jnp.arccos(jnp.clip(up_z, -1.0, 1.0)))
            return (new, alive, x, ret), (info.converged, tilt, new.pos[0, 2], new.vel[0, 0],
                                          info.residual)

        init = (state, jnp.ones((), bool), x0, jnp.zeros((), x0.dtype))
        (_, alive, x, ret), (converged, tilt, z, vx, residual) = jax.lax.scan(
            body, init, None, length=rules.episode_length)
        return (x - x0, ~alive, ret, jnp.mean(converged), jnp.max(tilt), jnp.min(z),
                jnp.max(vx), jnp.max(residual))

    return jax.vmap(one)(keys)


def evaluate(walk, params, action_fn, draws):
    keys = jax.random.split(jax.random.key(HELD_OUT), draws)
    scene = (walk.task.model, walk.task.state)
    out = _episodes(scene, params, keys, rules=walk.task.rules(), observe=walk.observe,
                    act=walk.act, action_fn=action_fn)
    dist, fell, ret, conv, tilt, z, vx, residual = (np.asarray(v) for v in out)
    return {"forward_m_mean": float(dist.mean()), "forward_m_std": float(dist.std()),
            "forward_m_min": float(dist.min()), "forward_m_max": float(dist.max()),
            "falls": int(fell.sum()), "return_mean": float(ret.mean()),
            "converged_fraction": float(conv.mean()), "max_tilt_deg": float(tilt.max()),
            "min_torso_height_m": float(z.min()), "max_speed_x_m_s": float(vx.max()),
            "max_residual_m_s": float(residual.max()), "forward_m": dist.round(4).tolist()}


def mlp_action(policy):
    # the MLP on an observation (the same network `policy` runs on states)
    return lambda params, obs: jnp.tanh(policy.network.apply(params, obs))


def run_apg(walk, policy, seed, updates, critic=None):
    params = policy.init(jax.random.key(seed), walk.task.state)
    start = time.perf_counter()
    result = control.train(walk.task, policy, params, key=jax.random.key(1000 + seed),
                           updates=updates, batch=BATCH, window=WINDOW, optimizer=OPTIMIZER,
                           critic=critic, progress=False)
    name = "APG + critic" if critic is not None else "APG, windows only"
    wall = time.perf_counter() - start
    per_update = BATCH * WINDOW
    curve = [{"steps": (k + 1) * per_update, "reward_per_step": row["reward"],
              "converged": row["converged"], "grad_norm": row["grad_norm"],
              "seconds": row["seconds"], "value": row.get("value"),
              "critic_loss": row.get("critic_loss")} for k, row in enumerate(result.history)]
    log(f"  {name} seed {seed}: {updates} updates, {updates * per_update} steps, {wall:.0f} s "
        f"(first update {result.first_update_seconds:.0f} s); window reward "
        f"{result.history[0]['reward']:.3f} -> "
        f"{np.mean([r['reward'] for r in result.history[-10:]]):.3f}")
    return params, result.params, {"wall_s": wall,
                                   "first_update_s": result.first_update_seconds,
                                   "simulator_steps": updates * per_update, "curve": curve}


def ppo_inference(env):
    from brax.training.acme import running_statistics
    from brax.training.agents.ppo import networks as ppo_networks

    nets = ppo_networks.make_ppo_networks(
        env.observation_size, env.action_size,
        preprocess_observations_fn=running_statistics.normalize)
    make = ppo_networks.make_inference_fn(nets)
    key = jax.random.key(0)
    return lambda params, obs: make(params, deterministic=True)(obs, key)[0]


def run_ppo(env, seed, steps, epochs):
    from brax.training.agents.ppo import train as ppo

    curve, start = [], time.perf_counter()

    def progress(num_steps, metrics):
        # training episodes (Brax's rolling mean of the last 100 that ended); the epoch-end
        # calls carry no episode metrics
        if "episode/sum_reward" not in metrics:
            return
        now = time.perf_counter() - start
        length = max(float(metrics.get("episode/length", EPISODE)), 1.0)
        curve.append({"steps": int(num_steps), "seconds": now,
                      "episode_reward": float(metrics["episode/sum_reward"]),
                      "reward_per_step": float(metrics["episode/sum_reward"]) / length,
                      "episode_length": length})
        log(f"  PPO seed {seed}: {int(num_steps)} steps, training reward per step "
            f"{curve[-1]['reward_per_step']:.3f} (episode length {length:.0f}), {now:.0f} s")

    _, params, _ = ppo.train(env, num_timesteps=steps, episode_length=EPISODE, seed=seed,
                             num_evals=epochs + 1, run_evals=False, log_training_metrics=True,
                             training_metrics_steps=PPO_LOG_STEPS, progress_fn=progress, **PPO)
    wall = time.perf_counter() - start
    per_step = PPO["batch_size"] * PPO["unroll_length"] * PPO["num_minibatches"]
    done = math.ceil(steps / (epochs * per_step)) * epochs * per_step   # Brax's count
    log(f"  PPO seed {seed}: {done} steps, {wall:.0f} s")
    # the first log follows the first PPO_LOG_STEPS steps, its compilation included
    return params, {"wall_s": wall, "first_log_s": curve[0]["seconds"] if curve else None,
                    "simulator_steps": done, "curve": curve}


def summary(runs, key):
    means = np.array([r[key]["forward_m_mean"] for r in runs])
    return {"forward_m_mean_over_seeds": float(means.mean()),
            "forward_m_std_over_seeds": float(means.std()),
            "forward_m_per_seed": means.round(4).tolist(),
            "falls_per_seed": [r[key]["falls"] for r in runs],
            "return_mean_over_seeds": float(np.mean([r[key]["return_mean"] for r in runs]))}


def figure(result):
    """Learning curves and held-out distances (with falls) of a result."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, trot, steps = result["runs"], result["open_loop_trot"], \
        result["simulator_steps_per_trainer"]
    seeds, draws = result["seeds"], result["held_out_draws"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    styles = (("apg", "C0", "-", "APG + critic (training windows)"),
              ("apg_windows", "C4", "--", "APG, windows only"),
              ("ppo", "C1", "o-", "PPO (training episodes, rolling mean)"))
    for i, run in enumerate(runs):
        for key, color, line, label in styles:
            c = run[key]["curve"]
            axes[0].plot([x["steps"] for x in c], [x["reward_per_step"] for x in c],
                         color=color, linestyle="-" if line == "o-" else line,
                         marker="o" if line == "o-" else None, alpha=0.7,
                         label=label if i == 0 else None)
    axes[0].set_xlabel("simulator steps (training)")
    axes[0].set_ylabel("reward per step")
    axes[0].legend(fontsize=8)
    names = ["open-loop\ntrot", "untrained", "APG +\ncritic", "APG,\nwindows only", "PPO"]
    per_seed = [[trot["forward_m_mean"]] * len(runs),
                *[[r[k]["forward_m_mean"] for r in runs]
                  for k in ("untrained_eval", "apg_eval", "apg_windows_eval", "ppo_eval")]]
    falls = [trot["falls"] * len(runs),
             *[sum(r[k]["falls"] for r in runs)
               for k in ("untrained_eval", "apg_eval", "apg_windows_eval", "ppo_eval")]]
    for j, values in enumerate(per_seed):
        axes[1].bar(j, np.mean(values), color=f"C{j + 2}", alpha=0.5)
        axes[1].plot([j] * len(values), values, "k.")
        axes[1].annotate(f"{falls[j]}/{len(runs) * draws} falls", (j, np.mean(values)),
                         ha="center", va="bottom", fontsize=8)
    axes[1].set_xticks(range(len(names)), names)
    axes[1].set_ylabel("held-out forward distance in 2 s (m)")
    finish_figure(fig, axes, f"Quadruped walking on randomized friction and mass: {steps} "
                             f"simulator steps per trainer, {seeds} seed(s), {draws} "
                             "held-out draws")
    return fig


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=None, help="training seeds (default 3; 1 quick)")
    p.add_argument("--updates", type=int, default=None, help="APG updates per seed")
    p.add_argument("--replot", type=pathlib.Path, default=None,
                   help="redraw the figure of a result JSON into --out-dir (no runs)")
    args = p.parse_args()
    if args.replot is not None:
        import json
        result = json.loads(args.replot.read_text())
        args.out_dir.mkdir(parents=True, exist_ok=True)
        figure(result).savefig(args.out_dir / f"{NAME}.png", dpi=110, bbox_inches="tight")
        return
    seeds = args.seeds or (1 if args.quick else 3)
    updates = args.updates or (QUICK_UPDATES if args.quick else UPDATES)
    draws = QUICK_EVAL_DRAWS if args.quick else EVAL_DRAWS
    steps = updates * BATCH * WINDOW
    t_start = time.perf_counter()

    from jaxcontact.control.brax_env import BraxEnv, device_put_replicated
    jax.device_put_replicated = device_put_replicated   # Brax 0.14's trainers on JAX >= 0.10

    walk = make_task()
    policy = walk.mlp_policy(hidden=HIDDEN)
    env = BraxEnv(walk.task, observe=walk.observe, act=walk.act,
                  action_size=walk.action_size, nonfinite_reward=NONFINITE_REWARD)
    mlp, ppo_act = mlp_action(policy), ppo_inference(env)
    log(f"{seeds} seed(s), {steps} simulator steps per trainer and seed, {draws} held-out "
        "draws")

    zero = jax.tree.map(jnp.zeros_like, policy.init(jax.random.key(0), walk.task.state))
    t0 = time.perf_counter()
    trot = evaluate(walk, zero, mlp, draws)     # zero weights: action 0, the open-loop trot
    log(f"open-loop trot: {trot['forward_m_mean']:.3f} ± {trot['forward_m_std']:.3f} m, "
        f"{trot['falls']} falls ({time.perf_counter() - t0:.0f} s, compile included)")

    critic = walk.critic(**CRITIC)
    runs = []
    for seed in range(seeds):
        log(f"seed {seed}")
        initial, trained, apg = run_apg(walk, policy, seed, updates, critic=critic)
        _, trained_windows, apg_windows = run_apg(walk, policy, seed, updates)
        ppo_params, ppo_run = run_ppo(env, seed, steps, PPO_EPOCHS)
        run = {"seed": seed, "apg": apg, "apg_windows": apg_windows, "ppo": ppo_run,
               "untrained_eval": evaluate(walk, initial, mlp, draws),
               "apg_eval": evaluate(walk, trained, mlp, draws),
               "apg_windows_eval": evaluate(walk, trained_windows, mlp, draws)}
        t0 = time.perf_counter()
        run["ppo_eval"] = evaluate(walk, ppo_params, ppo_act, draws)
        for name in ("apg_eval", "apg_windows_eval", "ppo_eval"):
            e = run[name]
            log(f"  {name}: max tilt {e['max_tilt_deg']:.1f} deg, min torso height "
                f"{e['min_torso_height_m']:.3f} m, max v_x {e['max_speed_x_m_s']:.2f} m/s, "
                f"converged {e['converged_fraction']:.3f}, max residual "
                f"{e['max_residual_m_s']:.3g} m/s")
        log(f"  held out: untrained {run['untrained_eval']['forward_m_mean']:.3f} m, APG + "
            f"critic {run['apg_eval']['forward_m_mean']:.3f} m ({run['apg_eval']['falls']} "
            f"falls), APG windows only {run['apg_windows_eval']['forward_m_mean']:.3f} m "
            f"({run['apg_windows_eval']['falls']} falls), PPO "
            f"{run['ppo_eval']['forward_m_mean']:.3f} m ({run['ppo_eval']['falls']} "
            f"falls; eval {time.perf_counter() - t0:.0f} s)")
        runs.append(run)

    result = {
        "task": "jaxcontact.control.walk_task (residual on the trot), friction U(0.4, 1.2), "
                f"torso mass 2 kg x U(0.7, 1.3), alive_bonus {ALIVE_BONUS}",
        "dt": DT, "episode_length": EPISODE, "dtype": "float64",
        "solver": "jc.Newton(iterations=30)",
        "apg_settings": {"window": WINDOW, "batch": BATCH, "updates": updates,
                         "hidden": list(HIDDEN), "adam_lr": LR, "clip": 1.0,
                         "critic": {**CRITIC, "hidden": list(CRITIC["hidden"]),
                                    "adam_lr": 1e-3}},
        "ppo_settings": {**PPO, "num_timesteps": steps, "run_evals": False,
                         "network": "brax default (policy 4 x 32, value 5 x 256, swish)"},
        "simulator_steps_per_trainer": steps, "seeds": seeds, "held_out_draws": draws,
        "open_loop_trot": trot,
        "summary": {"untrained": summary(runs, "untrained_eval"),
                    "apg": summary(runs, "apg_eval"),
                    "apg_windows": summary(runs, "apg_windows_eval"),
                    "ppo": summary(runs, "ppo_eval"),
                    "apg_wall_s": [r["apg"]["wall_s"] for r in runs],
                    "apg_first_update_s": [r["apg"]["first_update_s"] for r in runs],
                    "apg_windows_wall_s": [r["apg_windows"]["wall_s"] for r in runs],
                    "ppo_wall_s": [r["ppo"]["wall_s"] for r in runs],
                    "ppo_first_log_s": [r["ppo"]["first_log_s"] for r in runs],
                    "ppo_simulator_steps": [r["ppo"]["simulator_steps"] for r in runs]},
        "runs": runs,
        "total_wall_s": time.perf_counter() - t_start,
    }
    s = result["summary"]
    log(f"held out forward distance (mean over seeds): trot {trot['forward_m_mean']:.3f}, "
        f"untrained {s['untrained']['forward_m_mean_over_seeds']:.3f}, APG + critic "
        f"{s['apg']['forward_m_mean_over_seeds']:.3f}, APG windows only "
        f"{s['apg_windows']['forward_m_mean_over_seeds']:.3f}, PPO "
        f"{s['ppo']['forward_m_mean_over_seeds']:.3f} m; falls "
        f"{sum(s['apg']['falls_per_seed'])} / {sum(s['apg_windows']['falls_per_seed'])} / "
        f"{sum(s['ppo']['falls_per_seed'])} of {seeds * draws}")

    fig = figure(result)
    save(NAME, result, fig, args.out_dir)
    log(f"total {result['total_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
