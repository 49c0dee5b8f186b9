"""Normal, damping and friction laws of models/contact.py against their closed forms.

Forces are minus the gradients of the energies and dissipation potentials (DESIGN.md section 4,
ADD Eq. 16-18, thesis Eq. 129 and 132-133). Each law is also checked where smoothing and NaN
safety matter: zero slip, zero friction bound, the edges of the smooth penalty, and the switch
points of the series used inside the laws. The contact's cost in the step (normal law, damper
and friction in one function, `contact_cost`) is convex, bounded by Coulomb, and equal to its
closed forms; the damped law's restitution to an integration of it.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact.models import contact as laws

# Closed forms vs the laws in float64: a few ulps, with margin for k ~ 1e4 scaling.
_RTOL = 1e-12
# The tanh law evaluates log cosh by a series below (k|u|/(μ f_n))² = 1e-3 whose first omitted
# term is 17 y⁴/2520: relative error ~1e-11 in the value, ~5e-11 in the force at the switch.
_TANH_RTOL = 2e-10

K_N = 1e4       # normal stiffness, N/m
DELTA = 1e-3    # smooth-law width, m
K_F = 50.0      # huber stick stiffness / tanh slope k_t, N s/m
EPS = 1e-2      # pseudo-huber regularization velocity, m/s
K_T = 200.0     # stiffness of ADD's clamped linear law (k_n Δt in the simulator)
BOUND = 3.0     # friction bound μ f_n, N

GAPS = np.array([-0.05, -2e-3, -1e-3 - 1e-9, -1e-3, -5e-4, -1e-6, 0.0, 1e-6, 5e-4, 1e-3, 0.02])


# --- normal laws ------------------------------------------------------------------------------
# One compiled function per law, always called on _PAD gaps: (U, f, f', f'') per gap, with f the
# repulsive force -dU/dd. p and δ are traced, so every exponent and width shares the compile.

_PAD = 16


def _normal_fn(law):
    def energy(d, p, delta):
        return laws.normal_energy(d, K_N, law, p=p, delta=delta)

    def force(d, p, delta):
        return laws.normal_force(d, K_N, law, p=p, delta=delta)

    slope = jax.grad(force)
    curvature = jax.grad(slope)

    def all_of(d, p, delta):
        return jnp.stack([energy(d, p, delta), force(d, p, delta), slope(d, p, delta),
                          curvature(d, p, delta)])

    return jax.jit(jax.vmap(all_of, in_axes=(0, None, None)))


_NORMAL_FNS = {law: _normal_fn(law) for law in laws.NORMAL_LAWS}


def _normal(law, d, p=2.0, delta=DELTA):
    """(n, 4) array of U, f, df/dd, d²f/dd² of `law` at the n <= _PAD gaps d."""
    d = np.asarray(d, dtype=float)
    padded = np.concatenate([d, np.ones(_PAD - len(d))])
    return np.asarray(_NORMAL_FNS[law](jnp.asarray(padded), p, delta))[:len(d)]


def _smooth_force_reference(d):
    """k ρ_δ(-d): 0 above gap δ, linear below gap -δ, quartic ramp in between."""
    x = -np.asarray(d, dtype=float)
    ramp = (x + DELTA) ** 3 * (3 * DELTA - x) / (16 * DELTA ** 3)
    return K_N * np.where(x >= DELTA, x, np.where(x <= -DELTA, 0.0, ramp))


def _smooth_energy_reference(d):
    """∫ of the force from the far edge (gap δ), by 3-point Gauss-Legendre (exact: quartic)."""
    nodes, weights = np.polynomial.legendre.leggauss(3)
    out = []
    for x in -np.asarray(d, dtype=float):
        hi = min(x, DELTA)
        inner = 0.0
        if hi > -DELTA:
            s = 0.5 * (hi + DELTA) * nodes + 0.5 * (hi - DELTA)
            inner = 0.5 * (hi + DELTA) * np.sum(weights * _smooth_force_reference(-s))
        outer = 0.5 * K_N * (x * x - DELTA * DELTA) if x > DELTA else 0.0
        out.append(inner + outer)
    return np.array(out)


def test_linear_law_closed_form():
    out = _normal("linear", GAPS)
    pen = np.maximum(-GAPS, 0.0)
    np.testing.assert_allclose(out[:, 0], 0.5 * K_N * pen ** 2, rtol=_RTOL, atol=0,
                               err_msg="energy")
    np.testing.assert_allclose(out[:, 1], K_N * pen, rtol=_RTOL, atol=0, err_msg="force")


@pytest.mark.parametrize("p", [2.0, 3.0, 2.5])
def test_power_law_closed_form(p):
    out = _normal("power", GAPS, p)
    pen = np.abs(np.minimum(GAPS, 0.0))
    np.testing.assert_allclose(out[:, 0], K_N / p * pen ** p, rtol=_RTOL, atol=0,
                               err_msg="energy")
    np.testing.assert_allclose(out[:, 1], K_N * pen ** (p - 1), rtol=_RTOL, atol=0,
                               err_msg="force")


def test_power_two_is_linear():
    # away from d = 0 exactly, where the curvature jumps and any value between is admissible
    gaps = np.asarray(GAPS)[np.asarray(GAPS) != 0.0]
    np.testing.assert_allclose(_normal("power", gaps, 2.0)[:, :3], _normal("linear", gaps)[:, :3],
                               rtol=_RTOL, atol=0)


@pytest.mark.parametrize("p", [2.0, 2.5, 3.0])
def test_power_law_derivatives_at_contact_edge(p):
    """At d = 0 force and slope (the energy's gradient and Hessian) are finite; p = 3 has a C1
    force (slope 0 at the edge)."""
    out = _normal("power", [0.0, -1e-3], p)[:, 1:3]
    assert np.all(np.isfinite(out)), out
    assert out[0, 0] == 0.0
    # slope of the force below the edge: -k (p-1) |d|^(p-2)
    np.testing.assert_allclose(out[1, 1], -K_N * (p - 1) * 1e-3 ** (p - 2), rtol=_RTOL)
    if p == 3.0:
        assert out[0, 1] == 0.0, "p = 3 force must have zero slope at d = 0 (C1)"




@pytest.mark.parametrize("law,p", [("linear", 2.0), ("smooth", 2.0), ("power", 3.0),
                                   ("power", 2.0), ("power", 2.5)])
def test_normal_law_curvature_derivative_finite_out_of_contact(law, p):
    """d²f/dd² (the derivative of the energy's Hessian) is 0 where the law is identically 0.

    Differentiating through Newton iterations (ad="unrolled", the reference for implicit
    gradients) differentiates the Jacobian, which holds f' of every candidate, including those
    far from contact."""
    far = [2 * DELTA, 0.02, 10.0]  # beyond the smooth law's ramp too
    out = _normal(law, far, p)
    np.testing.assert_array_equal(out, np.zeros((3, 4)), err_msg=f"{law} p={p} out of contact")


def test_smooth_law_closed_form():
    out = _normal("smooth", GAPS)
    np.testing.assert_allclose(out[:, 0], _smooth_energy_reference(GAPS), rtol=1e-11,
                               atol=1e-18, err_msg="energy")
    np.testing.assert_allclose(out[:, 1], _smooth_force_reference(GAPS), rtol=_RTOL, atol=1e-18,
                               err_msg="force")


def test_smooth_law_equals_linear_beyond_width_and_zero_above_gap_width():
    deep = [-DELTA * (1 + 1e-9), -2 * DELTA, -0.1, -10.0]
    np.testing.assert_allclose(_normal("smooth", deep)[:, 1:3], _normal("linear", deep)[:, 1:3],
                               rtol=_RTOL, atol=0)
    apart = [DELTA, DELTA * (1 + 1e-9), 0.5, 1e3]
    np.testing.assert_array_equal(_normal("smooth", apart), np.zeros((4, 4)))
    # inside the ramp there is already a force before the surfaces touch
    assert _normal("smooth", [0.5 * DELTA])[0, 1] > 0.0


@pytest.mark.parametrize("edge", [-DELTA, DELTA])
def test_smooth_law_is_c2_at_its_edges(edge):
    """Force, slope and curvature agree on both sides of d = ±δ, and equal the values of the
    neighbouring pieces (linear below -δ: f = -k d, f' = -k, f'' = 0; zero above δ)."""
    h = 1e-7 * DELTA
    out = _normal("smooth", [edge - h, edge, edge + h])[:, 1:]
    assert np.all(np.isfinite(out)), out
    scale = np.array([K_N * DELTA, K_N, K_N / DELTA])  # natural size of f, f', f''
    jump = np.abs(out[0] - out[2]) / scale
    # one-sided differences over 2h: f and f' move by O(h/δ), f'' by O(h/δ) too (C2, not C3)
    assert np.all(jump < 1e-5), f"jump across d={edge}: f, f', f'' relative {jump}"
    limit = np.array([K_N * DELTA, -K_N, 0.0]) if edge < 0 else np.zeros(3)
    np.testing.assert_allclose(out[1], limit, atol=1e-9 * scale.max())
    # the same check does catch a kink: the linear law's slope jumps by k at d = 0
    lin = _normal("linear", [-h, h])[:, 1:]
    assert abs(lin[0, 1] - lin[1, 1]) / K_N > 0.99


def test_smooth_law_tends_to_linear_as_width_shrinks():
    d = np.array([-1e-3, -1e-4, 1e-4])
    for delta in (1e-5, 1e-7):
        f = _normal("smooth", d, delta=delta)[:, 1]
        np.testing.assert_allclose(f, K_N * np.maximum(-d, 0.0), rtol=_RTOL, atol=K_N * delta)


@pytest.mark.parametrize("law", laws.NORMAL_LAWS)
def test_normal_laws_finite_everywhere_including_edges(law):
    d = [-DELTA, -1e-300, -0.0, 0.0, 1e-300, DELTA, 1e6, -1e6]
    out = _normal(law, d, 2.5)[:, :3]  # the energy, its gradient and its Hessian
    assert np.all(np.isfinite(out)), f"{law}: non-finite force or slope {out}"
    assert np.all(out[:, 1] >= 0.0), f"{law}: the normal force must be repulsive"


def test_normal_law_unknown_name_raises():
    with pytest.raises(ValueError, match="law"):
        laws.normal_energy(jnp.zeros(()), K_N, "hertz")


# --- the contact's cost: normal law, damping and friction in one convex function ------------

SHARED = {"friction_stiffness": jnp.asarray(K_F), "friction_eps": jnp.asarray(EPS),
          "smooth_width": jnp.asarray(DELTA)}
DT, K_D, MU = 2e-3, 30.0, 0.5
# velocities (v_n, v_t1, v_t2) and start gaps spanning separation, contact, stick and slip
_CASES = np.random.default_rng(7).normal(size=(48, 4)) * np.array([0.3, 0.3, 0.3, 2e-3])
_CASES[:6] = [[0.0, 0.0, 0.0, -1e-3], [0.0, 0.0, 0.0, 1e-3], [-0.5, 0.0, 0.0, 0.0],
              [0.0, 1e-9, 0.0, -1e-3], [0.2, 0.3, -0.1, 0.0], [-0.01, 1e-3, 0.0, -2e-4]]


def _cost_fn(law):
    laws_ = laws.Laws(normal=law[0], power=law[1], friction=law[2], coupling=law[3])

    def cost(v, gap, bound):
        return laws.contact_cost(v, gap, K_N, K_D, MU, DT, laws_, SHARED, bound)

    def all_of(v, gap, bound):
        return cost(v, gap, bound), jax.grad(cost)(v, gap, bound), jax.hessian(cost)(v, gap,
                                                                                      bound)

    return jax.jit(jax.vmap(all_of, in_axes=(0, 0, None)))


def _costs(law, bound=0.02):
    v, gap = jnp.asarray(_CASES[:, :3]), jnp.asarray(_CASES[:, 3])
    return tuple(np.asarray(x) for x in _cost_fn(law)(v, gap, bound))


_COUPLED = [("linear", 3.0, "huber", "cone"), ("power", 2.0, "huber", "cone"),
            ("smooth", 3.0, "tanh", "cone"), ("power", 3.0, "linear", "cone"),
            ("smooth", 3.0, "pseudo_huber", "cone")]


@pytest.mark.parametrize("law", _COUPLED + [("linear", 3.0, "huber", "lagged"),
                                            ("smooth", 3.0, "tanh", "lagged")])
def test_contact_cost_is_convex_finite_and_bounded_by_coulomb(law):
    value, grad, hess = _costs(law)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))
    scale = np.abs(hess).max()
    assert np.all(np.linalg.eigvalsh(hess) >= -1e-9 * scale), law
    # impulses: normal -∂ℓ/∂v_n >= 0 (never pulls); friction opposes the slip
    assert np.all(-grad[:, 0] >= -1e-12), law
    slip = _CASES[:, 1:3]
    assert np.all(np.sum(grad[:, 1:] * slip, axis=1) >= -1e-15), law
    if law[3] == "cone":   # |friction| <= μ |normal| at the same step
        assert np.all(np.linalg.norm(grad[:, 1:], axis=1) <= MU * -grad[:, 0] * (1 + 1e-9)
                      + 1e-15), law


def test_cone_coupling_closed_form_is_the_maximization_it_solves():
    """SAP's closed form (linear law, huber friction) equals the bracketed scalar maximization
    of the same cost (power law p = 2, the same potential), with its gradient and Hessian."""
    closed = _costs(("linear", 3.0, "huber", "cone"))
    solved = _costs(("power", 2.0, "huber", "cone"))
    for name, a, b in zip(("value", "gradient", "hessian"), closed, solved):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(a).max(), err_msg=name)


def test_lagged_coupling_is_the_normal_law_plus_friction_with_the_bound_given():
    """Coupling "lagged": ℓ = (Δt/T) U(d₀ + T v_n) + H(v_t; b̄) with T = Δt + k_d/k_n: the
    damper is the law read τ later, the friction bound b̄ fixed (`Laws.coupling`)."""
    bound = 0.02
    value = _costs(("linear", 3.0, "huber", "lagged"), bound)[0]
    T = DT + K_D / K_N
    vn, gap = _CASES[:, 0], _CASES[:, 3]
    normal = DT / T * 0.5 * K_N * np.minimum(gap + T * vn, 0.0) ** 2
    speed = np.linalg.norm(_CASES[:, 1:3], axis=1)
    s = DT * K_F
    friction = np.where(s * speed <= bound, 0.5 * s * speed ** 2,
                        bound * speed - bound ** 2 / (2 * s))
    np.testing.assert_allclose(value, normal + friction, rtol=1e-12, atol=1e-300)


def test_damped_linear_law_is_a_spring_and_damper_that_never_pulls():
    """-∂ℓ/∂v_n / Δt = max(0, k_n (-d) - k_d ḋ) at the end-of-step gap d = d₀ + Δt v_n."""
    grad = _costs(("linear", 3.0, "huber", "lagged"), 0.0)[1]
    vn, gap = _CASES[:, 0], _CASES[:, 3]
    end = gap + DT * vn
    expected = np.maximum(0.0, -K_N * end - K_D * vn)
    np.testing.assert_allclose(-grad[:, 0] / DT, expected, rtol=1e-12, atol=1e-9)


def test_reweighted_friction_keeps_value_and_gradient_and_curves_along_the_slip():
    """Descent's preconditioner (`reweighted`): the same value and gradient, and a Hessian
    with b/|v| along a slipping contact's slip, where the exact one has none."""
    laws_ = laws.Laws(coupling="lagged")
    v, gap, bound = jnp.asarray([0.0, 0.3, 0.4]), jnp.asarray(-1e-3), 0.02

    def cost(v, reweighted):
        return laws.contact_cost(v, gap, K_N, K_D, MU, DT, laws_, SHARED, bound, reweighted)

    for fn in (lambda v, r: cost(v, r), jax.grad(lambda v, r: cost(v, r))):
        np.testing.assert_allclose(fn(v, True), fn(v, False), rtol=1e-14)
    slip = np.array([0.0, 0.6, 0.8])
    exact = np.asarray(jax.hessian(cost)(v, False))
    held = np.asarray(jax.hessian(cost)(v, True))
    assert slip @ exact @ slip == pytest.approx(0.0, abs=1e-9)
    assert slip @ held @ slip == pytest.approx(bound / 0.5, rel=1e-12)


# --- friction laws ----------------------------------------------------------------------------

FRICTION = ("huber", "pseudo_huber", "tanh", "linear")


def _dissipation(u, bound, law):
    return laws.friction_dissipation(jnp.sum(u * u), bound, law, K_F, EPS, K_T)


def _friction_fn(law):
    def all_of(u, bound):
        return (_dissipation(u, bound, law), -jax.grad(_dissipation)(u, bound, law),
                jax.hessian(_dissipation)(u, bound, law),
                jax.grad(_dissipation, argnums=1)(u, bound, law))

    return jax.jit(jax.vmap(all_of, in_axes=(0, None)))


_FRICTION_FNS = {law: _friction_fn(law) for law in FRICTION}


def _friction(law, u, bound):
    """D, force -∂D/∂u, Hessian ∂²D/∂u², ∂D/∂bound at each slip u (n, dim), in numpy."""
    return tuple(np.asarray(x) for x in _FRICTION_FNS[law](jnp.asarray(u), bound))


def _friction_reference(law, speed, bound):
    """(D, |f|) of the law at slip speed |u| in closed form."""
    speed = np.asarray(speed, dtype=float)
    if law in ("huber", "linear"):
        k = K_F if law == "huber" else K_T
        stick = k * speed <= bound
        energy = np.where(stick, 0.5 * k * speed ** 2, bound * speed - bound ** 2 / (2 * k))
        return energy, np.minimum(k * speed, bound)
    if law == "pseudo_huber":
        root = np.sqrt(speed ** 2 + EPS ** 2)
        return bound * (root - EPS), bound * speed / root
    x = K_F * speed / bound
    # log cosh x = log1p(2 sinh²(x/2)) keeps full relative precision for small x
    log_cosh = np.where(x < 20, np.log1p(2 * np.sinh(np.minimum(x, 20) / 2) ** 2),
                        x - math.log(2.0) + np.log1p(np.exp(-2 * np.maximum(x, 20))))
    return bound ** 2 / K_F * log_cosh, bound * np.tanh(x)


# zero slip, then speeds on both sides of every switch: huber stick/slip at μf_n/k_f = 0.06,
# linear at μf_n/k_t = 0.015, the tanh series at sqrt(1e-3) μf_n/k_t ≈ 1.897e-3
SPEEDS = np.array([0.0, 1e-9, 1e-4, 1.8973e-3, 1.8975e-3, 0.01, 0.0149999, 0.0150001, 0.0599999,
                   0.0600001, 0.3, 4.0, 1e4])


def _slips(dim, seed=0):
    """(len(SPEEDS), dim) slip vectors of the speeds SPEEDS in random directions."""
    directions = np.random.default_rng(seed).normal(size=(len(SPEEDS), dim))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    return SPEEDS[:, None] * directions


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("law", FRICTION)
def test_friction_force_closed_form(law, dim):
    u = _slips(dim)
    value, force, _, _ = _friction(law, u, BOUND)
    energy_ref, magnitude_ref = _friction_reference(law, SPEEDS, BOUND)
    rtol = _TANH_RTOL if law == "tanh" else _RTOL
    np.testing.assert_allclose(value, energy_ref, rtol=rtol, atol=0, err_msg=f"{law} dissipation")
    direction = u / np.where(SPEEDS > 0, SPEEDS, 1.0)[:, None]
    expected = -magnitude_ref[:, None] * direction  # opposes the slip
    np.testing.assert_allclose(force, expected, rtol=rtol, atol=1e-300, err_msg=f"{law} force")


@pytest.mark.parametrize("law", FRICTION)
def test_friction_force_bounded_by_coulomb(law):
    for seed in range(3):
        magnitude = np.linalg.norm(_friction(law, _slips(3, seed), BOUND)[1], axis=-1)
        assert np.all(magnitude <= BOUND * (1 + 1e-14)), f"{law}: |f| > μ f_n: {magnitude.max()}"
        # fast slip reaches the Coulomb bound
        assert magnitude[-1] == pytest.approx(BOUND, rel=1e-8)


_HESSIAN_AT_ZERO = {"huber": K_F, "linear": K_T, "pseudo_huber": BOUND / EPS, "tanh": K_F}


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("law", FRICTION)
def test_friction_finite_at_zero_slip_with_stick_stiffness(law, dim):
    value, force, hess, d_bound = (x[0] for x in _friction(law, _slips(dim), BOUND))  # u_s = 0
    assert value == 0.0
    np.testing.assert_array_equal(force, np.zeros(dim))
    assert np.all(np.isfinite(hess)), f"{law}: Hessian at u_s = 0 not finite: {hess}"
    # huber/linear: stick stiffness; pseudo-huber: μ f_n/ε; tanh: its slope k_t
    np.testing.assert_allclose(hess, _HESSIAN_AT_ZERO[law] * np.eye(dim), rtol=_RTOL, atol=0)
    assert d_bound == 0.0, f"{law}: dD/d(μ f_n) at u_s = 0 is {d_bound}"


@pytest.mark.parametrize("law", FRICTION)
def test_friction_hessian_finite_symmetric_and_convex(law):
    h = _friction(law, _slips(3, 5), BOUND)[2]
    assert np.all(np.isfinite(h)), f"{law}: non-finite Hessian"
    np.testing.assert_allclose(h, np.swapaxes(h, -1, -2), rtol=0, atol=1e-9 * np.abs(h).max())
    assert np.all(np.linalg.eigvalsh(h) >= -1e-9 * np.abs(h).max()), law


@pytest.mark.parametrize("law", FRICTION)
def test_friction_finite_at_zero_bound(law):
    u = _slips(3)  # includes u_s = 0
    for bound in (0.0, 1e-300, 1e-13, 1e-11):
        out = _friction(law, u, bound)
        for name, x in zip(("value", "force", "hessian", "d/dbound"), out):
            assert np.all(np.isfinite(x)), f"{law}: {name} not finite at μ f_n = {bound}: {x}"
    # no friction without a normal force
    value, force, _, d_bound = _friction(law, u, 0.0)
    np.testing.assert_array_equal(value, np.zeros(len(u)))
    np.testing.assert_array_equal(force, np.zeros(u.shape))
    # the sensitivity to the bound is at most the slip speed (|∂D/∂(μ f_n)| <= |u_s|)
    assert np.all(np.abs(d_bound) <= SPEEDS * (1 + 1e-12)), (law, d_bound)


@pytest.mark.parametrize("law", [
    "huber", "linear",
    "pseudo_huber", "tanh"])
def test_friction_hessian_vanishes_at_zero_bound(law):
    """With μ f_n = 0 every law is identically zero in u, so its Hessian is zero, at u_s = 0
    too. Otherwise a candidate out of contact (f_n = 0 exactly) whose tangential slip is exactly
    zero (a body falling straight down onto a plane) adds a stick stiffness k_f to the Jacobian
    of the step, and the implicit gradients of a free flight come out wrong."""
    h = _friction(law, _slips(3), 0.0)[2]
    np.testing.assert_array_equal(h, np.zeros((len(SPEEDS), 3, 3)),
                                  err_msg=f"{law}: Hessian at μ f_n = 0")


def test_friction_unknown_law_raises():
    with pytest.raises(ValueError, match="friction law"):
        laws.friction_dissipation(jnp.zeros(()), 1.0, "viscous", K_F, EPS, K_T)


# --- restitution of the damped law -------------------------------------------------------------

MASS = 0.7
CRITICAL = 2.0 * math.sqrt(K_N * MASS)


def _restitution_reference(k_d):
    """e of a point mass on max(0, k x + c ẋ), integrated finely (x penetration, ẋ₀ = 1)."""
    dt, x, v = 1e-6 * math.sqrt(MASS / K_N), 0.0, 1.0
    while True:
        force = K_N * x + k_d * v
        if (force < 0.0 and x > 0.0) or x < 0.0:
            return -v
        v -= force / MASS * dt
        x += v * dt


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.95, 1.0, 2.5])
def test_damping_to_restitution_is_the_damped_law_released_before_the_gap_reopens(fraction):
    k_d = fraction * CRITICAL
    got = float(laws.damping_to_restitution(k_d, K_N, MASS))
    assert got == pytest.approx(_restitution_reference(k_d), rel=2e-4)
    zeta = fraction
    if zeta < 1:   # the closed form of the module docstring
        closed = math.exp(-2 * zeta * math.acos(zeta) / math.sqrt(1 - zeta ** 2))
        assert got == pytest.approx(closed, rel=1e-12)


@pytest.mark.parametrize("e", list(np.linspace(0.05, 0.95, 19)))
def test_restitution_round_trip(e):
    k_d = float(laws.restitution_to_damping(e, K_N, MASS))
    assert k_d > 0.0
    back = float(laws.damping_to_restitution(k_d, K_N, MASS))
    assert back == pytest.approx(e, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("fraction", [0.0, 1e-6, 0.3, 0.999, 1.0, 1.001, 30.0])
def test_damping_round_trip(fraction):
    k_d = fraction * CRITICAL
    e = float(laws.damping_to_restitution(k_d, K_N, MASS))
    assert float(laws.restitution_to_damping(e, K_N, MASS)) == pytest.approx(
        k_d, rel=1e-9, abs=1e-12 * CRITICAL)


def test_restitution_limits():
    assert float(laws.restitution_to_damping(1.0, K_N, MASS)) == 0.0
    assert float(laws.damping_to_restitution(0.0, K_N, MASS)) == 1.0
    # critical damping still releases the mass at e^-2; only infinite damping stops it
    assert float(laws.damping_to_restitution(CRITICAL, K_N, MASS)) == pytest.approx(
        math.exp(-2.0), rel=1e-12)
    assert float(laws.damping_to_restitution(1e6 * CRITICAL, K_N, MASS)) < 1e-12
    with pytest.raises(ValueError, match="restitution must be > 0"):
        laws.restitution_to_damping(0.0, K_N, MASS)


def test_restitution_gradient_is_the_inverse_derivative_and_finite():
    e = 0.4
    k_d = float(laws.restitution_to_damping(e, K_N, MASS))
    slope = float(jax.grad(laws.damping_to_restitution)(k_d, K_N, MASS))
    got = float(jax.grad(laws.restitution_to_damping)(e, K_N, MASS))
    assert got == pytest.approx(1.0 / slope, rel=1e-9)
    assert np.isfinite(float(jax.grad(laws.restitution_to_damping)(0.999, K_N, MASS)))


@pytest.mark.parametrize("fn,args,name", [
    (laws.restitution_to_damping, (0.0, K_N, MASS), "restitution"),
    (laws.restitution_to_damping, (-0.1, K_N, MASS), "restitution"),
    (laws.restitution_to_damping, (1.5, K_N, MASS), "restitution"),
    (laws.restitution_to_damping, (float("nan"), K_N, MASS), "restitution"),
    (laws.restitution_to_damping, (0.5, 0.0, MASS), "stiffness"),
    (laws.restitution_to_damping, (0.5, -K_N, MASS), "stiffness"),
    (laws.restitution_to_damping, (0.5, K_N, 0.0), "mass"),
    (laws.restitution_to_damping, (0.5, K_N, -1.0), "mass"),
    (laws.restitution_to_damping, (0.5, float("inf"), MASS), "stiffness"),
    (laws.damping_to_restitution, (-1.0, K_N, MASS), "damping"),
    (laws.damping_to_restitution, (10.0, 0.0, MASS), "stiffness"),
    (laws.damping_to_restitution, (10.0, K_N, -2.0), "mass"),
    (laws.damping_to_restitution, (10.0, K_N, float("nan")), "mass"),
])
def test_restitution_helpers_reject_bad_input(fn, args, name):
    with pytest.raises(ValueError, match=name):
        fn(*args)


# --- Contact settings -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,field", [
    (dict(normal="hertz"), "normal"),
    (dict(normal=None), "normal"),
    (dict(friction="coulomb"), "friction"),
    (dict(friction=3), "friction"),
    (dict(normal="power", power=1.5), "power"),
    (dict(power=1), "power"),
    (dict(power=-3.0), "power"),
    (dict(power=float("nan")), "power"),
    (dict(power="3"), "power"),
    (dict(power=None), "power"),
    (dict(smooth_width=0.0), "smooth_width"),
    (dict(smooth_width=-1e-3), "smooth_width"),
    (dict(smooth_width=float("nan")), "smooth_width"),
    (dict(smooth_width=float("inf")), "smooth_width"),
    (dict(smooth_width="1e-3"), "smooth_width"),
    (dict(smooth_width=True), "smooth_width"),
    (dict(friction_stiffness=0.0), "friction_stiffness"),
    (dict(friction_stiffness=-1e4), "friction_stiffness"),
    (dict(friction_stiffness=None), "friction_stiffness"),
    (dict(friction_eps=0.0), "friction_eps"),
    (dict(friction_eps=-1e-4), "friction_eps"),
    (dict(friction_eps=[1e-4]), "friction_eps"),
    (dict(power=float("inf")), "power"),
    (dict(coupling="associated"), "coupling"),
    (dict(near_rigid=-1.0), "near_rigid"),
    (dict(near_rigid=float("nan")), "near_rigid"),
    (dict(friction_regularization=-1e-3), "friction_regularization"),
    (dict(friction_regularization=None), "friction_regularization"),
])
def test_contact_settings_reject_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        laws.Contact(**kwargs)


def test_contact_settings_accept_valid_values():
    c = laws.Contact(normal="power", power=2, friction="tanh", friction_stiffness=10,
                     friction_eps=1e-6, smooth_width=np.float64(1e-4))
    assert (c.normal, c.power, c.friction) == ("power", 2, "tanh")
    for normal in laws.NORMAL_LAWS:
        for friction in laws.FRICTION_LAWS:
            laws.Contact(normal=normal, friction=friction)
    assert laws.Contact(power=2.5).power == 2.5
