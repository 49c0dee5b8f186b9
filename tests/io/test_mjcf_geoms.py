"""MJCF geoms that are not core shapes (`io.mjcf_geoms`): cylinders and ellipsoids on moving
bodies as convex meshes, static world geoms and height fields as obstacles, against closed
forms and MuJoCo's own simulation of the same file."""

import os
import warnings

import jax
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.io import mjcf_geoms
from jaxcontact.models import primitives, sdf
from jaxcontact.models.mesh_distance import point_triangle_distance

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")

# A 1 kg body on the default contact stiffness (1e5 N/m) sinks m g / k = 1e-4 m; a body
# resting on a vertex of its polyhedron (a cylinder's rim or side vertex, an ellipsoid's
# tip) or on a flat face of an obstacle has no other error. Twice that sinking:
_REST = 2e-4

MOVING = """<mujoco><option timestep="0.002"/><worldbody><geom type="plane" size="3 3 0.1"/>
<body name="standing" pos="0 0 0.102"><freejoint/>
  <geom type="cylinder" size="0.05 0.1" mass="1"/></body>
<body name="lying" pos="0.5 0 0.052" euler="0 90 0"><freejoint/>
  <geom type="cylinder" size="0.05 0.1" mass="1"/></body>
<body name="ellipsoid" pos="1 0 0.052"><freejoint/>
  <geom type="ellipsoid" size="0.1 0.08 0.05" mass="1"/></body>
</worldbody></mujoco>"""

# spheres of radius 0.05 on: a box turned 30° about z (top at 0.1), a cylinder's flat cap
# (top at 0.1), the groove between two capsules (radius 0.05, axes along x at y = ±0.06,
# z = 0.05) and a static mesh box (its top at 0.1)
STATIC = """<mujoco><option timestep="0.002"/>
<asset><mesh name="cube" vertex="-.1 -.1 0  .1 -.1 0  .1 .1 0  -.1 .1 0
                                 -.1 -.1 .1  .1 -.1 .1  .1 .1 .1  -.1 .1 .1"/></asset>
<worldbody>
<geom type="box" size="0.2 0.2 0.05" pos="0 0 0.05" euler="0 0 30" friction="0.8"/>
<geom type="cylinder" size="0.1 0.05" pos="1 0 0.05"/>
<geom type="capsule" size="0.05 0.2" pos="2 0.06 0.05" euler="0 90 0"/>
<geom type="capsule" size="0.05 0.2" pos="2 -0.06 0.05" euler="0 90 0"/>
<geom type="mesh" mesh="cube" pos="3 0 0"/>
<body pos="0 0 0.152"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
<body pos="1 0 0.152"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
<body pos="2 0 0.14"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
<body pos="3 0 0.152"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
</worldbody></mujoco>"""


def _height_field_xml(rotation="0 0 0", contact=""):
    """A 7 × 9 height field (r_x = 0.4, r_y = 0.45: columns 0.1 m apart in x, rows 0.15 m in
    y; e_z = 0.1) at (0.1, -0.05, 0.02): rows 0-3 a valley along y (elevation |c - 4|/4:
    slopes of 0.25 on either side of x = 0.1), rows 4-6 a plateau at elevation 1 (z = 0.12).
    MuJoCo's XML lists the rows from the last (+y) to the first."""
    rows = [[1.0] * 9 if r >= 4 else [abs(c - 4) / 4 for c in range(9)] for r in range(7)]
    elevation = " ".join(" ".join(f"{v:g}" for v in row) for row in rows[::-1])
    return f"""<mujoco><option timestep="0.002" {contact}/>
<asset><hfield name="terrain" nrow="7" ncol="9" size="0.4 0.45 0.1 0.05"
 elevation="{elevation}"/></asset>
<worldbody><geom type="hfield" hfield="terrain" pos="0.1 -0.05 0.02" euler="{rotation}"/>
<body pos="0.1 -0.3 0.075"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
<body pos="0.1 0.27 0.172"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
</worldbody></mujoco>"""


def _load(xml):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene, info = jc.io.load_mjcf(xml)
    lines = [str(w.message) for w in caught if w.category is jc.io.MjcfWarning]
    return scene, info, "\n".join(lines)


def _rest(scene, steps):
    model, state = scene.build(dtype=jax.numpy.float64)
    final, _, infos = jax.jit(lambda m, s: jc.rollout(m, s, steps=steps, return_info=True))(
        model, state)
    assert float(np.mean(np.asarray(infos.converged))) == 1.0
    return np.asarray(final.pos), np.asarray(final.vel)


def test_cylinders_and_ellipsoids_rest_on_a_plane_at_their_exact_heights():
    """A cylinder (r = 0.05, h = 0.1) standing on its cap rests with its centre at h, one
    lying on its side at r (a polygon vertex points down), an ellipsoid (0.1, 0.08, 0.05) on
    its smallest semi-axis at 0.05 (a tip is a vertex): within `_REST`. Mass and inertia are
    MuJoCo's; nothing is named."""
    scene, info, text = _load(MOVING)
    assert text == "" and info.skipped == []
    m = info.mj_model
    model, _ = scene.build(dtype=jax.numpy.float64)
    np.testing.assert_allclose(np.asarray(model.body.mass), m.body_mass[1:], rtol=1e-12)
    np.testing.assert_allclose(np.sort(np.asarray(model.body.inertia), axis=1),
                               np.sort(m.body_inertia[1:], axis=1), rtol=1e-9)
    pos, vel = _rest(scene, 150)
    np.testing.assert_allclose(pos[:, 2], [0.1, 0.05, 0.05], atol=_REST)
    np.testing.assert_allclose(pos[:, :2], [[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]], atol=1e-6)
    assert np.max(np.abs(vel)) < 1e-3


def test_spheres_rest_on_static_world_geoms():
    """Spheres (r = 0.05) on a turned static box, a static cylinder's cap and a static mesh
    box rest at the top plus r, within `_REST` (flat faces: the grid is exact there); in the
    groove between two static capsules at the closed form z = 0.05 + sqrt((R + r)² - s²)
    within `_REST` plus the interpolation bound h²/(4 (R + r)) (R = 0.05, h = R/8, s = 0.06).
    The obstacles carry the geoms' friction; nothing is named."""
    scene, info, text = _load(STATIC)
    assert text == "" and info.skipped == []
    model, _ = scene.build(dtype=jax.numpy.float64)
    assert len(model.obstacle.grid) == 5
    np.testing.assert_allclose(np.asarray(model.obstacle.friction), [0.8, 1, 1, 1, 1])
    pos, vel = _rest(scene, 150)
    h = 0.05 / mjcf_geoms.STATIC_CELLS
    groove = 0.05 + np.sqrt(0.1 ** 2 - 0.06 ** 2)
    np.testing.assert_allclose(pos[:, 2], [0.15, 0.15, groove, 0.15],
                               atol=_REST + h * h / (4 * 0.1))
    np.testing.assert_allclose(pos[:, :2], [[0, 0], [1, 0], [2, 0], [3, 0]], atol=1e-4)
    assert np.max(np.abs(vel)) < 1e-3


@pytest.mark.parametrize("shape, size", [
    ("sphere", (0.1, 0, 0)), ("capsule", (0.05, 0.2, 0)), ("box", (0.2, 0.1, 0.05)),
    ("cylinder", (0.1, 0.05, 0)), ("ellipsoid", (0.2, 0.15, 0.06)), ("mesh", None)])
def test_static_obstacle_grids_are_within_the_interpolation_bound(shape, size):
    """At points a ball radius ρ = 0.05 (the moving geoms' reach) out of the surface, in
    random directions, the sampled field is within h²/(4ρ) of ρ: trilinear interpolation errs
    by at most (h²/8) tr ∇²φ, and out of a convex solid the distance's curvatures are at most
    1/ρ each (two of them)."""
    rng = np.random.default_rng(1)
    rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    rotation *= np.linalg.det(rotation)
    pos = np.array([0.3, -0.2, 0.1])
    rho = 0.05
    vertices = primitives.ellipsoid_vertices((0.2, 0.1, 0.08)) if shape == "mesh" else None
    grid, h, thinnest = mjcf_geoms.static_obstacle(shape, size, pos, rotation, rho,
                                                   vertices=vertices)
    assert h == pytest.approx(thinnest / mjcf_geoms.STATIC_CELLS)
    if shape == "mesh":     # outside the convex hull: the distance to its triangles
        hull, faces = mjcf_geoms._hull_triangles(vertices)
        corners = hull[faces]
        normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)

        def exact(q):       # inside (max over the faces' planes < 0): that max, a lower bound
            depth = np.max(q @ normals.T - np.sum(normals * corners[:, 0], axis=1), axis=1)
            return np.where(depth < 0.0, depth, np.min(
                point_triangle_distance(q, *np.swapaxes(corners, 0, 1)), axis=1))
    else:
        exact = {"sphere": lambda q: primitives.sphere_distance(q, size[0]),
                 "capsule": lambda q: primitives.capsule_distance(q, *size[:2]),
                 "box": lambda q: primitives.box_distance(q, size),
                 "cylinder": lambda q: primitives.cylinder_distance(q, *size[:2]),
                 "ellipsoid": lambda q: primitives.ellipsoid_distance(q, size)}[shape]
    # points at distance ρ: bisect along random rays from the centre (the distance grows
    # along a ray out of a convex solid's centre)
    directions = rng.normal(size=(300, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    low, high = np.zeros(300), np.full(300, 1.0)
    for _ in range(60):
        middle = 0.5 * (low + high)
        out = exact(directions * middle[:, None]) > rho
        low, high = np.where(out, low, middle), np.where(out, middle, high)
    local = directions * low[:, None]
    world = local @ rotation.T + pos
    sampled = np.asarray(jax.vmap(sdf.sample, (None, 0))(grid, world))
    assert np.max(np.abs(sampled - rho)) <= h * h / (4 * rho) + 1e-9


def test_a_height_field_matches_mujoco_and_the_closed_form():
    """A sphere (r = 0.05) in the valley rests at z = 0.02 + r / cos θ (tan θ = 0.25), one on
    the plateau at 0.12 + r, within `_REST`; both within 4e-4 m of MuJoCo's own simulation of
    the same file (MuJoCo's soft contact sinks about 2e-4 m). The rows and columns, the
    elevation scale and the geom's offset all matter here, and the spacings differ in x and
    y."""
    xml = _height_field_xml()
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(500):
        mujoco.mj_step(m, d)
    theirs = d.qpos.reshape(2, 7)[:, :3]
    scene, info, text = _load(xml)
    assert text == ""
    pos, vel = _rest(scene, 250)
    closed = [0.02 + 0.05 / np.cos(np.arctan(0.25)), 0.17]
    np.testing.assert_allclose(pos[:, 2], closed, atol=_REST)
    np.testing.assert_allclose(pos, theirs, atol=4e-4)
    assert np.max(np.abs(vel)) < 1e-3


def test_a_height_field_turned_half_a_turn_is_the_same_terrain_turned():
    """Turned 180° about z (about its centre at (0.1, -0.05)), sample (r, c) lies where sample
    (nrow-1-r, ncol-1-c) did: the grid is the unturned one's values reversed in x and y."""
    _, plain, _ = _load(_height_field_xml())
    straight = jc.io.mjcf_geoms.height_field(
        plain.mj_model.hfield_data.reshape(7, 9), plain.mj_model.hfield_size[0],
        np.array([0.1, -0.05, 0.02]), np.eye(3), 0.05)[0]
    turned = jc.io.mjcf_geoms.height_field(
        plain.mj_model.hfield_data.reshape(7, 9), plain.mj_model.hfield_size[0],
        np.array([0.1, -0.05, 0.02]), np.diag([-1.0, -1.0, 1.0]), 0.05)[0]
    np.testing.assert_allclose(np.asarray(turned.values),
                               np.asarray(straight.values)[::-1, ::-1], atol=1e-12)
    np.testing.assert_allclose(np.asarray(turned.origin), np.asarray(straight.origin))


def test_what_is_still_unsupported_is_named():
    """A height field turned 45° about z, a height field on a moving body and an obstacle whose
    contype / conaffinity exclude some moving geom (obstacles meet every moving geom) are
    named; a geom nothing can touch is not; with MuJoCo's contact disabled nothing collides
    and nothing is named."""
    _, info, text = _load(_height_field_xml(rotation="0 0 45"))
    assert "a height field turned other than by 0 or 180° about z is not imported" in text
    xml = """<mujoco><asset><hfield name="pad" nrow="2" ncol="2" size="0.1 0.1 0.1 0.1"/></asset>
<worldbody>
<geom name="post" type="cylinder" size="0.05 0.2" contype="2" conaffinity="2"/>
<geom name="decoration" type="ellipsoid" size="0.1 0.2 0.3" contype="0" conaffinity="0"/>
<body pos="0 0 1"><freejoint/><geom name="ball" type="sphere" size="0.1" mass="1"/>
  <geom name="pad" type="hfield" hfield="pad" pos="0 0 -0.2"/></body>
<body pos="1 0 1"><freejoint/>
  <geom name="key" type="sphere" size="0.1" mass="1" contype="2" conaffinity="2"/></body>
</worldbody></mujoco>"""
    scene, info, text = _load(xml)
    assert "geom 'pad': a height field on a moving body" in text
    assert "geom 'post': a static cylinder (an obstacle) also touches 1 moving geom(s)" in text
    assert "decoration" not in text and len(info.skipped) == 2
    model, _ = scene.build()
    assert len(model.obstacle.grid) == 1
    off = xml.replace("<mujoco>", '<mujoco><option><flag contact="disable"/></option>')
    scene, info, text = _load(off)
    assert text == "" and all(not g.collide for g in scene.records("geom"))
    assert scene.records("obstacle") == [] and scene.records("plane") == []


def test_suite_models_import_their_cylinders_ellipsoids_and_static_geoms():
    """gymnasium's pusher (a cylinder to push) and dm_control's reacher, pendulum, finger,
    acrobot, point_mass, cart-pole and fish name no cylinder, ellipsoid or static world geom
    (the last four disable contact, as MuJoCo then does nothing with their static geoms)."""
    gymnasium = pytest.importorskip("gymnasium", reason="the gymnasium package ships pusher")
    suite = pytest.importorskip("dm_control.suite", reason="dm_control's suite models")
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets",
                        "pusher.xml")
    sources = [path] + [suite.load(domain, task).physics.model._model for domain, task in (
        ("reacher", "easy"), ("pendulum", "swingup"), ("finger", "spin"),
        ("acrobot", "swingup"), ("point_mass", "easy"), ("cartpole", "balance"),
        ("fish", "upright"))]
    for source in sources:
        _, info, text = _load(source)
        for word in ("cylinder", "ellipsoid", "static", "not supported"):
            assert word not in text, text
