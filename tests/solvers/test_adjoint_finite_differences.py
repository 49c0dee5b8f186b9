"""Gradients of rollouts: implicit reverse mode vs central finite differences and closed forms
(float64), and finiteness at the kinks of contact. (Forward mode, reverse mode through the
forward rule and unrolled autodiff against reverse mode: test_adjoint.py.)

Every test uses one scene structure (a sphere, body 0, and a box, body 1, over the ground) and
one loss, a linear functional of the final state, so that the whole module compiles a handful
of programs; what differs between tests is data: initial state, parameters, controls, weights.
The scene, the scenarios and the jitted loss and gradient are in _helpers.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from tests._helpers import (T, ball_bounce, box_sliding, dot, grad, no_controls,
                            per_step_controls, two_body_scene, unit, value_and_info, weights_of,
                            zeros_like)

# Central differences with h = 1e-5 on losses computed from solves converged to 1e-10 m/s:
# truncation O(h²) ~ 1e-10 relative, solver noise ~ 1e-10 / h = 1e-5 relative.
FD_STEP = 1e-5
FD_RTOL = 1e-4


@pytest.fixture(scope="module")
def models():
    """The scene with reverse-mode gradients, and its state."""
    model, state = two_body_scene().build(solver=jc.Newton(ad="vjp", iterations=30))
    return model, state


def _value(model, state, controls, weights):
    return float(value_and_info(model, state, controls, weights)[0])


def _directional(f, x, direction, h=FD_STEP):
    """Central difference of f along direction; f maps a pytree like x to a float."""
    plus = jax.tree.map(lambda a, d: a + h * d, x, direction)
    minus = jax.tree.map(lambda a, d: a - h * d, x, direction)
    return (f(plus) - f(minus)) / (2 * h)


def _check_fd(model, state, controls, weights, directions):
    """Reverse mode vs central differences along each (model, state, controls) tangent.

    Returns the reverse-mode gradients (model_bar, state_bar, controls_bar).
    """
    rev = grad(model, state, controls, weights)
    for leaf in jax.tree.leaves(rev):
        assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite reverse-mode gradient"
    for tangent in directions:
        expected = dot(rev, tangent)
        fd = _directional(lambda p: _value(p[0], p[1], p[2], weights), (model, state, controls),
                          tangent)
        assert fd == pytest.approx(expected, rel=FD_RTOL, abs=1e-8), "reverse vs FD"
    return rev


def test_ball_bounce_final_position_wrt_initial_velocity(models):
    model, state = models
    state, controls, weights, directions = ball_bounce(model, state)
    _, info = value_and_info(model, state, controls, weights)
    assert np.any(np.asarray(info.max_penetration) > 1e-3), "the ball must hit the ground"
    rev = _check_fd(model, state, controls, weights, directions)
    assert abs(float(rev[1].vel[0, 2])) > 1e-3


def test_box_sliding_to_rest_wrt_friction_and_velocity(models):
    model, state = models
    v0, mu, g = 0.5, 0.5, 9.81
    state, controls, weights, directions = box_sliding(model, state, v0)
    rev = _check_fd(model, state, controls, weights, directions)
    # Coulomb block stopping within the horizon: x = v0²/(2 μ g)
    dx_dmu = dot(rev, directions[0])
    dx_dv0 = dot(rev, directions[1])
    assert dx_dmu == pytest.approx(-v0 ** 2 / (2 * mu ** 2 * g), rel=0.05)
    assert dx_dv0 == pytest.approx(v0 / (mu * g), rel=0.05)


def test_per_step_controls_over_100_steps(models):
    model, state = models
    state, controls, weights, directions = per_step_controls(model, state)
    rev = _check_fd(model, state, controls, weights, directions)
    assert float(jnp.max(jnp.abs(rev[2].force))) > 0.0


def test_gradient_wrt_model_leaves_matches_fd(models):
    model, state = models
    # the box starts slightly pressed in: a gap of exactly zero at t = 0 is a kink of the loss
    # in the plane offset (one-sided derivatives differ), which central FD would average
    state = state.replace(pos=state.pos.at[0, 2].set(0.1).at[1, 2].set(0.05 - 2e-5),
                          vel=state.vel.at[0].set(jnp.array([0.5, 0.0, -1.0])).at[1, 0].set(0.3))
    controls = no_controls(state)
    weights = weights_of(state, pos=jnp.ones((2, 3)))
    rev = grad(model, state, controls, weights)
    for path, g in jax.tree_util.tree_leaves_with_path(rev[0]):
        assert bool(jnp.all(jnp.isfinite(g))), f"non-finite gradient at {jax.tree_util.keystr(path)}"
    # every differentiable leaf family, one FD check each (relative step for large leaves)
    checks = {
        "mass": lambda t: t.replace(body=t.body.replace(mass=unit((2,), 0))),
        "inertia": lambda t: t.replace(body=t.body.replace(inertia=unit((2, 3), (1, 2)))),
        "stiffness": lambda t: t.replace(geom=t.geom.replace(stiffness=unit((2,), 0) * 1e4)),
        "damping": lambda t: t.replace(geom=t.geom.replace(damping=unit((2,), 0) * 10.0)),
        "size": lambda t: t.replace(geom=t.geom.replace(size=unit((2, 3), (0, 0)))),
        "gravity": lambda t: t.replace(gravity=unit((3,), 2)),
        "plane offset": lambda t: t.replace(plane=t.plane.replace(offset=jnp.ones((1,)))),
    }
    for name, make in checks.items():
        tangent = (make(zeros_like(model)), zeros_like(state), zeros_like(controls))
        expected = dot(rev, tangent)
        # h = 1e-6: the linear law's force kink (a contact ending within a step) puts a kink
        # in the loss about 1e-4 away in the radius; a smaller step stays on one side of it
        fd = _directional(lambda p: _value(p[0], p[1], p[2], weights),
                          (model, state, controls), tangent, h=1e-6)
        assert fd == pytest.approx(expected, rel=FD_RTOL, abs=1e-7), name


# --- finite gradients at the kinks of contact --------------------------------------------------

def _assert_finite_gradient(model, state):
    controls = no_controls(state)
    weights = weights_of(state, pos=jnp.ones((2, 3)), vel=jnp.ones((2, 3)),
                         ang_vel=jnp.ones((2, 3)))
    grads = grad(model, state, controls, weights)
    for part in grads:
        for leaf in jax.tree.leaves(part):
            assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite gradient"
    return grads


def test_finite_gradient_at_zero_slip_velocity(models):
    # both bodies at rest on the ground: zero slip at the start and throughout
    model, state = models
    state = state.replace(pos=state.pos.at[0, 2].set(0.05 - 9.81e-5))
    grads = _assert_finite_gradient(model, state)
    # friction holds a resting body: a tangential kick is resisted, so d x(T)/d v0 < T
    assert 0.0 < float(grads[1].vel[1, 0]) < 0.5 * T * 0.002


@pytest.mark.parametrize("vz", [-0.5, 0.0, 0.5])
def test_finite_gradient_when_contact_starts_and_ends(models, vz):
    # the sphere touches with gap exactly zero, approaching, resting or leaving
    model, state = models
    state = state.replace(vel=state.vel.at[0].set(jnp.array([0.3, 0.0, vz])))
    _assert_finite_gradient(model, state)


# tanh friction compiles a second scene structure: slow (models/test_contact.py checks every
# friction law finite at a zero bound in CI, and huber runs here)
@pytest.mark.parametrize("friction", ["huber", pytest.param("tanh", marks=pytest.mark.slow)])
def test_finite_gradient_at_zero_normal_force_with_slip(models, friction):
    # no gravity, touching with zero gap and sliding: f_n = 0, so the friction bound is 0
    model, state = models
    if friction != "huber":
        model, _ = two_body_scene().build(contact=jc.Contact(friction=friction),
                                          solver=jc.Newton(iterations=30))
    model = model.replace(gravity=jnp.zeros(3))
    state = state.replace(vel=state.vel.at[0].set(jnp.array([1.0, 0.0, 0.0])))
    _assert_finite_gradient(model, state)


# --- a light tumbling cube at every time step (issue 63) ----------------------------------------

def _light_cube_gradients(dt, horizon=0.6):
    """A 0.1 kg, 10 cm cube (μ = 1, k_n = 2e3 N/m, critically damped) tossed with spin onto
    the ground: the converged flags of every step, and d loss / d(v0, ω0) by reverse mode,
    forward mode and central differences (h = 1e-7: the loss has stick-slip kinks that
    h = 1e-6 straddles at Δt = 3e-4, making the difference 0.5 % off there)."""
    mass, k = 0.1, 2e3
    scene = jc.Scene(dt=dt, friction=1.0, stiffness=k, damping=2.0 * np.sqrt(k * mass))
    scene.add_plane()
    quat = np.array([0.9, 0.3, 0.2, 0.1]) / np.linalg.norm([0.9, 0.3, 0.2, 0.1])
    scene.add_box(0.05, mass, (0.0, 0.0, 0.15), quat=tuple(quat), vel=(1.0, 0.5, -1.0),
                  ang_vel=(3.0, -5.0, 8.0))
    steps = round(horizon / dt)
    out = {}
    for mode in ("vjp", "jvp"):
        model, state = scene.build(solver=jc.Newton(ad=mode))

        def loss(x, model=model, state=state):
            s = state.replace(vel=x[None, :3], ang_vel=x[None, 3:])
            final, _, info = jc.rollout(model, s, steps=steps, return_info=True)
            return final.pos[0, 0] + 0.5 * final.pos[0, 1] + 0.1 * final.ang_vel[0, 2], info

        x0 = jnp.concatenate([state.vel[0], state.ang_vel[0]])
        if mode == "vjp":
            (_, info), out["reverse"] = jax.jit(jax.value_and_grad(loss, has_aux=True))(x0)
            out["converged"] = info.converged
            value = jax.jit(lambda x: loss(x)[0])
            h = 1e-7
            out["fd"] = np.array([(value(x0 + h * e) - value(x0 - h * e)) / (2 * h)
                                  for e in np.eye(6)])
        else:
            out["forward"] = jax.jit(jax.jacfwd(lambda x: loss(x)[0]))(x0)
    return out


@pytest.mark.parametrize("dt", [1e-2, pytest.param(3e-3, marks=pytest.mark.slow),
                                pytest.param(1e-3, marks=pytest.mark.slow),
                                pytest.param(3e-4, marks=pytest.mark.slow)])
def test_light_tumbling_cube_converges_and_its_gradient_is_exact(dt):
    out = _light_cube_gradients(dt)
    assert bool(jnp.all(out["converged"]))
    scale = np.linalg.norm(out["fd"])
    assert np.linalg.norm(np.asarray(out["reverse"]) - out["fd"]) <= 1e-4 * scale
    np.testing.assert_allclose(out["forward"], out["reverse"], rtol=1e-8, atol=1e-10 * scale)
