"""Static obstacles as signed distance fields sampled on a regular grid.

A `GridSDF` holds the signed distance (negative inside the solid) at the nodes of a regular
grid; `sample` interpolates it trilinearly, so it is a pure, jittable, vmappable function that
is differentiable with respect to the query point and to every leaf of the grid. Triangle
meshes, heightfields and analytic fields are turned into a grid once, at build time, with
NumPy (`from_mesh`, `from_heightfield`, `from_function`).

Trilinear interpolation is exact on affine fields and has error O(h²) (h the spacing) on smooth
ones; it is continuous everywhere, and its gradient jumps across cell faces. A sampled SDF is
not an exact distance: near edges and corners of the solid (where the true field has a kink)
its value is smoothed over one cell, and its gradient is not unit length in general, which is
why `normal` normalizes it.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import validate as check
from jaxcontact.math import safe_norm, safe_normalize
from jaxcontact.models.mesh_distance import MeshDistance

Array = jax.Array

# Default cap on the number of grid nodes a constructor may allocate (160 MB of float64).
MAX_NODES = 20_000_000


@struct.dataclass
class GridSDF:
    """Signed distance field sampled on a regular grid.

    Node (i, j, k) sits at `origin + spacing * (i, j, k)` and holds the signed distance of that
    point to the obstacle's surface (m; negative inside the solid). Every field is a pytree
    leaf, so an obstacle's placement, scale and shape are all differentiable.

    Attributes:
      origin:   (3,)          world position of node [0, 0, 0], m.
      spacing:  ()            distance between neighbouring nodes along each axis, m.
      values:   (nx, ny, nz)  signed distance at the nodes, m; nx, ny, nz >= 2.
    """

    origin: Array
    spacing: Array
    values: Array


def _check_grid_shape(values):
    if values.ndim != 3 or min(values.shape) < 2:
        raise ValueError(f"GridSDF.values must have shape (nx, ny, nz) with every size >= 2, "
                         f"got shape {values.shape}")


def sample(grid: GridSDF, point: Array) -> Array:
    """Signed distance at one world point (3,), by trilinear interpolation of the grid.

    Inside the grid box [origin, origin + spacing (n - 1)], with c = (p - origin)/spacing,
    cell index i = clip(floor(c), 0, n - 2) and fraction f = c - i ∈ [0, 1] per axis:

        φ(p) = Σ_{a,b,e ∈ {0,1}} w_a(f_x) w_b(f_y) w_e(f_z) values[i_x+a, i_y+b, i_z+e],
        w_0(f) = 1 - f,  w_1(f) = f.

    Outside the box the point is clamped to the box, p̂ = clip(p, lower, upper), and
    φ(p) = φ(p̂) + |p - p̂|: continuous across the box, growing with the Euclidean distance to
    it (the field is an upper bound of the true SDF out there when the solid touches the box).

    Value and gradient (w.r.t. the point and every grid leaf) are finite everywhere: the cell
    index is clipped so that a point on the upper face uses the last cell with f = 1, nodes and
    cell faces take the cell above (one-sided gradient), and |p - p̂| is a safe norm (gradient
    0 inside the box). Vmap it over points: `jax.vmap(sample, (None, 0))(grid, points)`.

    Args:
      grid: the field.
      point: (3,) world position, m.

    Returns:
      () signed distance, m.
    """
    _check_grid_shape(grid.values)
    dtype = grid.values.dtype
    point = jnp.asarray(point, dtype)
    n_cells = jnp.asarray(grid.values.shape, dtype) - 1.0
    lower = grid.origin
    upper = grid.origin + grid.spacing * n_cells
    # where, not clip: on the box face the point keeps its own gradient (clip would split it)
    clamped = jnp.where(point < lower, lower, jnp.where(point > upper, upper, point))
    outside = safe_norm(point - clamped)
    local = (clamped - lower) / grid.spacing
    # clipped cell index: rounding may put `local` a hair outside [0, n-1], and the upper face
    # belongs to the last cell (index n-2, fraction 1)
    cell = jnp.clip(jnp.floor(local), 0.0, n_cells - 1.0)
    frac = local - cell
    corner = jax.lax.dynamic_slice(grid.values, tuple(cell.astype(jnp.int32)), (2, 2, 2))
    weights = jnp.stack([1.0 - frac, frac], axis=-1)  # (3, 2): axis, node offset
    inner = jnp.einsum("abe,a,b,e->", corner, weights[0], weights[1], weights[2])
    return inner + outside


def normal(grid: GridSDF, point: Array) -> Array:
    """Unit outward normal ∇φ/|∇φ| at one world point (3,); 0 where ∇φ = 0 (safe normalize)."""
    return safe_normalize(jax.grad(sample, argnums=1)(grid, point))


def node_positions(grid: GridSDF) -> np.ndarray:
    """World positions (nx, ny, nz, 3) of the grid nodes (NumPy, for building and tests)."""
    values = np.asarray(grid.values)
    axes = [np.arange(n, dtype=float) for n in values.shape]
    idx = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    return np.asarray(grid.origin, float) + float(grid.spacing) * idx


# --- input checks -----------------------------------------------------------------------------

def _real_array(name, value, shape_text, ndim=None, last=None):
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real array of shape {shape_text}, got {value!r}")
    if (ndim is not None and arr.ndim != ndim) or (last is not None and arr.shape[-1:] != (last,)):
        raise ValueError(f"{name} must have shape {shape_text}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got non-finite entries")
    return arr


def _node_count(name, shape, max_nodes):
    count = int(np.prod(shape))
    if count > max_nodes:
        raise ValueError(f"{name} gives a grid of {tuple(shape)} = {count} nodes, more than "
                         f"max_nodes = {max_nodes}; increase the spacing")


def _grid(origin, spacing, values) -> GridSDF:
    return GridSDF(origin=jnp.asarray(origin, float), spacing=jnp.asarray(spacing, float),
                   values=jnp.asarray(values, float))


def _nodes(origin, spacing, shape):
    axes = [origin[d] + spacing * np.arange(shape[d]) for d in range(3)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


# --- constructors (NumPy, build time) ---------------------------------------------------------

def from_function(fn, lower, upper, spacing, max_nodes=MAX_NODES) -> GridSDF:
    """Sample an analytic signed distance function on a grid covering [lower, upper].

    The grid starts at `lower` and has ceil((upper - lower)/spacing) + 1 nodes per axis, so it
    covers the box (its last node may lie up to one spacing beyond `upper`).

    Args:
      fn: NumPy function mapping points (M, 3) to signed distances (M,), negative inside.
      lower, upper: (3,) corners of the box to cover, m; upper > lower.
      spacing: node spacing, m.
      max_nodes: refuse grids with more nodes than this.

    Returns:
      The sampled `GridSDF`.
    """
    spacing = check.number("spacing", spacing, positive=True)
    lower = _real_array("lower", lower, "(3,)", ndim=1, last=3)
    upper = _real_array("upper", upper, "(3,)", ndim=1, last=3)
    if not np.all(upper > lower):
        raise ValueError(f"upper must exceed lower on every axis, got lower={lower.tolist()}, "
                         f"upper={upper.tolist()}")
    shape = np.ceil((upper - lower) / spacing - 1e-9).astype(int) + 1
    _node_count("spacing", shape, max_nodes)
    nodes = _nodes(lower, spacing, shape)
    values = np.asarray(fn(nodes), dtype=float)
    if values.shape != (len(nodes),):
        raise ValueError(f"fn must map points (M, 3) to distances (M,), got shape {values.shape} "
                         f"for M = {len(nodes)}")
    if not np.all(np.isfinite(values)):
        raise ValueError("fn returned non-finite distances")
    return _grid(lower, spacing, values.reshape(tuple(shape)))


def _check_closed(faces):
    """Every directed edge once, and its reverse once: closed, manifold, consistently oriented."""
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    uniq, counts = np.unique(directed, axis=0, return_counts=True)
    if np.any(counts != 1):
        raise ValueError("faces must form a closed, consistently oriented manifold mesh: "
                         f"the directed edge {uniq[np.argmax(counts != 1)].tolist()} is used "
                         "by more than one face")
    key = uniq[:, 0] * (faces.max() + 1) + uniq[:, 1]
    rev = uniq[:, 1] * (faces.max() + 1) + uniq[:, 0]
    missing = ~np.isin(rev, key)
    if np.any(missing):
        raise ValueError("faces must form a closed, consistently oriented mesh: the edge "
                         f"{uniq[np.argmax(missing)].tolist()} has no opposite edge (a hole or "
                         "a flipped face)")


def from_mesh(vertices, faces, spacing, padding=None, max_nodes=MAX_NODES) -> GridSDF:
    """Signed distance field of a closed triangle mesh, sampled on a grid around it.

    The value at each node is the exact Euclidean distance to the nearest triangle, negative
    inside; the sign comes from the angle-weighted pseudonormal of the nearest feature
    (Bærentzen and Aanæs 2005; see `mesh_distance`), which needs a closed, consistently
    oriented mesh (outward or inward: the sense is taken from the sign of the enclosed volume).
    The grid is centred on the mesh's bounding box and extends at least `padding` beyond it.
    Cost: O(nodes × nearby faces) after culling per block of nodes; e.g. 64³ nodes against a
    few hundred faces takes a few seconds.

    Args:
      vertices: (V, 3) vertex positions, m.
      faces: (F, 3) integer vertex indices of each triangle; the mesh must be closed and
        consistently oriented (each edge used once in each direction).
      spacing: node spacing, m.
      padding: margin around the bounding box, m; default 3 spacings.
      max_nodes: refuse grids with more nodes than this.

    Returns:
      The sampled `GridSDF`.
    """
    vertices = _real_array("vertices", vertices, "(V, 3)", ndim=2, last=3)
    faces_in = np.asarray(faces)
    if faces_in.ndim != 2 or faces_in.shape[1:] != (3,):
        raise ValueError(f"faces must have shape (F, 3), got shape {faces_in.shape}")
    if not np.issubdtype(faces_in.dtype, np.integer) or faces_in.dtype == bool:
        raise ValueError(f"faces must hold integer vertex indices, got dtype {faces_in.dtype}")
    faces = faces_in.astype(np.int64)
    if len(faces) < 4:
        raise ValueError(f"faces must describe a closed mesh (at least 4 triangles), got "
                         f"{len(faces)}")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ValueError(f"faces index vertices out of range [0, {len(vertices)}): found "
                         f"{faces.min()}..{faces.max()}")
    if np.any((faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2])
              | (faces[:, 2] == faces[:, 0])):
        raise ValueError("faces must not repeat a vertex within a triangle")
    _check_closed(faces)
    spacing = check.number("spacing", spacing, positive=True)
    padding = 3.0 * spacing if padding is None else check.number("padding", padding, low=0)
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    shape = np.ceil((hi - lo + 2.0 * padding) / spacing - 1e-9).astype(int) + 1
    shape = np.maximum(shape, 2)
    _node_count("spacing", shape, max_nodes)
    centre = 0.5 * (lo + hi)
    origin = centre - 0.5 * spacing * (shape - 1)
    # work relative to the centre: the affine forms lose precision with the coordinates' size
    nodes = _nodes(origin - centre, spacing, shape).reshape(tuple(shape) + (3,))
    values = MeshDistance(vertices - centre, faces, signed=True).distances(nodes)
    return _grid(origin, spacing, values)


def _heightfield_mesh(heights, spacing):
    """Vertices (nx ny, 3) and faces of the triangulated heightfield, origin at sample [0, 0]
    (`spacing`: (sx, sy)).

    Each cell [i, i+1] × [j, j+1] is split along its diagonal (i, j)-(i+1, j+1).
    """
    nx, ny = heights.shape
    gx, gy = np.meshgrid(np.arange(nx) * spacing[0], np.arange(ny) * spacing[1], indexing="ij")
    vertices = np.stack([gx, gy, heights], axis=-1).reshape(-1, 3)
    idx = np.arange(nx * ny).reshape(nx, ny)
    v00, v10 = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
    v01, v11 = idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()
    faces = np.concatenate([np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)])
    return vertices, faces


def _heightfield_height(heights, spacing, x, y):
    """Height of the triangulated heightfield at (x, y) (origin at sample [0, 0],
    `spacing`: (sx, sy))."""
    nx, ny = heights.shape
    cx, cy = x / spacing[0], y / spacing[1]
    i = np.clip(np.floor(cx), 0, nx - 2).astype(int)
    j = np.clip(np.floor(cy), 0, ny - 2).astype(int)
    fx, fy = cx - i, cy - j
    h00, h10 = heights[i, j], heights[i + 1, j]
    h01, h11 = heights[i, j + 1], heights[i + 1, j + 1]
    lower_tri = h00 + fx * (h10 - h00) + fy * (h11 - h10)  # triangle (00, 10, 11): fx >= fy
    upper_tri = h00 + fy * (h01 - h00) + fx * (h11 - h01)  # triangle (00, 11, 01): fy > fx
    return np.where(fx >= fy, lower_tri, upper_tri)


def from_heightfield(heights, spacing, origin=(0.0, 0.0), depth=None, height=None,
                     grid_spacing=None, max_nodes=MAX_NODES) -> GridSDF:
    """Signed distance field of the terrain z = h(x, y), solid below it.

    Sample (i, j) of `heights` is the terrain height at (x0 + i sx, y0 + j sy). The
    surface is the heightfield's triangulation (each cell split along its (i, j)-(i+1, j+1)
    diagonal): it passes through every sample and equals the bilinear surface wherever a cell
    is planar (elsewhere the two differ by at most a quarter of the cell's twist
    |h00 - h10 - h01 + h11|). The value at a node is the exact distance to that surface,
    negative where the node lies below it.

    The grid covers the terrain's footprint [x0, x0 + (nx-1) sx] × [y0, ...] (without
    exceeding it) and z from min(h) - depth to max(h) + height. Near the footprint's border the
    nearest terrain point may be on the terrain's edge (the terrain ends there). Outside the
    grid box `sample` extrapolates with +distance to the box, which is wrong below the terrain
    (the value rises towards 0 and beyond): choose `depth` larger than any penetration a body
    may reach, and keep bodies over the footprint.

    Args:
      heights: (nx, ny) terrain heights, m; nx, ny >= 2.
      spacing: horizontal distance between samples, m: one number (sx = sy) or (sx, sy)
        (MuJoCo's height fields space columns and rows apart differently).
      origin: (x0, y0) position of sample [0, 0], m.
      depth: extent of the grid below min(h), m; default 4 grid spacings.
      height: extent of the grid above max(h), m; default 4 grid spacings.
      grid_spacing: node spacing of the SDF grid, m; default min(sx, sy).
      max_nodes: refuse grids with more nodes than this.

    Returns:
      The sampled `GridSDF`.
    """
    heights = _real_array("heights", heights, "(nx, ny)", ndim=2)
    if min(heights.shape) < 2:
        raise ValueError(f"heights must have at least 2 samples per axis, got shape "
                         f"{heights.shape}")
    spacing = (np.full(2, check.number("spacing", spacing, positive=True))
               if np.ndim(spacing) == 0 else check.vector("spacing", spacing, 2, positive=True))
    origin = _real_array("origin", origin, "(2,)", ndim=1, last=2)
    gs = float(np.min(spacing)) if grid_spacing is None else check.number(
        "grid_spacing", grid_spacing, positive=True)
    depth = 4.0 * gs if depth is None else check.number("depth", depth, positive=True)
    height = 4.0 * gs if height is None else check.number("height", height, positive=True)
    extent = (np.asarray(heights.shape) - 1) * spacing
    if gs > extent.min() * (1.0 + 1e-9):
        raise ValueError(f"grid_spacing {gs} exceeds the terrain's extent {extent.tolist()}: "
                         "the grid needs 2 nodes per axis inside the footprint")
    z_lo, z_hi = heights.min() - depth, heights.max() + height
    shape = np.concatenate([np.floor(extent / gs + 1e-9).astype(int) + 1,
                            [int(np.ceil((z_hi - z_lo) / gs - 1e-9)) + 1]])
    shape = np.maximum(shape, 2)
    _node_count("grid_spacing", shape, max_nodes)
    # local frame: sample [0, 0] at x = y = 0, terrain heights relative to their mean
    z_ref = float(heights.mean())
    hts = heights - z_ref
    grid_origin = np.array([0.0, 0.0, z_lo - z_ref])
    nodes = _nodes(grid_origin, gs, shape).reshape(tuple(shape) + (3,))
    surface = _heightfield_height(hts, spacing, nodes[..., 0], nodes[..., 1])
    vertical = nodes[..., 2] - surface
    verts, faces = _heightfield_mesh(hts, spacing)
    dist = MeshDistance(verts, faces, signed=False).distances(nodes)
    values = np.where(vertical < 0.0, -dist, dist)
    world_origin = np.array([origin[0], origin[1], z_lo])
    return _grid(world_origin, gs, values)
