"""Cloth (`Scene.add_cloth`, `models/cloth.py`): the membrane's closed-form stress and patch
test, bending calibrated against a bent plate, a hanging strip's sag against its nonlinear
closed form, lumped masses, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

import jaxcontact as jc
from jaxcontact.models import cloth

_AXIS = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
_K = np.array([[0, -_AXIS[2], _AXIS[1]], [_AXIS[2], 0, -_AXIS[0]], [-_AXIS[1], _AXIS[0], 0]])
ROTATION = np.eye(3) + np.sin(0.7) * _K + (1 - np.cos(0.7)) * _K @ _K     # Rodrigues


def triangle_energy(corners, rest, k, nu):
    rest_inverse = jnp.linalg.inv(jnp.asarray(cloth.rest_frame(rest)))
    mu, lam = cloth.membrane_lame(k, nu)
    area = 0.5 * np.linalg.norm(np.cross(rest[1] - rest[0], rest[2] - rest[0]))
    return area * cloth.stvk_membrane(cloth.deformation_gradient(corners, rest_inverse), mu, lam)


REST = np.array([[0.1, 0.2, 0.3], [0.5, 0.25, 0.3], [0.2, 0.6, 0.35]])


def test_a_rigidly_moved_triangle_has_zero_energy_and_force():
    force = jax.grad(triangle_energy)
    for nu in (0.0, 0.3):
        moved = REST @ ROTATION.T + np.array([1.0, -2.0, 0.5])
        assert abs(float(triangle_energy(jnp.asarray(moved), REST, 100.0, nu))) < 1e-12
        np.testing.assert_allclose(force(jnp.asarray(moved), REST, 100.0, nu), 0.0, atol=1e-11)


@pytest.mark.parametrize("nu", [0.0, 0.3])
def test_uniaxial_stretch_of_a_square_gives_the_closed_form_membrane_force(nu):
    """A unit square of 2 triangles stretched by s along x with its width held: the
    St. Venant-Kirchhoff membrane force per width is s (λ + 2μ) (s² − 1)/2."""
    verts, tris = jc.meshes.grid((1.0, 1.0), (1, 1))
    k, s = 50.0, 1.2
    mu, lam = cloth.membrane_lame(k, nu)

    def energy(x_stretch):
        x = jnp.asarray(verts) * jnp.array([[x_stretch, 1.0, 1.0]])
        return sum(triangle_energy(x[t], verts[t], k, nu) for t in tris)

    # dU/ds is the force on the moved edge times its displacement rate: (force per width)·1
    np.testing.assert_allclose(jax.grad(energy)(s), s * (lam + 2 * mu) * (s * s - 1) / 2,
                               rtol=1e-12)


def test_dihedral_angle_is_signed_and_ignores_triangle_size():
    flat = jnp.array([[0.0, 0, 0], [1, 0, 0], [0.3, 1, 0], [0.6, -2, 0]])
    assert abs(float(cloth.dihedral_angle(flat))) < 1e-15
    for angle in (0.4, -1.1, 2.5):
        # the second triangle rotated by `angle` about the shared edge (the x-axis)
        far = jnp.array([0.6, -2 * np.cos(angle), -2 * np.sin(angle)])
        folded = flat.at[3].set(far)
        np.testing.assert_allclose(cloth.dihedral_angle(folded), angle, atol=1e-12)


def cylinder_energy_ratio(verts, tris, angle, radius=2.0):
    """Bending energy of a flat sheet wrapped on a cylinder of `radius` with its axis at
    `angle` to y, over the plate's D/2 · A / R² (D = 1)."""
    hinges, pairs = cloth.hinges(tris)
    area = jc.meshes.tri_areas(verts, tris)
    weight = np.sum((verts[hinges[:, 1]] - verts[hinges[:, 0]]) ** 2, -1) / (
        area[pairs[:, 0]] + area[pairs[:, 1]])
    u = verts[:, 0] * np.cos(angle) + verts[:, 1] * np.sin(angle)
    w = -verts[:, 0] * np.sin(angle) + verts[:, 1] * np.cos(angle)
    bent = np.stack([radius * np.sin(u / radius), w, radius * (1 - np.cos(u / radius))], -1)
    theta = np.asarray(jax.vmap(cloth.dihedral_angle)(jnp.asarray(bent[hinges])))
    return 0.5 * np.sum(weight * theta ** 2) / (0.5 * np.sum(area) / radius ** 2)


def test_bending_a_sheet_into_a_cylinder_stores_the_plate_energy():
    verts, tris = jc.meshes.grid((1.0, 1.0), (24, 24))
    for angle in (0.0, np.pi / 2):
        # the boundary's missing hinges are the only shortfall: 1 - 1/24
        np.testing.assert_allclose(cylinder_energy_ratio(verts, tris, angle), 1 - 1 / 24,
                                   rtol=1e-3)
    # (about the diagonal the right-triangle grid is stiffer: the documented mesh dependence)
    assert 1.2 < cylinder_energy_ratio(verts, tris, np.pi / 4) < 1.6


def test_hinges_pair_each_interior_edge_with_its_two_opposite_corners():
    verts, tris = jc.meshes.grid((1.0, 1.0), (3, 2))
    hinges, pairs = cloth.hinges(tris)
    # interior edges of an nx x ny grid: (nx-1) ny + nx (ny-1) + nx ny diagonals
    assert len(hinges) == 2 * 2 + 3 * 1 + 6
    for (a, b, c, d), (t1, t2) in zip(hinges, pairs):
        assert {a, b, c} == set(tris[t1]) and {a, b, d} == set(tris[t2])
    with pytest.raises(ValueError, match="belongs to 3 triangles"):
        cloth.hinges(np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]]))


@pytest.fixture(scope="module")
def strip():
    """A strip (0.1 x 1 m, 10 rows) hanging from its pinned top edge, quasi-static steps
    (dt = 1 s), and its particle indices."""
    verts, tris = jc.meshes.grid((0.1, 1.0), (1, 10))
    verts = np.stack([verts[:, 0], np.zeros(len(verts)), verts[:, 1] - 0.5], -1)
    scene = jc.Scene(dt=1.0, gravity=(0.0, 0.0, -9.81))
    index = scene.add_cloth(verts, tris, density=0.2, stretch_stiffness=100.0,
                            bend_stiffness=0.0)
    for p in index[np.isclose(verts[:, 2], 0.0)]:
        scene.attach(int(p), -1, stiffness=1e7)
    model, state = scene.build()
    return model, state, index[np.isclose(verts[:, 2], -1.0)]


def test_lumped_masses_add_up_to_the_cloth_and_follow_its_density(strip):
    model, _, _ = strip
    np.testing.assert_allclose(jnp.sum(model.particle_masses), 0.2 * 0.1, rtol=1e-12)
    assert float(jnp.sum(model.particle.mass)) == 0.0       # no point masses of their own
    heavier = model.replace(cloth=model.cloth.replace(density=model.cloth.density * 3))
    np.testing.assert_allclose(heavier.particle_masses, 3 * model.particle_masses, rtol=1e-12)


def test_a_hanging_strip_stretches_by_its_nonlinear_closed_form(strip):
    """Each cross-section carries the weight below it: with ν = 0 the membrane force per
    width is k (1 + ε)(ε + ε²/2) = ρ_A g (L − s), and the strip lengthens by ∫ε ds. The
    linear answer ρ_A g L² / (2k) is 1.9 % larger: the test tells them apart."""
    model, state, bottom = strip
    final, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=6, return_info=True))(
        model, state)
    assert bool(jnp.all(info.converged))
    k, weight, length = 100.0, 0.2 * 9.81, 1.0
    strain = (lambda s: brentq(lambda e: k * (1 + e) * (e + e * e / 2) - weight * (length - s),
                               0.0, 1.0))
    expected = quad(strain, 0.0, length)[0]
    sag = -float(jnp.mean(final.particle_pos[bottom, 2])) - length
    np.testing.assert_allclose(sag, expected, rtol=2e-4)
    assert abs(sag - weight * length ** 2 / (2 * k)) > 50 * abs(sag - expected)


def test_bad_cloth_input_is_rejected_by_name():
    verts, tris = jc.meshes.grid((1.0, 1.0), (2, 2))
    scene = jc.Scene()
    good = {"density": 0.1, "stretch_stiffness": 100.0, "bend_stiffness": 1e-3}
    for name, value in (("density", 0.0), ("stretch_stiffness", -1.0),
                        ("bend_stiffness", -1e-3), ("damping", -1.0), ("poisson_ratio", 0.5)):
        with pytest.raises(ValueError, match=name):
            scene.add_cloth(verts, tris, **{**good, name: value})
    flat = tris.copy()
    flat[3] = (0, 1, 2)              # three collinear vertices along the grid's first column
    with pytest.raises(ValueError, match="element 3 is degenerate"):
        scene.add_cloth(verts, flat, **good)
    with pytest.raises(ValueError, match="vertex 9 belongs to no triangle"):
        scene.add_cloth(np.concatenate([verts, [[5.0, 5.0, 5.0]]]), tris, **good)


def test_the_membrane_rows_restate_its_energy():
    """Dual solves the membrane through its rows: their energy is the St. Venant-Kirchhoff
    energy plus Δt times the damping's, for any F and Ḟ."""
    key = jax.random.split(jax.random.PRNGKey(3), 2)
    F = jnp.eye(3, 2) + 0.3 * jax.random.normal(key[0], (3, 2))
    rate = jax.random.normal(key[1], (3, 2))
    mu, lam = cloth.membrane_lame(80.0, 0.3)
    area, damping, dt = 0.02, 0.5, 0.01
    rows = cloth.membrane_rows(F, rate, mu, lam, damping, area, dt)
    strain_rate = 0.5 * (rate.T @ F + F.T @ rate)
    expected = area * (cloth.stvk_membrane(F, mu, lam)
                       + dt * damping * jnp.sum(strain_rate * strain_rate))
    np.testing.assert_allclose(sum(g.energy() for g in rows), expected, rtol=1e-13)
