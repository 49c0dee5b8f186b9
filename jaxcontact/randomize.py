"""Domain randomization: a batch of Models and States sampled from ranges and a PRNG key.

`randomize` turns one built scene into `batch` variants whose every array leaf carries a
leading batch axis, so that a whole sweep is one `jax.vmap` over `(models, states)`:

    models, states = jc.randomize(model, state, key, 1024, friction=(0.2, 1.0),
                                  vel=((-1, -1, 0), (1, 1, 2)), yaw=(-3.14, 3.14))
    final, traj = jax.vmap(lambda m, s: jc.rollout(m, s, steps=T))(models, states)

Only array leaves change; the static structure (shapes, contact table, laws, solver) is that
of the input model, so every batch from the same scene runs through the same compiled program.

The sampling is `jaxcontact.domain.randomizer`'s (the functional form, for a fresh batch per
training iteration, other distributions and differentiable ranges): scene b is randomized with
key b of `jax.random.split(key, batch)`. Each parameter draws from its own stream (that key
folded with a fixed tag per parameter): a sample depends only on (key, parameter, batch, body
count, range), so adding or removing one range does not change the values drawn for the others.
"""

from __future__ import annotations

import numbers
from functools import partial

import jax

from jaxcontact import domain
from jaxcontact.compiling import jit
from jaxcontact.types import Model, State

_RANGES = ("mass", "friction", "stiffness", "damping", "pos", "vel", "ang_vel", "yaw")


def randomize(model: Model, state: State, key, batch: int, *, mass=None, friction=None,
              stiffness=None, damping=None, pos=None, vel=None, ang_vel=None, yaw=None,
              planes: bool = True, **unknown):
    """Sample `batch` randomized copies of a scene, uniformly per scene and per body.

    Every range is a `(low, high)` pair with low <= high, sampled uniformly in [low, high]
    independently for each scene and each body (and each plane, for surface parameters); a
    distribution of `jaxcontact.domain` is also accepted in its place. A range left as None
    keeps the built value. What each range means:

      mass:      (low, high) kg, replaces each body's mass. The principal inertia is scaled by
                 new_mass / old_mass, so the body keeps its shape and density distribution.
      friction:  (low, high) Coulomb μ, replaces each body's value (and each plane's, see
                 `planes`).
      stiffness: (low, high) normal stiffness k_n, replaces (bodies and planes).
      damping:   (low, high) normal damping k_d in N s/m, replaces (bodies and planes). It is
                 not re-derived from mass or stiffness: randomizing those alone changes the
                 restitution (see `jc.restitution_to_damping`).
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
                         f"{sorted(_RANGES)!r}")
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    # the sampling is `domain.randomizer`'s, one scene per key of `batch` split keys
    fn = domain.randomizer(mass=mass, friction=friction, stiffness=stiffness, damping=damping,
                           pos=pos, vel=vel, ang_vel=ang_vel, yaw=yaw, planes=planes)
    return _sample(fn, model, state, key, int(batch))


# One compiled program per scene structure, batch size and set of ranges: the randomizer's
# distributions are traced, so new range values (or a new key) reuse it; sampling eagerly would
# instead compile each random primitive on first use, which costs seconds.
@partial(jit, static_argnames=("batch",))
def _sample(fn: domain.Randomizer, model: Model, state: State, key, batch: int):
    """`batch` scenes randomized by `fn`, one per key split from `key`."""
    return jax.vmap(fn, in_axes=(None, None, 0))(model, state, jax.random.split(key, batch))
