"""Quaternions, the exponential map and NaN-safe primitives.

Every norm, normalization and division here is finite in value *and* gradient at zero: the
unsafe operand is swapped for a placeholder inside the function's smooth domain before the
operation ("double where"), and functions of |x| that are smooth in |x|² are written in |x|²
with a series near zero, so that their Hessians are right at zero too (Newton needs them).
Quaternions are (w, x, y, z) and rotate body to world.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np


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


def _horner(coefficients, t):
    """Σ_n coefficients[n] tⁿ (at least two coefficients), by Horner's rule."""
    total = coefficients[-1] * t + coefficients[-2]
    for a in coefficients[-3::-1]:
        total = total * t + a
    return total


def _half_angle_terms(theta_sq):
    """cos(θ/2) and sin(θ/2)/θ as smooth functions of θ², exact to float64 rounding.

    A series is used below θ² = 1e-4, to θ⁶: its truncation error (θ⁸ terms) is < 1e-21.
    """
    small = theta_sq < 1e-4
    t2 = jnp.where(small, 1.0, theta_sq)
    theta = jnp.sqrt(t2)
    c_big, s_big = jnp.cos(0.5 * theta), jnp.sin(0.5 * theta) / theta
    c_small = _horner((1.0, -1.0 / 8.0, 1.0 / 384.0, -1.0 / 46080.0), theta_sq)
    s_small = _horner((0.5, -1.0 / 48.0, 1.0 / 3840.0, -1.0 / 645120.0), theta_sq)
    return jnp.where(small, c_small, c_big), jnp.where(small, s_small, s_big)


# sin(θ/2)/θ = Σ_n a_n (θ²)^n, a_n = (-1)^n / (2^(2n+1) (2n+1)!), to n = 8: below θ² = 1 the
# first term left out is under 1e-21 of the derivatives `_half_angle_slopes` forms from it
_SINC_SERIES = tuple((-1) ** n / (2 ** (2 * n + 1) * math.factorial(2 * n + 1))
                     for n in range(9))


def _half_angle_slopes(theta_sq, c, s):
    """s' and s'' of s = sin(θ/2)/θ as functions of t = θ² (c = cos(θ/2), s: the values of
    `_half_angle_terms`); cos(θ/2)' = -s/4 and cos(θ/2)'' = -s'/4 follow from them.

    Closed forms s' = (c - 2s)/(4t), s'' = -(s/4 + 6 s')/(4t) above t = 1, where their
    cancellation costs at most about one digit; the series below, where the closed forms
    cancel to O(t)."""
    small = theta_sq < 1.0
    t = jnp.where(small, 1.0, theta_sq)
    a = _SINC_SERIES
    slope_small = _horner([n * a[n] for n in range(1, len(a))], theta_sq)
    bend_small = _horner([n * (n - 1) * a[n] for n in range(2, len(a))], theta_sq)
    slope_big = (c - 2.0 * s) / (4.0 * t)
    bend_big = -(0.25 * s + 6.0 * slope_big) / (4.0 * t)
    return jnp.where(small, slope_small, slope_big), jnp.where(small, bend_small, bend_big)


def quat_integrate_derivatives(q, omega, dt):
    """q+ = exp(Δt ω) ⊗ q (`quat_integrate`) and its first two derivatives in ω, in closed
    form: (..., 4), (..., 4, 3), (..., 4, 3, 3).

    With φ = Δt ω, t = |φ|², e(φ) = (c, s φ), c = cos(|φ|/2), s = sin(|φ|/2)/|φ| as functions
    of t (`_half_angle_terms`, `_half_angle_slopes`):
      ∂e/∂φ:   ∂c = -(s/2) φᵀ,  ∂(s φ_a)/∂φ_j = s δ_aj + 2 s' φ_a φ_j
      ∂²e/∂φ²: ∂²c = -(s/2) I - s' φφᵀ,
               ∂²(s φ_a)/∂φ_j∂φ_l = 2 s' (δ_aj φ_l + δ_al φ_j + δ_jl φ_a) + 4 s'' φ_a φ_j φ_l
    and q+ is linear in e (right product with q). Exact where the exponential map's own
    derivatives are, and smooth: derivatives of these (unrolled gradients) are exact too."""
    phi = dt * omega
    theta_sq = jnp.sum(phi * phi, axis=-1)
    c, s = _half_angle_terms(theta_sq)
    slope, bend = _half_angle_slopes(theta_sq, c, s)
    c, s, slope, bend = (a[..., None, None] for a in (c, s, slope, bend))
    eye = jnp.eye(3, dtype=phi.dtype).reshape((1,) * (phi.ndim - 1) + (3, 3))
    outer = phi[..., :, None] * phi[..., None, :]
    d_vec = s * eye + 2.0 * slope * outer
    d_exp = jnp.concatenate([-0.5 * s * phi[..., None, :], d_vec], axis=-2)
    dd_scalar = -0.5 * s * eye - slope * outer
    sym = (eye[..., :, :, None] * phi[..., None, None, :]
           + eye[..., :, None, :] * phi[..., None, :, None]
           + eye[..., None, :, :] * phi[..., :, None, None])
    dd_vec = 2.0 * slope[..., None] * sym + 4.0 * bend[..., None] * (
        phi[..., :, None, None] * outer[..., None, :, :])
    dd_exp = jnp.concatenate([dd_scalar[..., None, :, :], dd_vec], axis=-3)
    value = quat_mul(jnp.concatenate([c[..., 0], s[..., 0] * phi], axis=-1), q)
    # the right product with q as a matrix: its columns are the basis quaternions times q
    basis = jnp.eye(4, dtype=q.dtype).reshape((1,) * (q.ndim - 1) + (4, 4))
    right = jnp.swapaxes(quat_mul(basis, q[..., None, :]), -1, -2)
    jac = jnp.sum(right[..., :, :, None] * d_exp[..., None, :, :], axis=-2)
    hess = jnp.sum(right[..., :, :, None, None] * dd_exp[..., None, :, :, :], axis=-3)
    return value, dt * jac, dt * dt * hess


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


def _rotation_table():
    """C (4, 4, 9) with R(q) = I + Σ_kl q_k q_l C_kl: the rotation matrix's entries
    (row-major) as quadratic forms of q = (w, x, y, z), e.g. R₀₀ = 1 - 2 (y² + z²),
    R₀₁ = 2 (x y - w z); each entry's two terms as (coefficient, k, l)."""
    entries = (((-2, 2, 2), (-2, 3, 3)), ((2, 1, 2), (-2, 0, 3)), ((2, 1, 3), (2, 0, 2)),
               ((2, 1, 2), (2, 0, 3)), ((-2, 1, 1), (-2, 3, 3)), ((2, 2, 3), (-2, 0, 1)),
               ((2, 1, 3), (-2, 0, 2)), ((2, 2, 3), (2, 0, 1)), ((-2, 1, 1), (-2, 2, 2)))
    table = np.zeros((4, 4, 9))
    for entry, terms in enumerate(entries):
        for coefficient, k, m in terms:
            table[k, m, entry] += coefficient
    return table


_ROTATION = _rotation_table()


def quat_to_mat(q):
    """3x3 rotation matrix of unit quaternion q: I + Σ_kl q_k q_l C_kl (`_ROTATION`), the
    products formed at once, so that its derivatives stay a handful of operations in the
    step's program."""
    lead = (1,) * (q.ndim - 1)
    outer = (q[..., :, None] * q[..., None, :])[..., None]
    entries = jnp.sum(outer * _ROTATION.astype(q.dtype).reshape(lead + (4, 4, 9)),
                      axis=(-3, -2))
    return jnp.eye(3, dtype=q.dtype).reshape(lead + (3, 3)) + entries.reshape(
        q.shape[:-1] + (3, 3))


def quat_to_mat_numpy(q):
    """`quat_to_mat` of one quaternion (4,) in NumPy float64, from the same table (scene
    building, which must not depend on JAX's precision setting)."""
    q = np.asarray(q, np.float64)
    return np.eye(3) + np.einsum("k,l,kle->e", q, q, _ROTATION).reshape(3, 3)



def mat_to_quat_numpy(rot):
    """Unit quaternion (w, x, y, z) of a proper rotation matrix (3, 3), in NumPy: the inverse
    of `quat_to_mat_numpy` (largest-pivot method)."""
    trace = np.trace(rot)
    k = int(np.argmax([trace, rot[0, 0], rot[1, 1], rot[2, 2]]))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        q = [w, (rot[2, 1] - rot[1, 2]) / (4 * w), (rot[0, 2] - rot[2, 0]) / (4 * w),
             (rot[1, 0] - rot[0, 1]) / (4 * w)]
    else:
        i, j, l = k - 1, k % 3, (k + 1) % 3
        v = 0.5 * np.sqrt(max(1.0 + rot[i, i] - rot[j, j] - rot[l, l], 0.0))
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (rot[l, j] - rot[j, l]) / (4 * v)
        q[1 + i] = v
        q[1 + j] = (rot[j, i] + rot[i, j]) / (4 * v)
        q[1 + l] = (rot[l, i] + rot[i, l]) / (4 * v)
    q = np.asarray(q)
    return q / np.linalg.norm(q)

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
