"""Domain randomization as composable functions of a PRNG key, and risk measures of a batch.

A randomizer maps one unbatched scene and a key to a randomized scene; `jax.vmap` over keys
makes a batch, and a policy-training loop draws a fresh one each iteration:

    fn = domain.randomizer(friction=domain.Uniform(0.2, 1.0), mass=domain.LogUniform(0.5, 2.0),
                           gravity=domain.Normal((0.0, 0.0, -9.81), 0.1))
    keys = jax.random.split(key, 1024)
    models, states = jax.vmap(fn, in_axes=(None, None, 0))(model, state, keys)
    final, traj = jax.vmap(lambda m, s: jc.rollout(m, s, steps=T))(models, states)
    loss = domain.cvar(final.pos[:, 0, 2], 0.1)     # the mean of the worst 10 %

The distributions (`jaxcontact.distributions`) are pytrees with reparameterized samples, and
so is a randomizer: ranges passed to a jitted function, directly or inside a randomizer, are
traced (new values reuse the program), and a loss averaged over the batch is differentiable
with respect to them. Only array leaves change: the static structure (shapes, contact table,
laws, solver) is the input model's, so every randomized scene runs the same compiled step.

Each parameter draws from its own stream, the key folded with a fixed tag per parameter (and
bodies and planes separately), and every body draws whether it is selected or not: a sample
depends only on (key, parameter, body or plane count, distribution), so adding a range, or
changing `bodies`, never changes the values drawn for another parameter or for a selected body.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import validate as check
from jaxcontact.distributions import (AbstractDistribution, LogUniform, Normal, Uniform,
                                      as_distribution, check_support)
from jaxcontact.math import quat_mul
from jaxcontact.models.contact import restitution_to_damping
from jaxcontact.models.contacts import HOW, combine
from jaxcontact.types import Model, State, static

# fixed stream tag of each parameter (jax.random.fold_in); never reorder, only append
_TAGS = {"mass": 0, "friction": 1, "stiffness": 2, "damping": 3, "pos": 4, "vel": 5,
        "ang_vel": 6, "yaw": 7, "restitution": 8, "gravity": 9, "size": 10}
_VECTOR = ("pos", "vel", "ang_vel", "gravity")   # numbers or 3-vectors; the others numbers
_SURFACE = ("friction", "stiffness", "damping")
# the values a parameter may take: (lowest, whether lowest itself is allowed, highest); mass,
# stiffness and size must stay positive (the builder rejects zero)
_ALLOWED = {"mass": (0.0, False, None), "stiffness": (0.0, False, None),
            "size": (0.0, False, None), "friction": (0.0, True, None),
            "damping": (0.0, True, None), "restitution": (0.0, True, 1.0)}


def _stream(key, name: str, planes: bool = False):
    """The key of parameter `name`'s own stream (bodies and planes draw separately)."""
    return jax.random.fold_in(jax.random.fold_in(key, _TAGS[name]), int(planes))


def _distributions(given: dict) -> dict:
    """Validate the ranges of `randomizer` (name -> distribution, (low, high) or None); returns
    name -> distribution for those given, in a fixed order."""
    out = {}
    for name in _TAGS:
        if given.get(name) is None:
            continue
        dist = as_distribution(name, given[name])
        shapes = ((), (3,)) if name in _VECTOR else ((),)
        if dist.shape not in shapes:
            what = "numbers or 3-vectors" if name in _VECTOR else "numbers"
            raise ValueError(f"{name} must be a distribution of {what}, got {dist!r} "
                             f"(shape {dist.shape})")
        if name in _ALLOWED:
            low, inclusive, high = _ALLOWED[name]
            check_support(name, dist, low, inclusive=inclusive, high=high)
        out[name] = dist
    return out


def _body_indices(bodies):
    if bodies is None:
        return None
    if not isinstance(bodies, (tuple, list, range)) or len(bodies) == 0:
        raise ValueError(f"bodies must be a non-empty tuple of body indices, got {bodies!r}")
    out = tuple(check.integer(f"bodies[{i}]", b, low=0) for i, b in enumerate(bodies))
    if len(set(out)) != len(out):
        raise ValueError(f"bodies must not repeat an index, got {bodies!r}")
    return out


def randomizer(*, mass=None, friction=None, stiffness=None, damping=None, restitution=None,
               gravity=None, size=None, pos=None, vel=None, ang_vel=None, yaw=None,
               bodies=None, planes=True, **unknown) -> "Randomizer":
    """A function `fn(model, state, key) -> (model, state)` randomizing one unbatched scene.

    Every range is a distribution (`Uniform`, `LogUniform`, `Normal`) or a plain
    `(low, high)` pair meaning `Uniform(low, high)`, sampled independently for each body (and
    each plane, for surface parameters); a range left as None keeps the scene's value. Batch
    it with `jax.vmap(fn, in_axes=(None, None, 0))(model, state, keys)`. What each means:

      mass:        kg, replaces each body's mass. The principal inertia is scaled by
                   new_mass / old_mass, so the body keeps its shape and density distribution.
      friction:    Coulomb μ >= 0, replaces each body's value (and each plane's, see `planes`).
      stiffness:   normal stiffness k_n > 0, replaces (bodies and planes).
      damping:     normal damping k_d >= 0 in N s/m, replaces (bodies and planes). It is not
                   re-derived from mass or stiffness: randomizing those alone changes the
                   restitution (`jc.damping_to_restitution`); use `restitution` to hold or randomize that.
      restitution: coefficient of restitution e in (0, 1] of each body bouncing on plane 0
                   (the ground), for the `linear` normal law. Sets the contact damping of the
                   damped law, k_d = `restitution_to_damping(e, k, m)`, with the body's mass m and
                   k the pair stiffness with plane 0 (the harmonic mean of the body's and the
                   plane's, both as randomized). A pair's damping is the mean of its sides', so
                   each plane's damping is set to 0 and each body's to 2 k_d: its contact with
                   plane 0 (and with any plane of the same stiffness) has damping k_d exactly.
                   Contacts between two bodies, or with an obstacle, are not set to e: they
                   get the mean of the sides' dampings (two alike bodies: 2 k_d, 2√2 times
                   the law's at their reduced mass m/2, so they rebound less than e). The scene
                   must have a plane, `planes` be True, every body be randomized, and there be
                   no particles (their contacts with planes would lose the planes' damping);
                   not together with `damping`.
      gravity:     (3,) m/s², replaces `model.gravity` (e.g. `Normal((0, 0, -9.81), 0.1)`).
      size:        factor > 0 scaling each body uniformly: sphere radius, box half sizes and
                   edge rounding, capsule radius and half length, mesh vertices (and its face
                   planes). The mass is kept and the inertia scaled by factor², so the mass
                   properties stay those of the scaled solid. Anchors of springs, joints,
                   attachments and user energies stay where they are in the body frame.
      pos:         offsets in m *added* to the positions; numbers (one range on x, y, z) or
                   3-vectors (one range per axis).
      vel:         absolute linear velocities in m/s (replace), as for `pos`.
      ang_vel:     absolute angular velocities in rad/s, world frame (replace).
      yaw:         angle in rad of a rotation about the world z axis applied to each body's
                   orientation (q <- q_z(yaw) ⊗ q). Positions and velocities are not rotated.

    Pair friction and damping combine the two sides by a mean and stiffness by a harmonic
    mean (`jaxcontact.models.contacts.combine`), both of which lie between the two values.
    Obstacles and particles keep their surface parameters.

    Args:
      mass, friction, stiffness, damping, restitution, gravity, size, pos, vel, ang_vel, yaw:
        ranges as above, or None.
      bodies: the indices of the bodies to randomize (default all); the others keep their
        values (every body still draws, so the selection does not change the draws).
      planes: also randomize the planes' friction, stiffness and damping (default True).

    Returns:
      A `Randomizer`: a pytree whose leaves are the distributions' parameters, called as
      `fn(model, state, key) -> (model, state)` with the shapes of the input (for N bodies
      and P planes, `model.body.mass` (N,), `model.plane.friction` (P,), `state.pos` (N, 3)).

    Raises:
      ValueError: unknown names, a bad range (not a distribution or pair, a distribution of
        the wrong shape, values outside those allowed above: mass, stiffness or size <= 0,
        friction or damping < 0, restitution outside [0, 1]; a Normal for a parameter with a
        bound), bad `bodies` or `planes`, or both `damping` and `restitution`; when called, a
        batched scene, a body index out of range, a mesh shared by two bodies under `size`,
        or a scene that `restitution` does not support. The message names the argument and
        the value.
    """
    if unknown:
        raise ValueError(f"unknown randomization range(s) {sorted(unknown)!r}; known: "
                         f"{sorted(_TAGS)!r}")
    dists = _distributions({"mass": mass, "friction": friction, "stiffness": stiffness,
                           "damping": damping, "restitution": restitution, "gravity": gravity,
                           "size": size, "pos": pos, "vel": vel, "ang_vel": ang_vel, "yaw": yaw})
    if "damping" in dists and "restitution" in dists:
        raise ValueError(f"give damping or restitution, not both: got damping={damping!r}, "
                         f"restitution={restitution!r}")
    return Randomizer(dists=dists, bodies=_body_indices(bodies),
                      planes=check.boolean("planes", planes))


@struct.dataclass
class Randomizer:
    """What `randomizer` returns: `fn(model, state, key) -> (model, state)`.

    Attributes:
      dists:  dict name -> distribution (the leaves: traced when passed to `jit`).
      bodies: static tuple of the body indices randomized, or None for all.
      planes: static bool, the planes' surface parameters are randomized too.
    """

    dists: dict
    bodies: tuple | None = static(default=None)
    planes: bool = static(default=True)

    # Equal and hashed by identity, like a function: a randomizer may also be a static
    # argument of `jit` (e.g. `Task.reset` of `jaxcontact.control`), where comparing its
    # arrays by value would be ambiguous (and a dict is not hashable).
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __call__(self, model: Model, state: State, key):
        n = model.n_body
        if jnp.shape(model.body.mass) != (n,) or jnp.shape(state.pos) != (n, 3):
            raise ValueError("a randomizer takes an unbatched scene: model.body.mass must have "
                             f"shape ({n},) and state.pos ({n}, 3), got "
                             f"{jnp.shape(model.body.mass)} and {jnp.shape(state.pos)}")
        if self.bodies is not None and max(self.bodies) >= n:
            raise ValueError(f"bodies must hold indices in [0, {n}), got {self.bodies!r}")
        if "restitution" in self.dists:
            self._check_restitution(model)
        dists, dtype = self.dists, model.body.mass.dtype
        chosen = None if self.bodies is None else np.isin(np.arange(n), self.bodies)
        # geoms take their body's draw (a body's geoms share its surface and scale)
        of_geom = np.asarray(model.geom.body, np.int32)

        def draw(name, shape, planes=False):
            return dists[name].sample(_stream(key, name, planes), shape, dtype)

        def put(old, new, rows=None):
            """`new` on the chosen bodies (axis 0; with `rows`, on the rows of them), `old`
            on the others."""
            if chosen is None:
                return new
            mask = chosen if rows is None else chosen[rows]
            return jnp.where(mask.reshape(mask.shape + (1,) * (jnp.ndim(new) - 1)), new, old)

        body, geom, plane, mesh = model.body, model.geom, model.plane, model.mesh
        if "mass" in dists:
            mass = put(body.mass, draw("mass", (n,)))
            body = body.replace(mass=mass, inertia=body.inertia * (mass / body.mass)[:, None])
        if "size" in dists:
            scale = put(jnp.ones_like(body.mass), draw("size", (n,)))
            body = body.replace(inertia=body.inertia * (scale * scale)[:, None])
            scale = scale[of_geom]
            geom = geom.replace(size=geom.size * scale[:, None], rounding=geom.rounding * scale,
                                pos=geom.pos * scale[:, None])
            mesh = _scale_meshes(mesh, geom.mesh, scale)
        n_plane = jnp.shape(plane.offset)[0]
        for name in _SURFACE:
            if name in dists:
                geom = geom.replace(**{name: put(getattr(geom, name),
                                                 draw(name, (n,))[of_geom], of_geom)})
                if self.planes and n_plane:
                    plane = plane.replace(**{name: draw(name, (n_plane,), planes=True)})
        if "restitution" in dists:
            # pair stiffness with plane 0, and the damping that gives e for it
            k = combine(geom.stiffness, plane.stiffness[0], HOW["stiffness"])
            k_d = restitution_to_damping(draw("restitution", (n,))[of_geom], k,
                                         body.mass[of_geom])
            # pair damping is the mean of the sides' (HOW["damping"]): with the planes' at 0,
            # a body's 2 k_d makes the body-plane pair's k_d
            geom = geom.replace(damping=2.0 * k_d)
            plane = plane.replace(damping=jnp.zeros_like(plane.damping))
        model = model.replace(body=body, geom=geom, plane=plane, mesh=mesh)
        if "gravity" in dists:
            model = model.replace(gravity=draw("gravity", (3,)))

        if "pos" in dists:
            state = state.replace(pos=put(state.pos, state.pos + draw("pos", (n, 3))))
        for name in ("vel", "ang_vel"):
            if name in dists:
                state = state.replace(**{name: put(getattr(state, name), draw(name, (n, 3)))})
        if "yaw" in dists:
            half = 0.5 * draw("yaw", (n,))
            zero = jnp.zeros_like(half)
            q_yaw = jnp.stack([jnp.cos(half), zero, zero, jnp.sin(half)], axis=-1)
            state = state.replace(quat=put(state.quat, quat_mul(q_yaw, state.quat)))
        return model, state

    def _check_restitution(self, model: Model):
        """The scenes where `restitution` gives each body its e on plane 0 and changes no other
        contact's damping than the randomized bodies'."""
        if jnp.shape(model.plane.offset)[0] == 0:
            raise ValueError("restitution is that of each body on plane 0, but the scene has "
                             "no plane")
        if not self.planes:
            raise ValueError("restitution sets the planes' damping to 0 (each body carries "
                             "all of its plane contacts' damping): it needs planes=True, got "
                             "planes=False")
        if self.bodies is not None and len(self.bodies) < model.n_body:
            raise ValueError("restitution sets the planes' damping to 0, which would change "
                             "the plane contacts of the bodies not randomized: it needs every "
                             f"body, got bodies={self.bodies!r} of {model.n_body}")
        if model.n_particle:
            raise ValueError("restitution sets the planes' damping to 0, which would change "
                             "the particles' plane contacts: the scene has "
                             f"{model.n_particle} particle(s)")


def _scale_meshes(mesh, mesh_of_geom, scale):
    """Mesh vertices and face-plane offsets scaled by their geom's factor (G,)."""
    owner = {}
    for b, g in enumerate(mesh_of_geom):
        if g >= 0:
            owner.setdefault(g, []).append(b)
    shared = {g: bs for g, bs in owner.items() if len(bs) > 1}
    if shared:
        raise ValueError(f"size cannot scale a mesh shared by several geoms independently: "
                         f"mesh -> geoms {shared!r}")
    if not owner:
        return mesh
    meshes, bodies = (np.array(v) for v in zip(*((g, bs[0]) for g, bs in owner.items())))
    factor = jnp.ones(jnp.shape(mesh.vertices)[:1], scale.dtype).at[meshes].set(scale[bodies])
    # a face plane (n, o), n·x <= o, of the scaled hull is (n, factor o)
    return mesh.replace(vertices=mesh.vertices * factor[:, None, None],
                        planes=mesh.planes.at[:, :, 3].multiply(factor[:, None]))


def compose(*fns):
    """Apply randomizers (or any `fn(model, state, key) -> (model, state)`) in order.

    Function i gets `jax.random.fold_in(key, i)`, so each draws from its own stream; a later
    function sees (and may overwrite) what the earlier ones drew.

    Raises:
      ValueError: an argument that is not callable (the message names its position).
    """
    for i, fn in enumerate(fns):
        if not callable(fn):
            raise ValueError(f"compose: argument {i} must be a function (model, state, key) -> "
                             f"(model, state), got {fn!r}")

    def composed(model: Model, state: State, key):
        for i, fn in enumerate(fns):
            model, state = fn(model, state, jax.random.fold_in(key, i))
        return model, state

    return composed


def cvar(losses, alpha):
    """Conditional value at risk: the mean of the worst (largest) alpha-fraction of `losses`.

    With the B losses sorted in decreasing order ℓ_(1) >= ... >= ℓ_(B),

    .. math::
        \\mathrm{CVaR}_\\alpha = \\frac{1}{\\alpha B} \\sum_{i=1}^{B} w_i \\ell_{(i)},
        \\qquad w_i = \\min(\\max(\\alpha B - i + 1, 0), 1),

    the empirical CVaR of Rockafellar & Uryasev (2000, doi:10.21314/JOR.2000.038): the mean
    of the k worst losses when αB = k is whole; otherwise the boundary loss ℓ_(k+1) enters
    with its fraction. alpha = 1 is the mean, alpha -> 0 the maximum. Sort-based, so the
    gradient reaches only the tail's losses (weight w_i / (αB) each); it is differentiable
    in alpha too (almost everywhere).

    Args:
      losses: (B,) array of losses, B >= 1.
      alpha: the tail fraction, in (0, 1]; checked where concrete.

    Returns:
      () the CVaR, in the dtype of `losses`.

    Raises:
      ValueError: losses not a non-empty 1-D array, or alpha not a finite number in (0, 1].
    """
    losses = jnp.asarray(losses)
    if losses.ndim != 1 or losses.shape[0] == 0:
        raise ValueError(f"losses must be a non-empty 1-D array (B,), got shape {losses.shape}")
    if not isinstance(alpha, jax.core.Tracer):
        if isinstance(alpha, (bool, str, bytes)) or np.shape(alpha) != ():
            raise ValueError(f"alpha must be a number in (0, 1], got {alpha!r}")
        try:
            value = float(alpha)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be a number in (0, 1], got {alpha!r}") from None
        if not 0.0 < value <= 1.0:   # also false for NaN
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    count = alpha * losses.shape[0]   # αB samples in the tail, the last one maybe in part
    worst = -jnp.sort(-losses)
    weight = jnp.clip(count - jnp.arange(losses.shape[0], dtype=losses.dtype), 0.0, 1.0)
    return jnp.sum(weight * worst) / count


__all__ = ["AbstractDistribution", "LogUniform", "Normal", "Randomizer", "Uniform", "compose",
           "cvar", "randomizer"]
