"""Validation of builder input: every check raises a `ValueError` that names the argument and
quotes the value received. The scene builder and the settings objects use these and nothing
else, so every message has the same form."""

from __future__ import annotations

import math
import numbers

import jax
import numpy as np

QUAT_TOL = 1e-6  # |q| may differ from 1 by this much (rounding of user-typed quaternions)


def _real_scalar_array(value) -> bool:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    return (shape == () and dtype is not None and not isinstance(value, numbers.Number)
            and np.dtype(dtype).kind in "iuf")


def number(name, value, *, low=None, positive=False, high=None) -> float:
    """A finite real number (not a bool), optionally > 0, >= low, <= high. A 0-d NumPy or
    JAX array of a real dtype counts (what `jc.restitution_to_damping` returns)."""
    if _real_scalar_array(value):
        value = float(np.asarray(value))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return value


def vector(name, value, size, *, positive=False) -> np.ndarray:
    """A finite float vector of shape (size,)."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of {size} numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of {size} numbers, got {value!r}") from None
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {value!r} with shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and not np.all(arr > 0):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return arr


def direction(name, value) -> np.ndarray:
    """A non-zero 3-vector, normalized."""
    arr = vector(name, value, 3)
    norm = np.linalg.norm(arr)
    if norm < 1e-12:
        raise ValueError(f"{name} must be non-zero, got {value!r}")
    return arr / norm


def quaternion(name, value) -> np.ndarray:
    """A unit quaternion (w, x, y, z) within `QUAT_TOL`, returned normalized."""
    arr = vector(name, value, 4)
    norm = np.linalg.norm(arr)
    if abs(norm - 1.0) > QUAT_TOL:
        raise ValueError(f"{name} must be a unit quaternion (w, x, y, z), got {tuple(arr)} "
                         f"with norm {norm:.6g}")
    return arr / norm


def points(name, value, *, width=3) -> np.ndarray:
    """A finite (K, width) float array."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a (K, {width}) array of numbers, got {value!r}") \
            from None
    if arr.ndim != 2 or arr.shape[1] != width or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a finite (K, {width}) array, got shape {arr.shape}")
    return arr


def integer(name, value, *, low=None) -> int:
    """An int (not a bool), optionally >= low."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def integer_setting(settings, name, *, low=1) -> None:
    """Validate the int field `name` (>= low) of a frozen dataclass; store it as an int."""
    object.__setattr__(settings, name, integer(name, getattr(settings, name), low=low))


def index(name, value, count, *, world=False) -> int:
    """An index in [0, count), or -1 (the world) when `world`."""
    low = -1 if world else 0
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            low <= value < count):
        raise ValueError(f"{name} must be an index in [{low}, {count}), got {value!r}")
    return int(value)


def table(name, value, count, *, rows=None) -> np.ndarray:
    """A static (E, k) int table of indices in [0, count) (or -1, the world, when
    rows=="world"): the blocks of each element of a user term."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be an (E, k) array of indices, got {value!r}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an (E, k) array of indices, got {value!r}") from None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be a non-empty (E, k) int array of indices, got shape "
                         f"{arr.shape} and dtype {arr.dtype}")
    low = -1 if rows == "world" else 0
    bad = (arr < low) | (arr >= count)
    if bad.any():
        raise ValueError(f"{name} must hold indices in [{low}, {count}), got "
                         f"{arr[bad].tolist()[:5]}")
    return arr.astype(np.int32)


def choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def boolean(name, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def instance(name, value, cls, what):
    if not isinstance(value, cls):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def number_or_array(name, value, **limits):
    """`number`'s checks when `value` is a Python number; arrays (possibly traced, so not
    inspectable) pass unchanged. For helpers that are also used inside jax functions."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number(name, value, **limits)
    return value


def every_vertex_used(name, count, elements, element) -> None:
    """Each of the `count` vertices of argument `name` is a corner of some row of `elements`
    (an (E, k) index table of `element`s: "tetrahedron", "triangle")."""
    used = np.zeros(count, bool)
    used[np.asarray(elements).reshape(-1)] = True
    if not np.all(used):
        raise ValueError(f"{name}: vertex {int(np.argmin(used))} belongs to no {element}")


def leading_axis(name, tree, count, what) -> None:
    """Every leaf of the pytree argument `name` has leading axis `count` (of its `what`)."""
    for leaf in jax.tree.leaves(tree):
        shape = np.shape(leaf)
        if not shape or shape[0] != count:
            raise ValueError(f"{name} leaves must have a leading axis of the {count} {what}, "
                             f"got a leaf of shape {shape}")
