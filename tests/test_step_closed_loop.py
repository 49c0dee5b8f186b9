"""Closed-loop rollouts (`jc.rollout(policy=...)`, jaxcontact/step.py): a policy's gradient
through contact matches central differences (and forward mode, slow), a policy in the loop
equals its controls fed open loop, a stochastic policy gets a fresh key every step, and bad
policies are refused by name.

Compilation dominates: the contact checks share one program (the closed-loop rollout of a
PD-controlled sphere sliding on the ground, its gradient, and the open-loop rollout of the
controls it applied). (Training policies: control/test_apg.py.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

STEPS = 15
TARGET = jnp.asarray([0.3, 0.1, 0.05])


def _sliding_sphere():
    scene = jc.Scene(dt=0.02)
    scene.add_plane(friction=0.5)
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.0499), vel=(0.5, 0.0, 0.0))
    return scene.build()


def pd_policy(gains, state):
    """A horizontal PD force towards TARGET with learned gains (kp, kd)."""
    plane = jnp.asarray([[1.0, 1.0, 0.0]])
    force = -(gains[0] * (state.pos - TARGET[None, :]) + gains[1] * state.vel) * plane
    return jc.Control(force=force, torque=jnp.zeros_like(force), motor=jnp.zeros((0,)))


@pytest.fixture(scope="module")
def closed_loop():
    model, state = _sliding_sphere()

    def loss(gains):
        final, traj, info, controls = jc.rollout(model, state, steps=STEPS, policy=pd_policy,
                                                 policy_params=gains, return_info=True,
                                                 return_controls=True)
        open_final, open_traj = jc.rollout(model, state, jax.lax.stop_gradient(controls))
        value = final.pos[0, 0] + 0.5 * final.pos[0, 1] + 0.1 * final.vel[0, 0]
        return value, (traj, info, controls, open_traj)

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


def test_closed_loop_gradient_matches_central_differences(closed_loop):
    gains = jnp.asarray([12.0, 3.0])
    (value, (traj, info, _, _)), grad = closed_loop(gains)
    assert bool(jnp.all(info.converged))
    assert int(jnp.max(info.active_contacts)) >= 1        # the sphere stays on the ground
    h = 1e-5
    for i in range(2):
        e = jnp.zeros(2).at[i].set(h)
        (plus, _), _ = closed_loop(gains + e)
        (minus, _), _ = closed_loop(gains - e)
        fd = (plus - minus) / (2 * h)
        assert abs(float(grad[i]) - float(fd)) <= 1e-6 + 1e-5 * abs(float(fd)), (i, grad, fd)
    assert abs(float(grad[0])) > 1e-3                      # the gains matter


@pytest.mark.slow  # CI: forward against reverse mode on particles (solvers/test_adjoint)
def test_closed_loop_forward_mode_matches_reverse_mode(closed_loop):
    gains = jnp.asarray([12.0, 3.0])
    _, grad = closed_loop(gains)
    scene = jc.Scene(dt=0.02)
    scene.add_plane(friction=0.5)
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.0499), vel=(0.5, 0.0, 0.0))
    model, state = scene.build(solver=jc.Newton(ad="jvp"))

    def value(g):
        final, _ = jc.rollout(model, state, steps=STEPS, policy=pd_policy, policy_params=g)
        return final.pos[0, 0] + 0.5 * final.pos[0, 1] + 0.1 * final.vel[0, 0]

    direction = jnp.asarray([0.3, -1.0])
    _, tangent = jax.jit(lambda g: jax.jvp(value, (g,), (direction,)))(gains)
    np.testing.assert_allclose(tangent, jnp.dot(grad, direction), rtol=1e-8)


def test_policy_in_the_loop_equals_its_controls_fed_open_loop(closed_loop):
    (_, (traj, _, controls, open_traj)), _ = closed_loop(jnp.asarray([12.0, 3.0]))
    assert controls.force.shape == (STEPS, 1, 3)
    # the control of step t is the policy at the state before it
    before = jax.tree.map(lambda x: x[STEPS - 2], traj)
    np.testing.assert_allclose(controls.force[STEPS - 1],
                               pd_policy(jnp.asarray([12.0, 3.0]), before).force, rtol=1e-12)
    np.testing.assert_allclose(traj.pos, open_traj.pos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj.vel, open_traj.vel, rtol=0, atol=1e-12)


def test_rollout_rejects_bad_policies():
    model, state = _sliding_sphere()
    controls = jax.tree.map(lambda x: jnp.broadcast_to(x, (3,) + x.shape),
                            jc.Control.zeros(1, 0))
    with pytest.raises(ValueError, match="not both"):
        jc.rollout(model, state, controls, policy=pd_policy)
    with pytest.raises(ValueError, match="policy must be a function"):
        jc.rollout(model, state, steps=2, policy="pd")
    with pytest.raises(ValueError, match="key is for a stochastic policy"):
        jc.rollout(model, state, steps=2, key=jax.random.key(0))

    def wrong_shape(params, s):
        return jc.Control(force=jnp.zeros((2, 3)), torque=jnp.zeros((1, 3)), motor=jnp.zeros(0))

    with pytest.raises(ValueError, match=r"policy returned a bad control: control.force .*\(2, 3\)"):
        jc.rollout(model, state, steps=2, policy=wrong_shape)
    with pytest.raises(ValueError, match="must return a jc.Control, got tuple"):
        jc.rollout(model, state, steps=2, policy=lambda p, s: (s.pos, s.vel))


def test_a_stochastic_policy_gets_a_fresh_key_every_step():
    scene = jc.Scene(dt=0.05, gravity=(0.0, 0.0, 0.0))
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.0))
    model, state = scene.build()

    def noisy(scale, s, key):
        force = scale * jax.random.normal(key, (1, 3), s.pos.dtype)
        return jc.Control(force=force, torque=jnp.zeros_like(force), motor=jnp.zeros((0,)))

    run = jax.jit(lambda scale, key: jc.rollout(model, state, steps=6, policy=noisy,
                                                 policy_params=scale, key=key,
                                                 return_controls=True))
    _, traj, forces = run(1.0, jax.random.key(0))
    _, traj_again, _ = run(1.0, jax.random.key(0))
    _, traj_other, _ = run(1.0, jax.random.key(1))
    np.testing.assert_array_equal(traj.pos, traj_again.pos)          # reproducible
    assert float(jnp.max(jnp.abs(traj.pos - traj_other.pos))) > 1e-3  # the key matters
    f = np.asarray(forces.force[:, 0])
    assert len({tuple(row) for row in f.round(12)}) == 6              # a new draw each step
    # step t's noise is fold_in(key, t)
    expect = jax.random.normal(jax.random.fold_in(jax.random.key(0), 3), (1, 3))
    np.testing.assert_allclose(f[3], expect[0], rtol=1e-12)
