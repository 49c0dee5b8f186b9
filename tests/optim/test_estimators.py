"""Randomized-smoothing gradient estimators (`jc.optim.Estimator`, `jc.optim.descend`):
unbiased on a smooth loss (α near 1 there), the first-order estimate blind to a jump while
the zeroth-order one sees it and the α-order one keeps within its tolerance of it (Suh et
al. 2022's example), descent counts its simulations, bad settings raise."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxcontact as jc

CENTRE = jnp.asarray([0.3, -0.2, 0.5])


def _quadratic(x):
    return 0.5 * jnp.sum((x - CENTRE) ** 2)


def _step(x):
    """A jump at 0: its gradient is 0 wherever it exists."""
    return jnp.where(x[0] > 0.0, 1.0, 0.0) + 0.0 * jnp.sum(x)


def _estimates(estimator, loss, x, draws=400):
    keys = jax.random.split(jax.random.PRNGKey(0), draws)
    return jax.jit(jax.vmap(lambda k: estimator(loss, x, k)))(keys)


@pytest.mark.parametrize("order", ["zeroth", "first", "alpha"])
def test_every_estimator_is_unbiased_on_a_smooth_loss(order):
    # Gaussian smoothing of a quadratic only adds a constant: ∇F(x) = x - c
    x = jnp.asarray([1.0, 1.0, -1.0])
    est = jc.optim.Estimator(order, sigma=0.1, samples=8)
    value, grads, alpha = _estimates(est, _quadratic, x)
    np.testing.assert_allclose(value, _quadratic(x))
    mean, err = jnp.mean(grads, axis=0), jnp.std(grads, axis=0) / np.sqrt(grads.shape[0])
    assert np.all(np.abs(np.asarray(mean - (x - CENTRE))) <= 4 * np.asarray(err) + 1e-12)
    if order == "alpha":   # the first-order estimate has by far the lower variance
        assert float(jnp.min(alpha)) > 0.9


def test_a_jump_is_seen_by_zeroth_order_and_alpha_order_keeps_to_its_tolerance():
    # F(x) = P(x0 + σ w > 0): ∇F(0) = (φ(0)/σ, 0, 0), φ(0) = 1/√(2π)
    sigma, tolerance = 0.1, 1.0
    x = jnp.zeros(3)
    truth = 1.0 / (sigma * np.sqrt(2 * np.pi))
    out = {order: _estimates(jc.optim.Estimator(order, sigma=sigma, samples=16,
                                                tolerance=tolerance), _step, x)
           for order in ("zeroth", "first", "alpha")}
    assert float(jnp.max(jnp.abs(out["first"][1]))) == 0.0          # blind to the jump
    g = out["zeroth"][1][:, 0]
    mean, err = float(jnp.mean(g)), float(jnp.std(g)) / np.sqrt(g.shape[0])
    assert abs(mean - truth) <= 4 * err, (mean, truth, err)
    # Suh et al.'s guarantee, draw by draw (the same samples): within γ of ĝ₀
    apart = jnp.linalg.norm(out["alpha"][1] - out["zeroth"][1], axis=1)
    assert float(jnp.max(apart)) <= tolerance + 1e-12
    assert float(jnp.mean(out["alpha"][2])) < 0.5
    # without a tolerance, inverse-variance weights trust the zero-variance ĝ₁ entirely
    _, blind, alpha = _estimates(jc.optim.Estimator("alpha", sigma=sigma, samples=16), _step, x)
    assert float(jnp.min(alpha)) == 1.0 and float(jnp.max(jnp.abs(blind))) == 0.0


def test_descend_reaches_the_minimum_and_counts_simulations():
    est = jc.optim.Estimator("alpha", sigma=0.05, samples=4)
    found = jc.optim.descend(_quadratic, jnp.zeros(3), est, optax.adam(0.05),
                             max_simulations=2000, rtol=1e-3)
    assert found.converged, found.status
    np.testing.assert_allclose(found.x, CENTRE, atol=0.03)
    assert found.simulations == found.iterations * est.simulations == found.iterations * 5
    assert len(found.alpha) == found.iterations


@pytest.mark.parametrize("kwargs, name", [({"order": "second"}, "order"),
                                          ({"sigma": 0.0}, "sigma"),
                                          ({"sigma": (0.1, -1.0)}, "sigma"),
                                          ({"samples": 1}, "samples"),
                                          ({"tolerance": -1.0}, "tolerance")])
def test_bad_estimator_settings_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        jc.optim.Estimator(**kwargs)


def test_descend_rejects_a_budget_below_one_estimate():
    with pytest.raises(ValueError, match="max_simulations"):
        jc.optim.descend(_quadratic, jnp.zeros(3), jc.optim.Estimator(samples=8),
                         optax.sgd(0.1), max_simulations=5)
