"""URDF import (`jc.io.from_urdf`, `jc.io.load_urdf`) on the URDF files shipped with the
airo-models package (Universal Robots' UR3e and UR5e arms, a Robotiq 2F-85 gripper), read
independently here with xml.etree and simulated against MuJoCo's own simulator of the same
compiled model."""

import os
import shutil
import warnings
import xml.etree.ElementTree as ElementTree

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

mujoco = pytest.importorskip("mujoco", reason="URDF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")
airo_models = pytest.importorskip("airo_models", reason="the airo-models package ships the "
                                                        "URDF files of these tests")

DT = 0.002


def _read(path):
    """The URDF's root element. (The UR files use a `drake:` attribute prefix they never
    declare, which xml.etree refuses: it is declared here.)"""
    with open(path) as file:
        text = file.read()
    if "drake:" in text and "xmlns:drake" not in text:
        text = text.replace("<robot ", '<robot xmlns:drake="drake" ', 1)
    return ElementTree.fromstring(text)


def _load(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jc.io.MjcfWarning)
        return jc.io.load_urdf(path, **options)


def _bare_copy(name, folder):
    """The package's URDF `name` without its <collision> elements, written to `folder`:
    links, inertials and joints only, so that neither simulator has contacts."""
    root = _read(airo_models.get_urdf_path(name))
    for link in root.iter("link"):
        for collision in link.findall("collision"):
            link.remove(collision)
    path = os.path.join(folder, name + "_bare.urdf")
    ElementTree.ElementTree(root).write(path)
    return path


def _link_mass(link):
    """A <link>'s mass: its <inertial>'s, or (MuJoCo's inertiafromgeom="auto") that of its
    collision primitives at MuJoCo's default density, 1000 kg/m³."""
    inertial = link.find("inertial")
    if inertial is not None:
        return float(inertial.find("mass").get("value"))
    volume = 0.0
    for collision in link.findall("collision"):
        shape = collision.find("geometry")[0]
        if shape.tag == "box":
            volume += np.prod([float(x) for x in shape.get("size").split()])
        elif shape.tag == "sphere":
            volume += 4.0 / 3.0 * np.pi * float(shape.get("radius")) ** 3
        elif shape.tag == "cylinder":
            volume += np.pi * float(shape.get("radius")) ** 2 * float(shape.get("length"))
        else:
            pytest.fail(f"link {link.get('name')!r}: no <inertial> and a {shape.tag}")
    return 1000.0 * volume


@pytest.mark.parametrize("name", ["ur3e", "ur5e", "robotiq_2f_85"])
def test_links_joints_and_masses_are_the_urdfs(name):
    """One body per moving link group (a link with the links fixed under it), carrying the
    group's total mass from the file's <inertial>s; one joint per revolute / prismatic /
    continuous joint, by name; the links fixed to the root are the world (no floating base).
    The gripper's <mimic> joints (MuJoCo joint equalities) become coupling tendons, one
    each, and nothing is named; its finger pads (links with a collision box and no <inertial>) weigh their box's
    volume at 1000 kg/m³, MuJoCo's inertia from geoms."""
    path = airo_models.get_urdf_path(name)
    root = _read(path)
    mass = {link.get("name"): _link_mass(link) for link in root.findall("link")}
    joints = {j.get("name"): (j.get("type"), j.find("parent").get("link"),
                              j.find("child").get("link")) for j in root.findall("joint")}
    moving = {name: child for name, (kind, _, child) in joints.items() if kind != "fixed"}
    children = {}
    for kind, parent, child in joints.values():
        if kind == "fixed":
            children.setdefault(parent, []).append(child)

    def group_mass(link):
        return mass[link] + sum(group_mass(c) for c in children.get(link, []))

    scene, info = _load(path)
    model, _ = scene.build()
    assert set(info.joint) == set(moving) and model.n_body == len(moving)
    ours = np.asarray(model.body.mass)
    for joint, child in moving.items():
        np.testing.assert_allclose(ours[info.body[child]], group_mass(child), rtol=1e-12,
                                   err_msg=f"{name}: mass of link {child!r}'s group")
    mimics = len(list(root.iter("mimic")))
    assert not [line for line in info.skipped if "equality" in line]
    assert len(model.tendon.joints) == mimics


def test_mesh_files_resolve_relative_package_and_mesh_dir(tmp_path):
    """The UR5e's collision meshes (OBJ, relative paths `collision/*.obj`) load relative to
    the file; a copy of the file elsewhere finds them only through `mesh_dir` (else a
    ValueError names the mesh and mesh_dir); `package://ur5e/collision/*.obj` resolves in
    the nearest folder named ur5e above the file, or through mesh_dir. Every way gives the
    same vertices, and every collision mesh of the file is a geom of ours."""
    path = airo_models.get_urdf_path("ur5e")
    folder = os.path.dirname(path)
    meshes = [m.get("filename") for c in _read(path).iter("collision") for m in c.iter("mesh")]
    assert meshes and all(m.startswith("collision/") for m in meshes)
    _, info = _load(path)
    vertices = np.asarray(info.mj_model.mesh_vert)
    assert info.mj_model.nmesh == len(meshes)
    assert sum(info.geom[g] >= 0 for g in range(info.mj_model.ngeom)
               if info.mj_model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH) == len(meshes)

    copy = tmp_path / "elsewhere" / "ur5e.urdf"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    with pytest.raises(ValueError, match="'collision/shoulder.obj' not found.*mesh_dir"):
        jc.io.load_urdf(copy)
    np.testing.assert_array_equal(_load(copy, mesh_dir=folder)[1].mj_model.mesh_vert, vertices)

    text = open(path).read().replace('filename="collision/', 'filename="package://ur5e/'
                                                             'collision/')
    package = tmp_path / "ur5e"
    (package / "urdf").mkdir(parents=True)
    (package / "collision").symlink_to(os.path.join(folder, "collision"))
    (package / "urdf" / "ur5e.urdf").write_text(text)
    (tmp_path / "elsewhere" / "uri.urdf").write_text(text)
    for source, mesh_dir in ((package / "urdf" / "ur5e.urdf", None),
                             (tmp_path / "elsewhere" / "uri.urdf", os.path.dirname(folder))):
        _, found = _load(source, mesh_dir=mesh_dir)
        np.testing.assert_array_equal(found.mj_model.mesh_vert, vertices)


def test_fixed_base_arm_swings_as_mujoco(tmp_path):
    """The UR3e (its base fixed to the world) released at rest from a bent pose swings under
    gravity as MuJoCo simulates the same compiled model: every link's centre of mass
    within 1 cm over 0.3 s while the links travel up to 0.44 m (measured 4.8 mm, both at
    dt = 2 ms: implicit Euler against MuJoCo's semi-implicit Euler, first order in dt, 1.6
    mm at 0.5 ms). Collision geometry is removed so that neither has contacts."""
    qpos = [0.0, -1.0, 0.5, -0.5, 0.5, 0.0]
    scene, info = _load(_bare_copy("ur3e", tmp_path), qpos=qpos, dt=DT)
    m = info.mj_model
    m.opt.timestep = DT
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    steps = int(round(0.3 / DT))
    theirs = []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        theirs.append(d.xipos[1:].copy())
    theirs = np.array(theirs)
    model, state = scene.build()
    _, traj, infos = jax.jit(lambda mm, ss: jc.rollout(mm, ss, steps=steps, return_info=True))(
        model, state)
    order = [info.body[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)]
             for b in range(1, m.nbody)]
    ours = np.asarray(traj.pos)[:, order]
    assert np.max(np.linalg.norm(theirs[-1] - theirs[0], axis=-1)) > 0.3      # it swings
    error = np.linalg.norm(ours - theirs, axis=-1)
    assert error.max() < 0.01, error.max(axis=1)
    assert bool(jnp.all(infos.converged))


def test_floating_base_falls_freely(tmp_path):
    """floating_base=True gives the UR3e's root link a free joint (MuJoCo's 7 + 6
    coordinates first); thrown at v0, the whole arm's centre of mass follows implicit
    Euler's free fall, x0 + v0 n dt - g dt² n(n+1)/2 e_z, to 1e-9 m, and the arm keeps its
    shape (its joints hold; links within 1e-6 m of the rigidly moved start)."""
    arm = [0.0, -1.0, 0.5, -0.5, 0.5, 0.0]
    v0 = np.array([0.3, 0.0, 0.5])
    scene, info = _load(_bare_copy("ur3e", tmp_path), floating_base=True,
                        qpos=[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0] + arm,
                        qvel=list(v0) + [0.0] * 9, dt=DT)
    m = info.mj_model
    assert m.nq == 13 and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    model, state = scene.build()
    assert model.n_body == 7 and len(info.joint) == 6
    n = 50
    _, traj = jax.jit(lambda mm, ss: jc.rollout(mm, ss, steps=n))(model, state)
    mass = np.asarray(model.body.mass)
    com = np.einsum("b,tbk->tk", mass, np.asarray(traj.pos)) / mass.sum()
    start = np.asarray(state.pos)
    com0 = mass @ start / mass.sum()
    steps = np.arange(1, n + 1)[:, None]
    fall = (com0 + v0 * steps * DT
            - np.array([0.0, 0.0, 9.81]) * DT ** 2 * steps * (steps + 1) / 2)
    np.testing.assert_allclose(com, fall, atol=1e-9)
    shift = np.asarray(traj.pos[-1]) - start
    np.testing.assert_allclose(shift, np.broadcast_to(shift.mean(axis=0), shift.shape),
                               atol=1e-6)


def test_bad_inputs_are_clear_errors(tmp_path):
    path = airo_models.get_urdf_path("ur3e")
    with pytest.raises(ValueError, match="no such file"):
        jc.io.from_urdf(tmp_path / "missing.urdf")
    with pytest.raises(ValueError, match="path must be a URDF file path"):
        jc.io.from_urdf(3.0)
    mjcf = tmp_path / "model.xml"
    mjcf.write_text("<mujoco><worldbody/></mujoco>")
    with pytest.raises(ValueError, match="root element <robot>.*from_mjcf"):
        jc.io.from_urdf(mjcf)
    broken = tmp_path / "broken.urdf"
    broken.write_text('<robot name="r"><link name="a"/>')
    with pytest.raises(ValueError, match="broken.urdf"):
        jc.io.from_urdf(broken)
    orphan = tmp_path / "orphan.urdf"     # a joint to a link that does not exist
    orphan.write_text('<robot name="r"><link name="a"/><joint name="j" type="revolute">'
                      '<parent link="a"/><child link="b"/></joint></robot>')
    with pytest.raises(ValueError, match="orphan.urdf.*MuJoCo could not"):
        jc.io.from_urdf(orphan)
    with pytest.raises(ValueError, match="floating_base"):
        jc.io.from_urdf(path, floating_base="yes")
    with pytest.raises(ValueError, match="mesh_dir"):
        jc.io.from_urdf(path, mesh_dir=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="unknown option 'gravity'"):
        jc.io.from_urdf(path, gravity=(0, 0, -1))
    with pytest.raises(ValueError, match="qpos"):      # load_mjcf's own checks still apply
        jc.io.load_urdf(path, qpos=[0.0])
