"""Gradients of rollouts: implicit reverse mode vs central finite differences, forward mode and
unrolled autodiff of fully converged Newton solves (float64), and finiteness at the kinks of
contact.

Every test uses one scene structure (a sphere, body 0, and a box, body 1, over the ground) and
one loss, a linear functional of the final state, so that the whole module compiles a handful
of programs; what differs between tests is data: initial state, parameters, controls, weights.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

T = 100  # steps of every rollout here (0.2 s)
# Central differences with h = 1e-5 on losses computed from solves converged to 1e-10 m/s:
# truncation O(h²) ~ 1e-10 relative, solver noise ~ 1e-10 / h = 1e-5 relative.
FD_STEP = 1e-5
FD_RTOL = 1e-4
# forward mode and reverse through the jvp rule differ from reverse mode by rounding only
AD_RTOL = 1e-8
# unrolled autodiff differs from the implicit gradient by O(residual at convergence)
UNROLL_RTOL = 1e-6


def _scene(friction=0.5, damping=100.0):
    scene = jc.Scene(dt=0.002, friction=friction, damping=damping)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, (0.0, 0.0, 0.05))
    # sharp corners: with the default rounding a corner's stick/slip switch lies within the
    # finite-difference step of μ here (FD at h = 1e-6 still matches the implicit gradient)
    scene.add_box(0.05, 1.0, (1.0, 0.0, 0.05), rounding=0.0)
    scene.exclude_pair(0, 1)  # each test moves one of them; they never meet
    return scene


@pytest.fixture(scope="module")
def models():
    """The scene with reverse-mode, forward-mode and unrolled gradients, and its state."""
    out = {}
    for ad in ("vjp", "jvp", "unrolled"):
        out[ad], state = _scene().build(solver=jc.Newton(ad=ad, iterations=30))
    return out, state


def _loss(model, state, controls, weights):
    final, _ = jc.rollout(model, state, controls)
    return sum(jnp.sum(w * x) for w, x in zip(jax.tree.leaves(weights), jax.tree.leaves(final)))


_value = jax.jit(_loss)
_grad = jax.jit(jax.grad(_loss, argnums=(0, 1, 2)))


@jax.jit
def _jvp(model, state, controls, weights, tangents):
    return jax.jvp(lambda m, s, c: _loss(m, s, c, weights), (model, state, controls), tangents)[1]


def _zeros_like(tree):
    return jax.tree.map(jnp.zeros_like, tree)


def _no_controls(state):
    n = state.pos.shape[0]
    return jc.Control(force=jnp.zeros((T, n, 3)), torque=jnp.zeros((T, n, 3)),
                      motor=jnp.zeros((T, 0)))


def _weights(state, **fields):
    w = _zeros_like(state)
    return w.replace(**{k: jnp.asarray(v, dtype=jnp.float64) for k, v in fields.items()})


def _directional(f, x, direction, h=FD_STEP):
    """Central difference of f along direction; f maps a pytree like x to a float."""
    plus = jax.tree.map(lambda a, d: a + h * d, x, direction)
    minus = jax.tree.map(lambda a, d: a - h * d, x, direction)
    return (f(plus) - f(minus)) / (2 * h)


def _dot(a, b):
    return sum(float(jnp.sum(x * y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _check_modes(models, state, controls, weights, directions):
    """Reverse mode vs FD, forward mode, reverse through the jvp rule and unrolled autodiff.

    directions: list of (model, state, controls) tangent triples.
    Returns the reverse-mode gradients (model_bar, state_bar, controls_bar).
    """
    m = models
    rev = _grad(m["vjp"], state, controls, weights)
    rev_jvp = _grad(m["jvp"], state, controls, weights)
    unrolled = _grad(m["unrolled"], state, controls, weights)
    for leaf in jax.tree.leaves(rev):
        assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite reverse-mode gradient"
    for tangent in directions:
        expected = _dot(rev, tangent)
        fd = _directional(lambda p: float(_value(p[0], p[1], p[2], weights)),
                          (m["vjp"], state, controls), tangent)
        # the tangent must carry the jvp model's static fields (its solver settings)
        tangent_jvp = (jax.tree.unflatten(jax.tree.structure(m["jvp"]),
                                          jax.tree.leaves(tangent[0])),) + tuple(tangent[1:])
        fwd = float(_jvp(m["jvp"], state, controls, weights, tangent_jvp))
        assert fd == pytest.approx(expected, rel=FD_RTOL, abs=1e-8), "reverse vs FD"
        assert fwd == pytest.approx(expected, rel=AD_RTOL, abs=1e-11), "forward vs reverse"
        assert _dot(rev_jvp, tangent) == pytest.approx(expected, rel=AD_RTOL, abs=1e-11), \
            "reverse through the jvp rule vs custom_vjp"
        assert _dot(unrolled, tangent) == pytest.approx(expected, rel=UNROLL_RTOL, abs=1e-9), \
            "unrolled vs implicit"
    return rev


def _tangent(models, state, controls, *, model=None, state_fields=None, control=None):
    tm = _zeros_like(models["vjp"]) if model is None else model
    ts = _zeros_like(state)
    if state_fields:
        ts = ts.replace(**state_fields)
    tc = _zeros_like(controls) if control is None else control
    return (tm, ts, tc)


def _unit(shape, index):
    return jnp.zeros(shape).at[index].set(1.0)


def test_ball_bounce_final_position_wrt_initial_velocity(models):
    m, state = models
    state = state.replace(pos=state.pos.at[0, 2].set(0.1),
                          vel=state.vel.at[0].set(jnp.array([1.0, 0.0, -1.0])))
    controls = _no_controls(state)
    _, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=T, return_info=True))(m["vjp"], state)
    assert np.any(np.asarray(info.max_penetration) > 1e-3), "the ball must hit the ground"
    weights = _weights(state, pos=jnp.zeros((2, 3)).at[0].set(jnp.array([1.0, 0.0, 2.0])))
    directions = [_tangent(m, state, controls, state_fields={"vel": _unit((2, 3), (0, i))})
                  for i in (0, 2)]
    rev = _check_modes(m, state, controls, weights, directions)
    assert abs(float(rev[1].vel[0, 2])) > 1e-3


def test_box_sliding_to_rest_wrt_friction_and_velocity(models):
    m, state = models
    v0, mu, g = 0.5, 0.5, 9.81
    state = state.replace(vel=state.vel.at[1, 0].set(v0))
    controls = _no_controls(state)
    weights = _weights(state, pos=_unit((2, 3), (1, 0)))
    model = m["vjp"]
    # one direction moves μ of the box and of the ground together (the pair's μ is their mean)
    d_mu = _zeros_like(model)
    d_mu = d_mu.replace(geom=d_mu.geom.replace(friction=_unit((2,), 1)),
                        plane=d_mu.plane.replace(friction=jnp.ones((1,))))
    directions = [_tangent(m, state, controls, model=d_mu),
                  _tangent(m, state, controls, state_fields={"vel": _unit((2, 3), (1, 0))})]
    rev = _check_modes(m, state, controls, weights, directions)
    # Coulomb block stopping within the horizon: x = v0²/(2 μ g)
    dx_dmu = _dot(rev, directions[0])
    dx_dv0 = _dot(rev, directions[1])
    assert dx_dmu == pytest.approx(-v0 ** 2 / (2 * mu ** 2 * g), rel=0.05)
    assert dx_dv0 == pytest.approx(v0 / (mu * g), rel=0.05)


def test_per_step_controls_over_100_steps(models):
    m, state = models
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    controls = jc.Control(force=2.0 * jax.random.normal(k1, (T, 2, 3)),
                          torque=0.05 * jax.random.normal(k2, (T, 2, 3)),
                          motor=jnp.zeros((T, 0)))
    weights = _weights(state, pos=jnp.ones((2, 3)), vel=jnp.full((2, 3), 0.1),
                       ang_vel=jnp.full((2, 3), 0.01))
    directions = []
    for i in range(2):
        kf, kt = jax.random.split(jax.random.PRNGKey(10 + i))
        tc = jc.Control(force=jax.random.normal(kf, (T, 2, 3)),
                        torque=0.1 * jax.random.normal(kt, (T, 2, 3)), motor=jnp.zeros((T, 0)))
        directions.append(_tangent(m, state, controls, control=tc))
    rev = _check_modes(m, state, controls, weights, directions)
    assert float(jnp.max(jnp.abs(rev[2].force))) > 0.0


def test_gradient_wrt_model_leaves_matches_fd(models):
    m, state = models
    # the box starts slightly pressed in: a gap of exactly zero at t = 0 is a kink of the loss
    # in the plane offset (one-sided derivatives differ), which central FD would average
    state = state.replace(pos=state.pos.at[0, 2].set(0.1).at[1, 2].set(0.05 - 2e-5),
                          vel=state.vel.at[0].set(jnp.array([0.5, 0.0, -1.0])).at[1, 0].set(0.3))
    controls = _no_controls(state)
    weights = _weights(state, pos=jnp.ones((2, 3)))
    model = m["vjp"]
    rev = _grad(model, state, controls, weights)
    for path, g in jax.tree_util.tree_leaves_with_path(rev[0]):
        assert bool(jnp.all(jnp.isfinite(g))), f"non-finite gradient at {jax.tree_util.keystr(path)}"
    # every differentiable leaf family, one FD check each (relative step for large leaves)
    checks = {
        "mass": lambda t: t.replace(body=t.body.replace(mass=_unit((2,), 0))),
        "inertia": lambda t: t.replace(body=t.body.replace(inertia=_unit((2, 3), (1, 2)))),
        "stiffness": lambda t: t.replace(geom=t.geom.replace(stiffness=_unit((2,), 0) * 1e4)),
        "damping": lambda t: t.replace(geom=t.geom.replace(damping=_unit((2,), 0) * 10.0)),
        "size": lambda t: t.replace(geom=t.geom.replace(size=_unit((2, 3), (0, 0)))),
        "gravity": lambda t: t.replace(gravity=_unit((3,), 2)),
        "plane offset": lambda t: t.replace(plane=t.plane.replace(offset=jnp.ones((1,)))),
    }
    for name, make in checks.items():
        tangent = (make(_zeros_like(model)), _zeros_like(state), _zeros_like(controls))
        expected = _dot(rev, tangent)
        # h = 1e-6: the linear law's force kink (a contact ending within a step) puts a kink
        # in the loss about 1e-4 away in the radius; a smaller step stays on one side of it
        fd = _directional(lambda p: float(_value(p[0], p[1], p[2], weights)),
                          (model, state, controls), tangent, h=1e-6)
        assert fd == pytest.approx(expected, rel=FD_RTOL, abs=1e-7), name


# --- finite gradients at the kinks of contact --------------------------------------------------

def _assert_finite_gradient(model, state):
    controls = _no_controls(state)
    weights = _weights(state, pos=jnp.ones((2, 3)), vel=jnp.ones((2, 3)),
                       ang_vel=jnp.ones((2, 3)))
    for part in _grad(model, state, controls, weights):
        for leaf in jax.tree.leaves(part):
            assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite gradient"
    return _grad(model, state, controls, weights)


def test_finite_gradient_at_zero_slip_velocity(models):
    # both bodies at rest on the ground: zero slip at the start and throughout
    m, state = models
    state = state.replace(pos=state.pos.at[0, 2].set(0.05 - 9.81e-5))
    grads = _assert_finite_gradient(m["vjp"], state)
    # friction holds a resting body: a tangential kick is resisted, so d x(T)/d v0 < T
    assert 0.0 < float(grads[1].vel[1, 0]) < 0.5 * T * 0.002


@pytest.mark.parametrize("vz", [-0.5, 0.0, 0.5])
def test_finite_gradient_when_contact_starts_and_ends(models, vz):
    # the sphere touches with gap exactly zero, approaching, resting or leaving
    m, state = models
    state = state.replace(vel=state.vel.at[0].set(jnp.array([0.3, 0.0, vz])))
    _assert_finite_gradient(m["vjp"], state)


@pytest.mark.parametrize("friction", ["huber", "tanh"])
def test_finite_gradient_at_zero_normal_force_with_slip(models, friction):
    # no gravity, touching with zero gap and sliding: f_n = 0, so the friction bound is 0
    m, state = models
    model = m["vjp"]
    if friction != "huber":
        model, _ = _scene().build(contact=jc.Contact(friction=friction),
                                  solver=jc.Newton(iterations=30))
    model = model.replace(gravity=jnp.zeros(3))
    state = state.replace(vel=state.vel.at[0].set(jnp.array([1.0, 0.0, 0.0])))
    _assert_finite_gradient(model, state)
