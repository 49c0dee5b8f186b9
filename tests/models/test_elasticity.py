"""Hyperelastic laws of tetrahedra (`jaxcontact.models.elasticity`): patch tests, closed-form
stresses, the small-strain limit, inverted elements."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact.models import elasticity as el

MU, LAM = el.lame(1e5, 0.45)
LAWS = ("neo_hookean", "stable_neo_hookean", "corotational")
_AXIS = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
_K = np.array([[0, -_AXIS[2], _AXIS[1]], [_AXIS[2], 0, -_AXIS[0]], [-_AXIS[1], _AXIS[0], 0]])
ROTATION = jnp.asarray(np.eye(3) + np.sin(0.7) * _K + (1 - np.cos(0.7)) * _K @ _K)  # Rodrigues


@pytest.fixture(scope="module")
def stress():
    """First Piola-Kirchhoff stress P = ∂Ψ/∂F of each law, jitted once."""
    return {name: jax.jit(jax.grad(el.MATERIALS[name])) for name in LAWS}


def test_lame_parameters_and_their_errors():
    mu, lam = el.lame(1e5, 0.3)
    np.testing.assert_allclose([mu, lam], [1e5 / 2.6, 3e4 / (1.3 * 0.4)])
    np.testing.assert_allclose(el.lame_array(1e5, 0.3), (mu, lam))
    with pytest.raises(ValueError, match="poisson_ratio must be in"):
        el.lame(1e5, 0.5)
    with pytest.raises(ValueError, match="youngs_modulus"):
        el.lame(-1.0, 0.3)


def test_deformation_gradient_of_an_affine_map_is_its_matrix():
    rest = jnp.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]) * 0.1 + 0.3
    a = jnp.array([[1.2, 0.1, 0.0], [0.0, 0.9, 0.2], [0.1, 0.0, 1.1]])
    current = rest @ a.T + jnp.array([[1.0, -2.0, 0.5]])
    inverse = jnp.linalg.inv(el.edge_matrix(rest))
    np.testing.assert_allclose(el.deformation_gradient(current, inverse), a, atol=1e-12)


@pytest.mark.parametrize("name", LAWS)
def test_rigid_motions_have_zero_energy_and_stress(name, stress):
    for F in (jnp.eye(3), ROTATION):
        assert abs(float(el.MATERIALS[name](F, MU, LAM))) < 1e-9 * MU
        np.testing.assert_allclose(stress[name](F, MU, LAM), 0.0, atol=1e-9 * MU)


@pytest.mark.parametrize("s", [1.3, 0.8])
def test_uniaxial_stretch_gives_the_closed_form_stress(s, stress):
    """F = diag(s, 1, 1): P from the laws' closed forms (P = ∂Ψ/∂F)."""
    F = jnp.diag(jnp.array([s, 1.0, 1.0]))
    lam_snh = LAM + MU
    alpha = 1 + MU / lam_snh
    expected = {
        # P = μ(F − F⁻ᵀ) + λ log J F⁻ᵀ
        "neo_hookean": (MU * (s - 1 / s) + LAM * np.log(s) / s, LAM * np.log(s)),
        # P = μF + λ'(J − α) cof F, cof diag(s, 1, 1) = diag(1, s, s)
        "stable_neo_hookean": (MU * s + lam_snh * (s - alpha), MU + lam_snh * (s - alpha) * s),
        # R = I for a symmetric positive F: P = 2μ(F − I) + λ tr(F − I) I
        "corotational": (2 * MU * (s - 1) + LAM * (s - 1), LAM * (s - 1)),
    }
    for name, (p11, p22) in expected.items():
        P = np.asarray(stress[name](F, MU, LAM))
        np.testing.assert_allclose(np.diag(P), [p11, p22, p22], rtol=1e-9)
        np.testing.assert_allclose(P - np.diag(np.diag(P)), 0.0, atol=1e-9 * MU)


@pytest.mark.parametrize("name", LAWS)
def test_small_strain_limit_is_linear_elasticity_rotated_or_not(name):
    rng = np.random.default_rng(1)
    h = rng.normal(size=(3, 3)) * 1e-4
    eps = 0.5 * (h + h.T)
    linear = MU * np.sum(eps * eps) + 0.5 * LAM * np.trace(eps) ** 2
    for R in (jnp.eye(3), ROTATION):
        value = float(el.MATERIALS[name](R @ (jnp.eye(3) + eps), MU, LAM))
        np.testing.assert_allclose(value, linear, rtol=1e-3)


@pytest.mark.parametrize("name", ["neo_hookean", "stable_neo_hookean"])
def test_compressing_through_inversion_stays_finite_and_keeps_rising(name):
    """F = diag(s, 1, 1) from s = 1 down to s = -0.5 (inverted): finite energy and stress, and
    the energy rises all the way (a barrier, not NaN)."""
    law = el.MATERIALS[name]
    s = jnp.linspace(1.0, -0.5, 61)
    energy = jax.vmap(lambda v: law(jnp.diag(jnp.stack([v, 1.0, 1.0])), MU, LAM))(s)
    grads = jax.vmap(jax.grad(lambda v: law(jnp.diag(jnp.stack([v, 1.0, 1.0])), MU, LAM)))(s)
    assert bool(jnp.all(jnp.isfinite(energy))) and bool(jnp.all(jnp.isfinite(grads)))
    assert bool(jnp.all(jnp.diff(energy) > 0))


def test_polar_rotation_is_orthogonal_and_smooth_at_the_identity():
    F = ROTATION @ jnp.array([[1.3, 0.2, 0.0], [0.2, 0.9, 0.1], [0.0, 0.1, 1.1]])
    R = el.polar_rotation(F)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(R, ROTATION, atol=1e-12)
    S = R.T @ F
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    # the SVD's derivative is undefined at repeated singular values; this one is not
    hessian = jax.hessian(lambda F: el.corotational(F, MU, LAM))(jnp.eye(3))
    assert bool(jnp.all(jnp.isfinite(hessian)))


def test_hyperelastic_laws_keep_volume_under_large_stretch_and_corotational_does_not():
    """Thesis Sec. 7 / claim 26: stretched to s along x with free sides (the side stretch t
    minimizes Ψ(diag(s, t, t))), Stable Neo-Hookean keeps J = s t² near 1 as ν → 0.5, while
    co-rotational linear elasticity loses volume (J = 0.52 at s = 2, ν = 0.49)."""
    from scipy.optimize import minimize_scalar

    def volume(name, s, nu):
        mu, lam = el.lame(1e5, nu)
        energy = jax.jit(lambda t: el.MATERIALS[name](jnp.diag(jnp.stack([s, t, t])), mu, lam))
        side = minimize_scalar(lambda t: float(energy(t)), bounds=(0.3, 1.2), method="bounded",
                               options={"xatol": 1e-10}).x
        return s * side ** 2

    for s in (1.5, 2.0):
        assert abs(volume("stable_neo_hookean", s, 0.49) - 1.0) < 0.015
        assert abs(volume("neo_hookean", s, 0.49) - 1.0) < 0.015
        assert volume("corotational", s, 0.49) < 0.86
    # small strain: every law has the linear Poisson contraction t ≈ 1 - ν (s - 1)
    for name in LAWS:
        np.testing.assert_allclose(volume(name, 1.001, 0.3), 1.001 * (1 - 0.3e-3) ** 2,
                                   rtol=1e-6)
