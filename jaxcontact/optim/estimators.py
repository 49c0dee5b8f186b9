"""Gradient estimators for losses whose exact gradients mislead (stiff contact, a landing
that switches faces): estimates of the gradient of the randomly smoothed loss

    F(x) = E_w f(x + σ w),   w ~ N(0, I),

from N samples, each a simulation, evaluated together under `vmap` (Suh, Simchowitz, Zhang,
Tedrake, ICML 2022, "Do differentiable simulators give better policy gradients?", Sec. 3-4):

    zeroth order  ĝ₀ = 1/N Σ (f(x + σ wᵢ) - f(x)) wᵢ / σ      (f(x) a baseline: same mean)
    first order   ĝ₁ = 1/N Σ ∇f(x + σ wᵢ)                      (the exact gradients, averaged)
    α-order       ĝ_α = α ĝ₁ + (1 - α) ĝ₀.

ĝ₀ needs no gradient and is unbiased for ∇F, but its variance grows with the dimension; ĝ₁
has low variance where f is smooth but is biased where f jumps (a gradient does not see a
jump). The α-order estimate weighs the two by their inverse variances, α = σ₀² / (σ₀² + σ₁²)
(σₖ² the trace of each one's sample covariance, over N); with a `tolerance` γ it also
distrusts ĝ₁ as Suh et al. do: α ‖ĝ₁ - ĝ₀‖ is held at most γ - ε, ε the half-width of ĝ₀'s
confidence interval (`z` standard errors), and α = 0 where γ <= ε. Both choices use the
same samples as the estimates, which biases ĝ_α a little where α varies between draws.
Without a tolerance a jump whose ĝ₁ is 0 in every sample (variance 0) gets α = 1: pass a
tolerance where the loss can jump.

An estimator is a function (x, key, *args) -> (value, gradient, α) with value = f(x); it
costs N + 1 simulations (a value and gradient count one). `descend` runs an optax optimizer
on it and counts simulations as `jaxcontact.optim` does.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from jaxcontact import validate as check
from jaxcontact.compiling import jit
from jaxcontact.optim.compiled import program
from jaxcontact.optim.result import OptimResult

ORDERS = ("zeroth", "first", "alpha")


@dataclasses.dataclass(frozen=True)
class Estimator:
    """A randomized-smoothing gradient estimator (module docstring).

    Attributes:
      order: "zeroth" (ĝ₀), "first" (ĝ₁) or "alpha" (ĝ_α, Suh et al.'s α-order).
      sigma: σ, the smoothing's standard deviation in x's units (> 0): a float, or a
        sequence of floats, one per coordinate of the flattened x.
      samples: N, simulations per estimate besides the one at x (>= 2).
      tolerance: γ of "alpha" (>= 0): the estimate stays within γ - ε of ĝ₀ (in ‖·‖;
        0: ĝ₀ itself). None (default): inverse-variance weights only.
      z: with a tolerance, ε is z standard errors of ĝ₀.
    """

    order: str = "alpha"
    sigma: object = 0.1
    samples: int = 16
    tolerance: float | None = None
    z: float = 1.0

    def __post_init__(self):
        check.choice("order", self.order, ORDERS)
        check.integer("samples", self.samples, low=2)
        sigma = self.sigma if isinstance(self.sigma, (int, float)) else tuple(self.sigma)
        values = (sigma,) if isinstance(sigma, (int, float)) else sigma
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                 and 0 < v < float("inf") for v in values):
            raise ValueError(f"sigma must be a positive float or a sequence of them, got "
                             f"{self.sigma!r}")
        object.__setattr__(self, "sigma", sigma)   # hashable: the compiled program's key
        if self.tolerance is not None:
            check.number("tolerance", self.tolerance, low=0)
        check.number("z", self.z, low=0)

    @property
    def simulations(self) -> int:
        """Simulations per estimate: the N samples and x itself."""
        return self.samples + 1

    def __call__(self, loss, x, key, *args, value=None):
        """(f(x), the estimated ∇F(x), α) of `loss(x, *args)` (α: 0 for "zeroth", 1 for
        "first"). `value`: f(x) where the caller has it already (one simulation fewer)."""
        flat, unravel = ravel_pytree(x)
        sigma = jnp.broadcast_to(jnp.asarray(self.sigma, flat.dtype), flat.shape)

        def f(y):
            return loss(unravel(y), *args)

        noise = jax.random.normal(key, (self.samples, flat.shape[0]), flat.dtype)
        points = flat[None, :] + sigma[None, :] * noise
        if value is None:
            value = f(flat)
        if self.order == "zeroth":
            values = jax.vmap(f)(points)
            grad = self._zeroth(values, value, noise, sigma)
            return value, unravel(jnp.mean(grad, axis=0)), jnp.zeros((), flat.dtype)
        values, grads = jax.vmap(jax.value_and_grad(f))(points)
        g1 = grads
        if self.order == "first":
            return value, unravel(jnp.mean(g1, axis=0)), jnp.ones((), flat.dtype)
        g0 = self._zeroth(values, value, noise, sigma)
        alpha = self._alpha(g0, g1)
        mix = alpha * jnp.mean(g1, axis=0) + (1.0 - alpha) * jnp.mean(g0, axis=0)
        return value, unravel(mix), alpha

    @staticmethod
    def _zeroth(values, value, noise, sigma):
        """(N, n) per-sample zeroth-order terms (f(x + σ w) - f(x)) w / σ."""
        return (values - value)[:, None] * noise / sigma[None, :]

    def _alpha(self, g0, g1):
        """Suh et al.'s α from the per-sample terms (N, n) of ĝ₀ and ĝ₁."""
        n = g0.shape[0]
        var0 = jnp.sum(jnp.var(g0, axis=0, ddof=1)) / n
        var1 = jnp.sum(jnp.var(g1, axis=0, ddof=1)) / n
        mean0, mean1 = jnp.mean(g0, axis=0), jnp.mean(g1, axis=0)
        alpha = jnp.where(var0 + var1 > 0.0, var0 / jnp.where(var0 + var1 > 0.0,
                                                               var0 + var1, 1.0), 0.5)
        if self.tolerance is None:
            return alpha
        gap = jnp.linalg.norm(mean1 - mean0)
        room = jnp.maximum(self.tolerance - self.z * jnp.sqrt(var0), 0.0)
        return jnp.minimum(alpha, jnp.where(gap > room, room / jnp.where(gap > 0.0, gap, 1.0),
                                            1.0))


def _iteration(loss, estimator, optimizer):
    """The jitted step (x, state, key, args) -> (x, state, value, α), once per triple."""

    def build():
        @jit
        def iteration(x, state, key, args):
            value, grad, alpha = estimator(loss, x, key, *args)
            updates, state = optimizer.update(grad, state, x)
            return optax.apply_updates(x, updates), state, value, alpha

        return iteration

    return program(("estimator", loss, estimator, optimizer), build)


def descend(loss, x0, estimator: Estimator, optimizer, *, args=(), max_simulations=1000,
            rtol=1e-10, seed=0) -> OptimResult:
    """Minimize `loss(x, *args)` from `x0` with `optimizer` (an optax transformation, e.g.
    `optax.adam(0.05)`) on `estimator`'s gradients, until loss(x) <= rtol loss(x0) or the
    budget of simulations (`Estimator.simulations` per iteration) is spent.

    Returns:
      `OptimResult` with the best point evaluated (`history`: f at each iterate, where the
      estimate was taken), `simulations` spent, and `status`.
    """
    if not isinstance(estimator, Estimator):
        raise ValueError(f"estimator must be a jc.optim.Estimator, got {estimator!r}")
    max_simulations = check.integer("max_simulations", max_simulations,
                                    low=estimator.simulations)
    rtol = check.number("rtol", rtol, low=0)
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple of extra arguments of loss, got {args!r}")
    iteration = _iteration(loss, estimator, optimizer)
    x = jax.tree.map(lambda v: jnp.asarray(v), x0)
    state = optimizer.init(x)
    key = jax.random.PRNGKey(seed)
    history, alphas, simulations = [], [], 0
    best_x, best, converged, status = x, float("inf"), False, ""
    while simulations + estimator.simulations <= max_simulations:
        key, sub = jax.random.split(key)
        new_x, state, value, alpha = iteration(x, state, sub, args)
        simulations += estimator.simulations
        value = float(value)
        if not jnp.isfinite(value):
            status = f"the loss became non-finite after {simulations} simulations"
            break
        history.append(value), alphas.append(float(alpha))
        if value < best:
            best_x, best = x, value
        if value <= rtol * history[0]:
            converged = True
            status = f"loss {value:.3g} <= {rtol:g} x initial {history[0]:.3g}"
            break
        x = new_x
    else:
        status = (f"budget of {max_simulations} simulations spent: best loss {best:.3g} "
                  f"({best / history[0] if history and history[0] else float('nan'):.3g} "
                  "of the initial)")
    return OptimResult(x=best_x, value=best, grad_norm=float("nan"), iterations=len(history),
                       simulations=simulations, converged=converged, status=status,
                       history=history, alpha=alphas)
