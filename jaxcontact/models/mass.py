"""Mass properties of shapes from their dimensions and density (NumPy, build time).

Every function returns the mass and the principal moments of inertia about the centre of mass,
in the body's principal frame, ready for `Body.mass` and `Body.inertia`. Convex meshes also
return their centre of mass and principal axes, since those are not the mesh's own frame.
"""

from __future__ import annotations

import math

import numpy as np

from jaxcontact import validate as check

# Relative tolerance for flat point sets and for merging coplanar hull faces: far above the
# rounding of Qhull's plane equations (~1e-15 relative), far below any real feature.
_FLAT_TOL = 1e-9


def sphere(radius, density):
    """Solid sphere: m = 4/3 π r³ ρ, I = 2/5 m r² about every axis.

    Args:
      radius: r, m.
      density: ρ, kg/m³.

    Returns:
      (mass, inertia_diag (3,)).
    """
    r = check.number("radius", radius, positive=True)
    rho = check.number("density", density, positive=True)
    mass = 4.0 / 3.0 * math.pi * r ** 3 * rho
    return mass, np.full(3, 0.4 * mass * r * r)


def box(half_size, density):
    """Solid box with half sizes (a, b, c): m = 8 a b c ρ, I_x = m (b² + c²)/3, and cyclically.

    (The usual m (B² + C²)/12 with full edge lengths B = 2b, C = 2c.)

    Args:
      half_size: (3,) half edge lengths along the body axes, m.
      density: ρ, kg/m³.

    Returns:
      (mass, inertia_diag (3,)).
    """
    try:
        arr = np.asarray(half_size)
    except (TypeError, ValueError):  # ragged input
        arr = np.empty(0)
    if (arr.shape != (3,) or arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr))
            or not np.all(arr > 0)):
        raise ValueError(f"half_size must be 3 positive finite numbers, got {half_size!r}")
    h = arr.astype(float)
    rho = check.number("density", density, positive=True)
    mass = 8.0 * float(np.prod(h)) * rho
    sq = h * h
    return mass, mass / 3.0 * np.array([sq[1] + sq[2], sq[0] + sq[2], sq[0] + sq[1]])


def capsule(radius, half_length, density):
    """Solid capsule along the body z axis: a cylinder of radius r and length 2L capped by two
    hemispheres of radius r.

    Cylinder (mass m_c = 2π r² L ρ):  I_z = m_c r²/2,  I_x = m_c (r²/4 + L²/3).
    The two hemispheres together weigh m_s = 4/3 π r³ ρ and contribute I_z = 2/5 m_s r². Each
    hemisphere has its centre of mass 3r/8 from its flat face, so by the parallel-axis theorem
    its transverse moment about the capsule's centre is
        m_h (2/5 r² - (3r/8)²) + m_h (L + 3r/8)² = m_h (2/5 r² + L² + 3/4 L r),
    the first term being the moment about its own centre of mass (2/5 m_h r² about the flat
    face's centre, shifted by 3r/8). Hence I_x = I_y = m_c (r²/4 + L²/3) + m_s (2/5 r² + L² +
    3/4 L r). L = 0 gives the sphere.

    Args:
      radius: r, m.
      half_length: L, half the length of the cylindrical part, m (>= 0).
      density: ρ, kg/m³.

    Returns:
      (mass, inertia_diag (3,)), the axis of symmetry being z.
    """
    r = check.number("radius", radius, positive=True)
    half = check.number("half_length", half_length, low=0)
    rho = check.number("density", density, positive=True)
    m_cyl = 2.0 * math.pi * r * r * half * rho
    m_sph = 4.0 / 3.0 * math.pi * r ** 3 * rho
    axial = 0.5 * m_cyl * r * r + 0.4 * m_sph * r * r
    transverse = (m_cyl * (r * r / 4.0 + half * half / 3.0)
                  + m_sph * (0.4 * r * r + half * half + 0.75 * half * r))
    return m_cyl + m_sph, np.array([transverse, transverse, axial])


def _points(vertices):
    """Validate a point set (V, 3) spanning 3D; returns it as float."""
    try:
        pts = np.asarray(vertices, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"vertices must be a real array of shape (V, 3), got {vertices!r}")
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"vertices must have shape (V, 3), got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("vertices must be finite, got non-finite entries")
    if len(pts) < 4:
        raise ValueError(f"vertices must hold at least 4 points to enclose a volume, got "
                         f"{len(pts)}")
    sv = np.linalg.svd(pts - pts.mean(axis=0), compute_uv=False)
    if sv[2] <= _FLAT_TOL * sv[0]:
        raise ValueError(f"vertices are degenerate (collinear or coplanar, singular values "
                         f"{sv.tolist()}): they enclose no volume")
    return pts


def _hull(pts):
    from scipy.spatial import ConvexHull, QhullError  # build-time only dependency

    try:
        return ConvexHull(pts)
    except QhullError as err:
        raise ValueError(f"vertices: convex hull failed ({str(err).splitlines()[0]})") from err


def _outward_triangles(hull, pts):
    """Hull triangles (T, 3, 3), each ordered so that its normal (b - a) × (c - a) points out."""
    tri = pts[hull.simplices]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    flip = np.sum(n * hull.equations[:, :3], axis=1) < 0.0
    tri[flip] = tri[flip][:, [0, 2, 1]]
    return tri


def convex_hull(vertices, tol=_FLAT_TOL):
    """Vertices and unique face planes of the convex hull of a point set.

    Qhull triangulates the hull's faces; triangles whose planes agree (normals within `tol`,
    offsets within `tol` times the point set's size) are one face and are merged into one
    plane (their members' average, renormalized).

    Args:
      vertices: (V, 3) points, m; at least 4, not all coplanar.
      tol: relative tolerance for merging coplanar triangles.

    Returns:
      hull_vertices: (V', 3) the points that are vertices of the hull (interior points and
        points inside faces or edges dropped), in input order.
      planes: (F', 4) rows (n, offset), unit n pointing out: n·x <= offset inside the hull.
    """
    pts = _points(vertices)
    tol = check.number("tol", tol, positive=True)
    hull = _hull(pts)
    scale = float(np.ptp(pts, axis=0).max())
    normals = hull.equations[:, :3]
    offsets = -hull.equations[:, 3]
    group = np.full(len(normals), -1)
    n_groups = 0
    for i in range(len(normals)):
        if group[i] >= 0:
            continue
        same = ((np.linalg.norm(normals - normals[i], axis=1) <= tol)
                & (np.abs(offsets - offsets[i]) <= tol * scale) & (group < 0))
        group[same] = n_groups
        n_groups += 1
    planes = np.zeros((n_groups, 4))
    for g in range(n_groups):
        n = normals[group == g].mean(axis=0)
        norm = np.linalg.norm(n)
        planes[g, :3] = n / norm
        planes[g, 3] = offsets[group == g].mean() / norm
    return pts[np.sort(hull.vertices)], planes


def convex_mesh(vertices, density):
    """Mass properties of the solid convex hull of a point set, of uniform density.

    The hull's boundary triangles (a, b, c), oriented outward, each form a tetrahedron
    (o, a, b, c) with a reference point o (the points' mean, for accuracy); their signed
    volumes, first and second moments sum to those of the solid by the divergence theorem
    (the signed-tetrahedron decomposition of exact polyhedral mass properties; cf. Mirtich
    1996, "Fast and accurate computation of polyhedral mass properties", and Tonon 2004,
    J. Math. Stat. 1(1), for the tetrahedron's moments). With p = a - o etc.:

        V_t = p·(q × s)/6,   ∫ x dV = V_t (p + q + s)/4,
        ∫ x xᵀ dV = V_t/20 (p pᵀ + q qᵀ + s sᵀ + (p + q + s)(p + q + s)ᵀ).

    Then m = ρ V, c = ∫x dV / V, the central second moment C = ρ (∫ x xᵀ dV - V c cᵀ), the
    inertia tensor I = tr(C) E - C, and I = R diag(I_1, I_2, I_3) Rᵀ with R orthonormal.
    R is made proper (det R = +1) and deterministic: each column's largest component is
    positive, then the third column is flipped if needed. With repeated moments (a cube) any
    basis of the repeated eigenspace is principal, and R is just one of them.

    Args:
      vertices: (V, 3) points, m; their convex hull is the body.
      density: ρ, kg/m³.

    Returns:
      mass: kg.
      com: (3,) centre of mass in the vertices' frame, m.
      inertia_diag: (3,) principal moments, ascending, kg m².
      rotation: (3, 3) principal axes as columns, body-to-world: x = com + rotation @ x_body.
    """
    pts = _points(vertices)
    rho = check.number("density", density, positive=True)
    hull = _hull(pts)
    ref = pts.mean(axis=0)
    tri = _outward_triangles(hull, pts) - ref
    p, q, s = tri[:, 0], tri[:, 1], tri[:, 2]
    vol = np.einsum("ij,ij->i", p, np.cross(q, s)) / 6.0
    total = p + q + s
    volume = float(vol.sum())
    first = np.einsum("i,ij->j", vol, total) / 4.0
    second = (np.einsum("i,ij,ik->jk", vol, p, p) + np.einsum("i,ij,ik->jk", vol, q, q)
              + np.einsum("i,ij,ik->jk", vol, s, s)
              + np.einsum("i,ij,ik->jk", vol, total, total)) / 20.0
    com = first / volume
    central = rho * (second - volume * np.outer(com, com))
    inertia = np.trace(central) * np.eye(3) - central
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    pick = np.argmax(np.abs(axes), axis=0)
    axes = axes * np.sign(axes[pick, np.arange(3)])
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return rho * volume, com + ref, moments, axes
