"""Contact kinematics: the gap, normal and point of every contact row.

Every shape is a convex core grown by a ball of radius ρ (a Minkowski sum, `types.Geom`):
sphere = point ⊕ ball(r), capsule = segment ⊕ ball(r), box = smaller box ⊕ ball(rounding),
mesh = convex hull (ρ = 0). A contact row is a contact point of one side, a ball of centre c
and radius ρ_p fixed in its body (ADD's point proxies, Sec. 4), against the core of the
other side, with the core's distance function φ (in its body frame):

    d = φ(c) - ρ_p - ρ_core,    n = ∇φ(c),    point = c - (ρ_p + d/2) n

φ is |q| for a point, the distance to the z segment for a capsule, |max(|q| - h, 0)| +
min(max_i(|q_i| - h_i), 0) for a box, max_f (n_f·q - o_f) for a convex mesh, n·x - o for a
plane and the trilinear grid interpolant for an obstacle (`sdf.GridSDF`).
Contact points of each pairing:
- body vs plane or obstacle: the body's points: a sphere's centre, a capsule's two segment
  ends, a box's 8 core corners, a mesh's vertices.
- sphere vs anything: the sphere centre against the other core (exact).
- capsule vs capsule: the closest points of the two segments (exact; for parallel segments
  the middle of their overlap).
- box-box, box-capsule and pairs with meshes: each side's points against the other's core
  (vertex-face contact; a face lying on a face of the same size gets points from both
  sides, 8 for two equal boxes).
- box-box and box-capsule also have one edge-edge row per pair (`edge_pairing`): crossing
  edges (a capsule's segment counts as an edge) touch at the common perpendicular of the
  two edge lines, d = n·(p_a - p_b) - ρ_a - ρ_b with n ∝ e_a × e_b. The pairing (which
  edges, the normal's sign) is chosen at the start of the step by the separating-axis test
  and frozen, so within the step the row is smooth; it is used only when an edge axis
  separates the cores best and the closest points lie inside both edges. Mesh-mesh pairs
  have no edge rows.
Particles are balls of their radius (a point core) against any core, plane or obstacle.
Normals point from side b (or the world, index -1) into side a: the force on a is along +n.
For a fixed pairing the gap and normal are smooth while the contact point stays outside the
other core: the exterior distance of a convex core is C1. A box's rounding keeps its corners
outside the other box's core up to a penetration of twice the rounding, which is why boxes
are rounded; mesh planes have edges (their normal jumps where two faces meet).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import (quat_rotate, quat_rotate_inverse, quat_to_mat, safe_div, safe_norm,
                             safe_normalize)
from jaxcontact.types import Shape

FAR = 1.0  # gap of an unused contact row, m: positive, so it carries no force
CORNERS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))


# --- shapes ---------------------------------------------------------------------------------

def proxy_count(shape, n_vertices=0) -> int:
    """Contact points of a body of `shape` (static); meshes: their (padded) vertex count."""
    if shape == Shape.MESH:
        return n_vertices
    return {Shape.SPHERE: 1, Shape.BOX: 8, Shape.CAPSULE: 2}[Shape(shape)]


def proxies(shape, size, rounding, vertices=None):
    """Contact points of one body in its frame, (c, 3), and their ball radii (c,)."""
    radius = shape_radius(shape, size, rounding)
    if shape == Shape.SPHERE:
        return jnp.zeros((1, 3), size.dtype), radius[None]
    if shape == Shape.CAPSULE:
        ends = jnp.asarray([[0.0, 0.0, -1.0], [0.0, 0.0, 1.0]], size.dtype) * size[1]
        return ends, jnp.broadcast_to(radius, (2,))
    if shape == Shape.BOX:
        return (jnp.asarray(CORNERS, size.dtype) * (size - rounding)[None, :],
                jnp.broadcast_to(radius, (8,)))
    return vertices, jnp.zeros(vertices.shape[:1], size.dtype)


def bounding_radius(shape, size, vertices=None):
    """Radius of a sphere about the body's centre that contains one body."""
    if shape == Shape.SPHERE:
        return size[0]
    if shape == Shape.CAPSULE:
        return size[0] + size[1]
    if shape == Shape.BOX:
        return safe_norm(size)
    return jnp.max(safe_norm(vertices))   # padding repeats a vertex


def shape_radius(shape, size, rounding):
    """ρ of the shape's ball: the radius (sphere, capsule), the rounding (box), 0 (mesh)."""
    if shape in (Shape.SPHERE, Shape.CAPSULE):
        return size[..., 0]
    if shape == Shape.BOX:
        return rounding
    return jnp.zeros_like(rounding)


def _sign(x):
    """±1 by the sign of x, +1 at 0 (a face or orientation must be picked at ties)."""
    return jnp.where(x >= 0.0, 1.0, -1.0)


def core_distance(shape):
    """(φ, ∇φ)(q, size, rounding, planes): distance of body-frame point q to the shape's core
    and its unit gradient, in closed form (no nested autodiff: the step differentiates these
    twice more)."""
    def point(q, size, rounding, planes):
        return safe_norm(q), safe_normalize(q)

    def segment(q, size, rounding, planes):
        half = size[1]
        axis = jnp.asarray([0.0, 0.0, 1.0], q.dtype)
        delta = q - jnp.clip(q[2], -half, half) * axis
        return safe_norm(delta), safe_normalize(delta)

    def box(q, size, rounding, planes):
        sign = _sign(q)
        excess = jnp.abs(q) - (size - rounding)
        outward = jnp.maximum(excess, 0.0)
        outside = jnp.any(excess > 0.0)
        deepest = jnp.argmax(excess)
        inside_normal = sign * (jnp.arange(3) == deepest)
        distance = jnp.where(outside, safe_norm(outward), excess[deepest])
        return distance, jnp.where(outside, sign * safe_normalize(outward), inside_normal)

    def polytope(q, size, rounding, planes):
        values = planes[:, :3] @ q - planes[:, 3]
        face = jnp.argmax(values)
        return values[face], planes[face, :3]

    return {Shape.SPHERE: point, Shape.CAPSULE: segment, Shape.BOX: box,
            Shape.MESH: polytope}[Shape(shape)]


def ball_against_core(centre, radius, pos, quat, distance, core_radius):
    """A ball (centre, radius) against a core with (φ, ∇φ) = distance(q) in frame (pos, quat)."""
    phi, grad = distance(quat_rotate_inverse(quat, centre - pos))
    normal = quat_rotate(quat, grad)
    gap = phi - radius - core_radius
    return gap, normal, centre - (radius + 0.5 * gap) * normal


def _segment_ends(pos, quat, half):
    axis = quat_rotate(quat, jnp.asarray([0.0, 0.0, 1.0], pos.dtype)) * half
    return pos - axis, 2.0 * axis


def segment_closest(start_a, dir_a, start_b, dir_b):
    """Parameters s, t in [0, 1] of the closest points start + s dir of two segments.

    The clamped minimizer of |p_a(s) - p_b(t)|², with the unclamped s solved first and t
    then clamped with s re-solved; for (near-)parallel segments s is the middle of the
    overlap of b's projection with a, so the point does not jump between the ends.
    """
    r = start_a - start_b
    aa, ee, bb = dir_a @ dir_a, dir_b @ dir_b, dir_a @ dir_b
    cc, ff = dir_a @ r, dir_b @ r
    denom = aa * ee - bb * bb
    parallel = denom <= 1e-9 * aa * ee
    s_general = jnp.clip(safe_div(bb * ff - cc * ee, jnp.where(parallel, 0.0, denom)), 0.0, 1.0)
    ends = jnp.clip(jnp.stack([safe_div(-cc, aa), safe_div(bb - cc, aa)]), 0.0, 1.0)
    s = jnp.where(parallel, 0.5 * (ends[0] + ends[1]), s_general)
    t_free = safe_div(bb * s + ff, ee)
    t = jnp.clip(t_free, 0.0, 1.0)
    s = jnp.where(t_free == t, s, jnp.clip(safe_div(bb * t - cc, aa), 0.0, 1.0))
    return s, t


def core_half(shape, size, rounding):
    """Half extents of a box-like core: the box's shrunk by its rounding, a capsule's segment
    (0, 0, half length)."""
    if shape == Shape.CAPSULE:
        return jnp.stack([0.0 * size[..., 1], 0.0 * size[..., 1], size[..., 1]], axis=-1)
    return size - rounding[..., None]


def edge_pairing(pos_a, quat_a, half_a, faces_a, pos_b, quat_b, half_b, faces_b):
    """Edge-edge pairing of two box-like cores by the separating-axis test (one pair).

    Candidate axes are the face normals of each side that has faces (not a capsule's
    segment) and the 9 cross products e_a × e_b of edge directions; the separation along a
    unit axis n oriented from b to a is n·(c_a - c_b) - Σ_k h_a,k |n·a_k| - Σ_k h_b,k |n·b_k|
    (the signed distance of the cores when that axis is the best). The pairing is an
    edge-edge contact if the best edge axis beats every face axis (by a relative 1e-7, so
    stacked faces, whose edge axes tie with a face normal, stay with their corner rows) and
    the closest points of the two supporting edge lines lie strictly inside both edges.

    Returns (valid, edge (2, 3), sign) as in `Candidates`.
    """
    axes_a, axes_b = quat_to_mat(quat_a).T, quat_to_mat(quat_b).T    # rows: body axes
    delta = pos_a - pos_b

    def separation(n):
        return (jnp.abs(n @ delta) - jnp.abs(axes_a @ n) @ half_a - jnp.abs(axes_b @ n) @ half_b)

    cross = jnp.cross(axes_a[:, None, :], axes_b[None, :, :]).reshape(9, 3)
    length = safe_norm(cross)
    normal = cross / jnp.where(length > 1e-6, length, 1.0)[:, None]
    has_edge = ((half_a[:, None] > 0.0) & (half_b[None, :] > 0.0)).reshape(9)
    edge_sep = jnp.where((length > 1e-6) & has_edge, jax.vmap(separation)(normal), -jnp.inf)
    face_sep = jnp.concatenate([jnp.where(faces_a, jax.vmap(separation)(axes_a), -jnp.inf),
                                jnp.where(faces_b, jax.vmap(separation)(axes_b), -jnp.inf)])
    best = jnp.argmax(edge_sep)
    i, j = best // 3, best % 3
    sign = _sign(normal[best] @ delta)
    n = sign * normal[best]
    on_axis_a, on_axis_b = jnp.arange(3) == i, jnp.arange(3) == j
    corner_a = jnp.where(on_axis_a, 0.0, -_sign(axes_a @ n))   # a's edge nearest b
    corner_b = jnp.where(on_axis_b, 0.0, _sign(axes_b @ n))    # b's edge nearest a
    s, t = line_closest(pos_a + (corner_a * half_a) @ axes_a, axes_a[i],
                         pos_b + (corner_b * half_b) @ axes_b, axes_b[j])
    scale = jnp.sum(half_a) + jnp.sum(half_b)
    valid = ((edge_sep[best] > jnp.max(face_sep) + 1e-7 * scale)
             & (jnp.abs(s) < half_a[i]) & (jnp.abs(t) < half_b[j]))
    return valid, jnp.stack([corner_a, corner_b]), sign


def line_closest(point_a, dir_a, point_b, dir_b):
    """Parameters (s, t) of the closest points point + s dir of two lines (unit directions,
    not parallel): the common perpendicular."""
    r = point_a - point_b
    b, ra, rb = dir_a @ dir_b, dir_a @ r, dir_b @ r
    s = safe_div(b * rb - ra, 1.0 - b * b)
    return s, rb + s * b


def edge_edge(pos_a, quat_a, half_a, radius_a, pos_b, quat_b, half_b, radius_b, edge, sign):
    """Gap, normal and point of a frozen edge-edge pairing (`edge_pairing`) at poses a, b:
    the common perpendicular of the two edge lines, grown by the two radii."""
    own_a, own_b = (edge[0] == 0.0).astype(pos_a.dtype), (edge[1] == 0.0).astype(pos_a.dtype)
    dir_a, dir_b = quat_rotate(quat_a, own_a), quat_rotate(quat_b, own_b)
    mid_a = pos_a + quat_rotate(quat_a, edge[0] * half_a)
    mid_b = pos_b + quat_rotate(quat_b, edge[1] * half_b)
    normal = sign * safe_normalize(jnp.cross(dir_a, dir_b))
    gap = normal @ (mid_a - mid_b) - radius_a - radius_b
    s, _ = line_closest(mid_a, dir_a, mid_b, dir_b)
    return gap, normal, mid_a + s * dir_a - (radius_a + 0.5 * gap) * normal


def segment_segment(pos_a, quat_a, size_a, pos_b, quat_b, size_b):
    """Capsule against capsule: the closest points of the axis segments, grown by the radii."""
    start_a, dir_a = _segment_ends(pos_a, quat_a, size_a[1])
    start_b, dir_b = _segment_ends(pos_b, quat_b, size_b[1])
    s, t = segment_closest(start_a, dir_a, start_b, dir_b)
    on_a, on_b = start_a + s * dir_a, start_b + t * dir_b
    normal = safe_normalize(on_a - on_b)
    gap = safe_norm(on_a - on_b) - size_a[0] - size_b[0]
    return gap, normal, on_a - (size_a[0] + 0.5 * gap) * normal


