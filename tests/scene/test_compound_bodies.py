"""Compound bodies: a body with several geoms, and geoms placed off the centre of mass
(`Scene.add_body`, `Scene.add_geom`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.models.contacts import contact_rows

G = 9.81
K = 1e5
STEPS = 60


def _dumbbell(scene, x=0.0, z=0.3, radius=0.05, half=0.2, mass=1.0, quat=(1.0, 0, 0, 0)):
    """A body with two spheres at ±half along its x axis (world x at quat = identity)."""
    body = scene.add_body(mass, (0.01, 0.02, 0.02), pos=(x, 0.0, z), quat=quat)
    for side in (-1.0, 1.0):
        scene.add_geom(body, "sphere", radius=radius, pos=(x + side * half, 0.0, z))
    return body


@pytest.fixture(scope="module")
def run():
    return jax.jit(lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True))


@pytest.fixture(scope="module")
def resting(run):
    """A dumbbell (two spheres at ±0.2 m along x) and, 1 m away, a body turned 90 degrees about
    x with one sphere 0.1 m below its centre of mass, settled on the ground: one program for
    both rest heights (the bodies never meet)."""
    scene = jc.Scene(dt=0.01, stiffness=K, damping=50.0)
    scene.add_plane()
    _dumbbell(scene, z=0.05)
    c, r = np.sqrt(0.5), 0.05
    body = scene.add_body(2.0, (0.02, 0.02, 0.02), pos=(1.0, 0.0, 0.3), quat=(c, c, 0, 0))
    scene.add_geom(body, "sphere", radius=r, pos=(1.0, 0.0, 0.2))
    model, state = scene.build()
    final, _, infos = run(model, state)
    return model, final, infos


def test_dumbbell_rests_on_both_spheres_at_the_closed_form_height(resting):
    model, final, infos = resting
    assert model.n_body == 2 and len(model.geom.shape) == 3
    np.testing.assert_array_equal(model.geom.body, [0, 0, 1])
    assert bool(jnp.all(infos.converged))
    # each sphere carries m g / 2 on the linear penalty: depth m g / (2 k)
    np.testing.assert_allclose(final.pos[0, 2], 0.05 - G / (2 * K), atol=2e-6)
    np.testing.assert_allclose(final.ang_vel[0], 0.0, atol=1e-6)
    rows = contact_rows(model, final)
    touching = np.asarray(rows.used & (rows.gap < 0))
    assert touching.sum() == 3
    # the dumbbell's two contacts are its body's, not its geoms'
    assert sorted(np.asarray(rows.body_a)[touching].tolist()) == [0, 0, 1]


def test_geom_below_a_rotated_body_sets_its_rest_height(resting):
    """The sphere 0.1 m below the centre of mass of the turned body (`resting`): the world
    offset given to add_geom is kept through the body frame."""
    model, final, infos = resting
    np.testing.assert_allclose(model.geom.pos[2], [0.0, -0.1, 0.0], atol=1e-12)
    assert bool(jnp.all(infos.converged))
    np.testing.assert_allclose(final.pos[1, 2], 0.05 + 0.1 - 2.0 * G / K, atol=2e-6)


def test_geoms_of_one_body_never_collide(run):
    """Two overlapping spheres and a box on one body in free fall: no internal contact, so
    the body falls at g without spinning."""
    scene = jc.Scene(dt=0.01)
    body = scene.add_body(1.0, (0.01, 0.01, 0.01), pos=(0.0, 0.0, 1.0))
    scene.add_geom(body, "sphere", radius=0.1, pos=(0.05, 0.0, 1.0))
    scene.add_geom(body, "sphere", radius=0.1, pos=(-0.05, 0.0, 1.0))
    scene.add_geom(body, "box", half_size=0.08, pos=(0.0, 0.0, 1.0))
    model, state = scene.build()
    final, _, _ = run(model, state)
    np.testing.assert_allclose(final.vel[0], [0.0, 0.0, -G * STEPS * 0.01], rtol=1e-9)
    np.testing.assert_allclose(final.ang_vel[0], 0.0, atol=1e-12)


# both slow (a 25 s compile each); CI checks compound contact against closed forms above
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["all_pairs", "sweep"])
def test_compound_bodies_stack_on_their_geoms(run, mode):
    """A dumbbell dropped across another (turned 90 degrees) comes to rest on it: the upper
    spheres meet the lower spheres, with both broad phases (the sweep is the path that maps
    broad-phase geoms to bodies)."""
    scene = jc.Scene(dt=0.01, stiffness=K, damping=50.0)
    scene.add_plane()
    r = 0.05
    _dumbbell(scene, z=r, radius=r, half=0.0001)
    c = np.sqrt(0.5)
    _dumbbell(scene, z=3 * r + 0.01, radius=r, half=0.0001, quat=(c, 0, 0, c))
    model, state = scene.build(broad_phase=jc.BroadPhase(mode=mode))
    final, _, infos = run(model, state)
    assert bool(jnp.all(infos.converged))
    # the upper body rests on the lower one: one sphere diameter above it, less the depths
    assert abs(float(final.pos[1, 2] - final.pos[0, 2]) - 2 * r) < 1e-3
    assert float(jnp.min(contact_rows(model, final).gap)) > -1e-3


def test_single_geom_body_matches_add_sphere(run):
    """add_body + add_geom at the centre of mass is add_sphere with the same inertia."""
    def build(compound):
        scene = jc.Scene(dt=0.01)
        scene.add_plane()
        if compound:
            b = scene.add_body(1.0, (0.004, 0.004, 0.004), pos=(0, 0, 0.3), vel=(1.0, 0, 0))
            scene.add_geom(b, "sphere", radius=0.1, pos=(0, 0, 0.3))
        else:
            scene.add_sphere(0.1, mass=1.0, pos=(0, 0, 0.3), vel=(1.0, 0, 0),
                             inertia=(0.004, 0.004, 0.004))
        return scene.build()

    a, b = run(*build(True)), run(*build(False))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.slow  # 22 s of compilation; CI: gradients w.r.t. model leaves in
# solvers/test_adjoint_finite_differences.py
def test_gradient_of_rest_height_wrt_geom_offset():
    """z_rest = r - p_z - m g / k for a sphere at p_z below the centre of mass: the implicit
    gradient of the settled height with respect to the geom's offset is -1 in z (and 0 in x),
    and matches central finite differences."""
    scene = jc.Scene(dt=0.01, stiffness=K, damping=50.0)
    scene.add_plane()
    body = scene.add_body(1.0, (0.01, 0.01, 0.01), pos=(0.0, 0.0, 0.15))
    scene.add_geom(body, "sphere", radius=0.05, pos=(0.0, 0.0, 0.05))
    model, state = scene.build()

    @jax.jit
    def height(offset):
        m = model.replace(geom=model.geom.replace(pos=offset))
        final, _ = jc.rollout(m, state, steps=STEPS)
        return final.pos[0, 2]

    offset = model.geom.pos
    grad = jax.grad(height)(offset)
    np.testing.assert_allclose(grad[0], [0.0, 0.0, -1.0], atol=1e-3)
    h = 1e-6
    e = jnp.zeros_like(offset).at[0, 2].set(h)
    fd = (height(offset + e) - height(offset - e)) / (2 * h)
    np.testing.assert_allclose(grad[0, 2], fd, rtol=1e-5)


def test_add_body_and_add_geom_reject_bad_input():
    scene = jc.Scene()
    with pytest.raises(ValueError, match="mass"):
        scene.add_body(-1.0, (1, 1, 1))
    with pytest.raises(ValueError, match="inertia"):
        scene.add_body(1.0, (1, 0, 1))
    b = scene.add_body(1.0, (1, 1, 1))
    with pytest.raises(ValueError, match="body"):
        scene.add_geom(3, "sphere", radius=0.1)
    with pytest.raises(ValueError, match="kind"):
        scene.add_geom(b, "cylinder", radius=0.1)
    with pytest.raises(ValueError, match="half_size is not an argument of a sphere"):
        scene.add_geom(b, "sphere", radius=0.1, half_size=0.2)
    with pytest.raises(ValueError, match="radius"):
        scene.add_geom(b, "capsule", half_length=0.2)


def test_randomized_size_scales_geom_offsets():
    scene = jc.Scene()
    scene.add_plane()
    _dumbbell(scene)
    model, state = scene.build()
    scaled, _ = jc.domain.randomizer(size=(0.5, 2.0))(model, state, jax.random.key(0))
    scale = scaled.geom.size[:, 0] / model.geom.size[:, 0]
    assert abs(float(scale[0]) - 1.0) > 1e-3
    np.testing.assert_allclose(scaled.geom.pos[:, 0], model.geom.pos[:, 0] * scale)
    # one draw per body: both geoms of the dumbbell scale alike
    np.testing.assert_allclose(scale[0], scale[1])


def test_a_drawn_only_mesh_does_not_pad_the_colliders(run):
    """A mesh that never collides (a visual skin) sets no contact rows: the colliding cube's
    rows are its 8 vertices, not the skin's 200, and it rests at its closed-form height
    (dm_control's dog: a 708-vertex skin padded every collider to 708 rows)."""
    scene = jc.Scene(dt=0.002, stiffness=K)
    scene.add_plane()
    body = scene.add_body(1.0, (0.01, 0.01, 0.01), pos=(0.0, 0.0, 0.1))
    cube = 0.1 * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)],
                          float)
    scene.add_geom(body, "mesh", vertices=cube, pos=(0.0, 0.0, 0.1))
    skin = np.random.default_rng(0).normal(size=(200, 3))
    skin = 0.08 * skin / np.linalg.norm(skin, axis=1, keepdims=True)
    scene.add_geom(body, "mesh", vertices=skin, pos=(0.0, 0.0, 0.1), collide=False)
    model, state = scene.build()
    rows = contact_rows(model, state)
    assert rows.gap.shape[0] == 8
    final, _, infos = run(model, state)
    assert bool(jnp.all(infos.converged))
    # four bottom corners share the weight: each sinks m g / (4 k)
    assert float(final.pos[0, 2]) == pytest.approx(0.1 - G / (4 * K), abs=2e-6)
