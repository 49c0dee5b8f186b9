"""The optimizers' compiled programs, kept per (loss function, ...) key.

A second call with the same loss function (another start, other `args`, a continuation
stage, another noise draw of a `fit`) reuses its program instead of tracing and compiling
again. Bounded: each entry keeps its loss (and what the loss closes over) alive.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np

_PROGRAMS: collections.OrderedDict = collections.OrderedDict()
KEEP = 32


def program(key, build):
    """The program cached under `key` (hashable: the loss function first), made by
    `build()` on a miss; the least recently used beyond `KEEP` are dropped."""
    if key not in _PROGRAMS:
        _PROGRAMS[key] = build()
        while len(_PROGRAMS) > KEEP:
            _PROGRAMS.popitem(last=False)
    _PROGRAMS.move_to_end(key)
    return _PROGRAMS[key]


def layout(x):
    """A hashable key of a pytree's structure, shapes and dtypes (what a program of the
    flattened x depends on)."""
    return (jax.tree.structure(x), tuple((np.shape(v), jnp.result_type(v))
                                         for v in jax.tree.leaves(x)))
