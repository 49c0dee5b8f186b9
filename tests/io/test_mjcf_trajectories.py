"""gymnasium's robots against MuJoCo's own simulation of the same file (issue 65): the reacher
driven by a constant ctrl, and the walker's passive fall, compared in MuJoCo's coordinates
(`jc.control.coordinates.MjcfCoordinates`) at a small time step, MuJoCo's Euler against our
implicit step."""

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.control.coordinates import MjcfCoordinates

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package")
gymnasium = pytest.importorskip("gymnasium", reason="the gymnasium package ships the files")
ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def _both(name, dt, seconds, qpos=None, qvel=None, ctrl=None):
    """(MuJoCo's qpos (T, nq), ours (T, nq)) of `seconds` at `dt` from (qpos, qvel)."""
    path = os.path.join(ASSETS, name)
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep, m.opt.integrator = dt, mujoco.mjtIntegrator.mjINT_EULER
    d = mujoco.MjData(m)
    qpos = m.qpos0.copy() if qpos is None else np.asarray(qpos, float)
    qvel = np.zeros(m.nv) if qvel is None else np.asarray(qvel, float)
    ctrl = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, float)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    steps = int(round(seconds / dt))
    theirs = []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        theirs.append(d.qpos.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(path, dt=dt, qpos=qpos, qvel=qvel)
    model, state = scene.build()
    coords = MjcfCoordinates(info, model, state, qpos=qpos)
    c = jnp.asarray(ctrl)
    _, traj, infos = jax.jit(lambda s: jc.rollout(
        model, s, steps=steps, policy=lambda _, x: info.control(model, x, c),
        return_info=True))(state)
    assert bool(jnp.all(infos.converged))
    ours = np.stack([np.asarray(coords.qpos(jax.tree.map(lambda a, i=i: a[i], traj)))
                     for i in range(0, steps)])
    return np.array(theirs), ours


@pytest.mark.slow    # 40 s
def test_reacher_driven_by_a_constant_ctrl_follows_mujoco():
    """gymnasium's reacher (two hinges in a plane, its target on two slides) from a swing
    under ctrl (0.01, -0.005) (gear 200: 2 and 1 N m): both arm angles, each moving over more
    than a radian, within 1e-4 rad of MuJoCo's (the shoulder's modulo a turn) over 1 s at
    Δt = 1 ms. (Measured 5e-7: its joints' damping dominates its light links' inertia, and
    both integrators take damping implicitly.)"""
    theirs, ours = _both("reacher.xml", 1e-3, 1.0, qvel=[1.0, -2.0, 0.0, 0.0],
                         ctrl=[0.01, -0.005])
    turned = np.angle(np.exp(1j * (ours[:, :2] - theirs[:, :2])))
    error = np.max(np.abs(turned), axis=0)
    assert np.all(np.ptp(theirs[:, :2], axis=0) > 1.0)      # (both joints move over a radian)
    assert np.all(error < 1e-4), error


@pytest.mark.slow    # 40 s
def test_walker_falls_as_mujoco_until_it_lands():
    """gymnasium's walker2d released 0.3 m above its start, passive: its root height and
    pitch and its six joint angles within 5 mm and 0.02 rad of MuJoCo's while it falls
    (0.2 s at Δt = 1 ms, before its feet reach the floor)."""
    m = mujoco.MjModel.from_xml_path(os.path.join(ASSETS, "walker2d.xml"))
    qpos = m.qpos0.copy()
    qpos[1] += 0.3
    theirs, ours = _both("walker2d.xml", 1e-3, 0.2, qpos=qpos, qvel=np.r_[0.0, 0.0, 0.5,
                                                                           np.zeros(6)])
    assert np.max(np.abs(ours[:, 1] - theirs[:, 1])) < 5e-3
    assert np.max(np.abs(ours[:, 2:] - theirs[:, 2:])) < 0.02
