"""Springs, armature and friction loss on joint coordinates (`add_joint_properties`,
`jaxcontact.models.joints`): closed forms of a rod on a hinge without gravity, gradients
against central differences (and forward mode: the slow suite; float64), and bad arguments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from tests._helpers import gradient_checks

DT, LENGTH, MASS = 1e-3, 1.0, 1.0
PIVOT_INERTIA = MASS * LENGTH ** 2 / 3.0       # the rod about its end


def _rod(spin=0.0, mode="vjp", slider=False, **properties):
    """A 1 m, 1 kg rod (its inertia about its own axis negligible) on a hinge about z at
    the origin, or a block on a slider along x; no gravity."""
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
    rod = scene.add_body(MASS, (1e-4, MASS * LENGTH ** 2 / 12, MASS * LENGTH ** 2 / 12),
                         pos=(LENGTH / 2, 0.0, 0.0), vel=(0.0, spin * LENGTH / 2, 0.0),
                         ang_vel=(0.0, 0.0, spin))
    kind, axis = ("slider", (1.0, 0.0, 0.0)) if slider else ("hinge", (0.0, 0.0, 1.0))
    joint = scene.add_joint(kind, rod, -1, anchor=(0.0, 0.0, 0.0), axis=axis,
                            stiffness=1e6)
    scene.add_joint_properties(joint, **properties)
    return scene.build(solver=jc.Newton(ad=mode))


def _angle(traj):
    return np.arctan2(np.asarray(traj.pos[:, 0, 1]), np.asarray(traj.pos[:, 0, 0]))


def test_a_spring_with_armature_swings_at_the_closed_form_period():
    """θ'' (I + a) = -k (θ - θ_ref): the rod oscillates about θ_ref = 0.1 between 0 and 0.2
    with period 2π sqrt((I + a)/k)."""
    k, a, ref = 2.0, 0.5, 0.1
    model, state = _rod(spring_stiffness=k, spring_reference=ref, armature=a)
    period = 2 * np.pi * np.sqrt((PIVOT_INERTIA + a) / k)
    steps = int(1.2 * period / DT)
    _, traj, info = jax.jit(lambda s: jc.rollout(model, s, steps=steps,
                                                 return_info=True))(state)
    assert bool(jnp.all(info.converged))
    theta, t = _angle(traj), np.asarray(traj.time)
    rising = np.nonzero((theta[:-1] < ref) & (theta[1:] >= ref))[0]
    assert len(rising) == 1
    # a quarter period after the start (θ = 0, at rest) it passes the reference rising
    assert t[rising[0]] == pytest.approx(period / 4, abs=2 * DT)
    assert float(np.max(theta)) == pytest.approx(2 * ref, rel=2e-3)   # implicit Euler's loss
    assert float(np.min(theta)) == pytest.approx(0.0, abs=1e-6)


def test_friction_loss_stops_a_spinning_rod_at_the_closed_form_time():
    """Dry friction f on the hinge decelerates the rod at f/I: from ω₀ = 1 rad/s it stops
    at I ω₀/f, and stays (a spin below the regularization width)."""
    f = 0.2
    model, state = _rod(spin=1.0, friction_loss=f)
    _, traj, info = jax.jit(lambda s: jc.rollout(model, s, steps=2000,
                                                 return_info=True))(state)
    assert bool(jnp.all(info.converged))
    spin, t = np.asarray(traj.ang_vel[:, 0, 2]), np.asarray(traj.time)
    np.testing.assert_allclose(spin[t <= 1.0], 1.0 - f / PIVOT_INERTIA * t[t <= 1.0],
                               atol=2e-3)
    stop = t[np.argmax(spin < 1e-2)]
    assert stop == pytest.approx(PIVOT_INERTIA / f, abs=0.06)
    assert abs(spin[-1]) < jc.models.joints.FRICTION_LOSS_WIDTH


def test_armature_on_a_slider_adds_to_the_sliding_mass():
    """A block on a slider with armature a (kg) and a spring: period 2π sqrt((m + a)/k)."""
    k, a = 50.0, 0.5
    model, state = _rod(slider=True, spring_stiffness=k, spring_reference=0.05, armature=a)
    period = 2 * np.pi * np.sqrt((MASS + a) / k)
    steps = int(0.6 * period / DT)
    _, traj = jax.jit(lambda s: jc.rollout(model, s, steps=steps))(state)
    x = np.asarray(traj.pos[:, 0, 0]) - LENGTH / 2
    # at rest at x = 0, it reaches the far side 0.1 half a period later
    assert np.asarray(traj.time)[np.argmax(x)] == pytest.approx(period / 2, abs=3 * DT)
    assert float(np.max(x)) == pytest.approx(0.1, rel=5e-3)


def _final_spin(values, mode="vjp"):
    model, state = _rod(spin=1.0, mode=mode, spring_stiffness=1.0, armature=0.2,
                        friction_loss=0.1)
    model = model.replace(joint=model.joint.replace(
        spring_stiffness=values[0:1], armature=values[1:2], friction_loss=values[2:3]))
    final, _, info = jc.rollout(model, state, steps=200, return_info=True)
    return final.ang_vel[0, 2], jnp.all(info.converged)


PROPERTIES = (1.0, 0.2, 0.1)     # spring stiffness, armature, friction loss


def test_gradients_in_the_properties_match_central_differences():
    out = gradient_checks(_final_spin, jnp.array(PROPERTIES))
    assert bool(out["aux"])
    np.testing.assert_allclose(out["reverse"], out["central"], rtol=1e-5)
    # more friction loss, a slower spin at the end
    assert out["reverse"][2] < 0.0


@pytest.mark.slow   # the forward rule's own program (6 s more)
def test_gradients_in_the_properties_match_forward_mode():
    out = gradient_checks(_final_spin, jnp.array(PROPERTIES), forward=True)
    assert out["along"] == pytest.approx(out["reverse_along"], rel=1e-9)


def test_dual_refuses_friction_loss_and_bad_arguments_are_named():
    scene = jc.Scene(dt=DT)
    rod = scene.add_body(1.0, (0.1, 0.1, 0.1))
    other = scene.add_body(1.0, (0.1, 0.1, 0.1), pos=(1.0, 0.0, 0.0))
    hinge = scene.add_joint("hinge", rod, -1, anchor=(0.0, 0.0, 0.0), stiffness=1e4)
    ball = scene.add_joint("ball", other, rod, anchor=(0.5, 0.0, 0.0), stiffness=1e4)
    for kwargs, name in (({"joint": 7}, "joint"), ({"joint": ball}, "joint"),
                         ({"joint": hinge, "armature": -1.0}, "armature"),
                         ({"joint": hinge, "friction_loss": -0.1}, "friction_loss"),
                         ({"joint": hinge, "spring_stiffness": -2.0}, "spring_stiffness")):
        with pytest.raises(ValueError, match=name):
            scene.add_joint_properties(**kwargs)
    scene.add_joint_properties(hinge, friction_loss=0.1)
    with pytest.raises(ValueError, match="friction loss"):
        scene.build(solver=jc.Dual())
