"""Newton's method on g(u) = ∂Φ/∂u (u; u) = 0, globalized by lag phases (design note 16b).

g is the gradient of the step's potential Φ(·; ū) at ū = u, where the lag ū carries the
contact frame and the friction bound (thesis Eq. 132). Its exact Jacobian J = ∂g/∂u
(`Problem.linearize`: local Jacobians assembled block-sparse; dense elimination for small
systems, block-Jacobi preconditioned BiCGSTAB for large ones, `linear="auto"` picks by size)
is not symmetric, so the Newton direction -J⁻¹ g need not descend on any fixed function, and
a line search on Φ(·; u) chases a merit that moves with every accepted step. The iteration
therefore alternates two phases, per scene:

- Newton phase (ū = u): take the full exact step if it at least halves the residual
  max |M⁻¹ g| without raising Φ(·; ū), or if it reaches the tolerance: quadratic
  convergence wherever Newton works, which is almost every step. A full step that lowers
  the residual by less, but meets Armijo on Φ(·; ū), is taken as a step of the lag phase.
  Otherwise the longest shorter step that meets Armijo, up to Φ's staircase (below), is
  taken where it lowers the residual, and the phase stays Newton's.
- Lag phase (ū held): otherwise minimize the fixed, smooth function Φ(·; ū) by Newton steps
  on its Hessian H made positive definite. Dense: the diagonal of a modified Cholesky
  factorization in the mass metric, found in the elimination that solves for the step
  (`linalg.solve_convexified`). Krylov: H + τ M, the shift τ adapted from step to step
  (Levenberg-Marquardt in the mass metric: shrunk after a full step, raised past the
  negative curvature a non-descending direction met), and -M⁻¹ ∇₁Φ where even that does not
  descend. Clipping each element's local Hessian to positive semi-definite instead would
  distort the model wherever the mass outweighs an element's negative curvature (a spring
  compressed near zero length, the curvature of a contact), and the phase would converge
  only linearly there. A parallel backtracking line search follows. The full step is
  evaluated first, alone, since it settles most Newton-phase iterations (design note 34);
  where it does not, the other step lengths of `Newton.steps` are tried at once, one
  batched evaluation of the change of Φ(·; ū) (`Problem.merit_change`: formed without Φ's
  large terms, so float32 resolves it), and the
  longest step meeting the Armijo condition with at least half the best decrease found is
  taken (design note 16c). Every step descends, so the phase cannot wander.
  After a direction that needed a step of 1/256 or less, or found no decrease, the next lag
  direction takes friction's curvature reweighted (thesis Eq. 136: ψ'/|e| along the slip
  too, where the exact Hessian has none): a direction that ignores the kink of a contact
  going from slip to stick overshoots it, and the line search's coarse lengths then creep
  towards it (or cycle), while the reweighted step lands short of the kink and converges to
  it (design note 16e). After a longer step the next direction is exact again: its steps
  converge fast where contacts do slip.
  Where a lag step was cut to 1/4 or less, the next direction minimizes the row model of
  Φ(·; ū) instead (`problem.RowModel`: every row's error linearized at u, its law kept
  whole; `minimize_row_model`: dense elimination, or conjugate gradients on its
  block-sparse form with Krylov directions), which holds the contacts that only touch
  after the step, whose curvature the Hessian at u lacks (design notes 16d, 24), and the
  slip-stick kink, by the reweighted curvature (with Krylov directions in scenes without
  solids or cloth only: `uses_row_model`). With Krylov directions so does the first lag
  direction after a refused Newton step (its direction is blind to the same contacts;
  without this a pile of spheres cycles between the phases: design note 47).
  It is evaluated only for the scenes of a batch that need it (`loop.where_needed`).
  Once the lag-held residual ∇₁Φ(u; ū) is below a tenth of the true one, the lag is
  refreshed (ū ← u) and the next iteration tries Newton again.
- Near the root (within `_NEAR_ROOT` tolerances), in either phase, the full step is taken
  if it halves the residual, whatever Φ does: the changes of Φ there are below its
  rounding, and in float32 the configuration's rounding makes Φ a staircase along the step
  (design note 35). So is a full step whose change of Φ is within that staircase, what one
  rounding unit of the configuration moves Φ's nonlinear terms by (design note 39). A
  lag-phase step so taken refreshes the lag.

- Residual phase (rigid float64 scenes, exact Newton directions: dense or BiCGSTAB; design
  notes 43, 51): a step that the two phases have not brought to its root in
  `residual_after` iterations (20) hands over to steps judged by the residual's size
  f = ½ gᵀ M⁻¹ g(u; ū = u) alone, until the cap of `iterations` + `residual_iterations`, from
  the iterate of the smallest f seen (the phases that circle a root can leave the last one
  far from it). The exact Newton direction d = -J⁻¹ g
  descends on f (∇f·d = -2 f), so the full step is taken where it lowers f by Armijo's
  rule; else the lowest f among the shorter steps along d and, with dense directions,
  Levenberg-Marquardt's (Jᵀ M⁻¹ J + λ diag M) p = -Jᵀ M⁻¹ g (λ shrunk after a full Newton
  step or a step of its own that lowers f, raised otherwise). f is one fixed function, so
  the phase cannot cycle as the alternation of Φ(·; ū) and ū can: in a pile of spheres the
  two phases circled a root that damped Newton steps on f reach in 20-30 iterations, and
  where a tipping box's friction makes the residual a long curved valley,
  Levenberg-Marquardt's steps follow it. Where no root exists it ends at the smallest
  residual it finds, reported unconverged.

The solver knows nothing of physics: it sees the functions of a
`jaxcontact.problem.Problem` and their arguments."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from jaxcontact import linalg
from jaxcontact.solvers import base, linear, loop

_FORCING_MIN, _FORCING_MAX = 1e-10, 1e-3  # relative accuracy of the Krylov directions
_ARMIJO = 1e-4  # sufficient decrease constant of the line search (standard choice)
_SHARE = 0.5  # a lag step must gain this share of the best decrease along its direction
_NOISE_ULPS = 64.0  # rounding noise of the merit, in ulps of its magnitude (measured ~10)
_NEWTON_CONTRACTION = 0.5  # a Newton step must shrink the residual by this factor
# residuals (in tolerances) below which a full step is judged by the residual alone, Φ's
# rounding hiding its change there; far from the root contact kinks make that unsafe
# (design notes 32, 35)
_NEAR_ROOT = 100.0
_SHIFT_MIN = 1e-2  # the smallest non-zero shift τ of a Krylov lag phase (in units of M)
_REWEIGHT_BELOW = 2.0 ** -8  # after a step this short (or none), the next lag step reweights
_LAG_REFRESH = 0.1  # refresh the lag once the lag-held residual is this fraction of the true one
_MODEL_ITERATIONS = 5  # most Newton steps on the row model per dense lag direction
_MODEL_LENGTHS = 16  # step lengths 1, 1/4, ..., 4^-15 tried on the row model
_MODEL_BELOW = 0.25  # after a lag step this short, the next lag direction is the model's
_MODEL_FORCING = 1e-4  # relative residual of the row model's Krylov directions
# Newton's directions are formed over the first 1/`_PREFIX_PARTS` of a large broad-phase
# term's slots where the live ones fit there: a 40-box chain's 520 slots, lying on the
# ground, cost 25 ms per row-model minimization and 3.2 ms per linearization and Krylov
# solve, 3.3 and 1.2 ms over 32 (design note 50)
_PREFIX_PARTS = 16
# the residual phase (rigid scenes, dense directions): Levenberg-Marquardt's damping starts
# at `_DAMPING_START` (in units of the mass), shrinks 10x after a step of it that lowers the
# residual's size and grows 10x after one that does not (design notes 43, 51)
_DAMPING_START, _DAMPING_MIN, _DAMPING_MAX = 1e-3, 1e-12, 1e30
LINEAR_SOLVERS = ("auto", "dense", "bicgstab", "cg", "cr")
KRYLOV_RIGID = 40    # the default cap of Krylov iterations per direction (`Newton`)
KRYLOV_MESHES = 400  # ... in scenes with solids or cloth


def minimize_row_model(row_model, metric, tol, early_exit=True,
                       iterations=_MODEL_ITERATIONS, lengths=_MODEL_LENGTHS, krylov=None,
                       preconditioner="auto"):
    """δ that approximately minimizes a `problem.RowModel` m (design notes 24, 47).

    Each step solves (A + Gᵀ C G) p = -∇m(δ), C the rows' Gauss-Newton curvatures at δ, and
    moves to the lowest of m(δ + 4^-k p), k < `lengths`. Dense (`krylov` None): the matrix
    assembled and made positive definite in the metric diag(`metric`) where it is not
    (`linalg.solve_convexified`: the energy terms of A need not be convex). Krylov
    (`krylov`: the cap of iterations): preconditioned conjugate gradients on its
    block-sparse form (`RowModel.curvature`), to a relative residual of `_MODEL_FORCING`;
    they stop at a direction of negative curvature with the last iterate, which descends on
    the model (Steihaug's truncation), and where that is none, p = -∇m(δ) / metric.
    Evaluating m costs no narrow phase (the rows are linear in δ), so many lengths are
    cheap: the free-flight direction of a body resting on its contacts must be cut to about
    1e-3 of its length, where the curvature of contacts that only touch after the step is
    absent from C at δ. Where m changes by less than its rounding, the full step is taken
    (near the answer m's decrease is below the rounding of the row energies it sums). At
    most `iterations` steps; with `early_exit`, none once |∇m| / metric <= tol."""
    steps = jnp.concatenate([0.25 ** jnp.arange(lengths), jnp.zeros(1)]).astype(metric.dtype)
    eps = jnp.finfo(metric.dtype).eps
    if krylov is None:
        row_model = row_model.dense()

    def direction(delta, gradient):
        if krylov is None:
            return linalg.solve_convexified(row_model.hessian(delta), -gradient, metric)[0]
        curvature = row_model.curvature(delta)
        p = linear.cg(curvature.matvec, linear.preconditioner(curvature, preconditioner),
                      -gradient, krylov, _MODEL_FORCING, early_exit)
        return jnp.where(jnp.any(p != 0.0), p, -gradient / metric)

    def iteration(carry):
        delta, gradient = carry
        p = direction(delta, gradient)
        trial = delta[None, :] + steps[:, None] * p[None, :]
        values, sizes = jax.vmap(row_model.change)(trial)   # the last one at δ itself
        value, values = values[-1], values[:-1]
        fuzz = _NOISE_ULPS * eps * (sizes[-1] + sizes[:-1])
        best = jnp.argmin(jnp.where(jnp.isfinite(values), values, jnp.inf))
        lower = values[best] < value - fuzz[best]
        level = jnp.isfinite(values[0]) & (values[0] <= value + fuzz[0])
        delta = jnp.where(lower, trial[best], jnp.where(level, trial[0], delta))
        return delta, row_model.gradient_at(delta)

    def done(carry):
        return jnp.all(jnp.abs(carry[1]) <= tol * metric)

    zero = jnp.zeros_like(metric)
    return loop.iterate(iteration, (zero, row_model.gradient_at(zero)), iterations, early_exit,
                        done)[0]


def _levenberg_marquardt(operands):
    """The residual phase's Levenberg-Marquardt direction p: (Jᵀ M⁻¹ J + λ diag M) p =
    -Jᵀ M⁻¹ g, for the dense exact Jacobian J, the mass M (`problem.BlockDiagonal`), r = M⁻¹ g
    and the damping λ (Levenberg-Marquardt on ½ gᵀ M⁻¹ g; Nocedal & Wright, Numerical
    Optimization, 2nd ed., §10.3)."""
    jac, mass, r, damping = operands
    normal = jac.T @ jax.vmap(mass.solve, in_axes=1, out_axes=1)(jac)
    return linalg.solve(normal + damping * jnp.diag(mass.diagonal()), -(jac.T @ r))


def _size(mass, g):
    """The residual phase's merit gᵀ M⁻¹ g (twice f): the residual's size in the metric of the
    mass. (|M⁻¹ g|², which weighs every DOF as the convergence test does, left a light
    tipping box and a sphere pile unconverged where this converges them: design note 51.)"""
    return jnp.dot(g, mass.solve(g))


@dataclasses.dataclass(frozen=True)
class Newton(base.Solver):
    """Newton solver with line search; dense or Krylov linear solves.

    Attributes:
      iterations: static cap of the Newton and lag phases (default 50; in scenes with a
        residual phase they hand over to it after `residual_after`). With `early_exit` the
        iterations a step does not need cost nothing; light bodies at large time steps need
        up to 30-50 at impacts and tipping, and some tipping steps need the residual phase
        (`residual_iterations`). `benchmarks/convergence.py`: 99.94 % of the grid's float64
        steps and 99.64 % of its float32 steps converge with the defaults (design notes 43,
        44, 51).
      patience: a scene's solve stops, `Result.STALLED`, after this many iterations (default
        12) that do not halve its residual once it is within `base.STALL_BAND` tolerances:
        float32 solves held at their rounding there (box_drop's resting boxes) would
        otherwise run to the cap. None: only the cap ends a solve.
      residual_iterations: iterations of the residual phase (module docstring) allowed
        beyond `iterations` (default 150; 0: none): the loop's cap is their sum (`cap`).
        Rigid float64 scenes with exact Newton directions (dense or BiCGSTAB) and loops that
        exit early only; elsewhere the cap is `iterations`. A step that the solver does not
        converge in its first `residual_after` iterations (default 20, at most `iterations`)
        enters it, from the iterate of the smallest residual seen. The tipping steps it
        converges took 45-130 iterations in all; a step without a root runs the whole cap.
        On the convergence grid float64 went from 99.88 % without it to 99.94 % (design
        notes 43, 51); the 400-sphere pile from 78 % of steps converged to 100 %.
      residual_after: iterations of the Newton and lag phases after which an unconverged
        step enters the residual phase, where it runs (default 20; `iterations` where
        smaller). Entering at 50 instead converged 98 % of the 400-sphere pile's steps with
        14 % more iterations, and 99.922 % of the grid's float64 steps (design note 51).
      line_search: number of step lengths tried per iteration (1 = always the full step).
      linear: how each direction is solved. "auto" (default): "dense" up to
        `linear.DENSE_MAX` unknowns (16 bodies), "bicgstab" above, so default settings scale
        with the number of bodies. "dense": elimination of the assembled exact Jacobian
        (quadratic convergence; O(n³)). "bicgstab": block-Jacobi preconditioned BiCGSTAB on
        products with the assembled block-sparse exact Jacobian (not symmetric); Newton's
        convergence is kept as far as the Krylov solve is accurate. "cg" / "cr": conjugate
        gradients / residuals (thesis §4.6.2) on the symmetric Hessian of Φ(·; ū) at ū = u
        (the lag terms of the exact Jacobian left out: linear convergence near sliding
        contacts).
      krylov_iterations: most Krylov iterations per direction. Each direction is solved to a
        linear residual of 0.1 tol, relative accuracy 1e-3 at most (inexact Newton): with
        `early_exit` the solve stops there, otherwise every iteration is paid. None
        (default): 40, or `KRYLOV_MESHES` (400) in scenes with solids or cloth, whose
        stiffness couples many particles (a ball on a 16 x 16 cloth needs about 200).
      preconditioner: of the Krylov solves. "auto" (default): "multilevel" in scenes with a
        cloth of at least `aggregation.MIN_PARTICLES` (1,000) particles, else
        "block_jacobi" (where it was measured to pay: design note 31). "block_jacobi": each
        block's diagonal block inverted. "multilevel": a V-cycle over aggregates of the mesh
        particles and their rigid motions (`solvers.multilevel`; scenes with solids or cloth
        only): two more products with the Jacobian per application, far fewer Krylov
        iterations on large meshes.
      tol, early_exit, ad, adjoint: see `jc.Solver` (`solvers.base.Solver`).
    """

    iterations: int = 50
    patience: int | None = 12
    residual_iterations: int = 150
    residual_after: int = 20
    line_search: int = 8
    carries_residual = True
    linear: str = "auto"
    krylov_iterations: int | None = None
    preconditioner: str = "auto"

    def __post_init__(self):
        super().__post_init__()
        base.check_int(self, "line_search")
        base.check_int(self, "residual_iterations", low=0)
        base.check_int(self, "residual_after")
        base.check_choice(self, "preconditioner", linear.PRECONDITIONERS)
        if self.krylov_iterations is not None:
            base.check_int(self, "krylov_iterations")
        base.check_choice(self, "linear", LINEAR_SOLVERS)

    def krylov_cap(self, model) -> int:
        """`krylov_iterations`, None resolved for `model`."""
        if self.krylov_iterations is not None:
            return self.krylov_iterations
        return KRYLOV_MESHES if model.has_meshes else KRYLOV_RIGID

    def method(self, n: int) -> str:
        """The linear solver of directions for n unknowns ("auto" resolved)."""
        if self.linear != "auto":
            return self.linear
        return "dense" if linear.dense(n, "auto") else "bicgstab"

    def has_residual_phase(self, model, n: int) -> bool:
        """Whether solves of `model`'s n unknowns may enter the residual phase: rigid float64
        scenes (no solids or cloth) whose directions are exact Newton ones (dense or
        BiCGSTAB: "cg" / "cr" solve the symmetric lagged Hessian, whose direction need not
        descend on the residual) and whose loops exit early (masked scans would pay its cap
        at every step; in float32 the normal equations of Levenberg-Marquardt's steps, which
        square J's condition number, lose the direction; design notes 43, 51)."""
        return (self.residual_iterations > 0 and self.method(n) in ("dense", "bicgstab")
                and self.loops_exit_early and not model.has_meshes
                and jnp.dtype(model.dt.dtype) == jnp.float64)

    def uses_row_model(self, model, n: int) -> bool:
        """Whether lag phases of `model`'s n unknowns take the row model's direction
        (`minimize_row_model`) after a short lag step, and with Krylov directions after a
        refused Newton step: dense directions, and Krylov ones in scenes without solids or
        cloth (their elastic energies make the model's curvature indefinite, where its
        conjugate gradients stop; the Hessian's shifted directions serve them better:
        design note 47)."""
        return self.method(n) == "dense" or not model.has_meshes

    def cap(self, args, n: int) -> int:
        extra = self.residual_iterations if self.has_residual_phase(args[0], n) else 0
        return self.iterations + extra

    def escalate(self, args, carry, used):
        if not self.has_residual_phase(args[0], carry[0].shape[0]):
            return carry
        # once `residual_after` iterations are spent: a step the other phases converge within
        # them is untouched (entering on a stall took float32 steps from lag phases that
        # converged). It starts from the iterate of the smallest residual seen
        # (f = ½ gᵀ M⁻¹ g): the lag and Newton phases that circle a root can leave the last
        # one far from it
        u, lag, newton, g, noise, tau, reweight, residual, damping, best = carry
        entering = (used >= min(self.residual_after, self.iterations)) & (residual == 0)
        pick = lambda a, b: jnp.where(entering, a, b)  # noqa: E731
        return (pick(best[0], u), pick(best[0], lag), pick(1.0, newton).astype(newton.dtype),
                pick(best[1], g), pick(best[2], noise), tau, pick(0.0, reweight).astype(
                    reweight.dtype), pick(1.0, residual).astype(residual.dtype), damping, best)

    def steps(self, dtype):
        """The step lengths tried: 2^-e with e = k + ⌊k²/8⌋, k < line_search (1, 1/2, 1/4,
        1/16, 1/64, 1/256, 1/1024, 1/8192 for 8): halving near the full step, then wider, so
        that a direction taken at the edge of a stiff contact (whose curvature it did not see)
        still finds a decrease; the Newton phase uses only the full step."""
        k = jnp.arange(self.line_search)
        return (0.5 ** (k + k * k // 8)).astype(dtype)

    def candidates(self, problem, u0, args):
        # u0 (the state's velocity: a warm start where contacts persist) and free flight
        # ũ + Δt g (the answer where nothing but gravity acts: a falling body's step then
        # needs no iteration)
        return jnp.stack([u0, problem.start(args)])

    def start(self, problem, points, grads, noises, args, tol):
        # (u, lag ū, phase: 1 Newton / 0 lag held, g(u), rounding noise of M⁻¹g(u), the lag
        # phase's shift τ (Krylov directions), 1 where the next lag direction reweights
        # friction, 1 in the residual phase, its damping λ): at free flight where it is
        # already converged, else at u0 (starting at
        # whichever had the smaller residual changed the path of steps that do not
        # converge: design note 18)
        flight_done, _ = self.converged(problem, grads[1], noises[1], args, tol)
        pick = jnp.where(flight_done, 1, 0)
        u, g, noise = points[pick], grads[pick], noises[pick]
        zero = jnp.zeros((), u.dtype)
        # the residual phase's start: the iterate of the smallest residual so far
        best = (u, g, noise) if self.has_residual_phase(args[0], u.shape[0]) else ()
        return (u, u, jnp.ones((), u.dtype), g, noise, zero, zero, zero,
                jnp.full((), _DAMPING_START, u.dtype), best), g, noise

    def measured(self, problem, carry, args):
        return carry[3], carry[4]

    def _direction(self, problem, u, lag, newton, tau, reweight, args, tol):
        """`_direction_over` args, or, where every live slot of the large broad-phase terms
        is in the first 1/`_PREFIX_PARTS` of them (`Problem.live_prefix`), over that prefix:
        the same direction without the empty slots' zero blocks (each scene's own choice;
        under vmap both run)."""
        prefix, fits = problem.live_prefix(args, _PREFIX_PARTS)
        over = functools.partial(self._direction_over, problem, u, lag, newton, tau, reweight,
                                 tol=tol)
        if prefix is None:
            return over(args)
        return jax.lax.cond(fits, lambda: over(prefix), lambda: over(args))

    def _direction_over(self, problem, u, lag, newton, tau, reweight, args, tol):
        """(∇₁Φ(u; ū), d, rounding floor of the residual at u, the next shift's need, the
        dense Jacobian or None).

        d ≈ -J⁻¹ ∇₁Φ, with J the exact Jacobian in the Newton phase (newton = 1; for "cg" /
        "cr" the Hessian of Φ(·; ū = u)) and in the lag phase the Hessian H of Φ(·; ū), with
        friction reweighted where `reweight` = 1, made positive definite (module docstring):
        dense, by the diagonal of a modified Cholesky factorization in the mass metric, and
        where `reweight` = 1 the minimizer of the row model instead;
        Krylov, as H + τ M with the shift τ adapted from step to step (Levenberg-Marquardt in
        the mass metric), and where that direction does not descend, -M⁻¹ ∇₁Φ / (1 + τ)."""
        method = self.method(u.shape[0])
        exact = jnp.zeros_like(newton) if method in ("cg", "cr") else newton
        g, jac = problem.linearize(u, args, exact, lag, (1.0 - exact) * reweight)
        mass = problem.mass(args)
        # how much the residual moves when u and the configuration are rounded: below that
        # it cannot be reduced
        # (|J| resolution bounds the configuration's share loosely: friction's stiffness at
        # stick reads u, not the configuration; `iteration` refines it where it decides)
        eps = jnp.finfo(u.dtype).eps
        scale = mass.inverse().magnitude()
        jac_abs = jac.magnitude()
        floor = (scale.apply(jac_abs.matvec(eps * jnp.abs(u))),
                 scale.apply(jac_abs.matvec(problem.resolution(args))))
        krylov = None if method == "dense" else self.krylov_cap(args[0])

        def model_direction(operands):
            return minimize_row_model(problem.row_model(*operands[:3]), *operands[3:],
                                      self.loops_exit_early, krylov=krylov,
                                      preconditioner=self.preconditioner)

        def row_model_instead(d):
            # lag phase after a short step (`reweight`): the minimizer of the row model
            # instead, where it is finite (evaluated only if some scene of a batch needs it)
            wanted = (newton == 0) & (reweight > 0)
            d_model = loop.where_needed(wanted, model_direction, d,
                                        (u, lag, args, mass.diagonal(), 0.1 * tol),
                                        branch=self.loops_exit_early)
            used = wanted & base.finite(d_model)
            return jnp.where(used, d_model, d), used

        if method == "dense":
            a = jac.dense()
            # lag phase: the (symmetric) Hessian of Φ(·; ū) made positive definite by the
            # diagonal of a modified Cholesky factorization in the mass metric, found in the
            # same elimination that solves for the direction
            lagged = 1.0 - exact
            a = a + lagged * 0.5 * (a.T - a)
            d, _ = linalg.solve_convexified(a, -g, mass.diagonal(), lagged)
            d, _ = row_model_instead(d)
            return g, d, floor, jnp.zeros((), u.dtype), a
        # lag phase: H + τ M (the mass is the Jacobian's block diagonal D)
        scale = 1.0 + (1.0 - newton) * jax.lax.stop_gradient(tau)
        jac = jac.replace(diagonal=jac.diagonal.replace(
            blocks=tuple(scale * b for b in jac.diagonal.blocks)))
        # inexact Newton (Eisenstat & Walker): solve only as far as the step needs, to a
        # residual of a tenth of the tolerance in the units of g (M tol), relative accuracy
        # at most 1e-3 far from the root and at least 1e-10 near it
        size = jnp.linalg.norm(mass.apply(jnp.broadcast_to(tol, g.shape)))
        rtol = jax.lax.stop_gradient(jnp.clip(0.1 * size / jnp.linalg.norm(g),
                                              _FORCING_MIN, _FORCING_MAX))
        d = linear.SOLVERS[method](jac.matvec, linear.preconditioner(jac, self.preconditioner), -g,
                                   self.krylov_cap(args[0]), rtol, self.loops_exit_early)
        model = (newton > 0) | (base.finite(d) & (jnp.dot(g, d) < 0.0))
        # where it does not descend, H + τ M has curvature c <= 0 along d (in units of M):
        # the next shift must exceed τ - c
        c = jnp.dot(d, jac.matvec(d)) / jnp.dot(d, mass.apply(d))
        need = jax.lax.stop_gradient(jnp.where(model | ~jnp.isfinite(c), 0.0, 2.0 * (tau - c)))
        d = jnp.where(model, d, -mass.solve(g) / scale)
        if not self.uses_row_model(args[0], u.shape[0]):
            return g, d, floor, need, None
        d, used = row_model_instead(d)
        return g, d, floor, jnp.where(used, 0.0, need), None

    def iteration(self, problem, carry, args, tol):
        """One iteration of the Newton, the lag or the residual phase (module docstring).

        Both phases evaluate the same program (a scene's phase is data, so a vmapped batch
        runs in lock step): one linearization and one direction; then the full step's merit
        Φ(·; ū) and gradient, which settle most Newton-phase iterations; only where they do
        not (the lag phase, a refused full step) the other L - 1 merits along the direction
        and the true and lag-held gradients at the point taken, evaluated for the scenes of a
        batch that need them (`loop.where_needed`, design note 34).
        """
        u, lag, newton, g, noise, tau, reweight, residual, damping, best = carry
        mass = problem.mass(args)
        r = mass.solve(g)
        # the residual phase takes the exact Jacobian at ū = u
        g_lag, direction, (floor_u, loose), need, jac = self._direction(
            problem, u, jnp.where(residual > 0, u, lag), jnp.maximum(newton, residual), tau,
            reweight, args, tol)
        phase = self.has_residual_phase(args[0], u.shape[0])
        floor = self._floor(problem, u, r, noise, floor_u, loose, args, tol)
        # the full step: its change of Φ(·; ū) and its true gradient
        full_point = u + direction
        change0, magnitude0 = problem.merit_change(u, lag, full_point[None, :], args)
        g_full, noise_full = problem.gradient_noise(full_point, args, full_point)
        # rounding noise of the comparison, relative to the magnitudes that change
        fuzz0 = _NOISE_ULPS * jnp.finfo(u.dtype).eps * magnitude0[0]
        slope = jnp.minimum(jnp.dot(g_lag, direction), 0.0)
        # Within `_NEAR_ROOT` tolerances of the root Φ cannot judge the full step and
        # the residual alone does (`full`, below; each step taken halves it, so steps cannot
        # cycle): near the root of a light, stiffly held cloth the slope was 1e-24 against
        # changes of +2e-20 from rounding alone (design note 32), and in float32 the
        # configuration's rounding makes Φ a staircase along the step, which refused full
        # steps that cut the residual 10x (design note 35)
        size = base.residual_norm(r)
        near = size <= _NEAR_ROOT * jnp.max(tol)
        # nor can Φ judge a change below its staircase: what one rounding unit of the
        # end-of-step configuration moves its terms that are not linear in u by (their
        # gradient ∇₁Φ - M(u - u_flight) times the resolution; design note 39)
        staircase = jnp.dot(jnp.abs(g_lag - mass.apply(u - problem.start(args))),
                            problem.resolution(args))
        near = near | (jnp.abs(change0[0]) <= staircase)
        merit_ok = (change0[0] <= fuzz0) | near
        r_full = base.residual_norm(mass.solve(g_full))
        # the full step is taken if it halves the residual without raising Φ(·; ū), or if it
        # reaches the tolerance whatever Φ does (there Φ changes by its rounding level, which
        # sums of large terms can push past our estimate of it)
        full = base.finite(g_full) & ((r_full <= jnp.max(tol)) | (
            merit_ok & (r_full <= _NEWTON_CONTRACTION * size)))
        # Newton phase, full step taken: the lag moves with it, the shift stays (reweight is
        # read only in the lag phase). Lag phase, near the root: the full step is judged by
        # the residual as in the Newton phase, and taken, it refreshes the lag (Newton
        # next); judged by Φ's staircase in float32, lag phases crept at 20-30 tolerances
        # until the cap (design note 35)
        settled = full & ((newton > 0) | near)
        if phase:
            settled = settled | (residual > 0)

        def moved_to(point, g, noise):
            # the carry's first seven at an accepted point: the lag moves with it, Newton next
            return (point, point, jnp.ones_like(newton), g, noise, tau, jnp.zeros_like(newton))

        taken = moved_to(full_point, g_full, noise_full)

        def search(operands):
            return self._search(problem, *operands)

        new, ok = loop.where_needed(
            ~settled, search, (taken, jnp.ones((), bool)),
            (carry[:7], args, tol, g_lag, direction, need, change0[0], fuzz0, slope, size,
             merit_ok & (r_full < size), staircase), branch=self.loops_exit_early)
        # a failed Newton direction (singular J) only hands over to the lag phase
        ok = (newton > 0) | (base.finite(direction) & ok)
        if not phase:
            return (*new, residual, damping, best), r, ok, noise, floor
        # residual phase: the full Newton step where it lowers f = ½ gᵀ M⁻¹ g by Armijo's
        # rule (the direction descends on f: ∇f·d = -2 f); else the lowest f among the
        # shorter Newton steps and (dense) Levenberg-Marquardt's step, its damping shrunk
        # after the full step or where its own step lowered f, and raised where not
        size0, size_full = jnp.dot(g, r), _size(mass, g_full)   # r = M⁻¹ g, above
        enough = base.finite(g_full) & (size_full <= (1.0 - 2.0 * _ARMIJO) * size0)

        def shorter(operands):
            u, g, noise, size0, direction, jac, damping, args = operands
            mass = problem.mass(args)
            steps = self.steps(u.dtype)[1:]
            trial = u[None, :] + steps[:, None] * direction[None, :]
            if jac is not None:
                # dense: Levenberg-Marquardt's step too
                lm = _levenberg_marquardt((jac, mass, mass.solve(g), damping))
                trial = jnp.concatenate([trial, (u + lm)[None, :]])
            grads, noises = jax.vmap(lambda v: problem.gradient_noise(v, args, v))(trial)
            sizes = jax.vmap(lambda g: _size(mass, g))(grads)
            sizes = jnp.where(jnp.isfinite(sizes), sizes, jnp.inf)
            pick = jnp.argmin(sizes)
            lower = sizes[pick] < size0
            lm_lower = (sizes[-1] < size0) if jac is not None else lower
            return (jnp.where(lower, trial[pick], u), jnp.where(lower, grads[pick], g),
                    jnp.where(lower, noises[pick], noise), lm_lower)

        u_r, g_r, noise_r, lm_lower = loop.where_needed(
            (residual > 0) & ~enough, shorter,
            (full_point, g_full, noise_full, jnp.ones((), bool)),
            (u, g, noise, size0, direction, jac, damping, args), branch=self.loops_exit_early)
        damping_r = jnp.where(lm_lower, jnp.maximum(_DAMPING_MIN, 0.1 * damping),
                              jnp.minimum(_DAMPING_MAX, 10.0 * damping))
        after = (*moved_to(u_r, g_r, noise_r), residual, damping_r)
        new = jax.tree.map(lambda a, b: jnp.where(residual > 0, a, b), after,
                           (*new, residual, damping))
        ok = ok | (residual > 0)
        lowest = base.finite(new[3]) & (_size(mass, new[3]) < _size(mass, best[1]))
        best = jax.tree.map(lambda a, b: jnp.where(lowest, a, b), (new[0], new[3], new[4]), best)
        return (*new, best), r, ok, noise, floor

    def _floor(self, problem, u, r, noise, floor_u, loose, args, tol):
        """The rounding floor of the residual r at u: floor_u (the rounding of u) plus the
        configuration's share, |M⁻¹| `configuration_floor`, evaluated only where it decides
        whether r is converged (above the plain level, within the loose bound |M⁻¹| |J|
        resolution); elsewhere the loose bound stands (design note 35)."""
        above = jnp.abs(r) > self.level(noise, tol)
        band = jnp.any(above) & jnp.all(
            ~above | (jnp.abs(r) <= base.FLOOR_MARGIN * (floor_u + loose)))

        def tight(operands):
            u, args = operands
            scale = problem.mass(args).inverse().magnitude()
            return scale.apply(problem.configuration_floor(u, args))

        return floor_u + loop.where_needed(band, tight, loose, (u, args),
                                           branch=self.loops_exit_early)

    def _search(self, problem, carry, args, tol, g_lag, direction, need, change0, fuzz0, slope,
                size, full_ok, staircase):
        """(the carry after the iteration, whether any step length gave a finite merit): the
        rest of `iteration`, where its full step alone does not settle it (the lag phase, or
        a Newton phase whose full step was refused)."""
        u, lag, newton, g, noise, tau, reweight = carry
        mass = problem.mass(args)
        steps = self.steps(u.dtype)
        # the shorter trial points, and the change of Φ(·; ū) at each (one batched evaluation)
        trial = u[None, :] + steps[:, None] * direction[None, :]
        if self.line_search > 1:
            rest, magnitude = problem.merit_change(u, lag, trial[1:], args)
            fuzz = _NOISE_ULPS * jnp.finfo(u.dtype).eps * magnitude
            change = jnp.concatenate([change0[None], rest])
            fuzz = jnp.concatenate([fuzz0[None], fuzz])
        else:
            change, fuzz = change0[None], fuzz0[None]
        finite = ~jnp.isnan(change) & (change < jnp.inf)
        armijo = finite & (change <= _ARMIJO * steps * slope + fuzz)
        # lag phase: the longest step meeting Armijo that gains at least half the largest
        # decrease of those tried (all were evaluated: at a kink of friction the full step
        # can land across it with barely any decrease, and cycle, where a shorter one
        # reaches the bottom), else the best one tried
        best = jnp.min(jnp.where(armijo, change, jnp.inf))
        lowest = jnp.argmax(armijo & (change <= _SHARE * best + fuzz))
        pick = jnp.where(jnp.any(armijo), lowest,
                         jnp.argmin(jnp.where(finite, change, jnp.inf)))
        # Newton phase: the full step where it lowers the residual without raising Φ(·; ū)
        # (`full_ok`), else the longest step meeting Armijo up to Φ's staircase. A shorter
        # Newton step is taken only if it also lowers the residual (below), so what Φ cannot
        # resolve is judged by that: in float32 a box on one corner rose by the staircase,
        # 2e-7 J, at every length, where float64 saw the decrease that led on to Newton's
        # convergence; and near the root, where the full step is judged by the residual
        # alone, one that fails is no reason to skip the shorter ones (design note 39)
        within = finite & (change <= _ARMIJO * steps * slope + fuzz + staircase)
        damped = jnp.where(full_ok | ~jnp.any(within), 0, jnp.argmax(within))
        pick = jnp.where(newton > 0, damped, pick)
        u_new = trial[pick]
        grads, noises = jax.vmap(lambda v, w: problem.gradient_noise(v, args, w))(
            jnp.stack([u_new, u_new]), jnp.stack([u_new, lag]))
        g_new, g_lag_new = grads[0], grads[1]
        # the next lag-phase direction reweights friction if this direction needed a step of
        # 1/256 or less, or found no decrease: it crossed a kink it did not see
        modelled = self.uses_row_model(args[0], u.shape[0])
        short = steps[pick] <= _REWEIGHT_BELOW
        if modelled:
            short = short | ((newton == 0) & (steps[pick] <= _MODEL_BELOW))
        reweight_next = (short | ~armijo[pick]).astype(u.dtype)
        r_new = base.residual_norm(mass.solve(g_new))
        # Newton phase (its full step refused): a shorter step is taken if it meets Armijo
        # along a descent direction and lowers the residual
        accepted = (base.finite(g_new) & (damped > 0) & within[pick]
                    & (jnp.dot(g_lag, direction) < 0) & (r_new < size))
        noise_new = noises[0]  # at u_new
        held = base.finite(u_new) & base.finite(g_new) & ~(change[pick] > fuzz[pick])
        refresh = (base.residual_norm(mass.solve(g_lag_new)) <= _LAG_REFRESH * r_new)
        # Newton phase: accept and stay; else, where the full step lowers the residual (if
        # by less than half) and meets Armijo on Φ(·; ū) along a descent direction, it is a
        # step of the lag phase: take it, holding the lag here unless the held residual is
        # already small (linear convergence, e.g. "cg" / "cr" near sliding contacts, then
        # costs no idle iterations); else stay put and hold the lag here
        descends = (~accepted & (damped == 0) & armijo[0] & (jnp.dot(g_lag, direction) < 0)
                    & base.finite(g_new) & (r_new < size))
        moved = accepted | descends
        newton_carry = jax.tree.map(
            lambda a, b: jnp.where(moved, a, b),
            (u_new, jnp.where(accepted | refresh, u_new, u),
             (accepted | refresh).astype(u.dtype), g_new, noise_new, tau),
            (u, u, jnp.zeros_like(newton), g, noise, tau))
        # lag phase: move if the step did not make things worse; refresh the lag (and try
        # Newton next) when the held problem is solved well enough for the true residual to
        # be what is left, when no step along the direction helps, or after a full step to
        # the row model's minimizer (the held problem is then solved as far as the model
        # knows it: its rows' linearization, not the lag, is what is left)
        refresh = ~held | refresh | (modelled & (reweight > 0) & (pick == 0))
        u_lag, g_lag_phase, noise_lag = jax.tree.map(lambda a, b: jnp.where(held, a, b),
                                                     (u_new, g_new, noise_new), (u, g, noise))
        # the shift shrinks after a full step along the model's direction and grows otherwise
        good = held & (need == 0) & (pick == 0)
        tau_next = jnp.where(good, jnp.where(tau > 4.0 * _SHIFT_MIN, 0.25 * tau, 0.0),
                             jnp.maximum(jnp.maximum(4.0 * tau, _SHIFT_MIN), need))
        lag_carry = (u_lag, jnp.where(refresh, u_lag, lag), refresh.astype(u.dtype),
                     g_lag_phase, noise_lag, tau_next)
        new = jax.tree.map(lambda a, b: jnp.where(newton > 0, a, b), newton_carry, lag_carry)
        if modelled and self.method(u.shape[0]) != "dense":
            # Krylov: a refused Newton step hands over to the row model's direction
            reweight_next = jnp.where((newton > 0) & ~moved, 1.0, reweight_next)
        return (*new, reweight_next), jnp.any(finite)
