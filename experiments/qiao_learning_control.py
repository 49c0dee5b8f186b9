"""Qiao et al. 2020 learning control: a pusher brings a box to a random target within 1 s.

Qiao, Liang, Koltun, Lin, "Scalable Differentiable Physics for Learning and Control" (ICML
2020), Sec. 5 "learning control": a neural network (MLP, 50 and 200 units, ReLU) drives a
manipulator that must bring an object to a randomised target within 1 s; its inputs are the
distance to the target, the speed and the remaining time; it is updated once per episode by
the gradient through the simulator, and "quickly converges", while the model-free baseline
(DDPG) "fails to learn the task on a comparable time scale" (5 seeds, no numbers given).

Here: `jaxcontact.control.pusher_task` (a ball driven by a horizontal force pushes a box
that slides with friction; targets drawn in a 0.4 m x 0.5 m rectangle ahead of the box).
- Through the simulator: `jaxcontact.control.train` with the paper's network, one update per
  batch of `APG_BATCH` whole episodes (window = episode), Adam.
- Model-free: Brax's PPO (`brax.training.agents.ppo.train`, unchanged) on the same task
  through `jaxcontact.control.brax_env.BraxEnv`, the same policy network (50, 200, ReLU; the
  value network is Brax's default), observation normalization on.
Both are scored on the same 100 held-out targets (a key neither trainer sees) by the box's
distance to the target at t = 1 s (the paper's loss), at checkpoints along training; the
comparison is read at equal simulator steps (APG's whole budget) and at equal wall time
(APG's whole run, compilation included for both). `--seeds` seeds each (default 5).

Timings are for one CPU core; run it pinned and single-threaded so another job cannot skew
them:
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        taskset -c 0 python -m experiments.qiao_learning_control

Usage: python -m experiments.qiao_learning_control [--quick] [--seeds N] [--out-dir DIR]
"""

from __future__ import annotations

import functools
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxcontact as jc
from jaxcontact import control
from jaxcontact.control.brax_env import BraxEnv, device_put_replicated

from experiments._common import finish_figure, log, parser, save  # noqa: E402

HIDDEN = (50, 200)                  # Qiao et al.'s network
OUTPUT_SCALE = 10.0                 # first pushes of order 1 (see MLPPolicy.output_scale)
EVAL_TARGETS = 100
EVAL_KEY = 12345                    # held-out targets: no trainer sees this key
SOLVER = jc.Newton(iterations=30)   # the pusher's impacts need up to ~15 iterations
DTYPE = jnp.float32

APG_BATCH = 8
APG_LR = 1e-3
WARMUP_SEED = 100                   # the compiling run's seed (not among the seeds)
APG_CHUNK = 10                      # updates between held-out evaluations
PPO = dict(num_envs=32, batch_size=32, num_minibatches=4, unroll_length=10,
           num_updates_per_batch=4, learning_rate=3e-4, entropy_cost=1e-2, discounting=0.97,
           normalize_observations=True, reward_scaling=1.0)


def make_task():
    return control.pusher_task(solver=SOLVER, dtype=DTYPE)


@functools.partial(jc.jit, static_argnames=("policy", "rules", "length"))
def _held_out(params, scene, keys, *, policy, rules, length):
    """Final distance of the box to the target (m) and the return, one per key."""
    def episode(key):
        model, state = rules.initial(scene, key)

        def body(s, _):
            c = policy(params, s)
            new, info = jc.step(model, s, c)
            return new, (rules.reward(model, s, c, new), info.converged)

        final, (rewards, converged) = jax.lax.scan(body, state, None, length=length)
        return jnp.linalg.norm(final.pos[0, :2]), jnp.sum(rewards), jnp.mean(converged)
    return jax.vmap(episode)(keys)


def held_out(push, policy, params):
    keys = jax.random.split(jax.random.key(EVAL_KEY), EVAL_TARGETS)
    task = push.task
    d, ret, conv = _held_out(params, (task.model, task.state), keys, policy=policy,
                             rules=task.rules(), length=task.episode_length)
    return {"distance": float(jnp.mean(d)), "distance_median": float(jnp.median(d)),
            "return": float(jnp.mean(ret)), "converged": float(jnp.mean(conv))}


def run_apg(push, policy, seed, updates, optimizer, estimator=None):
    params = policy.init(jax.random.key(seed), push.task.state)
    window = push.task.episode_length
    # an estimator's update simulates its samples' windows too
    steps_per_update = APG_BATCH * window * (1 if estimator is None else estimator.simulations)
    curve = [{"steps": 0, "seconds": 0.0, **held_out(push, policy, params)}]
    opt_state, wall, key = None, 0.0, jax.random.key(1000 + seed)
    first = None
    for chunk in range(0, updates, APG_CHUNK):
        n = min(APG_CHUNK, updates - chunk)
        key, sub = jax.random.split(key)
        start = time.perf_counter()
        result = control.train(push.task, policy, params, key=sub, updates=n, batch=APG_BATCH,
                               window=window, optimizer=optimizer, opt_state=opt_state,
                               progress=False, estimator=estimator)
        wall += time.perf_counter() - start
        first = result.first_update_seconds if first is None else first
        params, opt_state = result.params, result.opt_state
        row = held_out(push, policy, params)
        row.update(steps=(chunk + n) * steps_per_update, seconds=wall,
                   train_converged=float(np.mean([h["converged"] for h in result.history])))
        curve.append(row)
        log(f"  APG seed {seed}: {chunk + n}/{updates} updates, {row['steps']} steps, "
            f"{wall:.0f} s, held-out distance {row['distance']:.3f} m")
    return {"curve": curve, "first_update_seconds": first, "wall_seconds": wall}


def _apg_optimizer(learning_rate):
    # one object for all seeds: their runs share the compiled update
    return optax.adam(learning_rate, b1=0.95)     # Adam as ADD's E13 (and Qiao); b1 as E13


@functools.cache
def _ppo_inference(observation_size, action_size):
    from brax.training.acme import running_statistics
    from brax.training.agents.ppo import networks as ppo_networks
    network = ppo_networks.make_ppo_networks(
        observation_size, action_size, preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=HIDDEN, activation=nn.relu)
    return ppo_networks.make_inference_fn(network)


def _ppo_policy(push):
    inference = _ppo_inference(int(push.observe(push.task.model, push.task.state).shape[0]),
                               push.action_size)
    model = push.task.model

    def policy(params, state):
        action, _ = inference(params, deterministic=True)(push.observe(model, state),
                                                          jax.random.key(0))
        return push.act(model, state, action)
    return policy


def run_ppo(push, policy, seed, timesteps, checkpoints):
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    jax.device_put_replicated = device_put_replicated   # Brax 0.14's trainers on JAX 0.10
    env = BraxEnv(push.task, observe=push.observe, act=push.act, action_size=push.action_size)
    saved = []
    start = time.perf_counter()

    def keep(step, make_policy, params):
        saved.append((int(step), time.perf_counter() - start, jax.device_get(params[:2])))
        log(f"  PPO seed {seed}: {step} steps, {saved[-1][1]:.0f} s")

    ppo.train(env, num_timesteps=timesteps, episode_length=push.task.episode_length,
              num_evals=checkpoints, run_evals=False, seed=seed, policy_params_fn=keep,
              network_factory=functools.partial(ppo_networks.make_ppo_networks,
                                                policy_hidden_layer_sizes=HIDDEN,
                                                activation=nn.relu), **PPO)
    wall = time.perf_counter() - start
    curve = []
    for step, seconds, params in saved:
        curve.append({"steps": step, "seconds": seconds, **held_out(push, policy, params)})
    return {"curve": curve, "wall_seconds": wall}


def at_most(curve, key, limit):
    """The last checkpoint with curve[key] <= limit."""
    rows = [row for row in curve if row[key] <= limit * (1 + 1e-9)]
    return rows[-1] if rows else curve[0]


def summarize(apg, ppo):
    out = {}
    for name, runs in (("apg", apg), ("ppo", ppo)):
        final = [r["curve"][-1] for r in runs]
        out[name] = {"final_distance_mean": float(np.mean([f["distance"] for f in final])),
                     "final_distance_per_seed": [f["distance"] for f in final],
                     "steps": final[0]["steps"],
                     "wall_seconds_per_seed": [r["wall_seconds"] for r in runs]}
    budget_steps = apg[0]["curve"][-1]["steps"]
    equal_steps = [at_most(r["curve"], "steps", budget_steps) for r in ppo]
    equal_time = [at_most(r["curve"], "seconds", a["wall_seconds"]) for r, a in zip(ppo, apg)]
    out["ppo_at_apg_steps"] = {"distance_per_seed": [row["distance"] for row in equal_steps],
                               "steps": [row["steps"] for row in equal_steps],
                               "distance_mean": float(np.mean([r["distance"] for r in equal_steps]))}
    out["ppo_at_apg_wall_time"] = {"distance_per_seed": [row["distance"] for row in equal_time],
                                   "steps": [row["steps"] for row in equal_time],
                                   "seconds": [row["seconds"] for row in equal_time],
                                   "distance_mean": float(np.mean([r["distance"] for r in equal_time]))}
    return out


def figure(apg, ppo, start_distance):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, runs, color in (("through the simulator (APG)", apg, "C0"),
                              ("Brax PPO", ppo, "C1")):
        for axis, key in zip(axes, ("steps", "seconds")):
            for i, run in enumerate(runs):
                x = [row[key] for row in run["curve"]]
                y = [row["distance"] for row in run["curve"]]
                axis.plot(x, y, color=color, alpha=0.8, lw=1.2, label=name if i == 0 else None)
    for axis, label in zip(axes, ("simulator steps", "wall time (s, one core; programs "
                                                     "compiled beforehand)")):
        axis.axhline(start_distance, color="gray", ls="--", lw=1, label="box left where it is")
        axis.set_xlabel(label)
        axis.set_ylabel("held-out distance to target at t = 1 s (m)")
        axis.set_ylim(bottom=0)
        axis.set_xlim(left=0)
        axis.legend(fontsize=8)
    return finish_figure(fig, axes, "Qiao et al. learning control: pusher to a random target "
                                    "(100 held-out targets, one line per seed)")


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--methods", default="apg,ppo",
                   help="trainers to run, comma-separated; the JSON and PNG need both")
    p.add_argument("--apg-lr", type=float, default=APG_LR)
    p.add_argument("--apg-updates", type=int, default=None)
    p.add_argument("--cache-dir", default="/tmp/jaxcontact_experiment_cache",
                   help="JAX's persistent compilation cache: Brax's PPO compiles anew in every "
                        "call of its trainer, and reloads from here")
    args = p.parse_args()
    jax.config.update("jax_compilation_cache_dir", args.cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    methods = set(args.methods.split(","))
    seeds = args.seeds or (1 if args.quick else 5)
    apg_updates = args.apg_updates or (20 if args.quick else 150)
    push = make_task()
    apg_steps = apg_updates * APG_BATCH * push.task.episode_length
    per_epoch = PPO["batch_size"] * PPO["unroll_length"] * PPO["num_minibatches"]
    ppo_steps = (2 if args.quick else 4) * apg_steps
    checkpoints = 5 if args.quick else 21
    log(f"APG: {apg_updates} updates x {APG_BATCH} episodes x {push.task.episode_length} steps "
        f"= {apg_steps} steps; PPO: {ppo_steps} steps ({per_epoch} per epoch)")
    # one policy object each: every seed's run reuses the compiled programs
    apg_policy = push.mlp_policy(hidden=HIDDEN, activation=nn.relu,
                                 output_scale=OUTPUT_SCALE)
    ppo_policy = _ppo_policy(push)
    # a first run of each trainer (seed WARMUP_SEED) compiles; its wall time is the cold
    # one, reported apart; the seeds' runs then reuse the compiled programs (APG: in memory;
    # PPO: from the persistent cache), so their wall times compare training, not compiling
    apg, ppo, cold = [], [], {}
    if "apg" in methods:
        optimizer = _apg_optimizer(args.apg_lr)
        cold["apg"] = run_apg(push, apg_policy, WARMUP_SEED, apg_updates, optimizer)
        for seed in range(seeds):
            apg.append(run_apg(push, apg_policy, seed, apg_updates, optimizer))
    if "ppo" in methods:
        cold["ppo"] = run_ppo(push, ppo_policy, WARMUP_SEED, ppo_steps, checkpoints)
        for seed in range(seeds):
            ppo.append(run_ppo(push, ppo_policy, seed, ppo_steps, checkpoints))
    if methods != {"apg", "ppo"}:
        return
    start_distance = float(np.mean(np.linalg.norm(np.asarray(jax.vmap(
        lambda k: push.task.initial(k)[1].pos[0, :2])(
            jax.random.split(jax.random.key(EVAL_KEY), EVAL_TARGETS))), axis=1)))
    summary = summarize(apg, ppo)
    result = {
        "paper": "Qiao et al. 2020, Sec. 5 learning control (pair of sticks / cloth; here a "
                 "pusher)",
        "paper_claim": "one update per episode through the simulator 'quickly converges'; "
                       "DDPG 'fails to learn the task on a comparable time scale' (5 seeds, "
                       "no numbers)",
        "task": "jaxcontact.control.pusher_task: 1 s episodes of 50 steps (dt 0.02), box 0.2 m,"
                " 0.5 kg, mu 0.5, pusher ball r 0.05 m, 0.5 kg, |F| <= 10 N, targets in "
                "[0.2, 0.6] x [-0.25, 0.25] m ahead of the box",
        "dtype": str(jnp.dtype(DTYPE)), "solver": "Newton(iterations=30)",
        "policy": {"hidden": HIDDEN, "activation": "relu"},
        "apg": {"updates": apg_updates, "batch": APG_BATCH, "window": push.task.episode_length,
                "optimizer": f"adam({args.apg_lr}, b1=0.95)", "clip": 1.0},
        "ppo": {**PPO, "num_timesteps": ppo_steps, "checkpoints": checkpoints,
                "value_network": "Brax default (256 x 5, swish)"},
        "seeds": seeds, "held_out_targets": EVAL_TARGETS,
        "start_distance_m": start_distance,
        "summary": summary,
        "runs": {"apg": apg, "ppo": ppo},
        "cold_runs": {name: {"wall_seconds": run["wall_seconds"], "steps": run["curve"][-1]["steps"],
                             "first_update_seconds": run.get("first_update_seconds")}
                      for name, run in cold.items()},
        "claims": {
            "apg_learns": summary["apg"]["final_distance_mean"] < 0.5 * start_distance,
            "apg_beats_ppo_at_equal_steps":
                summary["apg"]["final_distance_mean"] < summary["ppo_at_apg_steps"]["distance_mean"],
            "apg_beats_ppo_at_equal_wall_time":
                summary["apg"]["final_distance_mean"]
                < summary["ppo_at_apg_wall_time"]["distance_mean"],
        },
    }
    save("qiao_learning_control", result, figure(apg, ppo, start_distance), args.out_dir)
    log(f"start {start_distance:.3f} m; APG {summary['apg']['final_distance_mean']:.3f} m; "
        f"PPO at equal steps {summary['ppo_at_apg_steps']['distance_mean']:.3f} m, at equal "
        f"wall time {summary['ppo_at_apg_wall_time']['distance_mean']:.3f} m, after "
        f"{summary['ppo']['steps']} steps {summary['ppo']['final_distance_mean']:.3f} m")


if __name__ == "__main__":
    main()
