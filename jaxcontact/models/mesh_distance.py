"""Exact distance from points to a triangle mesh, in NumPy (build time only).

Used by `sdf.from_mesh` and `sdf.from_heightfield` to fill grids. The closest point of a
triangle to x is the projection of x onto the triangle's plane if that lies inside the
triangle, else the foot of the perpendicular on one of its edges if that lies inside the edge,
else one of its vertices. Each such candidate is a true distance to a point of the surface, so
the minimum over all face interiors, edges and vertices is the exact distance.

Signs come from angle-weighted pseudonormals (Bærentzen and Aanæs 2005, "Signed distance
computation using the angle weighted pseudonormal", IEEE TVCG 11(3)): for a closed, consistently
oriented mesh, x lies outside iff (x - c)·N > 0, with c the closest point and N the pseudonormal
of the feature holding c: the face normal for a face interior, the sum of the two adjacent face
normals for an edge, and the sum of the incident face normals weighted by their angles at the
vertex for a vertex. The test is local, so distant triangles can be culled (see `distances`),
unlike a winding number or ray parity, which need every face for every point.
"""

from __future__ import annotations

import numpy as np

# Nodes are processed in cubic blocks of this many nodes per side: each block is tested
# against the triangles that may hold the nearest point of one of its nodes.
BLOCK = 4


def point_triangle_distance(points, a, b, c):
    """Exact distances (P, T) from points (P, 3) to triangles with corners a, b, c (T, 3).

    Straightforward broadcast form (clamped segment distances and the interior projection);
    used to cull triangles for blocks of nodes and as a test reference.
    """
    x = points[:, None, :]
    best = np.full((len(points), len(a)), np.inf)
    for p, q in ((a, b), (b, c), (c, a)):
        d = q - p
        dd = np.sum(d * d, axis=1)
        # a zero-length edge is a vertex: t = 0 gives its distance
        t = np.clip(np.sum((x - p) * d, axis=2) / np.where(dd > 0.0, dd, 1.0), 0.0, 1.0)
        r = x - p - t[..., None] * d
        best = np.minimum(best, np.sum(r * r, axis=2))
    n = np.cross(b - a, c - a)
    nn = np.sum(n * n, axis=1)
    ok = nn > 0.0
    nn_safe = np.where(ok, nn, 1.0)[:, None]
    rel = x - a
    u = np.sum(rel * (np.cross(c - a, n) / nn_safe), axis=2)
    v = np.sum(rel * (np.cross(n, b - a) / nn_safe), axis=2)
    s = np.sum(rel * (n / np.sqrt(nn_safe)), axis=2)
    inside = (u >= 0.0) & (v >= 0.0) & (u + v <= 1.0) & ok
    return np.sqrt(np.minimum(best, np.where(inside, s * s, np.inf)))


def _affine(grads, offsets):
    """(4, K) matrix W with [x, 1] @ W = x·g_k + o_k for the K affine functionals."""
    return np.concatenate([grads.T, offsets[None, :]], axis=0)


class MeshDistance:
    """Distances (and optionally signs) from points to one triangle mesh.

    All per-feature quantities but the vertex offsets are affine in x and are evaluated for a
    block of points by one matrix product [x, 1] @ W:
      face f: barycentric coordinates (u, v) of the projection of x and the signed distance s
        to the plane (the projection lies in the face iff u, v >= 0 and u + v <= 1);
      edge e (p, p + d): the foot parameter t = (x - p)·d/|d|² and (x - p) × d, whose norm over
        |d| is the distance to the edge's line (no cancellation, unlike |x-p|² - t²|d|²).

    Args:
      vertices: (V, 3) float.
      faces: (F, 3) int.
      signed: compute pseudonormals (the mesh must be closed and consistently oriented).
    """

    def __init__(self, vertices, faces, signed):
        self.vertices, self.faces, self.signed = vertices, faces, signed
        a, b, c = (vertices[faces[:, k]] for k in range(3))
        self.corners = (a, b, c)
        n = np.cross(b - a, c - a)
        nn = np.sum(n * n, axis=1)
        scale = max(float(np.ptp(vertices, axis=0).max()), 1e-300)
        # zero-area faces have no interior: their edges and vertices cover them
        face_ok = nn > (1e-14 * scale * scale) ** 2
        nn_safe = np.where(face_ok, nn, 1.0)[:, None]
        unit_n = np.where(face_ok[:, None], n / np.sqrt(nn_safe), 0.0)
        grads = (np.cross(c - a, n) / nn_safe, np.cross(n, b - a) / nn_safe, unit_n)
        self.w_face = np.stack([_affine(g, -np.sum(a * g, axis=1)) for g in grads], axis=-1)
        self.face_ok = face_ok
        pairs = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
        edges, inverse = np.unique(np.sort(pairs, axis=1), axis=0, return_inverse=True)
        self.face_edges = inverse.reshape(3, len(faces)).T  # (F, 3)
        p, d = vertices[edges[:, 0]], vertices[edges[:, 1]] - vertices[edges[:, 0]]
        dd = np.sum(d * d, axis=1)
        self.edge_ok = dd > (1e-14 * scale) ** 2
        dd_safe = np.where(self.edge_ok, dd, 1.0)
        self.inv_dd = 1.0 / dd_safe
        self.edge_p, self.edge_d = p, d
        # x @ skew_k = (x × d)_k for a row vector x
        zero = np.zeros(len(d))
        skew = (np.stack([zero, -d[:, 2], d[:, 1]], -1), np.stack([d[:, 2], zero, -d[:, 0]], -1),
                np.stack([-d[:, 1], d[:, 0], zero], -1))
        g_t = d / dd_safe[:, None]
        cols = [_affine(g_t, -np.sum(p * g_t, axis=1))]
        cols += [_affine(g, -np.sum(p * g, axis=1)) for g in skew]
        self.w_edge = np.stack(cols, axis=-1)  # (4, E, 4)
        if signed:
            self.face_normal = unit_n
            self.edge_normal = np.zeros((len(edges), 3))
            for k in range(3):
                np.add.at(self.edge_normal, self.face_edges[:, k], unit_n)
            self.vertex_normal = np.zeros((len(vertices), 3))
            for k, (p0, p1, p2) in enumerate(((a, b, c), (b, c, a), (c, a, b))):
                e1, e2 = p1 - p0, p2 - p0
                angle = np.arctan2(np.linalg.norm(np.cross(e1, e2), axis=1),
                                   np.sum(e1 * e2, axis=1))
                np.add.at(self.vertex_normal, faces[:, k], angle[:, None] * unit_n)
            # a consistently inward-oriented mesh has negative volume: flip its normals' sense
            volume = np.sum(a * np.cross(b, c)) / 6.0
            self.orientation = 1.0 if volume >= 0.0 else -1.0

    def block(self, x, face_ids):
        """Unsigned (or signed) distances (P,) of points x (P, 3) to the faces `face_ids`.

        The caller guarantees that the nearest point of every x lies on one of these faces.
        """
        edge_ids = np.unique(self.face_edges[face_ids])
        vert_ids = np.unique(self.faces[face_ids])
        xh = np.concatenate([x, np.ones((len(x), 1))], axis=1)
        rows = np.arange(len(x))
        yf = (xh @ self.w_face[:, face_ids, :].reshape(4, -1)).reshape(len(x), -1, 3)
        u, v, s = yf[..., 0], yf[..., 1], yf[..., 2]
        inside = (u >= 0.0) & (v >= 0.0) & (u + v <= 1.0) & self.face_ok[face_ids]
        face_sq = np.where(inside, s * s, np.inf)
        best_f = np.argmin(face_sq, axis=1)
        d_face = face_sq[rows, best_f]
        ye = (xh @ self.w_edge[:, edge_ids, :].reshape(4, -1)).reshape(len(x), -1, 4)
        t = ye[..., 0]
        on_edge = (t >= 0.0) & (t <= 1.0) & self.edge_ok[edge_ids]
        edge_sq = np.where(on_edge, np.sum(ye[..., 1:] ** 2, axis=2) * self.inv_dd[edge_ids],
                           np.inf)
        best_e = np.argmin(edge_sq, axis=1)
        d_edge = edge_sq[rows, best_e]
        diff = x[:, None, :] - self.vertices[vert_ids][None, :, :]
        vert_sq = np.einsum("pvj,pvj->pv", diff, diff)
        best_v = np.argmin(vert_sq, axis=1)
        d_vert = vert_sq[rows, best_v]
        dist = np.sqrt(np.minimum(np.minimum(d_face, d_edge), d_vert))
        if not self.signed:
            return dist
        # side of the nearest feature, from its pseudonormal
        side_face = s[rows, best_f]
        e = edge_ids[best_e]
        foot = self.edge_p[e] + t[rows, best_e][:, None] * self.edge_d[e]
        side_edge = np.sum((x - foot) * self.edge_normal[e], axis=1)
        side_vert = np.sum(diff[rows, best_v] * self.vertex_normal[vert_ids[best_v]], axis=1)
        side = np.where(d_face <= np.minimum(d_edge, d_vert), side_face,
                        np.where(d_edge <= d_vert, side_edge, side_vert))
        return np.where(self.orientation * side < 0.0, -dist, dist)

    def distances(self, nodes):
        """Signed (or unsigned) distances at a grid of nodes (nx, ny, nz, 3).

        Culling per block of nodes with centre m and radius r (half its diagonal): every node
        has d(x) <= d(m) + r and d_T(x) >= d_T(m) - r for every triangle T, so only triangles
        with d_T(m) <= d(m) + 2r can hold a node's nearest point.
        """
        shape = nodes.shape[:3]
        out = np.empty(shape)
        slices = [(slice(i, i + BLOCK), slice(j, j + BLOCK), slice(k, k + BLOCK))
                  for i in range(0, shape[0], BLOCK) for j in range(0, shape[1], BLOCK)
                  for k in range(0, shape[2], BLOCK)]
        lo = np.stack([nodes[sl][0, 0, 0] for sl in slices])
        hi = np.stack([nodes[sl][-1, -1, -1] for sl in slices])
        centres, radii = 0.5 * (lo + hi), 0.5 * np.linalg.norm(hi - lo, axis=1)
        a, b, c = self.corners
        # a few thousand (centre, triangle) pairs per chunk of centres
        step = max(1, 200_000 // len(a))
        for start in range(0, len(slices), step):
            d_tri = point_triangle_distance(centres[start:start + step], a, b, c)
            bound = d_tri.min(axis=1) + 2.0 * radii[start:start + step]
            for row, sl in enumerate(slices[start:start + step]):
                # relative slack: the bound must not drop a tied triangle to rounding
                face_ids = np.flatnonzero(d_tri[row] <= bound[row] * (1.0 + 1e-9) + 1e-300)
                pts = nodes[sl]
                out[sl] = self.block(pts.reshape(-1, 3), face_ids).reshape(pts.shape[:3])
        return out
