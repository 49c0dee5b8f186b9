"""Mass properties from shape and density (jaxcontact/models/mass.py).

Closed forms are checked against textbook formulas, the capsule against an independent
numerical integration over slices along its axis, and the convex-mesh path (signed tetrahedra)
against `box` for boxes in arbitrary poses and against grid integration over the hull's planes.
"""

import math

import numpy as np
import pytest

from jaxcontact.models import mass

# Closed forms and the tetrahedron sums in float64: a few ulps of quantities of size ~1.
_EXACT = 1e-12
# Slice integration of the capsule by Simpson's rule on 2001 nodes per segment: the integrands
# are polynomials of degree <= 4 in the slice variable (see `_capsule_numeric`), so the
# quadrature error is ~(h/r)⁴/180 ~ 1e-15 and rounding dominates; 1e-9 leaves a wide margin
# and still catches any wrong term (a misplaced cap centre changes I_x by > 1e-2).
_SLICES = 1e-9
# Midpoint-rule integration of a hull's indicator on an 80³ grid: the cells cut by the boundary
# make relative errors of at most ~(cell size)/(body size) ~ 1e-2, in practice far less as they
# average out (measured: mass 4e-5, moments <= 1.2e-4, products <= 6e-5 of I_max).
_GRID = 3e-3


def _rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def _box_corners(half):
    return np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half


def test_sphere_formula():
    m, inertia = mass.sphere(0.3, 1000.0)
    expected = 4.0 / 3.0 * math.pi * 0.027 * 1000.0
    assert m == pytest.approx(expected, rel=_EXACT), "mass"
    np.testing.assert_allclose(inertia, 0.4 * expected * 0.09, rtol=_EXACT, err_msg="inertia")


def test_box_formula():
    m, inertia = mass.box((0.5, 1.0, 1.5), 2.0)
    # full edges 1, 2, 3: m = 6 ρ, I_x = m (2² + 3²)/12
    assert m == pytest.approx(12.0, rel=_EXACT), "mass"
    np.testing.assert_allclose(inertia, 12.0 / 12.0 * np.array([13.0, 10.0, 5.0]),
                               rtol=_EXACT, err_msg="inertia")


def _simpson(f, lo, hi, n=2001):
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return float(np.sum(w * f(x)) * (hi - lo) / (n - 1) / 3.0)


def _capsule_numeric(r, half, rho):
    """Mass and moments by slices perpendicular to the axis: a disc of radius a(z) at height z
    has dm = ρ π a² dz, dI_z = dm a²/2, dI_x = dm (a²/4 + z²). Cylinder: z ∈ [-L, L], a = r;
    caps: z = L + w, a² = r² - w², w ∈ [0, r] (twice, by symmetry)."""
    def cyl(z, moment):
        a2 = np.full_like(z, r * r)
        return rho * math.pi * a2 * moment(a2, z)

    def cap(w, moment):
        a2 = r * r - w * w
        return 2.0 * rho * math.pi * a2 * moment(a2, half + w)

    moments = {"mass": lambda a2, z: 1.0, "axial": lambda a2, z: a2 / 2.0,
               "transverse": lambda a2, z: a2 / 4.0 + z * z}
    out = {}
    for name, moment in moments.items():
        out[name] = _simpson(lambda w: cap(w, moment), 0.0, r)
        if half > 0:
            out[name] += _simpson(lambda z: cyl(z, moment), -half, half)
    return out["mass"], np.array([out["transverse"], out["transverse"], out["axial"]])


@pytest.mark.parametrize("radius, half_length", [(0.1, 0.4), (0.5, 0.1), (0.2, 0.0)])
def test_capsule_against_slice_integration(radius, half_length):
    m, inertia = mass.capsule(radius, half_length, 800.0)
    m_ref, inertia_ref = _capsule_numeric(radius, half_length, 800.0)
    assert m == pytest.approx(m_ref, rel=_SLICES), "mass"
    np.testing.assert_allclose(inertia, inertia_ref, rtol=_SLICES, err_msg="inertia")


def test_capsule_limits():
    m, inertia = mass.capsule(0.3, 0.0, 500.0)
    m_s, inertia_s = mass.sphere(0.3, 500.0)
    assert m == pytest.approx(m_s, rel=_EXACT), "mass at half_length 0"
    np.testing.assert_allclose(inertia, inertia_s, rtol=_EXACT, err_msg="inertia at L = 0")
    # a very long capsule tends to a slender rod: I_x -> m (2L)²/12, I_z -> m r²/2
    m, inertia = mass.capsule(1e-3, 10.0, 1.0)
    assert inertia[0] == pytest.approx(m * 400.0 / 12.0, rel=1e-3), "rod transverse moment"
    assert inertia[2] == pytest.approx(m * 1e-6 / 2.0, rel=1e-3), "rod axial moment"


def test_box_mesh_equals_box():
    half = np.array([0.3, 0.5, 0.7])
    m, com, inertia, rot = mass.convex_mesh(_box_corners(half), 750.0)
    m_box, inertia_box = mass.box(half, 750.0)
    assert m == pytest.approx(m_box, rel=_EXACT), "mass"
    np.testing.assert_allclose(com, 0.0, atol=_EXACT, err_msg="com")
    np.testing.assert_allclose(inertia, inertia_box[::-1], rtol=_EXACT, err_msg="inertia")
    assert np.linalg.det(rot) == pytest.approx(1.0, abs=_EXACT), "det rotation"


def test_rotated_translated_box_mesh():
    half = np.array([0.2, 0.45, 0.8])  # distinct moments: the principal axes are unique
    rot_true = _rotation((1.0, -2.0, 0.5), 0.9)
    shift = np.array([1.5, -0.3, 2.0])
    corners = _box_corners(half) @ rot_true.T + shift
    # extra interior points must not change anything
    inner = np.random.default_rng(0).uniform(-0.9, 0.9, (20, 3)) * half @ rot_true.T + shift
    m, com, inertia, rot = mass.convex_mesh(np.concatenate([corners, inner]), 1200.0)
    m_box, inertia_box = mass.box(half, 1200.0)
    assert m == pytest.approx(m_box, rel=_EXACT), "mass"
    np.testing.assert_allclose(com, shift, atol=_EXACT, err_msg="com")
    order = np.argsort(inertia_box)
    np.testing.assert_allclose(inertia, inertia_box[order], rtol=_EXACT, err_msg="inertia")
    assert np.linalg.det(rot) == pytest.approx(1.0, abs=_EXACT), "det rotation"
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=_EXACT, err_msg="orthonormal")
    # body axis k maps onto the box edge direction with the k-th smallest moment (up to sign)
    cosines = np.abs(np.sum(rot * rot_true[:, order], axis=0))
    np.testing.assert_allclose(cosines, 1.0, atol=1e-10, err_msg="principal axes vs edges")
    # and the body-frame box, mapped by (com, rot), reproduces the corners
    body = (corners - com) @ rot
    np.testing.assert_allclose(np.sort(np.abs(body).max(axis=0)), np.sort(half), atol=1e-10,
                               err_msg="box in the principal frame")


def test_convex_hull_of_cube_with_interior_points():
    corners = _box_corners(np.array([1.0, 1.0, 1.0]))
    inner = np.random.default_rng(1).uniform(-0.8, 0.8, (30, 3))
    points = np.concatenate([inner[:15], corners, inner[15:]])
    hull_vertices, planes = mass.convex_hull(points)
    assert hull_vertices.shape == (8, 3), "hull vertices"
    np.testing.assert_allclose(np.sort(np.abs(hull_vertices), axis=0), 1.0, err_msg="corners")
    assert planes.shape == (6, 4), "one plane per face"
    np.testing.assert_allclose(np.sort(np.abs(planes[:, :3]).max(axis=1)), 1.0, atol=_EXACT,
                               err_msg="axis-aligned normals")
    np.testing.assert_allclose(planes[:, 3], 1.0, atol=_EXACT, err_msg="offsets")
    assert np.all(points @ planes[:, :3].T <= planes[:, 3] + _EXACT), "points inside"


def test_convex_mesh_against_grid_integration():
    """A random convex polytope: tetrahedra sums vs midpoint-rule integration of its
    indicator (built from `convex_hull`'s planes), with the moments taken about the result's
    own centre of mass and axes."""
    rng = np.random.default_rng(2)
    points = rng.normal(size=(25, 3)) * np.array([0.5, 0.3, 0.2]) + np.array([1.0, 2.0, -1.0])
    m, com, inertia, rot = mass.convex_mesh(points, 900.0)
    _, planes = mass.convex_hull(points)
    lo, hi = points.min(axis=0), points.max(axis=0)
    n = 80
    cell = (hi - lo) / n
    axes = [lo[d] + cell[d] * (np.arange(n) + 0.5) for d in range(3)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    inside = np.all(grid @ planes[:, :3].T <= planes[:, 3], axis=1)
    x = grid[inside]
    dm = 900.0 * float(np.prod(cell))
    m_ref = dm * len(x)
    com_ref = x.mean(axis=0)
    body = (x - com_ref) @ rot
    sq = body * body
    inertia_ref = dm * np.array([np.sum(sq[:, 1] + sq[:, 2]), np.sum(sq[:, 0] + sq[:, 2]),
                                 np.sum(sq[:, 0] + sq[:, 1])])
    products = dm * np.array([np.sum(body[:, 0] * body[:, 1]), np.sum(body[:, 0] * body[:, 2]),
                              np.sum(body[:, 1] * body[:, 2])])
    assert m == pytest.approx(m_ref, rel=_GRID), "mass"
    np.testing.assert_allclose(com, com_ref, atol=_GRID * np.ptp(points, axis=0).max(),
                               err_msg="com")
    np.testing.assert_allclose(inertia, inertia_ref, rtol=_GRID, err_msg="principal moments")
    # principal frame: the products of inertia vanish
    assert np.all(np.abs(products) <= _GRID * inertia.max()), "products of inertia"
    assert np.all(np.diff(inertia) >= 0.0), "ascending moments"


@pytest.mark.parametrize("call, name", [
    (lambda: mass.sphere(-1.0, 1.0), "radius"),
    (lambda: mass.sphere(1.0, 0.0), "density"),
    (lambda: mass.sphere(1.0, float("nan")), "density"),
    (lambda: mass.box((1.0, 1.0), 1.0), "half_size"),
    (lambda: mass.box((1.0, -1.0, 1.0), 1.0), "half_size"),
    (lambda: mass.capsule(0.0, 1.0, 1.0), "radius"),
    (lambda: mass.capsule(1.0, -0.1, 1.0), "half_length"),
    (lambda: mass.capsule(1.0, 0.1, -5.0), "density"),
    (lambda: mass.convex_mesh(np.zeros((3, 3)), 1.0), "vertices"),
    (lambda: mass.convex_mesh(np.eye(3)[:, :2], 1.0), "vertices"),
    (lambda: mass.convex_mesh(_box_corners(1.0)[:4] * np.array([1.0, 1.0, 0.0]), 1.0),
     "vertices"),
    (lambda: mass.convex_mesh(_box_corners(1.0), -1.0), "density"),
    (lambda: mass.convex_mesh(np.full((8, 3), np.inf), 1.0), "vertices"),
    (lambda: mass.convex_hull(np.zeros((5, 3))), "vertices"),
])
def test_bad_input_names_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
