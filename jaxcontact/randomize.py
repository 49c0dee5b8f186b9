"""Domain randomization: a batch of Models and States sampled from ranges and a PRNG key.

`randomize` turns one built scene into `batch` variants whose every array leaf carries a
leading batch axis, so that a whole sweep is one `jax.vmap` over `(models, states)`:

    models, states = jc.randomize(model, state, key, 1024, friction=(0.2, 1.0),
                                  vel=((-1, -1, 0), (1, 1, 2)), yaw=(-3.14, 3.14))
    final, traj = jax.vmap(lambda m, s: jc.rollout(m, s, steps=T))(models, states)

Only array leaves change; the static structure (shapes, contact table, laws, solver) is that
of the input model, so every batch from the same scene runs through the same compiled program.

Each parameter draws from its own stream (the key folded with a fixed tag per parameter): a
sample depends only on (key, parameter, batch, body count, range), so adding or removing one
range does not change the values drawn for the others.
"""

from __future__ import annotations

import numbers
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import quat_mul
from jaxcontact.types import Model, State

# fixed stream tag of each parameter (jax.random.fold_in); never reorder, only append
_TAGS = {"mass": 0, "friction": 1, "stiffness": 2, "damping": 3, "pos": 4, "vel": 5,
         "ang_vel": 6, "yaw": 7}
_VECTOR = ("pos", "vel", "ang_vel")      # low/high: a number or a 3-vector
_SURFACE = ("friction", "stiffness", "damping")
# smallest allowed low end of each scalar range: mass and stiffness must stay positive
# (the builder rejects zero), friction and damping may be zero
_LOWER_BOUND = {"mass": (0.0, False), "stiffness": (0.0, False), "friction": (0.0, True),
                "damping": (0.0, True)}


def _check_range(name, value):
    """Validate a (low, high) pair; return (low, high) as float arrays of shape () or (3,)."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} must be a (low, high) pair, got {value!r}")
    ends = []
    for end in value:
        try:
            # strings and bools would convert silently (np.asarray("1", float) is 1.0)
            if isinstance(end, (bool, str, bytes)):
                raise TypeError
            arr = np.asarray(end, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a (low, high) pair of numbers, got {value!r}") \
                from None
        allowed = ((), (3,)) if name in _VECTOR else ((),)
        if arr.shape not in allowed:
            what = "a number or a 3-vector" if name in _VECTOR else "a number"
            raise ValueError(f"{name}: low and high must each be {what}, got {value!r} "
                             f"(shape {arr.shape})")
        ends.append(arr)
    low, high = ends
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if np.any(low > high):
        raise ValueError(f"{name} must have low <= high, got {value!r}")
    if name in _LOWER_BOUND:
        bound, inclusive = _LOWER_BOUND[name]
        if low < bound or (not inclusive and low <= bound):
            rel = ">=" if inclusive else ">"
            raise ValueError(f"{name} low must be {rel} {bound:g}, got {value!r}")
    return low, high


def _stream(key, name, planes=False):
    """The key of parameter `name`'s own stream (bodies and planes draw separately)."""
    return jax.random.fold_in(jax.random.fold_in(key, _TAGS[name]), int(planes))


def _uniform(key, shape, low, high, dtype):
    """Uniform samples in [low, high], shape `shape` (low/high broadcast on trailing axes)."""
    unit = jax.random.uniform(key, shape, dtype=dtype)
    low = jnp.asarray(low, dtype)
    high = jnp.asarray(high, dtype)
    # explicit broadcasting: the library runs with rank promotion disabled
    low = jnp.broadcast_to(low, shape)
    high = jnp.broadcast_to(high, shape)
    # the clip only guards against rounding of the product pushing a sample past `high`
    return jnp.clip(low + (high - low) * unit, low, high)


def _batched(tree, batch):
    """Every array leaf of `tree` repeated along a new leading axis of size `batch`."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), tree)


def randomize(model: Model, state: State, key, batch: int, *, mass=None, friction=None,
              stiffness=None, damping=None, pos=None, vel=None, ang_vel=None, yaw=None,
              planes: bool = True, **unknown):
    """Sample `batch` randomized copies of a scene, uniformly per scene and per body.

    Every range is a `(low, high)` pair with low <= high, sampled uniformly in [low, high]
    independently for each scene and each body (and each plane, for surface parameters). A
    range left as None keeps the built value. What each range means:

      mass:      (low, high) kg, replaces each body's mass. The principal inertia is scaled by
                 new_mass / old_mass, so the body keeps its shape and density distribution.
      friction:  (low, high) Coulomb μ, replaces each body's value (and each plane's, see
                 `planes`).
      stiffness: (low, high) normal stiffness k_n, replaces (bodies and planes).
      damping:   (low, high) normal damping k_d in N s/m, replaces (bodies and planes). It is
                 not re-derived from mass or stiffness: randomizing those alone changes the
                 restitution (ADD Eq. 22; see `jc.restitution_to_damping`).
      pos:       (low, high) offsets in m *added* to the built positions; low and high are
                 numbers (same range on x, y, z) or 3-vectors (one range per axis).
      vel:       (low, high) absolute linear velocities in m/s (replace the built ones),
                 numbers or 3-vectors as for `pos`.
      ang_vel:   (low, high) absolute angular velocities in rad/s, world frame (replace).
      yaw:       (low, high) angle in rad of a rotation about the world z axis applied to each
                 body's built orientation (q <- q_z(yaw) ⊗ q). Positions and velocities are not
                 rotated.

    Pair parameters combine the two sides by a mean (friction, damping) or a harmonic mean
    (stiffness), both of which lie between the two values, so with `planes=True` every
    contact's combined parameter also lies in [low, high].

    Args:
      model: an unbatched `Model` from `Scene.build` (N bodies, P planes).
      state: an unbatched `State` of the same scene.
      key: a `jax.random` key (raw uint32 key or typed key).
      batch: number of scenes B, an int >= 1.
      mass, friction, stiffness, damping, pos, vel, ang_vel, yaw: ranges as above, or None.
      planes: also randomize the planes' friction, stiffness and damping (default True);
        with False the planes keep their built values.

    Returns:
      (models, states): a `Model` and a `State` whose every array leaf has a leading axis of
      size B (e.g. `models.body.mass` (B, N), `models.plane.friction` (B, P),
      `states.pos` (B, N, 3), `states.time` (B,)); leaves not randomized are the built values
      repeated. Use them with `jax.vmap(fn, in_axes=(0, 0))(models, states)`.

    Raises:
      ValueError: unknown range names, a batch that is not an int >= 1, a model or state that
        is already batched, or a bad range (not a pair, wrong shape, non-finite, low > high,
        mass or stiffness low <= 0, friction or damping low < 0); the message names the
        argument and the value.
    """
    if unknown:
        raise ValueError(f"unknown randomization range(s) {sorted(unknown)!r}; known: "
                         f"{sorted(_TAGS)!r}")
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    batch = int(batch)
    if not isinstance(planes, bool):
        raise ValueError(f"planes must be a bool, got {planes!r}")
    n = model.n_body
    if jnp.shape(model.body.mass) != (n,) or jnp.shape(state.pos) != (n, 3):
        raise ValueError("randomize takes an unbatched scene: model.body.mass must have shape "
                         f"({n},) and state.pos ({n}, 3), got {jnp.shape(model.body.mass)} "
                         f"and {jnp.shape(state.pos)}")
    given = {"mass": mass, "friction": friction, "stiffness": stiffness, "damping": damping,
             "pos": pos, "vel": vel, "ang_vel": ang_vel, "yaw": yaw}
    ranges = {name: _check_range(name, value) for name, value in given.items()
              if value is not None}
    return _sample(model, state, key, ranges, batch, planes)


# One compiled program per scene structure, batch size and set of ranges: the range values are
# traced, so new values (or a new key) reuse it; sampling eagerly would instead compile each
# random primitive on first use, which costs seconds.
@partial(jax.jit, static_argnames=("batch", "planes"))
def _sample(model: Model, state: State, key, bounds, batch: int, planes: bool):
    """The sampling of `randomize` after validation; bounds maps a name to (low, high)."""
    dtype = model.body.mass.dtype
    n = model.n_body
    models = _batched(model, batch)
    states = _batched(state, batch)
    n_plane = jnp.shape(model.plane.offset)[0]

    def sample(name, shape):
        return _uniform(_stream(key, name), shape, *bounds[name], dtype)

    if "mass" in bounds:
        new_mass = sample("mass", (batch, n))
        scale = new_mass / model.body.mass[None, :]
        models = models.replace(body=models.body.replace(
            mass=new_mass, inertia=models.body.inertia * scale[:, :, None]))
    for name in _SURFACE:
        if name not in bounds:
            continue
        models = models.replace(geom=models.geom.replace(**{name: sample(name, (batch, n))}))
        if planes and n_plane:
            values = _uniform(_stream(key, name, planes=True), (batch, n_plane),
                              *bounds[name], dtype)
            models = models.replace(plane=models.plane.replace(**{name: values}))
    if "pos" in bounds:
        states = states.replace(pos=states.pos + sample("pos", (batch, n, 3)))
    if "vel" in bounds:
        states = states.replace(vel=sample("vel", (batch, n, 3)))
    if "ang_vel" in bounds:
        states = states.replace(ang_vel=sample("ang_vel", (batch, n, 3)))
    if "yaw" in bounds:
        half = 0.5 * sample("yaw", (batch, n))
        zero = jnp.zeros_like(half)
        q_yaw = jnp.stack([jnp.cos(half), zero, zero, jnp.sin(half)], axis=-1)
        states = states.replace(quat=quat_mul(q_yaw, states.quat))
    return models, states
