"""MuJoCo's side of the comparisons: MJX (JAX) and MuJoCo C on the reference scenes, as JSON.

Every figure the benchmarks give "against MJX" comes from this module, run in its own process
in the same run as ours (`throughput.py` and `gradient.py` start it):

    python -m benchmarks.mjx box_drop [--batch 1 64 1024] [--steps 500] [--tuned]
    python -m benchmarks.mjx boxes8 [--batch 1 64] [--tuned]
    python -m benchmarks.mjx sphere_slide [--steps 500]           # float64
    python -m benchmarks.mjx grad_bounce [--steps 500] [--points 3]  # float64

It prints one JSON object, the last line of its stdout, and writes nothing. It needs `mujoco`
and `mujoco-mjx` (the `bench` extra).

Scenes. Each is a jaxcontact scene, and MuJoCo is given MJCF written from the built model and
state (`mjcf`): the same shapes, sizes, masses, inertias, frictions, initial poses, time step
and gravity. MuJoCo keeps its own contact model (soft constraints at its default solref and
solimp, pyramidal friction cone, condim 3) and integrates with `implicitfast`.

  box_drop, boxes8  `jaxcontact.scenes.box_drop(1)` and `box_drop(8)`: cubes of half edge 5 cm
                    and 1 kg, friction 0.5, released at z = 0.3 m (the eight in a 4 x 2 grid),
                    dt = 2 ms. Scene b of a batch of B starts from `throughput.initial_states`:
                    linear and angular velocities ~ N(0, 1) per axis and box, the very numbers
                    our throughput benchmark starts from. After 1 s the cubes lie at z ~ 0.05.
  sphere_slide      `sphere_scene(SLIDE_START)`: a solid sphere (r = 5 cm, 1 kg, friction 0.5)
                    resting on the ground, started at v0 = (1, 0, 0) m/s; loss: its x at the
                    end. Coulomb's answer at T = 1 s: x = 0.72261 m, dx/dv0 = 0.73093
                    (`gradient.closed_form_slide`).
  grad_bounce       `sphere_scene(BOUNCE_START)`: the sphere thrown from (0, 0, 0.5) m at
                    (vx, 0, vz); loss: squared distance of its final centre to BOUNCE_TARGET,
                    at the (vx, vz) of BOUNCE_POINTS.

Solver settings. The box scenes run MuJoCo's defaults (100 iterations, line search 50), which
MJX runs slowly, or with `--tuned` the 4 and 8 that MJX's documentation recommends: these still
let the cubes settle (`z_mean`), so they are the fair anchor for speed (one iteration is not:
the cubes fly off). The gradient scenes run 1 iteration, line search 4, warm start off: MJX's
solver is a while loop at more iterations, which reverse mode cannot go through, and without
warm start its gradients are best.

Measured. Box scenes, per batch size: `compile_s` (lower and compile of the jitted scan of the
vmapped `mjx.step`, ahead of time, as our throughput benchmark measures its own),
`first_call_s` (that plus the first call), `runs_s` and `best_s` (`_common.timed_runs`),
`steps_per_s` (B x steps / best_s), `z_mean`; then MuJoCo C (not with `--no-mujoco-c`): one
thread stepping `--c-scenes` scenes in a Python loop over `mj_step` (Python's overhead
included), and `mujoco.rollout` of `--c-rollout-scenes` scenes on `--c-threads` threads (no
Python between steps: the physical reference on this machine). sphere_slide: x(T), dx/dv0 by
reverse mode and by central differences, compile times, forward and value-and-gradient times
(`_common.best_of_interleaved`) and the gradient program's temporary memory. grad_bounce: per
point the loss, its gradient, central differences and whether the gradient is finite.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from benchmarks._common import best_of_interleaved, log, timed_compile, timed_runs

BOX_SCENES = {"box_drop": 1, "boxes8": 8}
SCENES = (*BOX_SCENES, "sphere_slide", "grad_bounce")
TUNED = {"iterations": 4, "ls_iterations": 8}
GRADIENT_SETTINGS = {"iterations": 1, "ls_iterations": 4, "warmstart": False}

# the sphere scenes (`jc.scenes.sphere_on_plane`; gradient.py builds them through sphere_scene)
DT = 0.002
SPHERE_RADIUS = 0.05
SPHERE_MASS = 1.0
FRICTION = 0.5
SLIDE_START = (0.0, 0.0, SPHERE_RADIUS)
SLIDE_V0 = 1.0
BOUNCE_START = (0.0, 0.0, 0.5)
BOUNCE_TARGET = (1.0, 0.0, 0.05)
BOUNCE_POINTS = ((1.0, 0.0), (1.5, 1.0), (0.5, 2.0))
FD_STEPS = (1e-3, 1e-4)


def sphere_scene(pos):
    """The unbuilt scene of sphere_slide and grad_bounce (`jc.scenes.sphere_on_plane`): one
    solid sphere at `pos` above the ground plane, both of friction 0.5, dt = 2 ms."""
    from jaxcontact import scenes

    return scenes.sphere_on_plane(pos, radius=SPHERE_RADIUS, mass=SPHERE_MASS,
                                  friction=FRICTION, dt=DT)


# --------------------------------------------------------------------------------------------
# from a jaxcontact scene to MuJoCo


def _numbers(values):
    """Space-separated, each number as short as its own precision allows (float32's 0.002 is
    written 0.002, not 0.0020000000949949026)."""
    import numpy as np

    return " ".join(np.format_float_positional(v, trim="-")
                    for v in np.asarray(values).reshape(-1))


def mjcf(model, state, *, iterations=None, ls_iterations=None, warmstart=True):
    """MJCF of a built jaxcontact scene of free boxes and spheres above the ground plane z = 0.

    Each body becomes a MuJoCo body with a free joint, the body's mass and principal inertia,
    and its one geom at its centre; the plane keeps its friction. `iterations`,
    `ls_iterations` (None: MuJoCo's defaults) and `warmstart` set MuJoCo's solver. Raises
    ValueError for a scene this cannot express (other shapes, several geoms on a body,
    particles, springs, joints and the like, another plane).
    """
    import jax
    import numpy as np

    geom, body = model.geom, model.body
    shapes = [str(getattr(s, "name", s)).lower() for s in geom.shape]
    problems = []
    if [int(b) for b in geom.body] != list(range(model.n_body)):
        problems.append("each body needs exactly one geom, in body order")
    if set(shapes) - {"box", "sphere"}:
        problems.append(f"only boxes and spheres, got {sorted(set(shapes))}")
    if not (np.allclose(np.asarray(geom.pos), 0.0)
            and np.allclose(np.asarray(geom.quat), (1.0, 0.0, 0.0, 0.0))):
        problems.append("geoms must sit at their body's centre")
    if model.n_particle:
        problems.append("particles have no MuJoCo counterpart here")
    others = [name for name in ("spring", "joint", "motor", "attachment", "solid", "cloth",
                                "obstacle", "mesh", "energy")
              if any(np.shape(leaf)[:1] not in ((), (0,))
                     for leaf in jax.tree.leaves(getattr(model, name, ())))]
    if others:
        problems.append(f"only free bodies: the scene has {', '.join(others)}")
    normal = np.asarray(model.plane.normal)
    if (normal.shape[0] != 1 or not np.allclose(normal[0], (0.0, 0.0, 1.0))
            or float(model.plane.offset[0]) != 0.0):
        problems.append("one ground plane z = 0 expected")
    if problems:
        raise ValueError("mjcf: " + "; ".join(problems))

    option = (f'timestep="{_numbers(model.dt)}" gravity="{_numbers(model.gravity)}" '
              'integrator="implicitfast"')
    if iterations is not None:
        option += f' iterations="{int(iterations)}"'
    if ls_iterations is not None:
        option += f' ls_iterations="{int(ls_iterations)}"'
    flag = "" if warmstart else '<flag warmstart="disable"/>'
    bodies = []
    for i, shape in enumerate(shapes):
        size = np.asarray(geom.size[i])[:3 if shape == "box" else 1]
        bodies.append(
            f'<body pos="{_numbers(state.pos[i])}" quat="{_numbers(state.quat[i])}"><freejoint/>'
            f'<inertial pos="0 0 0" mass="{_numbers(body.mass[i])}" '
            f'diaginertia="{_numbers(body.inertia[i])}"/>'
            f'<geom type="{shape}" size="{_numbers(size)}" '
            f'friction="{_numbers(geom.friction[i])}" condim="3"/></body>')
    ground = (f'<geom type="plane" size="0 0 1" friction="{_numbers(model.plane.friction[0])}" '
              'condim="3"/>')
    return (f"<mujoco><option {option}>{flag}</option><worldbody>{ground}{''.join(bodies)}"
            "</worldbody></mujoco>")


def free_coordinates(states):
    """MuJoCo's free-joint coordinates of jaxcontact states (any leading batch shape, then one
    row per body): qpos (position, quaternion w x y z) and qvel (world linear velocity,
    angular velocity in the body's frame; ours is in the world frame), flattened per state."""
    import jax.numpy as jnp

    quat, omega = states.quat, states.ang_vel
    w, u = quat[..., :1], -quat[..., 1:]  # the inverse rotation, world to body
    t = 2.0 * jnp.cross(u, omega)
    body_omega = omega + w * t + jnp.cross(u, t)
    lead = states.pos.shape[:-2]
    qpos = jnp.concatenate([states.pos, quat], axis=-1).reshape(*lead, -1)
    qvel = jnp.concatenate([states.vel, body_omega], axis=-1).reshape(*lead, -1)
    return qpos, qvel


def mujoco_model(model, state, **settings):
    """(MjModel, MJX model, MJX data at `state`) of a built jaxcontact scene (`mjcf`)."""
    import mujoco
    from mujoco import mjx

    m = mujoco.MjModel.from_xml_string(mjcf(model, state, **settings))
    mx = mjx.put_model(m)
    qpos, qvel = free_coordinates(state)
    return m, mx, mjx.make_data(mx).replace(qpos=qpos, qvel=qvel)


# --------------------------------------------------------------------------------------------
# box_drop, boxes8: forward throughput


def box_throughput(args):
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    import jaxcontact as jc
    from benchmarks.throughput import initial_states

    n_boxes = BOX_SCENES[args.scene]
    dtype = jnp.float64 if args.float64 else jnp.float32
    model, state = jc.scenes.box_drop(n_boxes).build(dtype=dtype)
    settings = dict(TUNED) if args.tuned else {}
    settings.update({k: v for k, v in (("iterations", args.iterations),
                                       ("ls_iterations", args.ls_iterations)) if v is not None})
    m, mx, d0 = mujoco_model(model, state, **settings)
    step = jax.vmap(mjx.step, in_axes=(None, 0))

    def rollout(data):
        return jax.lax.scan(lambda d, _: (step(mx, d), None), data, None, length=args.steps)[0]

    rows = []
    for batch in args.batch:
        qpos, qvel = free_coordinates(initial_states(state, batch))
        data = jax.vmap(lambda p, v: d0.replace(qpos=p, qvel=v))(qpos, qvel)
        compiled, compile_s = timed_compile(jax.jit(rollout), data)
        runs, final = timed_runs(compiled, data, repeats=args.repeats,
                                 min_time_s=args.min_time_s, max_repeat_s=args.max_repeat_s)
        z = final.qpos.reshape(batch, n_boxes, 7)[..., 2]
        rows.append({"batch": batch, "compile_s": compile_s, "first_call_s": compile_s + runs[0],
                     "runs_s": runs, "best_s": min(runs),
                     "steps_per_s": batch * args.steps / min(runs),
                     "z_mean": float(jnp.mean(z)),
                     "finite_fraction": float(jnp.mean(jnp.all(jnp.isfinite(final.qpos), -1)))})
        log(f"  [mjx {args.scene} B={batch}] compile {compile_s:.1f} s, best {min(runs):.3f} s "
            f"({rows[-1]['steps_per_s']:.0f} steps/s), z_mean {rows[-1]['z_mean']:.4f}")
        del final, compiled
    out = {"scene": args.scene, "steps": args.steps, "iterations": int(m.opt.iterations),
           "ls_iterations": int(m.opt.ls_iterations), "tuned": bool(args.tuned), "rows": rows}
    if args.mujoco_c:
        scenes = max(args.c_scenes, args.c_rollout_scenes)
        qpos, qvel = free_coordinates(initial_states(state, scenes))
        out["mujoco_c"] = mujoco_c(m, qpos, qvel, args)
    return out


def mujoco_c(m, qpos, qvel, args):
    """MuJoCo C's rates on the same model: a Python loop over mj_step on one thread, and
    mujoco.rollout on args.c_threads threads; steps per second and the final mean height."""
    import mujoco
    import numpy as np
    from mujoco import rollout

    qpos, qvel = np.asarray(qpos, np.float64), np.asarray(qvel, np.float64)
    d = mujoco.MjData(m)

    def reset(k):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = qpos[k], qvel[k]

    loop = min(args.c_scenes, len(qpos))
    t0 = time.perf_counter()
    for k in range(loop):
        reset(k)
        for _ in range(args.steps):
            mujoco.mj_step(m, d)
    seconds = time.perf_counter() - t0
    out = {"loop_scenes": loop, "steps_per_s_1thread": loop * args.steps / seconds}
    try:
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        n = min(args.c_rollout_scenes, len(qpos))
        start = np.empty((n, mujoco.mj_stateSize(m, spec)))
        for k in range(n):
            reset(k)
            mujoco.mj_getState(m, d, start[k], spec)
        datas = [mujoco.MjData(m) for _ in range(args.c_threads)]
        with rollout.Rollout(nthread=args.c_threads) as pool:
            pool.rollout(m, datas, start, nstep=args.steps)  # warm-up: threads and memory
            t0 = time.perf_counter()
            states, _ = pool.rollout(m, datas, start, nstep=args.steps)
            seconds = time.perf_counter() - t0
        # the full-physics state is (time, qpos, qvel, ...): the heights are qpos[7 i + 2]
        final_qpos = states[:, -1, 1:1 + m.nq].reshape(n, -1, 7)
        out.update({"rollout_scenes": n, "rollout_threads": args.c_threads,
                    "steps_per_s_rollout": n * args.steps / seconds,
                    "rollout_z_mean": float(np.mean(final_qpos[..., 2]))})
    except Exception as e:  # noqa: BLE001 - the loop's figure stands without it
        out["rollout_error"] = f"{type(e).__name__}: {e}"
    log(f"  [mujoco C {args.scene}] {out['steps_per_s_1thread']:.0f} steps/s on one thread, "
        f"rollout {out.get('steps_per_s_rollout', float('nan')):.0f} steps/s")
    return out


# --------------------------------------------------------------------------------------------
# sphere_slide, grad_bounce: gradients (float64)


def rollout_loss(mx, d0, start, final_loss, steps):
    """p -> final_loss(data after `steps` MJX steps from start(d0, p))."""
    import jax
    from mujoco import mjx

    def loss(p):
        d = jax.lax.scan(lambda c, _: (mjx.step(mx, c), None), start(d0, p), None,
                         length=steps)[0]
        return final_loss(d)
    return loss


def sphere_slide(args):
    import jax
    import jax.numpy as jnp

    model, state = sphere_scene(SLIDE_START).build(dtype=jnp.float64)
    _, mx, d0 = mujoco_model(model, state, **GRADIENT_SETTINGS)
    loss = rollout_loss(mx, d0, lambda d, v0: d.replace(qvel=d.qvel.at[0].set(v0)),
                        lambda d: d.qpos[0], args.steps)
    v0 = jnp.asarray(SLIDE_V0, jnp.float64)
    forward, compile_forward_s = timed_compile(jax.jit(loss), v0)
    value_and_grad, compile_vg_s = timed_compile(jax.jit(jax.value_and_grad(loss)), v0)
    x, grad = (float(a) for a in value_and_grad(v0))
    fd = {f"{h:g}": float((forward(v0 + h) - forward(v0 - h)) / (2 * h)) for h in FD_STEPS}
    best, rounds = best_of_interleaved({"forward": forward, "value_and_grad": value_and_grad},
                                       v0, repeats=args.repeats, min_time_s=args.min_time_s)
    memory = value_and_grad.memory_analysis()
    log(f"  [mjx sphere_slide] x {x:.6f}, dx/dv0 {grad:.6f}, differences {fd}")
    return {"scene": "sphere_slide", "steps": args.steps, "v0": SLIDE_V0, "x": x, "grad": grad,
            "fd": fd, "compile_forward_s": compile_forward_s,
            "compile_value_and_grad_s": compile_vg_s, "forward_s": best["forward"],
            "value_and_grad_s": best["value_and_grad"], "rounds": rounds,
            "grad_over_forward": best["value_and_grad"] / best["forward"],
            "grad_temp_bytes": getattr(memory, "temp_size_in_bytes", None),
            **GRADIENT_SETTINGS}


def grad_bounce(args):
    import jax
    import jax.numpy as jnp
    import numpy as np

    model, state = sphere_scene(BOUNCE_START).build(dtype=jnp.float64)
    _, mx, d0 = mujoco_model(model, state, **GRADIENT_SETTINGS)
    target = jnp.asarray(BOUNCE_TARGET, jnp.float64)
    loss = rollout_loss(mx, d0,
                        lambda d, v: d.replace(qvel=d.qvel.at[0].set(v[0]).at[2].set(v[1])),
                        lambda d: jnp.sum((d.qpos[:3] - target) ** 2), args.steps)
    v = jnp.asarray(BOUNCE_POINTS[0], jnp.float64)
    forward, compile_forward_s = timed_compile(jax.jit(loss), v)
    value_and_grad, compile_vg_s = timed_compile(jax.jit(jax.value_and_grad(loss)), v)
    h = FD_STEPS[-1]
    rows = []
    for point in BOUNCE_POINTS[:args.points]:
        v = jnp.asarray(point, jnp.float64)
        value, grad = value_and_grad(v)
        grad = np.asarray(grad, float)
        fd = [float((forward(v + e) - forward(v - e)) / (2 * h)) for e in np.eye(2) * h]
        rows.append({"v": list(point), "loss": float(value), "grad": grad.tolist(), "fd": fd,
                     "fd_h": h, "finite": bool(np.all(np.isfinite(grad)))})
        log(f"  [mjx grad_bounce] v={point}: grad {grad}, differences {fd}")
    return {"scene": "grad_bounce", "steps": args.steps, "target": list(BOUNCE_TARGET),
            "compile_forward_s": compile_forward_s, "compile_value_and_grad_s": compile_vg_s,
            "rows": rows, **GRADIENT_SETTINGS}


# --------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scene", choices=SCENES)
    p.add_argument("--steps", type=int, default=500, help="time steps of 2 ms (default 500)")
    box = p.add_argument_group("box_drop and boxes8")
    box.add_argument("--batch", type=int, nargs="+", default=[1, 64, 1024])
    box.add_argument("--tuned", action="store_true",
                     help=f"MJX's advice for speed: {TUNED} (default: MuJoCo's defaults)")
    box.add_argument("--iterations", type=int, help="MuJoCo's solver iterations")
    box.add_argument("--ls-iterations", type=int, help="MuJoCo's line search iterations")
    box.add_argument("--float64", action="store_true", help="float64 (default float32)")
    box.add_argument("--max-repeat-s", type=float, default=300.0,
                     help="no further timed runs after one this long (s)")
    box.add_argument("--no-mujoco-c", dest="mujoco_c", action="store_false",
                     help="skip MuJoCo C's rates")
    box.add_argument("--c-scenes", type=int, default=64, help="scenes of the one-thread loop")
    box.add_argument("--c-rollout-scenes", type=int, default=256,
                     help="scenes of mujoco.rollout")
    box.add_argument("--c-threads", type=int, default=os.cpu_count() or 1,
                     help="threads of mujoco.rollout (default: one per core)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs at least (best counts)")
    p.add_argument("--min-time-s", type=float, default=2.0,
                   help="short runs: repeat until this much time is sampled (s)")
    p.add_argument("--points", type=int, default=len(BOUNCE_POINTS),
                   help="grad_bounce: how many of BOUNCE_POINTS")
    args = p.parse_args(argv)
    if args.steps < 1 or any(b < 1 for b in args.batch):
        p.error("--steps and --batch must be positive")
    args.float64 = args.float64 or args.scene not in BOX_SCENES

    import jax

    jax.config.update("jax_enable_x64", args.float64)
    import mujoco

    t0 = time.perf_counter()
    run = {"sphere_slide": sphere_slide, "grad_bounce": grad_bounce}.get(args.scene,
                                                                          box_throughput)
    out = run(args)
    out.update({"dtype": "float64" if args.float64 else "float32", "mujoco": mujoco.__version__,
                "jax": jax.__version__, "backend": jax.default_backend(),
                "harness_s": time.perf_counter() - t0})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
