"""Backward-only smoothing (`jc.Implicit(smoothing=jc.Contact(...))`): the step is simulated
exactly and differentiated as the same step under other contact laws.

Checked (float64, a sphere over the ground): smoothing with the model's own laws gives the
exact gradient; the smoothed gradient of one step equals central differences of that step
simulated with the smoothing laws, in reverse mode (forward mode: the slow suite), while the
exact gradient of a near miss has no contact in it; the answer is the exact one; gradients
are finite at zero slip and at the edge of contact; a bad setting raises.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

SMOOTH = jc.Contact(normal="smooth", smooth_width=0.02, friction_regularization=0.1)
WEIGHTS = jnp.asarray([0.3, -0.2, 1.0, 0.05, 0.1, 0.2])   # of (pos, vel) after the step


def _scene(height, vel):
    """A 5 cm sphere at `height` over the ground, moving at `vel` (m/s)."""
    scene = jc.Scene(dt=0.01, friction=0.5, damping=20.0)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, (0.0, 0.0, height), vel=vel)
    return scene


def _loss(model, state, vel, friction):
    m = model.replace(geom=model.geom.replace(friction=friction))
    after, _ = jc.step(m, state.replace(vel=vel[None]))
    return jnp.dot(WEIGHTS, jnp.concatenate([after.pos[0], after.vel[0]]))


_value = jax.jit(_loss)
_value_and_reverse = jax.jit(jax.value_and_grad(_loss, argnums=(2, 3)))


@jax.jit
def _directional(model, state, vel, friction, t_vel, t_mu):
    """The loss's derivative along (t_vel, t_mu), in forward mode."""
    return jax.jvp(lambda v, mu: _loss(model, state, v, mu), (vel, friction), (t_vel, t_mu))[1]


def _central(model, state, vel, friction, h=1e-6):
    """Central differences of the loss in vel (3,) and in the friction (1,)."""
    def diff(dv, dmu):
        return (_value(model, state, vel + dv, friction + dmu)
                - _value(model, state, vel - dv, friction - dmu)) / (2 * h)
    eye = h * np.eye(3)
    return (np.array([diff(e, 0.0) for e in eye]),
            np.array([diff(np.zeros(3), h)]))


def _models(height, vel, smoothing, mode="reverse"):
    """(exact, smoothed-backward, simulated-smooth) models, the state and its arguments."""
    scene = _scene(height, vel)
    exact, state = scene.build(dtype=jnp.float64, solver=jc.Newton(tol=1e-12))
    backward, _ = scene.build(dtype=jnp.float64, solver=jc.Newton(
        tol=1e-12, adjoint=jc.Implicit(mode=mode, smoothing=smoothing)))
    smooth, _ = scene.build(dtype=jnp.float64, contact=smoothing, solver=jc.Newton(tol=1e-12))
    args = (jnp.asarray(vel, jnp.float64), exact.geom.friction)
    return exact, backward, smooth, state, args


def test_smoothing_with_the_models_own_laws_gives_the_exact_gradient():
    # a sphere landing and sliding: contact and friction both act in the step
    exact, backward, _, state, args = _models(0.049, (1.0, 0.0, -0.3), jc.Contact())
    for got, want in zip(_value_and_reverse(backward, state, *args)[1],
                         _value_and_reverse(exact, state, *args)[1]):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


NEAR_MISS = (0.068, (0.2, 0.0, -0.5))   # height (m) and velocity (m/s)


def test_the_smoothed_gradient_is_the_smoothed_steps_gradient():
    """A near miss: the sphere ends the step 13 mm above the ground (the exact step has no
    contact), inside the smoothing law's 2 cm reach. The simulated answer is the exact one;
    the reverse-mode gradient is central differences of the step simulated with the
    smoothing laws."""
    exact, backward, smooth, state, args = _models(*NEAR_MISS, SMOOTH)
    value, got = _value_and_reverse(backward, state, *args)
    exact_value, exact_grad = _value_and_reverse(exact, state, *args)
    assert float(value) == float(exact_value)
    want = _central(smooth, state, *args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.ravel(g), np.ravel(w), rtol=1e-6, atol=1e-8)
    # the exact gradient has no contact in it (friction does nothing); the smoothed one does
    assert float(jnp.abs(exact_grad[1][0])) < 1e-12
    assert float(jnp.max(jnp.abs(exact_grad[0] - got[0]))) > 1e-2


@pytest.mark.slow   # 9 s more: the forward rule's own program
def test_the_smoothed_forward_mode_is_the_smoothed_reverse_mode():
    """The near miss in forward mode (`Implicit(mode="forward", smoothing=...)`): the
    derivative along a direction is the smoothed reverse gradient's."""
    _, backward, _, state, args = _models(*NEAR_MISS, SMOOTH)
    forward = _models(*NEAR_MISS, SMOOTH, mode="forward")[1]
    got = _value_and_reverse(backward, state, *args)[1]
    t_vel, t_mu = jnp.asarray([0.3, -0.5, 0.7]), jnp.asarray([0.4])
    along = float(_directional(forward, state, *args, t_vel, t_mu))
    assert along == pytest.approx(float(jnp.dot(got[0], t_vel) + jnp.dot(got[1], t_mu)),
                                  rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("height, vel", [(0.05, (0.0, 0.0, 0.0)),     # at rest: zero slip
                                         (0.07, (0.0, 0.0, 0.0))])    # edge of the reach
def test_smoothed_gradients_are_finite_at_zero_slip_and_at_the_edge_of_contact(height, vel):
    _, backward, _, state, args = _models(height, vel, SMOOTH)
    for g in _value_and_reverse(backward, state, *args)[1]:
        assert np.all(np.isfinite(np.asarray(g)))


def test_bad_smoothing_raises():
    with pytest.raises(ValueError, match="smoothing"):
        jc.Implicit(smoothing=0.02)
