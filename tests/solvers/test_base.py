"""The solvers' driver (`jaxcontact.solvers.base.Solver.solve`) and settings, on a toy problem
built here so that the module compiles in seconds: Φ(u) = ½ (u - ũ)ᵀ M (u - ũ) + ½ uᵀ K u
- bᵀ u + Σ_i c_i huber(u_i - a_i) in three unknowns (a `Problem` of the eight functions,
derivatives by autodiff; its Hessian one dense block).

- A start that is already converged takes no iteration; Newton solves a strictly convex
  quadratic in one iteration to rounding, the Huber problem to its stationary point.
- Descent's fixed step α on a quadratic shrinks the error by exactly (1 - α) per iteration:
  the cap is honoured and reported as `Result.MAX_ITERATIONS`.
- An iteration that cannot move ends the solve as `Result.STALLED`, a non-finite one as
  `Result.NONFINITE` (returning the last finite iterate); one that cannot move with its residual within `RESOLUTION_ULPS` times
  the step's resolution (`Problem.resolution`) has converged.
- The tolerance is max(tol, ROUNDING_ULPS eps (|u| + |ũ|)) per degree of freedom, and the
  driver judges convergence against it DOF by DOF.
- Newton's residual is its last step, or M⁻¹ ∇Φ where smaller.
- The scan (early_exit False) and the while loop (True) give the same answer, also per scene
  of a vmapped batch.
- Settings, those every solver shares and each solver's own, are validated, naming the
  argument; the iteration cap is a static int.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.problem import BlockDiagonal, Hessian, Problem
from jaxcontact.solvers import base, tolerances
from jaxcontact.solvers.newton import NewtonCarry

N = 3
TOL = 1e-10
# rounding of a 3-unknown solve of entries ~1: a few ulps of the solution
ROUNDING = 1e-13
DELTA = 0.1      # the Huber kink: quadratic within δ of its centre, linear beyond
# Huber weights and centres whose minimizer has two terms on their quadratic part and one
# on its linear part, from a start where all three are linear: Newton needs several steps
HUBER = {"c": (50.0, 50.0, 50.0), "a": (1.0, 0.5, -1.0)}


# --- the toy problem -------------------------------------------------------------------------

def _huber(x):
    a = jnp.abs(x)
    return jnp.where(a <= DELTA, 0.5 * x * x, DELTA * a - 0.5 * DELTA * DELTA)


def _value(u, args):
    du = u - args["free"]
    return (0.5 * du @ (args["mass"] * du) + 0.5 * u @ args["K"] @ u - args["b"] @ u
            + jnp.sum(args["c"] * _huber(u - args["a"])))


def _mass(args):
    m = args["mass"]
    return BlockDiagonal((jnp.diag(m)[None],), inverses=(jnp.diag(1.0 / m)[None],))


def _hessian(u, args, exact=True):
    g = jax.grad(_value)(u, args)
    dense = jax.hessian(_value)(u, args)
    return g, Hessian(BlockDiagonal((dense[None],)), (), (), (), (), N)


def _along(u, d, alpha, args):
    def slope(a):
        return jax.grad(_value)(u + a * d, args) @ d

    return jax.jvp(slope, (alpha,), (jnp.ones_like(alpha),))


PROBLEM = Problem(gradient=jax.grad(_value), hessian=_hessian, along=_along,
                  rows=lambda u, args: (), mass=_mass, start=lambda args: args["free"],
                  resolution=lambda args: args["resolution"])


def _args(free=(0.3, -1.2, 2.0), b=(0.5, -0.4, 1.0), c=(0.0, 0.0, 0.0), a=(0.0, 0.0, 0.0),
          coupling=0.3, resolution=(0.0, 0.0, 0.0)):
    """Unit-ish masses, a positive definite K with off-diagonal coupling."""
    K = np.array([[2.0, coupling, 0.0], [coupling, 1.0, coupling], [0.0, coupling, 3.0]])
    return {name: jnp.asarray(value, jnp.float64) for name, value in (
        ("free", free), ("b", b), ("c", c), ("a", a), ("K", K), ("mass", (1.0, 2.0, 0.5)),
        ("resolution", resolution))}


def _quadratic_answer(args):
    """u* of the quadratic (c = 0): (M + K) u = M ũ + b."""
    m = np.diag(np.asarray(args["mass"]))
    return np.linalg.solve(m + np.asarray(args["K"]),
                           m @ np.asarray(args["free"]) + np.asarray(args["b"]))


def _solve(solver, args):
    u, stats = jax.jit(lambda a: solver.solve(PROBLEM, a["free"], a))(args)
    return np.asarray(u), {k: v.item() for k, v in stats.items()}


class _Carry(NamedTuple):
    u: jax.Array
    g: jax.Array


@dataclasses.dataclass(frozen=True)
class _Stuck(base.Solver):
    """An iteration that never moves."""

    def start(self, problem, u0, args):
        u = problem.start(args)
        return _Carry(u, problem.gradient(u, args))

    def iteration(self, problem, carry, args):
        return carry, jnp.zeros((), bool)


@dataclasses.dataclass(frozen=True)
class _Blowup(_Stuck):
    """An iteration that moves to NaN."""

    def iteration(self, problem, carry, args):
        u = carry.u * jnp.nan
        return _Carry(u, problem.gradient(u, args)), jnp.ones((), bool)


# --- how a solve ends ------------------------------------------------------------------------

@pytest.mark.parametrize("solver", [jc.Newton(tol=TOL), jc.Descent(tol=TOL),
                                    _Stuck(tol=TOL)], ids=["newton", "descent", "stuck"])
def test_a_converged_start_takes_no_iteration(solver):
    # b = 0, K = 0 and the Huber centred at ũ: ũ is the minimizer
    args = _args(b=(0.0, 0.0, 0.0), c=(1.0, 2.0, 3.0), a=(0.3, -1.2, 2.0), coupling=0.0)
    args["K"] = jnp.zeros((N, N))
    u, stats = _solve(solver, args)
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        0, int(jc.Result.SUCCESS), True)
    assert stats["residual"] == 0.0
    np.testing.assert_array_equal(u, np.asarray(args["free"]))


@pytest.mark.parametrize("early_exit", [True, False])
def test_newton_solves_a_strictly_convex_quadratic_in_one_iteration(early_exit):
    args = _args()
    u, stats = _solve(jc.Newton(tol=TOL, early_exit=early_exit), args)
    want = _quadratic_answer(args)
    assert np.max(np.abs(want - np.asarray(args["free"]))) > 0.1    # it has to move
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        1, int(jc.Result.SUCCESS), True)
    np.testing.assert_allclose(u, want, rtol=0, atol=ROUNDING)
    assert stats["residual"] <= ROUNDING


def test_newton_reaches_the_stationary_point_of_the_huber_problem():
    # the Huber terms switch between quadratic and linear along the way: a few iterations
    args = _args(**HUBER)
    assert np.all(np.abs(np.asarray(args["free"]) - np.asarray(args["a"])) > DELTA)
    u, stats = _solve(jc.Newton(tol=TOL), args)
    assert stats["converged"] and stats["result"] == int(jc.Result.SUCCESS)
    assert 1 < stats["iterations"] <= 10
    g = np.asarray(jax.grad(_value)(jnp.asarray(u), args))
    assert np.max(np.abs(g / np.asarray(args["mass"]))) <= TOL
    # the answer has terms on both sides of the kink
    offset = np.abs(u - np.asarray(args["a"]))
    assert np.any(offset > DELTA) and np.any(offset < DELTA)


def test_descent_shrinks_the_error_by_one_minus_alpha_and_stops_at_the_cap():
    # Descent's block is the whole (constant) Hessian here: u_k - u* = (1 - α)^k (ũ - u*)
    args = _args()
    alpha, cap = 0.5, 3
    u, stats = _solve(jc.Descent(tol=TOL, alpha=alpha, iterations=cap), args)
    want = _quadratic_answer(args)
    expected = want + (1.0 - alpha) ** cap * (np.asarray(args["free"]) - want)
    np.testing.assert_allclose(u, expected, rtol=0, atol=ROUNDING)
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        cap, int(jc.Result.MAX_ITERATIONS), False)
    # the reported residual is max |M⁻¹ ∇Φ| at that iterate
    g = np.asarray(jax.grad(_value)(jnp.asarray(u), args))
    assert stats["residual"] == pytest.approx(np.max(np.abs(g / np.asarray(args["mass"]))),
                                              rel=1e-12)


def test_an_iteration_that_cannot_move_reports_stalled():
    args = _args()
    u, stats = _solve(_Stuck(tol=TOL), args)
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        1, int(jc.Result.STALLED), False)
    np.testing.assert_array_equal(u, np.asarray(args["free"]))
    g = np.asarray(jax.grad(_value)(args["free"], args))
    assert stats["residual"] == pytest.approx(np.max(np.abs(g / np.asarray(args["mass"]))),
                                              rel=1e-14)


@pytest.mark.parametrize("margin", [0.99, 1.01])
def test_a_solve_stopped_by_rounding_converges_within_the_resolution_of_its_step(margin):
    # a solve that cannot move is converged where each DOF's residual is within
    # RESOLUTION_ULPS times the step's resolution (Problem.resolution), and stalled beyond
    args = _args()
    r = np.abs(np.asarray(jax.grad(_value)(args["free"], args)) / np.asarray(args["mass"]))
    args["resolution"] = jnp.asarray(r / (margin * tolerances.RESOLUTION_ULPS))
    _, stats = _solve(_Stuck(tol=TOL), args)
    within = margin < 1.0
    assert stats["converged"] is within
    assert stats["result"] == int(jc.Result.SUCCESS if within else jc.Result.STALLED)
    assert stats["tolerance"] == pytest.approx(np.max(r) / margin)


def test_a_non_finite_iteration_reports_nonfinite_and_returns_the_last_finite_iterate():
    args = _args()
    u, stats = _solve(_Blowup(tol=TOL, iterations=5), args)
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        1, int(jc.Result.NONFINITE), False)
    np.testing.assert_array_equal(u, np.asarray(args["free"]))


# --- the tolerance ---------------------------------------------------------------------------

def test_tolerance_is_the_larger_of_tol_and_the_rounding_of_each_dof():
    u = jnp.asarray([1e8, 1.0, 0.0, -3e6])
    start = jnp.asarray([0.0, 1e8, 0.0, 3e6])
    eps = float(jnp.finfo(jnp.float64).eps)
    want = np.maximum(TOL, tolerances.ROUNDING_ULPS * eps * (np.abs(u) + np.abs(start)))
    np.testing.assert_allclose(jc.Newton(tol=TOL).tolerance(u, start), want, rtol=1e-15)
    assert want[2] == TOL and want[0] > 1e3 * TOL            # both sides are exercised
    # without tol: the precision's default
    for dtype, tol in ((jnp.float64, tolerances.TOL_FLOAT64),
                       (jnp.float32, tolerances.TOL_FLOAT32)):
        small = jnp.zeros(2, dtype)
        np.testing.assert_allclose(jc.Descent().tolerance(small, small), [tol, tol])
    assert base.default_tol(jnp.float32) == tolerances.TOL_FLOAT32


@pytest.mark.parametrize("dof, converged", [(0, True), (1, False)])
def test_the_driver_judges_each_dof_by_its_own_tolerance(dof, converged):
    # ũ = (1e8, 1, ...): a gradient of 1e-7 is within the rounding of DOF 0 (64 eps 2e8 =
    # 2.8e-6) but far above the tolerance of DOF 1
    b = np.zeros(N)
    b[dof] = 1e-7
    args = _args(free=(1e8, 1.0, 0.0), b=tuple(b), coupling=0.0)
    args["K"] = jnp.zeros((N, N))
    _, stats = _solve(_Stuck(tol=TOL), args)
    assert stats["converged"] == converged
    assert stats["iterations"] == (0 if converged else 1)
    assert stats["residual"] == pytest.approx(1e-7 / float(args["mass"][dof]), rel=1e-6)
    assert stats["tolerance"] == pytest.approx(
        tolerances.ROUNDING_ULPS * np.finfo(np.float64).eps * 2e8, rel=1e-12)


def test_newton_residual_is_its_last_step_or_the_scaled_gradient_where_smaller():
    solver, args = jc.Newton(), _args()
    u = args["free"]
    g = jnp.asarray([1e-3, -2e-3, 0.0])       # M⁻¹ g = (1e-3, -1e-3, 0)
    step = jnp.asarray([0.0, 5e-4, 0.0])
    np.testing.assert_allclose(solver.residual(PROBLEM, NewtonCarry(u, g, step), args), step)
    np.testing.assert_allclose(
        solver.residual(PROBLEM, NewtonCarry(u, g, 10.0 * step), args), [1e-3, -1e-3, 0.0])
    # before the first step (d = ∞): the scaled gradient
    inf = jnp.full((N,), jnp.inf)
    np.testing.assert_allclose(solver.residual(PROBLEM, NewtonCarry(u, g, inf), args),
                               [1e-3, -1e-3, 0.0])


# --- loop forms ------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", [jc.Newton(tol=TOL), jc.Descent(tol=TOL, iterations=200)],
                         ids=["newton", "descent"])
def test_scan_and_while_loop_give_the_same_answer(solver):
    # the Huber problem and, batched, it with a converged start beside it (the scenes of a
    # vmapped batch iterate and freeze independently)
    args = _args(**HUBER)
    still = _args(b=(0.0, 0.0, 0.0), c=(1.0, 2.0, 3.0), a=(0.3, -1.2, 2.0), coupling=0.0)
    still["K"] = jnp.zeros((N, N))
    batch = jax.tree.map(lambda x, y: jnp.stack([x, y]), args, still)
    out = {}
    for early_exit in (False, True):
        s = dataclasses.replace(solver, early_exit=early_exit)
        out[early_exit] = (_solve(s, args), jax.jit(jax.vmap(
            lambda a, s=s: s.solve(PROBLEM, a["free"], a)))(batch))
    (u_scan, stats_scan), batch_scan = out[False]
    (u_while, stats_while), batch_while = out[True]
    assert stats_scan["converged"] and stats_scan["iterations"] > 1
    # the same iterations (the two programs may round differently: a few ulps)
    np.testing.assert_allclose(u_while, u_scan, rtol=0, atol=ROUNDING)
    for key in ("iterations", "converged", "result"):
        assert stats_while[key] == stats_scan[key], key
    for got, want in zip(jax.tree.leaves(batch_while), jax.tree.leaves(batch_scan)):
        np.testing.assert_allclose(got, want, rtol=0, atol=ROUNDING)
    u_batch, stats_batch = batch_while
    np.testing.assert_allclose(u_batch[0], u_scan, rtol=0, atol=ROUNDING)
    np.testing.assert_array_equal(u_batch[1], np.asarray(still["free"]))
    np.testing.assert_array_equal(stats_batch["iterations"], [stats_scan["iterations"], 0])


# --- settings --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [jc.Newton, jc.Descent, jc.Dual])
@pytest.mark.parametrize("kwargs, name", [
    ({"iterations": 0}, "iterations"), ({"iterations": 2.5}, "iterations"),
    ({"iterations": True}, "iterations"), ({"iterations": None}, "iterations"),
    ({"tol": 0.0}, "tol"), ({"tol": -1e-8}, "tol"), ({"tol": float("nan")}, "tol"),
    ({"tol": "1e-8"}, "tol"),
    ({"early_exit": 1}, "early_exit"), ({"early_exit": "yes"}, "early_exit"),
    ({"ad": "fd"}, "ad"), ({"ad": "VJP"}, "ad"),
    ({"adjoint": "lu"}, "adjoint"), ({"adjoint": None}, "adjoint"),
])
def test_bad_settings_raise_naming_the_argument(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


@pytest.mark.parametrize("cls, kwargs, name", [
    (jc.Descent, {"iterations": 0}, "iterations"),
    (jc.Descent, {"alpha": 1.5}, "alpha"),
    (jc.Descent, {"alpha": 0.0}, "alpha"),
    (jc.Dual, {"update": "lazy"}, "update"),
    (jc.Dual, {"mass_splitting": 1}, "mass_splitting"),
    (jc.Dual, {"tol": -1.0}, "tol"),
    (jc.Newton, {"linear": "gmres"}, "linear"),
    (jc.Newton, {"linear": "bicgstab"}, "linear"),
    (jc.Newton, {"linear": "cr"}, "linear"),
    (jc.Newton, {"krylov_iterations": 0}, "krylov_iterations"),
    (jc.Dual, {"ad": "fd"}, "ad"),
    (jc.Descent, {"adjoint": "lu"}, "adjoint"),
    (jc.Descent, {"preconditioner": "jacobi"}, "preconditioner"),
])
def test_bad_solver_settings_name_the_argument(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


def test_iteration_cap_is_a_number():
    """Every solver's cap is a static int (Newton's default 50, for rigid and mesh scenes
    alike); None is rejected, naming `iterations`."""
    assert jc.Newton().iterations == 50
    for solver in (jc.Newton, jc.Descent, jc.Dual):
        with pytest.raises(ValueError, match="iterations"):
            solver(iterations=None)


def test_settings_resolve_the_gradient_rule():
    assert jc.Newton().gradients == jc.Implicit(mode="reverse", linear="auto")
    assert jc.Newton(ad="jvp", adjoint="dense").gradients == jc.Implicit(mode="forward",
                                                                          linear="dense")
    assert isinstance(jc.Descent(ad="unrolled").gradients, jc.Unrolled)
    rule = jc.Implicit(linear="krylov", iterations=7)
    assert jc.Dual(adjoint=rule).gradients is rule
    # loops exit early unless told not to or unrolled (reverse mode needs the scans)
    assert jc.Newton().loops_exit_early
    assert not jc.Newton(early_exit=False).loops_exit_early
    assert not jc.Newton(ad="unrolled").loops_exit_early
    assert jc.Newton(iterations=np.int64(7)).iterations == 7
