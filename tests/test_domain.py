"""Tests of `jaxcontact.domain`: distributions (ranges, moments, reparameterized gradients),
randomizers (what each range does to the scene, streams, no recompilation, gradients of a
randomized loss against finite differences), `compose`, `cvar`, and the ValueErrors.

Compilation dominates: the scene has two bodies and one plane, and every randomizer runs
through one of two module-level jitted functions (a batch, one scene), which take the
randomizer as an argument: one small program per set of ranges. The fast gradient check
differentiates a closed form of the randomized scenes; the check through rollouts (a sphere,
10 steps, its own ~30-50 s program) is marked slow.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import domain
from jaxcontact.domain import LogUniform, Normal, Uniform
from jaxcontact.models.contacts import HOW, combine

BATCH = 4096
# A sample mean of BATCH draws is within 5 standard errors of the mean but for a chance of
# 6e-7; the loosest check below (a std of a log-uniform, up to 1/sqrt(2 BATCH) relative) has
# the same margin.
_SIGMAS = 5.0


@jax.jit
def _vmapped(fn, model, state, key):
    keys = jax.random.split(key, BATCH)
    return jax.vmap(fn, in_axes=(None, None, 0))(model, state, keys)


@jax.jit
def _single(fn, model, state, key):
    return fn(model, state, key)


def _batch(fn, model, state, key):
    """BATCH scenes randomized by `fn` (a Randomizer: its distributions are traced, so one
    program per set of ranges), as NumPy arrays (cheap to slice and compare)."""
    return jax.tree.map(np.asarray, _vmapped(fn, model, state, key))


def _one(fn, model, state, key):
    """One scene randomized by `fn`, as NumPy arrays."""
    return jax.tree.map(np.asarray, _single(fn, model, state, key))


def _scene(planes=1, mesh=False):
    scene = jc.Scene(dt=0.01)
    for _ in range(planes):
        scene.add_plane(friction=0.5, stiffness=1e5, damping=200.0)
    scene.add_sphere(radius=0.05, mass=1.0, pos=(0.0, 0.0, 0.05))
    scene.add_box(half_size=(0.05, 0.04, 0.03), mass=2.0, pos=(0.3, 0.0, 0.03), rounding=0.01,
                  stiffness=2e5, damping=100.0)
    if mesh:
        cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        scene.add_mesh(0.02 * cube, mass=0.5, pos=(0.6, 0.0, 0.02))
    return scene.build(dtype=jnp.float64)


@pytest.fixture(scope="module")
def scene():
    return _scene()


def _within_mean(name, values, low, high, mean):
    values = np.asarray(values)
    assert np.all(values >= low) and np.all(values <= high), (
        f"{name} outside [{low}, {high}]: min {values.min()}, max {values.max()}")
    err = _SIGMAS * np.std(values) / math.sqrt(values.size)
    assert abs(values.mean() - mean) <= err, f"{name}: mean {values.mean()} != {mean}"


# --- distributions ---------------------------------------------------------------------------

def test_distribution_moments():
    key = jax.random.PRNGKey(0)
    low, high = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 0.5, 2.0])
    x = np.asarray(Uniform(low, high).sample(key, (BATCH, 3)))
    assert x.dtype == np.float64
    for axis in range(3):
        _within_mean(f"Uniform axis {axis}", x[:, axis], low[axis], high[axis],
                     0.5 * (low[axis] + high[axis]))
    np.testing.assert_allclose(x.std(axis=0), (high - low) / math.sqrt(12.0), rtol=0.05,
                               err_msg="Uniform std")
    np.testing.assert_array_equal(x[:, 2], 2.0, "low == high is the constant")
    # LogUniform: the log is uniform, each decade drawn equally often
    y = np.log10(np.asarray(LogUniform(1e-2, 1e2).sample(key, (BATCH,))))
    _within_mean("log10 LogUniform", y, -2.0, 2.0, 0.0)
    assert np.std(y) == pytest.approx(4.0 / math.sqrt(12.0), rel=0.05), "log std"
    decades = np.histogram(y, bins=4, range=(-2.0, 2.0))[0] / BATCH
    np.testing.assert_allclose(decades, 0.25, atol=_SIGMAS * math.sqrt(0.25 * 0.75 / BATCH))
    # Normal: mean and std per axis (a 3-vector mean with a scalar std)
    z = np.asarray(Normal((0.0, 0.0, -9.81), 0.1).sample(key, (BATCH, 3)))
    np.testing.assert_allclose(z.mean(axis=0), (0.0, 0.0, -9.81),
                               atol=_SIGMAS * 0.1 / math.sqrt(BATCH))
    np.testing.assert_allclose(z.std(axis=0), 0.1, rtol=0.05)
    assert Normal(0.0, 1.0).sample(key, (4,), jnp.float32).dtype == jnp.float32


def test_samples_are_reparameterized():
    """∂x/∂(low, high) = (1 - u, u) for Uniform, x log(x/low)/log(high/low)/high for
    LogUniform's high, z = (x - mean)/std for Normal's std: the sample is a differentiable
    function of the parameters given the key."""
    key = jax.random.PRNGKey(1)

    def total(cls, a, b):
        return jnp.sum(cls(a, b).sample(key, (64,)))

    x = np.asarray(Uniform(0.5, 2.0).sample(key, (64,)))
    u = (x - 0.5) / 1.5
    d_low, d_high = jax.grad(lambda a, b: total(Uniform, a, b), argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose((d_low, d_high), (np.sum(1.0 - u), np.sum(u)), rtol=1e-12)
    x = np.asarray(LogUniform(0.5, 2.0).sample(key, (64,)))
    d_high = jax.grad(lambda b: total(LogUniform, 0.5, b))(2.0)
    np.testing.assert_allclose(d_high, np.sum(x * np.log(x / 0.5) / np.log(4.0) / 2.0),
                               rtol=1e-12)
    x = np.asarray(Normal(1.0, 0.5).sample(key, (64,)))
    d_mean, d_std = jax.grad(lambda a, b: total(Normal, a, b), argnums=(0, 1))(1.0, 0.5)
    np.testing.assert_allclose((d_mean, d_std), (64.0, np.sum((x - 1.0) / 0.5)), rtol=1e-12)


# --- randomizers ---------------------------------------------------------------------------

RANGES = dict(
    mass=LogUniform(0.5, 2.0), friction=(0.2, 1.0), stiffness=(5e4, 2e5),
    restitution=(0.2, 0.8), gravity=Normal((0.0, 0.0, -9.81), (0.1, 0.1, 0.2)),
    size=(0.5, 1.5), pos=((-0.02, -0.02, 0.0), (0.02, 0.02, 0.01)),
    vel=Uniform((-0.5, -0.5, -1.0), (0.5, 0.5, -0.3)), ang_vel=Normal(0.0, 2.0),
    yaw=(-math.pi, math.pi))


@pytest.fixture(scope="module")
def randomized(scene):
    model, state = scene
    return _batch(domain.randomizer(**RANGES), model, state, jax.random.PRNGKey(0))


def test_mass_size_and_surface(scene, randomized):
    model, _ = scene
    models, _ = randomized
    mass = np.asarray(models.body.mass)
    assert mass.shape == (BATCH, 2)
    log_mass = np.log(mass)
    _within_mean("log mass", log_mass, math.log(0.5), math.log(2.0), 0.0)
    scale = np.asarray(models.geom.rounding)[:, 1] / float(model.geom.rounding[1])
    _within_mean("size of the box (its rounding)", scale, 0.5, 1.5, 1.0)
    # the sphere's radius and the box's half sizes scale by the body's factor
    scales = np.stack([np.asarray(models.geom.size)[:, 0, 0] / 0.05, scale], axis=1)
    np.testing.assert_allclose(np.asarray(models.geom.size),
                               scales[:, :, None] * np.asarray(model.geom.size)[None],
                               rtol=1e-12, err_msg="geom.size")
    # consistent mass properties: inertia / (mass size²) is the built one
    ratio = np.asarray(models.body.inertia) / (mass * scales ** 2)[:, :, None]
    np.testing.assert_allclose(ratio, np.broadcast_to(
        np.asarray(model.body.inertia) / np.asarray(model.body.mass)[:, None], ratio.shape),
        rtol=1e-12, err_msg="inertia not scaled with mass and size²")
    for name, (low, high) in (("friction", (0.2, 1.0)), ("stiffness", (5e4, 2e5))):
        for where in ("geom", "plane"):
            values = np.asarray(getattr(getattr(models, where), name))
            _within_mean(f"{where}.{name}", values, low, high, 0.5 * (low + high))
    gravity = np.asarray(models.gravity)
    np.testing.assert_allclose(gravity.mean(axis=0), (0.0, 0.0, -9.81),
                               atol=_SIGMAS * 0.2 / math.sqrt(BATCH))
    np.testing.assert_allclose(gravity.std(axis=0), (0.1, 0.1, 0.2), rtol=0.05)


def test_restitution_is_the_damped_laws(scene, randomized):
    """Every body-plane pair's damping gives back the body's e through the damped law's
    restitution (`jc.damping_to_restitution`), with the
    pair's combined stiffness and damping and the body's randomized mass."""
    def restitution(models):
        pair_k = combine(models.geom.stiffness, models.plane.stiffness[:, :1], HOW["stiffness"])
        pair_d = combine(models.geom.damping, models.plane.damping[:, :1], HOW["damping"])
        return np.asarray(jc.damping_to_restitution(pair_d, pair_k, models.body.mass))

    models, _ = randomized
    _within_mean("restitution", restitution(models), 0.2, 0.8, 0.5)
    # a constant e: exactly it, also with the built (unrandomized) masses and stiffnesses
    model, state = scene
    models, _ = _batch(domain.randomizer(restitution=Uniform(0.4, 0.4)), model, state,
                       jax.random.PRNGKey(0))
    np.testing.assert_allclose(restitution(models), 0.4, rtol=1e-12)
    np.testing.assert_array_equal(models.plane.damping, 0.0)


def test_state_ranges(scene, randomized):
    _, state = scene
    _, states = randomized
    offset = np.asarray(states.pos) - np.asarray(state.pos)[None]
    low, high = RANGES["pos"]
    for axis in range(3):
        _within_mean(f"pos offset axis {axis}", offset[..., axis], low[axis], high[axis],
                     0.5 * (low[axis] + high[axis]))
        _within_mean(f"vel axis {axis}", np.asarray(states.vel)[..., axis],
                     RANGES["vel"].low[axis], RANGES["vel"].high[axis],
                     float(RANGES["vel"].low[axis] + RANGES["vel"].high[axis]) / 2.0)
    np.testing.assert_allclose(np.asarray(states.ang_vel).std(), 2.0, rtol=0.05)
    quat = np.asarray(states.quat)  # built orientations are the identity: pure yaw
    np.testing.assert_allclose(quat[..., 1:3], 0.0, atol=1e-15, err_msg="yaw tilted a body")
    _within_mean("yaw", 2.0 * np.arctan2(quat[..., 3], quat[..., 0]), -math.pi, math.pi, 0.0)


def test_streams_keys_and_body_selection(scene, randomized):
    model, state = scene
    models, states = randomized
    key = jax.random.PRNGKey(0)
    # a range's draws do not depend on the other ranges given, nor on `bodies`
    alone, _ = _batch(domain.randomizer(friction=RANGES["friction"]), model, state, key)
    np.testing.assert_array_equal(alone.geom.friction, models.geom.friction)
    np.testing.assert_array_equal(alone.plane.friction, models.plane.friction)
    np.testing.assert_array_equal(alone.body.mass, np.broadcast_to(model.body.mass,
                                                                   (BATCH, 2)))
    some, some_states = _batch(domain.randomizer(friction=RANGES["friction"],
                                                 vel=RANGES["vel"], bodies=(1,), planes=False),
                               model, state, key)
    np.testing.assert_array_equal(some.geom.friction[:, 1], models.geom.friction[:, 1])
    np.testing.assert_array_equal(some_states.vel[:, 1], states.vel[:, 1])
    np.testing.assert_array_equal(some.geom.friction[:, 0], 0.5, "body 0 was not selected")
    np.testing.assert_array_equal(some_states.vel[:, 0], 0.0, "body 0 was not selected")
    np.testing.assert_array_equal(some.plane.friction, 0.5, "planes=False")
    # the same key gives the same scene; another key, another one
    again = _batch(domain.randomizer(**RANGES), model, state, key)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(again),
                            jax.tree.leaves((models, states))):
        np.testing.assert_array_equal(a, b, jax.tree_util.keystr(path))
    other, _ = _one(domain.randomizer(**RANGES), model, state, jax.random.key(1))  # typed key
    assert not np.any(other.geom.friction[None] == models.geom.friction), "key ignored"


def test_mesh_size():
    model, state = _scene(mesh=True)
    m, _ = _one(domain.randomizer(size=(2.0, 2.0), bodies=(2,)), model, state,
                jax.random.PRNGKey(0))
    np.testing.assert_allclose(m.mesh.vertices, 2.0 * model.mesh.vertices, rtol=1e-12)
    np.testing.assert_allclose(m.mesh.planes[..., 3], 2.0 * model.mesh.planes[..., 3])
    np.testing.assert_array_equal(m.mesh.planes[..., :3], model.mesh.planes[..., :3])
    np.testing.assert_allclose(m.body.inertia[2], 4.0 * model.body.inertia[2], rtol=1e-12)
    np.testing.assert_array_equal(m.geom.size[:2], model.geom.size[:2], "not selected")


def test_new_keys_and_bounds_do_not_recompile(scene):
    model, state = scene
    traces = {"bounds": 0, "randomizer": 0}

    @jax.jit
    def with_bounds(model, state, key, low, high):
        traces["bounds"] += 1   # Python side effect: runs only while tracing
        fn = domain.randomizer(friction=Uniform(low, high), mass=(0.5, 2.0))
        return fn(model, state, key)

    @jax.jit
    def with_randomizer(fn, model, state, key):
        traces["randomizer"] += 1
        return fn(model, state, key)

    for seed, (low, high) in enumerate(((0.1, 0.2), (0.3, 0.9), (0.0, 1.5))):
        key = jax.random.PRNGKey(seed)
        m, _ = with_bounds(model, state, key, jnp.asarray(low), jnp.asarray(high))
        assert np.all((np.asarray(m.geom.friction) >= low) & (np.asarray(m.geom.friction)
                                                             <= high))
        m, _ = with_randomizer(domain.randomizer(friction=(low, high), mass=(0.5, 2.0)),
                               model, state, key)
        assert np.all((np.asarray(m.geom.friction) >= low) & (np.asarray(m.geom.friction)
                                                             <= high))
    assert traces == {"bounds": 1, "randomizer": 1}, f"recompiled: {traces}"
    # hashable by identity, like a function: it may be a static argument too (Task.reset)
    fn = domain.randomizer(friction=(0.1, 0.2))
    assert len({fn, fn, domain.randomizer(friction=(0.1, 0.2))}) == 2


# --- the gradient of a randomized loss -------------------------------------------------------

GRAD_BATCH = 64
# Central differences with h = 1e-6 of a smooth closed form in float64: truncation O(h²) and
# rounding ~ 1e-16 / h = 1e-10, both far below the tolerance.
FD_STEP = 1e-6
FD_RTOL = 1e-7


def test_gradient_wrt_ranges_matches_finite_differences(scene):
    """d/d(bounds) of the batch mean of a Coulomb block's stopping distance v²/(2 μ g), with the
    pair's μ, the velocity and gravity randomized, against central differences with common
    random numbers (the same keys): the samples are differentiable functions of the ranges
    through `vmap`, the body selection and the pair combination. (Through a rollout: the slow
    test below.)"""
    model, state = scene
    keys = jax.random.split(jax.random.PRNGKey(0), GRAD_BATCH)

    @jax.jit
    @jax.value_and_grad
    def loss(bounds):
        friction_high, vel_high, gravity_std = bounds
        fn = domain.randomizer(friction=Uniform(0.3, friction_high),
                               vel=Uniform((0.5, 0.0, 0.0), jnp.stack([vel_high, 0.0, 0.0])),
                               gravity=Normal((0.0, 0.0, -9.81), gravity_std), bodies=(1,))

        def stopping_distance(key):
            m, s = fn(model, state, key)
            mu = combine(m.geom.friction[1], m.plane.friction[0], HOW["friction"])
            return jnp.sum(s.vel[1] ** 2) / (2.0 * mu * -m.gravity[2])

        return jnp.mean(jax.vmap(stopping_distance)(keys))

    bounds = jnp.asarray([0.7, 1.5, 0.3])
    _, got = loss(bounds)
    for i, name in enumerate(("friction high", "vel high", "gravity std")):
        step = FD_STEP * jnp.zeros(3).at[i].set(1.0)
        fd = (loss(bounds + step)[0] - loss(bounds - step)[0]) / (2.0 * FD_STEP)
        assert float(got[i]) == pytest.approx(float(fd), rel=FD_RTOL), f"d loss/d {name}"
        assert abs(float(got[i])) > 1e-4, f"d loss/d {name} vanishes"


@pytest.mark.slow   # its own program: a vmapped rollout and its gradient, ~30-50 s to compile
def test_gradient_through_rollouts_matches_finite_differences():
    """jax.grad through vmap(randomize + rollout): a sphere sliding on the ground, its
    friction ~ U(0.05, high) (the ground's 0), the final x averaged over the batch, against
    central differences with common random numbers and the sliding block's closed form."""
    dt, steps, v0, g = 0.01, 10, 1.0, 9.81
    scene = jc.Scene(dt=dt)
    scene.add_plane(friction=0.0, stiffness=1e5, damping=200.0)   # pair μ: the sphere's / 2
    # at its resting penetration m g / k: the normal force is m g from the first step on
    scene.add_sphere(radius=0.05, mass=1.0, pos=(0.0, 0.0, 0.05 - g / 1e5), vel=(v0, 0.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)

    def randomized(high):
        return domain.randomizer(friction=Uniform(0.05, high), planes=False)

    @jax.jit
    @jax.value_and_grad
    def loss(high):
        def final_x(key):
            m, s = randomized(high)(model, state, key)
            return jc.rollout(m, s, steps=steps)[0].pos[0, 0]

        return jnp.mean(jax.vmap(final_x)(keys))

    # h: solver noise ~ 1e-10 / h relative, as in solvers/test_adjoint_finite_differences.py
    high, h = 0.4, 1e-5
    _, got = loss(high)
    fd = (loss(high + h)[0] - loss(high - h)[0]) / (2.0 * h)
    assert float(got) == pytest.approx(float(fd), rel=1e-4), "gradient vs FD"
    # every sphere slides all along (pair μ <= 0.2: it would roll from 2 v0/(7 μ g) > 0.1 s
    # on); implicit Euler: x_T = v0 T dt - μ g dt² T (T + 1)/2, μ = μ_sphere/2 and
    # μ_sphere = 0.05 + (high - 0.05) u, so d x_T/d high = -u g dt² T (T + 1)/4
    u = np.array([(float(randomized(high)(model, state, k)[0].geom.friction[0]) - 0.05)
                  / (high - 0.05) for k in keys])
    expected = -np.mean(u) * g * dt ** 2 * steps * (steps + 1) / 4.0
    assert float(got) == pytest.approx(expected, rel=0.05), "gradient vs the sliding block"


# --- compose and cvar ------------------------------------------------------------------------

def test_compose(scene):
    model, state = scene
    key = jax.random.PRNGKey(5)
    first = domain.randomizer(friction=(0.2, 1.0))
    second = domain.randomizer(friction=(2.0, 3.0), mass=(0.5, 2.0))

    def run(*fns):
        return jax.tree.map(np.asarray, jax.jit(domain.compose(*fns))(model, state, key))[0]

    def alone(fn, i):   # what fn draws on its own with the key folded as compose folds it
        return _one(fn, model, state, jax.random.fold_in(key, i))[0]

    m = run(first, second)
    np.testing.assert_array_equal(m.geom.friction, alone(second, 1).geom.friction,
                                  "the later one wins")
    np.testing.assert_array_equal(m.body.mass, alone(second, 1).body.mass)
    m = run(second, first)
    np.testing.assert_array_equal(m.geom.friction, alone(first, 1).geom.friction)
    np.testing.assert_array_equal(m.body.mass, alone(second, 0).body.mass)
    assert np.all(m.body.mass != np.asarray(model.body.mass)), "mass kept"


def test_cvar():
    losses = jnp.asarray([0.3, 2.0, -1.0, 5.0, 0.7, 1.1, 4.0, 0.0, 3.0, 0.5])
    worst = np.sort(np.asarray(losses))[::-1]
    assert float(domain.cvar(losses, 0.3)) == pytest.approx(worst[:3].mean(), rel=1e-12)
    assert float(domain.cvar(losses, 1.0)) == pytest.approx(worst.mean(), rel=1e-12)
    assert float(domain.cvar(losses, 0.05)) == pytest.approx(worst[0], rel=1e-12)
    # αB = 2.5: the third worst enters with weight one half
    expected = (worst[0] + worst[1] + 0.5 * worst[2]) / 2.5
    assert float(domain.cvar(losses, 0.25)) == pytest.approx(expected, rel=1e-12)
    # the gradient reaches only the tail, with its weights; alpha may be traced
    grad = np.asarray(jax.jit(jax.grad(domain.cvar))(losses, 0.25))
    tail = np.argsort(-np.asarray(losses))
    np.testing.assert_allclose(grad[tail[:3]], np.array([1.0, 1.0, 0.5]) / 2.5, rtol=1e-12)
    np.testing.assert_array_equal(grad[tail[3:]], 0.0)


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("make, pattern", [
    (lambda: Uniform(2.0, 1.0), r"Uniform must have low <= high, got low=2, high=1"),
    (lambda: Uniform(0.0, float("nan")), r"Uniform high must be finite, got nan"),
    (lambda: Uniform((0.0, 0.0), (1.0, 1.0)), r"Uniform low .*3-vector.*\(0.0, 0.0\)"),
    (lambda: Uniform("0", 1.0), r"Uniform low .*'0'"),
    (lambda: LogUniform(0.0, 1.0), r"LogUniform low must be > 0, got low=0"),
    (lambda: LogUniform((1.0, -1.0, 1.0), 2.0), r"LogUniform low .*\(1, -1, 1\)"),
    (lambda: LogUniform(2.0, 1.0), r"LogUniform must have low <= high"),
    (lambda: Normal(0.0, -0.1), r"Normal std must be >= 0, got std=-0.1"),
    (lambda: Normal(float("inf"), 1.0), r"Normal mean must be finite, got inf"),
    (lambda: Uniform(0.0, (1.0, 2.0, 3.0)).sample(jax.random.PRNGKey(0), (4,)),
     r"Uniform\(low=0, high=\(1, 2, 3\)\).*shape \(4,\)"),
    (lambda: domain.randomizer(mass=Normal(1.0, 0.1)), r"mass must be > 0.*Normal.*unbounded"),
    (lambda: domain.randomizer(mass=(0.0, 1.0)), r"mass must be > 0.*Uniform\(low=0"),
    (lambda: domain.randomizer(size=(-1.0, 2.0)), r"size must be > 0.*low=-1"),
    (lambda: domain.randomizer(friction=(-0.1, 1.0)), r"friction must be >= 0.*low=-0.1"),
    (lambda: domain.randomizer(restitution=(0.5, 1.5)), r"restitution must be <= 1.*1.5"),
    (lambda: domain.randomizer(friction=Uniform((0, 0, 0), (1, 1, 1))),
     r"friction must be a distribution of numbers.*shape \(3,\)"),
    (lambda: domain.randomizer(gravity=(0.0, 0.0, -9.81)), r"gravity must be a distribution"),
    (lambda: domain.randomizer(vel=((0.0, 0.0), (1.0, 1.0))), r"vel: Uniform low"),
    (lambda: domain.randomizer(damping=(0, 1), restitution=(0, 1)),
     r"damping or restitution.*damping=\(0, 1\)"),
    (lambda: domain.randomizer(bodies=(0, 0)), r"bodies must not repeat.*\(0, 0\)"),
    (lambda: domain.randomizer(bodies=(-1,)), r"bodies\[0\] .*-1"),
    (lambda: domain.randomizer(bodies=()), r"bodies must be a non-empty"),
    (lambda: domain.randomizer(bodies=1), r"bodies .*got 1"),
    (lambda: domain.randomizer(planes="yes"), r"planes must be a bool, got 'yes'"),
    (lambda: domain.randomizer(frction=(0, 1)), r"'frction'.*known"),
    (lambda: domain.compose(domain.randomizer(), "friction"), r"argument 1 .*'friction'"),
    (lambda: domain.cvar(jnp.ones(4), 0.0), r"alpha must be in \(0, 1\], got 0.0"),
    (lambda: domain.cvar(jnp.ones(4), 1.5), r"alpha must be in \(0, 1\], got 1.5"),
    (lambda: domain.cvar(jnp.ones(4), float("nan")), r"alpha must be in \(0, 1\], got nan"),
    (lambda: domain.cvar(jnp.ones(4), "0.5"), r"alpha must be a number.*'0.5'"),
    (lambda: domain.cvar(jnp.ones(4), True), r"alpha must be a number.*True"),
    (lambda: domain.cvar(jnp.ones((2, 2)), 0.5), r"losses must be .*\(2, 2\)"),
    (lambda: domain.cvar(jnp.ones(0), 0.5), r"losses must be .*\(0,\)"),
])
def test_invalid_arguments(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


@pytest.mark.parametrize("kwargs, pattern, build", [
    ({"bodies": (0, 5)}, r"bodies must hold indices in \[0, 2\), got \(0, 5\)", {}),
    ({"restitution": (0.2, 0.8), "planes": False}, r"restitution .*planes=False", {}),
    ({"restitution": (0.2, 0.8), "bodies": (0,)}, r"restitution .*bodies=\(0,\) of 2", {}),
    ({"restitution": (0.2, 0.8)}, r"restitution .*no plane", {"planes": 0}),
])
def test_invalid_scene(kwargs, pattern, build):
    model, state = _scene(**build)
    fn = domain.randomizer(**kwargs)
    with pytest.raises(ValueError, match=pattern):
        fn(model, state, jax.random.PRNGKey(0))


def test_batched_scene_rejected(scene, randomized):
    models, states = randomized
    with pytest.raises(ValueError, match=r"unbatched.*\(4096, 2\)"):
        domain.randomizer(friction=(0.0, 1.0))(models, states, jax.random.PRNGKey(0))
