"""Linear solves of the step: dense elimination for small systems, bounded preconditioned Krylov
iterations on the block-sparse `Jacobian` for large ones (thesis §4.6.2, Fig. 15).

`dense(n, "auto")` is the rule Newton's directions and the implicit gradients use by default:
dense up to `DENSE_MAX` unknowns, Krylov above, so default settings scale with the number of
bodies. Each Krylov solve runs at most `iterations` iterations (`loop.iterate`): a `lax.scan` of that static length
by default, or with `early_exit` a `while_loop` that stops as soon as every scene of the batch
has its residual below `rtol` times its initial value. Either way an iterate freezes once its
residual is that small, and every division is guarded, so a batch under `vmap` runs in lock
step and a breakdown (a zero or negative curvature) stops the iteration at its last good
iterate; the two loop forms give the same answer.
- `cg`: preconditioned conjugate gradients (A symmetric positive definite).
- `cr`: preconditioned conjugate residuals: minimizes |b - A x| over the same Krylov space,
  so its residual decreases monotonically (the thesis's choice for contact systems).
- `bicgstab`: stabilized bi-conjugate gradients (van der Vorst) for non-symmetric A, two
  products with A per iteration: the exact, non-symmetric Jacobian of the step. Its
  residual is replaced by the true one every `_REPLACE` iterations, and it returns the
  iterate of smallest residual: in float32 the recursive residual drifts and the
  iterate can blow up near a breakdown (measured on a ball resting on cloth: 10 % of the
  directions had a true relative residual above 35, the README example converged on 69 % of
  its steps; with the replacement every step converged).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact.math import safe_div
from jaxcontact.solvers import loop, multilevel

# Up to this many unknowns (16 bodies) a dense factorization of the assembled Jacobian is
# cheaper than a Krylov solve; above it the O(n³) elimination loses (measured: see
# docs/benchmarks/step_cost.md).
DENSE_MAX = 96
METHODS = ("auto", "dense", "krylov")
PRECONDITIONERS = ("auto", "block_jacobi", "multilevel")


def dense(n: int, method: str) -> bool:
    """Whether a system of n unknowns is solved densely under `method`."""
    return method == "dense" or (method == "auto" and n <= DENSE_MAX)


def dense_solve(jacobian, rhs, transpose=False):
    """J x = b (or Jᵀ x = b) by elimination of the assembled dense J."""
    a = jacobian.dense()
    return linalg.solve(a.T if transpose else a, rhs)


def block_jacobi(jacobian, transpose=False):
    """v ↦ D⁻¹ v with D the block diagonal of J (or of Jᵀ): the preconditioner of every
    Krylov solve of the step."""
    inverse = jacobian.block_diagonal().inverse()
    if transpose:
        inverse = inverse.transpose()
    return inverse.apply


def preconditioner(jacobian, kind="auto", transpose=False):
    """v ↦ P v ≈ J⁻¹ v (or J⁻ᵀ v) for a Krylov solve with J. kind "block_jacobi":
    `block_jacobi`; "multilevel": a V-cycle over the meshes' coarse space
    (`solvers.multilevel`); "auto": multilevel where the Jacobian has a coarse space (a cloth
    of at least `aggregation.MIN_PARTICLES` particles, or a solver that asked for one), else
    block-Jacobi."""
    if kind not in PRECONDITIONERS:
        raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {kind!r}")
    if kind == "auto":
        kind = "block_jacobi" if jacobian.coarse is None else "multilevel"
    if kind == "block_jacobi":
        return block_jacobi(jacobian, transpose)
    if jacobian.coarse is None:
        raise ValueError("preconditioner='multilevel' needs a scene with solids or cloth "
                         "(it aggregates their mesh particles); this scene has none")
    return multilevel.preconditioner(jacobian, jacobian.coarse, transpose)


def cg(matvec, precond, b, iterations, rtol=1e-10, early_exit=False):
    """x ≈ A⁻¹ b by preconditioned conjugate gradients (precond applies P ≈ A⁻¹)."""
    z = precond(b)
    stop_at = (rtol * jnp.linalg.norm(b)) ** 2

    def body(carry):
        x, r, z, p, rz, done = carry
        ap = matvec(p)
        curvature = jnp.dot(p, ap)
        done = done | (curvature <= 0.0) | (jnp.dot(r, r) <= stop_at)
        alpha = jnp.where(done, 0.0, safe_div(rz, curvature))
        x, r = x + alpha * p, r - alpha * ap
        z_new = precond(r)
        rz_new = jnp.dot(r, z_new)
        p_new = z_new + safe_div(rz_new, rz) * p
        keep = lambda new, old: jnp.where(done, old, new)  # noqa: E731
        return (x, r, keep(z_new, z), keep(p_new, p), keep(rz_new, rz), done)

    init = (jnp.zeros_like(b), b, z, z, jnp.dot(b, z), jnp.zeros((), bool))
    return _run(body, init, iterations, early_exit)


def cr(matvec, precond, b, iterations, rtol=1e-10, early_exit=False):
    """x ≈ A⁻¹ b by preconditioned conjugate residuals (one product with A per iteration)."""
    z = precond(b)
    az = matvec(z)
    stop_at = (rtol * jnp.linalg.norm(b)) ** 2

    def body(carry):
        x, r, z, az, p, ap, zaz, done = carry
        q = precond(ap)
        denom = jnp.dot(ap, q)
        done = done | (denom <= 0.0) | (jnp.dot(r, r) <= stop_at)
        alpha = jnp.where(done, 0.0, safe_div(zaz, denom))
        x, r = x + alpha * p, r - alpha * ap
        z_new = z - alpha * q
        az_new = matvec(z_new)
        zaz_new = jnp.dot(z_new, az_new)
        beta = safe_div(zaz_new, zaz)
        keep = lambda new, old: jnp.where(done, old, new)  # noqa: E731
        return (x, r, keep(z_new, z), keep(az_new, az), keep(z_new + beta * p, p),
                keep(az_new + beta * ap, ap), keep(zaz_new, zaz), done)

    init = (jnp.zeros_like(b), b, z, az, z, az, jnp.dot(z, az), jnp.zeros((), bool))
    return _run(body, init, iterations, early_exit)


_REPLACE = 50  # BiCGSTAB iterations between replacements of its residual by b - A x


def bicgstab(matvec, precond, b, iterations, rtol=1e-10, early_exit=False):
    """x ≈ A⁻¹ b by right-preconditioned BiCGSTAB (A need not be symmetric). Every `_REPLACE`
    iterations the recursively updated residual is replaced by the true one, b − A x (one
    more product; the iteration goes on with its search directions), and the iterate
    returned is the one of smallest residual seen: in float32 the recursive residual drifts
    from b − A x, and BiCGSTAB's residual is not monotone."""
    stop_at = (rtol * jnp.linalg.norm(b)) ** 2
    one = jnp.ones((), b.dtype)

    def body(carry):
        x, r, p, v, rho, alpha, omega, best, best_rr, done = carry
        rho_new = jnp.dot(b, r)          # the fixed shadow residual r̂ = r0 = b (x0 = 0)
        done = done | (jnp.dot(r, r) <= stop_at) | (rho_new == 0.0)
        beta = safe_div(rho_new, rho) * safe_div(alpha, omega)
        p_new = r + beta * (p - omega * v)
        y = precond(p_new)
        v_new = matvec(y)
        alpha_new = safe_div(rho_new, jnp.dot(b, v_new))
        s = r - alpha_new * v_new
        z = precond(s)
        t = matvec(z)
        omega_new = safe_div(jnp.dot(t, s), jnp.dot(t, t))
        x_new = x + alpha_new * y + omega_new * z
        r_new = s - omega_new * t
        ok = ~done & jnp.all(jnp.isfinite(x_new))
        keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        rr_new = jnp.dot(r_new, r_new)
        better = ok & (rr_new < best_rr)
        return (keep(x_new, x), keep(r_new, r), keep(p_new, p), keep(v_new, v),
                keep(rho_new, rho), keep(alpha_new, alpha), keep(omega_new, omega),
                jnp.where(better, x_new, best), jnp.where(better, rr_new, best_rr),
                done | ~ok)

    def cycle(carry):
        # the true residual of the iterate replaces the recursive one, and of the best
        # iterate corrects its recorded norm (the recursion's estimate of it may have drifted)
        x, _, p, v, rho, alpha, omega, best, _, done = carry
        r = b - matvec(x)
        rr = jnp.dot(r, r)
        r_best = b - matvec(best)
        rr_best = jnp.dot(r_best, r_best)
        best, rr_best = jax.tree.map(lambda a, c: jnp.where(rr < rr_best, a, c),
                                     (x, rr), (best, rr_best))
        done = done | (rr_best <= stop_at)
        carry = (x, r, p, v, rho, alpha, omega, best, rr_best, done)
        return loop.iterate(body, carry, length, early_exit, lambda c: c[-1])

    zero = jnp.zeros_like(b)
    init = (zero, b, zero, zero, one, one, one, zero, jnp.dot(b, b), jnp.zeros((), bool))
    # cycles of `_REPLACE` iterations (one of `iterations` if fewer): at most `iterations`
    # rounded up to whole cycles
    length = min(_REPLACE, iterations)
    cycles = -(-iterations // length)
    return loop.iterate(cycle, init, cycles, early_exit, lambda c: c[-1])[-3]


SOLVERS = {"cg": cg, "cr": cr, "bicgstab": bicgstab}


def _run(body, init, iterations, early_exit):
    """The solution x (first entry of the carry) after the bounded loop; the carry's last entry
    says the iteration has stopped (converged or broken down)."""
    return loop.iterate(body, init, iterations, early_exit, lambda carry: carry[-1])[0]
