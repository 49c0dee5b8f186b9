"""CMA-ES, then L-BFGS: a global search chooses the basin, exact gradients converge in it
(issue 66; design note 68)."""

from __future__ import annotations

import dataclasses

from jaxcontact import validate as check
from jaxcontact.optim.cmaes import cmaes
from jaxcontact.optim.lbfgs import lbfgs
from jaxcontact.optim.result import OptimResult


def cmaes_then_lbfgs(loss, x0, sigma0, *, args=(), max_simulations=300, share=2 / 3,
                     rtol=1e-10, seed=0) -> OptimResult:
    """Minimize `loss(x, *args)` with CMA-ES for `share` of the budget, then with L-BFGS on
    its (exact) gradients from CMA-ES's best point for the rest.

    Where contact makes the loss rugged, exact gradients stall in the basin they start in,
    and CMA-ES finds good basins but converges slowly inside one. Measured on ADD E11 from
    ten starts (docs/experiments.md), 200 simulations of CMA-ES and 100 of L-BFGS reached
    ADD's Φ/Φ₀ = 4e-4 from nine starts, CMA-ES alone from three, L-BFGS alone from three.

    Args:
      loss: a scalar JAX function of the pytree x, differentiable for the second phase.
      x0, sigma0, seed: CMA-ES's first mean, step size (> 0, in x's units) and seed.
      args: a tuple of extra arguments of `loss` (traced), for both phases.
      max_simulations: the budget of loss evaluations of both phases together (>= 2).
      share: CMA-ES's share of the budget, in (0, 1).
      rtol: each phase stops once its loss <= rtol times the loss at its own start.

    Returns:
      One `OptimResult`: the second phase's point, both phases' history and simulations,
      converged as the phase that stopped, and both statuses.
    """
    max_simulations = check.integer("max_simulations", max_simulations, low=2)
    share = check.number("share", share, positive=True)
    if share >= 1.0:
        raise ValueError(f"share must be in (0, 1), got {share!r}")
    first = cmaes(loss, x0, sigma0, args=args, rtol=rtol, seed=seed,
                  max_simulations=max(1, round(share * max_simulations)))
    if first.converged:
        return first
    second = lbfgs(loss, first.x, args=args, max_iterations=max_simulations, rtol=rtol,
                   max_simulations=max(1, max_simulations - first.simulations))
    return dataclasses.replace(
        second, history=first.history + second.history[1:],
        iterations=first.iterations + second.iterations,
        simulations=first.simulations + second.simulations,
        status=f"CMA-ES: {first.status}; then L-BFGS: {second.status}")
