"""Gauss-Newton (`jc.optim.gauss_newton`, jaxcontact/optim/least_squares.py): an exponential
fitted in few iterations. (Its forward-mode sensitivities through the simulator:
test_fit.py.)
"""

import jax.numpy as jnp
import numpy as np

import jaxcontact as jc


def test_gauss_newton_fits_an_exponential_in_few_iterations():
    t = jnp.linspace(0.0, 2.0, 30)
    data = 2.5 * jnp.exp(-1.3 * t)

    def residual(x):
        return x[0] * jnp.exp(-x[1] * t) - data

    result = jc.optim.gauss_newton(residual, jnp.array([1.0, 0.5]))
    assert result.converged, result.status
    np.testing.assert_allclose(result.x, [2.5, 1.3], rtol=1e-10)
    assert result.iterations <= 12
