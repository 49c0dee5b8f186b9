"""MJCF import (`jc.io.from_mjcf`, `jc.io.load_mjcf`) against MuJoCo's own compiler and
simulator, on small models written here and on the MJCF files shipped with gymnasium."""

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")

PENDULUM = """<mujoco><option timestep="0.002"/>
<worldbody><body name="pole" pos="0 0 1"><joint name="hinge" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1"/></body></worldbody>
</mujoco>"""

DT = 0.002


def _assets():
    gymnasium = pytest.importorskip("gymnasium", reason="the gymnasium package ships the "
                                                        "MJCF models of these tests")
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def _mujoco_run(source, qpos, seconds, dt, ctrl=None):
    """MuJoCo's own rollout of the same file (its integrator, time step `dt`, constant
    `ctrl`): (t, qpos)."""
    m = (mujoco.MjModel.from_xml_string(source) if source.lstrip().startswith("<")
         else mujoco.MjModel.from_xml_path(source))
    m.opt.timestep = dt
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    if ctrl is not None:
        d.ctrl[:] = ctrl
    mujoco.mj_forward(m, d)
    t, q = [], []
    for _ in range(int(round(seconds / dt))):
        mujoco.mj_step(m, d)
        t.append(d.time)
        q.append(d.qpos.copy())
    return np.array(t), np.array(q)


def _ours(source, qpos, seconds, dt=DT):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(source, qpos=qpos, dt=dt)
    model, state = scene.build()
    _, traj, infos = jax.jit(lambda m, s: jc.rollout(m, s, steps=int(round(seconds / dt)),
                                                     return_info=True))(model, state)
    return traj, infos, info


def _period(t, x):
    down = np.nonzero((x[:-1] > 0) & (x[1:] <= 0))[0]
    crossing = t[down] + (t[down + 1] - t[down]) * x[down] / (x[down] - x[down + 1])
    return float(np.mean(np.diff(crossing)))


def test_pendulum_matches_mujoco():
    """A 0.5 m capsule pendulum released at 0.5 rad: period within 0.2 % and angle within
    0.015 rad of MuJoCo's over 1 s (ours: implicit Euler, whose numerical damping is most of
    the difference; MuJoCo: its default semi-implicit Euler, both at dt = 2 ms)."""
    t_mj, q_mj = _mujoco_run(PENDULUM, [0.5], 2.0, DT)
    traj, infos, _ = _ours(PENDULUM, [0.5], 2.0)
    assert bool(jnp.all(jnp.isfinite(traj.pos)))
    pos, t = np.asarray(traj.pos[:, 0]), np.asarray(traj.time)
    # a turn θ about +y takes the hanging direction (0, 0, -1) to (-sin θ, 0, -cos θ)
    angle = np.arctan2(-pos[:, 0], -(pos[:, 2] - 1.0))
    assert abs(_period(t, angle) / _period(t_mj, q_mj[:, 0]) - 1.0) < 2e-3
    first = t <= 1.0
    assert np.max(np.abs(angle - np.interp(t, t_mj, q_mj[:, 0]))[first]) < 0.015
    assert float(jnp.mean(infos.converged)) > 0.99


@pytest.mark.slow  # 18 s; CI: the pendulum, hinge torque and ball joint against MuJoCo
def test_gymnasium_cartpole_matches_mujoco():
    """gymnasium's inverted_pendulum.xml (a cart on a slider, a pole on a hinge limited to
    ±90°, joint damping 1) released at 0.2 rad: the pole falls onto its limit at 0.6 s.
    Against MuJoCo's (RK4, as the file says), both at dt = 2 ms: cart position within 2 mm
    over 1 s; pole angle within 0.01 rad while it falls and once it rests on the limit
    (t > 0.85 s), the limit holding the pole as MuJoCo's soft limit does (its solref and
    solimp mapped to a static stiffness and a damping ratio, `io.mjcf`). In between, within
    0.04 rad: MuJoCo's limit, as stiff at rest, is 4.5 times slower in its transient."""
    path = os.path.join(_assets(), "inverted_pendulum.xml")
    t_mj, q_mj = _mujoco_run(path, [0.0, 0.2], 1.0, DT)
    traj, infos, info = _ours(path, [0.0, 0.2], 1.0)
    cart, pole = info.body["cart"], info.body["pole"]
    pos, t = np.asarray(traj.pos), np.asarray(traj.time)
    lever = pos[:, pole] - pos[:, cart]
    angle = np.arctan2(lever[:, 0], lever[:, 2]) - np.arctan2(0.001, 0.6)   # pole off-axis
    assert np.max(np.abs(pos[:, cart, 0] - np.interp(t, t_mj, q_mj[:, 0]))) < 2e-3
    error = np.abs(angle - np.interp(t, t_mj, q_mj[:, 1]))
    assert np.max(error[t < 0.6]) < 0.01 and np.max(error[t > 0.85]) < 0.01
    assert np.max(error) < 0.04
    assert abs(angle[-1] - np.pi / 2) < 0.01           # resting on the limit
    assert float(jnp.mean(infos.converged)) > 0.97


@pytest.mark.parametrize("name,bodies,joints,moving_geoms", [
    ("inverted_pendulum", 2, 2, 2), ("hopper", 4, 6, 4), ("ant", 9, 8, 13),
    ("half_cheetah", 7, 9, 8)])
def test_gymnasium_models_load_with_mujoco_masses(name, bodies, joints, moving_geoms):
    """Every moving body's mass is kept (welded bodies merged, several joints on one body
    carried by light chain bodies), every geom of a moving body, every actuator (all
    torque motors) and every joint's armature and spring (`add_joint_properties`) is
    imported (the warning names neither)."""
    path = os.path.join(_assets(), name + ".xml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene, info = jc.io.load_mjcf(path)
    text = "\n".join(str(w.message) for w in caught if w.category is jc.io.MjcfWarning)
    m = info.mj_model
    assert "actuator" not in text and len(info.actuators) == m.nu
    assert "armature" not in text and "stiffness" not in text, text
    model, _ = scene.build()
    hinged = [j for j in range(m.njnt) if int(m.jnt_type[j]) in (
        int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
    armature = m.dof_armature[m.jnt_dofadr[hinged]]
    ours = np.asarray(model.joint.armature)
    np.testing.assert_allclose(np.sort(ours[ours != 0]), np.sort(armature[armature != 0]))
    chain = model.n_body - len(set(info.body.values()))
    assert model.n_body - chain == bodies and len(info.joint) == joints
    assert sum(g >= 0 for g in info.geom.values()) == moving_geoms
    mass = np.asarray(model.body.mass)
    np.testing.assert_allclose(mass[:bodies].sum(), np.sum(m.body_mass), rtol=1e-12)
    assert np.all(mass[bodies:] < 0.02 * mass.max())   # the chain bodies are light


@pytest.mark.slow
def test_ant_falls_freely_until_it_lands():
    """ant.xml (a free torso, four legs of welded capsules and hinges): for 0.2 s the
    whole robot's centre of mass falls as implicit Euler's free fall, z0 - g dt² n(n+1)/2,
    whatever the joints do inside it. (Slow: a 20 s compile. In CI, gymnasium's models load
    with MuJoCo's masses and its cart-pole is simulated against MuJoCo.)"""
    path = os.path.join(_assets(), "ant.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene = jc.io.from_mjcf(path)
    model, state = scene.build()
    n = 20
    _, traj, infos = jax.jit(lambda m, s: jc.rollout(m, s, steps=n, return_info=True))(
        model, state)
    mass = model.body.mass
    com = jnp.einsum("b,tb->t", mass, traj.pos[:, :, 2]) / jnp.sum(mass)
    com0 = float(jnp.sum(mass * state.pos[:, 2]) / jnp.sum(mass))
    steps = np.arange(1, n + 1)
    g, dt = 9.81, float(model.dt)
    np.testing.assert_allclose(com, com0 - g * dt ** 2 * steps * (steps + 1) / 2, atol=1e-6)
    # every step converges: its ankles start 0.52 rad outside their limits, which diverged
    # with the limits' exact Hessian (design note 57)
    assert bool(jnp.all(infos.converged))


@pytest.mark.slow
def test_humanoid_falls_alike_in_float32_and_float64():
    """humanoid.xml's first second of passive fall (333 steps of 3 ms: it collapses onto the
    ground): every step converges in both precisions, and float32's bodies stay within 1 mm
    of float64's (measured: 1.5e-4 m at 1 s, the torso 8e-6 m; design note 57). (Slow: two
    40 s compiles.)"""
    path = os.path.join(_assets(), "humanoid.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene = jc.io.from_mjcf(path)
    paths = {}
    for dtype in (jnp.float64, jnp.float32):
        model, state = scene.build(dtype=dtype)
        steps = int(round(1.0 / float(model.dt)))
        _, traj, infos = jax.jit(lambda m, s, n=steps: jc.rollout(
            m, s, steps=n, return_info=True))(model, state)
        assert bool(jnp.all(infos.converged)), dtype
        paths[dtype] = np.asarray(traj.pos, np.float64)
    # it falls: the torso ends within 0.3 m of the ground
    assert paths[jnp.float64][-1, 0, 2] < 0.3
    gap = np.linalg.norm(paths[jnp.float32] - paths[jnp.float64], axis=-1)
    assert gap.max() < 1e-3, gap.max()


def test_welded_bodies_combine_inertia_as_mujoco_compiles_one_body():
    """Two geoms on one body and the same geoms on a body and a welded child body: the same
    mass, centre of mass and inertia (MuJoCo computes the first; we combine the second)."""
    geoms = ('<geom type="box" size="0.1 0.2 0.05" pos="0.1 0 0" density="800"/>',
             '<geom type="sphere" size="0.07" pos="-0.2 0.1 0.05" density="3000"/>')
    one = (f'<mujoco><worldbody><body pos="0 0 1" euler="10 20 30"><freejoint/>{geoms[0]}'
           f'{geoms[1]}</body></worldbody></mujoco>')
    two = (f'<mujoco><worldbody><body pos="0 0 1" euler="10 20 30"><freejoint/>{geoms[0]}'
           f'<body pos="0 0 0">{geoms[1]}</body></body></worldbody></mujoco>')
    built = [jc.io.from_mjcf(xml).build() for xml in (one, two)]
    (m1, s1), (m2, s2) = built
    assert m1.n_body == m2.n_body == 1 and len(m2.geom.shape) == 2
    np.testing.assert_allclose(m2.body.mass, m1.body.mass, rtol=1e-12)
    np.testing.assert_allclose(s2.pos, s1.pos, atol=1e-12)

    def tensor(model, state):
        from jaxcontact.math import quat_to_mat
        r = quat_to_mat(state.quat[0])
        return r @ jnp.diag(model.body.inertia[0]) @ r.T

    np.testing.assert_allclose(tensor(m2, s2), tensor(m1, s1), atol=1e-10)


def test_position_actuator_becomes_a_motor_that_holds_its_target():
    """A hinge with a position actuator (kp 50, kv 5) in zero gravity: MuJoCo's ctrl 0.4 is
    our motor target 0.4 - the angle at build (`motor_offset`), and the arm settles there."""
    xml = """<mujoco><option gravity="0 0 0" timestep="0.01"/><worldbody>
    <body name="arm" pos="0 0 0"><joint name="j" type="hinge" axis="0 0 1"/>
    <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1"/></body></worldbody>
    <actuator><position name="servo" joint="j" kp="50" kv="5"/></actuator></mujoco>"""
    scene, info = jc.io.load_mjcf(xml, qpos=[0.1])
    assert info.motor == {"servo": 0}
    np.testing.assert_allclose(info.motor_offset, [0.1])
    model, state = scene.build()
    n = 300
    controls = jc.Control(force=jnp.zeros((n, 1, 3)), torque=jnp.zeros((n, 1, 3)),
                          motor=jnp.full((n, 1), 0.4 - info.motor_offset[0]))
    final, _ = jax.jit(jc.rollout)(model, state, controls)
    com = final.pos[0]
    np.testing.assert_allclose(np.arctan2(com[1], com[0]), 0.4, atol=1e-3)


def test_what_cannot_be_imported_is_named():
    xml = """<mujoco><worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <geom name="table" type="box" size="0.5 0.5 0.02" pos="0 0 0.5"/>
    <body name="a" pos="0 0 1"><freejoint/><geom name="can" type="cylinder" size="0.05 0.1"/>
    <geom type="sphere" size="0.05" pos="0.2 0 0"/></body>
    <body name="b" pos="1 0 1"><freejoint/><geom type="sphere" size="0.05"/></body>
    </worldbody><contact><pair geom1="can" geom2="floor"/></contact></mujoco>"""
    with pytest.warns(jc.io.MjcfWarning) as caught:
        scene, info = jc.io.load_mjcf(xml)
    text = str(caught[0].message)
    assert "1 explicit contact pair(s)" in text
    # the cylinder (a convex mesh) and the static table (an obstacle) are imported
    assert "'can'" not in text and "'table'" not in text
    with pytest.raises(ValueError, match="contact pair"):
        jc.io.load_mjcf(xml, unsupported="raise")
    model, _ = scene.build()
    assert model.n_body == 2 and len(model.geom.shape) == 3 and model.plane.offset.shape == (1,)
    assert len(model.obstacle.grid) == 1


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        jc.io.from_mjcf(tmp_path / "missing.xml")
    with pytest.raises(ValueError, match="MuJoCo could not compile"):
        jc.io.from_mjcf("<mujoco><worldbody><body><geom type='sphere'/></body>")
    with pytest.raises(ValueError, match="qpos"):
        jc.io.load_mjcf(PENDULUM, qpos=[0.0, 1.0])
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM)
    a, b = jc.io.from_mjcf(str(path)).build(), jc.io.from_mjcf(PENDULUM).build()
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "half_cheetah"])
def test_planar_gymnasium_robots_fall_onto_the_floor(name):
    """hopper and half_cheetah (root x / z / pitch joints in series on the torso, carried by
    light chain bodies) dropped passively for 0.5 s: finite, they land on the floor without
    sinking into it, and the root stays in its plane (y = 0). (In CI: the models load with
    MuJoCo's masses, `test_gymnasium_models_load_with_mujoco_masses`.)"""
    path = os.path.join(_assets(), name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene = jc.io.from_mjcf(path)
    model, state = scene.build()
    n = int(round(0.5 / float(model.dt)))
    _, traj, infos = jax.jit(lambda m, s: jc.rollout(m, s, steps=n, return_info=True))(
        model, state)
    assert bool(jnp.all(jnp.isfinite(traj.pos)))
    assert float(jnp.max(infos.max_penetration)) < 0.01
    assert int(jnp.max(infos.active_contacts)) > 0
    assert float(jnp.max(jnp.abs(traj.pos[:, :, 1]))) < 1e-3
    # measured 96 % (hopper) and 90 % (half_cheetah): the rest stall near the rounding
    # level at the iteration cap (issue 11, point 7)
    assert float(jnp.mean(infos.converged)) >= 0.85


@pytest.mark.slow  # 18 s; CI: test_hinge_torque_actuator_matches_mujoco
def test_torque_actuators_drive_like_mujoco():
    """gymnasium's cart-pole driven by its slide motor (gear 100) at ctrl 0.3 from upright:
    the cart accelerates and the pole falls back; cart position within 2 mm and pole angle
    within 0.01 rad of MuJoCo's over 0.5 s; ctrl beyond ctrlrange (±3) is clamped."""
    path = os.path.join(_assets(), "inverted_pendulum.xml")
    t_mj, q_mj = _mujoco_run(path, [0.0, 0.0], 0.5, DT, ctrl=[0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(path, dt=DT)
    model, state = scene.build()
    control = info.control(model, state, jnp.array([0.3]))
    cart, pole = info.body["cart"], info.body["pole"]
    np.testing.assert_allclose(control.force[cart], [30.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(control.force[pole], 0.0, atol=1e-12)
    clamped = info.control(model, state, jnp.array([10.0]))
    np.testing.assert_allclose(clamped.force[cart, 0], 300.0)
    _, traj = jax.jit(lambda m, s: jc.rollout(
        m, s, steps=int(round(0.5 / DT)),
        policy=lambda p, x: info.control(m, x, p), policy_params=jnp.array([0.3])))(
            model, state)
    pos, t = np.asarray(traj.pos), np.asarray(traj.time)
    lever = pos[:, pole] - pos[:, cart]
    angle = np.arctan2(lever[:, 0], lever[:, 2]) - np.arctan2(0.001, 0.6)
    assert q_mj[-1, 0] > 0.1 and q_mj[-1, 1] < -0.1
    assert np.max(np.abs(pos[:, cart, 0] - np.interp(t, t_mj, q_mj[:, 0]))) < 2e-3
    assert np.max(np.abs(angle - np.interp(t, t_mj, q_mj[:, 1]))) < 0.01


def test_hinge_torque_actuator_matches_mujoco():
    """The pendulum with a torque motor (gear 2) at ctrl 0.5, a constant 1 N m about the
    hinge: angle within 0.015 rad of MuJoCo's over 1 s."""
    xml = PENDULUM.replace("</mujoco>", '<actuator><motor name="m" joint="hinge" gear="2"/>'
                                        "</actuator></mujoco>")
    t_mj, q_mj = _mujoco_run(xml, [0.0], 1.0, DT, ctrl=[0.5])
    scene, info = jc.io.load_mjcf(xml)
    model, state = scene.build()
    np.testing.assert_allclose(info.control(model, state, jnp.array([0.5])).torque[0],
                               [0.0, 1.0, 0.0], atol=1e-12)
    _, traj = jax.jit(lambda m, s: jc.rollout(
        m, s, steps=int(round(1.0 / DT)),
        policy=lambda p, x: info.control(m, x, p), policy_params=jnp.array([0.5])))(
            model, state)
    pos, t = np.asarray(traj.pos[:, 0]), np.asarray(traj.time)
    angle = np.arctan2(-pos[:, 0], -(pos[:, 2] - 1.0))
    assert np.max(np.abs(q_mj[:, 0])) > 0.2
    assert np.max(np.abs(angle - np.interp(t, t_mj, q_mj[:, 0]))) < 0.015


def test_mesh_geoms_keep_mujocos_vertices():
    """A convex mesh geom placed off its body's centre and turned: the world positions of
    our hull's vertices are MuJoCo's (geom_xmat mesh_vert + geom_xpos)."""
    xml = """<mujoco><asset><mesh name="wedge" vertex="0 0 0  0.2 0 0  0 0.1 0  0 0 0.3
    0.2 0.1 0"/></asset><worldbody><body pos="0.3 -0.2 1" euler="20 -30 40"><freejoint/>
    <geom type="mesh" mesh="wedge" pos="0.05 0 0.1" euler="0 90 0" density="500"/>
    <geom type="sphere" size="0.05" pos="-0.1 0 0"/></body></worldbody></mujoco>"""
    scene, info = jc.io.load_mjcf(xml)
    model, state = scene.build()
    m = info.mj_model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    g = next(i for i in range(m.ngeom) if m.geom_type[i] == mujoco.mjtGeom.mjGEOM_MESH)
    start, count = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
    theirs = m.mesh_vert[start:start + count] @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
    ours = info.geom[g]
    from jaxcontact.math import quat_rotate
    local = model.mesh.vertices[model.geom.mesh[ours], :model.mesh.count[model.geom.mesh[ours]]]
    from jaxcontact.math import quat_mul
    rotate = jax.vmap(quat_rotate, in_axes=(None, 0))
    frame = state.pos[0] + quat_rotate(state.quat[0], model.geom.pos[ours])
    world = frame[None, :] + rotate(quat_mul(state.quat[0], model.geom.quat[ours]), local)
    # the same point sets (the hull keeps every vertex of this convex wedge)
    distance = np.linalg.norm(np.asarray(world)[:, None, :] - theirs[None, :, :], axis=-1)
    assert len(world) == len(theirs) and np.max(np.min(distance, axis=1)) < 1e-9


def test_ball_joint_pendulum_matches_mujoco():
    """A spherical pendulum on a ball joint, released at 0.4 rad with a sideways spin: the
    bob's path within 1 cm of MuJoCo's over 1 s (both at dt = 2 ms)."""
    xml = """<mujoco><option timestep="0.002"/><worldbody><body name="bob" pos="0 0 1">
    <joint name="ball" type="ball"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02"
    mass="1"/></body></worldbody></mujoco>"""
    c, s = np.cos(0.2), np.sin(0.2)
    qpos, qvel = [c, s, 0.0, 0.0], [0.0, 0.0, 2.0]
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    path = []
    for _ in range(500):
        mujoco.mj_step(m, d)
        path.append(d.xipos[1].copy())
    scene, _ = jc.io.load_mjcf(xml, qpos=qpos, qvel=qvel)
    model, state = scene.build()
    _, traj = jax.jit(lambda mm, ss: jc.rollout(mm, ss, steps=500))(model, state)
    assert np.max(np.abs(np.asarray(traj.pos[:, 0]) - np.array(path))) < 0.01


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "reacher", "ant"])
def test_gymnasium_robots_in_float32_converge_on_every_passive_step(name):
    """Issue 63: gymnasium's hopper, reacher and ant, imported and run passively for 200 steps
    in float32 (the training dtype), converge on every step. (The hopper's last stalls were
    its root chain's roundings, which the step's resolution now pools: design note 62.)"""
    path = os.path.join(_assets(), name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        model, state = jc.io.from_mjcf(path).build(dtype=jnp.float32)
    _, _, info = jax.jit(lambda m, s: jc.rollout(m, s, steps=200, return_info=True))(
        model, state)
    assert bool(jnp.all(info.converged)), np.flatnonzero(~np.asarray(info.converged))


SPRUNG = """<mujoco><compiler angle="radian"/><option timestep="0.002"/>
<worldbody><body name="pole" pos="0 0 1">
<joint name="hinge" type="hinge" axis="0 1 0" stiffness="{k}" springref="{ref}" armature="{a}"
       frictionloss="{f}"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1"/></body></worldbody>
</mujoco>"""


@pytest.mark.parametrize("k, ref, a, f, tol", [
    (3.0, 0.3, 0.05, 0.0, 0.01),      # a spring off its reference, and armature
    (0.0, 0.0, 0.0, 0.15, 0.015),     # friction loss: the swing decays and stops
])
def test_joint_spring_armature_and_friction_loss_match_mujoco(k, ref, a, f, tol):
    """A hinge's stiffness with springref, armature and frictionloss are imported
    (`add_joint_properties`), without a warning, and the pendulum swings as MuJoCo's does:
    angle within `tol` rad over 1.5 s from 0.6 rad, both at Δt = 0.5 ms. (The difference is
    first order in Δt, implicit against semi-implicit Euler: at 2 ms it is 0.026 and 0.019
    rad, and 0.024 for the plain pendulum. The friction losses differ in their
    regularization: MuJoCo's is a soft constraint, ours a Huber function of the rate, and
    the pendulum stops at 0.046 rad against MuJoCo's 0.054.)"""
    source = SPRUNG.format(k=k, ref=ref, a=a, f=f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(source, qpos=[0.6])
    assert not info.skipped
    joint = scene.build()[0].joint
    np.testing.assert_allclose(np.asarray(joint.spring_stiffness), [k])
    np.testing.assert_allclose(np.asarray(joint.spring_reference), [ref - 0.6])
    np.testing.assert_allclose(np.asarray(joint.friction_loss), [f])
    t_mj, q_mj = _mujoco_run(source, [0.6], 1.5, 5e-4)
    traj, infos, _ = _ours(source, [0.6], 1.5, dt=5e-4)
    pos, t = np.asarray(traj.pos[:, 0]), np.asarray(traj.time)
    angle = np.arctan2(-pos[:, 0], -(pos[:, 2] - 1.0))
    assert np.max(np.abs(angle - np.interp(t, t_mj, q_mj[:, 0]))) < tol
    assert bool(jnp.all(infos.converged))


def test_a_compiled_mjmodel_imports_as_its_xml_does():
    """A compiled `mujoco.MjModel` (what dm_control's suite and MuJoCo's URDF compiler give)
    is taken as it is: the same bodies, masses and joints as from the XML text; anything
    else is refused, naming the argument."""
    from_text, _ = jc.io.load_mjcf(PENDULUM)
    compiled, info = jc.io.load_mjcf(mujoco.MjModel.from_xml_string(PENDULUM))
    a, b = from_text.build()[0], compiled.build()[0]
    np.testing.assert_array_equal(np.asarray(a.body.mass), np.asarray(b.body.mass))
    np.testing.assert_array_equal(np.asarray(a.joint.axis_a), np.asarray(b.joint.axis_a))
    assert info.joint == {"hinge": 0}
    with pytest.raises(ValueError, match="source"):
        jc.io.load_mjcf(3.0)


def test_a_static_world_geom_nothing_can_touch_is_not_a_loss():
    """gymnasium's cart-pole rail (a static capsule of contype 0, conaffinity 1, as every
    moving geom there): no geom can touch it, so leaving it out changes nothing and the
    import names nothing; a static capsule that a moving geom can touch is an obstacle
    (`io.mjcf_geoms`)."""
    path = os.path.join(_assets(), "inverted_pendulum.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        _, info = jc.io.load_mjcf(path)
    assert info.skipped == []
    touchable = PENDULUM.replace("<worldbody>", '<worldbody><geom name="post" type="capsule" '
                                 'fromto="1 0 0 1 0 1" size="0.05"/>')
    with warnings.catch_warnings():
        warnings.simplefilter("error", jc.io.MjcfWarning)
        scene, info = jc.io.load_mjcf(touchable)
    assert info.skipped == [] and len(scene.records("obstacle")) == 1
