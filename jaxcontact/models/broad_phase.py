"""Broad phase: which pairs of bodies are contact candidates during a step.

At the start of every step the bodies' bounding spheres, grown by a margin that covers the
motion of the step, are swept along one axis (sort and sweep): after sorting the lower ends
of the intervals, each body is tested against the next `window` bodies in that order, in
O(N log N + N window) work with static shapes. The pairs found are compacted into a fixed
number of slots per pair of shapes; slots left over are marked unused, and more pairs than
slots (or more overlapping neighbours than `window`) set the overflow flag that `step`
reports in `StepInfo.overflow`. Pairs are fixed for the whole step, so the step's problem
stays a smooth function of the velocities; the margin makes every pair that can touch by the
end of the step a candidate at its start.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import quat_rotate, safe_norm
from jaxcontact.models import geometry
from jaxcontact.terms import Stage
from jaxcontact.types import Shape

PARTICLE = len(Shape)  # the broad-phase kind of particles (after the body shapes)

MODES = ("auto", "all_pairs", "sweep")


@dataclasses.dataclass(frozen=True)
class BroadPhase:
    """Broad-phase settings, passed to `Scene.build(broad_phase=...)`.

    Attributes:
      mode: "auto" (default: every pair is a candidate when the scene has at most
        `max_all_pairs` body pairs, else "sweep"), "all_pairs" (brute force: every pair of
        bodies, every step; exact but O(N²)) or "sweep" (sort and sweep, see the module).
      capacity: candidate slots per pair of shapes (e.g. box-box). None: `group_capacity`
        (a pile's packing bound for free bodies, the reach of its initial pose for a robot),
        at most the number of such pairs. Contact rows grow with it (box-box pairs have 17
        contact rows each).
      window: bodies after each one, in sweep order, that it is tested against; a denser
        pile needs more. None (default): `default_window` of the swept objects. Overflow is
        reported when it is too small.
      margin: distance (m) added to every bounding sphere, on top of the motion of the step
        (|v| Δt + |ω| r Δt + |g| Δt²).
      max_all_pairs: the "auto" threshold. Up to 32 pairs the sweep's slots would all be
        evaluated anyway (`terms._each` skips empty slots in chunks of 16, and only from
        32 slots on), so brute force costs as much and needs no sweep. Above, skipping
        empty slots pays: a chain of 10 boxes (36 pairs) stepped in 24 ms with all pairs
        and in 2.4 ms with the sweep (design note 23).
      max_particle_pairs: in "auto" mode, a group of (shape, particle) pairs, e.g. one ball
        against the nodes of a cloth, with at most this many pairs is tested as all pairs,
        outside the sweep. A body among the dense nodes of a mesh has far more neighbours
        in sweep order than `window` (a 0.1 m ball on a 16 x 16 sheet of 1 m: about 60),
        and a particle-body test is cheap.
    """

    mode: str = "auto"
    capacity: int | None = None
    window: int | None = None
    margin: float = 0.01
    max_all_pairs: int = 32
    max_particle_pairs: int = 4096

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("max_all_pairs", "max_particle_pairs") + tuple(
                name for name in ("capacity", "window") if getattr(self, name) is not None):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if (isinstance(self.margin, bool) or not isinstance(self.margin, numbers.Real)
                or not self.margin >= 0 or self.margin == float("inf")):
            raise ValueError(f"margin must be a finite number >= 0, got {self.margin!r}")


def default_capacity(kind_a, kind_b) -> int:
    """Candidate slots per object for a pair of kinds when `BroadPhase.capacity` is None, for
    the pairs of objects that move freely relative to each other (`group_capacity`).

    Equal spheres touch at most 12 neighbours (6 pairs per body); particles are balls too. A
    cube's bounding sphere (radius √3 h) overlaps those of all 26 cubes around it in a
    packing, whether they touch or not: 13 pairs per body for any group with a non-spherical
    shape. Denser candidate sets (long capsules in a bundle) report overflow and need an
    explicit capacity.
    """
    round_kinds = (Shape.SPHERE, PARTICLE)
    return 6 if kind_a in round_kinds and kind_b in round_kinds else 13


# A robot's pair of geoms is "within reach" in its initial pose when their centres are within
# this many times the sum of their bounding radii (`group_capacity`'s measured reason).
HELD_REACH = 2.0


def group_capacity(kind_a, kind_b, loose, held, held_near) -> int:
    """Slots of a group of candidate pairs when `BroadPhase.capacity` is None.

    Args:
      loose: the pairs whose objects move freely relative to each other (different bodies
        not joined, directly or through others): `default_capacity` per object of theirs,
        the packing bound of a pile.
      held: the pairs of geoms on bodies joined to each other (one articulated
        robot): the packing bound does not hold for them, nor is it needed, as its
        bodies cannot pile up, only fold. Their slots are the pairs within reach in
        the scene's initial pose (`held_near`: bounding spheres that overlap when
        their radii are doubled, `HELD_REACH`), plus one per geom of theirs for
        folds that bring farther pairs together. Measured on dm_control's dog under
        1 s of random controls, the most pairs at once in each group against its
        slots: capsule-capsule (its toes) 197 of 249, sphere-capsule 11 of 160,
        sphere-box 12 of 63, capsule-ellipsoid 5 of 114 (the sphere groups also hold
        its free ball's pairs). The pairs whose spheres overlap in the initial pose
        (95 capsule pairs after a step) are too few; the packing bound gave 3,600
        slots of the dog's 5,600 pairs, and 7 s steps.
      held_near: how many of `held` are within reach in the initial pose.
    """
    def members(pairs):
        return len({x for pair in pairs for x in pair})

    out = min(len(loose), default_capacity(kind_a, kind_b) * members(loose))
    return out + min(len(held), held_near + members(held))


# Up to this many swept objects each is tested against all its successors (n²/2 sphere tests,
# 33k at 256: little beside a step's solve). A robot's geoms crowd into one place along every
# axis: dm_control's dog's 126 overflowed 2 n^(2/3) = 51 on 72 % of its steps (note 67).
ALL_SUCCESSORS = 256


def default_window(n: int) -> int:
    """Successors each of n swept objects is tested against when `BroadPhase.window` is None:
    all of them up to `ALL_SUCCESSORS` objects, else 2 n^(2/3). In a dense pack of n similar
    objects a slab one object wide across the sweep axis holds about n^(2/3) of them (a cube
    of side n^(1/3); flatter piles fewer), and an object's interval reaches into its own slab
    and the next. A fixed window of 24 dropped touching pairs of a 400-sphere pile on every
    step (10 x 10 x 4: 80 successors), which then sank 4 cm into each other and burst apart
    at up to 10 m/s (design note 60)."""
    if n <= ALL_SUCCESSORS:
        return max(n - 1, 1)
    return math.ceil(2.0 * n ** (2.0 / 3.0))


def sweep(centre, radius, window):
    """Candidate pairs of spheres (centre (N, 3), radius (N,)) by sort and sweep.

    Returns (i, j, hit, overflow): (N·W,) body indices and whether the two spheres overlap,
    for every body and each of its W = min(window, N - 1) successors along the axis of
    largest spread; overflow is true if some body overlaps more successors than W.
    """
    n = centre.shape[0]
    w = min(window, n - 1)
    spread = jnp.var(centre, axis=0)
    x = centre @ (jnp.arange(3) == jnp.argmax(spread)).astype(centre.dtype)
    lo, hi = x - radius, x + radius
    order = jnp.argsort(lo)
    lo_s, hi_s = lo[order], hi[order]
    first = jnp.arange(n)
    later = first[:, None] + jnp.arange(1, w + 1)[None, :]           # (N, W) sorted positions
    inside = later < n
    later = jnp.minimum(later, n - 1)
    i, j = jnp.broadcast_to(order[:, None], later.shape), order[later]
    reach = radius[i] + radius[j]
    hit = inside & (lo_s[later] <= hi_s[:, None]) & (safe_norm(centre[i] - centre[j]) <= reach)
    beyond = first + w + 1
    overflow = jnp.any((beyond < n) & (lo_s[jnp.minimum(beyond, n - 1)] <= hi_s))
    return i.reshape(-1), j.reshape(-1), hit.reshape(-1), overflow


def excluded(a, b, n, keys):
    """Whether each pair (a, b), a < b, is among the static sorted `keys` a * n + b."""
    if not keys:
        return jnp.zeros(a.shape, bool)
    table = jnp.asarray(keys, jnp.int32)
    key = a * n + b
    found = jnp.clip(jnp.searchsorted(table, key), 0, len(keys) - 1)
    return table[found] == key


def group_slots(i, j, hit, shape, shape_a, shape_b, capacity, n, keys):
    """Compact the candidate pairs whose shapes are (shape_a, shape_b) into `capacity` slots.

    Returns (a, b, used, overflow): (capacity,) bodies of side a (shape_a) and b, whether the
    slot holds a pair (unused slots hold -1, -1), and whether pairs were dropped.
    """
    si, sj = shape[i], shape[j]
    forward = (si == shape_a) & (sj == shape_b)
    backward = (si == shape_b) & (sj == shape_a)
    a, b = jnp.where(forward, i, j), jnp.where(forward, j, i)
    if shape_a == shape_b:
        a, b = jnp.minimum(i, j), jnp.maximum(i, j)
    low, high = jnp.minimum(a, b), jnp.maximum(a, b)
    take = hit & (forward | backward) & ~excluded(low, high, n, keys)
    count = jnp.sum(take)
    (index,) = jnp.nonzero(take, size=capacity, fill_value=0)
    used = jnp.arange(capacity) < count
    return (jnp.where(used, a[index], -1), jnp.where(used, b[index], -1), used,
            count > capacity)


class SweepResult(NamedTuple):
    """Candidate slots of every group: {(kind_a, kind_b): (a, b, used)}, and overflow."""

    slots: dict
    overflow: jax.Array


@dataclasses.dataclass(frozen=True)
class Sweep(Stage):
    """The broad phase of a step, shared by every pair term that needs it.

    Objects are the geoms (kind: their shape) then, if some group has particles, the
    particles (kind `PARTICLE`), with indices n_geom + p. Each group (kind_a, kind_b, capacity) gets `capacity` slots of pairs
    (a of kind_a, b of kind_b); particle-particle pairs are not candidates.

    Attributes:
      settings: the `BroadPhase`.
      kinds: static tuple, the kind of every object.
      groups: static tuple of (kind_a, kind_b, capacity).
      excluded: sorted static keys a * n + b (a < b, object indices) that never collide.
      particle_kind: `PARTICLE`.
      placed: some geom sits off its body's centre of mass (or a body has several).
    """

    settings: BroadPhase
    kinds: tuple
    groups: tuple
    excluded: tuple = ()
    particle_kind: int = PARTICLE
    placed: bool = False

    def __call__(self, model, state):
        dtype = state.pos.dtype
        shapes = np.asarray(model.geom.shape, np.int32)
        radius = jnp.zeros((len(shapes),), dtype)
        for shape in set(shapes.tolist()):
            where = np.nonzero(shapes == shape)[0]
            mesh = np.maximum(np.asarray(model.geom.mesh, np.int32)[where], 0)
            vertices = model.mesh.vertices[mesh] if shape == Shape.MESH else None
            r = jax.vmap(lambda s, v: geometry.bounding_radius(shape, s, v),
                         in_axes=(0, 0 if vertices is not None else None))(
                model.geom.size[where], vertices)
            radius = radius.at[where].set(r)
        pos, vel, ang_vel, lever = state.pos, state.vel, state.ang_vel, radius
        if self.placed:
            # each geom's centre: its body's centre of mass moved by the geom's offset
            body = np.asarray(model.geom.body, np.int32)
            pos = state.pos[body] + jax.vmap(quat_rotate)(state.quat[body], model.geom.pos)
            vel, ang_vel = state.vel[body], state.ang_vel[body]
            lever = radius + safe_norm(model.geom.pos)
        gravity = model.dt * safe_norm(model.gravity)
        motion = model.dt * (safe_norm(vel) + safe_norm(ang_vel) * lever + gravity)
        particle_motion = model.dt * (safe_norm(state.particle_vel) + gravity)
        centre, reach = pos, radius + motion
        if len(self.kinds) > len(shapes):        # particles are swept too (some group has them)
            centre = jnp.concatenate([pos, state.particle_pos])
            reach = jnp.concatenate([reach, model.particle.radius + particle_motion])
        # only objects that collide are swept: drawn-only geoms (dm_control's dog has 164
        # of its 290) would fill the window of those near them
        swept = np.nonzero(np.asarray(self.kinds) >= 0)[0]
        window = self.settings.window or default_window(len(swept))
        i, j, hit, overflow = sweep(centre[swept], reach[swept] + self.settings.margin,
                                    window)
        i, j = jnp.asarray(swept, jnp.int32)[i], jnp.asarray(swept, jnp.int32)[j]
        kinds = jnp.asarray(self.kinds, jnp.int32)
        slots = {}
        for kind_a, kind_b, capacity in self.groups:
            *slot, dropped = group_slots(i, j, hit, kinds, kind_a, kind_b, capacity,
                                         len(self.kinds), self.excluded)
            slots[(kind_a, kind_b)] = tuple(slot)
            overflow = overflow | dropped
        return SweepResult(slots, overflow)
