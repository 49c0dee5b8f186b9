"""Fixed tendons (`add_tendon`, `jaxcontact.models.tendons`) and actuators (`add_actuator`,
`jaxcontact.models.motors`): closed forms of rods on hinges and a block on a slider without
gravity, the clamped force's work against quadrature, gradients against central differences
(and forward mode: the slow suite; float64), and bad arguments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.models.motors import clamped_work
from tests._helpers import gradient_checks

DT, LENGTH, MASS = 1e-3, 1.0, 1.0
PIVOT_INERTIA = MASS * LENGTH ** 2 / 3.0       # a rod about its end


def _rods(n=2, mode="vjp", slider=False):
    """n 1 m, 1 kg rods on hinges about z at the origin, 2 m apart in z (or blocks on sliders
    along x); no gravity. Returns (scene, joints)."""
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
    joints = []
    for i in range(n):
        z = 2.0 * i
        rod = scene.add_body(MASS, (1e-4, MASS * LENGTH ** 2 / 12, MASS * LENGTH ** 2 / 12),
                             pos=(LENGTH / 2, 0.0, z))
        kind, axis = ("slider", (1.0, 0.0, 0.0)) if slider else ("hinge", (0.0, 0.0, 1.0))
        joints.append(scene.add_joint(kind, rod, -1, anchor=(0.0, 0.0, z), axis=axis,
                                      stiffness=1e6))
    return scene, joints


def _angles(traj):
    return np.arctan2(np.asarray(traj.pos[:, :, 1]), np.asarray(traj.pos[:, :, 0]))


def _run(model, state, steps, motor=None):
    controls = None
    if motor is not None:
        one = jc.Control.zeros(model.n_body, model.n_motor, state.pos.dtype).replace(
            motor=jnp.asarray(motor, state.pos.dtype))
        controls = jax.tree.map(lambda a: jnp.broadcast_to(a, (steps,) + a.shape), one)
    run = jax.jit(lambda s, c: jc.rollout(model, s, c, steps=None if c is not None else steps,
                                          return_info=True) if c is not None else
                  jc.rollout(model, s, steps=steps, return_info=True))
    final, traj, info = run(state, controls)
    assert bool(jnp.all(info.converged))
    return traj


@pytest.mark.parametrize("alpha, beta, lower, upper", [
    (0.3, -2.0, -1.0, 1.0), (1.7, -0.5, -1.0, 1.0), (-2.0, -3.0, -1.0, 0.5),
    (0.4, 0.0, -1.0, 1.0), (3.0, 0.0, -1.0, 1.0), (0.5, -1e-12, 0.2, 2.0)])
def test_clamped_work_is_the_integral_of_the_clamped_force(alpha, beta, lower, upper):
    """∫_0^r clamp(α + β s) ds against the trapezoid rule, both signs of r; its derivative in
    r is the force clamp(α + β r), also at r = 0."""
    for r in (-1.5, -0.3, 0.0, 0.7, 2.0):
        s = np.linspace(0.0, r, 200001)
        quadrature = np.trapezoid(np.clip(alpha + beta * s, lower, upper), s)
        assert float(clamped_work(r, alpha, beta, lower, upper)) == pytest.approx(
            quadrature, abs=1e-6)
        slope = float(jax.grad(clamped_work)(float(r), alpha, beta, lower, upper))
        assert slope == pytest.approx(float(np.clip(alpha + beta * r, lower, upper)), abs=1e-9)


def test_a_tendon_couples_two_hinges_and_a_torque_on_one_turns_both():
    """A stiff tendon θ1 - θ2 (coefficients 1, -1) and a torque τ on the first hinge (an
    actuator of gain τ): both rods turn together at ω = τ t / (2 I), the second lagging by at
    most τ/k."""
    scene, (h1, h2) = _rods(2)
    scene.add_tendon((h1, h2), (1.0, -1.0), stiffness=200.0, damping=2.0)
    torque = 0.5
    motor = scene.add_actuator(joint=h1, gain=torque)
    model, state = scene.build()
    steps = 300
    traj = _run(model, state, steps, motor=[1.0])
    spin = np.asarray(traj.ang_vel[:, :, 2])
    t = np.asarray(traj.time)
    # the pair's mean spin takes the whole torque; the tendon's spring rings about it
    # (after the first steps' transient of the soft pivots)
    late = t > 0.02
    np.testing.assert_allclose(spin.mean(axis=1)[late], torque * t[late] / (2 * PIVOT_INERTIA),
                               rtol=2e-3)
    # the tendon carries half the torque to the second rod: a lag τ/(2k), ringing to twice that
    theta = _angles(traj)
    assert float(np.max(np.abs(theta[:, 0] - theta[:, 1]))) < torque / 200.0
    assert motor == 0 and model.n_motor == 1


def test_a_tendon_spring_over_two_hinges_swings_at_the_closed_form_period():
    """L = c1 θ1 + c2 θ2 with a spring k (rest L_ref): the rods' coordinate L oscillates about
    L_ref with the period of the effective inertia 1/(c1²/I + c2²/I), 2π sqrt(I / (k (c1² +
    c2²))), while c2 θ1 - c1 θ2 keeps its value (it feels no torque)."""
    c1, c2, k, ref = 1.0, 0.5, 3.0, 0.1
    scene, (h1, h2) = _rods(2)
    scene.add_tendon((h1, h2), (c1, c2), stiffness=k, rest_length=ref)
    model, state = scene.build()
    period = 2 * np.pi * np.sqrt(PIVOT_INERTIA / (k * (c1 ** 2 + c2 ** 2)))
    traj = _run(model, state, int(1.2 * period / DT))
    theta, t = _angles(traj), np.asarray(traj.time)
    length = c1 * theta[:, 0] + c2 * theta[:, 1]
    rising = np.nonzero((length[:-1] < ref) & (length[1:] >= ref))[0]
    assert t[rising[0]] == pytest.approx(period / 4, abs=2 * DT)
    assert float(np.max(length)) == pytest.approx(2 * ref, rel=3e-3)
    np.testing.assert_allclose(c2 * theta[:, 0] - c1 * theta[:, 1], 0.0, atol=1e-5)


def test_a_tendon_limit_stops_the_coupled_rods_at_its_range():
    """A tendon limit L <= 0.2 on L = θ1 + θ2, the first rod driven by a torque τ = 1: once the
    limit holds, it pushes both hinges with λ = τ/2 (then θ1'' = -θ2''), so L rests at
    0.2 + λ/k_lim."""
    scene, (h1, h2) = _rods(2)
    k_lim = 1e3
    scene.add_tendon((h1, h2), (1.0, 1.0), limit=(-0.2, 0.2), limit_stiffness=k_lim,
                     limit_damping=20.0)
    scene.add_actuator(joint=h1, gain=1.0)
    model, state = scene.build()
    traj = _run(model, state, 1500, motor=[1.0])
    theta = _angles(traj)
    length = theta[:, 0] + theta[:, 1]
    assert float(np.max(length)) < 0.2 + 3.0 / k_lim      # the overshoot of a damped limit
    assert float(length[-1]) == pytest.approx(0.2 + 0.5 / k_lim, abs=5e-5)


def test_a_position_servo_on_a_geared_slider_holds_its_target_and_rings_at_its_period():
    """MuJoCo's position actuator, force kp (u - g x) - kv g ẋ on the length g x, the slider
    feeling g f: the block rings at 2π / sqrt(g² kp / m) about x = u / g; kv damps it."""
    gear, kp, u = 2.0, 20.0, 0.3
    scene, (slider,) = _rods(1, slider=True)
    scene.add_actuator(joint=slider, gear=gear, gain=kp, bias=(0.0, -kp, 0.0))
    model, state = scene.build()
    period = 2 * np.pi / np.sqrt(gear ** 2 * kp / MASS)
    traj = _run(model, state, int(0.6 * period / DT), motor=[u])
    x, t = np.asarray(traj.pos[:, 0, 0]) - LENGTH / 2, np.asarray(traj.time)
    assert t[np.argmax(x)] == pytest.approx(period / 2, abs=3 * DT)
    # (implicit Euler loses (ω Δt)²/2 of the amplitude per step: 1.4 % over half a period)
    assert float(np.max(x)) == pytest.approx(2 * u / gear, rel=1e-2)
    # with damping kv it settles at u / g
    scene, (slider,) = _rods(1, slider=True)
    scene.add_actuator(joint=slider, gear=gear, gain=kp, bias=(0.0, -kp, -5.0))
    model, state = scene.build()
    traj = _run(model, state, 3000, motor=[u])
    assert float(traj.pos[-1, 0, 0]) - LENGTH / 2 == pytest.approx(u / gear, abs=1e-4)


def test_a_force_range_clamps_a_motor():
    """A torque motor of gain 10 at u = 1 limited to (-2, 2) N m turns the rod at ω = 2 t / I."""
    scene, (hinge,) = _rods(1)
    scene.add_actuator(joint=hinge, gain=10.0, force_range=(-2.0, 2.0))
    model, state = scene.build()
    traj = _run(model, state, 200, motor=[1.0])
    t = np.asarray(traj.time)
    late = t > 0.02      # (after the first steps' transient of the soft pivot)
    np.testing.assert_allclose(np.asarray(traj.ang_vel[late, 0, 2]),
                               2.0 * t[late] / PIVOT_INERTIA, rtol=5e-3)


def _final(values, mode="vjp"):
    """The second rod's final spin, driven through a damped tendon spring by a velocity
    servo on the first with a force range, as a function of (gain, tendon stiffness, u)."""
    scene, (h1, h2) = _rods(2)
    scene.add_tendon((h1, h2), (1.0, -1.0), stiffness=5.0, damping=0.5)
    scene.add_actuator(joint=h1, gain=1.0, bias=(0.0, 0.0, -1.0), force_range=(-0.8, 0.8))
    model, state = scene.build(solver=jc.Newton(ad=mode))
    model = model.replace(motor=model.motor.replace(gain=values[0:1]),
                          tendon=model.tendon.replace(stiffness=values[1:2]))
    control = jc.Control.zeros(model.n_body, model.n_motor, values.dtype).replace(
        motor=values[2:3])
    controls = jax.tree.map(lambda a: jnp.broadcast_to(a, (150,) + a.shape), control)
    final, _, info = jc.rollout(model, state, controls, return_info=True)
    return final.ang_vel[1, 2], jnp.all(info.converged)


VALUES = (1.5, 5.0, 0.6)      # the servo's force 1.5 x 0.6 = 0.9 starts clamped


def test_gradients_in_gain_stiffness_and_input_match_central_differences():
    out = gradient_checks(_final, jnp.array(VALUES))
    assert bool(out["aux"]) and float(out["value"]) > 0.0
    np.testing.assert_allclose(out["reverse"], out["central"], rtol=1e-5, atol=1e-9)
    assert np.all(np.isfinite(out["reverse"])) and out["reverse"][2] > 0.0


@pytest.mark.slow   # the forward rule's own program (8 s more)
def test_gradients_in_gain_stiffness_and_input_match_forward_mode():
    out = gradient_checks(_final, jnp.array(VALUES), forward=True)
    assert out["along"] == pytest.approx(out["reverse_along"], rel=1e-9, abs=1e-12)


def test_bad_tendons_and_actuators_are_named():
    scene, (h1, h2) = _rods(2)
    rod = scene.add_body(1.0, (0.1, 0.1, 0.1), pos=(5.0, 0.0, 0.0))
    ball = scene.add_joint("ball", rod, -1, anchor=(5.0, 0.0, 0.0), stiffness=1e4)
    for kwargs, name in (({"joints": (h1, 9), "coefficients": (1, 1)}, "joints"),
                         ({"joints": (h1, ball), "coefficients": (1, 1)}, "joints"),
                         ({"joints": (h1, h1), "coefficients": (1, 1)}, "joints"),
                         ({"joints": (h1, h2), "coefficients": (1,)}, "coefficients"),
                         ({"joints": (h1,), "coefficients": (1,), "stiffness": -1.0},
                          "stiffness"),
                         ({"joints": (h1,), "coefficients": (1,), "limit": (1.0, -1.0),
                           "limit_stiffness": 1.0}, "limit"),
                         ({"joints": (h1,), "coefficients": (1,), "limit": (-1.0, 1.0)},
                          "limit_stiffness")):
        with pytest.raises(ValueError, match=name):
            scene.add_tendon(**kwargs)
    tendon = scene.add_tendon((h1, h2), (1.0, 1.0))
    for kwargs, name in (({}, "joint"), ({"joint": h1, "tendon": tendon}, "tendon"),
                         ({"joint": ball}, "joints"), ({"tendon": 4}, "tendon"),
                         ({"joint": h1, "bias": (0.0, 1.0, 0.0)}, "bias"),
                         ({"joint": h1, "force_range": (1.0, -1.0)}, "force_range")):
        with pytest.raises(ValueError, match=name):
            scene.add_actuator(**kwargs)
    scene.add_actuator(tendon=tendon)
    with pytest.raises(ValueError, match="actuator"):
        scene.build(solver=jc.Dual())
