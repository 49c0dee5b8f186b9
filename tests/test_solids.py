"""FEM solids (`Scene.add_solid`, `models/solids.py`): momentum, relaxation to the rest shape,
rotation-invariant viscosity (ADD Sec. 5.2), gradients, errors. (The laws themselves:
tests/test_elasticity.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

REST = (0.12, 0.1, 0.1)


@pytest.fixture(scope="module")
def cube():
    """A 2x2x2-cell cube (48 tetrahedra) in zero gravity, and one compiled 80-step rollout
    of (model, state)."""
    verts, tets = jc.meshes.box_tets(REST, (2, 2, 2))
    scene = jc.Scene(dt=0.005, gravity=(0.0, 0.0, 0.0))
    scene.add_solid(verts, tets, density=1000.0, youngs_modulus=1e4, poisson_ratio=0.3)
    model, state = scene.build()
    run = jax.jit(lambda m, s: jc.rollout(m, s, steps=80, return_info=True))
    return model, state, run


def momenta(model, state):
    m = model.particle.mass[:, None]
    linear = jnp.sum(m * state.particle_vel, 0)
    centre = jnp.sum(m * state.particle_pos, 0) / jnp.sum(m)
    angular = jnp.sum(m * jnp.cross(state.particle_pos - centre[None, :], state.particle_vel), 0)
    return linear, angular


def test_lumped_masses_sum_to_the_solid_mass(cube):
    model, _, _ = cube
    np.testing.assert_allclose(jnp.sum(model.particle.mass), 1000.0 * np.prod(REST), rtol=1e-12)
    assert model.solid.size == 48


def settle(model, run, state, viscosity):
    """(model with viscosity η everywhere, its final state after the rollout), every step
    converged."""
    m = model.replace(solid=model.solid.replace(
        viscosity=jnp.full_like(model.solid.viscosity, viscosity)))
    final, _, info = run(m, state)
    assert bool(jnp.all(info.converged))
    return m, final


def edge_strain(model, rest, pos):
    """The largest |l/l₀ − 1| over the tetrahedra's edges (0 for any rigid motion)."""
    tets = np.asarray(model.solid.tets)
    a, b = (tets[:, [0, 0, 0, 1, 1, 2]].reshape(-1), tets[:, [1, 2, 3, 2, 3, 3]].reshape(-1))
    length = np.linalg.norm(np.asarray(pos)[..., a, :] - np.asarray(pos)[..., b, :], axis=-1)
    rest = np.linalg.norm(np.asarray(rest)[a] - np.asarray(rest)[b], axis=-1)
    return np.max(np.abs(length / rest - 1.0), axis=-1)


def test_a_stretched_solid_keeps_its_momentum_and_viscosity_returns_it_to_rest(cube):
    model, state, run = cube
    stretched = state.replace(particle_pos=state.particle_pos * jnp.array([[1.1, 1.0, 1.0]]),
                              particle_vel=state.particle_vel + jnp.array([[0.3, 0.0, 0.1]]))
    first = edge_strain(model, state.particle_pos, stretched.particle_pos)
    ends = []
    for viscosity in (0.0, 20.0):
        m, final = settle(model, run, stretched, viscosity)
        # internal forces only: linear momentum is exact
        np.testing.assert_allclose(momenta(m, final)[0], momenta(m, stretched)[0],
                                   atol=1e-12)
        ends.append(edge_strain(model, state.particle_pos, final.particle_pos))
    # the elastic forces pull it back to its rest shape (up to a rigid motion): implicit
    # Euler's own damping settles it slowly (0.10 -> 1.4e-3 in 0.4 s), viscosity fast (4e-5)
    assert first > 0.09 and ends[0] < first / 20
    assert ends[1] < first / 500 and ends[1] < ends[0] / 10


def test_viscosity_does_not_slow_a_rigid_spin(cube):
    """ADD Sec. 5.2: viscosity on the Green strain rate is rotation invariant. A rigidly
    spinning solid keeps the same angular momentum with η = 20 Pa s as with η = 0, to what
    damping its small centrifugal stretch costs."""
    model, state, run = cube
    omega = jnp.array([0.0, 0.0, 4.0])
    spin = state.replace(particle_vel=jnp.cross(jnp.broadcast_to(omega, state.particle_pos.shape),
                                                state.particle_pos))
    ends = []
    for viscosity in (0.0, 20.0):
        m, final = settle(model, run, spin, viscosity)
        ends.append(float(momenta(m, final)[1][2]))
    start = float(momenta(model, spin)[1][2])
    # (a damper of sym(Ḟ) is not rotation invariant: once an element has turned, F = R,
    # sym(Ω R) ≠ 0 resists the spin itself; the Green strain rate is zero for any rigid
    # motion. Measured: 0.2 % apart, from damping the centrifugal stretch)
    assert abs(ends[1] - ends[0]) < 1e-2 * start
    assert ends[0] > 0.9 * start


def test_add_solid_rejects_bad_input():
    verts, tets = jc.meshes.box_tets((0.1, 0.1, 0.1), (1, 1, 1))
    scene = jc.Scene()
    flipped = tets.copy()
    flipped[2, [0, 1]] = flipped[2, [1, 0]]
    with pytest.raises(ValueError, match="element 2 is inverted"):
        scene.add_solid(verts, flipped, density=1e3, youngs_modulus=1e4, poisson_ratio=0.3)
    with pytest.raises(ValueError, match="material must be one of"):
        scene.add_solid(verts, tets, density=1e3, youngs_modulus=1e4, poisson_ratio=0.3,
                        material="rubber")
    with pytest.raises(ValueError, match="poisson_ratio must be in"):
        scene.add_solid(verts, tets, density=1e3, youngs_modulus=1e4, poisson_ratio=0.5)
    with pytest.raises(ValueError, match="density"):
        scene.add_solid(verts, tets, density=0.0, youngs_modulus=1e4, poisson_ratio=0.3)
    with pytest.raises(ValueError, match="vertex 8 belongs to no tetrahedron"):
        scene.add_solid(np.vstack([verts, [[1.0, 1.0, 1.0]]]), tets, density=1e3,
                        youngs_modulus=1e4, poisson_ratio=0.3)


def test_gradient_with_respect_to_youngs_modulus_matches_finite_differences(cube):
    """The implicit reverse-mode gradient of the final x extent of a stretched solid with
    respect to E, against central differences and forward mode."""
    model, state, _ = cube
    stretched = state.replace(particle_pos=state.particle_pos * jnp.array([[1.1, 1.0, 1.0]]))

    def extent(log_e, m):
        m = m.replace(solid=m.solid.replace(
            youngs_modulus=jnp.full_like(m.solid.youngs_modulus, jnp.exp(log_e))))
        final, _ = jc.rollout(m, stretched, steps=30)
        x = final.particle_pos[:, 0]
        return jnp.max(x) - jnp.min(x)

    x0 = jnp.log(1e4)
    reverse = float(jax.jit(jax.grad(extent))(x0, model))
    forward = float(jax.jit(jax.jacfwd(extent))(x0, jc.optim.forward_mode(model)))
    run = jax.jit(extent)
    h = 1e-5
    central = (float(run(x0 + h, model)) - float(run(x0 - h, model))) / (2 * h)
    np.testing.assert_allclose(reverse, central, rtol=1e-5)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10)
