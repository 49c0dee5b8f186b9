"""Tests of `jc.randomize`: batched rollouts match per-scene rollouts, new parameter values never
recompile, samples respect their ranges and seeds, and bad ranges raise ValueError.

Compilation dominates: one jitted per-scene rollout and one jitted batched rollout are shared by
the whole module (module-scoped fixture), and every scene goes through those two programs.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

BATCH = 64
STEPS = 20
# the batch's scenes also run one by one: every 4th (16), spread over the whole batch (a rollout
# per scene is a dispatch per scene). 64 scenes, not 256: the batched runs of 256 took 11 s of
# this module's 37 with the test suite's unoptimized XLA code
ONE_BY_ONE = slice(None, None, 4)
# vmap changes only how XLA lays out the same float64 operations: rounding may differ in the
# last bits, and 20 steps of contact (Newton to 1e-10) amplify that by far less than 1e4.
_VMAP_TOL = 1e-10

RANGES = dict(
    mass=(0.5, 2.0), friction=(0.2, 1.0), stiffness=(5e4, 2e5), damping=(50.0, 300.0),
    # bottoms start 0-10 mm above the ground and move down: every scene makes contact
    pos=((-0.02, -0.02, 0.0), (0.02, 0.02, 0.01)),
    vel=((-0.5, -0.5, -1.0), (0.5, 0.5, -0.3)), ang_vel=(-3.0, 3.0), yaw=(-math.pi, math.pi))


def _scene():
    scene = jc.Scene(dt=0.002)
    scene.add_plane(friction=0.6, stiffness=1e5, damping=200.0)
    scene.add_sphere(radius=0.05, mass=1.0, pos=(0.0, 0.0, 0.05))
    scene.add_box(half_size=0.05, mass=1.0, pos=(0.3, 0.0, 0.05))
    scene.exclude_pair(0, 1)  # keeps the compiled batch small; the tests are about sampling
    return scene.build(dtype=jnp.float64)


@pytest.fixture(scope="module")
def sim():
    model, state = _scene()
    traces = {"single": 0, "batch": 0}

    def run(m, s):
        _, traj, info = jc.rollout(m, s, steps=STEPS, return_info=True)
        return traj, (info.converged, info.iterations)

    def single(m, s):
        traces["single"] += 1  # Python side effect: runs only while tracing
        return run(m, s)

    def batched(ms, ss):
        traces["batch"] += 1
        return jax.vmap(run, in_axes=(0, 0))(ms, ss)

    return {"model": model, "state": state, "traces": traces,
            "single": jax.jit(single), "batch": jax.jit(batched)}


@pytest.fixture(scope="module")
def batch_run(sim):
    """A randomized batch, its vmapped rollout, and the per-scene rollouts of the scenes
    `ONE_BY_ONE` of it."""
    models, states = jc.randomize(sim["model"], sim["state"], jax.random.PRNGKey(0), BATCH,
                                  **RANGES)
    traj_b, conv_b = jax.block_until_ready(sim["batch"](models, states))
    host = jax.tree.map(np.asarray, (models, states))  # cheap slicing on the host
    singles = []
    for i in range(BATCH)[ONE_BY_ONE]:
        m, s = jax.tree.map(lambda x: jnp.asarray(x[i]), host)
        singles.append(jax.block_until_ready(sim["single"](m, s)))
    return models, states, (traj_b, conv_b), singles


def test_vmap_matches_one_by_one(batch_run):
    models, _, (traj_b, conv_b), singles = batch_run
    # not every impact step converges (see the report on Newton at box impacts); whatever the
    # solver did, it must do the same scene by scene
    # and in as many iterations (the batch runs in working sets of scenes: solvers.loop)
    for k, name in enumerate(("converged flags", "iteration counts")):
        np.testing.assert_array_equal(np.asarray(conv_b[k])[ONE_BY_ONE],
                                      np.stack([np.asarray(c[k]) for _, c in singles]),
                                      f"{name} differ between vmap and per-scene runs")
    for field in ("pos", "quat", "vel", "ang_vel"):
        batched = np.asarray(getattr(traj_b, field))[ONE_BY_ONE]
        one_by_one = np.stack([np.asarray(getattr(t, field)) for t, _ in singles])
        err = np.max(np.abs(batched - one_by_one))
        assert err <= _VMAP_TOL, f"traj.{field}: vmap and per-scene differ by {err:.3g}"
    # the scenes really differ, and every sphere (radius 0.05) really touches the ground
    assert np.ptp(np.asarray(traj_b.vel[:, -1, 1, 2])) > 1e-2, "box velocities do not vary"
    lowest = np.asarray(traj_b.pos[:, :, 0, 2]).min(axis=1)
    assert np.all(lowest < 0.05), f"a sphere never touched the ground: lowest {lowest.max()}"


def test_new_values_do_not_recompile(sim, batch_run):
    traces, single, batched = sim["traces"], sim["single"], sim["batch"]
    # batch_run already ran 16 different scenes through `single`: one trace in all
    assert traces["single"] == 1 and single._cache_size() == 1, traces
    assert traces["batch"] == 1 and batched._cache_size() == 1, traces
    model, state = sim["model"], sim["state"]
    # the built (unbatched) scene, and a changed friction and mass: same program
    jax.block_until_ready(single(model, state))
    heavy = model.replace(body=model.body.replace(mass=2.0 * model.body.mass),
                          geom=model.geom.replace(friction=0.1 * model.geom.friction))
    jax.block_until_ready(single(heavy, state))
    # another key and another choice of ranges: same batched program
    models, states = jc.randomize(model, state, jax.random.PRNGKey(7), BATCH,
                                  friction=(0.0, 0.3), vel=(-0.2, 0.2))
    jax.block_until_ready(batched(models, states))
    assert traces == {"single": 1, "batch": 1}, f"recompiled: {traces}"
    assert single._cache_size() == 1 and batched._cache_size() == 1


def test_samples_within_ranges(sim, batch_run):
    model, state = sim["model"], sim["state"]
    models, states, _, _ = batch_run
    n = model.n_body

    def within(name, values, low, high):
        values = np.asarray(values)
        assert np.all(values >= np.asarray(low)) and np.all(values <= np.asarray(high)), (
            f"{name} outside [{low}, {high}]: min {values.min()}, max {values.max()}")
        assert np.ptp(values) > 0.5 * np.max(np.asarray(high) - np.asarray(low)), (
            f"{name} does not spread over its range")

    assert models.body.mass.shape == (BATCH, n)
    within("mass", models.body.mass, *RANGES["mass"])
    ratio = np.asarray(models.body.inertia) / np.asarray(model.body.inertia)[None]
    mass_ratio = np.asarray(models.body.mass) / np.asarray(model.body.mass)[None, :]
    np.testing.assert_allclose(ratio, np.repeat(mass_ratio[:, :, None], 3, axis=2), rtol=1e-12,
                               err_msg="inertia not scaled with mass")
    for name in ("friction", "stiffness", "damping"):
        within(f"geom.{name}", getattr(models.geom, name), *RANGES[name])
        within(f"plane.{name}", getattr(models.plane, name), *RANGES[name])
    offset = np.asarray(states.pos) - np.asarray(state.pos)[None]
    for axis in range(3):
        within(f"pos offset axis {axis}", offset[..., axis], RANGES["pos"][0][axis],
               RANGES["pos"][1][axis])
        within(f"vel axis {axis}", states.vel[..., axis], RANGES["vel"][0][axis],
               RANGES["vel"][1][axis])
    within("ang_vel", states.ang_vel, *RANGES["ang_vel"])
    quat = np.asarray(states.quat)  # built orientations are the identity: pure yaw
    np.testing.assert_allclose(np.linalg.norm(quat, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(quat[..., 1:3], 0.0, atol=1e-15, err_msg="yaw tilted a body")
    within("yaw", 2.0 * np.arctan2(quat[..., 3], quat[..., 0]), *RANGES["yaw"])
    # leaves not randomized are the built values, repeated
    for name, built, batched in (("geom.size", model.geom.size, models.geom.size),
                                 ("dt", model.dt, models.dt), ("time", state.time, states.time),
                                 ("plane.normal", model.plane.normal, models.plane.normal)):
        assert batched.shape == (BATCH,) + built.shape, name
        np.testing.assert_array_equal(batched, np.broadcast_to(built, batched.shape), name)


def test_seed_reproducible_and_streams_independent(sim):
    model, state = sim["model"], sim["state"]
    key = jax.random.PRNGKey(3)
    a = jc.randomize(model, state, key, 8, **RANGES)
    b = jc.randomize(model, state, key, 8, **RANGES)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    c = jc.randomize(model, state, jax.random.PRNGKey(4), 8, **RANGES)
    assert not np.allclose(a[0].geom.friction, c[0].geom.friction), "key ignored"
    # a parameter's samples do not depend on which other ranges are given
    only = jc.randomize(model, state, key, 8, friction=RANGES["friction"])
    np.testing.assert_array_equal(only[0].geom.friction, a[0].geom.friction)
    np.testing.assert_array_equal(only[0].body.mass, np.broadcast_to(model.body.mass, (8, 2)))
    # planes=False leaves the planes' surface parameters as built
    kept = jc.randomize(model, state, key, 8, friction=(0.0, 0.1), planes=False)
    np.testing.assert_array_equal(kept[0].plane.friction, np.full((8, 1), 0.6))
    # typed keys work as well as raw ones
    typed = jc.randomize(model, state, jax.random.key(3), 8, friction=RANGES["friction"])
    assert typed[0].geom.friction.shape == (8, 2)


@pytest.mark.parametrize("kwargs, name", [
    ({"mass": (2.0, 1.0)}, "mass"),
    ({"mass": (-1.0, 1.0)}, "mass"),
    ({"mass": (0.0, 1.0)}, "mass"),
    ({"stiffness": (-5.0, 10.0)}, "stiffness"),
    ({"friction": (-0.1, 1.0)}, "friction"),
    ({"damping": (-1.0, 1.0)}, "damping"),
    ({"friction": (0.0, float("nan"))}, "friction"),
    ({"yaw": (0.0, float("inf"))}, "yaw"),
    ({"friction": ((0, 0, 0), (1, 1, 1))}, "friction"),
    ({"vel": ((0.0, 0.0), (1.0, 1.0))}, "vel"),
    ({"pos": (0.0, 1.0, 2.0)}, "pos"),
    ({"ang_vel": 1.0}, "ang_vel"),
    ({"mass": ("1", "2")}, "mass"),
    ({"pos": ((0.0, 0.0, 1.0), (1.0, 1.0, 0.0))}, "pos"),
    ({"restitution": (0.0, 1.0)}, "restitution"),
    ({"batch": 0}, "batch"),
    ({"batch": -3}, "batch"),
    ({"batch": 2.5}, "batch"),
    ({"batch": True}, "batch"),
    ({"planes": "yes"}, "planes"),
])
def test_invalid_arguments(sim, kwargs, name):
    kwargs = dict(kwargs)
    batch = kwargs.pop("batch", 4)
    with pytest.raises(ValueError, match=name):
        jc.randomize(sim["model"], sim["state"], jax.random.PRNGKey(0), batch, **kwargs)


def test_batched_input_rejected(sim):
    models, states = jc.randomize(sim["model"], sim["state"], jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="unbatched"):
        jc.randomize(models, states, jax.random.PRNGKey(0), 2)
