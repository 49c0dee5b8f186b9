"""User-defined terms (`Scene.add_energy`): the mechanism the built-in physics uses, open.

A user potential written as the built-in spring's energy gives the built-in spring's
trajectory and gradients; a user dissipation gives the closed-form terminal velocity of linear
drag; a per-element potential over many particles (a hanging chain of springs) settles at the
closed-form static equilibrium.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

G = 9.81
K, L = 300.0, 0.25


def _two_boxes(scene):
    a = scene.add_box(0.05, 1.0, pos=(0.0, 0.0, 1.0), vel=(0.3, 0.0, 0.2), ang_vel=(0.0, 2.0, 1.0))
    b = scene.add_box(0.04, 0.5, pos=(0.3, 0.1, 1.0), vel=(-0.2, 0.4, 0.0), ang_vel=(1.0, 0.0, 0.0))
    scene.exclude_pair(a, b)   # the spring is the only force (and no box-box collider to compile)
    return a, b


def spring_energy(local, params):
    """k/2 (|p_a - p_b| - L)² between two body points given in the bodies' frames."""
    pa = local.pos[0] + jc.math.quat_rotate(local.quat[0], params["anchor_a"])
    pb = local.pos[1] + jc.math.quat_rotate(local.quat[1], params["anchor_b"])
    stretch = jnp.sqrt(jnp.sum((pa - pb) ** 2)) - params["rest_length"]
    return 0.5 * params["stiffness"] * stretch ** 2


@pytest.fixture(scope="module")
def spring_pair():
    """(built-in model, user model, state): the same two boxes joined by a spring."""
    anchor_a, anchor_b = np.array([0.05, 0.0, 0.0]), np.array([-0.04, 0.0, 0.02])
    builtin = jc.Scene(dt=0.005, gravity=(0.0, 0.0, 0.0))
    a, b = _two_boxes(builtin)
    builtin.add_spring(a, b, stiffness=K, anchor_a=tuple(anchor_a), anchor_b=tuple(anchor_b),
                       rest_length=L)
    model_b, state = builtin.build(dtype=jnp.float64)
    user = jc.Scene(dt=0.005, gravity=(0.0, 0.0, 0.0))
    a, b = _two_boxes(user)
    user.add_energy(spring_energy, bodies=[[a, b]],
                    params={"anchor_a": anchor_a[None], "anchor_b": anchor_b[None],
                            "rest_length": np.array([L]), "stiffness": np.array([K])})
    model_u, state_u = user.build(dtype=jnp.float64)
    np.testing.assert_array_equal(np.asarray(state.pos), np.asarray(state_u.pos))
    # the built-in spring's anchors are in the bodies' frames, like the user term's
    np.testing.assert_allclose(np.asarray(model_b.spring.anchor_a[0]), anchor_a, atol=1e-15)
    np.testing.assert_allclose(np.asarray(model_b.spring.anchor_b[0]), anchor_b, atol=1e-15)
    return model_b, model_u, state


@jax.jit
def _traj(model, state):
    _, traj, info = jc.rollout(model, state, steps=40, return_info=True)
    return traj, info


def test_user_spring_follows_the_builtin_trajectory(spring_pair):
    model_b, model_u, state = spring_pair
    traj_b, info_b = _traj(model_b, state)
    traj_u, info_u = _traj(model_u, state)
    assert bool(jnp.all(info_b.converged)) and bool(jnp.all(info_u.converged))
    for name in ("pos", "quat", "vel", "ang_vel"):
        np.testing.assert_allclose(np.asarray(getattr(traj_u, name)),
                                   np.asarray(getattr(traj_b, name)), rtol=0, atol=1e-10)
    # the spring acted: the relative motion changed
    assert float(jnp.abs(traj_b.vel[-1, 0, 0] - state.vel[0, 0])) > 1e-2


@pytest.mark.slow  # compile-heavy; CI: the trajectory equality above
def test_user_spring_gradients_equal_the_builtin_ones(spring_pair):
    model_b, model_u, state = spring_pair

    def loss(final):
        return jnp.sum(final.pos[1] * jnp.array([1.0, 2.0, 3.0])) + jnp.sum(final.ang_vel ** 2)

    def builtin(k, vel):
        m = model_b.replace(spring=model_b.spring.replace(stiffness=k))
        return loss(jc.rollout(m, state.replace(vel=vel), steps=20)[0])

    def user(k, vel):
        m = model_u.replace(energy=({**model_u.energy[0], "stiffness": k},))
        return loss(jc.rollout(m, state.replace(vel=vel), steps=20)[0])

    k0 = jnp.array([K])
    gb = jax.jit(jax.grad(builtin, argnums=(0, 1)))(k0, state.vel)
    gu = jax.jit(jax.grad(user, argnums=(0, 1)))(k0, state.vel)
    for b, u in zip(gb, gu):
        assert np.all(np.isfinite(np.asarray(u)))
        np.testing.assert_allclose(np.asarray(u), np.asarray(b), rtol=1e-8, atol=1e-12)
    # and the user term's gradient is the derivative of the rollout (central differences)
    h, value = 1e-3, jax.jit(user)
    fd = (float(value(k0 + h, state.vel)) - float(value(k0 - h, state.vel))) / (2 * h)
    assert float(gu[0][0]) == pytest.approx(fd, rel=1e-6)
    assert abs(fd) > 1e-6


def test_user_dissipation_gives_the_terminal_velocity_of_linear_drag():
    """D = c/2 |v|² on a free particle: implicit Euler's m (v+ - v)/dt = m g - c v+ has the
    fixed point v = m g / c, reached geometrically by the factor m / (m + c dt)."""
    m, c, dt = 0.2, 0.5, 0.01
    scene = jc.Scene(dt=dt)
    p = scene.add_particle(m, (0.0, 0.0, 10.0))
    scene.add_energy(lambda local, prm: 0.5 * prm["c"] * jnp.sum(local.particle_vel[0] ** 2),
                     particles=[[p]], params={"c": np.array([c])}, dissipation=True)
    model, state = scene.build(dtype=jnp.float64)
    _, traj, info = jax.jit(lambda s: jc.rollout(model, s, steps=60, return_info=True))(state)
    assert bool(jnp.all(info.converged))
    vz = np.asarray(traj.particle_vel[:, 0, 2])
    factor = m / (m + c * dt)
    terminal = -m * G / c
    expected = terminal * (1.0 - factor ** np.arange(1, 61))
    np.testing.assert_allclose(vz, expected, rtol=1e-9, atol=1e-12)


def test_chain_of_particle_springs_hangs_at_the_static_equilibrium():
    """n particles joined in a line by one user term of n - 1 elements (k/2 (|x_i - x_j| -
    L)² each), the top one attached to the world: spring j from the top carries the weight of
    the n - j particles below it, so the bottom particle hangs Σ (L + (n - j) m g / k) below
    the anchor."""
    n, m, k, rest = 6, 0.05, 200.0, 0.1
    scene = jc.Scene(dt=0.005)
    ids = [scene.add_particle(m, (0.0, 0.0, 1.0 - rest * i)) for i in range(n)]
    scene.attach(ids[0], -1, stiffness=1e4, damping=20.0)

    def link(local, prm):
        delta = local.particle_pos[0] - local.particle_pos[1]
        return 0.5 * prm["k"] * (jnp.sqrt(jnp.sum(delta * delta)) - prm["rest"]) ** 2

    def drag(local, prm):   # relative damping along each link, so the chain settles
        dv = local.particle_vel[0] - local.particle_vel[1]
        return 0.5 * prm["c"] * jnp.sum(dv * dv)

    pairs = np.array([[ids[i], ids[i + 1]] for i in range(n - 1)])
    t = scene.add_energy(link, particles=pairs,
                         params={"k": np.full(n - 1, k), "rest": np.full(n - 1, rest)})
    scene.add_energy(drag, particles=pairs, params={"c": np.full(n - 1, 1.0)},
                     dissipation=True)
    model, state = scene.build(dtype=jnp.float64)
    assert model.energy[t]["k"].shape == (n - 1,)
    final, _, info = jax.jit(lambda s: jc.rollout(model, s, steps=1500, return_info=True))(state)
    assert bool(jnp.all(info.converged))
    top_sag = n * m * G / 1e4
    sags = [(n - 1 - j) * m * G / k for j in range(n - 1)]
    expected = 1.0 - top_sag - sum(rest + s for s in sags)
    assert float(final.particle_pos[-1, 2]) == pytest.approx(expected, abs=1e-6)
    assert float(jnp.max(jnp.abs(final.particle_vel))) < 1e-5


def test_dual_refuses_user_energies_by_name():
    scene = jc.Scene()
    p = scene.add_particle(1.0, (0.0, 0.0, 1.0))
    scene.add_energy(spring_energy, particles=[[p]], params=None)
    with pytest.raises(ValueError, match="energy 0"):
        scene.build(solver=jc.Dual(), contact=jc.Contact(friction="huber"))


@pytest.mark.parametrize("kwargs, match", [
    ({"bodies": None, "particles": None}, "bodies or particles"),
    ({"particles": [[0, 5]]}, "particles"),
    ({"particles": [[0]], "params": {"k": np.ones(3)}}, "leading axis"),
    ({"bodies": [[0, 1]], "particles": [[0], [0]]}, "same number of elements"),
])
def test_add_energy_rejects_bad_input(kwargs, match):
    scene = jc.Scene()
    scene.add_sphere(0.1, 1.0)
    scene.add_sphere(0.1, 1.0, pos=(1.0, 0.0, 0.0))
    scene.add_particle(1.0, (0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match=match):
        scene.add_energy(lambda local, prm: 0.0, **kwargs)
    with pytest.raises(ValueError, match="fn must be callable"):
        scene.add_energy("not a function", particles=[[0]])
