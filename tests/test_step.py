"""`step` and `rollout`: what a step reports about its solve (StepInfo) and its input checks.

An unconverged fixed-iteration solve says so in its StepInfo (result, residual), and its
implicit gradient (that of the converged problem, taken at the unconverged point) differs
from the converged one: checked on a sphere sliding over the ground and on the solver scene of
test_solvers.py (_helpers.py), marked slow; CI checks the sphere's report, forward only.
"""

import jax
import jax.numpy as jnp
import pytest

import jaxcontact as jc
from _helpers import solver_run

STEPS = 20


def _sliding_sphere(solver):
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, -0.1), ang_vel=(0.0, 0.0, 2.0))
    return s.build(solver=solver)


def _sphere_loss(params, model, state):
    friction, vel = params
    m = model.replace(geom=model.geom.replace(friction=friction))
    final, _, info = jc.rollout(m, state.replace(vel=vel), steps=STEPS, return_info=True)
    flat = jnp.concatenate([final.pos, final.vel, final.ang_vel], axis=-1)
    return jnp.sum(jnp.linspace(-1.0, 1.0, 9)[None] * flat), info


_sphere_run = jax.jit(jax.grad(_sphere_loss, has_aux=True))


def _sphere(solver):
    """The per-step infos of the sliding sphere, and d loss / d(μ, v0)."""
    model, state = _sliding_sphere(solver)
    grad, info = _sphere_run((model.geom.friction, state.vel), model, state)
    return info, grad


def _assert_unconverged_and_gradient_differs(unconverged, converged):
    (info, grad), (_, reference) = unconverged, converged
    assert not bool(jnp.all(info.converged))
    assert int(jnp.max(info.result)) == int(jc.Result.MAX_ITERATIONS)
    assert float(jnp.max(info.residual)) > 1e-6
    # the implicit gradient is that of the converged problem at an unconverged point
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
               zip(jax.tree.leaves(grad), jax.tree.leaves(reference)))
    assert diff > 1e-6


def test_unconverged_descent_on_a_sliding_sphere_is_reported():
    # CI's check (forward only, one small program): 3 iterations of Descent cannot solve a
    # step of the sliding sphere, and every step says so
    model, state = _sliding_sphere(jc.Descent(iterations=3))
    _, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True))(
        model, state)
    assert not bool(jnp.any(info.converged))
    assert bool(jnp.all(info.result == int(jc.Result.MAX_ITERATIONS)))
    assert bool(jnp.all(info.iterations == 3))
    assert float(jnp.min(info.residual)) > float(jnp.max(info.tolerance))


@pytest.mark.slow  # CI: the forward report above (the gradients are ~1 min of compilation)
def test_unconverged_descent_on_a_sliding_sphere_is_reported_and_its_gradient_differs():
    converged = _sphere(jc.Newton())
    assert bool(jnp.all(converged[0].converged))
    _assert_unconverged_and_gradient_differs(_sphere(jc.Descent(iterations=3)), converged)


@pytest.mark.slow  # the sliding sphere checks the same in CI
def test_unconverged_descent_is_reported_and_its_gradient_differs():
    (_, _, info), grad = solver_run(jc.Descent(iterations=3))
    _assert_unconverged_and_gradient_differs((info, grad), (None, solver_run(jc.Newton())[1]))


# --- input checks ------------------------------------------------------------------------------

def _sphere_on_ground():
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(0.1, 1.0, (0.0, 0.0, 1.0))
    return scene.build()


@pytest.mark.parametrize("field,shape", [("force", (2, 3)), ("force", (3,)), ("torque", (1, 2)),
                                         ("torque", (1, 3, 1))])
def test_step_rejects_control_of_wrong_shape(field, shape):
    model, state = _sphere_on_ground()
    control = jc.Control.zeros(1).replace(**{field: jnp.zeros(shape)})
    with pytest.raises(ValueError, match=field) as info:
        jc.step(model, state, control)
    msg = str(info.value)
    assert str(shape) in msg and "(1, 3)" in msg, msg


def test_step_checks_the_motor_targets_shape():
    s = jc.Scene()
    s.add_box(0.05, 1.0, (0.0, 0.0, 1.0))
    s.add_box(0.05, 1.0, (0.2, 0.0, 1.0))
    s.add_motor(s.add_joint("hinge", 0, 1, anchor=(0.1, 0.0, 1.0), stiffness=1e3), kp=1.0)
    model, state = s.build()
    control = jc.Control.zeros(2, 2)
    with pytest.raises(ValueError, match=r"motor.*\(1,\)"):
        jc.step(model, state, control)
