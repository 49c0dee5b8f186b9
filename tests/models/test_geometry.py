"""Shapes, contact points and the broad phase, against closed forms.

Kinematics: the gap, normal and point of each shape pairing (`models.geometry`) at placed
poses, where the distance is known exactly. Physics: resting penetration of box on box,
sphere on box, a mesh cube and a sphere on a heightfield obstacle, and a capsule rolling.
(The broad phase: test_broad_phase.py.)
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.models.contacts import contact_rows
from jaxcontact.models.geometry import CORNERS, FAR, segment_closest

G = 9.81


# every contact row at a state, one program per scene structure (eager dispatch of the many
# small vmapped operations costs far more than compiling them together)
_contact_rows = jax.jit(contact_rows)


def _frame(scene, **build):
    model, state = scene.build(dtype=jnp.float64, **build)
    frame = _contact_rows(model, state)
    return model, state, frame


def _rows_between(frame, a, b):
    """The used rows (unused ones carry the gap FAR) between bodies a and b."""
    sel = ((np.asarray(frame.body_a) == a) & (np.asarray(frame.body_b) == b)
           & (np.asarray(frame.gap) != FAR))
    return (np.asarray(frame.gap)[sel], np.asarray(frame.normal)[sel],
            np.asarray(frame.point)[sel])


# --- kinematics -----------------------------------------------------------------------------

def test_box_on_box_corner_rows_measure_the_face_distance():
    scene = jc.Scene()
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.0), rounding=0.01)
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.2 - 1e-3), rounding=0.01)  # 1 mm overlap
    _, _, frame = _frame(scene)
    gap, normal, point = _rows_between(frame, 0, 1)
    assert gap.shape == (16,)  # 8 corners of each box against the other
    face = np.argsort(gap)[:8]  # the 4 + 4 corners of the two facing faces
    np.testing.assert_allclose(gap[face], -1e-3, atol=1e-12)
    # the far faces: core height 0.18 + overlap-corrected face distance - both roundings
    np.testing.assert_allclose(np.sort(gap)[8:], 0.2 - 1e-3 - 2 * 0.01, atol=1e-12)
    # normals from b (upper box) into a (lower box): -z
    np.testing.assert_allclose(normal[face], np.tile([0.0, 0.0, -1.0], (8, 1)), atol=1e-12)
    np.testing.assert_allclose(point[face][:, 2], 0.1 - 5e-4, atol=1e-12)


def test_aligned_stack_corner_on_edge_is_found():
    # equal boxes exactly on top of each other: every corner sits on the other's edge, where
    # an unrounded box distance has no unique face; the rounding keeps the normal vertical
    scene = jc.Scene()
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.0))
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.2 - 2e-4))
    _, _, frame = _frame(scene)
    gap, normal, _ = _rows_between(frame, 0, 1)
    face = np.argsort(gap)[:8]
    np.testing.assert_allclose(gap[face], -2e-4, atol=1e-12)
    np.testing.assert_allclose(np.abs(normal[face][:, 2]), 1.0, atol=1e-12)


def test_sphere_against_box_face_edge_and_corner():
    h, r = 0.1, 0.05
    for centre, expected_gap, expected_normal in (
            ((0.03, 0.02, h + r - 1e-3), -1e-3, (0, 0, 1)),                     # face
            ((h + 0.02, 0.0, h + 0.03), math.hypot(0.02, 0.03) - r,
             (0.02, 0.0, 0.03)),                                                # edge
            ((h + 0.01, h + 0.02, h + 0.02), math.sqrt(0.0009) - r, (1, 2, 2))):  # corner
        scene = jc.Scene()
        scene.add_sphere(r, 1.0, centre)
        scene.add_box(h, 1.0, (0.0, 0.0, 0.0), rounding=0.0)
        _, _, frame = _frame(scene)
        gap, normal, _ = _rows_between(frame, 0, 1)
        n = np.asarray(expected_normal, float)
        np.testing.assert_allclose(gap, [expected_gap], atol=1e-12)
        np.testing.assert_allclose(normal[0], n / np.linalg.norm(n), atol=1e-12)


def test_rounded_box_is_a_minkowski_sum():
    # a sphere over a rounded box's corner: distance to the inner box corner minus both radii
    h, rho, r = 0.1, 0.02, 0.05
    centre = np.array([h + 0.03, h + 0.03, h + 0.03])
    scene = jc.Scene()
    scene.add_sphere(r, 1.0, centre)
    scene.add_box(h, 1.0, (0.0, 0.0, 0.0), rounding=rho)
    _, _, frame = _frame(scene)
    gap, _, _ = _rows_between(frame, 0, 1)
    np.testing.assert_allclose(gap, [np.linalg.norm(centre - (h - rho)) - rho - r], atol=1e-12)


def test_capsules_crossed_and_parallel():
    r = 0.03
    half_turn_x = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)  # z axis -> -y axis
    half_turn_y = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # z axis -> x axis
    scene = jc.Scene()
    scene.add_capsule(r, 0.2, 1.0, (0.0, 0.0, 0.0), quat=half_turn_y)
    scene.add_capsule(r, 0.2, 1.0, (0.05, 0.07, 2 * r - 1e-3), quat=half_turn_x)  # crossed
    _, _, frame = _frame(scene)
    gap, normal, point = _rows_between(frame, 0, 1)
    np.testing.assert_allclose(gap, [-1e-3], atol=1e-12)
    np.testing.assert_allclose(normal[0], [0.0, 0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(point[0], [0.05, 0.0, r - 5e-4], atol=1e-12)
    # parallel, overlapping over x in [0.1, 0.2]: the point is the middle of the overlap
    scene = jc.Scene()
    scene.add_capsule(r, 0.2, 1.0, (0.0, 0.0, 0.0), quat=half_turn_y)
    scene.add_capsule(r, 0.1, 1.0, (0.2, 0.0, 2 * r), quat=half_turn_y)
    _, _, frame = _frame(scene)
    gap, _, point = _rows_between(frame, 0, 1)
    np.testing.assert_allclose(gap, [0.0], atol=1e-12)
    np.testing.assert_allclose(point[0][0], 0.15, atol=1e-12)


def _turn(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return (math.cos(angle / 2), *(math.sin(angle / 2) * axis))


def test_crossed_box_edges_touch_at_the_common_perpendicular():
    # lower box turned 45° about y (top edge along y), upper about x (bottom edge along x):
    # no corner is near the other box, the edges cross at the centre
    h, rho = 0.1, 0.01
    reach = math.sqrt(2) * (h - rho) + rho          # centre to the rounded edge
    scene = jc.Scene()
    scene.add_box(h, 1.0, (0.0, 0.0, 0.0), quat=_turn((0, 1, 0), math.pi / 4), rounding=rho)
    scene.add_box(h, 1.0, (0.01, -0.02, 2 * reach - 1e-3), quat=_turn((1, 0, 0), math.pi / 4),
                  rounding=rho)
    _, _, frame = _frame(scene)
    gap, normal, point = _rows_between(frame, 0, 1)
    assert gap.shape == (17,)                       # 16 corner rows + the edge row
    edge = np.argmin(gap)
    np.testing.assert_allclose(gap[edge], -1e-3, atol=1e-12)
    np.testing.assert_allclose(normal[edge], [0.0, 0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(point[edge], [0.0, -0.02, reach - 5e-4], atol=1e-12)
    assert np.sort(gap)[1] > 0.03                   # corners are far


def _point_box(q, half):
    return np.linalg.norm(np.maximum(np.abs(q) - half, 0.0))


@jax.jit
def _segment_distances(p0, p1, q0, q1):
    """Distances of segment pairs (p0, p1) and (q0, q1), each (P, 3)."""
    def one(p0, p1, q0, q1):
        s, t = segment_closest(p0, p1 - p0, q0, q1 - q0)
        return jnp.linalg.norm(p0 + s * (p1 - p0) - q0 - t * (q1 - q0))
    return jax.vmap(one)(p0, p1, q0, q1)


def _box_features(centre, rot, half):
    """World corners (8, 3) and edges (12, 2, 3) of a box (a segment if half has zeros)."""
    corners = centre + (CORNERS * half) @ rot.T
    edges = [(corners[i], corners[j]) for i, j in itertools.combinations(range(8), 2)
             if np.sum(CORNERS[i] != CORNERS[j]) == 1]
    return corners, np.asarray(edges)


def _separated(centre_a, rot_a, half_a, centre_b, rot_b, half_b):
    """Exact separating-axis test of two boxes (half extents may be 0: a segment)."""
    axes = list(rot_a.T) + list(rot_b.T)
    axes += [np.cross(u, v) for u in rot_a.T for v in rot_b.T]
    d = centre_a - centre_b
    for n in axes:
        if np.linalg.norm(n) < 1e-9:
            continue
        n = n / np.linalg.norm(n)
        if abs(n @ d) > np.abs(rot_a.T @ n) @ half_a + np.abs(rot_b.T @ n) @ half_b:
            return True
    return False


@pytest.mark.parametrize("other", ["box", "capsule"])
def test_rows_find_the_distance_of_separated_boxes_and_capsules(other):
    # random separated poses: the smallest gap of a box-box (box-capsule) pair is the exact
    # distance of the two rounded shapes, the minimum over vertex-face pairs and all 144
    # (12) edge-edge pairs of segments; crossed edges are found by the edge row
    rng = np.random.default_rng(1)
    half_a, rho_a = np.array([0.1, 0.06, 0.04]), 0.005
    radius_b, half_length = 0.03, 0.12
    scene = jc.Scene()
    scene.add_box(half_a, 1.0, rounding=rho_a)
    if other == "box":
        core_b, rho_b = np.array([0.08, 0.05, 0.07]) - 0.004, 0.004
        scene.add_box(core_b + rho_b, 1.0, rounding=rho_b)
    else:
        core_b, rho_b = np.array([0.0, 0.0, half_length]), radius_b
        scene.add_capsule(radius_b, half_length, 1.0)
    model, state = scene.build(dtype=jnp.float64)

    @jax.jit
    def frame_at(pos, quat):                   # one program for every pose
        return contact_rows(model, state.replace(pos=pos, quat=quat))

    core_a = half_a - rho_a
    checked = edge_hits = 0
    for trial in range(40):
        quats = rng.normal(size=(2, 4))
        quats /= np.linalg.norm(quats, axis=1, keepdims=True)
        direction = rng.normal(size=3)
        centre_a = 0.24 * rng.uniform(0.6, 1.0) * direction / np.linalg.norm(direction)
        pos = np.stack([centre_a, np.zeros(3)])
        frame = frame_at(jnp.asarray(pos), jnp.asarray(quats))
        rot = np.asarray(jc.math.quat_to_mat(jnp.asarray(quats)))
        if not _separated(centre_a, rot[0], core_a, np.zeros(3), rot[1], core_b):
            continue
        corners_a, edges_a = _box_features(centre_a, rot[0], core_a)
        corners_b, edges_b = _box_features(np.zeros(3), rot[1], core_b)
        pairs = [(ea, eb) for ea in edges_a for eb in edges_b]
        segments = [jnp.asarray(np.array([p[i][j] for p in pairs])) for i in (0, 1)
                    for j in (0, 1)]
        distance = min(
            min(_point_box(rot[1].T @ c, core_b) for c in corners_a),
            min(_point_box(rot[0].T @ (c - centre_a), core_a) for c in corners_b),
            float(jnp.min(_segment_distances(*segments))))
        gap, _, _ = _rows_between(frame, 0, 1)
        np.testing.assert_allclose(gap.min(), distance - rho_a - rho_b, atol=1e-10)
        rows = np.asarray(frame.gap)
        checked += 1
        edge_hits += int(rows[-1] != FAR and rows[-1] == gap.min())
    print(f"{other}: {checked} separated poses, edge row closest in {edge_hits}")
    assert checked >= 20 and edge_hits >= 3  # the edge row is the closest feature in some


def test_segment_closest_points_against_brute_force():
    rng = np.random.default_rng(0)
    grid = np.linspace(0.0, 1.0, 401)
    for _ in range(20):
        sa, da, sb, db = rng.normal(size=(4, 3))
        s, t = segment_closest(*(jnp.asarray(x) for x in (sa, da, sb, db)))
        dist = np.linalg.norm((sa + grid[:, None, None] * da) - (sb + grid[None, :, None] * db),
                              axis=-1)
        best = dist.min()
        got = np.linalg.norm(sa + float(s) * da - sb - float(t) * db)
        assert got <= best + 1e-12 and got >= best - 1e-2


def test_capsule_mesh_and_obstacle_against_planes():
    scene = jc.Scene()
    scene.add_plane()
    tilt = 0.3
    scene.add_capsule(0.05, 0.2, 1.0, (0.0, 0.0, 0.5),
                      quat=(math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0))
    tetra = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 0.3]])
    scene.add_mesh(tetra, 1.0, (2.0, 0.0, 0.01))
    model, _, frame = _frame(scene)
    gap, _, _ = _rows_between(frame, 0, -1)
    ends = 0.5 + np.array([-1, 1]) * 0.2 * math.cos(tilt) - 0.05
    np.testing.assert_allclose(np.sort(gap), np.sort(ends), atol=1e-12)
    gap, normal, _ = _rows_between(frame, 1, -1)
    np.testing.assert_allclose(np.sort(gap), [0.01, 0.01, 0.01, 0.31], atol=1e-12)
    np.testing.assert_allclose(normal, np.tile([0.0, 0.0, 1.0], (4, 1)), atol=1e-15)
    # the mesh body's frame is its centre of mass
    np.testing.assert_allclose(model.body.mass[1], 1.0)


def _flat_terrain(height):
    heights = np.full((9, 9), height)
    return jc.sdf.from_heightfield(heights, 0.25, origin=(-1.0, -1.0))


def test_sphere_against_heightfield_obstacle():
    scene = jc.Scene()
    scene.add_obstacle(_flat_terrain(0.1))
    scene.add_sphere(0.05, 1.0, (0.1, 0.2, 0.16))
    _, _, frame = _frame(scene)
    gap, normal, _ = _rows_between(frame, 0, -1)
    np.testing.assert_allclose(gap, [0.01], atol=1e-9)
    np.testing.assert_allclose(normal, [[0.0, 0.0, 1.0]], atol=1e-9)


# --- physics --------------------------------------------------------------------------------

# RESTING_IN_CI: the resting closed forms below (box on box, crossed edges, heightfield) share
# one 9-body rollout that compiles for ~2 min, so they run in the slow tier only. CI checks the
# same contact geometry row by row in this file (corner rows, crossed edges, the heightfield
# obstacle) and resting penetration on the plane in test_physics.
# the resting scenes' rollouts, one program per scene structure
_settle = jax.jit(lambda model, state: jc.rollout(model, state, steps=400, return_info=True))


@pytest.fixture(scope="module")
def resting():
    """Box on box, sphere on box, mesh cube, a box on a crossed box edge and a capsule across
    a box edge (one scene: the groups are far apart and never collide), and a sphere on a
    terrain, settled."""
    k, m = 1e5, 1.0
    scene = jc.Scene(dt=0.002, stiffness=k, damping=200.0)
    scene.add_plane()
    scene.add_box(0.1, m, (0.0, 0.0, 0.1))
    scene.add_box(0.1, m, (0.0, 0.0, 0.3))
    scene.add_box(0.2, m, (1.0, 0.0, 0.2))
    scene.add_sphere(0.05, m, (1.0, 0.0, 0.45))  # centred: the box below stays level
    cube = np.array(list(itertools.product((-0.1, 0.1), repeat=3)))
    scene.add_mesh(cube, m, (3.0, 0.0, 0.1))
    # a box balanced on its bottom edge (along y) carrying a box on crossed edges, another
    # (top edge along x) carrying a capsule lying across it
    h, rho, r = CROSSED
    reach = math.sqrt(2) * (h - rho) + rho
    scene.add_box(h, m, (5.0, 0.0, reach), quat=_turn((0, 1, 0), math.pi / 4), rounding=rho)
    scene.add_box(h, m, (5.0, 0.0, 3 * reach), quat=_turn((1, 0, 0), math.pi / 4),
                  rounding=rho)
    scene.add_box(h, m, (7.0, 0.0, reach), quat=_turn((1, 0, 0), math.pi / 4), rounding=rho)
    scene.add_capsule(r, 0.15, m, (7.0, 0.0, 2 * reach + r), quat=_turn((1, 0, 0), math.pi / 2))
    for i, j in itertools.combinations(range(9), 2):  # the five groups are far apart
        if (i, j) not in ((0, 1), (2, 3), (5, 6), (7, 8)):
            scene.exclude_pair(i, j)
    terrain = jc.Scene(dt=0.002, stiffness=k, damping=200.0)
    terrain.add_obstacle(_flat_terrain(0.1))
    terrain.add_sphere(0.05, m, (0.0, 0.0, 0.15))
    out = []
    for sc in (scene, terrain):
        model, state = sc.build(dtype=jnp.float64)
        final, _, info = _settle(model, state)
        assert bool(jnp.all(info.converged))
        out.append((state, final))
    return k, m, out


CROSSED = (0.1, 0.01, 0.04)  # half size and rounding of the crossed boxes, capsule radius


@pytest.mark.slow  # 9-body fixture, ~2 min of compilation (see RESTING_IN_CI)
def test_box_on_box_resting_penetration(resting):
    k, m, ((_, final), _) = resting
    z = np.asarray(final.pos[:, 2])
    low = 2 * m * G / (4 * k)     # 4 rounded corners carry both boxes
    pair = m * G / (8 * k)        # equal faces: 4 corners of each box against the other
    np.testing.assert_allclose(z[0], 0.1 - low, rtol=0, atol=1e-8)
    np.testing.assert_allclose(z[1], 0.3 - low - pair, rtol=0, atol=1e-8)


@pytest.mark.slow  # 9-body fixture, ~2 min of compilation (see RESTING_IN_CI)
def test_box_and_capsule_rest_on_a_crossed_box_edge(resting):
    # a box balanced on its bottom edge (along y) carries a box on crossed edges, another
    # (top edge along x) a capsule lying across it: only the edge rows touch, each carrying
    # the weight above it (m g / k), and the boxes' two lower corners share the total load
    k, m, ((state, final), _) = resting
    h, rho, r = CROSSED
    reach = math.sqrt(2) * (h - rho) + rho
    z = np.asarray(final.pos[5:, 2])
    lower = reach - 2 * m * G / (2 * k)
    np.testing.assert_allclose(z[[0, 2]], lower, atol=1e-8)
    np.testing.assert_allclose(z[1], lower + 2 * reach - m * G / k, atol=1e-8)
    np.testing.assert_allclose(z[3], lower + reach + r - m * G / k, atol=1e-8)
    np.testing.assert_allclose(np.asarray(final.quat[5:]), np.asarray(state.quat[5:]),
                               atol=1e-8)


@pytest.mark.slow  # 9-body fixture, ~2 min of compilation (see RESTING_IN_CI)
def test_sphere_on_box_and_mesh_cube_resting_penetration(resting):
    k, m, ((_, final), _) = resting
    z = np.asarray(final.pos[:, 2])
    low = 2 * m * G / (4 * k)
    np.testing.assert_allclose(z[3], 0.4 - low + 0.05 - m * G / k, atol=1e-8)
    np.testing.assert_allclose(np.asarray(final.pos[3, :2]), [1.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(z[4], 0.1 - m * G / (4 * k), atol=1e-8)  # 4 bottom vertices


@pytest.mark.slow  # 9-body fixture, ~2 min of compilation (see RESTING_IN_CI)
def test_sphere_rests_on_heightfield(resting):
    k, m, (_, (_, final)) = resting
    np.testing.assert_allclose(float(final.pos[0, 2]), 0.15 - m * G / k, atol=1e-8)


def test_capsule_slides_then_rolls():
    # lying along y, pushed along x: friction turns sliding into rolling about the axis at
    # v = v0 m r² / (m r² + I_axis) (angular momentum about the contact line is conserved)
    r, half, m, v0 = 0.05, 0.1, 1.0, 1.0
    scene = jc.Scene(dt=0.001, friction=0.5, stiffness=1e6, damping=2e3)
    scene.add_plane()
    along_y = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)
    scene.add_capsule(r, half, m, (0.0, 0.0, r - m * G / 2e6), quat=along_y, vel=(v0, 0, 0))
    model, state = scene.build(dtype=jnp.float64)
    final, _, info = jc.rollout(model, state, steps=300, return_info=True)
    assert bool(jnp.all(info.converged))
    inertia_axis = float(model.body.inertia[0, 2])
    expected = v0 * m * r * r / (m * r * r + inertia_axis)
    np.testing.assert_allclose(float(final.vel[0, 0]), expected, rtol=2e-3)
    # rolling without slip: v = ω r about the capsule axis (world y)
    np.testing.assert_allclose(float(final.ang_vel[0, 1]) * r, expected, rtol=2e-3)


# --- gradients at the edge of contact -------------------------------------------------------

def _drop_loss(scene_fn):
    model, state = scene_fn().build(dtype=jnp.float64)

    def loss(vz):
        s = state.replace(vel=state.vel.at[-1, 2].set(vz))
        final, _ = jc.rollout(model, s, steps=5)
        return final.pos[-1, 2] + 0.1 * final.pos[-1, 0]
    return jax.jit(loss)


@pytest.mark.slow  # compile-heavy; test_touching_kinematics_have_finite_derivatives is in CI
@pytest.mark.parametrize("shape", ["box", "capsule", "crossed"])
def test_finite_gradient_when_shapes_just_touch(shape):
    def scene():
        sc = jc.Scene(dt=0.002, stiffness=1e5)
        if shape == "crossed":                              # crossed edges exactly touching
            reach = math.sqrt(2) * 0.098 + 0.002
            sc.add_box(0.1, 1.0, (0.0, 0.0, 0.0), quat=_turn((0, 1, 0), math.pi / 4))
            sc.add_box(0.1, 1.0, (0.03, 0.0, 2 * reach), quat=_turn((1, 0, 0), math.pi / 4))
        elif shape == "box":
            sc.add_box(0.1, 1.0, (0.0, 0.0, 0.0))
            sc.add_box(0.1, 1.0, (0.03, 0.0, 0.2))          # faces exactly touching
        else:
            sc.add_capsule(0.05, 0.2, 1.0, (0.0, 0.0, 0.0))
            sc.add_capsule(0.05, 0.2, 1.0, (0.0, 0.0, 0.5))  # ends exactly touching
        return sc
    loss = _drop_loss(scene)
    g = jax.jit(jax.grad(loss))(-0.05)
    assert np.isfinite(float(g))
    eps = 1e-6
    fd = (loss(-0.05 + eps) - loss(-0.05 - eps)) / (2 * eps)
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-5, atol=1e-9)


@pytest.mark.slow  # ~30 s of compilation; CI: the contacts that start and end of
# solvers/test_adjoint_finite_differences.py
def test_touching_kinematics_have_finite_derivatives():
    # shapes exactly touching, in the configurations where features meet: aligned equal boxes
    # (corners on edges), parallel capsules end to end, a sphere on a box edge, crossed edges
    scene = jc.Scene()
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.0))
    scene.add_box(0.1, 1.0, (0.0, 0.0, 0.2))
    reach = math.sqrt(2) * 0.098 + 0.002                 # default rounding: 2% of 0.1
    scene.add_box(0.1, 1.0, (4.0, 0.0, 0.0), quat=_turn((0, 1, 0), math.pi / 4))
    scene.add_box(0.1, 1.0, (4.0, 0.0, 2 * reach), quat=_turn((1, 0, 0), math.pi / 4))
    scene.add_capsule(0.05, 0.2, 1.0, (2.0, 0.0, 0.0))
    scene.add_capsule(0.05, 0.2, 1.0, (2.0, 0.0, 0.5))
    scene.add_sphere(0.05, 1.0, (0.1 + 0.05 / math.sqrt(2), 0.0, -0.1 - 0.05 / math.sqrt(2)))
    model, state = scene.build(dtype=jnp.float64)

    def frame(pos, quat):
        f = contact_rows(model, state.replace(pos=pos, quat=quat))
        return f.gap, f.normal, f.point

    @jax.jit   # one program for the rows and both derivatives
    def derivatives(pos, quat):
        jacs = jax.jacfwd(frame, argnums=(0, 1))(pos, quat)
        hess = jax.hessian(lambda p: jnp.sum(frame(p, quat)[0] ** 2))(pos)
        return contact_rows(model, state.replace(pos=pos, quat=quat)), jacs, hess

    rows, jacs, hess = derivatives(state.pos, state.quat)
    assert float(jnp.min(rows.gap)) == pytest.approx(0.0, abs=1e-12)  # they do touch
    crossed, _, _ = _rows_between(rows, 2, 3)
    assert crossed.min() == pytest.approx(0.0, abs=1e-12)               # at the edge row
    for jac in jacs:
        for block in jac:
            assert bool(jnp.all(jnp.isfinite(block)))
    assert bool(jnp.all(jnp.isfinite(hess)))


# --- validation -----------------------------------------------------------------------------

@pytest.mark.parametrize("call,name", [
    (lambda s: s.add_capsule(-0.1, 0.2, 1.0), "radius"),
    (lambda s: s.add_capsule(0.1, 0.0, 1.0), "half_length"),
    (lambda s: s.add_box(0.1, 1.0, rounding=0.1), "rounding"),
    (lambda s: s.add_box(0.1, 1.0, density=1000.0), "mass and density"),
    (lambda s: s.add_sphere(0.1), "mass and density"),
    (lambda s: s.add_mesh(np.zeros((4, 3)), 1.0), "vertices"),
    (lambda s: s.add_mesh([[0, 0], [1, 1]], 1.0), "vertices"),
    (lambda s: s.add_obstacle(np.zeros((4, 4, 4))), "grid"),
])
def test_bad_shapes_raise(call, name):
    with pytest.raises(ValueError, match=name):
        call(jc.Scene())


def test_density_gives_mass_from_shape():
    scene = jc.Scene()
    scene.add_box((0.1, 0.2, 0.3), density=500.0)
    scene.add_capsule(0.1, 0.2, density=1000.0)
    model, _ = scene.build(dtype=jnp.float64)
    np.testing.assert_allclose(float(model.body.mass[0]), 500.0 * 0.2 * 0.4 * 0.6, rtol=1e-12)
    capsule = 1000.0 * (math.pi * 0.01 * 0.4 + 4 / 3 * math.pi * 0.001)
    np.testing.assert_allclose(float(model.body.mass[1]), capsule, rtol=1e-12)
