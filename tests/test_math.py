"""NaN-safe primitives and quaternions (jaxcontact/math.py).

Every safe primitive is checked at zero (value and gradient finite and equal to the documented
convention) and away from zero (value and gradient equal to the analytic ones); quaternion
helpers are checked against closed forms (half-angle formulas, Rodrigues' rotation matrix) and
against each other.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact import math as jm

# Closed forms evaluated in float64: a few ulps of quantities of size <= 1.
_EXACT = 1e-15
# Analytic gradients vs autodiff of the same formula: a few tens of ulps.
_GRAD = 1e-13
# Jacobian of quat_exp just below the series switch θ² = 1e-4: the series of cos(θ/2) stops at
# θ⁴, so d cos(θ/2)/dθ² is off by θ⁴/15360 ≈ 6.5e-13 there, times 2|φ| = 0.02 in dc/dφ
# (measured 1.05e-14; the values themselves are exact to 1 ulp).
_SERIES_GRAD = 5e-14


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def _finite(tree):
    return all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(tree))


# Jitted derivatives shared by the tests: compiling once per shape is far cheaper than running
# the same derivative op by op (each eager op compiles on its own).
_norm_grad = jax.jit(jax.grad(jm.safe_norm))
_normalize_jac = jax.jit(jax.jacobian(jm.safe_normalize))
_sqrt_grad = jax.jit(jax.grad(jm.safe_sqrt))
_div_grads = jax.jit(jax.grad(jm.safe_div, argnums=(0, 1)))
_exp = jax.jit(jm.quat_exp)
_exp_jac = jax.jit(jax.jacfwd(jm.quat_exp))
_exp_hess = jax.jit(jax.hessian(jm.quat_exp))
_integrate_jac = jax.jit(jax.jacfwd(jm.quat_integrate, argnums=1))
_integrate_hess = jax.jit(jax.hessian(jm.quat_integrate, argnums=1))
_quat_mul = jax.jit(jm.quat_mul)
_quat_rotate = jax.jit(jm.quat_rotate)
_quat_to_mat = jax.jit(jm.quat_to_mat)
_quat_integrate = jax.jit(jm.quat_integrate)
_world_inertia = jax.jit(jm.world_inertia)
_world_inertia_inv = jax.jit(jm.world_inertia_inv)
_norm_grad_rows = jax.jit(jax.jacrev(jm.safe_norm))
_normalize_first_grad = jax.jit(jax.grad(lambda y: jnp.sum(jm.safe_normalize(y)[:, 0])))


def _axis_angle_quat(axis, angle):
    axis = _unit(axis)
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])


def _rodrigues(phi):
    """Rotation matrix of the rotation vector phi: I + sin θ K + (1 - cos θ) K²."""
    phi = np.asarray(phi, dtype=float)
    theta = np.linalg.norm(phi)
    if theta == 0.0:
        return np.eye(3)
    k = phi / theta
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(theta) * kx + (1 - math.cos(theta)) * kx @ kx


def _random_quats(n, seed):
    q = np.random.default_rng(seed).normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


# --- safe_norm --------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3])
def test_safe_norm_at_zero_value_and_gradient(n):
    x = jnp.zeros(n)
    assert float(jm.safe_norm(x)) == 0.0
    g = _norm_grad(x)
    assert _finite(g), f"safe_norm gradient at 0 is not finite: {g}"
    np.testing.assert_array_equal(g, np.zeros(n), err_msg="safe_norm gradient at 0")


@pytest.mark.parametrize("x", [[3.0, 4.0], [1e-150, 0.0, 0.0], [-2.0, 1.0, 0.5], [1e8, -1e8, 3.0]])
def test_safe_norm_away_from_zero_matches_norm_and_x_over_norm(x):
    x = np.asarray(x)
    n = np.linalg.norm(x)
    np.testing.assert_allclose(jm.safe_norm(jnp.asarray(x)), n, rtol=_EXACT, err_msg="value")
    np.testing.assert_allclose(_norm_grad(jnp.asarray(x)), x / n, rtol=_GRAD,
                               atol=_GRAD, err_msg="gradient x/|x|")


def test_safe_norm_axis_and_keepdims_with_zero_rows():
    x = jnp.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    norm = jax.jit(jm.safe_norm, static_argnames=("axis", "keepdims"))
    np.testing.assert_allclose(norm(x), [0.0, 3.0], rtol=_EXACT)
    np.testing.assert_allclose(norm(x, axis=0), np.linalg.norm(x, axis=0), rtol=_EXACT)
    assert norm(x, keepdims=True).shape == (2, 1)
    jac = _norm_grad_rows(x)  # (2, 2, 3)
    assert _finite(jac)
    np.testing.assert_array_equal(jac[0], np.zeros((2, 3)), err_msg="zero row: no gradient")
    np.testing.assert_allclose(jac[1, 1], [1 / 3, 2 / 3, 2 / 3], rtol=_GRAD)
    np.testing.assert_array_equal(jac[1, 0], np.zeros(3))


# --- safe_normalize ---------------------------------------------------------------------------

def test_safe_normalize_at_zero_value_and_jacobian():
    x = jnp.zeros(3)
    np.testing.assert_array_equal(jm.safe_normalize(x), np.zeros(3))
    jac = _normalize_jac(x)
    assert _finite(jac), f"safe_normalize Jacobian at 0 is not finite: {jac}"
    np.testing.assert_array_equal(jac, np.zeros((3, 3)))


@pytest.mark.parametrize("x", [[3.0, 0.0, 4.0], [-1.0, 2.0, 0.5], [1e-100, 2e-100, -2e-100]])
def test_safe_normalize_away_from_zero(x):
    x = np.asarray(x)
    n = np.linalg.norm(x)
    u = x / n
    np.testing.assert_allclose(jm.safe_normalize(jnp.asarray(x)), u, rtol=_EXACT, atol=_EXACT)
    # d(x/|x|)/dx = (I - u uᵀ)/|x|
    expected = (np.eye(3) - np.outer(u, u)) / n
    jac = _normalize_jac(jnp.asarray(x))
    np.testing.assert_allclose(jac, expected, rtol=_GRAD, atol=_GRAD / n)


def test_safe_normalize_batched_zero_row_does_not_poison_others():
    x = jnp.array([[0.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(jm.safe_normalize(x), [[0.0, 0.0], [0.0, 1.0]])
    g = _normalize_first_grad(x)
    assert _finite(g)
    np.testing.assert_allclose(g, [[0.0, 0.0], [0.5, 0.0]], atol=_GRAD)


# --- safe_sqrt --------------------------------------------------------------------------------

@pytest.mark.parametrize("x", [0.0, -0.0, -1.0, -1e-300])
def test_safe_sqrt_at_and_below_zero(x):
    assert float(jm.safe_sqrt(x)) == 0.0
    g = _sqrt_grad(x)
    assert float(g) == 0.0, f"safe_sqrt gradient at {x} should be 0, got {g}"


@pytest.mark.parametrize("x", [1e-200, 1e-8, 0.25, 2.0, 1e12])
def test_safe_sqrt_positive(x):
    np.testing.assert_allclose(jm.safe_sqrt(x), math.sqrt(x), rtol=_EXACT)
    np.testing.assert_allclose(_sqrt_grad(x), 0.5 / math.sqrt(x), rtol=_GRAD)


# --- safe_div ---------------------------------------------------------------------------------

@pytest.mark.parametrize("num", [0.0, 3.0, -2.0])
def test_safe_div_at_zero_denominator(num):
    assert float(jm.safe_div(num, 0.0)) == 0.0
    g_num, g_den = _div_grads(num, 0.0)
    assert float(g_num) == 0.0 and float(g_den) == 0.0, (g_num, g_den)


@pytest.mark.parametrize("num,den", [(3.0, 2.0), (-1.0, 1e-8), (0.0, -4.0), (1e10, 3.0)])
def test_safe_div_away_from_zero(num, den):
    np.testing.assert_allclose(jm.safe_div(num, den), num / den, rtol=_EXACT)
    g_num, g_den = _div_grads(num, den)
    np.testing.assert_allclose(g_num, 1.0 / den, rtol=_GRAD, err_msg="d/dnum")
    np.testing.assert_allclose(g_den, -num / den ** 2, rtol=_GRAD, atol=0.0, err_msg="d/dden")


# --- quat_exp (and _half_angle_terms) --------------------------------------------------------

def _half_angle_reference(theta):
    """cos(θ/2), sin(θ/2)/θ and (d/dθ (sin(θ/2)/θ))/θ by series (θ <= 1) or closed form."""
    if theta <= 1.0:
        t2 = theta * theta
        c = sum((-1) ** k * t2 ** k / (4 ** k * math.factorial(2 * k)) for k in range(12))
        s = sum((-1) ** k * t2 ** k / (2 ** (2 * k + 1) * math.factorial(2 * k + 1))
                for k in range(12))
        g = sum((-1) ** k * 2 * k * t2 ** (k - 1) / (2 ** (2 * k + 1) * math.factorial(2 * k + 1))
                for k in range(1, 12))
        return c, s, g
    c, sh = math.cos(theta / 2), math.sin(theta / 2)
    return c, sh / theta, (0.5 * theta * c - sh) / theta ** 3


def _quat_exp_reference(phi):
    """exp(φ) and its Jacobian (4, 3) in closed form."""
    theta = math.sqrt(float(np.sum(np.square(phi))))
    c, s, g = _half_angle_reference(theta)
    q = np.concatenate([[c], s * phi])
    jac = np.concatenate([-0.5 * s * phi[None, :], s * np.eye(3) + g * np.outer(phi, phi)])
    return q, jac


def test_quat_exp_at_zero_value_jacobian_hessian():
    phi = jnp.zeros(3)
    np.testing.assert_array_equal(_exp(phi), [1.0, 0.0, 0.0, 0.0])
    jac = _exp_jac(phi)
    assert _finite(jac)
    np.testing.assert_allclose(jac, np.concatenate([np.zeros((1, 3)), 0.5 * np.eye(3)]),
                               atol=_EXACT)
    hess = _exp_hess(phi)  # (4, 3, 3)
    assert _finite(hess), f"quat_exp Hessian at 0 is not finite: {hess}"
    # cos(|φ|/2) = 1 - |φ|²/8 + ...: Hessian -I/4; the vector part is odd in φ: Hessian 0
    np.testing.assert_allclose(hess[0], -0.25 * np.eye(3), atol=_EXACT)
    np.testing.assert_allclose(hess[1:], np.zeros((3, 3, 3)), atol=_EXACT)


_AXIS = _unit([0.3, -0.5, 0.8])


@pytest.mark.parametrize("theta", [0.05, 0.1, 0.5, 1.0, 2.0, 3.0, math.pi - 1e-3, 5.0])
def test_quat_exp_closed_form_moderate_angles(theta):
    phi = theta * _AXIS
    q = _exp(jnp.asarray(phi))
    expected = _axis_angle_quat(_AXIS, theta)
    np.testing.assert_allclose(q, expected, rtol=0, atol=_EXACT, err_msg=f"θ={theta}")
    np.testing.assert_allclose(np.sum(np.square(q)), 1.0, atol=_EXACT)
    ref_q, ref_jac = _quat_exp_reference(phi)
    np.testing.assert_allclose(_exp_jac(jnp.asarray(phi)), ref_jac, atol=_GRAD)


@pytest.mark.parametrize("theta_sq", [1e-4 * (1 - 1e-12), 1e-4, 1e-4 * (1 + 1e-12), 0.5e-4,
                                      2e-4, 1e-6, 1e-10, 1e-20, 1e-300])
def test_quat_exp_across_series_switch(theta_sq):
    phi = math.sqrt(theta_sq) * _AXIS
    ref_q, ref_jac = _quat_exp_reference(phi)
    q = _exp(jnp.asarray(phi))
    np.testing.assert_allclose(q, ref_q, rtol=0, atol=_EXACT, err_msg=f"θ²={theta_sq}")
    # relative check of the tiny vector part as well
    np.testing.assert_allclose(q[1:], ref_q[1:], rtol=4 * _EXACT, atol=0)
    jac = _exp_jac(jnp.asarray(phi))
    np.testing.assert_allclose(jac, ref_jac, rtol=0, atol=_SERIES_GRAD, err_msg=f"θ²={theta_sq}")


def _half_angle_row(t2):
    c, s = jm._half_angle_terms(t2)
    dc = jax.grad(lambda x: jm._half_angle_terms(x)[0])(t2)
    ds = jax.grad(lambda x: jm._half_angle_terms(x)[1])(t2)
    return jnp.stack([c, s, dc, ds])


_half_angle = jax.jit(jax.vmap(_half_angle_row))
# θ²-derivatives of the half-angle series just below the switch: dc/dθ² lacks θ⁴/15360
# (6.5e-13 there).
_SERIES_DERIV = 1e-12


def test_half_angle_terms_at_zero_and_across_switch():
    """cos(θ/2) and sin(θ/2)/θ as functions of θ², and their θ²-derivatives (series:
    -1/8 + θ²/192 and -1/48 + θ²/1920)."""
    t2 = np.array([0.0, 1e-300, 1e-8, np.nextafter(1e-4, 0.0), 1e-4, 4e-4, 1.0, 9.0])
    out = np.asarray(_half_angle(jnp.asarray(t2)))
    assert np.all(np.isfinite(out)), out
    np.testing.assert_array_equal(out[0], [1.0, 0.5, -0.125, -1.0 / 48])
    for row, x in zip(out, t2):
        c, s, g = _half_angle_reference(math.sqrt(x))
        theta = math.sqrt(x)
        # d/dθ² = (d/dθ)/(2θ): dc/dθ² = -s/4, ds/dθ² = g/2
        np.testing.assert_allclose(row, [c, s, -s / 4, g / 2], rtol=0, atol=_SERIES_DERIV,
                                   err_msg=f"θ = {theta}")
        np.testing.assert_allclose(row[:2], [c, s], rtol=0, atol=_EXACT, err_msg=f"θ = {theta}")


def test_quat_exp_value_continuous_at_switch():
    below = _exp(jnp.asarray(math.sqrt(np.nextafter(1e-4, 0.0)) * _AXIS))
    above = _exp(jnp.asarray(math.sqrt(1e-4) * _AXIS))
    np.testing.assert_allclose(below, above, atol=1e-16)


def test_quat_exp_of_parallel_vectors_adds():
    a, b = 0.7 * _AXIS, -0.2 * _AXIS
    for x, y in ((a, b), (a, 2 * a), (1e-3 * _AXIS, 2e-3 * _AXIS)):
        lhs = _quat_mul(_exp(jnp.asarray(x)), _exp(jnp.asarray(y)))
        np.testing.assert_allclose(lhs, _exp(jnp.asarray(x + y)), atol=4 * _EXACT)


@pytest.mark.parametrize("phi", [[0.0, 0.0, 0.0], [1e-3, 0.0, -2e-3], [0.4, -1.1, 0.3],
                                 [0.0, 0.0, math.pi]])
def test_quat_to_mat_of_exp_is_rodrigues(phi):
    phi = np.asarray(phi)
    np.testing.assert_allclose(_quat_to_mat(_exp(jnp.asarray(phi))), _rodrigues(phi),
                               atol=4 * _EXACT)


# --- quaternion consistency -------------------------------------------------------------------

def test_quat_rotate_equals_matrix_product():
    rng = np.random.default_rng(0)
    q = jnp.asarray(_random_quats(20, 1))
    v = jnp.asarray(rng.normal(size=(20, 3)))
    rotated = _quat_rotate(q, v)
    by_matrix = np.einsum("nij,nj->ni", np.asarray(_quat_to_mat(q)), np.asarray(v))
    np.testing.assert_allclose(rotated, by_matrix, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(v, axis=-1),
                               rtol=1e-14)


def test_quat_rotate_equals_sandwich_product():
    rng = np.random.default_rng(2)
    q = jnp.asarray(_random_quats(10, 3))
    v = rng.normal(size=(10, 3))
    pure = jnp.asarray(np.concatenate([np.zeros((10, 1)), v], axis=-1))
    conj = jnp.asarray(np.asarray(q) * np.array([[1.0, -1.0, -1.0, -1.0]]))
    sandwich = _quat_mul(_quat_mul(q, pure), conj)
    np.testing.assert_allclose(sandwich[:, 0], np.zeros(10), atol=1e-14)
    np.testing.assert_allclose(sandwich[:, 1:], _quat_rotate(q, jnp.asarray(v)), atol=1e-14)


def test_quat_to_mat_is_a_rotation_and_a_homomorphism():
    qa = jnp.asarray(_random_quats(8, 4))
    qb = jnp.asarray(_random_quats(8, 5))
    ra, rb = np.asarray(_quat_to_mat(qa)), np.asarray(_quat_to_mat(qb))
    eye = np.broadcast_to(np.eye(3), (8, 3, 3))
    np.testing.assert_allclose(ra @ np.swapaxes(ra, -1, -2), eye, atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(ra), np.ones(8), atol=1e-14)
    np.testing.assert_allclose(_quat_to_mat(_quat_mul(qa, qb)), ra @ rb, atol=1e-14)
    # q and -q are the same rotation
    np.testing.assert_allclose(_quat_to_mat(-qa), ra, atol=0)


def test_quat_mul_known_products():
    i, j, k = (jnp.asarray(np.eye(4)[n]) for n in (1, 2, 3))
    one = jnp.array([1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(_quat_mul(i, j), k)
    np.testing.assert_array_equal(_quat_mul(j, i), -k)
    np.testing.assert_array_equal(_quat_mul(i, i), -one)
    np.testing.assert_array_equal(_quat_mul(one, j), j)


def test_quat_rotate_about_z_by_quarter_turn():
    q = jnp.asarray(_axis_angle_quat([0, 0, 1], math.pi / 2))
    np.testing.assert_allclose(_quat_rotate(q, jnp.array([1.0, 0.0, 0.0])), [0.0, 1.0, 0.0],
                               atol=_EXACT)


# --- quat_integrate ---------------------------------------------------------------------------

def test_quat_integrate_at_zero_rate_value_and_jacobian():
    q = jnp.asarray(_random_quats(1, 6)[0])
    dt = 0.01
    np.testing.assert_allclose(_quat_integrate(q, jnp.zeros(3), dt), q, atol=_EXACT)
    jac = _integrate_jac(q, jnp.zeros(3), dt)
    assert _finite(jac)
    # d/dω exp(dt ω) ⊗ q at ω = 0 is dt/2 (0, e_i) ⊗ q per column i
    expected = np.stack([0.5 * dt * np.asarray(_quat_mul(jnp.asarray(np.eye(4)[i + 1]), q))
                         for i in range(3)], axis=-1)
    np.testing.assert_allclose(jac, expected, atol=_EXACT)
    hess = _integrate_hess(q, jnp.zeros(3), dt)
    assert _finite(hess)


@pytest.mark.parametrize("omega", [[0.0, 0.0, 5.0], [1.0, -2.0, 0.5], [1e-4, 0.0, 1e-4]])
def test_quat_integrate_composes_rotations(omega):
    omega = np.asarray(omega)
    dt = 0.1
    q = jnp.asarray(_random_quats(1, 7)[0])
    q_new = _quat_integrate(q, jnp.asarray(omega), dt)
    np.testing.assert_allclose(_quat_to_mat(q_new),
                               _rodrigues(dt * omega) @ np.asarray(_quat_to_mat(q)), atol=1e-14)
    np.testing.assert_allclose(np.sum(np.square(q_new)), 1.0, atol=1e-15)
    # Jacobian in ω: chain rule through exp, dt J_exp(dt ω) composed with right-multiplication
    _, j_exp = _quat_exp_reference(dt * omega)
    right = np.stack([np.asarray(_quat_mul(jnp.asarray(np.eye(4)[a]), q)) for a in range(4)],
                     axis=-1)  # (4, 4): p ↦ p ⊗ q
    expected = right @ (dt * j_exp)
    jac = _integrate_jac(q, jnp.asarray(omega), dt)
    np.testing.assert_allclose(jac, expected, atol=_GRAD)


def test_quat_integrate_constant_rate_about_fixed_axis_adds_angles():
    omega = jnp.asarray(2.0 * _AXIS)
    q = jnp.array([1.0, 0.0, 0.0, 0.0])
    for _ in range(10):
        q = _quat_integrate(q, omega, 0.05)
    np.testing.assert_allclose(q, _axis_angle_quat(_AXIS, 1.0), atol=1e-14)


@functools.partial(jax.jit, static_argnums=2)
def _third_derivatives(q, w, dt):
    """∂³q+/∂ω³ of the closed form and of autodiff, one program for every rate (op by op,
    the nested derivatives dispatched some 200 small programs per rate)."""
    return (jax.jacfwd(lambda w: jm.quat_integrate_derivatives(q, w, dt)[2])(w),
            jax.jacfwd(lambda w: _integrate_hess(q, w, dt))(w))


@pytest.mark.parametrize("rate", [0.0, 1e-5, 0.3, 14.0, 15.0, 400.0])
def test_quat_integrate_derivatives_are_those_of_the_map(rate):
    # closed-form ∂q+/∂ω, ∂²q+/∂ω² (dofs.Turn) against autodiff of quat_integrate, in every
    # regime of θ² = |Δt ω|²: zero, the series (below 1), across the seam at θ = 1 (rates 14
    # and 15 at Δt = 0.07), large; and their own derivatives (what unrolled gradients take)
    dt = 0.07
    quats = jnp.asarray(_random_quats(2, 9))
    omegas = jnp.asarray(rate * _unit(np.random.default_rng(3).normal(size=(2, 3))))
    value, jac, hess = jm.quat_integrate_derivatives(quats, omegas, dt)
    assert value.shape == (2, 4) and jac.shape == (2, 4, 3) and hess.shape == (2, 4, 3, 3)
    for q, w, v, j, h in zip(quats, omegas, value, jac, hess):
        np.testing.assert_array_equal(v, _quat_integrate(q, w, dt))
        np.testing.assert_allclose(j, _integrate_jac(q, w, dt), rtol=0, atol=_GRAD)
        np.testing.assert_allclose(h, _integrate_hess(q, w, dt), rtol=0, atol=1e-12)
        third, expected = _third_derivatives(q, w, dt)
        assert _finite(third)
        np.testing.assert_allclose(third, expected, rtol=0, atol=1e-11)


# --- inertia ----------------------------------------------------------------------------------

def test_world_inertia_inv_is_inverse_of_world_inertia():
    quat = jnp.asarray(_random_quats(6, 8))
    inertia = jnp.asarray(np.random.default_rng(9).uniform(0.01, 3.0, size=(6, 3)))
    world = np.asarray(_world_inertia(quat, inertia))
    inv = np.asarray(_world_inertia_inv(quat, inertia))
    eye = np.broadcast_to(np.eye(3), (6, 3, 3))
    np.testing.assert_allclose(world @ inv, eye, atol=1e-12)
    np.testing.assert_allclose(inv, np.linalg.inv(np.asarray(world)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(world, np.swapaxes(world, -1, -2), atol=1e-15)
    # eigenvalues are the principal moments
    np.testing.assert_allclose(np.linalg.eigvalsh(np.asarray(world)), np.sort(inertia, axis=-1),
                               rtol=1e-12)


def test_world_inertia_identity_orientation_is_diagonal():
    inertia = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(_world_inertia(jnp.array([1.0, 0.0, 0.0, 0.0]), inertia),
                               np.diag([1.0, 2.0, 3.0]), atol=0)
