"""MJCF import of tendons, equality constraints and actuators (`jaxcontact.io.mjcf_actuation`)
against MuJoCo's own simulation of the same files, and dm_control's models that use them."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")

DT = 5e-4

# a cart on a slide carrying a two-link arm (hinges about y): a fixed tendon over both hinges
# with a spring, damping and a range; a geared position servo on the slide, a velocity servo
# on the elbow and a force-limited motor on the tendon
ARM = """<mujoco><compiler angle="radian"/><option timestep="0.0005"/>
<worldbody><body name="cart" pos="0 0 1"><joint name="slide" type="slide" axis="1 0 0"/>
<geom type="box" size="0.1 0.05 0.05" mass="1" contype="0" conaffinity="0"/>
<body name="arm"><joint name="shoulder" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="0.5" contype="0" conaffinity="0"/>
<body name="fore" pos="0 0 -0.5"><joint name="elbow" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02" mass="0.3" contype="0" conaffinity="0"/>
</body></body></body></worldbody>
<tendon><fixed name="bend" stiffness="2" damping="0.1" limited="true" range="-0.4 0.4">
<joint joint="shoulder" coef="1"/><joint joint="elbow" coef="0.5"/></fixed></tendon>
<actuator><position name="servo" joint="slide" kp="50" kv="5" gear="2"/>
<velocity name="spin" joint="elbow" kv="0.2"/>
<motor name="pull" tendon="bend" gear="3" forcelimited="true" forcerange="-0.5 0.5"/>
</actuator></mujoco>"""

# two pendulums whose hinges an equality couples (θ2 = 0.5 θ1) and a ball hanging from the
# world on a string (a spatial tendon between two sites, limited to 0.3 m)
COUPLED = """<mujoco><compiler angle="radian"/><option timestep="0.0005"/>
<worldbody><site name="hook" pos="1 0 1"/>
<body name="p1" pos="0 0 1"><joint name="h1" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/></body>
<body name="p2" pos="0 0.5 1"><joint name="h2" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/></body>
<body name="ball" pos="1.2 0 0.8"><freejoint/><site name="knot"/>
<geom type="sphere" size="0.03" mass="0.1" contype="0" conaffinity="0"/></body>
</worldbody>
<tendon><spatial name="string" limited="true" range="0 0.3"><site site="hook"/>
<site site="knot"/></spatial></tendon>
<equality><joint joint1="h2" joint2="h1" polycoef="0 0.5 0 0 0"/></equality></mujoco>"""


def _mujoco(source, qpos, steps, ctrl=()):
    m = mujoco.MjModel.from_xml_string(source)
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    d.ctrl[:] = ctrl
    out = []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.array(out)


def _ours(source, qpos, steps, ctrl=()):
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)     # everything is imported
        scene, info = jc.io.load_mjcf(source, qpos=qpos)
    model, state = scene.build()
    control = info.control(model, state, jnp.asarray(ctrl, jnp.float64))
    controls = jax.tree.map(lambda a: jnp.broadcast_to(a, (steps,) + a.shape), control)
    _, traj, infos = jax.jit(lambda s, c: jc.rollout(model, s, c, return_info=True))(state,
                                                                                      controls)
    assert bool(jnp.all(infos.converged))
    return traj, info


def _hinge_angle(traj, body, pivot):
    """The angle about +y of a body hanging from `pivot` (x, z), from its centre of mass."""
    pos = np.asarray(traj.pos[:, body])
    return np.arctan2(-(pos[:, 0] - pivot[0]), -(pos[:, 2] - pivot[1]))


def test_tendon_and_servos_drive_the_arm_as_mujoco_does():
    """The cart's servo (gear 2, kp 50, kv 5), the elbow's velocity servo and the tendon's
    force-limited motor, with the tendon's spring, damping and range: the cart and both
    joint angles stay within 1 mm, 0.007 rad and 0.01 rad of MuJoCo's over 1 s at
    Δt = 0.5 ms."""
    qpos, ctrl, steps = [0.0, 0.3, -0.2], [0.1, 0.5, 0.8], 2000
    q_mj = _mujoco(ARM, qpos, steps, ctrl)
    traj, info = _ours(ARM, qpos, steps, ctrl)
    assert set(info.motor) == {"servo", "spin", "pull"}
    cart = np.asarray(traj.pos[:, info.body["cart"], 0])
    arm_com = np.asarray(traj.pos[:, info.body["arm"]])
    shoulder = np.arctan2(-(arm_com[:, 0] - cart), -(arm_com[:, 2] - 1.0))
    fore = np.asarray(traj.pos[:, info.body["fore"]])
    elbow_point = np.stack([cart - 0.5 * np.sin(shoulder), 1.0 - 0.5 * np.cos(shoulder)], 1)
    elbow = np.arctan2(-(fore[:, 0] - elbow_point[:, 0]), -(fore[:, 2] - elbow_point[:, 1]))
    elbow = elbow - shoulder
    err = {"cart": np.max(np.abs(cart - q_mj[:, 0])),
           "shoulder": np.max(np.abs(shoulder - q_mj[:, 1])),
           "elbow": np.max(np.abs(elbow - q_mj[:, 2]))}
    # the servo's target: ctrl / gear
    assert abs(q_mj[-1, 0] - 0.05) < 0.01
    # (measured: 0.44 mm, 0.0034 rad and 0.0052 rad; first order in Δt, implicit against
    # MuJoCo's semi-implicit Euler)
    assert err["cart"] < 1e-3 and err["shoulder"] < 0.007 and err["elbow"] < 0.01


def test_a_joint_equality_and_a_string_hold_as_mujoco_does():
    """θ2 = 0.5 θ1 (a joint equality, MuJoCo's solref/solimp mapped to a stiff tendon) and a
    ball on a 0.3 m string from a world site (a distance joint): the coupling holds within
    1e-4 rad, the angles within 0.008 rad of MuJoCo's and the ball within 1 cm over 1 s at
    Δt = 0.5 ms."""
    qpos = [0.4, 0.2, 1.2, 0.0, 0.8, 1.0, 0.0, 0.0, 0.0]
    steps = 2000
    q_mj = _mujoco(COUPLED, qpos, steps)
    traj, info = _ours(COUPLED, qpos, steps)
    t1 = _hinge_angle(traj, info.body["p1"], (0.0, 1.0))
    t2 = _hinge_angle(traj, info.body["p2"], (0.0, 1.0))
    ball = np.asarray(traj.pos[:, info.body["ball"]])
    err = {"h1": np.max(np.abs(t1 - q_mj[:, 0])), "h2": np.max(np.abs(t2 - q_mj[:, 1])),
           "coupling": np.max(np.abs(t2 - 0.5 * t1)),
           "ball": np.max(np.linalg.norm(ball - q_mj[:, 2:5], axis=1)),
           "string": np.max(np.linalg.norm(ball - [1.0, 0.0, 1.0], axis=1))}
    # (measured: coupling 2.3e-5 rad, angles 0.0037 and 0.0019 rad, the ball 4.6 mm, the
    # string stretched 1 mm past 0.3 m at most)
    assert err["coupling"] < 1e-4 and err["h1"] < 0.008 and err["h2"] < 0.004
    assert err["string"] < 0.302 and err["ball"] < 0.01


def test_dm_controls_tendon_models_import_their_tendons_equalities_and_actuators():
    """dm_control's point_mass, manipulator, stacker, fish and quadruped: nothing about their
    tendons, equalities or actuators is named as not imported except activation dynamics,
    and every actuator has its motor."""
    suite = pytest.importorskip("dm_control.suite", reason="dm_control's models")
    for domain, task in (("point_mass", "easy"), ("manipulator", "bring_ball"),
                         ("stacker", "stack_2"), ("fish", "swim"), ("quadruped", "walk")):
        m = suite.load(domain, task).physics.model._model
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jc.io.MjcfWarning)
            scene, info = jc.io.load_mjcf(m)
        lines = [s for s in info.skipped if "activation dynamics" not in s]
        assert not [s for s in lines if any(w in s for w in ("tendon", "equality", "actuator"))]
        assert len(info.motor) + sum(k in ("hinge", "slider") for _, k, _, _ in info.actuators) \
            == m.nu


ACTIVATED = """<mujoco><compiler angle="radian"/><option timestep="0.0005"/>
<worldbody><body name="pole" pos="0 0 1"><joint name="hinge" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/>
</body></worldbody>
<actuator><general name="slow" joint="hinge" dyntype="filter" dynprm="0.05" gainprm="3"/>
<general name="ramp" joint="hinge" dyntype="integrator" gainprm="1" actlimited="true"
 actrange="-0.5 0.5"/></actuator></mujoco>"""


def test_activation_dynamics_follow_mujocos_act():
    """A filter (τ = 50 ms) and a limited integrator on a pendulum's hinge: `activate` steps
    MuJoCo's act exactly (1e-12), and driven by it (`control(..., act=)`) the pendulum, swung
    up to 2.78 rad, stays within 0.035 rad of MuJoCo's over 0.5 s at Δt = 0.5 ms (measured
    0.026; 0.018 at 0.1 ms: not first order in Δt, the soft pivot's stretch at 10 rad/s)."""
    steps, ctrl = 1000, np.array([1.0, 2.0])
    m = mujoco.MjModel.from_xml_string(ACTIVATED)
    d = mujoco.MjData(m)
    d.ctrl[:] = ctrl
    acts, q_mj = [], []
    for _ in range(steps):
        acts.append(d.act.copy())
        mujoco.mj_step(m, d)
        q_mj.append(d.qpos[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(ACTIVATED)
    model, state = scene.build()
    ctrl = jnp.asarray(ctrl)

    def one(carry, _):
        s, act = carry
        s, _ = jc.step(model, s, info.control(model, s, ctrl, act=act))
        return (s, info.activate(act, ctrl)), (s.pos[0], act)

    _, (pos, act) = jax.jit(lambda s: jax.lax.scan(one, (s, jnp.zeros(m.na)), None,
                                                   length=steps))(state)
    np.testing.assert_allclose(np.asarray(act), np.array(acts), atol=1e-12)
    pos = np.asarray(pos)
    angle = np.arctan2(-pos[:, 0], -(pos[:, 2] - 1.0))
    assert np.max(np.abs(angle - np.array(q_mj))) < 0.035
