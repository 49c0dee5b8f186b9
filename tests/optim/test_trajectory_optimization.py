"""Thesis Fig. 36 trajectory optimization (experiments/fig36_trajectory_optimization.py):
L-BFGS on adjoint gradients brings a ball to a target at t = 0.5 s through exactly two
impacts, and the gradient it starts from agrees with central finite differences."""

import jax.numpy as jnp
import numpy as np
import pytest

from experiments import fig36_trajectory_optimization as fig36

# compile-heavy experiment checks: run by `make test-all`, not by CI
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def optimized():
    model, state = fig36.ball_scene()
    target = jnp.asarray(fig36.TARGET)
    impulse, history, _ = fig36.optimize(model, state, target, fig36.INITIAL_IMPULSE,
                                         iterations=16)
    return model, state, target, impulse, history


@pytest.mark.xfail(strict=True, reason=(
    "issue 63, design note 60: with the step linearized at its start L-BFGS ends 4.7 mm from "
    "the target, in a narrow valley (the loss falls 1e-8 of 2.2e-5 along -∇ before rising; "
    "the gradient equals central differences there); the thesis's exact hit is not reproduced"))
def test_lbfgs_reaches_target_through_two_impacts(optimized):
    model, state, target, impulse, history = optimized
    initial = fig36.summarize(fig36.INITIAL_IMPULSE, model, state, target)
    final = fig36.summarize(impulse, model, state, target)
    assert initial["miss_m"] > 0.25
    assert final["miss_m"] < 1e-5, final["miss_m"]
    assert history[-1]["loss"] < 1e-4 * history[0]["loss"]
    assert initial["impacts"] == 2 and final["impacts"] == 2
    assert final["all_converged"] and final["max_residual"] < 1e-9


def test_initial_gradient_matches_central_differences(optimized):
    model, state, target, _, history = optimized
    grad = np.asarray(history[0]["grad"])   # jax.value_and_grad at the initial guess
    fd = fig36.central_fd(fig36.fd_loss(model, state, target), fig36.INITIAL_IMPULSE)
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-9)
