"""Observations for policies (`jc.observe`, jaxcontact/observe.py): velocities in the world
and body frames, positions, orientations, contacts and time, with bad arguments named; and the
contact points of a resting ball (the viewer's rollout, `tests._helpers.falling_and_resting`).
"""

import jax
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import observe
from tests._helpers import VIEW, falling_and_resting

MASS, STIFFNESS, G = VIEW.mass, VIEW.stiffness, VIEW.g


@pytest.fixture(scope="module")
def run():
    return falling_and_resting()


def test_observations_in_world_and_body_frames():
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.05))
    # a box 0.3 m up, turned 90 degrees about z, moving along world x
    scene.add_box(0.05, 1.0, pos=(0.5, 0.0, 0.3), quat=(np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)),
                  vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 2.0))
    model, state = scene.build()
    world = jc.observe.velocities(state, flat=False)
    body = jc.observe.velocities(state, frame="body", flat=False)
    np.testing.assert_allclose(world[1], [1, 0, 0, 0, 0, 2], atol=1e-12)
    # in the turned body's frame world x is the body's -y; the spin axis z is unchanged
    np.testing.assert_allclose(body[1], [0, -1, 0, 0, 0, 2], atol=1e-12)
    np.testing.assert_allclose(jc.observe.positions(state, [1], relative_to=(0.5, 0, 0)),
                               [0, 0, 0.3], atol=1e-12)
    np.testing.assert_allclose(jc.observe.orientations(state, representation="up"),
                               [0, 0, 1, 0, 0, 1], atol=1e-12)
    touching = jax.jit(lambda s: jc.observe.contacts(model, s, margin=1e-3))(state)
    assert touching.tolist() == [True, False]
    assert jc.observe.time(state).shape == (1,)
    for bad in (dict(frame="imu"), dict(bodies=[2])):
        with pytest.raises(ValueError, match=list(bad)[0]):
            jc.observe.velocities(state, **bad)
    with pytest.raises(ValueError, match="margin"):
        jc.observe.contacts(model, state, margin=-1.0)


def test_contact_points_of_the_resting_ball(run):
    found = observe.contact_points(run.model, run.final)
    np.testing.assert_allclose(found.point, [[0.5, 0.0, -MASS * G / STIFFNESS / 2]], atol=1e-6)
    np.testing.assert_allclose(found.normal, [[0.0, 0.0, 1.0]], atol=1e-12)
    np.testing.assert_allclose(found.gap, [-MASS * G / STIFFNESS], rtol=1e-3)
    np.testing.assert_allclose(found.force, [MASS * G], rtol=1e-3)
    # with a margin, sphere A's row (0.54 m above the ground) counts too
    both = observe.contact_points(run.model, run.final, margin=1.0)
    assert len(both.gap) == 2 and both.force[np.argmax(both.gap)] == 0.0
    with pytest.raises(ValueError, match="margin must be a number >= 0, got -1"):
        observe.contact_points(run.model, run.final, margin=-1)
    with pytest.raises(ValueError, match="index the time or batch axis first"):
        observe.contact_points(run.model, run.traj)
