"""Newton's method on the step's potential Φ with an exact line search (SAP, Castro, Permenter,
Han 2022, Sec. VI; Theorem 1: it converges from any start where H is positive definite): each
iteration takes d = -H⁻¹ ∇Φ(u), H = ∇²Φ(u) (joints, limits: Gauss-Newton parts), then
minimizes φ(α) = Φ(u + α d) from α = 1 by φ's slopes alone (resolved where Φ's changes are
not; the whole step α = 1 on a looser slope test than the search's other points). Solids' indefinite element Hessians are projected to PSD (design note 60); where H is
still indefinite the dense solve adds the modified Cholesky diagonal, CG takes |pᵀHp| (note 57).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact import validate as check
from jaxcontact.solvers import base, linear, loop, tolerances

LINEAR_SOLVERS = ("auto", "dense", "cg")


class NewtonCarry(NamedTuple):
    """The iterate, ∇Φ there, and the last direction taken (inf before the first)."""
    u: jax.Array
    g: jax.Array
    d: jax.Array


@dataclasses.dataclass(frozen=True)
class Newton(base.Solver):
    """Newton's method with an exact line search on Φ.

    Attributes:
      iterations: static cap of Newton iterations (most steps take 1-4).
      line_search: most evaluations of φ' per line search (1 = always the full step).
      linear: "dense" (elimination), "cg" (preconditioned conjugate gradients, inexact
        Newton) or "auto" (default: "dense" up to `tolerances.DENSE_MAX` unknowns, or
        `DENSE_MAX_RIGID` for rigid bodies only).
      preconditioner: "block_jacobi", "multilevel" (scenes with meshes) or "auto" (default:
        multilevel from `aggregation.MIN_PARTICLES` cloth particles).
    """
    line_search: int = 16
    linear: str = "auto"
    preconditioner: str = "auto"

    def __post_init__(self):
        super().__post_init__()
        check.integer_setting(self, "line_search")
        check.choice("preconditioner", self.preconditioner, linear.PRECONDITIONERS)
        check.choice("linear", self.linear, LINEAR_SOLVERS)

    def method(self, n: int, rigid: bool = False) -> str:
        """The linear solver of directions for n unknowns, `rigid` if all are rigid bodies'
        ("auto" resolved)."""
        return self.linear if self.linear != "auto" else (
            "dense" if linear.dense(n, "auto", rigid) else "cg")

    def start(self, problem, u0, args):
        u, g = super().start(problem, u0, args)
        return NewtonCarry(u, g, jnp.full_like(u, jnp.inf))

    def residual(self, problem, carry, args):
        # the last Newton step, or M⁻¹ ∇Φ where smaller (`solvers.base`)
        scaled = problem.mass(args).solve(carry.g)
        return jnp.where(jnp.max(jnp.abs(scaled)) <= jnp.max(jnp.abs(carry.d)), scaled, carry.d)

    def direction(self, hessian, g, args):
        """d = -H⁻¹ g (module docstring), dense or by preconditioned conjugate gradients."""
        hessian = hessian.projected(lambda *a: loop.where_needed(*a, branch=self.loops_exit_early))
        if self.method(hessian.size, linear.rigid_only(hessian)) == "dense":
            a, metric = hessian.dense(), hessian.diagonal.diagonal()
            if hessian.size <= linalg.ELIMINATION_MAX:
                return linalg.solve_convexified(a, -g, metric)[0]
            d, ok = linalg.cholesky_solve(a, -g)
            if hessian.convex:
                return d
            # not positive definite: the modified factorization, only where a scene needs it
            return loop.where_needed(~ok, lambda op: linalg.solve_convexified(*op)[0], d,
                                     (a, -g, metric), branch=self.loops_exit_early)
        cap = self.krylov_iterations or tolerances.KRYLOV_RIGID   # `step` sets it per scene
        precond = linear.preconditioner(hessian, self.preconditioner)
        d = linear.cg(hessian.matvec, precond, -g, cap, tolerances.FORCING,
                      self.loops_exit_early, absolute=True)
        # a direction that does not descend: the preconditioned gradient does
        return jnp.where(jnp.dot(g, d) < 0.0, d, -precond(g))

    def search(self, problem, u, d, slope, args):
        """α minimizing φ(α) = Φ(u + α d) from α = 1, φ'(0) = `slope`: φ'(α) = 0 in a bracket
        (stepping out until found) by Newton's step where inside, else the Illinois secant, and
        bisection where the bracket has not halved in two points (Brent's; design note 57)."""
        if self.line_search == 1:
            return jnp.ones_like(slope)
        enough = tolerances.LINE_TOL * jnp.abs(slope)
        whole = tolerances.FULL_STEP_TOL * jnp.abs(slope)

        def body(carry):
            alpha, lo, hi, s_lo, s_hi, width, before, last, done = carry
            s, c = problem.along(u, d, alpha, args)
            # the whole step is taken on a looser test than the points of a search
            first = (alpha == 1.0) & (lo == 0.0)
            met = jnp.abs(s) <= jnp.where(first, whole, enough)
            below = s < 0.0
            # Illinois: an end kept twice in a row has its slope halved for the secant
            again = below == last
            s_lo = jnp.where(below, s, jnp.where(again, 0.5 * s_lo, s_lo))
            s_hi = jnp.where(below, jnp.where(again, 0.5 * s_hi, s_hi), s)
            lo, hi = jnp.where(below, alpha, lo), jnp.where(below, hi, alpha)
            bracketed = jnp.isfinite(hi)
            newton = alpha - s / jnp.where(c > 0.0, c, 1.0)
            inside = (c > 0.0) & (newton > lo) & (newton < hi)
            # (hi is inf until bracketed, and both slopes are 0 at the answer: kept out of the
            # arithmetic, whose unused branches would carry inf or 0/0 into unrolled gradients)
            top = jnp.where(bracketed, hi, lo)
            rise = jnp.where(bracketed & (s_hi > s_lo), s_hi - s_lo, 1.0)
            secant = lo - s_lo * (top - lo) / rise
            new = jnp.where(inside, newton, secant)
            new = jnp.where(bracketed & (hi - lo > 0.5 * before), 0.5 * (lo + top), new)
            new = jnp.where(bracketed & (s_hi > -tolerances.LINE_STEEP * s_lo),
                            lo + 0.1 * (top - lo), new)   # steep: a tenth into the bracket
            # no upper end yet: step out
            new = jnp.where(bracketed, new, jnp.where(inside, jnp.maximum(newton, 1.5 * alpha),
                                                      2.0 * alpha))
            keep = done | met
            # a bracket this narrow: take the point chosen in it without evaluating φ' there
            narrow = ~keep & bracketed & (hi - lo <= tolerances.LINE_WIDTH * hi)
            keep = keep | narrow
            return (jnp.where(keep & ~narrow, alpha, new), lo, hi, s_lo, s_hi,
                    jnp.where(keep, width, hi - lo), jnp.where(keep, before, width), below,
                    keep)

        inf = jnp.full_like(slope, jnp.inf)
        # a direction that does not descend is rounding noise at the answer: take it whole
        init = (jnp.ones_like(slope), jnp.zeros_like(slope), inf, slope, inf, inf, inf,
                jnp.asarray(True), slope >= 0.0)
        alpha, lo, *_, done = loop.iterate(body, init, self.line_search,
                                           self.loops_exit_early, lambda c: c[-1])
        # out of evaluations: the last point known to lie below the minimizer (φ decreased)
        return jnp.where(done, alpha, lo)

    def iteration(self, problem, carry, args):
        u, g, _ = carry
        _, hessian = problem.hessian(u, args, "newton")
        d = self.direction(hessian, g, args)
        alpha = self.search(problem, u, d, jnp.dot(g, d), args)
        step = alpha * d
        # moved: a step above the rounding of u's largest entry (else at its precision)
        moved = jnp.max(jnp.abs(step)) > jnp.finfo(u.dtype).eps * jnp.max(jnp.abs(u))
        return NewtonCarry(u + step, problem.gradient(u + step, args), d), moved
