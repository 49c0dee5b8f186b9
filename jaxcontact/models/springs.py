"""Distance springs between two bodies, or a body and a world point: a kind of physics
(`jaxcontact.models.kinds`): `Spring`, `add_spring` and `SpringTerm`.

A spring joins a point fixed in body a to a point fixed in body b (or a world point, b = -1):
U = k/2 (|Δ| - L)², Δ = p_a - p_b (thesis Eq. 111; ADD Eq. 23); in compliance form (thesis
Eq. 117, the `Dual` solver) its rows are e + λ/k = 0. Two row forms of this one energy,
chosen by the builder from the rest length at build time:
  - L > 0: the scalar stretch e = |Δ| - L (one row);
  - L = 0 (a soft ball joint): the vector e = Δ - L Δ/|Δ| (three rows, |e| = ||Δ| - L|), which
    stays smooth with Hessian k I where the points coincide; the scalar form has no
    curvature there. (With L > 0 the vector form's Jacobian grows as L/|Δ| near a fully
    compressed spring, which the scalar form does not.)
Both stay exact for any value of the differentiable leaf L.

"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.math import quat_rotate, safe_norm, safe_normalize
from jaxcontact.models import kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Spring(kinds.Params):
    """Distance springs between two bodies, or a body and a world anchor (thesis Eq. 111).

    U = k/2 C², C = |p_a - p_b| - L, with p_a = x_a + R_a a_a the attachment point on body a
    and p_b the one on body b (a world point for body -1). In compliance form (thesis Eq. 117,
    used by the `Dual` solver) its rows are e = Δ - L Δ/|Δ| (module docstring). A zero rest
    length makes a soft ball joint.

    Attributes:
      anchor_a:    (S, 3) attachment point in body a's frame, m.
      anchor_b:    (S, 3) attachment point in body b's frame (world coordinates if b = -1).
      rest_length: (S,)   L, m.
      stiffness:   (S,)   k, N/m.
      body_a, body_b: static tuples (S,) of body indices (body_b may be -1, the world).
    """

    anchor_a: Array
    anchor_b: Array
    rest_length: Array
    stiffness: Array
    body_a: tuple = static(default=())
    body_b: tuple = static(default=())



@dataclasses.dataclass
class SpringRecord:
    body_a: int
    body_b: int
    anchor_a: np.ndarray
    anchor_b: np.ndarray
    stiffness: float
    rest_length: float


def add_spring(scene, body_a, body_b=-1, *, stiffness, anchor_a=(0.0, 0.0, 0.0),
               anchor_b=None, rest_length=None) -> int:
    """Add a distance spring U = k/2 (|p_a - p_b| - L)² (thesis Eq. 111). Returns its index.

    Args:
      body_a, body_b: indices of two bodies; either may be -1 for a fixed world point.
      stiffness: k, N/m (> 0). The `Dual` solver sees it as the compliance 1/k.
      anchor_a: attachment point in body a's frame (default its centre of mass), or a
        world point when body_a = -1.
      anchor_b: attachment point in body b's frame, or a world point when body_b = -1.
        Default: body b's centre, or for the world the current world position of
        anchor_a (so the spring starts at its rest length when that is left out too).
      rest_length: L >= 0, m. Default: the current distance of the two points. 0 makes a
        soft ball joint.
    """
    a, b = scene.body_pair(body_a, body_b)
    k = check.number("stiffness", stiffness, positive=True)
    anchor_a = check.vector("anchor_a", anchor_a, 3)
    if a < 0:   # the world on side a: the same spring with its sides swapped
        if anchor_b is None:
            anchor_b = np.zeros(3)
        a, b, anchor_a, anchor_b = b, a, check.vector("anchor_b", anchor_b, 3), anchor_a
    world_a = scene.world_point(a, anchor_a)
    if anchor_b is None:
        anchor_b = world_a if b == -1 else np.zeros(3)
    anchor_b = check.vector("anchor_b", anchor_b, 3)
    world_b = anchor_b if b == -1 else scene.world_point(b, anchor_b)
    if rest_length is None:
        rest_length = float(np.linalg.norm(world_a - world_b))
    records = scene.records("spring")
    records.append(SpringRecord(a, b, anchor_a, anchor_b, k, check.number(
        "rest_length", rest_length, low=0)))
    return len(records) - 1


def _bodies(body_a, body_b, index):
    j = np.asarray(index, np.int64)
    return np.stack([np.asarray(body_a)[j], np.asarray(body_b)[j]], axis=1).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class SpringTerm(terms.RowTerm):
    """The springs `springs` of `model.spring`; `vector`: the three-row form (module)."""

    springs: tuple
    vector: bool = False
    n_bodies = 2

    @property
    def name(self):
        return "zero-length spring" if self.vector else "spring"

    def elements(self, model, state, control, stages):
        spring = model.spring
        bodies = _bodies(spring.body_a, spring.body_b, self.springs)
        particles = np.zeros((len(self.springs), 0), np.int32)
        index = jnp.asarray(self.springs, jnp.int32)
        params = {name: getattr(spring, name)[index]
                  for name in ("anchor_a", "anchor_b", "rest_length", "stiffness")}
        return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                              start=dofs.gather_start(state, bodies, particles), params=params)

    def rows(self, x, p, shared, dt):
        delta = (x.pos[0] + quat_rotate(x.quat[0], p["anchor_a"])
                 - x.pos[1] - quat_rotate(x.quat[1], p["anchor_b"]))
        if self.vector:
            error = delta - p["rest_length"] * safe_normalize(delta)
            return (terms.bilateral(error, jnp.full((3,), p["stiffness"])),)
        stretch = safe_norm(delta) - p["rest_length"]
        return (terms.bilateral(stretch[None], p["stiffness"][None]),)


def _pack(records, columns) -> Spring:
    return Spring(**{name: columns.column(records, name, *shape) for name, shape in (
        ("anchor_a", (3,)), ("anchor_b", (3,)), ("rest_length", ()), ("stiffness", ()))},
        body_a=columns.static(records, "body_a"), body_b=columns.static(records, "body_b"))


def _terms(records) -> list:
    """One term per row form, chosen by the rest length at build time (module docstring)."""
    out = []
    for vector in (False, True):
        springs = tuple(i for i, r in enumerate(records) if (r.rest_length == 0.0) == vector)
        if springs:
            out.append(SpringTerm(springs, vector))
    return out


KIND = kinds.register(kinds.Kind("spring", _pack, _terms, (add_spring,),
                                  joins=kinds.body_pairs))
