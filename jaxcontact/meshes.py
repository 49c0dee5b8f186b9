"""Meshes for deformable bodies: tetrahedral solids and triangle sheets, generated or loaded,
and validated.

    verts, tets = jc.meshes.box_tets(size=(0.2, 0.1, 0.1), divisions=(8, 4, 4))
    verts, tets = jc.meshes.ball_tets(radius=0.1, divisions=6)
    verts, tets = jc.meshes.cylinder_tets(radius=0.1, height=0.05, divisions=(7, 3))
    verts, tris = jc.meshes.grid(size=(1.0, 1.0), divisions=(20, 20))
    verts, cells = jc.meshes.load("part.msh", kind="tetra")      # meshio (optional extra)

Every function returns float64 vertices (V, 3) and int32 elements (E, 4) or (E, 3).
Tetrahedra are positively oriented: det[x1 - x0, x2 - x0, x3 - x0] > 0 (six times the
volume). Triangles of `grid` wind counter-clockwise seen from +z. `check_tets` and
`check_tris` reject inverted or degenerate elements, naming the first bad element.
"""

from __future__ import annotations

import itertools

import numpy as np

from jaxcontact import validate as check

__all__ = ["ball_tets", "box_tets", "check_tets", "check_tris", "cylinder_tets", "grid", "load",
           "tet_volumes", "tri_areas"]


def _divisions(divisions, n):
    d = np.asarray(divisions)
    if d.shape != (n,) or not np.issubdtype(d.dtype, np.integer) or np.any(d < 1):
        raise ValueError(f"divisions must be {n} integers >= 1, got {divisions!r}")
    return tuple(int(v) for v in d)


def _size(size, n):
    s = np.asarray(size, dtype=float)
    if s.shape != (n,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"size must be {n} positive finite lengths, got {size!r}")
    return s


def _kuhn_cell():
    """The 6 tetrahedra of the unit cube along the paths 0 -> (1,1,1) of unit steps (Kuhn /
    Freudenthal): (4,) corner numbers c = x + 2y + 4z each, positively oriented. The same
    split in every cell makes a conforming mesh (shared faces match)."""
    tets = []
    for order in itertools.permutations(range(3)):
        corner, path = np.zeros(3, int), [0]
        for axis in order:
            corner[axis] = 1
            path.append(int(corner @ (1, 2, 4)))
        cube = np.array([[c & 1, (c >> 1) & 1, (c >> 2) & 1] for c in path], float)
        if np.linalg.det(cube[1:] - cube[0]) < 0:
            path[1], path[2] = path[2], path[1]
        tets.append(path)
    return np.array(tets)


def box_tets(size=(1.0, 1.0, 1.0), divisions=(1, 1, 1)):
    """A box of `size` (lx, ly, lz) centred at the origin, split into nx·ny·nz cells of 6
    tetrahedra each (a conforming Kuhn triangulation).

    Returns:
      verts (V, 3) with V = (nx+1)(ny+1)(nz+1), tets (6 nx ny nz, 4).
    """
    size, (nx, ny, nz) = _size(size, 3), _divisions(divisions, 3)
    axes = [np.linspace(-s / 2, s / 2, n + 1) for s, n in zip(size, (nx, ny, nz))]
    x, y, z = np.meshgrid(*axes, indexing="ij")
    verts = np.stack([x, y, z], -1).reshape(-1, 3)

    def index(i, j, k):
        return (i * (ny + 1) + j) * (nz + 1) + k

    i, j, k = (a.reshape(-1) for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz),
                                                   indexing="ij"))
    corners = np.stack([index(i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1))
                        for c in range(8)], -1)                      # (cells, 8)
    tets = corners[:, _kuhn_cell()].reshape(-1, 4)
    return verts, tets.astype(np.int32)


def ball_tets(radius=1.0, divisions=4):
    """A ball of `radius` at the origin: `box_tets` of the cube [-1, 1]³ with `divisions`
    cells per edge, each point p moved along its ray to |p|_∞ · radius (the cube's shells
    become spheres). The volume approaches 4/3 π r³ as `divisions` grows (the faceted
    surface is inscribed in the sphere).
    """
    if isinstance(radius, bool) or not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"radius must be a positive finite length, got {radius!r}")
    n = _divisions((divisions,), 1)[0]
    verts, tets = box_tets((2.0, 2.0, 2.0), (n, n, n))
    inf = np.max(np.abs(verts), axis=1)
    two = np.linalg.norm(verts, axis=1)
    scale = np.divide(inf, two, out=np.zeros_like(inf), where=two > 0)
    verts = radius * verts * scale[:, None]
    check_tets(verts, tets)
    return verts, tets


def cylinder_tets(radius=1.0, height=1.0, divisions=(4, 2)):
    """A solid cylinder of `radius` and `height`, axis z, centred at the origin: `box_tets`
    of [-1, 1]² x [-height/2, height/2] with (n, n, nz) cells, each point's (x, y) moved
    along its ray to |(x, y)|_∞ · radius (the square's rings become circles; z is kept).
    Every tetrahedron lies over one triangle of the square's split, whose orientation the
    map keeps, so all stay positive. The volume approaches π r² h as n grows (the faceted
    mantle is inscribed in the circle).

    Args:
      radius, height: m (> 0).
      divisions: (n, nz), n cells across the diameter and nz along the axis, or one integer
        for both.

    Returns:
      verts (V, 3) with V = (n+1)² (nz+1), tets (6 n² nz, 4).
    """
    for name, value in (("radius", radius), ("height", height)):
        if isinstance(value, bool) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite length, got {value!r}")
    pair = (divisions, divisions) if np.ndim(divisions) == 0 else divisions
    n, nz = _divisions(pair, 2)
    verts, tets = box_tets((2.0, 2.0, float(height)), (n, n, nz))
    xy = verts[:, :2]
    inf = np.max(np.abs(xy), axis=1)
    two = np.linalg.norm(xy, axis=1)
    scale = np.divide(inf, two, out=np.zeros_like(inf), where=two > 0)
    verts[:, :2] = radius * xy * scale[:, None]
    check_tets(verts, tets)
    return verts, tets


def grid(size=(1.0, 1.0), divisions=(1, 1)):
    """A rectangle of `size` (lx, ly) in the plane z = 0, centred at the origin, split into
    nx·ny squares of 2 triangles, every diagonal from (i, j) to (i+1, j+1), wound
    counter-clockwise seen from +z. Every interior vertex has 6 neighbours: alternating the
    diagonals would give half of them 4, and the cloth's bending a soft mode (design note 29).

    Returns:
      verts (V, 3) with V = (nx+1)(ny+1), tris (2 nx ny, 3).
    """
    (lx, ly), (nx, ny) = _size(size, 2), _divisions(divisions, 2)
    x, y = np.meshgrid(np.linspace(-lx / 2, lx / 2, nx + 1),
                       np.linspace(-ly / 2, ly / 2, ny + 1), indexing="ij")
    verts = np.stack([x, y, np.zeros_like(x)], -1).reshape(-1, 3)
    tris = []
    for i in range(nx):
        for j in range(ny):
            a, b = i * (ny + 1) + j, (i + 1) * (ny + 1) + j     # (i, j), (i+1, j)
            c, d = b + 1, a + 1                                   # (i+1, j+1), (i, j+1)
            tris += [(a, b, c), (a, c, d)]
    return verts, np.array(tris, np.int32)


def tet_volumes(verts, tets):
    """Signed volumes (E,) of tetrahedra: det[x1 - x0, x2 - x0, x3 - x0] / 6."""
    x = np.asarray(verts, float)[np.asarray(tets)]
    return np.linalg.det(x[:, 1:] - x[:, :1]) / 6.0


def tri_areas(verts, tris):
    """Areas (E,) of triangles."""
    x = np.asarray(verts, float)[np.asarray(tris)]
    return 0.5 * np.linalg.norm(np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), axis=1)


def _check_table(name, table, width, count):
    t = np.asarray(table)
    if t.ndim != 2 or t.shape[1] != width or t.shape[0] == 0 or \
            not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"{name} must be a non-empty (E, {width}) integer array, got shape "
                         f"{t.shape} of {t.dtype}")
    bad = np.flatnonzero(np.any((t < 0) | (t >= count), axis=1))
    if bad.size:
        raise ValueError(f"{name}: element {bad[0]} has vertex indices {t[bad[0]].tolist()} "
                         f"outside 0..{count - 1}")
    repeated = np.flatnonzero(np.array([len(set(row)) < width for row in t.tolist()]))
    if repeated.size:
        raise ValueError(f"{name}: element {repeated[0]} repeats a vertex: "
                         f"{t[repeated[0]].tolist()}")
    return t


def _check_verts(verts):
    v = check.points("verts", verts)
    if v.shape[0] == 0:
        raise ValueError("verts must not be empty")
    return v


def check_tets(verts, tets, *, rtol=1e-9):
    """Raise ValueError naming the first inverted (negative volume) or degenerate (volume <=
    rtol · the mean |volume|) tetrahedron, or a bad index; return the volumes (E,)."""
    v = _check_verts(verts)
    t = _check_table("tets", tets, 4, v.shape[0])
    vol = tet_volumes(v, t)
    floor = rtol * float(np.mean(np.abs(vol)))
    inverted = np.flatnonzero(vol < -floor)
    if inverted.size:
        e = inverted[0]
        raise ValueError(f"tets: element {e} is inverted (volume {vol[e]:.3g}); "
                         f"{inverted.size} inverted in all (swap two of its vertices)")
    flat = np.flatnonzero(np.abs(vol) <= floor)
    if flat.size:
        e = flat[0]
        raise ValueError(f"tets: element {e} is degenerate (volume {vol[e]:.3g}, mean "
                         f"{np.mean(np.abs(vol)):.3g}); {flat.size} degenerate in all")
    return vol


def check_tris(verts, tris, *, rtol=1e-9):
    """Raise ValueError naming the first degenerate triangle (area <= rtol · the mean area)
    or a bad index; return the areas (E,)."""
    v = _check_verts(verts)
    t = _check_table("tris", tris, 3, v.shape[0])
    area = tri_areas(v, t)
    flat = np.flatnonzero(area <= rtol * float(np.mean(area)))
    if flat.size:
        e = flat[0]
        raise ValueError(f"tris: element {e} is degenerate (area {area[e]:.3g}, mean "
                         f"{np.mean(area):.3g}); {flat.size} degenerate in all")
    return area


_KINDS = {"tetra": 4, "triangle": 3}


def load(path, kind="tetra"):
    """Read a mesh file through `meshio` (`pip install 'jaxcontact[meshes]'`: Gmsh .msh,
    .vtu, .vtk, .obj, ... ) and return (verts (V, 3), cells (E, 4 or 3)) of its `kind`
    cells ("tetra" or "triangle"), validated with `check_tets` / `check_tris`. Vertices
    that no such cell uses are dropped (indices renumbered). 2D files get z = 0.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'tetra' or 'triangle', got {kind!r}")
    try:
        import meshio
    except ImportError:
        raise ImportError("loading mesh files uses the `meshio` package: pip install "
                          "'jaxcontact[meshes]'") from None
    mesh = meshio.read(path)
    blocks = [np.asarray(c.data) for c in mesh.cells if c.type == kind]
    if not blocks:
        found = sorted({c.type for c in mesh.cells})
        raise ValueError(f"path {str(path)!r} has no {kind!r} cells (it has {found})")
    cells = np.concatenate(blocks).astype(np.int64)
    points = np.asarray(mesh.points, float)
    if points.shape[1] == 2:
        points = np.c_[points, np.zeros(len(points))]
    used, cells = np.unique(cells, return_inverse=True)
    verts, cells = points[used], cells.reshape(-1, _KINDS[kind]).astype(np.int32)
    (check_tets if kind == "tetra" else check_tris)(verts, cells)
    return verts, cells
