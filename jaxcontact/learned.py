"""Neural potentials as user terms: a flax network's output is a potential energy of the step.

Zhong, Dey and Chakraborty (NeurIPS 2021, Sec. 2 and App. B) learn a system's potential V as
a multilayer perceptron (Lagrangian and Hamiltonian networks) and its contact properties
(μ, restitution) jointly from short trajectories. Here the network is one more
`Scene.add_energy` term, so its forces, its Hessian for Newton and the implicit gradients of
a rollout with respect to its weights all come from autodiff, as for every built-in term:

    module = MyMLP()                                      # any flax.linen module -> scalar
    params = module.init(key, jnp.zeros(n_features))
    t = jc.learned.add_network_energy(scene, module, params, particles=[[0, 1, 2]],
                                      features=lambda local: ...)   # the network's input
    model, state = scene.build()
    model = jc.learned.with_network_params(model, t, new_params)    # e.g. inside a loss
    params = jc.learned.network_params(model, t)

Storage: `model.energy[t]` holds one copy of `params` per element (leaves (E, ...), the v1
contract of user terms). The network is shared: `with_network_params` broadcasts one set of
weights to all E elements, so a gradient through it sums the elements' contributions, and
`network_params` returns element 0's copy.

The potential is differentiated twice by the Newton solver (and once more for a gradient
with respect to the weights), so use smooth activations (tanh, softplus), not ReLU.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.dofs import Local
from jaxcontact.math import safe_atan2
from jaxcontact.models.energy import UserEnergy
from jaxcontact.scene import Scene

__all__ = ["add_network_energy", "chain_angles", "network_params", "positions",
           "with_network_params"]


def positions(local: Local):
    """Default network input: the element's body positions then particle positions, (3 kb +
    3 kp,) (end of step)."""
    return jnp.concatenate([local.pos.reshape(-1), local.particle_pos.reshape(-1)])


def chain_angles(points, pivot, *, axis=(0.0, 1.0, 0.0), down=(0.0, 0.0, -1.0)):
    """Generalized coordinates of a planar chain: the angle of each link about `axis`.

    Link i joins points[i-1] (pivot for i = 0) to points[i]; its angle θ_i is measured from
    `down` (θ = 0 hangs straight down), positive by the right-hand rule about `axis`: for a
    link direction v, θ = atan2(v · (axis × down), v · down). These are the generalized
    positions of Zhong et al.'s chained pendulums (CP3, App. H), for a Lagrangian network's
    potential V(θ).

    Args:
      points: (n, 3) positions along the chain.
      pivot: (3,) the fixed end of link 0.
      axis, down: unit vectors, orthogonal: the plane's normal and the angle's origin.

    Returns:
      (n,) angles in (-π, π].
    """
    points = jnp.asarray(points)
    axis, down = jnp.asarray(axis, points.dtype), jnp.asarray(down, points.dtype)
    start = jnp.concatenate([jnp.asarray(pivot, points.dtype)[None, :], points[:-1]])
    links = points - start
    side = jnp.cross(axis, down)
    return safe_atan2(links @ side, links @ down)


class _NetworkPotential:
    """fn(local, params) of a network term: scale · module.apply(params, features(local)).

    Identity equality (the default) keeps it a valid static field of `Model`.
    """

    def __init__(self, module, features, scale):
        self.module, self.features, self.scale = module, features, scale
        self.__name__ = f"network {type(module).__name__}"

    def __call__(self, local, params):
        out = self.module.apply(params, self.features(local))
        return self.scale * jnp.reshape(out, ())


def _table_shape(name, table):
    if table is None:
        return None
    try:
        shape = np.shape(np.asarray(table))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an (E, k) table of indices, got {table!r}") from None
    if len(shape) == 1:   # scene.add_energy reads a flat list as E elements of one block
        shape = (shape[0], 1)
    if len(shape) != 2 or shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (E, k) table of indices, got shape "
                         f"{shape}")
    return shape


def _check_params(params):
    leaves = jax.tree.leaves(params)
    if not leaves or not all(isinstance(x, (jax.Array, np.ndarray)) and
                             jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
                             for x in leaves):
        raise ValueError(f"params must be a non-empty pytree of float arrays (what "
                         f"module.init returns), got {params!r}")


def _tile(params, count):
    return jax.tree.map(lambda x: jnp.broadcast_to(x[None], (count,) + jnp.shape(x)), params)


def add_network_energy(scene: Scene, module: nn.Module, params: Any, *, bodies=None,
                       particles=None, features: Callable | None = None,
                       scale: float = 1.0) -> int:
    """Add a potential U = scale · module(features(local)) (J) as a `scene.add_energy` term.

    Zhong et al. 2021 (Sec. 2, App. B): the potential V of a Lagrangian network, here one
    term of the implicit step, trained through the simulator with everything else.

    Args:
      scene: the `jc.Scene` to add it to.
      module: a `flax.linen.Module` whose output is a scalar (shape () or (1,)); smooth
        activations (it is differentiated twice).
      params: its variables, as `module.init` returns them (one set, shared by all elements).
      bodies: (E, kb) body indices per element (-1: the world), or None.
      particles: (E, kp) particle indices per element, or None.
      features: features(local) -> the network's input, from the element's `jc.Local` (end of
        step positions, quaternions, velocities); default `positions` (all its positions).
        Generalized coordinates such as `chain_angles` make it a Lagrangian network's V(q).
      scale: a positive factor on the output (J per unit of the network's output).

    Returns:
      t, the term's index: its weights are `model.energy[t]` (one copy per element); replace
      them with `with_network_params(model, t, params)`.
    """
    if not isinstance(scene, Scene):
        raise ValueError(f"scene must be a jc.Scene, got {scene!r}")
    if not isinstance(module, nn.Module):
        raise ValueError(f"module must be a flax.linen.Module, got {module!r}")
    features = positions if features is None else features
    if not callable(features):
        raise ValueError(f"features must be callable (local -> array) or None, got "
                         f"{features!r}")
    if (isinstance(scale, bool) or not isinstance(scale, (int, float)) or
            not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    _check_params(params)
    if bodies is None and particles is None:
        raise ValueError("give bodies or particles (the blocks of each element), got "
                         "bodies=None, particles=None")
    b, p = _table_shape("bodies", bodies), _table_shape("particles", particles)
    count = (b or p)[0]
    fn = _NetworkPotential(module, features, float(scale))
    # evaluate the shapes once here, so that a mismatched network fails at the call that
    # made it and not inside a trace of the step
    probe = Local(pos=jnp.zeros((b[1] if b else 0, 3)), quat=jnp.zeros((b[1] if b else 0, 4)),
                  vel=jnp.zeros((b[1] if b else 0, 3)), ang_vel=jnp.zeros((b[1] if b else 0, 3)),
                  particle_pos=jnp.zeros((p[1] if p else 0, 3)),
                  particle_vel=jnp.zeros((p[1] if p else 0, 3)))
    try:
        out = jax.eval_shape(lambda v: module.apply(v, features(probe)), params)
    except Exception as err:  # noqa: BLE001 - any failure of the user's module or features
        raise ValueError(f"module could not be applied to features(local) with these params: "
                         f"{type(err).__name__}: {err}") from None
    if not hasattr(out, "shape") or tuple(out.shape) not in ((), (1,)):
        raise ValueError(f"module must output a scalar potential (shape () or (1,)), got "
                         f"{getattr(out, 'shape', out)}")
    return scene.add_energy(fn, bodies=bodies, particles=particles,
                            params=_tile(params, count))


def _network_term(model, t):
    found = [term for term in model.terms
             if isinstance(term, UserEnergy) and term.index == t]
    if isinstance(t, bool) or not isinstance(t, int) or not found or not isinstance(
            found[0].fn, _NetworkPotential):
        raise ValueError(f"t must be the index of a network energy "
                         f"(add_network_energy), got {t!r}")
    return found[0]


def network_params(model, t: int):
    """The weights of network term t (element 0's copy of `model.energy[t]`)."""
    _network_term(model, t)
    return jax.tree.map(lambda x: x[0], model.energy[t])


def with_network_params(model, t: int, params):
    """`model` with network term t's weights replaced by `params` (broadcast to its E
    elements; differentiable: a gradient sums over the elements)."""
    term = _network_term(model, t)
    old = model.energy[t]
    if jax.tree.structure(params) != jax.tree.structure(old):
        raise ValueError(f"params must have the structure of the term's weights, "
                         f"{jax.tree.structure(old)}, got {jax.tree.structure(params)}")
    for new, leaf in zip(jax.tree.leaves(params), jax.tree.leaves(old)):
        if jnp.shape(new) != leaf.shape[1:]:
            raise ValueError(f"params leaves must have the shapes of the term's weights, got "
                             f"{jnp.shape(new)} where {leaf.shape[1:]} is stored")
    tiled = jax.tree.map(lambda x, o: x.astype(o.dtype), _tile(params, term.count), old)
    energy = tuple(tiled if i == t else e for i, e in enumerate(model.energy))
    return model.replace(energy=energy)
