"""The implicit gradient rules (`solvers.adjoint`): reverse mode (custom_vjp), forward mode
(custom_jvp, and reverse mode through it), unrolled autodiff of fully converged Newton solves,
and the dense vs matrix-free (Krylov) adjoint solve all give the same gradient (float64).

Each comparison runs on one sphere thrown onto the ground (one contact term), on the scenarios
of test_adjoint_finite_differences.py (a sphere and a box, 100 steps) and on the solver scene
of test_solvers_agree.py, all marked slow (each gradient program is ~30 s of compilation). CI
checks forward against reverse mode on particles (tests/scene/test_particles.py), reverse mode
against finite differences (test_adjoint_finite_differences.py,
tests/scene/test_particles.py), the Krylov solves the matrix-free adjoint runs
(test_linear.py), and here which loops early exit keeps.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from tests._helpers import (SCENARIOS, check_modes, dot, grad, solver_run, tangent,
                            two_body_scene, unit, weights_of)

MODES = ("vjp", "jvp", "unrolled")


# --- every rule on one sphere ------------------------------------------------------------------

SPHERE_STEPS = 60  # 0.12 s: the sphere lands after about 25 steps and slides


def _sphere_scene():
    scene = jc.Scene(dt=0.002, friction=0.5, damping=100.0)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, (0.0, 0.0, 0.1), vel=(1.0, 0.0, -1.0))
    return scene


@pytest.fixture(scope="module")
def sphere():
    """The sphere's models for each `ad` (Newton, 30 iterations), its state, zero controls,
    weights of the final state and tangents along v0 (x, z), μ and the controls."""
    models = {}
    for ad in MODES:
        models[ad], state = _sphere_scene().build(solver=jc.Newton(ad=ad, iterations=30))
    model = models["vjp"]
    controls = jc.Control(force=jnp.zeros((SPHERE_STEPS, 1, 3)),
                          torque=jnp.zeros((SPHERE_STEPS, 1, 3)),
                          motor=jnp.zeros((SPHERE_STEPS, 0)))
    weights = weights_of(state, pos=jnp.asarray([[1.0, 0.0, 2.0]]),
                         vel=jnp.asarray([[0.1, 0.0, 0.1]]), ang_vel=jnp.asarray([[0.0, 0.05, 0.0]]))
    d_mu = jax.tree.map(jnp.zeros_like, model)
    d_mu = d_mu.replace(geom=d_mu.geom.replace(friction=jnp.ones((1,))),
                        plane=d_mu.plane.replace(friction=jnp.ones((1,))))
    push = jc.Control(force=jax.random.normal(jax.random.PRNGKey(5), (SPHERE_STEPS, 1, 3)),
                      torque=0.01 * jax.random.normal(jax.random.PRNGKey(6), (SPHERE_STEPS, 1, 3)),
                      motor=jnp.zeros((SPHERE_STEPS, 0)))
    directions = [tangent(model, state, controls, state_fields={"vel": unit((1, 3), (0, i))})
                  for i in (0, 2)]
    directions += [tangent(model, state, controls, model_dir=d_mu),
                   tangent(model, state, controls, control=push)]
    return models, state, controls, weights, directions


@pytest.mark.slow  # compile-heavy (4 rules); CI: module docstring
def test_every_gradient_rule_agrees_on_a_landing_sliding_sphere(sphere):
    models, state, controls, weights, directions = sphere
    rev = check_modes(models, state, controls, weights, directions)
    # the sphere does land and slide: friction and the contact reach the loss
    assert abs(dot(rev, directions[2])) > 1e-4
    assert abs(float(rev[1].vel[0, 2])) > 1e-3


@pytest.mark.slow  # two gradient programs, ~55 s of compilation; CI: module docstring
def test_matrix_free_adjoint_matches_the_dense_one_on_a_sphere(sphere):
    models, state, controls, weights, _ = sphere
    krylov, _ = _sphere_scene().build(
        solver=jc.Newton(iterations=30, adjoint="krylov", early_exit=True))
    got = grad(krylov, state, controls, weights)
    want = grad(models["vjp"], state, controls, weights)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


# --- the scenarios of test_adjoint_finite_differences.py (slow: three rules, two bodies) ------

@pytest.fixture(scope="module")
def two_body():
    models = {}
    for ad in MODES:
        models[ad], state = two_body_scene().build(solver=jc.Newton(ad=ad, iterations=30))
    return models, state


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_gradient_rule_agrees_on_the_rollout_scenarios(two_body, scenario):
    models, state = two_body
    state, controls, weights, directions = SCENARIOS[scenario](models["vjp"], state)
    check_modes(models, state, controls, weights, directions)


# --- dense vs matrix-free adjoint on the solver scene -------------------------------------------

@pytest.fixture(scope="module")
def reference_grad():
    return solver_run(jc.Newton())[1]


@pytest.mark.slow
@pytest.mark.parametrize("ad, early_exit", [("vjp", True), ("vjp", False), ("jvp", False)])
def test_matrix_free_adjoint_matches_the_dense_one(ad, early_exit, reference_grad):
    grad_ = solver_run(jc.Newton(ad=ad, adjoint="krylov", early_exit=early_exit))[1]
    for got, want in zip(jax.tree.leaves(grad_), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# --- unrolled gradients and early exit ---------------------------------------------------------

@pytest.mark.parametrize("solver", [jc.Newton, jc.Descent, jc.Dual])
def test_only_unrolled_solves_keep_their_scans_under_early_exit(solver):
    assert solver().loops_exit_early  # the default
    assert not solver(ad="unrolled").loops_exit_early
    assert not solver(early_exit=False).loops_exit_early


@pytest.mark.slow
def test_unrolled_gradients_ignore_early_exit():
    """ad="unrolled" differentiates the loops, so it runs them as scans even with early_exit
    (a while_loop has no reverse mode); its gradient is then the implicit one."""
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.049), vel=(0.5, 0.0, -0.2))

    def grad_of(solver):
        model, state = s.build(solver=solver)

        def loss(vel):
            final, _ = jc.rollout(model, state.replace(vel=vel), steps=3)
            return jnp.sum(final.pos * jnp.asarray([[1.0, 0.0, 2.0]]))

        return jax.jit(jax.grad(loss))(state.vel)

    unrolled = grad_of(jc.Newton(linear="cg", ad="unrolled", early_exit=True))
    implicit = grad_of(jc.Newton(linear="cg", early_exit=True))
    assert bool(jnp.all(jnp.isfinite(unrolled)))
    np.testing.assert_allclose(unrolled, implicit, rtol=1e-6, atol=1e-9)
