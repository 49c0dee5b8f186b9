"""L-BFGS on a scalar loss, through optax (`optax.lbfgs` with its zoom line search)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from jaxcontact import validate as check
from jaxcontact.compiling import jit
from jaxcontact.optim.compiled import program
from jaxcontact.optim.result import OptimResult


def _iteration(loss, memory):
    """The jitted L-BFGS iteration (x, state, args) -> (x, state, value at x, line-search
    trials) of `loss`, compiled once per (loss, memory)."""

    def build():
        opt = optax.lbfgs(memory_size=memory)

        @jit
        def iteration(x, state, args):
            value_fn = lambda y: loss(y, *args)  # noqa: E731
            value, grad = optax.value_and_grad_from_state(value_fn)(x, state=state)
            updates, state = opt.update(grad, state, x, value=value, grad=grad,
                                        value_fn=value_fn)
            x = optax.apply_updates(x, updates)
            return x, state, value, optax.tree_utils.tree_get(state, "num_linesearch_steps")

        return opt, iteration

    return program(("lbfgs", loss, memory), build)


def _strong(a):
    a = jnp.asarray(a)
    return jax.lax.convert_element_type(a, a.dtype)


def lbfgs(loss, x0, *, args=(), max_iterations=100, rtol=1e-10, gtol=0.0,
          memory=10, max_simulations=None, patience=None) -> OptimResult:
    """Minimize `loss(x, *args)` (a scalar JAX function of a pytree x) from `x0` with L-BFGS.

    Every iteration is one jitted optax update; its zoom line search evaluates the value
    and gradient at each trial length, and each of those evaluations counts as one
    simulation in `OptimResult.simulations` (the budget the papers compare). The compiled
    iteration is kept per `loss` function: later calls with the same function (another
    start, other `args`) do not compile again.

    Args:
      loss: the objective, differentiable (a rollout's loss: implicit gradients).
      x0: the start (any pytree of float arrays).
      args: a tuple of extra arguments of `loss` (arrays: traced, so changing them does not
        recompile), e.g. a continuation stage's contact stiffness.
      max_iterations: iteration cap (> 0).
      rtol: stop once loss(x) <= rtol loss(x0) (ADD E8's Φ/Φ₀ < 1e-10).
      gtol: also stop once the gradient's norm <= gtol.
      memory: the number of stored curvature pairs.
      max_simulations: also stop once this many simulations are spent (checked after each
        iteration, so the last one may go past it); None: no budget.
      patience: also stop once the loss has not halved over this many iterations (a stall,
        e.g. to restart elsewhere); None: never.

    Returns:
      `OptimResult`; `converged` false (and `status` says why) at the iteration cap or
      where the loss became non-finite.
    """
    max_iterations = check.integer("max_iterations", max_iterations, low=1)
    rtol = check.number("rtol", rtol, low=0)
    gtol = check.number("gtol", gtol, low=0)
    memory = check.integer("memory", memory, low=1)
    if max_simulations is not None:
        max_simulations = check.integer("max_simulations", max_simulations, low=1)
    if patience is not None:
        patience = check.integer("patience", patience, low=1)
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple of extra arguments of loss, got {args!r}")
    opt, iteration = _iteration(loss, memory)
    # strong types throughout: a weak-typed start (a Python float) would make the first
    # iteration's program differ from the rest and compile twice
    x = jax.tree.map(_strong, x0)
    state = jax.tree.map(_strong, opt.init(x))
    history, simulations, status, converged = [], 1, "", False   # 1: the first evaluation
    for it in range(1, max_iterations + 1):
        new_x, state, before, trials = iteration(x, state, args)
        if it == 1:
            first = float(before)
            history.append(first)
        simulations += int(trials)
        value = float(optax.tree_utils.tree_get(state, "value"))
        grad_norm = float(jnp.linalg.norm(ravel_pytree(
            optax.tree_utils.tree_get(state, "grad"))[0]))
        if not jnp.isfinite(value):
            status = f"the loss became non-finite at iteration {it}"
            break
        x = new_x
        history.append(value)
        if value <= rtol * first or grad_norm <= gtol:
            converged = True
            status = (f"loss {value:.3g} <= {rtol:g} x initial {first:.3g}" if value <= rtol * first
                      else f"gradient norm {grad_norm:.3g} <= {gtol:g}")
            break
        if patience is not None and len(history) > patience and (
                value > 0.5 * history[-1 - patience]):
            status = (f"stalled: the loss {value:.3g} has not halved in {patience} "
                      "iterations")
            break
        if max_simulations is not None and simulations >= max_simulations:
            status = (f"budget of {max_simulations} simulations spent ({simulations}): loss "
                      f"{value:.3g} ({value / first if first else float('nan'):.3g} of the "
                      "initial)")
            break
    else:
        it = max_iterations
        status = (f"iteration cap {max_iterations} reached: loss {value:.3g} "
                  f"({value / first if first else float('nan'):.3g} of the initial)")
    return OptimResult(x=x, value=history[-1], grad_norm=grad_norm, iterations=it,
                       simulations=simulations, converged=converged, status=status,
                       history=history)
