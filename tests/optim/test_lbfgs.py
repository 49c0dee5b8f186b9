"""L-BFGS (`jc.optim.lbfgs`, jaxcontact/optim/lbfgs.py): it reaches the minimum of the
Rosenbrock function counting every evaluation, and says when it stops at its cap. (On a
trajectory through impacts: test_trajectory_optimization.py.)
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxcontact as jc


def rosenbrock(x):
    return (1.0 - x["a"]) ** 2 + 100.0 * (x["b"] - x["a"] ** 2) ** 2


def test_lbfgs_reaches_the_minimum_and_counts_line_search_evaluations():
    calls = []

    def counted(x):
        jax.debug.callback(lambda: calls.append(1))
        return rosenbrock(x)

    result = jc.optim.lbfgs(counted, {"a": jnp.array(-1.2), "b": jnp.array(1.0)},
                            max_iterations=200, rtol=1e-14)
    assert result.converged, result.status
    np.testing.assert_allclose([result.x["a"], result.x["b"]], [1.0, 1.0], atol=1e-6)
    assert result.value <= 1e-14 * result.history[0]
    # every evaluation counted: one at the start and each line-search trial (the jitted
    # update evaluates value and gradient once per trial)
    assert result.simulations == len(calls)


def test_lbfgs_says_when_it_stops_at_its_cap():
    result = jc.optim.lbfgs(rosenbrock, {"a": jnp.array(-1.2), "b": jnp.array(1.0)},
                            max_iterations=3)
    assert not result.converged and "iteration cap 3" in result.status
    assert result.iterations == 3
