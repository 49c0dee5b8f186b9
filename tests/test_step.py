"""`step` and `rollout`: what a step reports about its solve (StepInfo) and its input checks.

An unconverged fixed-iteration solve says so in its StepInfo (result, residual), and its
implicit gradient (that of the converged problem, taken at the unconverged point) differs
from the converged one: checked on a sphere sliding over the ground and on the solver scene
(_helpers.py, solvers/test_solvers_agree.py), marked slow; CI checks the sphere's report,
forward only.
"""

import jax
import jax.numpy as jnp
import pytest

import jaxcontact as jc
from tests._helpers import solver_run

STEPS = 20


def _sliding_sphere(solver):
    # friction's lagged coupling keeps the sliding sphere on the ground (the cone's would lift
    # it off a little, design note 57, and its airborne steps need no iteration)
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, -0.1), ang_vel=(0.0, 0.0, 2.0))
    return s.build(solver=solver, contact=jc.Contact(coupling="lagged"))


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


# --- relinearize: the fully implicit step of v1 ------------------------------------------------
# v1 (commit c0a5a53) evaluated contact geometry and friction's bound at the end-of-step
# iterate and solved g(u) = 0 with them; these are its answers (Newton, tol 1e-12, float64)
# for the two scenes below, without damping (v1 damped by ADD Eq. 21, v2 by the damped law).
# With the lagged coupling, `relinearize` converges to that step: the same equations.
_V1 = {
    "sphere": {"pos": [0.144596879762453, 0.0389542670176725, 0.0488056985941685],
               "vel": [0.687501072415719, 0.18126124563985, 0.0156034232201188],
               "ang_vel": [-3.66906114397281, 13.9162867514002, 3.0], "steps": 40},
    "tipping_box": {"pos": [-0.00451385141487304, 0.0371336857724205, 0.103807209910564],
                    "vel": [0.0417167492385388, -0.0448238295730278, -0.0377206199667532],
                    "ang_vel": [0.447832595680808, 0.388264396849656, 0.0354936635236416],
                    "steps": 30},
}
# v1's answers carry 15 digits and its solves a 1e-12 tolerance; after 8 relinearizations the
# fixed point's own error is below 1e-13 (it shrinks about 50x per relinearization)
_V1_TOL = 1e-10


def _v1_scene(name):
    if name == "sphere":
        s = jc.Scene(dt=0.005, friction=0.5, damping=0.0, stiffness=1e4)
        s.add_plane()
        s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.06), vel=(1.0, 0.3, -0.5), ang_vel=(2.0, -1.0, 3.0))
    else:
        s = jc.Scene(dt=0.01, friction=0.8, damping=0.0, stiffness=1e4)
        s.add_plane()
        s.add_box((0.05, 0.05, 0.1), 1.0, (0.0, 0.0, 0.105),
                  quat=(float(jnp.cos(0.15)), float(jnp.sin(0.15)), 0.0, 0.0), vel=(0.3, 0, 0))
    return s


@pytest.mark.parametrize("name", [pytest.param("sphere", marks=pytest.mark.slow),  # 16 s
                                  "tipping_box"])
def test_relinearize_converges_to_v1s_fully_implicit_step(name):
    ref = _V1[name]
    errors = []
    for k in (0, 2, 8) if name == "sphere" else (0, 8):
        model, state = _v1_scene(name).build(
            solver=jc.Newton(tol=1e-12), contact=jc.Contact(coupling="lagged", relinearize=k))
        final, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=ref["steps"],
                                                          return_info=True))(model, state)
        assert bool(jnp.all(info.converged))
        errors.append(max(float(jnp.max(jnp.abs(getattr(final, f)[0] - jnp.asarray(ref[f]))))
                          for f in ("pos", "vel", "ang_vel")))
    # the single convex solve differs (geometry and bound at the start of each step) ...
    assert errors[0] > 1e-3
    # ... and relinearizing approaches v1's step (after 2 and 8 relinearizations on the
    # slow suite's sphere, after 8 on the box), to its tolerance
    assert errors[1] < errors[0] and errors[-1] < _V1_TOL, errors
