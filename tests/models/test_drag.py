"""Linear drag on particles (`jaxcontact.models.drag`): a kind of physics added as one file,
checked against the closed form of its implicit step and its gradient against central
differences and forward mode (float64)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

DT, MASS, C, STEPS = 0.01, 0.5, 2.0, 40
G = 9.81


def _scene(mode):
    scene = jc.Scene(dt=DT)
    first = scene.add_particle(MASS, (0.0, 0.0, 1.0), vel=(1.0, 0.0, 0.0))
    second = scene.add_particle(2 * MASS, (1.0, 0.0, 1.0))
    scene.add_drag([first, second], C)
    return scene.build(solver=jc.Newton(ad=mode))


@functools.partial(jax.jit, static_argnames="mode")
def _final_velocity(coefficient, mode="vjp"):
    model, state = _scene(mode)
    model = model.replace(drag=model.drag.replace(
        coefficient=jnp.full_like(model.drag.coefficient, coefficient)))
    final, _, info = jc.rollout(model, state, steps=STEPS, return_info=True)
    return final.particle_vel, info.converged


def _closed_form(coefficient, mass, v0):
    """v⁺ = (v + Δt g) / (1 + Δt c/m), STEPS times (module docstring of models/drag.py)."""
    v = np.asarray(v0, float)
    for _ in range(STEPS):
        v = (v + DT * np.array([0.0, 0.0, -G])) / (1.0 + DT * coefficient / mass)
    return v


def test_drag_steps_follow_the_implicit_closed_form_toward_terminal_velocity():
    vel, converged = _final_velocity(C)
    assert bool(jnp.all(converged))
    np.testing.assert_allclose(vel[0], _closed_form(C, MASS, (1.0, 0.0, 0.0)), rtol=1e-10)
    np.testing.assert_allclose(vel[1], _closed_form(C, 2 * MASS, (0.0, 0.0, 0.0)), rtol=1e-10)
    # the fall slows toward m g / c, and never passes it
    assert -MASS * G / C < float(vel[0, 2]) < 0.0
    assert float(vel[0, 2]) < -0.5 * MASS * G / C


def test_drag_gradient_matches_central_differences_and_forward_mode():
    def speed(c, mode="vjp"):
        return _final_velocity(c, mode)[0][0, 2]

    reverse = float(jax.grad(speed)(C))
    forward = float(jax.jvp(lambda c: speed(c, "jvp"), (C,), (1.0,))[1])
    h = 1e-5
    central = (float(speed(C + h)) - float(speed(C - h))) / (2 * h)
    assert reverse == pytest.approx(central, rel=1e-6)
    assert forward == pytest.approx(reverse, rel=1e-9)
    assert reverse > 0.0   # more drag, a slower fall (a less negative velocity)


@pytest.mark.parametrize("kwargs, message", [
    ({"particles": 5, "coefficient": 1.0}, "particles"),
    ({"particles": [0], "coefficient": -1.0}, "coefficient"),
])
def test_bad_drag_arguments_name_the_argument(kwargs, message):
    scene = jc.Scene()
    scene.add_particle(1.0, (0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match=message):
        scene.add_drag(**kwargs)
