"""Issue 65 point 3: gymnasium's Hopper-v5 and Ant-v5, trained three ways, return against
environment steps and wall time.

Tasks: `jaxcontact.control.hopper_task` / `ant_task` (gymnasium's hopper.xml / ant.xml through
`jc.io.load_mjcf`, gymnasium's reward terms and default weights, termination when unhealthy,
reset noise, observations in MuJoCo's coordinates; the hopper one step of 8 ms per action,
the ant 5 steps of 10 ms: see `jaxcontact/control/locomotion.py`), float64.

- APG + critic (SHAC, Xu et al. 2022): `jaxcontact.control.train` with windows of `WINDOW`
  actions, `BATCH` environments, an MLP policy (tanh) and a `Critic` closing each window
  (discount 0.99, TD(λ = 0.95)). Environment steps = updates x batch x window.
- PPO through the adapter: `brax.training.agents.ppo.train` on `BraxEnv` of the same task.
- PPO on MJX, the reference: the same trainer and settings on a `brax.envs.PipelineEnv`
  with the mjx backend, built from the same MJCF file (MuJoCo's physics, gymnasium's
  frame_skip), with the same reward, termination, reset noise and observation written on
  MuJoCo's qpos / qvel / cfrc_ext (`mjx.rne_postconstraint`).

Curves: APG's is the mean return of the training episodes that ended in each update; PPO's
Brax's rolling mean of the training episodes (`log_training_metrics`; Brax's evaluator is off,
compiling it costs minutes). Episodes last at most `EPISODE` actions (gymnasium: 1000).
SHAC's claim (Xu et al. 2022, Fig. 4): SHAC reaches PPO's return with far fewer samples.

    python -m experiments.gym_locomotion [--quick] [--tasks hopper ant] [--seeds 3]
        [--steps hopper=200000 ant=50000]

`--quick` is a smoke check of the whole script (tiny budgets, episodes of 50 actions, the
hopper only, one seed): its numbers are not results. The full runs take hours on CPU (see
docs/experiments.md); they keep a persistent compilation cache in .jax_cache/.
"""

from __future__ import annotations

import json
import math
import time

import jax

jax.config.update("jax_enable_x64", True)
from experiments._common import use_compile_cache  # noqa: E402

use_compile_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from jaxcontact import control  # noqa: E402
from jaxcontact.control.locomotion import ant_task, gymnasium_asset, hopper_task  # noqa: E402
from experiments._common import finish_figure, log, parser, save  # noqa: E402

NAME = "gym_locomotion"
MAKERS = {"hopper": hopper_task, "ant": ant_task}
FRAME_SKIP = {"hopper": 4, "ant": 5}
EPISODE, QUICK_EPISODE = 1000, 50
# SHAC's horizon (32) and a CPU-sized batch; Adam 2e-3 for the actor, SHAC's hopper rate
WINDOW, BATCH, HIDDEN, LR = 32, 16, (64, 64), 2e-3
CRITIC = dict(hidden=(64, 64), discount=0.99, lam=0.95, iterations=16)
STEPS = {"hopper": 1_000_000, "ant": 1_000_000}
QUICK = dict(window=8, batch=4, updates=8, ppo_steps=512)   # 64 actions: episodes end
PPO = dict(num_envs=32, batch_size=32, num_minibatches=8, unroll_length=16,
           num_updates_per_batch=4, learning_rate=3e-4, discounting=0.99, entropy_cost=1e-2,
           normalize_observations=True, reward_scaling=1.0)
QUICK_PPO = dict(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=8,
                 num_updates_per_batch=1, learning_rate=3e-4, discounting=0.99,
                 entropy_cost=1e-2, normalize_observations=True, reward_scaling=1.0)
NONFINITE_REWARD = -10.0      # below a step's reward (healthy 1 + speed), a diverged step
OPTIMIZER = optax.adam(LR)    # one object: every seed reuses the compiled update


# --- gymnasium's terms on MuJoCo's coordinates (the MJX reference) ---------------------------
def mujoco_terms(name, qpos_before, xpos_before, data, action, weights):
    """(reward, healthy, observation) of Hopper-v5 / Ant-v5 from MuJoCo data after the step
    (gymnasium's hopper_v5.py / ant_v5.py with their default weights)."""
    period = weights["period"]
    ctrl = weights["ctrl_cost_weight"] * jnp.sum(jnp.square(jnp.clip(action, -1.0, 1.0)))
    if name == "hopper":
        qpos, qvel = data.qpos, data.qvel
        rest = jnp.concatenate([qpos[2:], qvel])
        healthy = (jnp.all(jnp.abs(rest) < 100.0) & (qpos[1] > 0.7)
                   & (qpos[2] > -0.2) & (qpos[2] < 0.2))
        velocity = (qpos[0] - qpos_before[0]) / period
        obs = jnp.concatenate([qpos[1:], jnp.clip(qvel, -10.0, 10.0)])
        return velocity + healthy.astype(velocity.dtype) - ctrl, healthy, obs
    qpos, qvel = data.qpos, data.qvel
    forces = jnp.clip(data.cfrc_ext, -1.0, 1.0)
    finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
    healthy = finite & (qpos[2] >= 0.2) & (qpos[2] <= 1.0)
    velocity = (data.xpos[1, 0] - xpos_before[1, 0]) / period
    contact = 5e-4 * jnp.sum(jnp.square(forces))
    obs = jnp.concatenate([qpos[2:], qvel, jnp.reshape(forces[1:], (-1,))])
    return velocity + healthy.astype(velocity.dtype) - ctrl - contact, healthy, obs


def mjx_env(name):
    """A Brax PipelineEnv (mjx backend) of gymnasium's task `name` (module docstring)."""
    import mujoco
    from brax.envs.base import PipelineEnv, State
    from brax.io import mjcf
    from mujoco import mjx

    mj = mujoco.MjModel.from_xml_path(str(gymnasium_asset(name)))
    noise = 5e-3 if name == "hopper" else 0.1
    weights = {"ctrl_cost_weight": 1e-3 if name == "hopper" else 0.5,
               "period": float(mj.opt.timestep) * FRAME_SKIP[name]}

    class Gym(PipelineEnv):
        def __init__(self):
            super().__init__(sys=mjcf.load_model(mj), backend="mjx", n_frames=FRAME_SKIP[name])

        def reset(self, rng):
            k1, k2 = jax.random.split(rng)
            qpos = self.sys.qpos0 + jax.random.uniform(k1, (mj.nq,), minval=-noise,
                                                       maxval=noise)
            if name == "hopper":
                qvel = jax.random.uniform(k2, (mj.nv,), minval=-noise, maxval=noise)
            else:
                qvel = noise * jax.random.normal(k2, (mj.nv,))
            data = self._post(self.pipeline_init(qpos, qvel))
            _, _, obs = mujoco_terms(name, data.qpos, data.xpos, data, jnp.zeros(mj.nu),
                                     weights)
            zero = jnp.zeros(())
            return State(data, obs, zero, zero, {})

        def _post(self, data):
            return mjx.rne_postconstraint(self.sys, data) if name == "ant" else data

        def step(self, state, action):
            before = state.pipeline_state
            data = self._post(self.pipeline_step(before, action))
            reward, healthy, obs = mujoco_terms(name, before.qpos, before.xpos, data, action,
                                                weights)
            return state.replace(pipeline_state=data, obs=obs, reward=reward,
                                 done=1.0 - healthy.astype(reward.dtype))

    return Gym()


# --- trainers -----------------------------------------------------------------------------------
def run_apg(bundle, seed, updates, window, batch):
    policy = bundle.mlp_policy(hidden=HIDDEN)
    critic = bundle.critic(**CRITIC)
    params = policy.init(jax.random.key(seed), bundle.task.state)
    start = time.perf_counter()
    result = control.train(bundle.task, policy, params, key=jax.random.key(1000 + seed),
                           updates=updates, batch=batch, window=window, optimizer=OPTIMIZER,
                           critic=critic, progress=False)
    wall = time.perf_counter() - start
    per_update = batch * window
    curve = [{"steps": (k + 1) * per_update, "seconds": row["seconds"],
              "episode_return": row["episode_return"], "episodes": row["episodes"],
              "reward_per_step": row["reward"], "converged": row["converged"]}
             for k, row in enumerate(result.history)]
    log(f"  APG + critic seed {seed}: {updates * per_update} steps, {wall:.0f} s (first "
        f"update {result.first_update_seconds:.0f} s), window reward "
        f"{result.history[0]['reward']:.3f} -> {result.history[-1]['reward']:.3f}")
    return {"wall_s": wall, "first_update_s": result.first_update_seconds,
            "env_steps": updates * per_update, "curve": curve}


def run_ppo(env, seed, steps, episode, settings, label):
    from brax.training.agents.ppo import train as ppo

    curve, start = [], time.perf_counter()

    def progress(num_steps, metrics):
        if "episode/sum_reward" not in metrics:
            return
        curve.append({"steps": int(num_steps), "seconds": time.perf_counter() - start,
                      "episode_return": float(metrics["episode/sum_reward"]),
                      "episode_length": float(metrics.get("episode/length", math.nan))})

    per_epoch = settings["batch_size"] * settings["unroll_length"] * settings["num_minibatches"]
    ppo.train(env, num_timesteps=steps, episode_length=episode, seed=seed, num_evals=2,
              run_evals=False, log_training_metrics=True, training_metrics_steps=per_epoch,
              progress_fn=progress, **settings)
    wall = time.perf_counter() - start
    last = curve[-1]["episode_return"] if curve else math.nan
    log(f"  {label} seed {seed}: {steps} steps, {wall:.0f} s, last training return {last:.2f}")
    return {"wall_s": wall, "env_steps": steps, "curve": curve}


BINS = 20    # the curves' points per run in the figure and the summary (returns binned)
STYLES = {"apg": ("C0", "APG + critic (ours)"), "ppo": ("C1", "PPO, BraxEnv (ours)"),
          "ppo_mjx": ("C2", "PPO on MJX (reference)")}


def _budget(methods):
    """The largest environment step count of a task's runs (PPO may overshoot its budget)."""
    return max(max([run["env_steps"]] + [x["steps"] for x in run["curve"]])
               for runs in methods.values() for run in runs)


def binned(run, budget):
    """(steps, seconds, return) of a run on BINS equal spans of environment steps: the mean
    training episode return of the points in each span (NaN where no episode ended)."""
    c = [x for x in run["curve"] if np.isfinite(x["episode_return"])]
    edges = np.linspace(0.0, budget, BINS + 1)
    steps = np.array([x["steps"] for x in c], float)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = [x for x, n in zip(c, steps) if lo < n <= hi]
        ret = np.mean([x["episode_return"] for x in inside]) if inside else math.nan
        sec = np.mean([x["seconds"] for x in inside]) if inside else math.nan
        out.append((hi, sec, ret))
    return np.array(out)


def summary(result):
    """Per task and method: the final return (the last bin in which episodes ended, per
    seed), the best bin, the wall time and the steps at which the mean curve first reaches
    PPO-on-MJX's final return."""
    table = {}
    for task, methods in result["tasks"].items():
        budget = _budget(methods)
        table[task] = {}
        for method, runs in methods.items():
            if not runs:
                continue
            curves = np.stack([binned(run, budget)[:, 2] for run in runs])
            table[task][method] = {
                "final_return": [float(c[np.isfinite(c)][-1]) if np.any(np.isfinite(c))
                                 else math.nan for c in curves],
                "best_bin_return": [float(np.nanmax(c)) for c in curves],
                "wall_s": [float(run["wall_s"]) for run in runs],
                "mean_curve": [float(v) for v in np.nanmean(curves, axis=0)],
                "bin_steps": [float(v) for v in np.linspace(0, budget, BINS + 1)[1:]]}
        reference = table[task].get("ppo_mjx")
        if reference:
            target = float(np.nanmean(reference["final_return"]))
            for row in table[task].values():
                reached = [n for n, v in zip(row["bin_steps"], row["mean_curve"])
                           if v >= target]
                row["steps_to_mjx_final"] = reached[0] if reached else None
    return table


def figure(result):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(result["tasks"])
    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 3.6 * len(tasks)), squeeze=False)
    for row, task in enumerate(tasks):
        methods = result["tasks"][task]
        budget = _budget(methods)
        for method, runs in methods.items():
            if not runs:
                continue
            color, label = STYLES[method]
            curves = np.stack([binned(run, budget) for run in runs])   # (seeds, BINS, 3)
            for col, axis in ((0, 0), (1, 1)):
                x = np.nanmean(curves[:, :, axis], axis=0)
                ok = np.isfinite(x) & np.any(np.isfinite(curves[:, :, 2]), axis=0)
                ys = curves[:, ok, 2]
                axes[row, col].plot(x[ok], np.nanmean(ys, axis=0), ".-", color=color,
                                    label=f"{label}, mean of {len(runs)}")
                axes[row, col].fill_between(x[ok], np.nanmin(ys, axis=0),
                                            np.nanmax(ys, axis=0), color=color, alpha=0.15)
        axes[row, 0].set_xlabel("environment steps")
        axes[row, 1].set_xlabel("wall time, s (compilation included; mean over seeds)")
        for col in (0, 1):
            axes[row, col].set_ylabel(f"{task}: training episode return")
    title = ("gymnasium Hopper-v5 / Ant-v5: training episode return, binned; band: min-max "
             "over seeds")
    if result["quick"]:
        title += " (--quick smoke run: not results)"
    return finish_figure(fig, axes.ravel(), title, legend=8)


def partial(result, out_dir):
    """Write the runs so far to <NAME>.partial.json (the full save replaces it at the end)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{NAME}.partial.json").write_text(json.dumps(result, default=float) + "\n")


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", choices=sorted(MAKERS), default=None,
                   help="default: hopper and ant (--quick: hopper)")
    p.add_argument("--methods", nargs="+", choices=["apg", "ppo", "ppo_mjx"],
                   default=["apg", "ppo", "ppo_mjx"])
    p.add_argument("--seeds", type=int, default=None, help="default 3 (--quick: 1)")
    p.add_argument("--steps", nargs="+", default=[], metavar="TASK=N",
                   help=f"environment steps per run of a task (default {STEPS})")
    args = p.parse_args()
    budget = dict(STEPS)
    for item in args.steps:
        task, _, n = item.partition("=")
        if task not in MAKERS or not n.isdigit() or int(n) <= 0:
            p.error(f"--steps takes TASK=N with TASK in {sorted(MAKERS)}, got {item!r}")
        budget[task] = int(n)
    quick = args.quick
    tasks = args.tasks or (["hopper"] if quick else ["hopper", "ant"])
    seeds = args.seeds or (1 if quick else 3)
    episode = QUICK_EPISODE if quick else EPISODE
    window = QUICK["window"] if quick else WINDOW
    batch = QUICK["batch"] if quick else BATCH
    ppo_settings = QUICK_PPO if quick else PPO

    from jaxcontact.control.brax_env import BraxEnv, device_put_replicated
    jax.device_put_replicated = device_put_replicated   # Brax 0.14's trainers on JAX >= 0.10

    t_start = time.perf_counter()
    result = {"quick": quick, "episode_length": episode, "dtype": "float64", "seeds": seeds,
              "apg_settings": {"window": window, "batch": batch, "hidden": list(HIDDEN),
                               "adam_lr": LR, "clip": 1.0,
                               "critic": {**CRITIC, "hidden": list(CRITIC["hidden"])}},
              "ppo_settings": ppo_settings, "tasks": {}}
    for name in tasks:
        bundle = MAKERS[name](dtype=jnp.float64, episode_length=episode)
        steps = QUICK["updates"] * batch * window if quick else budget[name]
        updates = max(1, steps // (batch * window))
        ppo_steps = QUICK["ppo_steps"] if quick else budget[name]
        log(f"{name}: {updates * batch * window} APG steps, {ppo_steps} PPO steps, "
            f"{seeds} seed(s)")
        runs = result["tasks"][name] = {m: [] for m in args.methods}
        for seed in range(seeds):
            if "apg" in runs:
                runs["apg"].append(run_apg(bundle, seed, updates, window, batch))
            if "ppo" in runs:
                env = BraxEnv(bundle.task, observe=bundle.observe, act=bundle.act,
                              action_size=bundle.action_size,
                              nonfinite_reward=NONFINITE_REWARD)
                runs["ppo"].append(run_ppo(env, seed, ppo_steps, episode, ppo_settings,
                                           "PPO (BraxEnv)"))
            if "ppo_mjx" in runs:
                runs["ppo_mjx"].append(run_ppo(mjx_env(name), seed, ppo_steps, episode,
                                               ppo_settings, "PPO (MJX)"))
            partial(result, args.out_dir)    # hours of runs: keep each seed's as it ends
    result["total_wall_s"] = time.perf_counter() - t_start
    result["summary"] = summary(result)
    save(NAME, result, figure(result), args.out_dir)
    (args.out_dir / f"{NAME}.partial.json").unlink(missing_ok=True)
    log(f"total {result['total_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
