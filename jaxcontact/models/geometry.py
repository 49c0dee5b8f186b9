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
from flax import struct

from jaxcontact.math import (quat_rotate, quat_rotate_inverse, quat_to_mat, safe_div, safe_norm,
                             safe_normalize)
from jaxcontact.models import broad_phase as bp
from jaxcontact.models import sdf
from jaxcontact.types import Array, Model, Shape, State

FAR = 1.0  # gap of an unused broad-phase slot, m: positive, so it carries no force
_CORNERS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))


@struct.dataclass
class Candidates:
    """The contact rows of one step: which bodies each row joins (fixed over the step).

    Attributes:
      body_a:   (K,) int body of side a.
      body_b:   (K,) int body of side b, -1 for the world (planes, obstacles, unused slots).
      used:     (K,) bool, false for unused broad-phase slots, mesh padding and edge rows
                whose pairing is not an edge-edge contact.
      overflow: () bool, the broad phase dropped pairs (see `broad_phase`).
      edge:     (E, 2, 3) the frozen edge of each edge-edge row (in layout order), for
                side a and side b: corner signs ±1 of the edge's other two axes and 0 on
                the edge's own axis (its midpoint is edge ∘ half extents of the core).
      edge_sign: (E,) ±1 orientation of the row's normal against e_a × e_b.
    """

    body_a: Array
    body_b: Array
    used: Array
    overflow: Array
    edge: Array
    edge_sign: Array


@struct.dataclass
class ContactFrame:
    """Geometry of all K contact rows at one configuration.

    Attributes:
      gap:    (K,)   signed distance d, negative in penetration, m (`FAR` for unused rows).
      normal: (K, 3) unit normal, from b into a.
      point:  (K, 3) world contact point (midway between the two surfaces).
      body_a, body_b: (K,) body indices of the two sides (-1 = world).
    """

    gap: Array
    normal: Array
    point: Array
    body_a: Array
    body_b: Array


# --- shapes ---------------------------------------------------------------------------------

def proxy_count(model: Model, shape) -> int:
    """Contact points of a body of `shape` (static)."""
    if shape == Shape.MESH:
        return model.mesh.vertices.shape[1]
    return {Shape.SPHERE: 1, Shape.BOX: 8, Shape.CAPSULE: 2}[Shape(shape)]


def shape_radius(shape, size, rounding):
    """ρ of the shape's ball: the radius (sphere, capsule), the rounding (box), 0 (mesh)."""
    if shape in (Shape.SPHERE, Shape.CAPSULE):
        return size[..., 0]
    if shape == Shape.BOX:
        return rounding
    return jnp.zeros_like(rounding)


def bounding_radius(model: Model) -> Array:
    """Radius of a sphere about each body's centre that contains the body, (N,)."""
    size, shape = model.geom.size, np.asarray(model.geom.shape)
    radius = jnp.where(jnp.asarray(shape == Shape.CAPSULE), size[:, 0] + size[:, 1], size[:, 0])
    radius = jnp.where(jnp.asarray(shape == Shape.BOX), safe_norm(size), radius)
    if model.mesh.size:
        reach = jnp.max(safe_norm(model.mesh.vertices), axis=-1)  # padding repeats a vertex
        mesh = jnp.asarray(np.maximum(np.asarray(model.geom.mesh), 0), jnp.int32)
        radius = jnp.where(jnp.asarray(shape == Shape.MESH), reach[mesh], radius)
    return radius


def _proxy_local(model: Model, shape, index, body):
    """Contact points (R, 3) in the body frame, and ρ (R,), for rows (body, index)."""
    size, rounding = model.geom.size[body], model.geom.rounding[body]
    radius = shape_radius(shape, size, rounding)
    if shape == Shape.SPHERE:
        return jnp.zeros_like(size), radius
    if shape == Shape.CAPSULE:
        sign = jnp.asarray(np.where(np.asarray(index) == 0, -1.0, 1.0), size.dtype)
        return jnp.stack([0.0 * sign, 0.0 * sign, sign * size[:, 1]], axis=-1), radius
    if shape == Shape.BOX:
        corner = jnp.asarray(_CORNERS[np.asarray(index)], size.dtype)
        return corner * (size - rounding[:, None]), radius
    mesh = jnp.asarray(model.geom.mesh, jnp.int32)[body]
    return model.mesh.vertices[mesh, jnp.asarray(index, jnp.int32)], radius


def _sign(x):
    """±1 by the sign of x, +1 at 0 (a face or orientation must be picked at ties)."""
    return jnp.where(x >= 0.0, 1.0, -1.0)


def _core_distance(shape):
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


def _ball_against_core(centre, radius, pos, quat, distance, core_radius):
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


def _core_half(shape, size, rounding):
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
    s, t = _line_closest(pos_a + (corner_a * half_a) @ axes_a, axes_a[i],
                         pos_b + (corner_b * half_b) @ axes_b, axes_b[j])
    scale = jnp.sum(half_a) + jnp.sum(half_b)
    valid = ((edge_sep[best] > jnp.max(face_sep) + 1e-7 * scale)
             & (jnp.abs(s) < half_a[i]) & (jnp.abs(t) < half_b[j]))
    return valid, jnp.stack([corner_a, corner_b]), sign


def _line_closest(point_a, dir_a, point_b, dir_b):
    """Parameters (s, t) of the closest points point + s dir of two lines (unit directions,
    not parallel): the common perpendicular."""
    r = point_a - point_b
    b, ra, rb = dir_a @ dir_b, dir_a @ r, dir_b @ r
    s = safe_div(b * rb - ra, 1.0 - b * b)
    return s, rb + s * b


def _edges(pos_a, quat_a, half_a, radius_a, pos_b, quat_b, half_b, radius_b, edge, sign):
    """Gap, normal and point of a frozen edge-edge pairing (`edge_pairing`) at poses a, b:
    the common perpendicular of the two edge lines, grown by the two radii."""
    own_a, own_b = (edge[0] == 0.0).astype(pos_a.dtype), (edge[1] == 0.0).astype(pos_a.dtype)
    dir_a, dir_b = quat_rotate(quat_a, own_a), quat_rotate(quat_b, own_b)
    mid_a = pos_a + quat_rotate(quat_a, edge[0] * half_a)
    mid_b = pos_b + quat_rotate(quat_b, edge[1] * half_b)
    normal = sign * safe_normalize(jnp.cross(dir_a, dir_b))
    gap = normal @ (mid_a - mid_b) - radius_a - radius_b
    s, _ = _line_closest(mid_a, dir_a, mid_b, dir_b)
    return gap, normal, mid_a + s * dir_a - (radius_a + 0.5 * gap) * normal


def _segments(pos_a, quat_a, size_a, pos_b, quat_b, size_b):
    """Capsule against capsule: the closest points of the axis segments, grown by the radii."""
    start_a, dir_a = _segment_ends(pos_a, quat_a, size_a[1])
    start_b, dir_b = _segment_ends(pos_b, quat_b, size_b[1])
    s, t = segment_closest(start_a, dir_a, start_b, dir_b)
    on_a, on_b = start_a + s * dir_a, start_b + t * dir_b
    normal = safe_normalize(on_a - on_b)
    gap = safe_norm(on_a - on_b) - size_a[0] - size_b[0]
    return gap, normal, on_a - (size_a[0] + 0.5 * gap) * normal


# --- row layout -----------------------------------------------------------------------------

def pair_terms(shape_a, shape_b):
    """Which contact points a pair of shapes uses: "a" (a's points vs b's core), "b" (b's
    points vs a's core), "segments" (capsule-capsule closest points), "edges" (one
    edge-edge row, box-box and box-capsule)."""
    if shape_a == Shape.SPHERE:
        return ("a",)
    if shape_a == shape_b == Shape.CAPSULE:
        return ("segments",)
    if {shape_a, shape_b} <= {Shape.BOX, Shape.CAPSULE}:
        return ("a", "b", "edges")
    return ("a", "b")


def _term_rows(model, group, term):
    """Contact rows per slot of a pair-group term."""
    if term in ("segments", "edges"):
        return 1
    return proxy_count(model, group.shape_a if term == "a" else group.shape_b)


def _layout(model: Model):
    """Static row layout: a list of (kind, group, term, rows per candidate, candidates)."""
    layout = []
    for group in model.table.world:
        layout.append(("world", group, None, proxy_count(model, group.shape), len(group.body)))
    for group in model.table.pairs:
        slots = len(group.pairs) if group.pairs else group.capacity
        for term in pair_terms(group.shape_a, group.shape_b):
            layout.append(("pair", group, term, _term_rows(model, group, term), slots))
    return layout


def n_rows(model: Model) -> int:
    """K, the number of contact rows (static)."""
    return sum(per * count for _, _, _, per, count in _layout(model))


def _proxy_valid(model, shape, index, body):
    """Mesh padding vertices are not contact points."""
    if shape != Shape.MESH:
        return jnp.ones(np.shape(index), bool)
    count = jnp.asarray(model.mesh.count, jnp.int32)[jnp.asarray(model.geom.mesh, jnp.int32)[body]]
    return jnp.asarray(index) < count


def candidates(model: Model, state: State) -> Candidates:
    """The contact rows of a step that starts at `state` (broad phase for pair groups)."""
    table = model.table
    slots, overflow = {}, jnp.zeros((), bool)
    if any(not g.pairs for g in table.pairs):
        settings = table.broad_phase
        radius = bounding_radius(model)
        motion = model.dt * (safe_norm(state.vel) + safe_norm(state.ang_vel) * radius
                             + model.dt * safe_norm(model.gravity))
        i, j, hit, overflow = bp.sweep(state.pos, radius + motion + settings.margin,
                                       settings.window)
        shape = jnp.asarray(model.geom.shape, jnp.int32)
        for g in table.pairs:
            if not g.pairs:
                *slots[g], dropped = bp.group_slots(i, j, hit, shape, g.shape_a, g.shape_b,
                                                    g.capacity, model.n_body, table.excluded)
                overflow = overflow | dropped
    body_a, body_b, used, edge, edge_sign = [], [], [], [], []
    for kind, group, term, per, count in _layout(model):
        index = np.tile(np.arange(per), count)
        if kind == "world":
            a = jnp.asarray(np.repeat(group.body, per), jnp.int32)
            body_a.append(a), body_b.append(jnp.full((per * count,), -1, jnp.int32))
            used.append(_proxy_valid(model, group.shape, index, a))
            continue
        if group.pairs:
            a = jnp.asarray([p[0] for p in group.pairs], jnp.int32)
            b = jnp.asarray([p[1] for p in group.pairs], jnp.int32)
            slot_used = jnp.ones((count,), bool)
        else:
            a, b, slot_used = slots[group]
        a, b, slot_used = (jnp.repeat(x, per) for x in (a, b, slot_used))
        body_a.append(a), body_b.append(b)
        if term == "segments":
            used.append(slot_used)
        elif term == "edges":
            valid, corners, sign = _edge_pairings(model, group, state, a, b)
            used.append(slot_used & valid), edge.append(corners), edge_sign.append(sign)
        else:
            owner = a if term == "a" else b
            shape = group.shape_a if term == "a" else group.shape_b
            used.append(slot_used & _proxy_valid(model, shape, index, jnp.maximum(owner, 0)))
    dtype = state.pos.dtype
    edge = jnp.concatenate(edge) if edge else jnp.zeros((0, 2, 3), dtype)
    edge_sign = jnp.concatenate(edge_sign) if edge_sign else jnp.zeros((0,), dtype)
    if not body_a:
        empty = jnp.zeros((0,), jnp.int32)
        return Candidates(empty, empty, jnp.zeros((0,), bool), overflow, edge, edge_sign)
    return Candidates(jnp.concatenate(body_a), jnp.concatenate(body_b), jnp.concatenate(used),
                      overflow, edge, edge_sign)


def _edge_pairings(model, group, state, a, b):
    """`edge_pairing` of every slot (bodies a, b; -1 = unused) of a box/capsule pair group."""
    geom = model.geom
    a, b = jnp.maximum(a, 0), jnp.maximum(b, 0)
    half_a = _core_half(group.shape_a, geom.size[a], geom.rounding[a])
    half_b = _core_half(group.shape_b, geom.size[b], geom.rounding[b])
    pairing = jax.vmap(edge_pairing, in_axes=(0, 0, 0, None, 0, 0, 0, None))
    return pairing(state.pos[a], state.quat[a], half_a, group.shape_a == Shape.BOX,
                   state.pos[b], state.quat[b], half_b, group.shape_b == Shape.BOX)


def gather_poses(pos: Array, quat: Array, body) -> tuple[Array, Array]:
    """Poses of bodies `body` (indices, -1 = the world at the origin), (R, 3), (R, 4)."""
    origin = jnp.zeros((1, 3), pos.dtype)
    identity = jnp.asarray([[1.0, 0.0, 0.0, 0.0]], quat.dtype)
    idx = jnp.asarray(body, dtype=jnp.int32)  # -1 picks the appended world row
    return (jnp.concatenate([pos, origin])[idx], jnp.concatenate([quat, identity])[idx])


def contact_frame(model: Model, cand: Candidates, pos: Array, quat: Array) -> ContactFrame:
    """Gaps, normals and points of every contact row at poses (pos, quat)."""
    pos_a, quat_a = gather_poses(pos, quat, cand.body_a)
    pos_b, quat_b = gather_poses(pos, quat, cand.body_b)
    return candidate_frame(model, cand, pos_a, quat_a, pos_b, quat_b)


def candidate_frame(model: Model, cand: Candidates, pos_a, quat_a, pos_b, quat_b) -> ContactFrame:
    """As `contact_frame`, from the poses of each row's two sides, (K, 3) and (K, 4).

    Each row sees only its own poses, so derivatives with respect to side a and side b of
    every row come from one forward-mode pass (used for constraint rows).
    """
    geom = model.geom
    gaps, normals, points = [], [], []
    start = edge_start = 0
    for kind, group, term, per, count in _layout(model):
        rows = slice(start, start + per * count)
        start += per * count
        index = np.tile(np.arange(per), count)
        a = jnp.maximum(cand.body_a[rows], 0)
        pa, qa, pb, qb = pos_a[rows], quat_a[rows], pos_b[rows], quat_b[rows]
        if kind == "world":
            local, radius = _proxy_local(model, group.shape, index, a)
            centre = pa + quat_rotate(qa, local)
            if group.target == "plane":
                plane = jnp.asarray(np.repeat(group.index, per), jnp.int32)
                normal = model.plane.normal[plane]
                gap = jnp.sum(normal * centre, axis=-1) - model.plane.offset[plane] - radius
            else:
                grid = model.obstacle.grid[group.index[0]]
                gap = jax.vmap(lambda c: sdf.sample(grid, c))(centre) - radius
                normal = jax.vmap(lambda c: sdf.normal(grid, c))(centre)
            point = centre - (radius + 0.5 * gap)[:, None] * normal
        elif term == "segments":
            b = jnp.maximum(cand.body_b[rows], 0)
            gap, normal, point = jax.vmap(_segments)(pa, qa, geom.size[a], pb, qb, geom.size[b])
        elif term == "edges":
            b = jnp.maximum(cand.body_b[rows], 0)
            edges = slice(edge_start, edge_start + count)
            edge_start += count
            sides = [(_core_half(shape, geom.size[x], geom.rounding[x]),
                      shape_radius(shape, geom.size[x], geom.rounding[x]))
                     for shape, x in ((group.shape_a, a), (group.shape_b, b))]
            gap, normal, point = jax.vmap(_edges)(pa, qa, *sides[0], pb, qb, *sides[1],
                                                  cand.edge[edges], cand.edge_sign[edges])
        else:
            b = jnp.maximum(cand.body_b[rows], 0)
            own, other = (a, b) if term == "a" else (b, a)
            own_shape, other_shape = ((group.shape_a, group.shape_b) if term == "a"
                                      else (group.shape_b, group.shape_a))
            p_own, q_own, p_other, q_other = (pa, qa, pb, qb) if term == "a" else (pb, qb, pa, qa)
            local, radius = _proxy_local(model, own_shape, index, own)
            centre = p_own + quat_rotate(q_own, local)
            distance = _core_distance(other_shape)
            size, rounding = geom.size[other], geom.rounding[other]
            if other_shape == Shape.MESH:
                planes = model.mesh.planes[jnp.asarray(geom.mesh, jnp.int32)[other]]
            else:
                planes = jnp.zeros((other.shape[0], 1, 4), size.dtype)

            def one(c, r, p, q, sz, rd, pl):
                return _ball_against_core(c, r, p, q, lambda x: distance(x, sz, rd, pl),
                                          shape_radius(other_shape, sz, rd))

            gap, normal, point = jax.vmap(one)(centre, radius, p_other, q_other, size,
                                               rounding, planes)
            if term == "b":
                normal = -normal
        gaps.append(gap), normals.append(normal), points.append(point)
    if not gaps:
        dtype = pos_a.dtype
        return ContactFrame(jnp.zeros((0,), dtype), jnp.zeros((0, 3), dtype),
                            jnp.zeros((0, 3), dtype), cand.body_a, cand.body_b)
    gap = jnp.where(cand.used, jnp.concatenate(gaps), FAR)
    return ContactFrame(gap, jnp.concatenate(normals), jnp.concatenate(points), cand.body_a,
                        cand.body_b)


def combine(a, b, how):
    """Pair parameter from the two sides' values; equal values give that value."""
    if how == "mean":
        return 0.5 * (a + b)
    if how == "harmonic":  # springs in series, rescaled: the softer side dominates
        return 2.0 * a * b / (a + b)
    raise ValueError(f"unknown combination {how!r}")


def pair_parameters(model: Model, cand: Candidates):
    """Friction μ, stiffness k_n and damping k_d of each contact row, (K,) each.

    Stiffness combines harmonically (a soft body on a stiff floor is soft), friction and
    damping by their mean.
    """
    geom = model.geom
    how = {"friction": "mean", "stiffness": "harmonic", "damping": "mean"}
    out = {name: [] for name in how}
    start = 0
    for kind, group, term, per, count in _layout(model):
        rows = slice(start, start + per * count)
        start += per * count
        a = jnp.maximum(cand.body_a[rows], 0)
        if kind == "world":
            target = model.plane if group.target == "plane" else model.obstacle
            idx = jnp.asarray(np.repeat(group.index, per), jnp.int32)
            other = {name: getattr(target, name)[idx] for name in how}
        else:
            b = jnp.maximum(cand.body_b[rows], 0)
            other = {name: getattr(geom, name)[b] for name in how}
        for name in how:
            out[name].append(combine(getattr(geom, name)[a], other[name], how[name]))
    dtype = geom.size.dtype
    return tuple(jnp.concatenate(out[name]) if out[name] else jnp.zeros((0,), dtype)
                 for name in how)
