"""Single precision against closed forms, and a property-based fuzz of small random scenes.

float32 physics (the default dtype without x64): a box resting on the plane converges every
step and penetrates by m g / k_n (shared by its 4 corner contacts: m g / (4 k_n) each); a sphere
sliding with friction μ decelerates at μ g and spins up at 5 μ g / (2 r) until it rolls; a
batch of boxes thrown at random under `jax.vmap` stays finite and converges.

The fuzz (hypothesis) draws VALUES, never structures: a few scene structures are built once at
module level and each is compiled once per dtype, as one program that runs a batch of scenes
for `STEPS` steps and returns the final states and the gradients of a scalar of them with
respect to the initial velocities and the friction coefficients. Hypothesis draws poses above
the plane, velocities (|v| <= 3 m/s, |ω| <= 10 rad/s), Δt in [1e-4, 1e-2] (log-uniform),
friction, and which bodies and particles of the structure take part (the others are parked
far away, in free fall). Asserted: finite states and gradients, and the closed-form gradient
d(Σ x_T + 0.1 Σ v_T)/dv_0 = T Δt + 0.1 of every body that touched nothing.

Compilation dominates: the fast part (`-m "not slow"`) compiles two small programs; the
fuzz of the mixed structures and of float64 is marked slow, as are the thrown boxes with 50
iterations (every step converges) and a strict xfail: 8 boxes thrown together (the `boxes8`
benchmark scene) should converge at least 96 % of their steps, and converge 94.8 %.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxcontact as jc
from jaxcontact.math import quat_to_mat

jax.config.update("jax_enable_x64", True)   # tests/conftest.py does it too; float32 is asked for

G = 9.81
STEPS = 5          # steps per compiled chunk (the fuzz runs one chunk)
BATCH = 8          # scenes per call


# --- one program per structure and dtype: a chunk of steps with gradients --------------------

def _scalar(final):
    return (jnp.sum(final.pos) + jnp.sum(final.particle_pos)
            + 0.1 * (jnp.sum(final.vel) + jnp.sum(final.particle_vel)))


def _chunk(model, state, dt, friction):
    """STEPS steps of one scene at time step dt and body friction `friction`: the final state,
    the per-step infos and d scalar / d(vel, particle_vel, friction)."""
    def loss(vel, particle_vel, mu):
        m = model.replace(dt=dt, geom=model.geom.replace(friction=mu))
        s = state.replace(vel=vel, particle_vel=particle_vel)
        final, _, info = jc.rollout(m, s, steps=STEPS, return_info=True)
        return _scalar(final), (final, info)

    (_, (final, info)), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(
        state.vel, state.particle_vel, friction)
    return final, info, grads


_batch = jax.jit(jax.vmap(_chunk, in_axes=(None, 0, 0, 0)))


def _finite(tree):
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(tree))


# --- structures -------------------------------------------------------------------------------

SIZES = {"sphere": (0.05, 0.0, 0.0), "box": (0.05, 0.04, 0.03), "capsule": (0.03, 0.06, 0.0)}
PARTICLE_RADIUS = (0.01, 0.0)
SPACING = 0.25     # bodies sit on a row along x, particles on a row at y = SPACING


def _structure(shapes, n_particle, dtype):
    scene = jc.Scene(dt=0.002, stiffness=1e5, damping=200.0, friction=0.5)
    scene.add_plane()
    for i, shape in enumerate(shapes):
        pos = (SPACING * i, 0.0, 0.5)
        size = SIZES[shape]
        if shape == "sphere":
            scene.add_sphere(size[0], 1.0, pos)
        elif shape == "box":
            scene.add_box(size, 1.0, pos)
        else:
            scene.add_capsule(size[0], size[1], 1.0, pos)
    for p in range(n_particle):
        scene.add_particle(0.1, (SPACING * p, SPACING, 0.5), radius=PARTICLE_RADIUS[p])
    return scene.build(dtype=dtype)


def _support(shape, rot):
    """Height of a body's centre above its lowest point, orientation `rot` (3, 3)."""
    size = np.asarray(SIZES[shape])
    if shape == "sphere":
        return size[0]
    if shape == "box":      # the rounded box lies inside the sharp one
        return float(np.sum(size * np.abs(rot[2])))
    return size[0] + size[1] * abs(rot[2, 2])


def _clip_norm(x, limit):
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x * np.minimum(1.0, limit / np.maximum(norm, 1e-300))


def _states(state, shapes, n_particle, values):
    """A batch of states of a structure from drawn values (numpy arrays, leading axis BATCH)."""
    n = len(shapes)
    quat = values["quat"]
    norm = np.linalg.norm(quat, axis=-1, keepdims=True)
    quat = np.where(norm > 0.1, quat / np.maximum(norm, 1e-300), [1.0, 0.0, 0.0, 0.0])
    rot = np.asarray(quat_to_mat(jnp.asarray(quat, jnp.float64)))
    pos = np.zeros((BATCH, n, 3))
    for b in range(BATCH):
        for i, shape in enumerate(shapes):
            pos[b, i] = (SPACING * i + values["xy"][b, i, 0], values["xy"][b, i, 1],
                         _support(shape, rot[b, i]) + values["clearance"][b, i])
    vel = _clip_norm(values["vel"], 3.0)
    ang_vel = _clip_norm(values["ang_vel"], 10.0)
    particle_pos = np.zeros((BATCH, n_particle, 3))
    for p in range(n_particle):
        particle_pos[:, p] = np.stack([SPACING * p + values["particle_xy"][:, p, 0],
                                       SPACING + values["particle_xy"][:, p, 1],
                                       PARTICLE_RADIUS[p] + values["particle_clearance"][:, p]],
                                      axis=-1)
    particle_vel = _clip_norm(values["particle_vel"], 3.0)
    # which bodies and particles take part: the others are parked far away, at rest
    body_on = np.arange(n)[None, :] < values["n_body"][:, None]
    particle_on = np.arange(n_particle)[None, :] < values["n_particle"][:, None]
    park = np.stack([10.0 + 2.0 * np.arange(n), np.full(n, 10.0), np.full(n, 5.0)], axis=-1)
    pos = np.where(body_on[..., None], pos, park[None])
    vel = np.where(body_on[..., None], vel, 0.0)
    ang_vel = np.where(body_on[..., None], ang_vel, 0.0)
    park_p = np.stack([-10.0 - 2.0 * np.arange(n_particle), np.full(n_particle, 10.0),
                       np.full(n_particle, 5.0)], axis=-1)
    particle_pos = np.where(particle_on[..., None], particle_pos, park_p[None])
    particle_vel = np.where(particle_on[..., None], particle_vel, 0.0)
    dtype = state.pos.dtype
    batch = {"pos": pos, "quat": quat, "vel": vel, "ang_vel": ang_vel,
             "particle_pos": particle_pos, "particle_vel": particle_vel}
    return jc.State(**{k: jnp.asarray(v, dtype) for k, v in batch.items()},
                    time=jnp.zeros((BATCH,), dtype))


def _values(n_body, n_particle):
    """The hypothesis strategy of one batch of scenes of a structure."""
    def floats(shape, low, high):
        return hnp.arrays(np.float64, shape, elements=st.floats(low, high))

    def counts(low, high):
        return hnp.arrays(np.int64, (BATCH,), elements=st.integers(low, high))

    return st.fixed_dictionaries({
        "quat": floats((BATCH, n_body, 4), -1.0, 1.0),
        "xy": floats((BATCH, n_body, 2), -0.02, 0.02),
        "clearance": floats((BATCH, n_body), 0.0, 0.02),
        "vel": floats((BATCH, n_body, 3), -3.0, 3.0),
        "ang_vel": floats((BATCH, n_body, 3), -10.0, 10.0),
        "particle_xy": floats((BATCH, n_particle, 2), -0.02, 0.02),
        "particle_clearance": floats((BATCH, n_particle), 0.0, 0.02),
        "particle_vel": floats((BATCH, n_particle, 3), -3.0, 3.0),
        "log_dt": floats((BATCH,), -4.0, -2.0),
        "friction": floats((BATCH, n_body), 0.0, 1.5),
        "n_body": counts(1, n_body),
        "n_particle": counts(0, n_particle),
    })


def _check_fuzz(shapes, n_particle, dtype, values):
    model, state = _structure(shapes, n_particle, dtype)
    states = _states(state, shapes, n_particle, values)
    dt = jnp.asarray(10.0 ** values["log_dt"], dtype)
    friction = jnp.asarray(values["friction"], dtype)
    final, info, (d_vel, d_particle_vel, d_friction) = _batch(model, states, dt, friction)
    assert _finite(final), "non-finite state"
    assert _finite((d_vel, d_particle_vel, d_friction)), "non-finite gradient"
    # closed form for every scene that touched nothing in any step: free flight under
    # gravity, x_T = x_0 + T Δt v_0 + ..., v_T = v_0 + T Δt g, and friction does nothing
    free = np.asarray(jnp.all(info.active_contacts == 0, axis=1))
    expected = STEPS * np.asarray(dt, np.float64) + 0.1
    rtol = 1e-4 if dtype == jnp.float32 else 1e-9
    for b in np.flatnonzero(free):
        np.testing.assert_allclose(np.asarray(d_vel[b], np.float64), expected[b], rtol=rtol,
                                   err_msg=f"scene {b}: d/dv0 of a free body")
        np.testing.assert_allclose(np.asarray(d_particle_vel[b], np.float64), expected[b],
                                   rtol=rtol, err_msg=f"scene {b}: d/dv0 of a free particle")
        np.testing.assert_array_equal(np.asarray(d_friction[b]), 0.0)
    # parked bodies never touch anything: the same closed form in every scene
    n = len(shapes)
    parked = np.arange(n)[None, :] >= values["n_body"][:, None]
    for b, i in zip(*np.nonzero(parked)):
        np.testing.assert_allclose(np.asarray(d_vel[b, i], np.float64), expected[b], rtol=rtol)
        assert float(d_friction[b, i]) == 0.0
    return free


FUZZ = settings(max_examples=10, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW_FUZZ = settings(FUZZ, max_examples=15)
MIXED = ("sphere", "box", "capsule")


@pytest.mark.slow  # 25 s of compilation; CI: the thrown boxes and sliding sphere below
@FUZZ
@given(values=_values(1, 0))
def test_fuzz_box_float32(values):
    _check_fuzz(("box",), 0, jnp.float32, values)


@pytest.mark.slow
@pytest.mark.parametrize("shapes, n_particle, dtype", [
    (MIXED, 2, jnp.float32),                      # ~7 min of compilation on 2 busy cores
    (("sphere", "capsule"), 1, jnp.float64),
], ids=["sphere-box-capsule-2p-float32", "sphere-capsule-1p-float64"])
def test_fuzz_mixed_scenes(shapes, n_particle, dtype):
    """1-3 bodies of the structure plus 0-2 particles (the others parked)."""
    seen = {"contact": 0}

    @SLOW_FUZZ
    @given(values=_values(len(shapes), n_particle))
    def run(values):
        free = _check_fuzz(shapes, n_particle, dtype, values)
        seen["contact"] += int(np.sum(~free))

    run()
    assert seen["contact"] > 0          # the fuzz did reach contacts


@pytest.mark.slow
@FUZZ
@given(values=_values(1, 0))
def test_fuzz_box_float64(values):
    _check_fuzz(("box",), 0, jnp.float64, values)


# --- float32 physics --------------------------------------------------------------------------

BOX_MASS, BOX_HALF, BOX_K, BOX_DT = 1.0, SIZES["box"], 1e5, 0.002


def _thrown_values():
    """Box 0 is put down at rest, touching the plane; the others are thrown at random."""
    rng = np.random.default_rng(0)
    first = np.arange(BATCH) == 0
    return {
        "quat": np.where(first[:, None, None], [1.0, 0.0, 0.0, 0.0],
                         rng.normal(size=(BATCH, 1, 4))),
        "xy": np.zeros((BATCH, 1, 2)),
        "clearance": np.where(first[:, None], 0.0, rng.uniform(0.0, 0.1, (BATCH, 1))),
        "vel": np.where(first[:, None, None], 0.0, rng.uniform(-2.0, 2.0, (BATCH, 1, 3))),
        "ang_vel": np.where(first[:, None, None], 0.0,
                            rng.uniform(-10.0, 10.0, (BATCH, 1, 3))),
        "particle_xy": np.zeros((BATCH, 0, 2)), "particle_clearance": np.zeros((BATCH, 0)),
        "particle_vel": np.zeros((BATCH, 0, 3)),
        "n_body": np.ones(BATCH, np.int64), "n_particle": np.zeros(BATCH, np.int64),
    }


@pytest.fixture(scope="module")
def thrown_boxes():
    """BATCH boxes (`_thrown_values`) for 200 steps, by the program of the structure of
    `test_fuzz_box_float32` (compiled once for both)."""
    model, state = _structure(("box",), 0, jnp.float32)
    assert float(model.body.mass[0]) == BOX_MASS and float(model.geom.stiffness[0]) == BOX_K
    values = _thrown_values()
    states = _states(state, ("box",), 0, values)
    dt = jnp.full((BATCH,), BOX_DT, jnp.float32)
    friction = jnp.full((BATCH, 1), 0.5, jnp.float32)
    infos, grads, heights = [], [], []
    for _ in range(200 // STEPS):
        states, info, grad = _batch(model, states, dt, friction)
        infos.append(info), grads.append(grad), heights.append(states.pos[0, 0, 2])
    infos = jax.tree.map(lambda *x: jnp.concatenate(x, axis=1), *infos)
    return states, infos, grads, np.asarray(heights, np.float64)


def test_float32_box_rests_at_m_g_over_k(thrown_boxes):
    final, info, _, heights = thrown_boxes
    assert final.pos.dtype == jnp.float32
    assert bool(jnp.all(info.converged[0])), "the resting box must converge every step"
    # linear law: k_n Σ d_i = m g over the 4 corner contacts, d = m g / (4 k_n) each.
    # In float32 the resting box holds its velocity within the default tolerance (3e-4 m/s):
    # steps it starts converged take no iteration, and its penetration swings by about
    # tol m / (Δt 4 k_n d) = 1.5 % about the answer (measured: ±1.2 % over the last 100
    # steps), so the closed form is asserted on the mean over those steps, and each
    # sample within the tolerance's swing (design note 41)
    expected = BOX_MASS * G / (4 * BOX_K)
    penetration = BOX_HALF[2] - heights[-20:]
    assert np.mean(penetration) == pytest.approx(expected, rel=2e-3)
    np.testing.assert_allclose(penetration, expected, rtol=0.03)
    late = np.asarray(info.max_penetration[0, -100:], np.float64)
    assert np.mean(late) == pytest.approx(expected, rel=2e-3)
    assert int(info.active_contacts[0, -1]) == 4
    np.testing.assert_allclose(np.asarray(final.vel[0]), 0.0, atol=1e-4)
    np.testing.assert_allclose(np.asarray(final.pos[0, 0, :2]), 0.0, atol=1e-5)


def test_float32_thrown_boxes_finite_and_converged(thrown_boxes):
    final, info, grads, _ = thrown_boxes
    assert _finite(final)
    assert _finite(grads)
    converged = np.asarray(info.converged)
    assert converged.shape == (BATCH, 200)
    assert converged.mean() >= 0.99, (
        f"{int((~converged).sum())} of {converged.size} steps did not converge: "
        f"(scene, step) {np.argwhere(~converged).tolist()}, residuals "
        f"{np.asarray(info.residual)[~converged].tolist()}")
    # the thrown boxes did land: contacts were found and they end near the ground
    assert int(jnp.sum(info.active_contacts[1:, -1] > 0)) >= BATCH // 2
    assert float(jnp.max(final.pos[:, 0, 2])) < 0.5


def test_float32_sphere_slides_at_mu_g():
    """Coulomb: a sphere launched without spin decelerates at μ g and spins up at
    5 μ g / (2 r) until it rolls (at t = 2 v0 / (7 μ g))."""
    mu, r, m, k, v0, dt = 0.5, 0.05, 1.0, 1e5, 2.0, 0.002
    scene = jc.Scene(dt=dt, friction=mu, stiffness=k, damping=2.0 * math.sqrt(k * m))
    scene.add_plane()
    scene.add_sphere(r, m, (0.0, 0.0, r - m * G / k), vel=(v0, 0.0, 0.0))
    # the lagged coupling: exact Coulomb in contact (the cone's hover, design note 57, would
    # bounce the sphere off the plane at the launch)
    model, state = scene.build(dtype=jnp.float32, contact=jc.Contact(coupling="lagged"))
    _, traj, info = jax.jit(lambda mo, s: jc.rollout(mo, s, steps=60, return_info=True))(
        model, state)
    assert traj.vel.dtype == jnp.float32
    assert bool(jnp.all(info.converged))
    t = dt * np.arange(1, 61)
    v = np.asarray(traj.vel[:, 0, 0], np.float64)
    w = np.asarray(traj.ang_vel[:, 0, 1], np.float64)
    window = slice(5, 45)                      # t_roll = 0.117 s: step 58
    assert np.all(v[window] - w[window] * r > 0.1), "still sliding over the fitted window"
    assert np.polyfit(t[window], v[window], 1)[0] == pytest.approx(-mu * G, rel=2e-3)
    assert np.polyfit(t[window], w[window], 1)[0] == pytest.approx(5 * mu * G / (2 * r),
                                                                   rel=5e-3)
    # it then rolls at 5/7 v0
    assert v[-1] == pytest.approx(5 / 7 * v0, rel=1e-2)
    np.testing.assert_allclose(np.asarray(traj.vel[:, 0, 1]), 0.0, atol=1e-5)


@pytest.mark.slow  # it failed (xfail) until the row model of Newton's lag phase (design note 24)
def test_float32_thrown_boxes_converge_every_step_with_more_iterations():
    model, state = _structure(("box",), 0, jnp.float32)
    model = model.replace(solver=jc.Newton(iterations=50))
    states = _states(state, ("box",), 0, _thrown_values())
    _, _, info = jax.jit(jax.vmap(lambda s: jc.rollout(model, s, steps=200,
                                                        return_info=True)))(states)
    bad = ~np.asarray(info.converged)
    assert not bad.any(), (f"(scene, step) {np.argwhere(bad).tolist()}, residuals "
                           f"{np.asarray(info.residual)[bad].tolist()}")


# 8 boxes: the compile alone takes about a minute. It was an expected failure (94.8 % of these
# steps converged, design note 37) until the smaller programs of design note 44: 97.6 % at
# 58b0aa1. The figure moves with float32 rounding (a variant of note 44 with another `quat_mul`
# failed it), so it is a check of a level, not of a margin
@pytest.mark.slow
def test_float32_boxes_thrown_together_converge():
    # the boxes8 benchmark scene (`benchmarks/throughput.py --scene boxes8`): 8 boxes in a
    # 2 x 4 grid, 1 cm between faces, thrown with v, ω ~ N(0, 1) per axis, so neighbours
    # collide in the air and land on each other. The row model as every dense lag direction
    # reached 97.5 % but broke other slow tests (note 37)
    scene = jc.Scene(dt=0.002)
    scene.add_plane(friction=0.5)
    pitch = 0.11
    for i in range(4):
        for j in range(2):
            scene.add_box(0.05, 1.0, ((i - 1.5) * pitch, (j - 0.5) * pitch, 0.3), friction=0.5)
    model, state = scene.build(dtype=jnp.float32)
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    vel, ang_vel = (jax.random.normal(k, (4, 8, 3), jnp.float32) for k in (k1, k2))
    states = jax.vmap(lambda v, w: state.replace(vel=v, ang_vel=w))(vel, ang_vel)
    final, _, info = jax.jit(jax.vmap(lambda s: jc.rollout(model, s, steps=500,
                                                           return_info=True)))(states)
    assert np.all(np.isfinite(np.asarray(final.pos)))
    converged = float(np.mean(np.asarray(info.converged)))
    assert converged >= 0.96, converged
    # after 1 s no box lies on top of another (z = 0.15; one leaning on a neighbour stands
    # lower)
    assert np.all(np.asarray(final.pos[..., 2]) < 0.12), np.asarray(final.pos[..., 2])


@jax.jit
def _pendulum_swing(model, state):
    _, traj, info = jc.rollout(model, state, steps=2600, return_info=True)
    return traj.pos[:, 0, 0], info.converged


@pytest.mark.parametrize("k", [1e5, 1e6, 1e7])
def test_float32_stiff_hinge_pendulum_swings_at_its_period(k):
    # a 1 kg bob 1 m below a world hinge of stiffness k (linear and angular), released at
    # 0.1 rad, Δt = 1 ms: in float32, k times the rounding of a position (1e7 x 1e-7 m = 1 N at
    # k = 1e7) is as large as gravity's restoring force; v1 accepted steps at that floor and
    # swung at 3.48 s. Closed form: the compound pendulum 2π sqrt(I / (m g L)), I = m L² + 2/5 m r²
    # (implicit Euler lengthens it by about Δt-order terms: float64 gives 2.0084 s)
    length, mass, radius, theta0, dt = 1.0, 1.0, 0.05, 0.1, 1e-3
    scene = jc.Scene(dt=dt)
    bob = scene.add_sphere(radius, mass, (length * math.sin(theta0), 0.0,
                                          -length * math.cos(theta0)))
    scene.add_joint("hinge", -1, bob, anchor=(0, 0, 0), axis=(0, 1, 0), stiffness=k,
                    angular_stiffness=k)
    x, converged = _pendulum_swing(*scene.build(dtype=jnp.float32))
    assert bool(jnp.all(converged))
    x = np.asarray(x, np.float64)
    t = dt * np.arange(1, x.size + 1)
    i = np.nonzero(np.sign(x[:-1]) != np.sign(x[1:]))[0]
    crossings = t[i] + dt * x[i] / (x[i] - x[i + 1])     # at T/4, 3T/4, 5T/4
    assert crossings.size == 3
    inertia = mass * length ** 2 + 0.4 * mass * radius ** 2
    expected = 2 * math.pi * math.sqrt(inertia / (mass * G * length))
    assert crossings[2] - crossings[0] == pytest.approx(expected, rel=1e-2)
