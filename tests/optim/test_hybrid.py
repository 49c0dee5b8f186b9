"""CMA-ES, then L-BFGS (`jc.optim.cmaes_then_lbfgs`, jaxcontact/optim/hybrid.py) on a
rugged loss, Σ x² + 2 (1 - cos 2πx), global minimum 0 at x = 0 and a local minimum near
every integer point: from (2.1, -1.9) L-BFGS alone stalls in a local minimum; CMA-ES finds
the global basin and L-BFGS converges in it to rounding, where CMA-ES alone, with the same
budget and seed, has not; the budget and history are those of both phases.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

pytest.importorskip("cma", reason="the CMA-ES phase needs the cma package "
                                  "(pip install 'jaxcontact[optim]')")


def _rugged(x):
    return jnp.sum(x ** 2 + 2.0 * (1.0 - jnp.cos(2 * jnp.pi * x)))


START = jnp.array([2.1, -1.9])


def test_cmaes_chooses_the_basin_and_lbfgs_converges_in_it():
    first = float(_rugged(START))
    both = jc.optim.cmaes_then_lbfgs(_rugged, START, 2.0, max_simulations=300, rtol=1e-12,
                                     seed=1)
    alone = jc.optim.cmaes(_rugged, START, 2.0, max_simulations=300, rtol=1e-12, seed=1)
    exact = jc.optim.lbfgs(_rugged, START, rtol=1e-12, max_simulations=300)
    assert both.converged and both.value <= 1e-12 * first, both.status
    np.testing.assert_allclose(both.x, 0.0, atol=1e-9)
    assert not alone.converged and alone.value > 1e-12 * first
    assert exact.value > 1.0                        # a local minimum
    # both phases' budget (L-BFGS may pass its share by its last line search) and history
    assert both.simulations <= 300 + 20 and both.history[0] == pytest.approx(first)
    assert np.all(np.diff(np.minimum.accumulate(both.history)) <= 0.0)
    assert "CMA-ES:" in both.status and "then L-BFGS:" in both.status


def test_bad_share_and_budget_raise():
    for kwargs, name in (({"share": 1.0}, "share"), ({"share": 0.0}, "share"),
                         ({"max_simulations": 1}, "max_simulations")):
        with pytest.raises(ValueError, match=name):
            jc.optim.cmaes_then_lbfgs(_rugged, START, 2.0, **kwargs)
