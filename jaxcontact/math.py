"""Quaternions, the exponential map and NaN-safe primitives.

Every norm, normalization and division here is finite in value *and* gradient at zero: the
unsafe operand is swapped for a placeholder inside the function's smooth domain before the
operation ("double where"), and functions of |x| that are smooth in |x|² are written in |x|²
with a series near zero, so that their Hessians are right at zero too (Newton needs them).
Quaternions are (w, x, y, z) and rotate body to world.
"""

import jax
import jax.numpy as jnp


def safe_norm(x, axis=-1, keepdims=False):
    """Euclidean norm with gradient 0 (not NaN) at x = 0.

    The gradient x/|x| has no limit at 0; 0 is the subgradient of least norm.
    """
    sq = jnp.sum(x * x, axis=axis, keepdims=keepdims)
    is_zero = sq <= 0.0
    # placeholder 1 keeps sqrt in its smooth domain on the branch that is not taken
    return jnp.where(is_zero, 0.0, jnp.sqrt(jnp.where(is_zero, 1.0, sq)))


def safe_normalize(x, axis=-1):
    """x/|x|, and 0 (with gradient 0) at x = 0."""
    n = safe_norm(x, axis=axis, keepdims=True)
    is_zero = n <= 0.0
    return jnp.where(is_zero, 0.0, x / jnp.where(is_zero, 1.0, n))


def safe_sqrt(x):
    """sqrt(max(x, 0)) with gradient 0 at x <= 0 instead of inf/NaN."""
    pos = x > 0.0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def safe_div(num, den):
    """num / den, and 0 where den == 0 (value and gradient)."""
    zero = den == 0.0
    return jnp.where(zero, 0.0, num / jnp.where(zero, 1.0, den))


def safe_atan2(y, x):
    """atan2(y, x), and 0 with gradient 0 (not NaN) at (0, 0)."""
    zero = (x == 0.0) & (y == 0.0)
    return jnp.where(zero, 0.0, jnp.arctan2(jnp.where(zero, 0.0, y), jnp.where(zero, 1.0, x)))


def rotate_about(axis, angle, v):
    """Rodrigues' rotation of v by `angle` (rad) about the unit `axis`: (..., 3)."""
    c, s = jnp.cos(angle)[..., None], jnp.sin(angle)[..., None]
    along = jnp.sum(axis * v, axis=-1, keepdims=True)
    return c * v + s * jnp.cross(axis, v) + (1.0 - c) * along * axis


def _half_angle_terms(theta_sq):
    """cos(θ/2) and sin(θ/2)/θ as smooth functions of θ², exact to float64 rounding.

    A series is used below θ² = 1e-4, to θ⁶: its truncation error (θ⁸ terms) is < 1e-21.
    """
    small = theta_sq < 1e-4
    t2 = jnp.where(small, 1.0, theta_sq)
    theta = jnp.sqrt(t2)
    c_big, s_big = jnp.cos(0.5 * theta), jnp.sin(0.5 * theta) / theta
    c_small = 1.0 - theta_sq / 8.0 + theta_sq ** 2 / 384.0 - theta_sq ** 3 / 46080.0
    s_small = 0.5 - theta_sq / 48.0 + theta_sq ** 2 / 3840.0 - theta_sq ** 3 / 645120.0
    return jnp.where(small, c_small, c_big), jnp.where(small, s_small, s_big)


def quat_exp(phi):
    """Unit quaternion of the rotation vector phi (axis * angle): the exponential map.

    exp(φ) = (cos(|φ|/2), sin(|φ|/2) φ/|φ|), smooth at φ = 0 (thesis Ch. 5, rigid update).
    """
    c, s = _half_angle_terms(jnp.sum(phi * phi, axis=-1))
    return jnp.concatenate([c[..., None], s[..., None] * phi], axis=-1)


def quat_mul(a, b):
    """Hamilton product a ⊗ b."""
    aw, ax, ay, az = jnp.moveaxis(a, -1, 0)
    bw, bx, by, bz = jnp.moveaxis(b, -1, 0)
    return jnp.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def quat_rotate(q, v):
    """Rotate vector v by unit quaternion q: q ⊗ (0, v) ⊗ q*."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * jnp.cross(u, v)
    return v + w * t + jnp.cross(u, t)


def quat_rotate_inverse(q, v):
    """Rotate v by the inverse of unit quaternion q (world to body): q* ⊗ (0, v) ⊗ q."""
    w, u = q[..., :1], -q[..., 1:]
    t = 2.0 * jnp.cross(u, v)
    return v + w * t + jnp.cross(u, t)


def quat_to_mat(q):
    """3x3 rotation matrix of unit quaternion q."""
    w, x, y, z = jnp.moveaxis(q, -1, 0)
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], axis=-2)


def quat_integrate(q, omega, dt):
    """q+ = exp(dt ω) ⊗ q for a world-frame angular velocity ω (exact exponential map)."""
    return quat_mul(quat_exp(dt * omega), q)


def quat_normalize(q):
    """Project onto the unit sphere (removes rounding drift between steps)."""
    return q / jnp.sqrt(jnp.sum(q * q, axis=-1, keepdims=True))


def world_inertia(quat, inertia_body):
    """R diag(I) Rᵀ for each body: (..., 4), (..., 3) -> (..., 3, 3)."""
    rot = quat_to_mat(quat)
    return jnp.einsum("...ij,...j,...kj->...ik", rot, inertia_body, rot)


def world_inertia_inv(quat, inertia_body):
    """(R diag(I) Rᵀ)⁻¹ = R diag(1/I) Rᵀ, in closed form (no linear solve)."""
    return world_inertia(quat, 1.0 / inertia_body)


def tangent_basis(normal):
    """Two unit vectors completing the unit normal(s) (..., 3) to a right-handed basis.

    The helper axis is the world axis least aligned with n, so the basis is well conditioned
    everywhere (it is not continuous in n: use it only where any basis will do, e.g. for the
    isotropic friction rows of a dual solver). A zero normal gives zero tangents.
    """
    x_axis = jnp.broadcast_to(jnp.asarray([1.0, 0.0, 0.0], normal.dtype), normal.shape)
    y_axis = jnp.broadcast_to(jnp.asarray([0.0, 1.0, 0.0], normal.dtype), normal.shape)
    helper = jnp.where(jnp.abs(normal[..., :1]) < 0.6, x_axis, y_axis)
    t1 = safe_normalize(jnp.cross(normal, helper))
    return t1, jnp.cross(normal, t1)


def tree_finite(tree):
    """() bool: every float leaf of the pytree `tree` is finite (True for none)."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)
