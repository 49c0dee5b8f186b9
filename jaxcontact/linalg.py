"""Dense linear solves sized for the small systems of one step.

Up to `ELIMINATION_MAX` unknowns (two bodies) systems are eliminated with plain array
operations, unrolled column by column, which XLA fuses and vectorizes across a batch: on the
2-core CPU a 6 x 6 solve took 1.3 µs alone and 0.25 ms for 1,024 scenes, against 2.3 µs and
0.76 ms by LAPACK's Cholesky (a library call per matrix). Above it LAPACK wins by far: 48 x 48
took 10.6 µs against 70 µs alone, and 0.72 ms against 5.3 ms for 64 scenes (design note 57).
The step's Hessian is symmetric; where it is positive definite the elimination needs no
pivoting, and `solve_convexified` makes it so where it is not (`solve` pivots, for general
systems).
"""

import jax
import jax.numpy as jnp

# Up to this many unknowns solves eliminate in array operations, unrolled (module docstring).
ELIMINATION_MAX = 12


def _columns(n, eliminate, init):
    """init after eliminate(k, ·) for k = 0 .. n-1: unrolled up to `ELIMINATION_MAX`
    columns, a loop above (whose compiled size is constant in n)."""
    if n <= ELIMINATION_MAX:
        for k in range(n):
            init = eliminate(k, init)
        return init
    return jax.lax.fori_loop(0, n, eliminate, init)


def solve(a, b):
    """x with a x = b for one (n, n) matrix and an (n,) or (n, m) right-hand side."""
    n = a.shape[-1]
    if n > ELIMINATION_MAX:
        return jnp.linalg.solve(a, b)
    rhs = b if b.ndim == 2 else b[:, None]
    rows = jnp.arange(n)

    def eliminate(k, aug):
        p = jnp.argmax(jnp.where(rows >= k, jnp.abs(aug[:, k]), -1.0))
        return _gauss_jordan_step(aug, k, p)

    aug = _columns(n, eliminate, jnp.concatenate([a, rhs], axis=1))
    x = aug[:, n:]
    return x if b.ndim == 2 else x[:, 0]


def _gauss_jordan_step(aug, k, p, raise_pivot=0.0):
    """Step k of Gauss-Jordan elimination on the augmented matrix: rows k and p swapped, the
    pivot raised by `raise_pivot`, column k made the k-th unit vector."""
    if p is not None:   # (None: no exchange)
        rows = jnp.arange(aug.shape[0])
        aug = aug[jnp.where(rows == k, p, jnp.where(rows == p, k, rows))]
    aug = aug.at[k, k].add(raise_pivot)
    row = aug[k] / aug[k, k]
    aug = aug - aug[:, k][:, None] * row[None, :]
    return aug.at[k].set(row)


def inverse(a):
    """a⁻¹ of one small (n, n) matrix (one elimination against the identity)."""
    return solve(a, jnp.eye(a.shape[-1], dtype=a.dtype))


def solve_convexified(a, b, metric, weight=1.0):
    """(x, e): x solves (a + weight diag(e)) x = b for one (n, n) matrix a and an (n,) or
    (n, m) b, where e >= 0 is the diagonal the modified Cholesky factorization of Gill,
    Murray and Wright adds to make a symmetric a positive definite (Nocedal & Wright,
    Numerical Optimization, 2nd ed., Algorithm 3.4), computed during the same elimination.

    The pivots of a's elimination are raised to d_j = max(|c_jj|, θ_j²/β², δ), θ_j the
    largest entry below the pivot, which bounds the factor's entries by β. e = 0 where a is
    already positive definite enough (every pivot above δ and θ_j²/β² <= c_jj, which β² >=
    max |a_jj| guarantees), and a negative pivot is replaced by its magnitude, so a + diag(e)
    ≈ |a| along directions of negative curvature. Everything is done in the metric
    diag(metric) > 0 (on D^-1/2 a D^-1/2), so that degrees of freedom of very different
    scales, kg and kg m², are treated alike; δ = 1e3 eps of the largest entry.

    `weight` (0/1, may be traced, e.g. per scene of a batch) applies the modification: with
    1 there is no pivoting (a must be symmetric), with 0 x = a⁻¹ b with partial pivoting, as
    `solve`, and e is still returned. e is a constant under differentiation. One elimination
    in array operations that vectorize across a batch (no LAPACK eigensolver)."""
    n = a.shape[-1]
    scale = jax.lax.rsqrt(metric)
    s = scale[:, None] * a * scale[None, :]
    rhs = b if b.ndim == 2 else b[:, None]
    rhs = scale[:, None] * rhs
    eps = jnp.finfo(a.dtype).eps
    rows = jnp.arange(n)
    fixed = jax.lax.stop_gradient(s)
    off = jnp.max(jnp.where(rows[:, None] == rows[None, :], 0.0, jnp.abs(fixed)))
    gamma = jnp.max(jnp.abs(jnp.diagonal(fixed)))
    beta2 = jnp.maximum(jnp.maximum(gamma, off / max(1.0, (n * n - 1) ** 0.5)), eps)
    delta = 1e3 * eps * jnp.maximum(gamma + off, jnp.finfo(a.dtype).tiny)
    modify = jnp.asarray(weight) > 0

    def eliminate(k, carry):  # Gauss-Jordan: after step k, column k is the k-th unit vector
        aug, e = carry
        column = aug[:, k]
        theta = jnp.max(jnp.where(rows > k, jnp.abs(column), 0.0))
        pivot = aug[k, k]
        raised = jnp.maximum(jnp.maximum(jnp.abs(pivot), theta * theta / beta2), delta)
        shift = jax.lax.stop_gradient(raised - pivot)
        if isinstance(weight, (int, float)) and weight == 1:
            # the modification always applies: no pivoting, no row exchange in the program
            return _gauss_jordan_step(aug, k, None, shift), e.at[k].set(shift)
        p = jnp.argmax(jnp.where(rows >= k, jnp.abs(column), -1.0))
        p = jnp.where(modify, k, p)
        return _gauss_jordan_step(aug, k, p, weight * shift), e.at[k].set(shift)

    e = jnp.zeros((n,), a.dtype)
    if n > ELIMINATION_MAX:  # the shift by elimination, the solve by LAPACK
        _, e = _columns(n, eliminate, (s, e))
        x = solve(s + weight * jnp.diag(e), rhs)
    else:
        aug, e = _columns(n, eliminate, (jnp.concatenate([s, rhs], axis=1), e))
        x = aug[:, n:]
    x = scale[:, None] * x
    return (x if b.ndim == 2 else x[:, 0]), e * metric


def convexifying_shift(a, metric):
    """The diagonal e >= 0 that makes a symmetric (n, n) matrix a positive definite (the
    modified Cholesky factorization's, in the metric diag(metric): `solve_convexified`)."""
    return solve_convexified(a, jnp.zeros(a.shape[-1], a.dtype), metric)[1]


def cholesky_solve(a, b):
    """(x, ok): x solves a x = b for a symmetric positive definite (n, n) a by LAPACK's
    Cholesky factorization; ok is false where a is not positive definite (x is then not
    finite)."""
    # a is symmetric as assembled: LAPACK reads one triangle, no symmetrizing copy needed;
    # a failed factorization is NaN throughout, so its diagonal tells
    factor = jax.lax.linalg.cholesky(a, symmetrize_input=False)
    ok = jnp.all(jnp.isfinite(jnp.diagonal(factor, axis1=-2, axis2=-1)))
    return jax.scipy.linalg.cho_solve((factor, True), b), ok


def indefinite(a, floor=0.0):
    """Whether each symmetric (..., d, d) matrix plus diag(floor) (floor (..., d) or scalar)
    has an eigenvalue below -√eps max|a|: its Cholesky factorization with that shift fails (a
    positive semi-definite matrix's rounding, its null space included, passes)."""
    scale = jnp.sqrt(jnp.finfo(a.dtype).eps) * jnp.max(jnp.abs(a), axis=(-2, -1))
    shift = jnp.broadcast_to(scale[..., None] + floor, a.shape[:-1])
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return ~jnp.all(jnp.isfinite(jnp.linalg.cholesky(a + shift[..., None] * eye)), axis=(-2, -1))


def project_psd(a):
    """Each symmetric (..., d, d) matrix with its negative eigenvalues set to zero: the nearest
    positive semi-definite matrix in the Frobenius norm (LAPACK's eigh, about 10-20 µs per
    12 x 12 matrix on the 2-core CPU against 0.4 µs for `indefinite`'s Cholesky)."""
    w, v = jnp.linalg.eigh(a)
    return (v * jnp.maximum(w, 0.0)[..., None, :]) @ jnp.swapaxes(v, -1, -2)
