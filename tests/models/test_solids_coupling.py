"""A rigid body standing on a soft FEM foot (issue 16, point 4: `scene.attach` ties a
solid's vertices to body points, so a rigid robot can have soft feet, ADD E17).

With ν = 0 and the co-rotational material, a block squeezed between a rigid body and the
ground is in uniaxial stress, which linear tetrahedra represent exactly (the patch test),
and its lumped self-weight compresses the top by exactly m_s g h / (2 E A) (a bar of
linear elements is exact at its nodes). With the attachments (4 of stiffness k_a, carrying
M g) and the ground contacts (4 of k_c, carrying (M + m_s) g) in series, the body settles by

    h (M g + m_s g / 2) / (E A) + M g / (4 k_a) + (M + m_s) g / (4 k_c),

and its height's derivative with respect to M is -g (h / (E A) + 1 / (4 k_a) + 1 / (4 k_c)).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

G = 9.81
MASS, SIDE, HEIGHT = 1.0, 0.1, 0.05        # the body (kg), the foot's width and height (m)
E, RHO, ETA = 1e5, 100.0, 20.0            # Pa, kg/m³, Pa s (viscosity settles it)
TOP = HEIGHT + 0.02                       # the body's centre, above the foot's top face
K_ATTACH = K_CONTACT = 1e7               # N/m
STEPS, DT = 150, 0.01


def _scene():
    verts, tets = jc.meshes.box_tets((SIDE, SIDE, HEIGHT), (1, 1, 2))
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, -G), friction=0.5, stiffness=K_CONTACT, damping=0.0)
    scene.add_plane()
    foot = scene.add_solid(verts, tets, density=RHO, youngs_modulus=E, poisson_ratio=0.0,
                           viscosity=ETA, material="corotational", pos=(0.0, 0.0, HEIGHT / 2))
    body = scene.add_body(MASS, (1e-3, 1e-3, 1e-3), pos=(0.0, 0.0, TOP))
    for p in np.asarray(foot)[np.isclose(verts[:, 2], HEIGHT / 2)]:
        scene.attach(int(p), body, stiffness=K_ATTACH)
    # the contact law as written (K_CONTACT, no regularization by effective mass: the closed
    # form below counts the contact's compliance 1/K_CONTACT)
    return scene.build(solver=jc.Newton(iterations=30),
                       contact=jc.Contact(near_rigid=0.0, friction_regularization=0.0))


@pytest.mark.slow
def test_a_body_on_a_soft_foot_settles_by_the_closed_form_and_its_mass_gradient_matches():
    model, state = _scene()
    solid_mass = RHO * SIDE * SIDE * HEIGHT
    np.testing.assert_allclose(float(jnp.sum(model.particle_masses)), solid_mass, rtol=1e-12)

    def height(mass):
        m = model.replace(body=model.body.replace(mass=model.body.mass.at[0].set(mass)))
        final, _, info = jc.rollout(m, state, steps=STEPS, return_info=True)
        return final.pos[0, 2], (info, final)

    (z, (info, final)), dz = jax.jit(jax.value_and_grad(height, has_aux=True))(MASS)
    assert bool(jnp.all(info.converged))
    assert float(jnp.max(jnp.abs(final.vel))) < 1e-4          # at rest
    compliance = HEIGHT / (E * SIDE * SIDE)                    # h / (E A), m/N
    drop = ((MASS * G + 0.5 * solid_mass * G) * compliance + MASS * G / (4 * K_ATTACH)
            + (MASS + solid_mass) * G / (4 * K_CONTACT))     # 0.5 mm
    np.testing.assert_allclose(TOP - float(z), drop, rtol=1e-3)
    slope = -G * (compliance + 1 / (4 * K_ATTACH) + 1 / (4 * K_CONTACT))
    np.testing.assert_allclose(float(dz), slope, rtol=1e-3)
    # the implicit gradient is the rollout's: central differences in float64
    only = jax.jit(lambda mass: height(mass)[0])
    h = 1e-3
    fd = (float(only(MASS + h)) - float(only(MASS - h))) / (2 * h)
    np.testing.assert_allclose(float(dz), fd, rtol=1e-6)
    # the foot's bottom stays on the ground, its top under the body: no tilt, no slip
    np.testing.assert_allclose(np.asarray(final.particle_pos[:, :2]),
                               np.asarray(state.particle_pos[:, :2]), atol=1e-5)
