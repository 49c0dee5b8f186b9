"""Dense linear solves sized for the small systems of one step.

XLA's CPU LU is a LAPACK call per matrix; under `vmap` over thousands of scenes with 6N x 6N
systems that is one library call per scene per Newton iteration, which dominates run time.
For small systems we eliminate with plain array operations instead, which XLA vectorizes
across the batch. No pivoting: the step's Jacobian is M + Δt² K + Δt D (+ small lag terms),
whose symmetric part is positive definite, and Gaussian elimination without pivoting is
stable for such matrices; fast rotations make the exact Jacobian's symmetric part indefinite,
though, so rows are pivoted (partial pivoting, by a gather per column). A singular matrix
yields non-finite values, which the solvers report.
"""

import jax
import jax.numpy as jnp

# Above this size the O(n³) elimination loses to LAPACK even with the call overhead.
_MAX_ELIMINATION = 96


def solve(a, b):
    """x with a x = b for one (n, n) matrix and an (n,) or (n, m) right-hand side."""
    n = a.shape[-1]
    if n > _MAX_ELIMINATION:
        return jnp.linalg.solve(a, b)
    rhs = b if b.ndim == 2 else b[:, None]
    rows = jnp.arange(n)

    def eliminate(k, aug):  # Gauss-Jordan: after step k, column k is the k-th unit vector
        column = jnp.abs(aug[:, k])
        p = jnp.argmax(jnp.where(rows >= k, column, -1.0))
        swap = jnp.where(rows == k, p, jnp.where(rows == p, k, rows))
        aug = aug[swap]
        row = aug[k] / aug[k, k]
        aug = aug - aug[:, k][:, None] * row[None, :]
        return aug.at[k].set(row)

    # a loop, not unrolled: the compiled size stays constant in n
    aug = jax.lax.fori_loop(0, n, eliminate, jnp.concatenate([a, rhs], axis=1))
    x = aug[:, n:]
    return x if b.ndim == 2 else x[:, 0]


def inverse(a):
    """a⁻¹ of one small (n, n) matrix (one elimination against the identity)."""
    return solve(a, jnp.eye(a.shape[-1], dtype=a.dtype))


def absolute(a, metric):
    """|A|: the symmetric (n, n) matrix a with its eigenvalues replaced by their absolute
    values, in the metric diag(metric) (eigenvalues of D^-1/2 A D^-1/2, D = diag(metric) > 0,
    so that degrees of freedom of very different scales, kg and kg m², are compared fairly).
    Eigenvalues below 1e3 eps of the largest are raised to that level. Positive definite, and
    equal to a where a already is: the Newton step on |A| is the saddle-free step of a
    non-convex quadratic model (Dauphin et al. 2014), which descends on it. The correction
    is added to a, not rebuilt from the eigenvectors, so entries that need none keep their
    precision in float32."""
    scale = jax.lax.rsqrt(metric)
    values, vectors = jnp.linalg.eigh(scale[:, None] * a * scale[None, :])
    low = 1e3 * jnp.finfo(a.dtype).eps * jnp.max(jnp.abs(values))
    lift = (vectors * (jnp.maximum(jnp.abs(values), low) - values)[None, :]) @ vectors.T
    return a + lift / (scale[:, None] * scale[None, :])
