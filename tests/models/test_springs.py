"""Distance springs and soft ball joints (thesis Eq. 111) against closed forms (float64)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import jaxcontact as jc

G = 9.81


@jax.jit
def _run(model, state):
    return jc.rollout(model, state, steps=500, return_info=True)


def _rollout(model, state, chunks):
    trajs = []
    for _ in range(chunks):
        state, traj, info = _run(model, state)
        assert bool(jnp.all(info.converged)), float(jnp.max(info.residual))
        trajs.append(traj)
    return state, jax.tree.map(lambda *x: jnp.concatenate(x), *trajs)


# Descent and Dual: slow; CI checks them on the sliding sphere of test_contact_physics.py
@pytest.mark.parametrize("solver", [
    pytest.param(jc.Newton(), id="newton"),
    pytest.param(jc.Descent(iterations=100), id="descent", marks=pytest.mark.slow),
    pytest.param(jc.Dual(iterations=100), id="dual", marks=pytest.mark.slow)])
def test_hanging_mass_rests_at_weight_over_stiffness(solver):
    # implicit Euler's equilibrium is exact: a mass placed at a stretch of m g / k stays there;
    # with the stretch off by 1% it would swing with an amplitude of 1% of the stretch
    k, m, rest = 400.0, 2.0, 0.3
    stretch = m * G / k
    s = jc.Scene(dt=0.002)
    body = s.add_sphere(0.02, m, (0.0, 0.0, 1.0 - rest - stretch))
    s.add_spring(body, -1, stiffness=k, anchor_b=(0.0, 0.0, 1.0), rest_length=rest)
    model, state = s.build(solver=solver)
    _, traj = _rollout(model, state, 1)
    z = np.asarray(traj.pos[:, 0, 2])
    assert np.max(np.abs(z - (1.0 - rest - stretch))) < 1e-6 * stretch
    np.testing.assert_allclose(traj.pos[:, 0, :2], 0.0, atol=1e-12)


def test_spring_oscillates_with_period_two_pi_sqrt_m_over_k():
    k, m, rest = 100.0, 1.0, 0.5
    s = jc.Scene(dt=1e-3, gravity=(0.0, 0.0, 0.0))
    body = s.add_sphere(0.02, m, (rest + 0.01, 0.0, 0.0))
    s.add_spring(body, -1, stiffness=k, anchor_b=(0.0, 0.0, 0.0), rest_length=rest)
    model, state = s.build()
    _, traj = _rollout(model, state, 4)  # 2 s, three periods; implicit Euler's period error
    x = np.asarray(traj.pos[:, 0, 0]) - rest  # is (ω Δt)²/3 = 3e-5 here
    t = np.arange(1, x.size + 1) * 1e-3
    # times where x crosses 0 going down, linearly interpolated
    i = np.nonzero((x[:-1] > 0) & (x[1:] <= 0))[0]
    crossings = t[i] + (t[i + 1] - t[i]) * x[i] / (x[i] - x[i + 1])
    assert crossings.size >= 2
    period = np.mean(np.diff(crossings))
    assert period == pytest.approx(2 * math.pi * math.sqrt(m / k), rel=1e-3)


def test_stiff_distance_spring_is_a_pendulum():
    # a small heavy bob on a stiff rod of length L: period 2π sqrt(L/g) (1 + θ0²/16)
    length, theta0 = 0.5, 0.1
    s = jc.Scene(dt=0.001)
    pivot = np.array([0.0, 0.0, 1.0])
    bob = s.add_sphere(0.005, 1.0, tuple(pivot + length * np.array(
        [math.sin(theta0), 0.0, -math.cos(theta0)])))
    s.add_spring(bob, -1, stiffness=1e6, anchor_b=tuple(pivot), rest_length=length)
    model, state = s.build()
    _, traj = _rollout(model, state, 6)  # 3 s, two periods
    x = np.asarray(traj.pos[:, 0, 0])
    t = np.arange(1, x.size + 1) * 1e-3
    i = np.nonzero((x[:-1] > 0) & (x[1:] <= 0))[0]
    crossings = t[i] + (t[i + 1] - t[i]) * x[i] / (x[i] - x[i + 1])
    period = crossings[1] - crossings[0]
    expected = 2 * math.pi * math.sqrt(length / G) * (1 + theta0 ** 2 / 16)
    assert period == pytest.approx(expected, rel=5e-3)
    # the rod stays at its length to m g / k
    r = np.linalg.norm(np.asarray(traj.pos[:, 0]) - pivot, axis=-1)
    assert np.max(np.abs(r - length)) < 3 * G / 1e6 + 1e-6


def test_ball_joint_keeps_points_together():
    # a cube hanging by a corner from a zero-length spring: the corner stays at the anchor
    s = jc.Scene(dt=0.002)
    box = s.add_box(0.05, 1.0, (0.05, 0.05, 0.95), ang_vel=(0.0, 0.0, 3.0))
    s.add_spring(box, -1, stiffness=1e6, anchor_a=(-0.05, -0.05, 0.05), rest_length=0.0)
    model, state = s.build()
    _, traj = _rollout(model, state, 1)
    corner = traj.pos[:, 0] + jax.vmap(lambda q: jc.math.quat_rotate(q, jnp.asarray(
        [-0.05, -0.05, 0.05])))(traj.quat[:, 0])
    drift = np.max(np.linalg.norm(np.asarray(corner) - np.array([0.0, 0.0, 1.0]), axis=-1))
    assert drift < 5e-5  # the swinging cube's load over k, with centripetal terms


def _spring_loss(params, model, state):
    k, rest, anchor = params
    m = model.replace(spring=model.spring.replace(stiffness=k, rest_length=rest, anchor_a=anchor))
    final, _ = jc.rollout(m, state, steps=40)
    return jnp.sum(final.pos * jnp.asarray([[0.3, -0.7, 1.1]])) + jnp.sum(final.ang_vel)


@pytest.mark.slow  # compile-heavy; CI: tests/scene/test_particles.py's gradients (an
# attachment's stiffness)
def test_spring_parameter_gradients_match_finite_differences():
    s = jc.Scene(dt=0.002)
    s.add_plane()
    box = s.add_box(0.05, 1.0, (0.1, 0.0, 0.3), ang_vel=(0.5, -1.0, 0.2))
    s.add_spring(box, -1, stiffness=200.0, anchor_a=(0.05, 0.0, 0.05),
                 anchor_b=(0.0, 0.0, 0.6), rest_length=0.2)
    model, state = s.build()
    params = (model.spring.stiffness, model.spring.rest_length, model.spring.anchor_a)
    # the loss and its gradient, one program (finite differences call it too)
    value_and_grad = jax.jit(jax.value_and_grad(lambda p: _spring_loss(p, model, state)))

    def loss(p):
        return value_and_grad(p)[0]

    grad = value_and_grad(params)[1]
    flat, unravel = ravel_pytree(params)
    g_flat, _ = ravel_pytree(grad)
    h = 1e-6
    for i in range(flat.size):
        e = jnp.zeros_like(flat).at[i].set(h * max(1.0, abs(float(flat[i]))))
        fd = (loss(unravel(flat + e)) - loss(unravel(flat - e))) / (2 * float(e[i]))
        assert float(g_flat[i]) == pytest.approx(float(fd), rel=1e-5, abs=1e-7), i
