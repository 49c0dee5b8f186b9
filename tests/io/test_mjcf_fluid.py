"""MJCF import of MuJoCo's fluid forces (`jaxcontact.io.mjcf_fluid`, `models.fluid`): welded
bodies in a fluid with a wind against MuJoCo's own simulation, the ellipsoid model named as
not imported, the three fluid models of gymnasium and dm_control imported, and gymnasium's
swimmer against MuJoCo."""

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.io.mjcf_fluid import box_half_sizes
from jaxcontact.math import quat_rotate

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")

# a free body of two welded boxes (one compound body of ours, two boxes for the fluid),
# turned off the world axes, in a dense viscous fluid with a wind, without gravity
COMPOUND = """<mujoco><option gravity="0 0 0" density="1200" viscosity="0.5"
wind="1.0 -0.5 0.3" integrator="Euler" timestep="{dt}"/>
<worldbody><body name="a" pos="0 0 1" euler="10 20 30"><freejoint/>
<geom type="box" size="0.2 0.1 0.05" mass="2"/>
<body name="b" pos="0.3 0.1 0" euler="0 30 45"><geom type="box" size="0.05 0.15 0.1" mass="1"/>
</body></body></worldbody></mujoco>"""
QVEL = [0.3, 0.0, -0.2, 2.0, -1.0, 3.0]


def _mujoco_centres(m, qvel, seconds, ctrl=None):
    """MuJoCo's rollout of m (its integrator and time step): the centres of mass of its
    bodies (steps, nbody - 1, 3)."""
    d = mujoco.MjData(m)
    if qvel is not None:
        d.qvel[:] = qvel
    if ctrl is not None:
        d.ctrl[:] = ctrl
    mujoco.mj_forward(m, d)
    out = []
    for _ in range(int(round(seconds / m.opt.timestep))):
        mujoco.mj_step(m, d)
        mujoco.mj_kinematics(m, d)     # (mj_step leaves the poses of the step's start)
        out.append(d.xipos[1:].copy())
    return np.array(out)


def test_welded_bodies_in_a_fluid_with_wind_move_as_in_mujoco():
    """Each MuJoCo body is one box of our compound body, at its own centre and axes, with
    MuJoCo's half sizes; nothing is named. Over 1 s at Δt = 1 ms (MuJoCo's semi-implicit
    Euler, ours implicit in the velocities) both bodies' centres of mass stay within 3 mm
    of MuJoCo's (measured 2.2 mm) while they travel 0.95 m: the difference is first order
    in Δt, the two integrators' (measured 22, 2.2 and 0.22 mm at Δt = 10, 1 and 0.1 ms), so
    the forces are MuJoCo's."""
    m = mujoco.MjModel.from_xml_string(COMPOUND.format(dt=1e-3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(m, qvel=QVEL)
    model, state = scene.build()
    fluid = model.fluid
    assert fluid.body == (0, 0) and fluid.own == (False, False)
    for element, b in enumerate((1, 2)):
        np.testing.assert_allclose(np.asarray(fluid.half_size[element]),
                                   box_half_sizes(m.body_mass[b], m.body_inertia[b]),
                                   rtol=1e-12, err_msg="half_size")
    np.testing.assert_allclose(np.asarray(fluid.density), 1200.0)
    np.testing.assert_allclose(np.asarray(fluid.wind), [[1.0, -0.5, 0.3]] * 2)
    # the 0.4 x 0.2 x 0.1 m box of 2 kg is its own equivalent inertia box
    np.testing.assert_allclose(box_half_sizes(m.body_mass[1], m.body_inertia[1]),
                               [0.2, 0.1, 0.05], rtol=1e-12)
    expected = _mujoco_centres(m, QVEL, 1.0)
    _, traj = jax.jit(lambda mo, s: jc.rollout(mo, s, steps=1000))(model, state)
    ours = np.asarray(traj.pos[:, :1] + quat_rotate(traj.quat[:, :1], fluid.offset[None]))
    assert np.linalg.norm(expected[-1, 0] - expected[0, 0]) > 0.9     # the wind carries it
    distance = np.linalg.norm(ours - expected, axis=-1)
    assert np.max(distance) < 3e-3, f"centres of mass {np.max(distance):.3g} m from MuJoCo's"


def test_mujocos_ellipsoid_fluid_model_is_named_and_its_body_left_out():
    """A body with a geom of fluidshape="ellipsoid" takes MuJoCo's ellipsoid model (and
    not the inertia model): it is named, the other body gets the inertia model."""
    xml = """<mujoco><option density="1.2" viscosity="1.8e-5"/><worldbody>
    <body name="plain"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body name="wing" pos="1 0 0"><freejoint/>
    <geom type="box" size="0.2 0.1 0.01" fluidshape="ellipsoid"/></body>
    </worldbody></mujoco>"""
    with pytest.warns(jc.io.MjcfWarning, match="'wing': MuJoCo's ellipsoid fluid model"):
        scene, info = jc.io.load_mjcf(xml)
    assert [r.body for r in scene.records("fluid")] == [info.body["plain"]]
    assert not any("fluid" in s and "'wing'" not in s for s in info.skipped)


def _fluid_models():
    gymnasium = pytest.importorskip("gymnasium", reason="the gymnasium package ships "
                                                        "swimmer.xml")
    yield "gymnasium swimmer", mujoco.MjModel.from_xml_path(os.path.join(
        os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "swimmer.xml"))
    suite = pytest.importorskip("dm_control.suite", reason="dm_control ships its suite's "
                                                           "swimmer and fish")
    for domain, task in (("swimmer", "swimmer6"), ("fish", "swim")):
        yield f"dm_control {domain}", suite.load(domain, task).physics.model._model


def test_gymnasium_and_dm_control_fluid_models_import_their_fluid():
    """gymnasium's swimmer and dm_control's swimmer and fish: every moving body of positive
    mass gets MuJoCo's density, viscosity and wind, and no fluid force is named."""
    for name, m in _fluid_models():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jc.io.MjcfWarning)
            scene, info = jc.io.load_mjcf(m)
        assert not any("fluid" in s for s in info.skipped), name
        records = scene.records("fluid")
        assert len(records) == int(np.sum(m.body_mass[1:] > 0)), name
        for r in records:
            assert (r.density, r.viscosity) == (m.opt.density, m.opt.viscosity), name
            np.testing.assert_array_equal(r.wind, m.opt.wind, err_msg=name)


@pytest.mark.slow
def test_gymnasium_swimmer_swims_as_in_mujoco():
    """gymnasium's swimmer (density 4000, viscosity 0.1) at ctrl (0.5, -0.5) from rest,
    0.4 s at its Δt = 10 ms, against MuJoCo with its semi-implicit Euler integrator at the
    same Δt (the file asks for RK4, which a first-order step is not compared with): the
    three segments' centres of mass stay within 15 mm of MuJoCo's in the plane (measured
    11.6 mm; 5.5 and 4.4 mm at Δt = 2 and 0.5 ms, where what remains is the import's own
    difference: without the fluid in either, ours and MuJoCo's differ by 27, 18 and 20 mm)
    while they travel 0.24 m. Without the fluid they travel 0.37 m: a missing or wrong
    fluid force would show. (0.4 s: the joints reach their ±100° limits at 0.5 s, whose
    soft laws differ.)"""
    gymnasium = pytest.importorskip("gymnasium", reason="the gymnasium package ships "
                                                        "swimmer.xml")
    m = mujoco.MjModel.from_xml_path(os.path.join(
        os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "swimmer.xml"))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    ctrl, seconds = np.array([0.5, -0.5]), 0.4
    expected = _mujoco_centres(m, None, seconds, ctrl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(m)
    model, state = scene.build()
    _, traj, steps = jax.jit(lambda mo, s: jc.rollout(
        mo, s, steps=int(round(seconds / m.opt.timestep)), return_info=True,
        policy=lambda p, x: info.control(mo, x, p), policy_params=jnp.asarray(ctrl)))(
            model, state)
    assert bool(jnp.all(steps.converged))
    ids = [info.body[n] for n in ("torso", "mid", "back")]
    ours = np.asarray(traj.pos[:, ids])
    assert np.max(np.linalg.norm(expected - expected[0], axis=-1)) > 0.2
    distance = np.linalg.norm(ours[..., :2] - expected[..., :2], axis=-1)
    assert np.max(distance) < 15e-3, f"centres of mass {np.max(distance):.3g} m from MuJoCo's"
