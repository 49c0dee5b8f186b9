"""ADD E13 (Geilinger et al. 2020, Fig. 12/13): a network learns to throw a ball so that,
after exactly one bounce on the ground, it reaches a target; trained through the simulator.

Setup: a ball (radius 0.05 m, 1 kg) starts at (0, 0, 0.5) m and is thrown with the velocity
v = v0 + s tanh(φ(target; w)) that a network φ gives for a target on the ground, drawn
uniformly in x ∈ [1, 2] m, y ∈ [-0.5, 0.5] m. Contact: k_n = 1e4 N/m, restitution 0.7
through damping (ADD Eq. 22), Coulomb μ = 0.5, the smoothed laws of the fig. 36 experiment
(C2 normal law, pseudo-Huber friction); 100 implicit steps of dt = 10 ms (1 s), float64.
Loss (the paper's exact form is not given): the horizontal distance to the target of the
second touchdown, interpolated between steps on the ball's height (so the loss sees the
flight time), where the ball bounces once and lands again within the rollout; else a soft
minimum (temperature 2 cm) of the distance over the steps after the first bounce's lift-off;
and the final distance plus 1 m where the ball never bounces. (`--loss window` uses the soft
minimum throughout: without friction it is flat in the vertical throw speed.) Network: MLP
2-64-64-3 (tanh), flax. Training as in the paper: Adam with β1 = 0.95, β2 = 0.999,
ε = 1e-8, learning rate 1e-2 halved after each epoch, 1000 training and 100 test targets;
mini-batches of 20 (the paper used 5: each mini-batch is one vmapped batch here).

The paper's claim: a controller trained without friction "will systematically fail to hit
the target" when friction is on. Two networks are trained, on μ = 0.5 and on μ = 0, and both
are tested on μ = 0.5 (and the μ = 0 one on μ = 0 too). Reported per epoch: test miss
(the closest approach after exactly one bounce; mean, median, 90th percentile) and the
signed along-track error (positive: the ball is past the target).

Run from the repository root:
    python -m experiments.add_e13_toss_game [--quick] [--epochs 6]
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import flax.linen as nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import log, parser, save  # noqa: E402

NAME = "add_e13_toss_game"
DT, STEPS = 0.01, 100
RADIUS, MASS, START = 0.05, 1.0, (0.0, 0.0, 0.5)
STIFFNESS, RESTITUTION, FRICTION = 1e4, 0.7, 0.5
SMOOTH = jc.Contact(normal="smooth", smooth_width=0.005, friction="pseudo_huber",
                    friction_eps=0.01)
V0, V_SCALE = (1.5, 0.0, 1.0), (2.0, 1.5, 2.0)      # nominal throw and its range, m/s
TARGETS = ((1.0, -0.5), (2.0, 0.5))                 # the rectangle of targets, m
TEMPERATURE = 0.02                                  # of the soft minimum, m


def ball_scene(friction):
    scene = jc.Scene(dt=DT)
    damping = jc.restitution_to_damping(RESTITUTION, STIFFNESS, MASS)
    scene.add_plane(friction=friction, stiffness=STIFFNESS, damping=damping)
    scene.add_sphere(RADIUS, MASS, pos=START, friction=friction, stiffness=STIFFNESS,
                     damping=damping)
    return scene.build(contact=SMOOTH)


class Thrower(nn.Module):
    @nn.compact
    def __call__(self, target):
        x = (target - jnp.asarray([1.5, 0.0])) / jnp.asarray([0.5, 0.5])   # to [-1, 1]²
        for width in (64, 64):
            x = nn.tanh(nn.Dense(width)(x))
        out = nn.Dense(3, kernel_init=nn.initializers.variance_scaling(0.1, "fan_in",
                                                                       "truncated_normal"))(x)
        return jnp.asarray(V0) + jnp.asarray(V_SCALE) * jnp.tanh(out)


def one_bounce_window(contact):
    """Steps after the first bounce's lift-off and up to a second touchdown (mask (T,))."""
    before = jnp.concatenate([jnp.zeros((1,), bool), contact[:-1]])
    onsets = jnp.cumsum(contact & ~before)
    liftoffs = jnp.cumsum(~contact & before)
    # counts up to the step before: the step where the second contact starts is included
    onsets_before = jnp.concatenate([jnp.zeros((1,), onsets.dtype), onsets[:-1]])
    return (onsets_before == 1) & (liftoffs >= 1)


def touchdown(pos, contact, window):
    """(where the ball touches down the second time, interpolated between steps on its height
    over the ground (differentiable in the throw, where the window's end is not), whether it
    did within the rollout)."""
    last = jnp.max(jnp.where(window, jnp.arange(window.shape[0]), 0))
    landed = jnp.any(window) & contact[last] & (last > 0)
    before, after = pos[jnp.maximum(last - 1, 0), 0], pos[last, 0]
    fall = before[2] - after[2]
    share = jnp.clip((before[2] - RADIUS) / jnp.where(fall > 0, fall, 1.0), 0.0, 1.0)
    return before + share * (after - before), landed


def toss(model, state, velocity, target, loss_kind="window"):
    """(loss, miss, along-track error, bounced) of one throw towards `target` (x, y).

    loss_kind "window": the soft minimum of the distance over the one-bounce window;
    "touchdown": the distance of the interpolated second touchdown (the soft minimum where
    the ball does not land a second time within the rollout)."""
    start = state.replace(vel=velocity[None, :])
    _, traj, info = jc.rollout(model, start, steps=STEPS, return_info=True)
    goal = jnp.concatenate([target, jnp.asarray([RADIUS])])
    distance = jnp.linalg.norm(traj.pos[:, 0] - goal[None, :], axis=1)
    contact = info.active_contacts > 0
    window = jax.lax.stop_gradient(one_bounce_window(contact))
    bounced = jnp.any(window)
    logits = jnp.where(window, -distance / TEMPERATURE, -jnp.inf)
    soft = -TEMPERATURE * (jax.nn.logsumexp(logits) - jnp.log(jnp.maximum(jnp.sum(window), 1)))
    if loss_kind == "touchdown":
        point, landed = touchdown(traj.pos, contact, window)
        soft = jnp.where(landed, jnp.linalg.norm(point[:2] - goal[:2]), soft)
    loss = jnp.where(bounced, soft, distance[-1] + 1.0)
    # the closest approach inside the window, and where the ball is then relative to the target
    closest = jnp.argmin(jnp.where(window, distance, jnp.inf))
    miss = jnp.where(bounced, distance[closest], jnp.inf)
    direction = goal[:2] - jnp.asarray(START[:2])
    direction = direction / jnp.linalg.norm(direction)
    along = jnp.dot(traj.pos[closest, 0, :2] - goal[:2], direction)
    return loss, (miss, along, bounced, jnp.all(info.converged))


def main():
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-2, help="initial learning rate (paper 1e-2)")
    p.add_argument("--loss", choices=("window", "touchdown"), default="touchdown",
                   help="window: soft minimum over the one-bounce window; touchdown: the "
                        "distance of the interpolated second touchdown")
    p.add_argument("--clip", type=float, default=None,
                   help="clip each gradient to this global norm (default: none, as the paper)")
    args = p.parse_args()
    n_train, n_test = (200, 40) if args.quick else (1000, 100)
    epochs = 2 if args.quick else args.epochs
    key = jax.random.key(0)
    k_train, k_test, k_init = jax.random.split(key, 3)
    low, high = jnp.asarray(TARGETS[0]), jnp.asarray(TARGETS[1])
    train_targets = jax.random.uniform(k_train, (n_train, 2), minval=low, maxval=high)
    test_targets = jax.random.uniform(k_test, (n_test, 2), minval=low, maxval=high)
    net = Thrower()
    per_epoch = n_train // args.batch
    scenes = {mu: ball_scene(mu) for mu in (FRICTION, 0.0)}

    def batch_loss(params, model, state, targets):
        velocities = jax.vmap(lambda t: net.apply(params, t))(targets)
        losses, aux = jax.vmap(lambda v, t: toss(model, state, v, t, args.loss))(velocities,
                                                                               targets)
        return jnp.mean(losses), aux

    @jc.jit
    def update(params, opt_state, model, state, targets):
        (value, aux), grads = jax.value_and_grad(batch_loss, has_aux=True)(params, model, state,
                                                                          targets)
        changes, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, changes), opt_state, value, aux

    @jc.jit
    def test(params, model, state):
        return batch_loss(params, model, state, test_targets)[1]

    def summary(aux):
        miss, along, bounced, converged = (np.asarray(a) for a in aux)
        hit = miss[np.isfinite(miss)]
        return {"mean_miss_m": float(hit.mean()) if hit.size else None,
                "median_miss_m": float(np.median(hit)) if hit.size else None,
                "p90_miss_m": float(np.percentile(hit, 90)) if hit.size else None,
                "mean_along_track_m": float(along[np.isfinite(miss)].mean()) if hit.size else None,
                "bounced_once": float(bounced.mean()), "all_steps_converged": bool(converged.all())}

    schedule = optax.exponential_decay(args.lr, transition_steps=per_epoch, decay_rate=0.5,
                                       staircase=True)
    optimizer = optax.adam(schedule, b1=0.95, b2=0.999, eps=1e-8)
    if args.clip is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(args.clip), optimizer)
    runs = {}
    for train_mu in (FRICTION, 0.0):
        params = net.init(k_init, train_targets[0])
        opt_state = optimizer.init(params)
        model, state = scenes[train_mu]
        curve = []
        t0 = time.perf_counter()
        for epoch in range(epochs + 1):
            row = {"epoch": epoch, "seconds": time.perf_counter() - t0}
            row["test_friction"] = summary(test(params, *scenes[FRICTION]))
            if train_mu == 0.0:
                row["test_frictionless"] = summary(test(params, *scenes[0.0]))
            curve.append(row)
            log(f"trained on mu={train_mu}: epoch {epoch}, test miss on mu={FRICTION}: "
                f"{row['test_friction']['mean_miss_m']} m (along-track "
                f"{row['test_friction']['mean_along_track_m']} m), {row['seconds']:.0f} s")
            if epoch == epochs:
                break
            order = np.random.default_rng(epoch).permutation(n_train)
            for b in range(per_epoch):
                chosen = train_targets[order[b * args.batch:(b + 1) * args.batch]]
                params, opt_state, value, _ = update(params, opt_state, model, state, chosen)
                if not np.isfinite(float(value)):
                    raise FloatingPointError(f"loss non-finite at epoch {epoch}, batch {b}")
        runs[f"trained_mu_{train_mu}"] = curve

    final_f = runs[f"trained_mu_{FRICTION}"][-1]["test_friction"]
    final_0 = runs["trained_mu_0.0"][-1]
    result = {
        "settings": {"dt": DT, "steps": STEPS, "stiffness": STIFFNESS,
                     "restitution": RESTITUTION, "friction": FRICTION, "epochs": epochs,
                     "batch": args.batch, "train_targets": n_train, "test_targets": n_test,
                     "optimizer": f"adam({args.lr:g} halved per epoch, b1=0.95, b2=0.999, "
                                  f"eps=1e-8), clip {args.clip}", "loss": args.loss},
        "runs": runs,
        "claim": {"paper": "a controller trained without friction systematically fails to hit "
                           "the target when friction is on",
                  "trained_with_friction_mean_miss_m": final_f["mean_miss_m"],
                  "trained_without_friction_mean_miss_m": final_0["test_friction"]["mean_miss_m"],
                  "trained_without_friction_along_track_m":
                      final_0["test_friction"]["mean_along_track_m"],
                  "trained_without_friction_on_its_own_world_mean_miss_m":
                      final_0["test_frictionless"]["mean_miss_m"]},
    }
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for label, curve, field in (
            (f"trained μ={FRICTION}, tested μ={FRICTION}", runs[f"trained_mu_{FRICTION}"],
             "test_friction"),
            (f"trained μ=0, tested μ={FRICTION}", runs["trained_mu_0.0"], "test_friction"),
            ("trained μ=0, tested μ=0", runs["trained_mu_0.0"], "test_frictionless")):
        ax.plot([r["epoch"] for r in curve], [r[field]["mean_miss_m"] for r in curve], "o-",
                label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean test miss (m)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("ADD E13 toss game: throw so that one bounce reaches the target", fontsize=9)
    save(NAME, result, fig, args.out_dir)


if __name__ == "__main__":
    main()
