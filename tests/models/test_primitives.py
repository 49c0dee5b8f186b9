"""Build-time primitives (`models.primitives`): the convex stand-ins for cylinders and
ellipsoids lie on the exact surface within their stated gaps, and the signed distances are
exact."""

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from jaxcontact.models import primitives

# Tolerance of quantities that are exact up to float64 rounding on sizes of order 1.
_EXACT = 1e-12


def _support_gap(vertices, support):
    """Largest gap between the hull of `vertices` and the solid whose support function
    (max over the solid of n·x) is `support(n)`: max over hull faces of support(n) - offset."""
    planes = ConvexHull(vertices).equations
    normals, offsets = planes[:, :3], -planes[:, 3]
    return float(np.max(support(normals) - offsets))


def test_cylinder_prism_has_its_vertices_on_the_surface_and_the_polygons_gap():
    r, h = 0.3, 0.2
    v = primitives.cylinder_vertices(r, h)
    assert v.shape == (2 * primitives.CYLINDER_SEGMENTS, 3)
    np.testing.assert_allclose(np.linalg.norm(v[:, :2], axis=1), r, atol=_EXACT)
    np.testing.assert_allclose(np.abs(v[:, 2]), h, atol=_EXACT)
    # a polygon vertex points along ±x and ±y (a cylinder lying on its side rests on one)
    for axis in ([r, 0.0], [0.0, r], [-r, 0.0], [0.0, -r]):
        assert np.min(np.linalg.norm(v[:, :2] - axis, axis=1)) < _EXACT

    def support(n):       # the cylinder's: r |n_xy| + h |n_z|
        return r * np.linalg.norm(n[:, :2], axis=1) + h * np.abs(n[:, 2])
    gap = _support_gap(v, support)
    assert abs(gap - r * primitives.polygon_gap(primitives.CYLINDER_SEGMENTS)) < _EXACT
    assert gap < 0.0086 * r         # the documented 0.86 %


def test_ellipsoid_polyhedron_has_its_vertices_on_the_surface_within_the_stated_gap():
    a = np.array([0.3, 0.2, 0.05])
    v = primitives.ellipsoid_vertices(a)
    assert v.shape == (10 * primitives.ELLIPSOID_FREQUENCY ** 2 + 2, 3) == (162, 3)
    np.testing.assert_allclose(np.sum((v / a) ** 2, axis=1), 1.0, atol=_EXACT)
    for tip in np.concatenate([np.diag(a), -np.diag(a)]):    # the six tips are vertices
        assert np.min(np.linalg.norm(v - tip, axis=1)) < _EXACT

    def support(n):       # the ellipsoid's: |diag(a) n|
        return np.linalg.norm(n * a, axis=1)
    assert _support_gap(v, support) <= 0.0178 * np.max(a)     # the documented 1.78 %
    # on the unit sphere the bound is reached (it is the geodesic sphere's own gap)
    sphere = primitives.geodesic_sphere()
    assert 0.017 < _support_gap(sphere, lambda n: np.ones(len(n))) < 0.0178


def test_primitive_distances_have_their_closed_form_values():
    q = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.7], [0.4, 0.3, 0.6]])
    np.testing.assert_allclose(primitives.sphere_distance(q, 0.2),
                               [-0.2, 0.3, 0.5, np.sqrt(0.61) - 0.2], atol=_EXACT)
    np.testing.assert_allclose(primitives.capsule_distance(q, 0.1, 0.5),
                               [-0.1, 0.4, 0.1, np.sqrt(0.26) - 0.1], atol=_EXACT)
    np.testing.assert_allclose(primitives.box_distance(q, (0.2, 0.3, 0.4)),
                               [-0.2, 0.3, 0.3, np.hypot(0.2, 0.2)], atol=_EXACT)
    np.testing.assert_allclose(primitives.cylinder_distance(q, 0.3, 0.4),
                               [-0.3, 0.2, 0.3, np.hypot(0.2, 0.2)], atol=_EXACT)


def test_ellipsoid_distance_is_exact():
    """Against known values (the centre: -min a; points on an axis: a_i - |q_i| when the tip
    is nearest), a sphere's closed form when the semi-axes agree, and a dense sampling of the
    surface: the exact distance is at most every sampled point's distance, and within the
    sampling's resolution of the nearest one."""
    rng = np.random.default_rng(0)
    for a in (np.array([0.3, 0.2, 0.1]), np.array([0.1, 0.1, 0.3]), np.array([0.1, 0.3, 0.1])):
        np.testing.assert_allclose(primitives.ellipsoid_distance([[0.0, 0.0, 0.0]], a),
                                   [-np.min(a)], atol=_EXACT)
        q = rng.normal(size=(200, 3)) * 0.25
        d = primitives.ellipsoid_distance(q, a)
        inside = np.sum((q / a) ** 2, axis=1) < 1.0
        assert np.all((d < 0) == inside)
        surface = primitives.geodesic_sphere(40) * a       # 16002 points
        brute = np.min(np.linalg.norm(q[:, None] - surface[None], axis=2), axis=1)
        spacing = np.max(a) * 2 * np.pi / (5 * 40)          # neighbouring points' distance
        assert np.all(np.abs(d) <= brute + _EXACT)
        assert np.all(brute - np.abs(d) <= spacing)
    q = np.array([[0.5, 0.0, 0.0], [0.0, 0.0, -0.25]])
    np.testing.assert_allclose(primitives.ellipsoid_distance(q, (0.3, 0.2, 0.1)), [0.2, 0.15],
                               atol=_EXACT)
    q = rng.normal(size=(50, 3))
    np.testing.assert_allclose(primitives.ellipsoid_distance(q, (0.2, 0.2, 0.2)),
                               np.linalg.norm(q, axis=1) - 0.2, atol=_EXACT)


@pytest.mark.parametrize("call, name", [
    (lambda: primitives.cylinder_vertices(-1.0, 0.1), "radius"),
    (lambda: primitives.cylinder_vertices(0.1, 0.0), "half_height"),
    (lambda: primitives.cylinder_vertices(0.1, 0.1, segments=2), "segments"),
    (lambda: primitives.ellipsoid_vertices((0.1, 0.2)), "semi_axes"),
    (lambda: primitives.ellipsoid_vertices((0.1, 0.2, 0.3), frequency=0), "frequency"),
    (lambda: primitives.box_distance(np.zeros((2, 3)), (0.1, -0.2, 0.3)), "half_size"),
    (lambda: primitives.sphere_distance(np.zeros((2, 2)), 0.1), "points"),
    (lambda: primitives.ellipsoid_distance(np.zeros((2, 3)), (0.1, np.nan, 0.1)),
     "semi_axes"),
])
def test_bad_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()
