"""CMA-ES (`jc.optim.cmaes`, jaxcontact/optim/cmaes.py, through the `cma` package): it
converges and counts every simulation, and says when it stops at its budget.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc


def test_cmaes_counts_every_simulation():
    pytest.importorskip("cma", reason="the CMA-ES baseline needs the cma package "
                                      "(pip install 'jaxcontact[optim]')")
    def loss(x, centre):
        return jnp.sum((x - centre) ** 2)

    result = jc.optim.cmaes(loss, jnp.zeros(3), 0.5, args=(jnp.array(0.3),), rtol=1e-12,
                            max_simulations=5000)
    assert result.converged, result.status
    np.testing.assert_allclose(result.x, 0.3, atol=1e-5)
    # the start, then Hansen's population 4 + floor(3 ln 3) = 7 per generation
    assert result.simulations == 1 + 7 * result.iterations
    capped = jc.optim.cmaes(loss, jnp.zeros(3), 0.5, args=(jnp.array(0.3),), rtol=0.0,
                            max_simulations=50)
    assert not capped.converged and capped.simulations <= 50 + 7
    assert "without reaching" in capped.status
