"""Fluid forces on bodies, MuJoCo's inertia-based model (`jaxcontact.models.fluid`): the
equivalent inertia box, closed forms of the implicit step (viscous decay of a translating and
a spinning box, the terminal velocity of a box falling face first through a dense fluid), the
gradients of a rollout in density and viscosity against central differences and forward mode
(float64), and bad arguments."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.math import quat_to_mat_numpy
from jaxcontact.models.fluid import equivalent_box

G = 9.81
HALF = np.array([0.2, 0.1, 0.05])     # a box of distinct half sizes (m), so every axis differs
MASS = 1.0
# the step's solve is converged to about 1e-14 relative in float64: the closed forms of the
# implicit step hold to rounding, far inside this
CLOSED_FORM_RTOL = 1e-10


def test_a_solid_box_is_its_own_equivalent_inertia_box():
    """r_i = sqrt(3 / (2 M) (I_j + I_k - I_i)) of a uniform box, I_i = M/3 (r_j² + r_k²),
    gives back its half sizes."""
    moments = MASS / 3.0 * np.array([HALF[1] ** 2 + HALF[2] ** 2, HALF[0] ** 2 + HALF[2] ** 2,
                                     HALF[0] ** 2 + HALF[1] ** 2])
    np.testing.assert_allclose(np.asarray(equivalent_box(jnp.asarray(MASS),
                                                         jnp.asarray(moments))), HALF,
                               rtol=1e-14)
    # a thin rod whose moment sum rounds below 0: a zero half size, with a finite gradient
    rod = jnp.asarray([1.0, 1.0, 2.0 + 1e-16])
    assert float(equivalent_box(jnp.asarray(1.0), rod)[2]) == 0.0
    assert np.all(np.isfinite(np.asarray(jax.jacfwd(
        lambda i: equivalent_box(jnp.asarray(1.0), i))(rod))))


def _box(scene, quat=(1.0, 0.0, 0.0, 0.0), **kwargs):
    return scene.add_box(tuple(HALF), mass=MASS, pos=(0.0, 0.0, 5.0), quat=quat, **kwargs)


def test_viscous_resistance_decays_speed_and_spin_as_the_closed_form():
    """ρ = 0: f = -6 π β r_eq v and g = -8 π β r_eq³ ω, whatever the box's orientation.
    A box turned off the world axes, moving obliquely and spinning about one of its
    principal axes (no gyroscopic torque) without gravity: each step is
    v⁺ = v / (1 + Δt c / M), ω⁺ = ω / (1 + Δt k / I) (to rounding), and after n steps
    both are within n (Δt c / M)² (relative) of the exponentials exp(-c t / M) and
    exp(-k t / I) (implicit Euler of a linear decay: (1 + x)⁻ⁿ = e^(-n x) e^(n O(x²)),
    ln(1 + x) >= x - x²/2)."""
    dt, steps, beta = 0.01, 50, 0.4
    quat = np.array([np.cos(0.3), np.sin(0.3) * 0.6, 0.0, np.sin(0.3) * 0.8])
    axis = quat_to_mat_numpy(quat)[:, 1]     # the box's y axis (world)
    v0, spin0 = np.array([1.0, -0.5, 0.3]), 2.0
    scene = jc.Scene(dt=dt, gravity=(0.0, 0.0, 0.0))
    body = _box(scene, quat=quat, vel=tuple(v0), ang_vel=tuple(spin0 * axis))
    scene.add_fluid(body, viscosity=beta)
    model, state = scene.build()
    final, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True))(
        model, state)
    assert bool(jnp.all(info.converged))
    r_eq = np.mean(HALF)
    c, k = 6 * np.pi * beta * r_eq, 8 * np.pi * beta * r_eq ** 3
    inertia = MASS / 3.0 * (HALF[0] ** 2 + HALF[2] ** 2)     # about the y axis
    np.testing.assert_allclose(np.asarray(final.vel[0]), v0 / (1 + dt * c / MASS) ** steps,
                               rtol=CLOSED_FORM_RTOL, err_msg="vel")
    np.testing.assert_allclose(np.asarray(final.ang_vel[0]),
                               spin0 * axis / (1 + dt * k / inertia) ** steps,
                               rtol=CLOSED_FORM_RTOL, atol=1e-13, err_msg="ang_vel")
    t = dt * steps
    for got, exact, rate in ((np.linalg.norm(final.vel[0]), np.linalg.norm(v0) * np.exp(
            -c * t / MASS), c / MASS), (np.linalg.norm(final.ang_vel[0]), spin0 * np.exp(
            -k * t / inertia), k / inertia)):
        assert abs(got / exact - 1.0) < steps * (dt * rate) ** 2
        assert got < 0.9 * np.linalg.norm(v0 if rate == c / MASS else spin0)   # it decays


def _implicit_fall(dt, steps, drag):
    """Velocities of `steps` implicit steps of M v' = -M g + k v² (falling, v < 0; k =
    2 ρ r_x r_y): M (v⁺ - v) = Δt (-M g + k v⁺²), i.e. Δt k v⁺² - M v⁺ + b = 0 with
    b = M v - M g Δt < 0, whose negative root is v⁺ = (M - sqrt(M² - 4 Δt k b)) / (2 Δt k)."""
    v, out = 0.0, []
    for _ in range(steps):
        b = MASS * v - MASS * G * dt
        v = (MASS - np.sqrt(MASS ** 2 - 4 * dt * drag * b)) / (2 * dt * drag)
        out.append(v)
    return np.array(out)


def test_a_box_falling_face_first_reaches_the_quadratic_drag_terminal_velocity():
    """ρ > 0, β = 0, gravity along the box's z axis: f_z = -2 ρ r_x r_y |v_z| v_z, so the
    terminal speed is sqrt(M g / (2 ρ r_x r_y)) = sqrt(2 M g / (ρ A)) with A = 4 r_x r_y the
    face's area (a drag coefficient of 1); every step follows the implicit closed form."""
    dt, steps, rho = 0.01, 120, 1000.0
    scene = jc.Scene(dt=dt, gravity=(0.0, 0.0, -G))
    scene.add_fluid(_box(scene), density=rho)
    model, state = scene.build()
    _, traj, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True))(
        model, state)
    assert bool(jnp.all(info.converged))
    drag = 2 * rho * HALF[0] * HALF[1]
    np.testing.assert_allclose(np.asarray(traj.vel[:, 0, 2]), _implicit_fall(dt, steps, drag),
                               rtol=CLOSED_FORM_RTOL, err_msg="vel z")
    np.testing.assert_allclose(np.asarray(traj.vel[:, 0, :2]), 0.0, atol=1e-14)
    terminal = np.sqrt(2 * MASS * G / (rho * 4 * HALF[0] * HALF[1]))
    # 120 steps are 1.2 s, 24 time constants v_t / g: tanh(24) is 1 to 1e-20
    assert float(traj.vel[-1, 0, 2]) == pytest.approx(-terminal, rel=1e-9)


@functools.partial(jax.jit, static_argnames="mode")
def _tumble(fluid, mode="vjp"):
    """A box tumbling through a fluid with a wind, under gravity: its final position and
    angular velocity, for fluid = (ρ, β)."""
    scene = jc.Scene(dt=0.01)
    body = _box(scene, quat=(0.8, 0.6, 0.0, 0.0), vel=(0.5, -0.3, 0.8),
                ang_vel=(1.0, 2.0, -1.5))
    scene.add_fluid(body, wind=(0.4, 0.2, 0.0))
    model, state = scene.build(solver=jc.Newton(ad=mode))
    model = model.replace(fluid=model.fluid.replace(density=fluid[:1], viscosity=fluid[1:]))
    final, _, info = jc.rollout(model, state, steps=15, return_info=True)
    return jnp.concatenate([final.pos[0], final.ang_vel[0]]), info.converged


def test_fluid_gradients_match_central_differences_and_forward_mode():
    """d(final position, angular velocity) / d(ρ, β) of a 15-step rollout: reverse mode
    (implicit gradients) equals central differences (h = 1e-4 relative: truncation ~h² and
    rounding ~eps / h, both near 1e-8 relative) and forward mode (the same linear solves)."""
    fluid = jnp.array([800.0, 0.3])
    out, converged = _tumble(fluid)
    assert bool(jnp.all(converged))
    reverse = np.asarray(jax.jacrev(lambda f: _tumble(f)[0])(fluid))
    forward = np.asarray(jax.jacfwd(lambda f: _tumble(f, "jvp")[0])(fluid))
    central = np.zeros_like(reverse)
    for j in range(2):
        h = 1e-4 * float(fluid[j])
        step = jnp.zeros(2).at[j].set(h)
        central[:, j] = (np.asarray(_tumble(fluid + step)[0])
                         - np.asarray(_tumble(fluid - step)[0])) / (2 * h)
    scale = np.max(np.abs(reverse), axis=0)
    assert np.all(scale > 0)    # every output depends on both
    # (measured: 1.2e-9 and 6e-16 of each column's largest entry)
    np.testing.assert_allclose(reverse / scale, central / scale, atol=1e-7, err_msg="central")
    np.testing.assert_allclose(forward / scale, reverse / scale, atol=1e-12, err_msg="forward")


def test_dual_refuses_fluid_and_bad_arguments_are_named():
    scene = jc.Scene()
    body = _box(scene)
    scene.add_fluid(body, density=1.0)
    with pytest.raises(ValueError, match="fluid"):
        scene.build(solver=jc.Dual())
    for kwargs, name in (({"bodies": 3}, "bodies"), ({"density": -1.0}, "density"),
                         ({"viscosity": float("nan")}, "viscosity"),
                         ({"wind": (1.0, 2.0)}, "wind"),
                         ({"half_size": (0.1, -0.1, 0.1)}, "half_size"),
                         ({"quat": (1.0, 1.0, 0.0, 0.0)}, "quat")):
        with pytest.raises(ValueError, match=name):
            scene.add_fluid(**{"bodies": body, **kwargs})
