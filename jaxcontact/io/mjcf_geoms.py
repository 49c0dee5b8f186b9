"""MJCF geoms that are not core shapes of ours: what `load_mjcf` makes of them (NumPy, at
import time).

- A cylinder or an ellipsoid on a moving body is a convex `mesh` geom, the hull of points
  on its exact surface (`models.primitives`: gap at most 0.86 % of a cylinder's radius,
  1.78 % of an ellipsoid's largest semi-axis); the body's mass and inertia stay MuJoCo's.
- A static geom of the world body other than a plane (sphere, capsule, box, cylinder,
  ellipsoid, mesh) is an obstacle (`Scene.add_obstacle`): its exact signed distance in its
  world pose (a mesh: the distance to its convex hull, the shape MuJoCo collides) sampled on
  a grid (`static_obstacle`).
- A height field is an obstacle too (`height_field`): `sdf.from_heightfield` of its samples
  laid out as MuJoCo lays them out.

Grid spacing. Trilinear interpolation of a smooth field f errs by at most (h²/8) tr ∇²f
(each axis' linear interpolant errs by h² f_ii/8, the mixed terms are reproduced); for a
surface of curvature radius R, at the surface, that is h²/(4R) (h²/(8R) on a cylinder). At
h = R/8 (`STATIC_CELLS`) it is R/256, 0.4 % of the radius; a flat face is exact, as long as
h does not exceed the half thickness behind it (the distance then stays affine across the
cell of the face). The grid covers the shape and a margin of the largest ball radius of the
moving geoms (a sphere's or a capsule's radius: their contact point, the ball's centre, is
that far out when it touches) plus 2 h: outside its box `sdf.sample` extrapolates by the
distance to the box, an upper bound that is exact only straight out of a face. A grid of more
than `MAX_OBSTACLE_NODES` nodes is coarsened until it fits, and a spacing coarser than the
shape's smallest half size (a thin part may then be lost) is named in the import's warning.
"""

from __future__ import annotations

import numpy as np

from jaxcontact.models import primitives, sdf

# Grid nodes per smallest half size (the radius of a sphere, capsule or cylinder, a box's
# smallest half extent, an ellipsoid's smallest semi-axis): interpolation error at most
# R/256 = 0.4 % of a curved surface's radius (module docstring).
STATIC_CELLS = 8
# Nodes of one obstacle's grid at most: 8 MB in float64, sampled in about a second (an
# ellipsoid's bisection is the slowest); a larger grid is coarsened to fit.
MAX_OBSTACLE_NODES = 1_000_000


def convex_vertices(shape, size) -> np.ndarray:
    """Vertices (V, 3), in the geom's frame, of the convex polyhedron that stands in for a
    MuJoCo cylinder (size: radius, half-height; axis z) or ellipsoid (size: 3 semi-axes)."""
    if shape == "cylinder":
        return primitives.cylinder_vertices(size[0], size[1])
    if shape == "ellipsoid":
        return primitives.ellipsoid_vertices(size[:3])
    raise ValueError(f"shape must be 'cylinder' or 'ellipsoid', got {shape!r}")


def _hull_triangles(vertices):
    """The convex hull of points (V, 3): its vertices (H, 3) and triangles (T, 3), each
    ordered so that (b - a) × (c - a) points out (closed and consistently oriented, as
    `sdf.from_mesh` needs)."""
    from scipy.spatial import ConvexHull  # build-time only dependency

    hull = ConvexHull(vertices)
    keep = np.sort(hull.vertices)
    index = np.full(len(vertices), -1)
    index[keep] = np.arange(len(keep))
    faces = hull.simplices.copy()
    corner = vertices[faces]
    normal = np.cross(corner[:, 1] - corner[:, 0], corner[:, 2] - corner[:, 0])
    inward = np.sum(normal * hull.equations[:, :3], axis=1) < 0.0
    faces[inward] = faces[inward][:, [0, 2, 1]]
    return vertices[keep], index[faces]


def _fit(thinnest, extent, reach):
    """(spacing, margin) of a grid over a box of size `extent` (3,) grown by the margin
    reach + 2 h on every side: h = thinnest / STATIC_CELLS, coarsened until the node count
    Π (ceil(size / h) + 1) is at most MAX_OBSTACLE_NODES."""
    h = thinnest / STATIC_CELLS
    while True:
        margin = reach + 2.0 * h
        count = float(np.prod(np.ceil((extent + 2.0 * margin) / h) + 1.0))
        if count <= MAX_OBSTACLE_NODES:
            return h, margin
        # the count falls as 1/h³ (nearly: the margin shrinks too), so a few rounds suffice
        h *= 1.01 * (count / MAX_OBSTACLE_NODES) ** (1.0 / 3.0)


_DISTANCES = {
    "sphere": (lambda q, s: primitives.sphere_distance(q, s[0]),
               lambda s: np.full(3, s[0]), lambda s: s[0]),
    "capsule": (lambda q, s: primitives.capsule_distance(q, s[0], s[1]),
                lambda s: np.array([s[0], s[0], s[1] + s[0]]), lambda s: s[0]),
    "box": (lambda q, s: primitives.box_distance(q, s[:3]),
            lambda s: np.asarray(s[:3], float), lambda s: float(np.min(s[:3]))),
    "cylinder": (lambda q, s: primitives.cylinder_distance(q, s[0], s[1]),
                 lambda s: np.array([s[0], s[0], s[1]]), lambda s: min(s[0], s[1])),
    "ellipsoid": (lambda q, s: primitives.ellipsoid_distance(q, s[:3]),
                  lambda s: np.asarray(s[:3], float), lambda s: float(np.min(s[:3]))),
}


def static_obstacle(shape, size, pos, rotation, reach, vertices=None):
    """The signed distance grid of a static geom in its world pose.

    Args:
      shape: "sphere", "capsule", "box", "cylinder", "ellipsoid" or "mesh".
      size: MuJoCo's geom_size (3,) (radius; radius, half-length; half sizes; radius,
        half-height; semi-axes).
      pos, rotation: the geom's world position (3,) and rotation matrix (3, 3) (columns:
        its axes).
      reach: the largest ball radius of the moving geoms, m (>= 0).
      vertices: (V, 3) a mesh's vertices in the geom's frame (its convex hull is sampled).

    Returns:
      (grid, spacing, thinnest): the `GridSDF`, its spacing and the shape's smallest half
      size, m (the caller names a spacing coarser than that).
    """
    pos, rotation = np.asarray(pos, float), np.asarray(rotation, float)
    if reach < 0.0:
        raise ValueError(f"reach must be >= 0, got {reach!r}")
    if shape == "mesh":
        hull, faces = _hull_triangles(np.asarray(vertices, float))
        world = hull @ rotation.T + pos
        thinnest = 0.5 * float(np.min(np.ptp(hull, axis=0)))
        h, margin = _fit(thinnest, np.ptp(world, axis=0), reach)
        return sdf.from_mesh(world, faces, h, padding=margin,
                             max_nodes=MAX_OBSTACLE_NODES), h, thinnest
    if shape not in _DISTANCES:
        raise ValueError(f"shape must be one of {sorted(_DISTANCES) + ['mesh']}, got "
                         f"{shape!r}")
    distance, half_extent, smallest = _DISTANCES[shape]
    size = np.asarray(size, float)
    thinnest = float(smallest(size))
    half = np.abs(rotation) @ half_extent(size)      # the world box around the rotated shape
    h, margin = _fit(thinnest, 2.0 * half, reach)
    grid = sdf.from_function(lambda x: distance((x - pos) @ rotation, size),
                             pos - half - margin, pos + half + margin, h,
                             max_nodes=MAX_OBSTACLE_NODES)
    return grid, h, thinnest


def height_field(data, size, pos, rotation, reach):
    """The signed distance grid of a MuJoCo height field in its world pose, or the reason it
    cannot be made.

    MuJoCo's layout (compiled `hfield_data`, rows of `ncol` samples in [0, 1]): sample (r, c)
    lies at x = -r_x + 2 r_x c/(ncol - 1), y = -r_y + 2 r_y r/(nrow - 1), z = e_z data[r, c],
    in the geom's frame (size = (r_x, r_y, e_z, base_z)), and each cell is split along its
    (r, c)-(r+1, c+1) diagonal: `sdf.from_heightfield` with heights[c, r] (x along columns),
    whose triangulation is the same. The grid's spacing is the samples' smaller spacing
    (coarsened to `MAX_OBSTACLE_NODES`), its depth 4 spacings below the lowest sample (a
    contact penetrates far less; MuJoCo's base_z is the solid's bottom, which no body
    reaches), its height the moving geoms' reach plus 2 spacings above the highest.

    Args:
      data: (nrow, ncol) MuJoCo's normalized elevations.
      size: (4,) (r_x, r_y, e_z, base_z), m.
      pos, rotation: the geom's world position (3,) and rotation matrix (3, 3).
      reach: the largest ball radius of the moving geoms, m.

    Returns:
      (grid, note): the `GridSDF` and None or a line for the warning (a coarsened grid); or
      (None, reason) when the field is turned other than by 0 or 180° about z (the
      grid is axis-aligned, and a quarter turn would swap the cells' diagonals).
    """
    data = np.asarray(data, float)
    rotation = np.asarray(rotation, float)
    nrow, ncol = data.shape
    r_x, r_y, e_z = (float(v) for v in size[:3])
    upright = np.allclose(rotation[:, 2], [0.0, 0.0, 1.0], atol=1e-9)
    turned = np.allclose(rotation[:2, :2], -np.eye(2), atol=1e-9)
    if not upright or not (turned or np.allclose(rotation[:2, :2], np.eye(2), atol=1e-9)):
        return None, "a height field turned other than by 0 or 180° about z"
    heights = pos[2] + e_z * data.T                 # (ncol, nrow): x along the columns
    if turned:                                      # x -> -x, y -> -y about the centre
        heights = heights[::-1, ::-1]
    spacing = np.array([2.0 * r_x / (ncol - 1), 2.0 * r_y / (nrow - 1)])
    fine = gs = float(np.min(spacing))
    relief = float(np.ptp(heights))
    while True:
        depth, height = 4.0 * gs, reach + 2.0 * gs
        count = ((np.floor(2.0 * r_x / gs + 1e-9) + 1.0) * (np.floor(2.0 * r_y / gs + 1e-9) + 1.0)
                 * (np.ceil((relief + depth + height) / gs) + 1.0))
        if count <= MAX_OBSTACLE_NODES:
            break
        gs *= 1.01 * (count / MAX_OBSTACLE_NODES) ** (1.0 / 3.0)
    grid = sdf.from_heightfield(heights, spacing, origin=(pos[0] - r_x, pos[1] - r_y),
                                depth=depth, height=height, grid_spacing=gs,
                                max_nodes=MAX_OBSTACLE_NODES)
    note = None if gs <= fine * (1.0 + 1e-9) else (
        f"height field sampled at {gs:.3g} m, coarser than its samples ({fine:.3g} m)")
    return grid, note
