"""The solvers' driver (`jaxcontact.solvers.base.Solver.solve`): how a solve ends, on a toy
method whose residual has a closed form (each iteration multiplies it by a fixed rate), so
the module compiles in seconds.

- A residual that halves within `patience` iterations makes progress: the solve runs on to
  convergence.
- One that does not halve for `patience` iterations while within `STALL_BAND` tolerances has
  stalled on its rounding: the solve stops there and says `Result.STALLED`.
- Outside the band a slow solve is never called stalled: it runs to the cap and says
  `Result.MAX_ITERATIONS`.
"""

import dataclasses
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

import jaxcontact as jc
from jaxcontact.solvers import base

TOL = 1.0
CAP = 30


class _Toy(SimpleNamespace):
    """The `Problem` methods the driver calls: g(u) = u, unit mass, no rounding noise."""

    def __init__(self, u0):
        identity = SimpleNamespace(solve=lambda g: g)
        super().__init__(start=lambda args: u0, mass=lambda args: identity,
                         gradient_noise=lambda u, args: (u, jnp.zeros_like(u)))


@dataclasses.dataclass(frozen=True)
class _Rate(base.Solver):
    """Each iteration multiplies u (and so the residual) by `rate`."""

    rate: float = 1.0

    def iteration(self, problem, carry, args, tol):
        (u,) = carry
        return (self.rate * u,), u, jnp.ones((), bool), jnp.zeros_like(u), 0.0


def _solve(start, rate, patience, early_exit=True):
    solver = _Rate(iterations=CAP, tol=TOL, patience=patience, rate=rate,
                   early_exit=early_exit)
    u0 = jnp.array([start, -0.5 * start])
    _, stats = jax.jit(lambda: solver.solve(_Toy(u0), u0, None))()
    return {k: int(v) if k in ("iterations", "result", "converged") else float(v)
            for k, v in stats.items()}


@pytest.mark.parametrize("early_exit", [True, False])
def test_a_residual_held_within_the_band_stops_after_patience_iterations(early_exit):
    stats = _solve(3.0, 1.0, patience=4, early_exit=early_exit)
    # iteration 1 sets the best residual (3 tolerances); 4 more find no halving
    assert (stats["iterations"], stats["result"], stats["converged"]) == (
        4, int(jc.Result.STALLED), 0)
    assert stats["residual"] == pytest.approx(3.0)


def test_a_residual_outside_the_band_runs_to_the_cap():
    stats = _solve(100.0, 1.0, patience=4)
    assert (stats["iterations"], stats["result"]) == (CAP, int(jc.Result.MAX_ITERATIONS))
    stats = _solve(3.0, 1.0, patience=None)
    assert (stats["iterations"], stats["result"]) == (CAP, int(jc.Result.MAX_ITERATIONS))


def test_a_residual_that_halves_within_patience_converges():
    # 0.6 per iteration halves the best every second iteration: patience 2 lets it converge
    # (3 * 0.6^k <= 1 from k = 3 on), patience 1 calls the first iteration without a
    # halving a stall
    converged = _solve(3.0, 0.6, patience=2)
    assert (converged["result"], converged["converged"], converged["iterations"]) == (
        int(jc.Result.SUCCESS), 1, 3)
    stalled = _solve(3.0, 0.6, patience=1)
    assert stalled["result"] == int(jc.Result.STALLED)
    assert stalled["residual"] == pytest.approx(3.0 * 0.6)


def test_patience_is_validated():
    with pytest.raises(ValueError, match="patience"):
        jc.Newton(patience=0)
    assert jc.Newton().patience == 12 and jc.Descent().patience is None
