"""Optimization through the simulator: trajectory optimization, continuation and system
identification, on optax and JAX.

    result = jc.optim.lbfgs(loss, x0)                      # scalar loss, L-BFGS (optax)
    result = jc.optim.gauss_newton(residual, x0)           # ½|r|², forward sensitivities
    stages = jc.optim.continuation(loss_at, x0, [100.0, 300.0, 1000.0])  # loss_at(x, k)
    found = jc.optim.fit(model, state, observed, ["geom.friction", "geom.stiffness"])
    baseline = jc.optim.cmaes(loss, x0, sigma0=0.5)         # gradient-free, `cma` package
    rugged = jc.optim.cmaes_then_lbfgs(loss, x0, 0.5)       # CMA-ES's basin, exact gradients
    smoothed = jc.optim.descend(loss, x0, jc.optim.Estimator("alpha", sigma=0.1),
                                optax.adam(0.05))          # randomized smoothing, α-order

Every optimizer returns an `OptimResult` that says whether it converged and why it stopped,
and counts simulations (rollouts) the way the papers' comparisons do.
"""

from jaxcontact.optim.cmaes import cmaes
from jaxcontact.optim.continuation import continuation
from jaxcontact.optim.estimators import Estimator, descend
from jaxcontact.optim.fit import FitResult, fit, forward_mode
from jaxcontact.optim.hybrid import cmaes_then_lbfgs
from jaxcontact.optim.lbfgs import lbfgs
from jaxcontact.optim.least_squares import gauss_newton
from jaxcontact.optim.result import OptimResult

__all__ = ["Estimator", "FitResult", "OptimResult", "cmaes", "cmaes_then_lbfgs", "continuation",
           "descend", "fit", "forward_mode", "gauss_newton", "lbfgs"]
