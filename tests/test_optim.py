"""`jaxcontact.optim`: L-BFGS, Gauss-Newton, continuation, CMA-ES and `fit`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


def test_gauss_newton_fits_an_exponential_in_few_iterations():
    t = jnp.linspace(0.0, 2.0, 30)
    data = 2.5 * jnp.exp(-1.3 * t)

    def residual(x):
        return x[0] * jnp.exp(-x[1] * t) - data

    result = jc.optim.gauss_newton(residual, jnp.array([1.0, 0.5]))
    assert result.converged, result.status
    np.testing.assert_allclose(result.x, [2.5, 1.3], rtol=1e-10)
    assert result.iterations <= 12


def test_continuation_warm_starts_every_stage():
    """Stage s minimizes (x - s)²: each stage starts where the last one ended and the last
    stage reaches the final value."""
    starts = []

    def optimizer(loss, x0, **options):
        starts.append(float(x0))
        return jc.optim.lbfgs(loss, x0, **options)

    traces = []

    def loss(x, s):
        traces.append(1)            # Python runs only while JAX traces (compiles)
        return (x - s) ** 2 + 1e-3 * x ** 2

    stages = jc.optim.continuation(loss, jnp.array(0.0), [1.0], optimizer=optimizer,
                                   gtol=1e-10)
    first_compile = len(traces)
    stages += jc.optim.continuation(loss, stages[-1].x, [2.0, 4.0], optimizer=optimizer,
                                    gtol=1e-10)
    assert len(stages) == 3 and all(r.converged for r in stages)
    # the stage value is a traced argument: the later stages reuse the first one's program
    assert first_compile > 0 and len(traces) == first_compile
    np.testing.assert_allclose(starts[1:], [float(r.x) for r in stages[:-1]])
    np.testing.assert_allclose(stages[-1].x, 4.0 / 1.001, rtol=1e-8)
    for bad in ([], [1.0, 0.0], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="schedule"):
            jc.optim.continuation(lambda x, s: rosenbrock(x), {}, bad)


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
