"""Contact kinematics: gaps, normals and contact points of the static candidate table.

One function per shape pair, each written for a single candidate and vmapped over the table:
- point-plane: a sphere centre (with its radius) or a box corner (radius 0) against a plane.
  Boxes therefore collide through their 8 corners only: edges and faces of a box do not
  touch anything, and box-box and box-sphere contact are not detected yet.
- sphere-sphere.
Normals point from body b (or the world, index -1) into body a: the force on a is along +n.
For a fixed candidate the gap, normal and point are smooth functions of the poses (the
sphere-sphere normal is undefined only for coincident centres, where it is 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxcontact.math import quat_rotate, safe_norm, safe_normalize
from jaxcontact.types import Array, Model


@struct.dataclass
class ContactFrame:
    """Geometry of all K candidates at one configuration.

    Attributes:
      gap:    (K,)   signed distance d, negative in penetration, m.
      normal: (K, 3) unit normal, from b into a.
      point:  (K, 3) world contact point (midway between the two surfaces).
      body_a: static tuple (K,) body index of side a.
      body_b: static tuple (K,) body index of side b, -1 for the world.
    """

    gap: Array
    normal: Array
    point: Array
    body_a: tuple = struct.field(pytree_node=False)
    body_b: tuple = struct.field(pytree_node=False)


def _point_plane(pos, quat, corner, radius, plane_normal, plane_offset):
    """A rounded point of a body against a plane: d = n·c - offset - ρ."""
    centre = pos + quat_rotate(quat, corner)
    gap = jnp.dot(plane_normal, centre) - plane_offset - radius
    point = centre - (radius + 0.5 * gap) * plane_normal
    return gap, plane_normal, point


def _sphere_sphere(pos_a, pos_b, radius_a, radius_b):
    """Two spheres: d = |x_a - x_b| - r_a - r_b, n = (x_a - x_b)/|x_a - x_b|."""
    delta = pos_a - pos_b
    normal = safe_normalize(delta)
    gap = safe_norm(delta) - radius_a - radius_b
    point = 0.5 * (pos_a - radius_a * normal + pos_b + radius_b * normal)
    return gap, normal, point


def candidate_bodies(model: Model):
    """Static (body_a, body_b) tuples of the K candidates; body_b = -1 for the world."""
    table = model.table
    return (tuple(table.point_body) + tuple(table.pair_a),
            (-1,) * len(table.point_body) + tuple(table.pair_b))


def gather_poses(pos: Array, quat: Array, body) -> tuple[Array, Array]:
    """Poses of bodies `body` (static tuple, -1 = the world at the origin), (R, 3), (R, 4)."""
    origin = jnp.zeros((1, 3), pos.dtype)
    identity = jnp.asarray([[1.0, 0.0, 0.0, 0.0]], quat.dtype)
    idx = jnp.asarray(body, dtype=jnp.int32)  # -1 picks the appended world row
    return (jnp.concatenate([pos, origin])[idx], jnp.concatenate([quat, identity])[idx])


def contact_frame(model: Model, pos: Array, quat: Array) -> ContactFrame:
    """Gaps, normals and points of every candidate in `model.table` at poses (pos, quat)."""
    body_a, body_b = candidate_bodies(model)
    pos_a, quat_a = gather_poses(pos, quat, body_a)
    pos_b, quat_b = gather_poses(pos, quat, body_b)
    return candidate_frame(model, pos_a, quat_a, pos_b, quat_b)


def candidate_frame(model: Model, pos_a, quat_a, pos_b, quat_b) -> ContactFrame:
    """As `contact_frame`, from the poses of each candidate's two sides, (K, 3) and (K, 4).

    Each candidate sees only its own rows, so derivatives with respect to side a and side b
    of every candidate come from one forward-mode pass (used for constraint rows).
    """
    table, size = model.table, model.geom.size
    body_a, body_b = candidate_bodies(model)
    k_p = len(table.point_body)
    gaps, normals, points = [], [], []
    if table.point_body:
        b = jnp.asarray(table.point_body)
        corner = jnp.asarray(table.point_corner, dtype=size.dtype) * size[b]
        radius = jnp.asarray(table.point_round, dtype=size.dtype) * size[b, 0]
        pl = jnp.asarray(table.point_plane)
        g, n, p = jax.vmap(_point_plane)(pos_a[:k_p], quat_a[:k_p], corner, radius,
                                         model.plane.normal[pl], model.plane.offset[pl])
        gaps.append(g), normals.append(n), points.append(p)
    if table.pair_a:
        a, b = jnp.asarray(table.pair_a), jnp.asarray(table.pair_b)
        g, n, p = jax.vmap(_sphere_sphere)(pos_a[k_p:], pos_b[k_p:], size[a, 0], size[b, 0])
        gaps.append(g), normals.append(n), points.append(p)
    if not gaps:
        dtype = pos_a.dtype
        return ContactFrame(jnp.zeros((0,), dtype), jnp.zeros((0, 3), dtype),
                            jnp.zeros((0, 3), dtype), (), ())
    return ContactFrame(jnp.concatenate(gaps), jnp.concatenate(normals),
                        jnp.concatenate(points), body_a, body_b)


def combine(a, b, how):
    """Pair parameter from the two sides' values; equal values give that value."""
    if how == "mean":
        return 0.5 * (a + b)
    if how == "harmonic":  # springs in series, rescaled: the softer side dominates
        return 2.0 * a * b / (a + b)
    raise ValueError(f"unknown combination {how!r}")


def pair_parameters(model: Model):
    """Friction μ, stiffness k_n and damping k_d of each candidate, (K,) each.

    Stiffness combines harmonically (a soft body on a stiff floor is soft), friction and
    damping by their mean.
    """
    table, geom, plane = model.table, model.geom, model.plane
    out = {"friction": [], "stiffness": [], "damping": []}
    how = {"friction": "mean", "stiffness": "harmonic", "damping": "mean"}
    if table.point_body:
        b, pl = jnp.asarray(table.point_body), jnp.asarray(table.point_plane)
        for name in out:
            out[name].append(combine(getattr(geom, name)[b], getattr(plane, name)[pl], how[name]))
    if table.pair_a:
        a, b = jnp.asarray(table.pair_a), jnp.asarray(table.pair_b)
        for name in out:
            values = getattr(geom, name)
            out[name].append(combine(values[a], values[b], how[name]))
    dtype = geom.size.dtype
    return tuple(jnp.concatenate(v) if v else jnp.zeros((0,), dtype)
                 for v in (out["friction"], out["stiffness"], out["damping"]))
