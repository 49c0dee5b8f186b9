"""System identification (`jc.optim.fit`, jaxcontact/optim/fit.py): friction and stiffness
of a sliding box recovered from two observed marker points, bad input refused, and the
forward-mode sensitivities it uses (`forward_mode`) against reverse mode and central
differences (slow).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc


@pytest.fixture(scope="module")
def sliding_box():
    """A box thrown along the ground (μ 0.4, k_n 2e4) and its 30-step trajectory."""
    scene = jc.Scene(dt=0.01, friction=0.4, stiffness=2e4, damping=50.0)
    scene.add_plane()
    scene.add_box(0.05, mass=1.0, pos=(0, 0, 0.05 - 9.81 / 4e4), vel=(1.5, 0, 0))
    model, state = scene.build()
    _, traj = jax.jit(lambda m, s: jc.rollout(m, s, steps=30))(model, state)
    return model, state, traj


CORNERS = jnp.array([[0.05, 0.05, -0.05], [-0.05, -0.05, 0.05]])


def corners(traj):
    """Two marker points on the box (`fit`'s `observe`): (T, 2, 3)."""
    return jc.observe.body_points(traj, CORNERS)


def test_fit_recovers_friction_and_stiffness_of_a_sliding_box(sliding_box):
    """From two observed marker points (`observe`), not the default c.o.m. positions."""
    model, state, traj = sliding_box
    guess = model.replace(geom=model.geom.replace(friction=0.7 * model.geom.friction,
                                                  stiffness=0.5 * model.geom.stiffness))
    found = jc.optim.fit(guess, state, corners(traj), ["geom.friction", "geom.stiffness"],
                         observe=corners)
    assert found.optim.converged, found.optim.status
    assert found.optim.iterations <= 8
    np.testing.assert_allclose(found.params["geom.friction"], 0.4, rtol=1e-2)
    np.testing.assert_allclose(found.params["geom.stiffness"], 2e4, rtol=1e-2)
    assert found.residual_rms < 1e-8
    # body_points puts the markers where the body's pose carries them
    np.testing.assert_allclose(corners(traj)[-1], traj.pos[-1, 0][None, :] + jax.vmap(
        lambda p: jc.math.quat_rotate(traj.quat[-1, 0], p))(CORNERS), atol=1e-12)
    fitted, same_state = found.apply(guess, state)
    assert same_state is state
    np.testing.assert_allclose(fitted.geom.friction, found.params["geom.friction"])
    with pytest.raises(ValueError, match=r"shape of observe\(traj\), \(30, 2, 3\)"):
        jc.optim.fit(guess, state, traj.pos, ["geom.friction"], observe=corners)


def test_fit_rejects_bad_input(sliding_box):
    model, state, traj = sliding_box
    with pytest.raises(ValueError, match="observed must have shape"):
        jc.optim.fit(model, state, traj.pos[:, :, :2], ["geom.friction"])
    bad = traj.pos.at[3, 0, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="observed must be finite"):
        jc.optim.fit(model, state, bad, ["geom.friction"])
    with pytest.raises(ValueError, match="unknown parameter 'geom.fricton'"):
        jc.optim.fit(model, state, traj.pos, ["geom.fricton"])
    with pytest.raises(ValueError, match="mask must have the shape"):
        jc.optim.fit(model, state, traj.pos, ["geom.friction"], mask=jnp.ones((3,), bool))
    with pytest.raises(ValueError, match="at least one"):
        jc.optim.fit(model, state, traj.pos, [])


@pytest.mark.slow
def test_forward_sensitivities_equal_reverse_mode_and_finite_differences(sliding_box):
    """The Jacobian of the box's final position with respect to (μ, k_n): forward mode
    (what Gauss-Newton uses), reverse mode and central differences agree. (In CI, `fit`
    converging in a few iterations on the same scene rests on these sensitivities.)"""
    model, state, _ = sliding_box
    forward = jc.optim.forward_mode(model)

    def final(theta, m):
        m = m.replace(geom=m.geom.replace(friction=theta[:1], stiffness=theta[1:] * 1e4))
        return jc.rollout(m, state, steps=30)[0].pos[0]

    theta = jnp.array([0.4, 2.0])
    jf = jax.jit(jax.jacfwd(lambda t: final(t, forward)))(theta)
    jr = jax.jit(jax.jacrev(lambda t: final(t, model)))(theta)
    h = 1e-6
    fd = jnp.stack([(final(theta + h * e, model) - final(theta - h * e, model)) / (2 * h)
                    for e in jnp.eye(2)], axis=1)
    np.testing.assert_allclose(jf, jr, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(jf, fd, rtol=1e-4, atol=1e-9)
