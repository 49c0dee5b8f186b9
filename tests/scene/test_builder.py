"""The Scene builder: input validation, the Model and State it builds, and pair parameters.

Every bad argument must raise ValueError naming the argument (DESIGN.md section 3); every
built array must have the requested dtype; the static contact table must list exactly the
candidates the shapes imply.
"""

import itertools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.models.contacts import BodyPlane, contact_rows, n_rows
from jaxcontact.types import Shape

NAN, INF = float("nan"), float("inf")
# Parameters built from Python floats and stored in float64: exact up to one rounding.
_RTOL = 1e-15


def _raises_naming(name, fn, *args, **kwargs):
    with pytest.raises(ValueError, match=re.escape(name)) as info:
        fn(*args, **kwargs)
    return str(info.value)


def _scene_with_ground():
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    return scene


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,name", [
    (dict(dt=0.0), "dt"), (dict(dt=-0.01), "dt"), (dict(dt=NAN), "dt"), (dict(dt=INF), "dt"),
    (dict(dt="0.01"), "dt"), (dict(dt=None), "dt"), (dict(dt=True), "dt"), (dict(dt=[0.01]), "dt"),
    (dict(gravity=(0.0, -9.81)), "gravity"), (dict(gravity=(0, 0, -9.81, 0)), "gravity"),
    (dict(gravity=(0.0, 0.0, NAN)), "gravity"), (dict(gravity="down"), "gravity"),
    (dict(gravity=None), "gravity"), (dict(gravity=-9.81), "gravity"),
    (dict(friction=-0.1), "friction"), (dict(friction=NAN), "friction"),
    (dict(friction="0.5"), "friction"), (dict(friction=True), "friction"),
    (dict(stiffness=0.0), "stiffness"), (dict(stiffness=-1e5), "stiffness"),
    (dict(stiffness=INF), "stiffness"),
    (dict(damping=-1.0), "damping"), (dict(damping=NAN), "damping"),
    (dict(friction=None), "friction"),
    (dict(stiffness=None), "stiffness"),
])
def test_scene_rejects(kwargs, name):
    _raises_naming(name, jc.Scene, **kwargs)


@pytest.mark.parametrize("kwargs,name", [
    (dict(normal=(0.0, 0.0, 0.0)), "normal"), (dict(normal=(0.0, 0.0, 1e-13)), "normal"),
    (dict(normal=(0.0, NAN, 1.0)), "normal"), (dict(normal=(0.0, INF, 1.0)), "normal"),
    (dict(normal=(0.0, 1.0)), "normal"), (dict(normal=(0.0, 0.0, 1.0, 0.0)), "normal"),
    (dict(normal="z"), "normal"), (dict(normal=None), "normal"),
    (dict(offset=NAN), "offset"), (dict(offset=INF), "offset"), (dict(offset="0"), "offset"),
    (dict(offset=(0.0,)), "offset"), (dict(offset=False), "offset"),
    (dict(friction=-0.5), "friction"), (dict(friction=NAN), "friction"),
    (dict(stiffness=0.0), "stiffness"), (dict(stiffness=-1.0), "stiffness"),
    (dict(damping=-1.0), "damping"), (dict(damping=INF), "damping"),
])
def test_add_plane_rejects(kwargs, name):
    scene = jc.Scene()
    _raises_naming(name, scene.add_plane, **kwargs)
    assert scene.records("plane") == [], "a rejected plane must not be added"


_SPHERE = dict(radius=0.1, mass=1.0, pos=(0.0, 0.0, 1.0))


@pytest.mark.parametrize("kwargs,name", [
    (dict(radius=0.0), "radius"), (dict(radius=-0.1), "radius"), (dict(radius=NAN), "radius"),
    (dict(radius=INF), "radius"), (dict(radius="0.1"), "radius"), (dict(radius=True), "radius"),
    (dict(radius=None), "radius"), (dict(radius=(0.1,)), "radius"),
    (dict(mass=0.0), "mass"), (dict(mass=-1.0), "mass"), (dict(mass=NAN), "mass"),
    (dict(mass="1"), "mass"), (dict(mass=False), "mass"), (dict(mass=True), "mass"),
    (dict(pos=(0.0, 1.0)), "pos"), (dict(pos=(0.0, 0.0, 1.0, 0.0)), "pos"),
    (dict(pos=(0.0, 0.0, NAN)), "pos"), (dict(pos="abc"), "pos"), (dict(pos="123"), "pos"),
    (dict(pos=None), "pos"), (dict(pos=((0.0, 0.0, 1.0),)), "pos"),
    (dict(vel=(0.0, 0.0)), "vel"), (dict(vel=(INF, 0.0, 0.0)), "vel"), (dict(vel="fast"), "vel"),
    (dict(ang_vel=(1.0, 2.0)), "ang_vel"), (dict(ang_vel=(0.0, NAN, 0.0)), "ang_vel"),
    (dict(quat=(1.0, 0.0, 0.0, 0.1)), "quat"), (dict(quat=(1.0, 0.0, 0.0)), "quat"),
    (dict(inertia=(0.0, 1.0, 1.0)), "inertia"), (dict(inertia=(1.0, 1.0)), "inertia"),
    (dict(friction=-1.0), "friction"), (dict(stiffness=0.0), "stiffness"),
    (dict(damping=-1.0), "damping"), (dict(damping="300"), "damping"),
])
def test_add_sphere_rejects(kwargs, name):
    scene = jc.Scene()
    _raises_naming(name, scene.add_sphere, **{**_SPHERE, **kwargs})
    assert scene.records("body") == [], "a rejected sphere must not be added"


_BOX = dict(half_size=(0.1, 0.2, 0.3), mass=2.0, pos=(0.0, 0.0, 1.0))


@pytest.mark.parametrize("kwargs,name", [
    (dict(half_size=0.0), "half_size"), (dict(half_size=-0.1), "half_size"),
    (dict(half_size=(0.1, 0.2)), "half_size"), (dict(half_size=(0.1, 0.0, 0.1)), "half_size"),
    (dict(half_size=(0.1, -0.2, 0.1)), "half_size"), (dict(half_size=(0.1, NAN, 0.1)), "half_size"),
    (dict(half_size=NAN), "half_size"), (dict(half_size="0.1"), "half_size"),
    (dict(half_size=True), "half_size"), (dict(half_size=(0.1, 0.1, 0.1, 0.1)), "half_size"),
    (dict(quat=(1.0, 0.0, 0.0, 0.1)), "quat"), (dict(quat=(2.0, 0.0, 0.0, 0.0)), "quat"),
    (dict(quat=(0.0, 0.0, 0.0, 0.0)), "quat"), (dict(quat=(NAN, 0.0, 0.0, 1.0)), "quat"),
    (dict(quat=(1.0, 0.0, 0.0)), "quat"), (dict(quat="identity"), "quat"),
    (dict(quat=(1.0 + 1e-5, 0.0, 0.0, 0.0)), "quat"),
    (dict(inertia=(0.0, 1.0, 1.0)), "inertia"), (dict(inertia=(1.0, -1.0, 1.0)), "inertia"),
    (dict(inertia=(1.0, 1.0, NAN)), "inertia"), (dict(inertia=(1.0, 1.0)), "inertia"),
    (dict(inertia=1.0), "inertia"),
    (dict(mass=0.0), "mass"), (dict(pos=(0.0, 0.0)), "pos"), (dict(vel=(0.0,)), "vel"),
    (dict(ang_vel=(0.0, 0.0, INF)), "ang_vel"), (dict(friction=NAN), "friction"),
])
def test_add_box_rejects(kwargs, name):
    scene = jc.Scene()
    _raises_naming(name, scene.add_box, **{**_BOX, **kwargs})
    assert scene.records("body") == [], "a rejected box must not be added"


def test_error_messages_quote_the_value():
    scene = jc.Scene()
    assert "-0.25" in _raises_naming("radius", scene.add_sphere, -0.25, 1.0, (0, 0, 0))
    assert "(0.0, 0.0, 0.0)" in _raises_naming("normal", scene.add_plane, normal=(0.0, 0.0, 0.0))
    msg = _raises_naming("quat", scene.add_box, 0.1, 1.0, (0, 0, 0), quat=(1.0, 0.0, 0.0, 0.5))
    assert "0.5" in msg
    assert "(2,)" in _raises_naming("pos", scene.add_sphere, 0.1, 1.0, (0.0, 1.0))


def test_numbers_may_be_zero_dimensional_arrays():
    # what jc.restitution_to_damping returns can be passed on as it is
    damping = jc.restitution_to_damping(0.5, 1e4, 1.0)
    scene = jc.Scene()
    scene.add_plane(damping=damping, stiffness=np.float32(1e4))
    scene.add_sphere(0.1, jnp.asarray(2.0), (0.0, 0.0, 0.1), damping=damping)
    model, _ = scene.build()
    np.testing.assert_allclose(model.geom.damping, [float(damping)])
    np.testing.assert_allclose(model.body.mass, [2.0])
    for bad in (jnp.asarray([1.0]), jnp.asarray(True), np.asarray(np.nan)):
        with pytest.raises(ValueError, match="mass"):
            scene.add_sphere(0.1, bad, (0.0, 0.0, 0.1))


def test_quaternion_within_tolerance_is_accepted_and_normalized():
    scene = _scene_with_ground()
    scene.add_box(0.1, 1.0, (0, 0, 1), quat=(1.0 + 5e-7, 0.0, 0.0, 0.0))
    s = 1 / math.sqrt(2)
    scene.add_box(0.1, 1.0, (0, 0, 2), quat=(s, 0.0, s, 0.0))
    _, state = scene.build(dtype=jnp.float64)
    np.testing.assert_allclose(state.quat, [[1, 0, 0, 0], [s, 0, s, 0]], rtol=0, atol=2e-16)
    np.testing.assert_allclose(jnp.linalg.norm(state.quat, axis=-1), [1.0, 1.0], atol=2e-16)


@pytest.mark.parametrize("kwargs,name", [
    (dict(contact="linear"), "contact"), (dict(contact=jc.Newton()), "contact"),
    (dict(contact={"normal": "linear"}), "contact"),
    (dict(solver="newton"), "solver"), (dict(solver=jc.Contact()), "solver"),
    (dict(solver=12), "solver"),
    (dict(dtype=jnp.int32), "dtype"), (dict(dtype="int64"), "dtype"), (dict(dtype=bool), "dtype"),
    (dict(dtype=np.complex128), "dtype"),
    (dict(dtype="float65"), "dtype"),
])
def test_build_rejects(kwargs, name):
    scene = _scene_with_ground()
    scene.add_sphere(**_SPHERE)
    _raises_naming(name, scene.build, **kwargs)


@pytest.mark.parametrize("with_plane", [False, True])
def test_build_rejects_empty_scene(with_plane):
    scene = jc.Scene()
    if with_plane:
        scene.add_plane()
    _raises_naming("bodies", scene.build)


# --- what build() produces --------------------------------------------------------------------

def _mixed_scene():
    """2 planes; bodies: sphere, box, sphere, box, sphere."""
    scene = jc.Scene(dt=0.005, gravity=(0.0, 0.0, -9.81), friction=0.4, stiffness=2e5,
                     damping=100.0)
    planes = [scene.add_plane(), scene.add_plane(normal=(3.0, 0.0, 4.0), offset=-1.0,
                                                 friction=0.8, stiffness=1e5, damping=50.0)]
    bodies = [
        scene.add_sphere(0.1, 2.0, (0.0, 0.0, 1.0), vel=(1.0, 0.0, 0.0)),
        scene.add_box((0.1, 0.2, 0.3), 3.0, (1.0, 0.0, 1.0), ang_vel=(0.0, 0.0, 2.0)),
        scene.add_sphere(0.25, 0.5, (2.0, 0.0, 1.0), friction=0.2, stiffness=4e5, damping=300.0),
        scene.add_box(0.05, 1.5, (3.0, 0.0, 1.0)),
        scene.add_sphere(0.2, 1.0, (4.0, 0.0, 1.0), inertia=(1.0, 2.0, 3.0)),
    ]
    return scene, planes, bodies


def test_indices_returned_in_order():
    _, planes, bodies = _mixed_scene()
    assert planes == [0, 1]
    assert bodies == [0, 1, 2, 3, 4]


def test_failed_add_leaves_indices_unchanged():
    scene = jc.Scene()
    assert scene.add_sphere(**_SPHERE) == 0
    with pytest.raises(ValueError):
        scene.add_box(**{**_BOX, "quat": (0.5, 0.0, 0.0, 0.0)})
    assert scene.add_box(**_BOX) == 1


def test_inertia_closed_forms():
    scene, _, _ = _mixed_scene()
    model, _ = scene.build(dtype=jnp.float64)
    inertia = np.asarray(model.body.inertia)
    np.testing.assert_allclose(inertia[0], np.full(3, 0.4 * 2.0 * 0.1 ** 2), rtol=_RTOL)
    np.testing.assert_allclose(inertia[2], np.full(3, 0.4 * 0.5 * 0.25 ** 2), rtol=_RTOL)
    a, b, c = 0.2, 0.4, 0.6  # full edge lengths of box 1
    np.testing.assert_allclose(inertia[1], 3.0 / 12 * np.array([b * b + c * c, a * a + c * c,
                                                                a * a + b * b]), rtol=_RTOL)
    np.testing.assert_allclose(inertia[3], np.full(3, 1.5 / 12 * 2 * 0.1 ** 2), rtol=_RTOL)
    # explicit inertia is kept as given
    np.testing.assert_array_equal(inertia[4], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(model.body.mass, [2.0, 3.0, 0.5, 1.5, 1.0])


def test_geometry_surface_and_state_arrays():
    scene, _, _ = _mixed_scene()
    model, state = scene.build(dtype=jnp.float64)
    assert model.geom.shape == (Shape.SPHERE, Shape.BOX, Shape.SPHERE, Shape.BOX, Shape.SPHERE)
    assert model.n_body == 5
    np.testing.assert_array_equal(model.geom.size[:, 0], [0.1, 0.1, 0.25, 0.05, 0.2])
    np.testing.assert_array_equal(model.geom.size[1], [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(model.geom.size[3], [0.05, 0.05, 0.05])  # cube from a number
    # scene defaults apply unless overridden
    np.testing.assert_array_equal(model.geom.friction, [0.4, 0.4, 0.2, 0.4, 0.4])
    np.testing.assert_array_equal(model.geom.stiffness, [2e5, 2e5, 4e5, 2e5, 2e5])
    np.testing.assert_array_equal(model.geom.damping, [100.0, 100.0, 300.0, 100.0, 100.0])
    np.testing.assert_array_equal(model.plane.friction, [0.4, 0.8])
    np.testing.assert_array_equal(model.plane.offset, [0.0, -1.0])
    np.testing.assert_array_equal(model.gravity, [0.0, 0.0, -9.81])
    assert float(model.dt) == 0.005
    np.testing.assert_array_equal(state.pos[:, 0], [0.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(state.vel[0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(state.ang_vel[1], [0.0, 0.0, 2.0])
    np.testing.assert_array_equal(state.quat, np.tile([1.0, 0.0, 0.0, 0.0], (5, 1)))
    assert float(state.time) == 0.0


@pytest.mark.parametrize("normal,expected", [
    ((0.0, 0.0, 2.0), (0.0, 0.0, 1.0)),
    ((3.0, 0.0, 4.0), (0.6, 0.0, 0.8)),
    ((1.0, 1.0, 1.0), (1 / math.sqrt(3),) * 3),
    ((0.0, -1e-6, 0.0), (0.0, -1.0, 0.0)),
])
def test_plane_normal_is_normalized(normal, expected):
    scene = jc.Scene()
    scene.add_plane(normal=normal, offset=0.5)
    scene.add_sphere(**_SPHERE)
    model, _ = scene.build(dtype=jnp.float64)
    np.testing.assert_allclose(model.plane.normal[0], expected, rtol=1e-15, atol=1e-16)
    assert float(model.plane.offset[0]) == 0.5


@jax.jit
def _sides(model, state):
    rows = contact_rows(model, state)
    return rows.body_a, rows.body_b, rows.used


def _rows(model, state):
    """(body_a, body_b, used) of every contact row."""
    return tuple(np.asarray(x) for x in _sides(model, state))


@jax.jit
def pair_parameters(model, state):
    """Friction, stiffness and damping of every contact row."""
    rows = contact_rows(model, state)
    return rows.friction, rows.stiffness, rows.damping


def test_contact_rows_of_each_shape_pair():
    scene, _, _ = _mixed_scene()
    model, state = scene.build()
    spheres, boxes = [0, 2, 4], [1, 3]
    body_a, body_b, used = _rows(model, state)
    assert len(body_a) == n_rows(model)
    # every row is used but the box-box edge-edge row: these boxes' edges do not cross
    assert used[:-1].all() and not used[-1] and (body_a[-1], body_b[-1]) == (1, 3)
    world = [(a, b) for a, b in zip(body_a, body_b) if b < 0]
    # every body against each of the 2 planes: 1 row per sphere, 8 corner rows per box
    for sphere in spheres:
        assert world.count((sphere, -1)) == 2
    for box in boxes:
        assert world.count((box, -1)) == 2 * 8
    pairs = [(a, b) for a, b in zip(body_a, body_b) if b >= 0]
    # spheres against anything: 1 row (centre against the other core), sphere on side a
    for s, t in itertools.combinations(spheres, 2):
        assert pairs.count((s, t)) == 1
    for s in spheres:
        for box in boxes:
            assert pairs.count((s, box)) == 1
    # box-box: 8 corners of each side against the other box, and the edge-edge row
    assert pairs.count((1, 3)) == 17
    assert len(pairs) == 3 + 6 + 17
    assert not any(t.stages for t in model.terms)  # 10 pairs: brute force, no sweep stage


def test_no_collision_pairs_and_single_bodies():
    scene = jc.Scene()
    scene.add_box(0.1, 1.0, (0, 0, 0))
    model, state = scene.build()
    assert n_rows(model) == 0  # no planes, no other body
    scene.add_box(0.1, 1.0, (1, 0, 0))
    model, state = scene.build()
    assert n_rows(model) == 17  # 16 corner rows and the edge-edge row


def test_pair_parameters_equal_values_give_that_value():
    scene = jc.Scene(friction=0.7, stiffness=3e4, damping=12.5)
    scene.add_plane()
    scene.add_plane(normal=(1, 0, 0))
    scene.add_sphere(**_SPHERE)
    scene.add_sphere(0.2, 1.0, (1.0, 0.0, 1.0))
    scene.add_box(0.1, 1.0, (2.0, 0.0, 1.0))
    model, state = scene.build(dtype=jnp.float64)
    friction, stiffness, damping = (np.asarray(x) for x in
                                    pair_parameters(model, state))
    k = n_rows(model)
    assert k == 2 * (1 + 1 + 8) + 1 + 2
    np.testing.assert_allclose(friction, np.full(k, 0.7), rtol=_RTOL)
    np.testing.assert_allclose(stiffness, np.full(k, 3e4), rtol=_RTOL)
    np.testing.assert_allclose(damping, np.full(k, 12.5), rtol=_RTOL)


def test_pair_parameters_combination_rules():
    scene, _, _ = _mixed_scene()
    model, state = scene.build(dtype=jnp.float64)
    friction, stiffness, damping = (np.asarray(x) for x in
                                    pair_parameters(model, state))
    geom = {k: np.asarray(getattr(model.geom, k)) for k in ("friction", "stiffness", "damping")}
    plane = {k: np.asarray(getattr(model.plane, k)) for k in ("friction", "stiffness", "damping")}
    body_a, body_b, _ = _rows(model, state)
    # world rows come plane by plane (body-major within a plane) in each shape's group
    plane_of = []
    for term in model.terms:
        if isinstance(term, BodyPlane):
            per = 1 if term.shape == Shape.SPHERE else 8
            plane_of += [p for p in term.planes for _ in range(per)]
    sides = [(geom, a, plane, p) for a, p in zip(body_a, plane_of)]
    sides += [(geom, a, geom, b) for a, b in zip(body_a[len(plane_of):], body_b[len(plane_of):])]
    assert len(sides) == len(friction)
    for i, (left, a, right, b) in enumerate(sides):
        ka, kb = left["stiffness"][a], right["stiffness"][b]
        assert stiffness[i] == pytest.approx(2 * ka * kb / (ka + kb), rel=_RTOL), i
        assert friction[i] == pytest.approx(0.5 * (left["friction"][a] + right["friction"][b]),
                                            rel=_RTOL), i
        assert damping[i] == pytest.approx(0.5 * (left["damping"][a] + right["damping"][b]),
                                           rel=_RTOL), i
    # a soft side dominates: harmonic mean of 4e5 and 1e5 (sphere 2 on plane 1)
    i = list(zip(body_a, plane_of)).index((2, 1))
    assert stiffness[i] == pytest.approx(1.6e5, rel=_RTOL)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_model_and_state_leaves_have_requested_dtype(dtype):
    scene, _, _ = _mixed_scene()
    model, state = scene.build(contact=jc.Contact(normal="smooth", friction="tanh"),
                               solver=jc.Newton(iterations=3), dtype=dtype)
    for tree, what in ((model, "model"), (state, "state")):
        paths = jax.tree_util.tree_flatten_with_path(tree)[0]
        assert paths, what
        for path, leaf in paths:
            assert leaf.dtype == dtype, f"{what}{jax.tree_util.keystr(path)}: {leaf.dtype}"
    # settings travel as static structure
    assert model.contact.laws.normal == "smooth" and model.contact.laws.friction == "tanh"
    assert model.solver == jc.Newton(iterations=3)
    # pair parameters computed from the model keep its dtype
    assert all(x.dtype == dtype for x in pair_parameters(model, state))


def test_default_dtype_follows_jax_default():
    scene = _scene_with_ground()
    scene.add_sphere(**_SPHERE)
    model, state = scene.build()
    assert state.pos.dtype == jnp.zeros(()).dtype == jnp.float64  # x64 is on in tests
    assert model.body.mass.dtype == jnp.float64


@pytest.mark.parametrize("kind", ["ball", "hinge", "slider", "fixed", "distance"])
def test_world_on_either_side_builds_the_same_joint(kind):
    """DESIGN.md section 3: add_joint(kind, -1, b) and add_joint(kind, b, -1) are the same
    joint, with the same coordinate (θ, s), so limits and motor targets mean the same."""
    models = []
    for order in ((-1, 0), (0, -1)):
        scene = jc.Scene()
        quat = np.array([0.9, 0.1, 0.3, 0.2])
        scene.add_box(0.05, 1.0, pos=(0.2, 0.0, 1.0), quat=tuple(quat / np.linalg.norm(quat)))
        limit = (-1.0, 0.5) if kind in ("hinge", "slider") else None
        scene.add_joint(kind, *order, anchor=(0.0, 0.0, 1.0), axis=(0.0, 1.0, 1.0),
                        stiffness=1e4, limit=limit)
        models.append(scene.build()[0].joint)
    a, b = models
    assert a.body_a == b.body_a == (0,) and a.body_b == b.body_b == (-1,)
    for name in ("anchor_a", "anchor_b", "axis_a", "axis_b", "ref_a", "ref_b", "lower",
                 "upper", "rest_length"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)),
                                      np.asarray(getattr(b, name)), err_msg=name)


def test_a_float32_build_of_rotated_frames_warns_nothing():
    """Frames are NumPy float64 at build time whatever JAX's precision: with float64 off, a
    rotated body and a hinge in its frame build without JAX's "float64 ... truncated"
    warning (every import of gymnasium's models gave it), to the same rotation."""
    import warnings

    angle = 0.7
    quat = (math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        scene = jc.Scene()
        a = scene.add_box(0.1, 1.0, pos=(0.0, 0.0, 1.0), quat=quat)
        b = scene.add_box(0.1, 1.0, pos=(0.3, 0.0, 1.0))
        scene.add_joint("hinge", a, b, anchor=(0.15, 0.0, 1.0), axis=(0.0, 1.0, 0.0),
                        stiffness=1e4)
        model, state = scene.build(dtype=jnp.float32)
    assert state.pos.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(state.quat[a]), quat, atol=1e-7)


def test_joined_bodies_form_groups_whose_roundings_pool():
    """Bodies joined by joints or springs, directly or through others, share a group
    (`Body.group`); the step's resolution of each (the finest velocity its rounding resolves)
    is the root sum of squares of its group's (design note 62): two equal bodies at the same
    distance from the origin, joined, resolve √2 times coarser than apart."""
    from jaxcontact import terms

    @jax.jit
    def _resolution(model, state):
        control = jc.Control.zeros(model.n_body, model.n_motor, state.pos.dtype)
        return terms.PROBLEM.resolution((model, terms.prepare(model, state, control)))

    def resolutions(joined):
        scene = jc.Scene()
        a = scene.add_sphere(0.1, 1.0, pos=(0.0, 0.0, 1.0))
        b = scene.add_sphere(0.1, 1.0, pos=(0.0, 1.0, 0.0))
        c = scene.add_sphere(0.1, 1.0, pos=(5.0, 0.0, 0.0))
        d = scene.add_sphere(0.1, 1.0, pos=(6.0, 0.0, 0.0))
        scene.add_spring(c, d, stiffness=10.0)
        if joined:
            scene.add_joint("ball", a, b, anchor=(0.0, 0.5, 0.5), stiffness=1e4)
        model, state = scene.build()
        return model.body.group, np.asarray(_resolution(model, state))

    (apart, alone), (together, pooled) = resolutions(False), resolutions(True)
    assert apart == (0, 1, 2, 2) and together == (0, 0, 2, 2)
    np.testing.assert_allclose(pooled[:12], math.sqrt(2.0) * alone[:12], rtol=1e-12)
    np.testing.assert_allclose(pooled[12:], alone[12:], rtol=1e-12)
