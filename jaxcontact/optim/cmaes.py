"""CMA-ES, the gradient-free baseline of the papers' comparisons, through the `cma` package
(Hansen's implementation; `pip install 'jaxcontact[optim]'`)."""

from __future__ import annotations

import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from jaxcontact import validate as check
from jaxcontact.compiling import jit
from jaxcontact.optim.compiled import layout, program
from jaxcontact.optim.result import OptimResult


def cmaes(loss, x0, sigma0, *, args=(), max_simulations=10_000, rtol=1e-10, seed=0,
          options=None) -> OptimResult:
    """Minimize `loss(x, *args)` with CMA-ES from `x0` (Hansen's defaults: population
    4 + ⌊3 ln n⌋), counting every evaluation of the loss as one simulation.

    Each generation's candidates are evaluated together (`jax.vmap` of the jitted loss).

    Args:
      loss: a scalar JAX function of the pytree x (no gradient needed).
      x0: the mean of the first generation.
      args: a tuple of extra arguments of `loss` (traced, like `lbfgs`'s; the batched loss
        is compiled once per loss function and x layout).
      sigma0: the initial step size (> 0), in the units of x.
      max_simulations: the budget of loss evaluations.
      rtol: stop once the best loss <= rtol loss(x0) (ADD E8's Φ/Φ₀ < 1e-10).
      seed: the sampler's seed.
      options: more `cma` options (a dict), e.g. {"popsize": 20}.

    Returns:
      `OptimResult` with the best point found; `grad_norm` is NaN.
    """
    try:
        import cma
    except ImportError:
        raise ImportError("the CMA-ES baseline uses the `cma` package: pip install "
                          "'jaxcontact[optim]'") from None
    sigma0 = check.number("sigma0", sigma0, positive=True)
    max_simulations = check.integer("max_simulations", max_simulations, low=1)
    rtol = check.number("rtol", rtol, low=0)
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple of extra arguments of loss, got {args!r}")
    z0, unravel = ravel_pytree(x0)
    batch = program(("cmaes", loss, layout(x0)), lambda: jit(
        jax.vmap(lambda z, a: loss(unravel(z), *a), in_axes=(0, None))))
    first = float(batch(z0[None], args)[0])
    settings = {"seed": int(seed) + 1, "verbose": -9, "maxfevals": max_simulations - 1,
                **(options or {})}
    strategy = cma.CMAEvolutionStrategy(np.asarray(z0, float), sigma0, settings)
    best_z, best = np.asarray(z0, float), first
    history, simulations, converged, status = [first], 1, False, ""
    while not strategy.stop():
        candidates = strategy.ask()
        values = np.asarray(batch(np.asarray(candidates), args), float)
        simulations += len(candidates)
        strategy.tell(candidates, [float(v) if np.isfinite(v) else np.inf for v in values])
        k = int(np.argmin(values))
        if values[k] < best:
            best, best_z = float(values[k]), np.asarray(candidates[k])
        history.append(best)
        if best <= rtol * first:
            converged, status = True, f"loss {best:.3g} <= {rtol:g} x initial {first:.3g}"
            break
    if not converged:
        stops = ", ".join(f"{k}={v}" for k, v in strategy.stop().items())
        status = (f"stopped at {simulations} simulations without reaching {rtol:g} of the "
                  f"initial loss (best {best:.3g}; cma: {stops})")
    return OptimResult(x=unravel(best_z.astype(np.asarray(z0).dtype)), value=best,
                       grad_norm=float("nan"), iterations=len(history) - 1,
                       simulations=simulations, converged=converged, status=status,
                       history=history)
