"""Distributions of domain randomization: small frozen pytrees with reparameterized samples.

A distribution's parameters are its pytree leaves, so they may be traced, batched and
differentiated, and a jitted function that takes a distribution as an argument runs new
parameter values through the same program. Its samples are reparameterized: given the key,
a sample is a differentiable function of the parameters (Kingma & Welling 2014,
arXiv:1312.6114, §2.4), e.g. x = low + (high - low) u with u ~ U[0, 1) drawn from the key.

Parameters are numbers or 3-vectors (one value per axis of a vector quantity). They are
validated where they are concrete; traced parameters (a distribution built inside `jit` or
`grad`) are checked for shape only, since their values are not known while tracing.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_SHAPES = ((), (3,))   # a parameter is a number or a 3-vector


def _traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _show(value) -> str:
    """A short text of a parameter for messages and reprs."""
    if _traced(value):
        return "<traced>"
    arr = np.asarray(value)
    return f"{float(arr):g}" if arr.ndim == 0 else "(" + ", ".join(f"{v:g}" for v in arr) + ")"


def _parameter(owner: str, field: str, value):
    """A parameter as a float array of shape () or (3,); finite where it is concrete."""
    if _traced(value):
        if jnp.shape(value) not in _SHAPES:
            raise ValueError(f"{owner} {field} must be a number or a 3-vector, got a traced "
                             f"value of shape {jnp.shape(value)}")
        return value
    # strings and bools would convert silently (np.asarray("1", float) is 1.0)
    if isinstance(value, (bool, str, bytes)):
        raise ValueError(f"{owner} {field} must be a number or a 3-vector, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{owner} {field} must be a number or a 3-vector, got {value!r}") \
            from None
    if arr.shape not in _SHAPES:
        raise ValueError(f"{owner} {field} must be a number or a 3-vector, got {value!r} "
                         f"(shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner} {field} must be finite, got {value!r}")
    # a float jax array keeps its dtype; anything else becomes JAX's default float, so that
    # every value given as numbers has the same dtype (one compiled program for all of them)
    if isinstance(value, jax.Array) and jnp.issubdtype(value.dtype, jnp.floating):
        return value
    return jnp.asarray(arr)


def _pytree(cls):
    """Register a distribution class as a pytree whose leaves are its parameters.

    Unflattening bypasses `__init__`: JAX rebuilds pytrees with tracers, batching axes and
    placeholder objects as leaves, none of which are parameters to validate.
    """
    names = tuple(f.name for f in dataclasses.fields(cls))

    def flatten(dist):
        return tuple((jax.tree_util.GetAttrKey(n), getattr(dist, n)) for n in names), None

    def unflatten(_, leaves):
        dist = object.__new__(cls)
        for name, leaf in zip(names, leaves):
            object.__setattr__(dist, name, leaf)
        return dist

    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls


class AbstractDistribution(abc.ABC):
    """A distribution of numbers or 3-vectors with differentiable parameters (the leaves).

    Subclasses are frozen dataclasses whose fields are all parameters; each validates its
    fields in `__post_init__` and implements `sample` and `_support`.
    """

    @abc.abstractmethod
    def sample(self, key, shape=(), dtype=None) -> jax.Array:
        """Samples of shape `shape`, reparameterized (differentiable in the parameters).

        Args:
          key: a `jax.random` key (raw uint32 or typed).
          shape: the sample shape; the parameters broadcast against its trailing axes, so a
            3-vector distribution takes shapes ending in 3, e.g. (N, 3).
          dtype: a float dtype; default the parameters' (JAX's default float).
        """

    @abc.abstractmethod
    def _support(self):
        """(lowest, highest) values a sample can take, elementwise over the parameter shape,
        or None where the parameters are traced."""

    @property
    def shape(self) -> tuple:
        """The parameters' broadcast shape: () or (3,)."""
        return jnp.broadcast_shapes(*(jnp.shape(p) for p in self._parameters()))

    def _parameters(self) -> tuple:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    def _concrete(self):
        """The parameters as NumPy arrays, or None if any is traced."""
        params = self._parameters()
        return None if any(map(_traced, params)) else tuple(np.asarray(p) for p in params)

    def _init(self):
        """Convert and store every field as a parameter; returns `_concrete()`."""
        owner = type(self).__name__
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _parameter(owner, f.name, getattr(self, f.name)))
        return self._concrete()

    def _broadcast(self, shape, dtype):
        """(sample shape, dtype, the parameters cast and broadcast to that shape)."""
        shape = tuple(int(s) for s in shape)
        try:
            fits = jnp.broadcast_shapes(self.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{self!r} has parameters of shape {self.shape}: it cannot give "
                             f"samples of shape {shape}")
        dtype = jnp.result_type(*self._parameters()) if dtype is None else dtype
        params = tuple(jnp.broadcast_to(jnp.asarray(p, dtype), shape)
                       for p in self._parameters())
        return shape, dtype, params

    def __repr__(self):
        fields = ", ".join(f"{f.name}={_show(getattr(self, f.name))}"
                           for f in dataclasses.fields(self))
        return f"{type(self).__name__}({fields})"


class AbstractInterval(AbstractDistribution):
    """A distribution on [low, high]: the concrete class's fields `low` and `high`."""

    def _init_interval(self):
        """`_init`, then low <= high where concrete; returns `_concrete()`."""
        values = self._init()
        if values is not None and np.any(values[0] > values[1]):
            raise ValueError(f"{type(self).__name__} must have low <= high, got "
                             f"low={_show(values[0])}, high={_show(values[1])}")
        return values

    def _support(self):
        values = self._concrete()
        return None if values is None else tuple(np.broadcast_arrays(*values))


@_pytree
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Uniform(AbstractInterval):
    """Uniform on [low, high], independently per component.

    Reparameterized: x = low + (high - low) u with u ~ U[0, 1) from the key, so
    ∂x/∂low = 1 - u and ∂x/∂high = u.

    Attributes:
      low, high: numbers or 3-vectors, finite, low <= high (low = high: the constant).
    """

    low: Any
    high: Any

    def __post_init__(self):
        self._init_interval()

    def sample(self, key, shape=(), dtype=None):
        shape, dtype, (low, high) = self._broadcast(shape, dtype)
        x = low + (high - low) * jax.random.uniform(key, shape, dtype)
        # u < 1, but rounding of the product can put a sample just past high
        return jnp.where(x > high, high, x)


@_pytree
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LogUniform(AbstractInterval):
    """Log-uniform on [low, high]: log x is uniform on [log low, log high].

    For scale parameters spanning decades (stiffness, mass): each decade is drawn equally
    often. Reparameterized: x = exp(log low + (log high - log low) u), u ~ U[0, 1).

    Attributes:
      low, high: numbers or 3-vectors, finite, 0 < low <= high.
    """

    low: Any
    high: Any

    def __post_init__(self):
        values = self._init_interval()
        if values is not None and np.any(values[0] <= 0.0):
            raise ValueError(f"LogUniform low must be > 0, got low={_show(values[0])}")

    def sample(self, key, shape=(), dtype=None):
        shape, dtype, (low, high) = self._broadcast(shape, dtype)
        log_low, log_high = jnp.log(low), jnp.log(high)
        x = jnp.exp(log_low + (log_high - log_low) * jax.random.uniform(key, shape, dtype))
        # exp(log(v)) need not round back to v: keep samples inside [low, high]
        return jnp.where(x > high, high, jnp.where(x < low, low, x))


@_pytree
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Normal(AbstractDistribution):
    """Normal with mean `mean` and standard deviation `std`, independently per component.

    Unbounded: not for parameters that must stay positive (mass, stiffness, size), which
    reject it. Reparameterized: x = mean + std z, z ~ N(0, 1) from the key.

    Attributes:
      mean: number or 3-vector, finite.
      std:  number or 3-vector, finite, >= 0 (0: the constant mean).
    """

    mean: Any
    std: Any

    def __post_init__(self):
        values = self._init()
        if values is not None and np.any(values[1] < 0.0):
            raise ValueError(f"Normal std must be >= 0, got std={_show(values[1])}")

    def sample(self, key, shape=(), dtype=None):
        shape, dtype, (mean, std) = self._broadcast(shape, dtype)
        return mean + std * jax.random.normal(key, shape, dtype)

    def _support(self):
        values = self._concrete()
        if values is None:
            return None
        mean, std = np.broadcast_arrays(*values)
        spread = std > 0.0
        return np.where(spread, -math.inf, mean), np.where(spread, math.inf, mean)


def as_distribution(name: str, value) -> AbstractDistribution:
    """`value` if it is a distribution; a (low, high) pair becomes `Uniform(low, high)`.

    Raises:
      ValueError: anything else, or a bad pair; the message starts with `name`.
    """
    if isinstance(value, AbstractDistribution):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            return Uniform(*value)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
    raise ValueError(f"{name} must be a distribution (Uniform, LogUniform, Normal) or a "
                     f"(low, high) pair, got {value!r}")


def check_support(name: str, dist: AbstractDistribution, low=None, *, inclusive=True,
                  high=None):
    """Raise unless every sample of `dist` lies in the allowed values of argument `name`:
    >= low (> low unless `inclusive`) and <= high. Traced parameters are not checked."""
    support = dist._support()
    if support is None:
        return
    lowest, highest = (float(np.min(support[0])), float(np.max(support[1])))
    if low is not None and (lowest < low or (not inclusive and lowest <= low)):
        hint = " (a Normal is unbounded: use Uniform or LogUniform)" if lowest == -math.inf \
            else ""
        raise ValueError(f"{name} must be {'>=' if inclusive else '>'} {low:g}, but {dist!r} "
                         f"draws values down to {lowest:g}{hint}")
    if high is not None and highest > high:
        raise ValueError(f"{name} must be <= {high:g}, but {dist!r} draws values up to "
                         f"{highest:g}")


