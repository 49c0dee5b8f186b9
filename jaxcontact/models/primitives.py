"""Primitive solids at build time (NumPy): convex polyhedra for the curved shapes the contact
core has no form for, and the exact signed distance of each primitive.

Cylinders and ellipsoids are not core shapes (`geometry`): a moving one is a convex `mesh`
geom, the hull of points on its exact surface (`cylinder_vertices`, `ellipsoid_vertices`).
Every vertex lies on the true surface, so the hull lies inside it; the largest gap between
the two, at the middle of a hull face, is the approximation's error:

- a cylinder (radius r, half-height h, axis z) is a prism on a regular polygon of n sides,
  gap r (1 - cos(π/n)) (0.86 % of r at n = 24); its flat faces and rims are exact;
- an ellipsoid (semi-axes a) is a geodesic sphere (an icosahedron whose faces are cut into f²
  triangles, points pushed out to the unit sphere: 10 f² + 2 of them) stretched by a; the
  unit sphere's gap is 1.78 % at f = 4, and stretching maps hull faces to hull faces and the
  sphere to the ellipsoid, so the gap is at most 1.78 % of the largest semi-axis.

Against a plane or an obstacle a mesh touches with its vertices, so a body resting on a
vertex rests exactly: the cylinder's rims, and its side where a polygon vertex points down
(n a multiple of 4 puts one at ±x and ±y); the ellipsoid's six tips (the geodesic sphere
of even frequency has a vertex at each: the midpoints of six icosahedron edges). A stable
ellipsoid rests on a tip.

The signed distances (negative inside) are exact, for `sdf.from_function`: sphere |q| - r;
capsule |q - clip(q_z, -h, h) e_z| - r; box |max(d, 0)| + min(max_i d_i, 0) with
d = |q| - h; cylinder the same with d = (|q_xy| - r, |q_z| - h); ellipsoid by the
closest-point condition (`ellipsoid_distance`).
"""

from __future__ import annotations

import numpy as np

from jaxcontact import validate as check

# Sides of a cylinder's polygon: gap r (1 - cos(π/24)) = 0.86 % of r (16 sides: 1.9 %,
# 32: 0.48 %); a multiple of 4, so a polygon vertex points along ±x and ±y; 48 contact
# points, each a row against a plane.
CYLINDER_SEGMENTS = 24
# Frequency of an ellipsoid's geodesic sphere: 162 vertices and 320 faces, gap 1.78 % of the
# largest semi-axis (frequency 3: 92 vertices, 2.84 %; 5: 252, 1.15 %; the cost of a mesh
# is one contact row per vertex against a plane, vertices × faces against another mesh).
# Even, so the six tips are vertices.
ELLIPSOID_FREQUENCY = 4
# Bisection steps of `ellipsoid_distance`: each halves the bracket of the multiplier t, whose
# width is at most a_max (|y| + a_max); 200 halvings reach float64's resolution of any bracket.
_BISECTIONS = 200


def _semi_axes(name, value, count):
    return check.vector(name, value, count, positive=True)


def polygon_gap(segments) -> float:
    """Largest gap between a circle of radius 1 and its inscribed regular polygon of
    `segments` sides: 1 - cos(π/n)."""
    n = check.integer("segments", segments, low=3)
    return 1.0 - np.cos(np.pi / n)


def cylinder_vertices(radius, half_height, segments=CYLINDER_SEGMENTS) -> np.ndarray:
    """Vertices (2n, 3) of the prism inscribed in a cylinder: two rings of n points at
    (r cos 2πk/n, r sin 2πk/n, ±h), k = 0..n-1 (axis z, centred at the origin).

    Args:
      radius: r, m (> 0).
      half_height: h, m (> 0).
      segments: n, sides of the polygon (>= 3).
    """
    r = check.number("radius", radius, positive=True)
    h = check.number("half_height", half_height, positive=True)
    n = check.integer("segments", segments, low=3)
    angle = 2.0 * np.pi * np.arange(n) / n
    ring = np.stack([r * np.cos(angle), r * np.sin(angle), np.zeros(n)], axis=1)
    return np.concatenate([ring - [0.0, 0.0, h], ring + [0.0, 0.0, h]])


def _icosahedron():
    """The 12 unit vertices (0, ±1, ±φ) and cyclic permutations, and its 20 faces."""
    from scipy.spatial import ConvexHull  # build-time only dependency

    phi = 0.5 * (1.0 + np.sqrt(5.0))
    base = np.array([[0.0, s1, s2 * phi] for s1 in (-1.0, 1.0) for s2 in (-1.0, 1.0)])
    points = np.concatenate([base, np.roll(base, 1, axis=1), np.roll(base, 2, axis=1)])
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points, ConvexHull(points).simplices


def geodesic_sphere(frequency=ELLIPSOID_FREQUENCY) -> np.ndarray:
    """Unit vectors (10 f² + 2, 3): each icosahedron face cut into f² triangles (barycentric
    points (i, j, f - i - j)/f of its corners), normalized onto the unit sphere, shared
    points counted once."""
    f = check.integer("frequency", frequency, low=1)
    corners, faces = _icosahedron()
    weights = np.array([(i, j, f - i - j) for i in range(f + 1) for j in range(f + 1 - i)],
                       float) / f
    points = np.einsum("wk,tkd->twd", weights, corners[faces]).reshape(-1, 3)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    # a point shared by faces is computed once per face, equal to rounding: keep one
    _, first = np.unique(np.round(points, 9), axis=0, return_index=True)
    return points[np.sort(first)]


def ellipsoid_vertices(semi_axes, frequency=ELLIPSOID_FREQUENCY) -> np.ndarray:
    """Vertices (10 f² + 2, 3) of a convex polyhedron inscribed in the ellipsoid
    Σ (x_i / a_i)² = 1: the geodesic sphere's points scaled by the semi-axes a (module
    docstring: gap at most 1.78 % of max a at f = 4).

    Args:
      semi_axes: (3,) a, m (> 0), along the x, y, z axes.
      frequency: f, the geodesic sphere's subdivision (>= 1).
    """
    a = _semi_axes("semi_axes", semi_axes, 3)
    return geodesic_sphere(frequency) * a


# --- exact signed distances: points (M, 3) in the shape's frame -> (M,), negative inside ---

def _points(points):
    return check.points("points", points)


def sphere_distance(points, radius) -> np.ndarray:
    """|q| - r."""
    q = _points(points)
    return np.linalg.norm(q, axis=1) - check.number("radius", radius, positive=True)


def capsule_distance(points, radius, half_length) -> np.ndarray:
    """Distance to the segment from -h to h on the z axis, minus r."""
    q = _points(points).copy()
    h = check.number("half_length", half_length, positive=True)
    q[:, 2] -= np.clip(q[:, 2], -h, h)
    return np.linalg.norm(q, axis=1) - check.number("radius", radius, positive=True)


def _extrusion(d):
    """|max(d, 0)| + min(max_i d_i, 0) for per-axis excesses d (M, k)."""
    return np.linalg.norm(np.maximum(d, 0.0), axis=1) + np.minimum(np.max(d, axis=1), 0.0)


def box_distance(points, half_size) -> np.ndarray:
    """|max(d, 0)| + min(max_i d_i, 0), d = |q| - h (per axis)."""
    q = _points(points)
    return _extrusion(np.abs(q) - _semi_axes("half_size", half_size, 3))


def cylinder_distance(points, radius, half_height) -> np.ndarray:
    """The box formula on (radial, axial) excesses d = (|q_xy| - r, |q_z| - h)."""
    q = _points(points)
    r = check.number("radius", radius, positive=True)
    h = check.number("half_height", half_height, positive=True)
    d = np.stack([np.linalg.norm(q[:, :2], axis=1) - r, np.abs(q[:, 2]) - h], axis=1)
    return _extrusion(d)


def ellipsoid_distance(points, semi_axes) -> np.ndarray:
    """Exact signed distance to the ellipsoid Σ (x_i / a_i)² = 1.

    With y = |q| (per axis; the ellipsoid is symmetric), a closest point is
    x_i = a_i² y_i / (t + a_i²), where t solves F(t) = Σ (a_i y_i / (t + a_i²))² - 1 = 0
    (the Lagrange condition x - y ∥ ∇ of the constraint; Eberly, "Distance from a point to an
    ellipse, an ellipsoid, or a hyperellipsoid", Geometric Tools, 2013). F decreases on
    t > -a_min²: outside, the root lies in [0, a_max |y|] (F(0) > 0, F(a_max |y|) <= 0);
    inside in (-a_min², 0]. Bisection finds it. Inside, when the axes of the smallest
    semi-axis have y ≈ 0 (the point lies on the medial disc) F stays below 0 up to -a_min²:
    then t = -a_min², the other coordinates follow the formula, and the smallest axes take
    the rest of the constraint, s = a_min sqrt(1 - Σ_others (x_i / a_i)²).

    Returns:
      (M,) signed distances, m.
    """
    y = np.abs(_points(points))
    a = _semi_axes("semi_axes", semi_axes, 3)
    a2 = a * a
    smallest = float(np.min(a2))

    def excess(t):
        return np.sum((a * y / (t[:, None] + a2)) ** 2, axis=1) - 1.0

    level = np.sum((y / a) ** 2, axis=1) - 1.0
    outside = level > 0.0
    low = np.where(outside, 0.0, -smallest)
    high = np.where(outside, np.max(a) * np.linalg.norm(y, axis=1), 0.0)
    # the pole -a_min² itself is excluded: F is evaluated just inside it
    floor = -smallest * (1.0 - 1e-12)
    medial = ~outside & (excess(np.full(len(y), floor)) <= 0.0)
    for _ in range(_BISECTIONS):
        middle = 0.5 * (low + high)
        above = excess(np.maximum(middle, floor)) > 0.0
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    t = np.maximum(0.5 * (low + high), floor)
    closest = a2 * y / (t[:, None] + a2)
    gap = np.linalg.norm(closest - y, axis=1)
    # medial points: the axes of the smallest semi-axis take what the constraint leaves
    small = np.isclose(a2, smallest, rtol=1e-12)
    others = np.where(small, 0.0, a2 * y / np.where(small, 1.0, a2 - smallest))
    rest = np.sqrt(np.maximum(1.0 - np.sum((others / a) ** 2, axis=1), 0.0)) * np.sqrt(smallest)
    medial_gap = np.sqrt(np.sum(np.where(small, 0.0, others - y) ** 2, axis=1)
                         + (rest - np.linalg.norm(np.where(small, y, 0.0), axis=1)) ** 2)
    gap = np.where(medial, medial_gap, gap)
    return np.where(outside, gap, -gap)
