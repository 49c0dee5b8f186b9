"""The kinds of physics a scene can hold beyond bodies and particles, and their registry.

A kind is one file in `jaxcontact/models/` (springs.py, joints.py, motors.py, attachments.py,
solids.py, cloth.py, energy.py): its parameters (a pytree class, stored as `model.<name>`),
its builder hook (a function `add_x(scene, ...)` that validates the user's arguments and
appends a typed record to `scene.records(name)`; the scene offers it as the method
`scene.add_x(...)`), and the terms it contributes to the step. The file ends by calling
`register(Kind(...))`; `jaxcontact.scene` finds the kind here, so adding one is that file plus
its import in `jaxcontact/models/__init__.py`, and nothing else is wired by hand.

Bodies, geoms, planes, meshes, obstacles and particles are not kinds: they are the blocks of
degrees of freedom and the shapes that contact acts on (`jaxcontact.scene.compile`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Kind:
    """A registered kind of physics.

    Attributes:
      name: its records' name in the scene and its parameters' attribute of `Model`
        (`model.spring`).
      pack: pack(records, columns) -> its parameters: the records (possibly none) as arrays
        of the scene's dtype (`Columns`). Differentiable values are leaves; structure
        (indices, kinds) is static.
      terms: terms(records) -> the step's terms for these records (none for none), each
        with its static table of elements (`jaxcontact.terms`).
      builders: the builder hooks, functions f(scene, ...) offered as `scene.<f.__name__>`.
      joins: joins(records) -> the (body_a, body_b) pairs its elements hold together (the
        world, -1, is no body), or None: the bodies of a group move as one, so the step
        resolves their velocities only as finely as the roundings of all of them allow.
    """

    name: str
    pack: Callable
    terms: Callable
    builders: tuple = ()
    joins: Callable | None = None


class Params:
    """Base of a kind's parameters (a flax struct dataclass): `size` is its number of elements,
    the length of its first static field (an index tuple: one entry per element)."""

    @property
    def size(self) -> int:
        first = next(f for f in dataclasses.fields(self)
                     if not f.metadata.get("pytree_node", True))
        return len(getattr(self, first.name))


KINDS: dict[str, Kind] = {}
_BUILDERS: dict[str, Callable] = {}
# names `Model` and the scene builder already use for their own fields and methods
RESERVED = frozenset({"body", "geom", "plane", "mesh", "obstacle", "particle", "contact",
                      "kinds", "gravity", "dt", "terms", "solver"})


def register(kind: Kind) -> Kind:
    """Add `kind` to the registry (in import order, which is the order of its terms in the
    step) and offer its builder hooks on every `jc.Scene`. Returns it."""
    if not isinstance(kind, Kind):
        raise ValueError(f"kind must be a jaxcontact.models.kinds.Kind, got {kind!r}")
    if kind.name in KINDS or kind.name in RESERVED:
        raise ValueError(f"kind name {kind.name!r} is already taken")
    for hook in kind.builders:
        if hook.__name__ in _BUILDERS or not hook.__name__.startswith(("add_", "attach")):
            raise ValueError(f"builder hook {hook.__name__!r} of kind {kind.name!r} is taken "
                             "or not named add_* / attach*")
    KINDS[kind.name] = kind
    _BUILDERS.update({hook.__name__: hook for hook in kind.builders})
    return kind


def body_pairs(records) -> list:
    """`Kind.joins` of a kind whose records each join `body_a` and `body_b` (joints, springs)."""
    return [(r.body_a, r.body_b) for r in records]


def builder(name: str) -> Callable | None:
    """The builder hook called `name` (e.g. "add_spring"), or None."""
    return _BUILDERS.get(name)


def builder_names() -> tuple:
    return tuple(_BUILDERS)


class Columns:
    """Records' fields as arrays of one float dtype (the scene's): what `Kind.pack` uses."""

    def __init__(self, dtype):
        self.dtype = dtype

    def array(self, values, *trailing):
        """Values as a float array of shape (-1, *trailing)."""
        return jnp.asarray(np.asarray(values, dtype=float).reshape((-1,) + trailing),
                           dtype=self.dtype)

    def column(self, records, name, *trailing):
        """Field `name` of every record, stacked: (R, *trailing)."""
        return self.array([getattr(r, name) for r in records], *trailing)

    def stacked(self, records, name, *trailing):
        """A per-element field of mesh records (each holding many elements), over all of them."""
        parts = [np.reshape(getattr(r, name), (-1,) + trailing) for r in records]
        return self.array(np.concatenate(parts or [np.zeros((0,) + trailing)]), *trailing)

    def per_element(self, records, name, count):
        """A mesh-wide scalar of each record repeated for its `count(record)` elements."""
        return self.array([getattr(r, name) for r in records for _ in range(count(r))])

    @staticmethod
    def table(records, name, width) -> tuple:
        """An integer per-element table (E, width) of mesh records, as static tuples."""
        rows = np.concatenate([getattr(r, name) for r in records]
                              or [np.zeros((0, width), np.int64)])
        return tuple(map(tuple, rows.tolist()))

    @staticmethod
    def static(records, name) -> tuple:
        """Field `name` of every record as a static tuple (indices, kinds, flags)."""
        return tuple(getattr(r, name) for r in records)

    def as_float(self, x):
        """A user parameter leaf as an array: floats in the scene's dtype, others as given."""
        x = jnp.asarray(x)
        return x.astype(self.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x
