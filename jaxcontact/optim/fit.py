"""System identification: model parameters (and initial state) from observed positions."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import validate as check
from jaxcontact.optim.least_squares import gauss_newton
from jaxcontact.solvers.adjoint import Implicit
from jaxcontact.optim.result import OptimResult
from jaxcontact.step import rollout


@dataclasses.dataclass
class FitResult:
    """What `fit` found.

    Attributes:
      params: name -> the estimate (the leaf's shape).
      std: name -> its standard deviation from the Gauss-Newton covariance.
      covariance: (n, n) over the flattened parameters in `params` order, physical units:
        σ² (JᵀJ)⁻¹ with σ² = |r|² / (m - n) (m residuals, n parameters).
      residual_rms: the root mean square of the observed residual entries at the estimate
        (m for positions).
      optim: the `OptimResult` of the Gauss-Newton solve (status, iterations, simulations).
    """

    params: dict
    std: dict
    covariance: np.ndarray
    residual_rms: float
    optim: OptimResult

    def apply(self, model, state):
        """(model, state) with the estimates put in their leaves: the start of a next fit
        (ADD's time continuation: a longer window, more parameters) or a prediction."""
        for name, value in self.params.items():
            model, state = _set(model, state, name, value)
        return model, state


def _path(name):
    """(is a state leaf, attribute path) of a parameter name: "geom.friction",
    "model.geom.friction" or "state.vel"."""
    root, _, rest = name.partition(".")
    return root == "state", (rest if root in ("model", "state") else name).split(".")


def _get(model, state, name):
    in_state, parts = _path(name)
    obj = state if in_state else model
    for part in parts:
        if not hasattr(obj, part):
            raise ValueError(f"params: unknown parameter {name!r} (give a model leaf as "
                             "'geom.friction', 'body.mass', ... or a state leaf as "
                             "'state.vel')")
        obj = getattr(obj, part)
    if not isinstance(obj, jax.Array) or not jnp.issubdtype(obj.dtype, jnp.floating):
        raise ValueError(f"params: {name!r} is not a float array leaf")
    return obj


def _set(model, state, name, value):
    in_state, parts = _path(name)

    def put(obj, parts):
        if len(parts) == 1:
            return obj.replace(**{parts[0]: value})
        return obj.replace(**{parts[0]: put(getattr(obj, parts[0]), parts[1:])})

    return (model, put(state, parts)) if in_state else (put(model, parts), state)


def forward_mode(model):
    """`model` with its solver's implicit gradients in forward mode (`jc.Implicit(mode=
    "forward")`, a `custom_jvp`), which `jax.jacfwd` through a rollout needs; unrolled
    gradients and forward mode already are."""
    rule = model.solver.gradients
    if isinstance(rule, Implicit) and rule.mode == "reverse":
        solver = dataclasses.replace(model.solver,
                                     adjoint=dataclasses.replace(rule, mode="forward"))
        return model.replace(solver=solver)
    return model


def _positions(traj):
    return traj.pos


@functools.lru_cache(maxsize=32)
def _residual(params, observe):
    """The residual of fitting the leaves named `params`: one function per tuple of names,
    with everything else an argument, so fits of other data (noise draws, windows of the
    same length, other starts) reuse one compiled Jacobian."""

    def residual(x, model, state, observed, mask, controls, scale):
        for name, value in zip(params, x):
            model, state = _set(model, state, name, value * scale[name])
        steps = None if controls is not None else observed.shape[0]
        _, traj = rollout(model, state, controls, steps=steps)
        shown = observe(traj)
        # shapes are static: checked while tracing (once per shape), not on every call
        if shown.shape != observed.shape:
            raise ValueError(f"observed must have the shape of observe(traj), {shown.shape}, "
                             f"got {observed.shape}")
        return jnp.where(mask, shown - observed, 0.0)

    return residual


def fit(model, state, observed, params, *, observe=None, mask=None, controls=None,
        max_iterations=20, xtol=1e-10, rtol=1e-9) -> FitResult:
    """Identify model leaves (and initial-state leaves) from observed trajectories.

    The residual is the difference of what the rollout shows (`observe(traj)`, by default the
    body positions) and `observed` at every step (where `mask` is true); Gauss-Newton / Levenberg-Marquardt (`gauss_newton`) with
    forward-mode sensitivities through the rollout minimizes it (the model's implicit
    gradients are switched to forward mode for this: `forward_mode`). Each parameter is solved
    for relative to its starting value (x = θ / |θ₀|, or θ where θ₀ = 0), so stiffnesses of
    1e5 and frictions of 0.5 are equally scaled.

    Args:
      model, state: the scene, with the starting guesses in the leaves to identify.
      observed: what was measured after each of T steps: by default (T, N, 3) body
        positions (`traj.pos` layout); with `observe`, its output's shape.
      params: names of leaves to identify: model leaves as "geom.friction", "body.mass",
        "plane.stiffness", ... and initial-state leaves as "state.vel", "state.pos".
      observe: traj -> array (T, ...), what is measured of a trajectory (a `jc.State` with a
        leading time axis), e.g. marker points on the bodies: c.o.m. positions alone do not
        show the spin. Give one function object for repeated fits (it keys the compiled
        Jacobian). Default: `traj.pos`.
      mask: bool of the shape of `observed`, the observed entries (partial observations),
        default all.
      controls: a `jc.Control` with a time axis T (default: none).
      max_iterations, xtol, rtol: as for `gauss_newton`.

    Returns:
      `FitResult`: estimates, standard deviations, covariance, residual and the solver's
      result (its `converged` and `status` say whether it stopped on a tolerance).

    Raises:
      ValueError: `observed` of the wrong shape or not finite, a `mask` of another shape,
        an unknown or non-float parameter name, or no parameters.
    """
    observed = jnp.asarray(observed)
    if observe is None:
        observe = _positions
        if observed.ndim != 3 or observed.shape[1:] != state.pos.shape:
            raise ValueError(f"observed must have shape (T, {state.pos.shape[0]}, 3) (body "
                             f"positions after each step), got {observed.shape}")
    elif not callable(observe):
        raise ValueError(f"observe must be a function of the trajectory, got {observe!r}")
    elif observed.ndim < 1:
        raise ValueError(f"observed must have a leading time axis, got shape {observed.shape}")
    if not bool(jnp.all(jnp.isfinite(observed))):
        raise ValueError("observed must be finite (mark missing entries with mask=), got "
                         f"{int(jnp.sum(~jnp.isfinite(observed)))} NaN or inf entries")
    if mask is None:
        mask = jnp.ones(observed.shape, bool)
    mask = jnp.asarray(mask, bool)
    if mask.shape != observed.shape:
        raise ValueError(f"mask must have the shape of observed {observed.shape}, got "
                         f"{mask.shape}")
    if isinstance(params, str):
        params = (params,)
    params = tuple(params)
    if not params:
        raise ValueError("params must name at least one leaf, got none")
    for name in params:
        if not isinstance(name, str):
            raise ValueError(f"params must be names (str), got {name!r}")
    model = forward_mode(model)
    start = {name: _get(model, state, name) for name in params}
    scale = {name: jnp.where(jnp.abs(v) > 0, jnp.abs(v), 1.0) for name, v in start.items()}
    check.integer("max_iterations", max_iterations, low=1)
    # a tuple in `params` order: the flattened x (Jacobian columns) follows that order
    x0 = tuple(start[name] / scale[name] for name in params)
    result = gauss_newton(_residual(params, observe), x0,
                          args=(model, state, observed, mask, controls, scale),
                          max_iterations=max_iterations, xtol=xtol, rtol=rtol)
    estimate = {name: value * scale[name] for name, value in zip(params, result.x)}
    # covariance in physical units: the Jacobian with respect to θ = x · scale
    flat_scale = jnp.concatenate([jnp.ravel(jnp.broadcast_to(scale[n], start[n].shape))
                                  for n in params])
    jac = result.jacobian / flat_scale[None, :]
    squares = 2.0 * result.value                      # |r|² at the estimate
    m_obs, n = int(jnp.sum(mask)), jac.shape[1]
    sigma2 = squares / max(m_obs - n, 1)
    covariance = np.asarray(sigma2 * jnp.linalg.pinv(jac.T @ jac))
    std_flat = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    std, offset = {}, 0
    for name in params:
        size = int(np.size(start[name]))
        std[name] = std_flat[offset:offset + size].reshape(np.shape(start[name]))
        offset += size
    rms = float(np.sqrt(squares / max(m_obs, 1)))
    return FitResult(params=estimate, std=std, covariance=covariance, residual_rms=rms,
                     optim=result)
