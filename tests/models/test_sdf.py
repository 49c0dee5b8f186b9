"""Grid signed distance fields (jaxcontact/models/sdf.py, mesh_distance.py).

`sample` is checked where trilinear interpolation is exact (affine fields, values and
gradients, also with respect to the grid's leaves), to second order on a sphere, for finite
values and gradients at nodes, cell faces and far outside, and for continuity. The NumPy
constructors are checked against analytic SDFs (cube exact at nodes, sphere to the mesh's chord
error, planes exact) and against a brute-force reference (every triangle, winding-number signs)
on a non-convex mesh and a random terrain.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact.models import sdf
from jaxcontact.models.mesh_distance import point_triangle_distance

# Trilinear interpolation of an affine field and exact distances to planar faces, in float64:
# a few ulps of coordinates of size ~1.
_EXACT = 1e-12
# Two evaluations straddling a cell face by ±1e-12 m: the field is continuous with slope O(1).
_CONTINUITY = 1e-10

# Jitted and vmapped once; each grid shape compiles once.
_sample = jax.jit(jax.vmap(sdf.sample, (None, 0)))
_grad_point = jax.jit(jax.vmap(jax.grad(sdf.sample, argnums=1), (None, 0)))
_grad_grid = jax.jit(jax.vmap(jax.grad(sdf.sample, argnums=0), (None, 0)))
_normal = jax.jit(jax.vmap(sdf.normal, (None, 0)))
_hessian = jax.jit(jax.vmap(jax.hessian(sdf.sample, argnums=1), (None, 0)))

_A = np.array([0.3, -1.2, 0.7])
_B = 0.25
_LOWER = np.array([-0.5, -0.4, -0.3])
_H = 0.1


def _affine(p):
    return p @ _A + _B


@pytest.fixture(scope="module")
def affine_grid():
    grid = sdf.from_function(_affine, _LOWER, _LOWER + np.array([0.6, 0.5, 0.4]), _H)
    assert grid.values.shape == (7, 6, 5)
    return grid


def _upper(grid):
    return np.asarray(grid.origin) + float(grid.spacing) * (np.array(grid.values.shape) - 1)


def _special_points(grid):
    """Nodes, cell-face and edge points, box faces and corners, and points far outside."""
    lo, hi, h = np.asarray(grid.origin), _upper(grid), float(grid.spacing)
    pts = [lo, hi, lo + h * np.array([2.0, 3.0, 1.0]), lo + h * np.array([2.0, 3.5, 1.5]),
           lo + h * np.array([2.0, 3.0, 1.5]), lo + h * np.array([0.0, 2.5, 4.0]),
           np.array([hi[0], lo[1] + 0.5 * h, hi[2]]), hi + 1e3, lo - 1e3,
           np.array([1e6, 0.0, 0.0]), np.array([hi[0] + 0.3, lo[1] + 0.15, lo[2] - 2.0])]
    return np.stack(pts)


def test_affine_field_is_exact(affine_grid):
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(affine_grid.origin), _upper(affine_grid)
    special = _special_points(affine_grid)
    # random points, interior nodes, cell faces and edges, then the box's corners and faces
    inside = np.concatenate([rng.uniform(lo, hi, (50, 3)), special[2:6], special[:2],
                             special[6:7]])
    np.testing.assert_allclose(_sample(affine_grid, inside), _affine(inside), atol=_EXACT,
                               err_msg="value")
    # the gradient jumps across the box's faces (to slope 1 outward), and the box's upper
    # bound is rounded differently inside the jitted function: check it off those faces
    np.testing.assert_allclose(_grad_point(affine_grid, inside[:54]),
                               np.broadcast_to(_A, (54, 3)), atol=_EXACT, err_msg="gradient")


def test_gradient_with_respect_to_grid_leaves(affine_grid):
    """Moving the origin by δ shifts the field: ∂φ/∂origin = -a; scaling the spacing about the
    origin stretches it: ∂φ/∂spacing = -a·(p - origin)/spacing; the trilinear weights of the
    values sum to 1 and are >= 0."""
    # inside the box (the second on a cell face): on the box's own faces the derivative jumps
    # and which side a point falls on is a matter of rounding
    p = np.array([[-0.33, -0.02, -0.11], [0.05, 0.08, 0.0]])
    g = _grad_grid(affine_grid, p)
    np.testing.assert_allclose(g.origin, -np.broadcast_to(_A, (2, 3)), atol=_EXACT,
                               err_msg="d/d origin")
    np.testing.assert_allclose(g.spacing, -(p - _LOWER) @ _A / _H, atol=_EXACT,
                               err_msg="d/d spacing")
    np.testing.assert_allclose(jnp.sum(g.values, axis=(1, 2, 3)), 1.0, atol=_EXACT,
                               err_msg="d/d values sums to 1")
    assert np.all(np.asarray(g.values) >= 0.0), "d/d values is a convex weight"
    assert np.count_nonzero(np.asarray(g.values[0])) == 8, "8 nodes of the cell"


def test_outside_grows_with_euclidean_distance(affine_grid):
    lo, hi = np.asarray(affine_grid.origin), _upper(affine_grid)
    rng = np.random.default_rng(1)
    p = rng.uniform(lo - 2.0, hi + 2.0, (40, 3))
    clamped = np.clip(p, lo, hi)
    expected = _affine(clamped) + np.linalg.norm(p - clamped, axis=1)
    np.testing.assert_allclose(_sample(affine_grid, p), expected, atol=_EXACT, err_msg="value")
    # beyond the +x face only: slope 1 along x, the field's slope along y and z
    q = np.array([[hi[0] + 0.7, 0.0, 0.0]])
    np.testing.assert_allclose(_grad_point(affine_grid, q)[0], [1.0, _A[1], _A[2]],
                               atol=_EXACT, err_msg="gradient outside a face")


def test_finite_everywhere(affine_grid):
    pts = _special_points(affine_grid)
    leaves = [_sample(affine_grid, pts), _grad_point(affine_grid, pts),
              *jax.tree_util.tree_leaves(_grad_grid(affine_grid, pts)),
              _normal(affine_grid, pts), _hessian(affine_grid, pts)]
    for leaf in leaves:
        assert np.all(np.isfinite(np.asarray(leaf))), "non-finite value or gradient"


def test_continuity_across_cell_faces(affine_grid):
    # a non-affine field (so that neighbouring cells differ) sampled on the same grid shape
    grid = affine_grid.replace(values=jnp.asarray(
        np.random.default_rng(2).normal(size=affine_grid.values.shape)))
    lo, h = np.asarray(grid.origin), float(grid.spacing)
    face = lo + h * np.array([[3.0, 1.37, 2.61], [1.21, 4.0, 0.5], [2.0, 3.0, 2.2],
                              [2.0, 2.0, 2.0]])
    for axis in range(3):
        step = np.zeros(3)
        step[axis] = 1e-12
        below, above = _sample(grid, face - step), _sample(grid, face + step)
        np.testing.assert_allclose(below, above, atol=_CONTINUITY,
                                   err_msg=f"jump across a face normal to axis {axis}")


def _sphere_sdf(radius):
    return lambda p: np.linalg.norm(p, axis=1) - radius


def test_sphere_second_order():
    """Trilinear error <= h²/8 Σ_i max|∂²φ/∂x_i²| on a cell; for φ = |p| - R, |∂²φ/∂x_i²| <=
    1/|p|, so <= 3h²/(8 r_min) on cells away from the centre; halving h divides it by ~4."""
    rng = np.random.default_rng(3)
    dirs = rng.normal(size=(200, 3))
    pts = dirs / np.linalg.norm(dirs, axis=1, keepdims=True) * rng.uniform(0.4, 0.9, (200, 1))
    errors = []
    for h in (0.1, 0.05):
        grid = sdf.from_function(_sphere_sdf(0.6), (-1.0, -1.0, -1.0), (1.0, 1.0, 1.0), h)
        err = np.abs(np.asarray(_sample(grid, pts)) - _sphere_sdf(0.6)(pts)).max()
        # the cell of a point lies at |p| >= 0.4 - √3 h
        assert err <= 3.0 * h * h / (8.0 * (0.4 - np.sqrt(3.0) * h)), f"error {err} at h={h}"
        errors.append(err)
        normals = np.asarray(_normal(grid, pts))
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=_EXACT,
                                   err_msg="unit normal")
        radial = pts / np.linalg.norm(pts, axis=1, keepdims=True)
        assert np.all(np.sum(normals * radial, axis=1) > 1.0 - 2.0 * h * h), "normal direction"
    assert 3.0 < errors[0] / errors[1] < 5.5, f"second order: errors {errors}"


# --- meshes -------------------------------------------------------------------------------------

def _cube_mesh(half=0.5):
    """12 outward triangles of the cube [-half, half]³ (vertex index = 4 x + 2 y + z bits)."""
    vertices = np.array([[x, y, z] for x in (-half, half) for y in (-half, half)
                         for z in (-half, half)])
    faces = []
    for axis in range(3):
        u, v = [a for a in range(3) if a != axis]
        for side in (0, 1):
            quad = []
            for bu, bv in ((0, 0), (1, 0), (1, 1), (0, 1)):
                bits = np.zeros(3, int)
                bits[axis], bits[u], bits[v] = side, bu, bv
                quad.append(int(bits @ [4, 2, 1]))
            for tri in ([quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]):
                p = vertices[tri]
                # convex and centred at 0: outward iff the normal points away from 0
                if np.cross(p[1] - p[0], p[2] - p[0]) @ p.mean(axis=0) < 0.0:
                    tri = tri[::-1]
                faces.append(tri)
    return vertices, np.array(faces)


def _icosphere(levels):
    """Unit icosahedron refined `levels` times by edge midpoints pushed to the sphere."""
    g = (1.0 + 5.0 ** 0.5) / 2.0
    verts = [np.array(v, float) for v in (
        (-1, g, 0), (1, g, 0), (-1, -g, 0), (1, -g, 0), (0, -1, g), (0, 1, g), (0, -1, -g),
        (0, 1, -g), (g, 0, -1), (g, 0, 1), (-g, 0, -1), (-g, 0, 1))]
    verts = [v / np.linalg.norm(v) for v in verts]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4),
             (11, 10, 2), (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8),
             (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(levels):
        mids, refined = {}, []

        def mid(i, j):
            key = (min(i, j), max(i, j))
            if key not in mids:
                m = verts[i] + verts[j]
                verts.append(m / np.linalg.norm(m))
                mids[key] = len(verts) - 1
            return mids[key]
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            refined += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = refined
    return np.array(verts), np.array(faces)


def _box_sdf(half):
    def fn(p):
        q = np.abs(p) - half
        return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)
    return fn


def _winding(points, vertices, faces):
    """Brute-force generalized winding number (test reference for inside/outside)."""
    a, b, c = (vertices[faces[:, k]][None] - points[:, None] for k in range(3))
    la, lb, lc = (np.linalg.norm(x, axis=2) for x in (a, b, c))
    num = np.sum(a * np.cross(b, c), axis=2)
    den = (la * lb * lc + np.sum(a * b, axis=2) * lc + np.sum(b * c, axis=2) * la
           + np.sum(c * a, axis=2) * lb)
    return np.sum(np.arctan2(num, den), axis=1) / (2.0 * np.pi)


def test_cube_mesh_exact_at_nodes():
    vertices, faces = _cube_mesh(0.5)
    grid = sdf.from_mesh(vertices + np.array([0.2, -0.1, 0.3]), faces, 0.1, padding=0.25)
    nodes = sdf.node_positions(grid).reshape(-1, 3) - np.array([0.2, -0.1, 0.3])
    np.testing.assert_allclose(np.asarray(grid.values).ravel(), _box_sdf(0.5)(nodes),
                               atol=_EXACT, err_msg="cube SDF at the nodes")
    # the same mesh oriented inward gives the same field
    inward = sdf.from_mesh(vertices + np.array([0.2, -0.1, 0.3]), faces[:, ::-1], 0.1,
                           padding=0.25)
    np.testing.assert_allclose(inward.values, grid.values, atol=_EXACT, err_msg="inward")
    assert grid.values.shape == (16, 16, 16), "grid covers the box plus padding"


def test_icosphere_within_chord_error():
    vertices, faces = _icosphere(2)
    grid = sdf.from_mesh(vertices, faces, 0.1)
    nodes = sdf.node_positions(grid).reshape(-1, 3)
    values = np.asarray(grid.values).ravel()
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    n = np.cross(b - a, c - a)
    # Hausdorff distance of mesh and sphere: the deepest face plane (feet inside the faces)
    chord = 1.0 - np.min(np.sum(n / np.linalg.norm(n, axis=1, keepdims=True) * a, axis=1))
    assert 0.01 < chord < 0.03
    err = np.abs(values - (np.linalg.norm(nodes, axis=1) - 1.0))
    assert err.max() <= chord + _EXACT, f"error {err.max()} vs chord error {chord}"
    radius = np.linalg.norm(nodes, axis=1)
    assert np.all(values[radius < 1.0 - chord] < 0.0), "inside negative"
    assert np.all(values[radius > 1.0] > 0.0), "outside positive"


def test_nonconvex_mesh_against_brute_force():
    vertices, faces = _icosphere(1)
    # a star-shaped, non-convex body: radius 1 ± 0.35 by vertex
    bumps = 1.0 + 0.35 * np.sin(3.0 * vertices[:, 0] + 2.0 * vertices[:, 1]) * vertices[:, 2]
    vertices = vertices * bumps[:, None]
    grid = sdf.from_mesh(vertices, faces, 0.15)
    nodes = sdf.node_positions(grid).reshape(-1, 3)
    tri = [vertices[faces[:, k]] for k in range(3)]
    dist = point_triangle_distance(nodes, *tri).min(axis=1)
    inside = np.abs(_winding(nodes, vertices, faces)) > 0.5
    expected = np.where(inside, -dist, dist)
    np.testing.assert_allclose(np.asarray(grid.values).ravel(), expected, atol=_EXACT,
                               err_msg="signed distance vs brute force")
    assert 0 < np.count_nonzero(inside) < len(nodes) // 2


# --- heightfields -------------------------------------------------------------------------------

def test_flat_heightfield():
    grid = sdf.from_heightfield(np.full((9, 7), 0.3), 0.1, origin=(1.0, -2.0), depth=0.2,
                                height=0.4)
    nodes = sdf.node_positions(grid)
    np.testing.assert_allclose(grid.values, nodes[..., 2] - 0.3, atol=_EXACT, err_msg="z - c")
    assert grid.values.shape == (9, 7, 7), "footprint × [c - depth, c + height]"
    np.testing.assert_allclose(nodes[0, 0, 0], [1.0, -2.0, 0.1], atol=_EXACT, err_msg="origin")


def test_tilted_heightfield():
    a, b, c = 0.4, -0.25, 0.5
    x = np.arange(12) * 0.1
    y = np.arange(10) * 0.1
    heights = c + a * x[:, None] + b * y[None, :]
    grid = sdf.from_heightfield(heights, 0.1, depth=0.3, height=0.3, grid_spacing=0.05)
    nodes = sdf.node_positions(grid).reshape(-1, 3)
    normal = np.array([-a, -b, 1.0]) / np.sqrt(1.0 + a * a + b * b)
    expected = (nodes[:, 2] - c - a * nodes[:, 0] - b * nodes[:, 1]) * normal[2]
    # away from the border: the foot of the perpendicular lies on the terrain
    foot = nodes - expected[:, None] * normal
    away = np.all((foot[:, :2] >= 0.0) & (foot[:, :2] <= [1.1, 0.9]), axis=1)
    assert np.count_nonzero(away) > len(nodes) // 2
    np.testing.assert_allclose(np.asarray(grid.values).ravel()[away], expected[away],
                               atol=_EXACT, err_msg="perpendicular distance")


def test_random_terrain_against_brute_force():
    rng = np.random.default_rng(4)
    heights = rng.normal(size=(7, 6)) * 0.08
    grid = sdf.from_heightfield(heights, 0.1, origin=(0.5, 0.2), grid_spacing=0.04)
    nodes = sdf.node_positions(grid).reshape(-1, 3) - np.array([0.5, 0.2, 0.0])
    gx, gy = np.meshgrid(np.arange(7) * 0.1, np.arange(6) * 0.1, indexing="ij")
    verts = np.stack([gx, gy, heights], axis=-1).reshape(-1, 3)
    idx = np.arange(42).reshape(7, 6)
    quads = [idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(),
             idx[:-1, 1:].ravel()]
    faces = np.concatenate([np.stack(quads[:3], 1), np.stack([quads[0], quads[2], quads[3]], 1)])
    dist = point_triangle_distance(nodes, *(verts[faces[:, k]] for k in range(3))).min(axis=1)
    values = np.asarray(grid.values).ravel()
    np.testing.assert_allclose(np.abs(values), dist, atol=_EXACT, err_msg="distance")
    # sign: below the sample heights negative, above positive (nodes on sample columns)
    on_sample = np.all(np.abs(nodes[:, :2] / 0.1 - np.round(nodes[:, :2] / 0.1)) < 1e-9, axis=1)
    i, j = np.round(nodes[on_sample, :2] / 0.1).astype(int).T
    gap = nodes[on_sample, 2] - heights[i, j]
    assert np.all(np.sign(values[on_sample][np.abs(gap) > 1e-9]) == np.sign(gap[np.abs(gap)
                                                                               > 1e-9])), "sign"
    # and sample() of the grid is the field of a heightfield: 1-Lipschitz between nodes
    assert np.all(np.abs(np.diff(grid.values, axis=2)) <= 0.04 + _EXACT), "1-Lipschitz"


# --- validation ---------------------------------------------------------------------------------

_CUBE_V, _CUBE_F = _cube_mesh()


@pytest.mark.parametrize("call, name", [
    (lambda: sdf.from_mesh(_CUBE_V[:, :2], _CUBE_F, 0.1), "vertices"),
    (lambda: sdf.from_mesh(np.full((8, 3), np.nan), _CUBE_F, 0.1), "vertices"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F.astype(float), 0.1), "faces"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F[:, :2], 0.1), "faces"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F + 1, 0.1), "faces"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F[1:], 0.1), "faces"),
    (lambda: sdf.from_mesh(_CUBE_V, np.concatenate([_CUBE_F[:1, ::-1], _CUBE_F[1:]]), 0.1),
     "faces"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F, 0.0), "spacing"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F, -0.1), "spacing"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F, 0.1, padding=-1.0), "padding"),
    (lambda: sdf.from_mesh(_CUBE_V, _CUBE_F, 1e-4), "max_nodes"),
    (lambda: sdf.from_heightfield(np.zeros(5), 0.1), "heights"),
    (lambda: sdf.from_heightfield(np.zeros((1, 5)), 0.1), "heights"),
    (lambda: sdf.from_heightfield(np.zeros((3, 3)), float("inf")), "spacing"),
    (lambda: sdf.from_heightfield(np.zeros((3, 3)), 0.1, origin=(0.0,)), "origin"),
    (lambda: sdf.from_heightfield(np.zeros((3, 3)), 0.1, depth=0.0), "depth"),
    (lambda: sdf.from_heightfield(np.zeros((3, 3)), 0.1, grid_spacing=-1.0), "grid_spacing"),
    (lambda: sdf.from_heightfield(np.zeros((3, 3)), 0.1, grid_spacing=0.5), "grid_spacing"),
    (lambda: sdf.from_function(_affine, (0.0, 0.0, 0.0), (1.0, 1.0, 0.0), 0.1), "upper"),
    (lambda: sdf.from_function(lambda p: p, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 0.1), "fn"),
    (lambda: sdf.from_function(_affine, (0.0, 0.0), (1.0, 1.0, 1.0), 0.1), "lower"),
    (lambda: sdf.sample(sdf.GridSDF(origin=jnp.zeros(3), spacing=jnp.asarray(0.1),
                                    values=jnp.zeros((1, 4, 4))), jnp.zeros(3)), "values"),
])
def test_bad_input_names_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
