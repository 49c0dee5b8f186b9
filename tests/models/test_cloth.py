"""Cloth (`Scene.add_cloth`, `models/cloth.py`): the membrane's closed-form stress and patch
test, plate bending exact for quadratic surfaces and a cantilever against Euler-Bernoulli, a hanging strip's sag against its nonlinear
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


def bent_sheet(verts, tris, surface, nu=0.0):
    """Every triangle's bending energy with its vertices lifted onto z = surface(x, y), and
    the model's cloth (D = 1)."""
    scene = jc.Scene()
    scene.add_cloth(verts, tris, density=1.0, stretch_stiffness=1.0, bend_stiffness=1.0,
                    poisson_ratio=nu)
    model, _ = scene.build()
    stencils, interior = cloth.stencil_table(model.cloth)
    p = cloth.bending_params(model.cloth)
    lifted = verts.copy()
    lifted[:, 2] = surface(verts[:, 0], verts[:, 1])
    shape = jax.vmap(cloth.shape_operator)(jnp.asarray(lifted)[stencils], p["interior"],
                                           p["map"], p["rest_angle"])
    return np.asarray(0.5 * jnp.sum(p["stiffness"] * shape * shape, 1)), model.cloth, interior


@pytest.mark.parametrize("nu", [0.0, 0.3])
def test_bending_is_exact_for_quadratic_surfaces_on_any_mesh(nu):
    """Curvature read from edge angles: a quadratic surface z = ½ xᵀ S x, in any direction,
    gives every interior triangle the plate's D/2 A ((1 − ν)|S|² + ν (tr S)²), on the grid
    and on a jittered (unstructured) copy of it."""
    verts, tris = jc.meshes.grid((1.0, 1.0), (8, 8))
    jittered = verts.copy()
    inner = np.all(np.abs(verts[:, :2]) < 0.5 - 1e-9, 1)
    jittered[inner, :2] += 0.03 * np.random.default_rng(0).uniform(-1, 1, (inner.sum(), 2))
    c, s = np.cos(0.4), np.sin(0.4)
    rotation = np.array([[c, -s], [s, c]])
    for mesh in (verts, jittered):
        for S in ([[1.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]],
                  rotation @ np.diag([1.0, -0.5]) @ rotation.T):
            S = 1e-4 * np.asarray(S)         # small: the angles are linear in the heights
            energy, model_cloth, interior = bent_sheet(
                mesh, tris, lambda x, y: 0.5 * (S[0, 0] * x * x + 2 * S[0, 1] * x * y
                                                + S[1, 1] * y * y), nu)
            exact = 0.5 * np.asarray(model_cloth.area) * (
                (1 - nu) * np.sum(S * S) + nu * np.trace(S) ** 2)
            full = interior.all(1)
            np.testing.assert_allclose(energy[full], exact[full], rtol=1e-5)
            # a free boundary edge relaxes its triangle: never stiffer than the plate
            assert np.all(energy[~full] <= exact[~full] * (1 + 1e-5))


def test_bending_stencils_pair_each_edge_with_the_far_corner_across_it():
    verts, tris = jc.meshes.grid((1.0, 1.0), (3, 2))
    stencils = cloth.bending_stencils(tris)
    # interior edges of an nx x ny grid: (nx-1) ny + nx (ny-1) + nx ny diagonals, two sides
    assert np.sum(stencils[:, 3:] >= 0) == 2 * (2 * 2 + 3 * 1 + 6)
    for t, row in enumerate(stencils):
        for i in range(3):
            if row[3 + i] >= 0:
                edge = {row[(i + 1) % 3], row[(i + 2) % 3]}
                (u,) = [u for u, tri in enumerate(tris) if u != t and edge <= set(tri)]
                assert set(tris[u]) == edge | {row[3 + i]}
    with pytest.raises(ValueError, match="belongs to 3 triangles"):
        cloth.bending_stencils(np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]]))


def test_a_curved_rest_shape_has_zero_bending_energy_and_force():
    """A sheet built on a cylinder rests there; rotating and moving it keeps it at rest."""
    verts, tris = jc.meshes.grid((0.6, 0.4), (6, 4))
    u = verts[:, 0]
    curved = np.stack([np.sin(u), verts[:, 1], 1 - np.cos(u)], -1)
    scene = jc.Scene()
    scene.add_cloth(curved, tris, density=1.0, stretch_stiffness=10.0, bend_stiffness=1.0)
    model, _ = scene.build()
    moved = jnp.asarray(curved @ ROTATION.T + np.array([0.3, -0.2, 1.0]))
    energy, force = jax.jit(jax.value_and_grad(lambda x: cloth.strain_energy(model, x)))(
        moved)
    assert abs(float(energy)) < 1e-20
    assert float(jnp.max(jnp.abs(force))) < 1e-9


@pytest.mark.slow
def test_a_cantilever_plate_converges_to_euler_bernoulli():
    """Two strips (16 x 1 and 32 x 2 cells, 0.5 m x 5 cm, ν = 0) clamped at one end, in one
    scene, sag under their weight; one implicit step of 100 s is their static equilibrium.
    The tip deflection over qL⁴/(8D) is 1.128 and 1.063 (design note 29): above 1, the error
    halves with the cell size, and the Richardson extrapolation meets Euler-Bernoulli."""
    length, width, density, rigidity, g = 0.5, 0.05, 0.1, 0.5, 9.81
    scene = jc.Scene(dt=100.0, gravity=(0.0, 0.0, -g))
    tips = []
    for k, cells in enumerate((16, 32)):
        h = length / cells
        verts, tris = jc.meshes.grid((length + h, width), (cells + 1, cells // 16))
        verts = verts + np.array([(length + h) / 2 - h, 0.2 * k, 0.0])
        index = scene.add_cloth(verts, tris, density=density, stretch_stiffness=1e4,
                                bend_stiffness=rigidity)
        for p in index[verts[:, 0] < 1e-9]:          # two rows of nodes clamp the slope
            scene.attach(int(p), -1, stiffness=1e8)
        tips.append(index[np.isclose(verts[:, 0], length)])
    # (one step of 100 s: H's condition number ~1e16 is past conjugate gradients in float64,
    # whose directions stall at 2e-4 m/s; the direct solve converges in 7 iterations)
    model, state = scene.build(solver=jc.Newton(iterations=30, linear="dense"))
    final, _, info = jax.jit(lambda s: jc.rollout(model, s, steps=1, return_info=True))(state)
    assert bool(info.converged.all())
    ratio = np.array([-float(jnp.mean(final.particle_pos[t, 2])) for t in tips]) / (
        density * g * length ** 4 / (8 * rigidity))
    assert np.all(ratio > 1.0)
    assert 1.7 < (ratio[0] - 1) / (ratio[1] - 1) < 2.3
    np.testing.assert_allclose(2 * ratio[1] - ratio[0], 1.0, atol=0.01)


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


@pytest.mark.slow
def test_gradients_with_respect_to_the_cloth_parameters_match_finite_differences():
    """A 3 x 2-cell sheet clamped along one edge, sheared and sagging for 10 steps: the
    implicit reverse-mode gradient of a scalar of its final shape with respect to (log k,
    log D, ν, log ρ_A, c), against central differences and forward mode. ν enters the
    membrane and the bending's free-edge elimination (a batched 3x3 solve)."""
    verts, tris = jc.meshes.grid((0.3, 0.2), (3, 2))
    scene = jc.Scene(dt=0.01, gravity=(0.0, 0.0, -9.81))
    index = scene.add_cloth(verts, tris, density=0.2, stretch_stiffness=50.0,
                            bend_stiffness=1e-3, poisson_ratio=0.3, damping=0.05)
    for p in index[np.isclose(verts[:, 0], -0.15)]:
        scene.attach(int(p), -1, stiffness=1e5)
    model, state = scene.build()
    state = state.replace(particle_vel=state.particle_vel.at[:, 1].set(0.3 * verts[:, 0]))

    def shape(theta, m):
        full = lambda v: jnp.full_like(m.cloth.density, v)   # noqa: E731
        m = m.replace(cloth=m.cloth.replace(
            stretch_stiffness=full(jnp.exp(theta[0])), bend_stiffness=full(jnp.exp(theta[1])),
            poisson_ratio=full(theta[2]), density=full(jnp.exp(theta[3])),
            damping=full(theta[4])))
        x = jc.rollout(m, state, steps=10)[0].particle_pos
        return jnp.mean(x[:, 2]) + jnp.max(x[:, 1]) - jnp.min(x[:, 1])

    x0 = jnp.array([jnp.log(50.0), jnp.log(1e-3), 0.3, jnp.log(0.2), 0.05])
    reverse = np.asarray(jax.jit(jax.grad(shape))(x0, model))
    forward = np.asarray(jax.jit(jax.jacfwd(shape))(x0, jc.optim.forward_mode(model)))
    run = jax.jit(shape)
    h = 1e-5
    central = np.array([(float(run(x0.at[i].add(h), model))
                         - float(run(x0.at[i].add(-h), model))) / (2 * h) for i in range(5)])
    assert np.all(np.abs(central) > 1e-5)           # each parameter matters here
    np.testing.assert_allclose(reverse, central, rtol=1e-6)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10)


@pytest.mark.slow
def test_the_marble_on_the_soft_sheet_converges_on_every_step():
    """Issue 63: Qiao's marble on the soft sheet (`jc.scenes.marble_on_sheet`, light nodes on
    stiff contacts: k_n Δt² / m ~ 9,700 at Δt = 40 ms) settles for 50 steps, then is pushed
    for 50 by a small and by a large horizontal force (the large one drives it off the
    sheet). Every step converges (v1: 22-76 % once the marble moved), and the pushes move the
    marble their way."""
    model, flat = jc.scenes.marble_on_sheet().build(solver=jc.Newton(), dtype=jnp.float64)
    settled, _, info = jax.jit(lambda s: jc.rollout(model, s, steps=50, return_info=True))(flat)
    assert bool(jnp.all(info.converged))
    assert -0.5 < float(jnp.min(settled.particle_pos[:, 2])) < 0.0     # the sheet sags

    def pushed(force):
        f = jnp.zeros((50, model.n_body, 3)).at[:, 0, :2].set(force)
        controls = jc.Control(force=f, torque=jnp.zeros_like(f), motor=jnp.zeros((50, 0)))
        return jc.rollout(model, settled, controls, steps=50, return_info=True)

    for force in ((0.1, 0.05), (1.0, 0.5)):
        final, _, info = jax.jit(pushed)(jnp.asarray(force))
        assert bool(jnp.all(info.converged)), f"push {force}"
        moved = np.asarray(final.pos[0, :2] - settled.pos[0, :2])
        assert np.dot(moved, force) > 0.0
