"""Particles (3-DOF point masses): contact laws against closed forms, attachments, gradients.

Closed forms (DESIGN.md section 3, v1; issue 11): a particle resting on a plane or on a rigid
body penetrates by m g / k_n; one sliding with friction μ decelerates at μ g (and with the
default cone coupling hovers by Anitescu's relaxation); one hanging from an attachment of
stiffness k sags by m g / k. Gradients of rollouts with respect to particle
state and parameters match central finite differences (float64) and forward mode.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

G = 9.81


def _rollout(model, state, steps):
    return jax.jit(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True))(model, state)


def test_particle_rests_on_plane_at_m_g_over_k():
    m, k, r = 0.2, 1e4, 0.01
    scene = jc.Scene(dt=0.002, stiffness=k, damping=2.0 * np.sqrt(k * m))
    scene.add_plane()
    scene.add_particle(m, (0.0, 0.0, r), radius=r)
    model, state = scene.build(dtype=jnp.float64)
    final, _, info = _rollout(model, state, 300)
    assert bool(jnp.all(info.converged))
    penetration = r - float(final.particle_pos[0, 2])
    assert penetration == pytest.approx(m * G / k, rel=1e-6)
    assert float(info.max_penetration[-1]) == pytest.approx(m * G / k, rel=1e-6)
    assert int(info.active_contacts[-1]) == 1


def _sliding_particle(coupling):
    mu, dt, k = 0.3, 0.001, 1e5
    scene = jc.Scene(dt=dt, friction=mu, stiffness=k, damping=100.0)
    scene.add_plane()
    scene.add_particle(0.1, (0.0, 0.0, 0.0), vel=(2.0, 0.0, 0.0))
    model, state = scene.build(dtype=jnp.float64, contact=jc.Contact(coupling=coupling))
    _, traj, info = _rollout(model, state, 200)
    assert bool(jnp.all(info.converged))
    np.testing.assert_allclose(np.asarray(traj.particle_vel[:, 0, 1]), 0.0, atol=1e-12)
    return mu, dt, k, traj


def test_particle_slides_with_deceleration_mu_g():
    # friction's lagged coupling: exact Coulomb in contact, from the first step on
    mu, dt, _, traj = _sliding_particle("lagged")
    v = np.asarray(traj.particle_vel[:, 0, 0])
    t = dt * np.arange(1, 201)
    assert np.all(v[50:150] > 0.5)   # still sliding over the fitted window
    slope = np.polyfit(t[50:150], v[50:150], 1)[0]
    assert slope == pytest.approx(-mu * G, rel=1e-3)


def test_particle_sliding_on_the_cone_hovers_by_anitescus_relaxation():
    """The default cone coupling (design note 57): sliding at speed w the contact acts as if
    its normal velocity were v_n - μ w, so the particle hovers at T μ w - m g / k above the
    plane (T = Δt + k_d / k_n) and, there, decelerates at μ g."""
    mu, dt, k, traj = _sliding_particle("cone")
    v = np.asarray(traj.particle_vel[:, 0, 0])
    z = np.asarray(traj.particle_pos[:, 0, 2])
    t = dt * np.arange(1, 201)
    late = slice(120, 200)          # the launch from zero gap has settled by then
    assert np.polyfit(t[late], v[late], 1)[0] == pytest.approx(-mu * G, rel=2e-3)
    T = dt + 100.0 / k
    np.testing.assert_allclose(z[late], T * mu * v[late] - 0.1 * G / k, rtol=0.02)


@pytest.mark.slow  # compile-heavy; CI: the particle on the plane and the attachments
def test_particle_rests_on_a_rigid_sphere_at_m_g_over_k():
    """A particle on top of a heavy sphere that rests on the ground: the particle-sphere gap
    settles at -m_p g / k (the rigid shape collides with the particle as a ball)."""
    m_p, k, r_p, r_s = 0.05, 1e4, 0.01, 0.1
    scene = jc.Scene(dt=0.002, stiffness=k, damping=2.0 * np.sqrt(k * m_p), friction=0.5)
    scene.add_plane(stiffness=1e6, damping=2.0 * np.sqrt(1e6 * 5.0))
    scene.add_sphere(r_s, 5.0, pos=(0.0, 0.0, r_s), stiffness=k)
    scene.add_particle(m_p, (0.0, 0.0, 2 * r_s + r_p), radius=r_p)
    model, state = scene.build(dtype=jnp.float64)
    final, _, info = _rollout(model, state, 300)
    assert bool(jnp.all(info.converged))
    gap = (float(jnp.linalg.norm(final.particle_pos[0] - final.pos[0])) - r_s - r_p)
    # the heavy sphere is still settling on its own contact (about 1e-4 relative)
    assert gap == pytest.approx(-m_p * G / k, rel=1e-3)


def test_attachment_to_world_sags_m_g_over_k():
    m, k = 0.5, 1e3
    scene = jc.Scene(dt=0.002)
    p = scene.add_particle(m, (0.3, 0.0, 1.0))
    scene.attach(p, -1, stiffness=k, damping=2.0 * np.sqrt(k * m))
    model, state = scene.build(dtype=jnp.float64)
    final, _, info = _rollout(model, state, 300)
    assert bool(jnp.all(info.converged))
    np.testing.assert_allclose(np.asarray(final.particle_pos[0]), [0.3, 0.0, 1.0 - m * G / k],
                               rtol=0, atol=1e-9)


@pytest.mark.slow  # a body point and a ball joint: ~25 s of compilation; CI: the world attachment
def test_attachment_to_a_body_point_follows_the_body():
    """A particle attached to a point of a body that is pinned to the world by a stiff ball
    joint at its centre: the particle hangs below the anchor point by m g / k, and the
    attachment's anchor is stored in the body's frame."""
    m, k = 0.2, 2e3
    scene = jc.Scene(dt=0.002)
    b = scene.add_box(0.05, 1.0, pos=(0.0, 0.0, 1.0))
    scene.add_joint("fixed", b, -1, anchor=(0.0, 0.0, 1.0), stiffness=1e7)
    p = scene.add_particle(m, (0.1, 0.0, 1.0))
    scene.attach(p, b, stiffness=k, damping=2.0 * np.sqrt(k * m))
    model, state = scene.build(dtype=jnp.float64)
    np.testing.assert_allclose(np.asarray(model.attachment.anchor[0]), [0.1, 0.0, 0.0])
    final, _, info = _rollout(model, state, 300)
    assert bool(jnp.all(info.converged))
    # the joint holds the body within (load / joint stiffness); the particle sags m g / k
    sag = float(final.pos[0, 2]) - float(final.particle_pos[0, 2])
    assert sag == pytest.approx(m * G / k, rel=1e-3)


# --- gradients -----------------------------------------------------------------------------

def _sliding_scene(ad):
    scene = jc.Scene(dt=0.004, friction=0.4, stiffness=2e4, damping=40.0)
    scene.add_plane()
    scene.add_particle(0.3, (0.0, 0.0, 0.012), vel=(1.0, 0.5, -0.5), radius=0.01)
    scene.add_particle(0.2, (0.05, 0.0, 0.2), vel=(0.0, 0.0, 0.0))
    p = scene.add_particle(0.2, (0.0, 0.1, 0.05), vel=(0.0, 0.0, 0.0))
    scene.attach(p, -1, anchor=(0.0, 0.1, 0.1), stiffness=500.0, damping=5.0)
    return scene.build(dtype=jnp.float64, solver=jc.Newton(ad=ad))


@pytest.fixture(scope="module")
def particle_loss():
    """(loss, x0, loss_jvp, grad): a scalar of the final particle positions as a function of
    the particles' initial velocity, mass, friction and the attachment stiffness, and its
    reverse-mode gradient at x0 (computed once for both tests)."""
    model, state = _sliding_scene("vjp")
    model_f, _ = _sliding_scene("jvp")

    def make(model):
        def loss(x):
            vel = state.particle_vel.at[0].set(x[:3])
            m = model.replace(particle=model.particle.replace(
                mass=model.particle.mass.at[0].set(x[3]),
                friction=model.particle.friction.at[0].set(x[4])),
                attachment=model.attachment.replace(stiffness=x[5:6]))
            final, _ = jc.rollout(m, state.replace(particle_vel=vel), steps=12)
            weights = jnp.arange(1.0, 10.0).reshape(3, 3)
            return jnp.sum(weights * final.particle_pos) + jnp.sum(final.particle_vel[0] ** 2)
        return loss

    x0 = jnp.array([1.0, 0.5, -0.5, 0.3, 0.4, 500.0])
    # the loss and its gradient, one program: finite differences evaluate the loss with it too
    # (a second, value-only program compiled for as long)
    value_and_grad = jax.jit(jax.value_and_grad(make(model)))
    return (lambda x: value_and_grad(x)[0]), x0, make(model_f), np.asarray(value_and_grad(x0)[1])


def test_particle_gradient_matches_central_differences(particle_loss):
    loss, x0, _, grad = particle_loss
    assert np.all(np.isfinite(grad))
    steps = np.array([1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-3])
    fd = np.array([(float(loss(x0.at[i].add(h))) - float(loss(x0.at[i].add(-h)))) / (2 * h)
                   for i, h in enumerate(steps)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)
    assert np.all(np.abs(grad[:5]) > 1e-6)   # every input matters to this loss


def test_particle_forward_mode_matches_reverse(particle_loss):
    _, x0, loss_jvp, grad = particle_loss
    direction = jnp.array([0.3, -0.2, 0.1, 0.5, -0.7, 20.0])
    _, tangent = jax.jit(lambda x, t: jax.jvp(loss_jvp, (x,), (t,)))(x0, direction)
    assert float(tangent) == pytest.approx(float(grad @ np.asarray(direction)), rel=1e-8)
