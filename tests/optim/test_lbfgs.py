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


def test_lbfgs_stops_once_its_budget_of_simulations_is_spent():
    result = jc.optim.lbfgs(rosenbrock, {"a": jnp.array(-1.2), "b": jnp.array(1.0)},
                            max_iterations=200, max_simulations=10)
    assert not result.converged and "budget of 10 simulations" in result.status
    # checked after each iteration: the last one's line search may go past the budget
    assert 10 <= result.simulations < 10 + 30 and result.iterations < 200


def test_lbfgs_stops_where_it_stalls():
    # |x|^0.5 has no curvature to learn at its kink: L-BFGS crawls; with patience it stops
    def kink(x):
        return jnp.sum(jnp.sqrt(jnp.abs(x) + 1e-12))

    result = jc.optim.lbfgs(kink, jnp.asarray([0.7, -0.4]), max_iterations=200, patience=5)
    assert not result.converged and "stalled" in result.status
    assert result.history[-1] > 0.5 * result.history[-6]
