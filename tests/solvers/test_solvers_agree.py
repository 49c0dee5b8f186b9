"""The solver family reaches the same step: Newton (dense and matrix-free), Descent and Dual
converge to the dense-Newton solution, and give the same implicit gradient (the scene and its
runs: tests/_helpers.py; an unconverged solve's report: tests/test_step.py; the dense vs
matrix-free adjoint: test_adjoint.py; each solver's own checks: test_newton.py, test_dual.py,
test_base.py; the rows Dual steps on: tests/test_terms_rows.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from tests._helpers import solver_rollout, solver_run, solver_scene

SOLVERS = {
    "newton": jc.Newton(),
    # conjugate gradients on the exact Hessian (inexact Newton: FORCING), loops exiting early
    "newton_cg": jc.Newton(linear="cg", early_exit=True),
    "descent": jc.Descent(iterations=400),
    "dual": jc.Dual(iterations=600, update="exact"),
}


@functools.cache
def _run(name):
    """(final, traj, info) of the solver scene's rollout with SOLVERS[name]; computed once."""
    model, state = solver_scene(SOLVERS[name])
    return solver_rollout(model, state)


@functools.cache
def _gradient(name):
    """The gradient of a linear functional of the solver scene's final state with
    SOLVERS[name] (`_helpers.solver_run`: its rollout and gradient as one program, the larger
    of the two). Only the slow run asks for it: CI checks implicit gradients on smaller scenes
    (against finite differences in test_adjoint_finite_differences.py, dense against
    matrix-free in test_adjoint.py)."""
    return solver_run(SOLVERS[name])[1]


@pytest.fixture(scope="module")
def newton_run():
    model, _ = solver_scene(SOLVERS["newton"])
    final, traj, info = _run("newton")
    return model, final, traj, info


@pytest.fixture(scope="module")
def reference(newton_run):
    _, final, _, info = newton_run
    assert bool(jnp.all(info.converged))
    return final


def _assert_reaches(final, info, reference):
    assert bool(jnp.all(info.converged)), f"max residual {float(jnp.max(info.residual)):.2e}"
    assert float(jnp.max(info.residual)) <= 1e-10
    np.testing.assert_allclose(final.pos, reference.pos, atol=1e-9)
    np.testing.assert_allclose(final.vel, reference.vel, atol=1e-7)
    np.testing.assert_allclose(final.ang_vel, reference.ang_vel, atol=1e-6)


# all slow (each ~1-2 min of compilation, plus the Newton reference). In CI,
# models/test_contact_physics.py runs Descent and Dual against closed forms, and the
# matrix-free Newton solvers are checked on a small scene by
# test_krylov_newton_reaches_the_dense_newton_solution below
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) for n in SOLVERS if n != "newton"])
def test_every_solver_reaches_the_newton_solution(name, reference):
    final, _, info = _run(name)
    _assert_reaches(final, info, reference)


def _coupled_spheres(solver):
    """Two spheres sliding and spinning on the ground, coupled by a spring: the spring's
    off-diagonal blocks keep the block-Jacobi preconditioner from solving the step alone."""
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    a = s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 3.0))
    b = s.add_sphere(0.05, 2.0, (0.3, 0.0, 0.052), vel=(0.0, 0.5, -0.2), ang_vel=(1.0, 2.0, 0.5))
    s.add_spring(a, b, stiffness=5e2, anchor_a=(0.0, 0.0, 0.05), anchor_b=(-0.1, 0.0, 0.0),
                 rest_length=0.1)
    s.exclude_pair(a, b)
    return s.build(solver=solver)


@functools.cache
def _coupled_run(name):
    """(final, traj, info) of the coupled spheres' rollout with SOLVERS[name]; computed once."""
    model, state = _coupled_spheres(SOLVERS[name])
    return solver_rollout(model, state)


# CI's check of the matrix-free Newton solver (the solver scene's runs above are slow)
def test_krylov_newton_reaches_the_dense_newton_solution():
    # same step as dense Newton, on a small coupled scene
    reference, traj, info = _coupled_run("newton")
    assert bool(jnp.all(info.converged))
    # both spheres stay on the ground, within 2 mm of resting on it (sliding, they ride up
    # by μ |v_t| T with the cone coupling, `models.contact`; in free fall they would end 8
    # and 14 mm lower)
    assert float(jnp.max(jnp.abs(traj.pos[:, :, 2] - 0.05))) < 2e-3, \
        "both spheres must stay in contact"
    final, _, info = _coupled_run("newton_cg")
    _assert_reaches(final, info, reference)


@pytest.fixture(scope="module")
def reference_grad():
    return _gradient("newton")


@pytest.mark.parametrize("name", [
    pytest.param("newton_cg", marks=pytest.mark.slow),
    pytest.param("descent", marks=pytest.mark.slow), pytest.param("dual", marks=pytest.mark.slow)])
def test_implicit_gradient_is_the_same_whichever_solver_converged(name, reference_grad):
    grad = _gradient(name)
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
