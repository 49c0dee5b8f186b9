"""Fluid forces on rigid bodies, MuJoCo's inertia-based fluid model: a kind of physics
(`jaxcontact.models.kinds`): `Fluid`, `add_fluid` and `FluidTerm`.

MuJoCo's documentation, "Computation / Fluid forces / Inertia model"
(https://mujoco.readthedocs.io/en/stable/computation/fluid.html), replaces each body, for the
fluid's purposes, by its *equivalent inertia box*: the uniform box of the body's mass M and
principal moments (I_x, I_y, I_z), of half sizes

    r_i = sqrt(3 / (2 M) (I_j + I_k - I_i))          (i, j, k a permutation of x, y, z)

With v the velocity of the body's centre of mass relative to the wind (a uniform velocity w
of the fluid, v = v_body - w) and ω its angular velocity, both in the box's frame (the body's
principal axes), the fluid exerts per axis i the quadratic drag (density ρ)

    f_D,i = -2 ρ r_j r_k |v_i| v_i,        g_D,i = -1/2 ρ r_i (r_j⁴ + r_k⁴) |ω_i| ω_i,

and the viscous (Stokes) resistance of the sphere of radius r_eq = (r_x + r_y + r_z) / 3
(viscosity β)

    f_V,i = -6 π β r_eq v_i,               g_V,i = -8 π β r_eq³ ω_i.

In our step (a convex potential of the end-of-step velocities) these forces are the negative
gradient of one dissipation potential, entering as Δt D (like `models.drag`'s Δt c/2 |v|²):

    D = 3 π β r_eq |v|² + 4 π β r_eq³ |ω|²
        + ρ Σ_i [2/3 r_j r_k |v_i|³ + 1/6 r_i (r_j⁴ + r_k⁴) |ω_i|³],

since ∂/∂v_i (2/3 a |v_i|³) = 2 a |v_i| v_i and ∂/∂ω_i (1/6 b |ω_i|³) = 1/2 b |ω_i| ω_i.
The box's axes (and the lever from the body's centre to the box's centre, below) are frozen
at their start-of-step orientation: v and ω in the box's frame are then linear in the
step's velocities, and D, a sum of convex functions of them, is convex (the Newton
direction needs no modification). Rotating the axes with the end-of-step orientation would
make D non-convex for a gain of O(Δt |ω|) in the drag's direction. MuJoCo evaluates its
forces at the start-of-step velocities (explicit); ours at the end-of-step velocities
(implicit), which is stable at any Δt, like MuJoCo's implicit integrators.

A body of ours may stand for several MuJoCo bodies welded together (`io.load_mjcf`): MuJoCo
applies its model to each of them, at its own centre of mass and with its own box. So an
element here carries its box's centre (`offset`) and axes (`quat`) in the body's frame: the
box moves with the velocity v_body + ω × ℓ of its centre (ℓ the offset in the world) and its
force, applied there, adds the torque ℓ × f. A welded compound gets the sum of its members'
forces and torques, exactly MuJoCo's, and no approximation of one box for the whole.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import dofs, terms
from jaxcontact import validate as check
from jaxcontact.math import quat_mul, quat_rotate, quat_to_mat, safe_sqrt
from jaxcontact.models import kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Fluid(kinds.Params):
    """MuJoCo's inertia-based fluid model on bodies (module docstring).

    Attributes:
      density:   (F,) ρ of the fluid, kg/m³.
      viscosity: (F,) β of the fluid, Pa s (MuJoCo's `viscosity`).
      wind:      (F, 3) velocity of the fluid, m/s (world).
      half_size: (F, 3) the equivalent box's half sizes r, m, where given (0 where `own`).
      offset:    (F, 3) the box's centre in the body's frame, m.
      quat:      (F, 4) the box's axes in the body's frame (w, x, y, z).
      body:      static tuple (F,) of the body each acts on.
      own:       static tuple (F,) of bools: the box is the body's own equivalent inertia
                 box, from `model.body.mass` and `model.body.inertia` at each step (so
                 differentiable in them), instead of `half_size`.
    """

    density: Array
    viscosity: Array
    wind: Array
    half_size: Array
    offset: Array
    quat: Array
    body: tuple = static(default=())
    own: tuple = static(default=())


@dataclasses.dataclass
class FluidRecord:
    body: int
    own: bool
    density: float
    viscosity: float
    wind: np.ndarray
    half_size: np.ndarray
    offset: np.ndarray
    quat: np.ndarray


def equivalent_box(mass, inertia):
    """Half sizes (..., 3) of the equivalent inertia box of bodies of mass (...,) and
    principal moments (..., 3): r_i = sqrt(3 / (2 M) (I_j + I_k - I_i)) (MuJoCo's
    documentation, "Fluid forces / Inertia model"). A flat or thin body's I_j + I_k - I_i
    may round to just below 0 (the triangle inequality of principal moments is tight for
    it): that half size is 0, with gradient 0 (`safe_sqrt`)."""
    total = jnp.sum(inertia, axis=-1, keepdims=True)
    return safe_sqrt(1.5 * (total - 2.0 * inertia) / mass[..., None])


def add_fluid(scene, bodies, *, density=0.0, viscosity=0.0, wind=(0.0, 0.0, 0.0),
              half_size=None, offset=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """Immerse bodies in a fluid: MuJoCo's inertia-based fluid model (module docstring),
    quadratic drag of density ρ and viscous resistance of viscosity β on each body's
    equivalent inertia box, relative to a uniform wind. Returns the fluid element indices.

    Args:
      bodies: a body index or a sequence of them.
      density: ρ, kg/m³ (>= 0; MuJoCo's `<option density>`, e.g. 1.2 for air, 1000 for
        water). Differentiable as `model.fluid.density`.
      viscosity: β, Pa s (>= 0; MuJoCo's `<option viscosity>`, e.g. 1.8e-5 for air).
        Differentiable as `model.fluid.viscosity`.
      wind: (3,) the fluid's velocity, m/s (world). `model.fluid.wind`.
      half_size: (3,) the box's half sizes, m (>= 0), the same for every body given; default
        (None) each body's own equivalent inertia box, recomputed from `model.body.mass`
        and `model.body.inertia` at every step.
      offset: (3,) the box's centre in the body's frame, m (default its centre of mass).
      quat: (4,) the box's axes in the body's frame (default the principal axes).
    """
    count = len(scene.records("body"))
    index = check.table("bodies", np.atleast_1d(bodies), count)[:, 0]
    rho = check.number("density", density, low=0)
    beta = check.number("viscosity", viscosity, low=0)
    wind = check.vector("wind", wind, 3)
    own = half_size is None
    size = np.zeros(3) if own else check.vector("half_size", half_size, 3)
    if np.any(size < 0):
        raise ValueError(f"half_size must be >= 0, got {half_size!r}")
    offset = check.vector("offset", offset, 3)
    quat = check.quaternion("quat", quat)
    records = scene.records("fluid")
    first = len(records)
    records.extend(FluidRecord(int(b), own, rho, beta, wind, size, offset, quat) for b in index)
    return np.arange(first, len(records))


def dissipation(vel, ang_vel, size, density, viscosity):
    """D of one box (module docstring), W: vel (3,) its velocity relative to the fluid and
    ang_vel (3,) its angular velocity, both in the box's frame; size (3,) its half sizes r.
    -∂D/∂vel and -∂D/∂ang_vel are MuJoCo's f_D + f_V and g_D + g_V."""
    r_eq = jnp.sum(size) / 3.0
    # for axis i: the other two half sizes (j, k) = (y, z), (x, z), (x, y)
    r_j, r_k = size[jnp.array([1, 0, 0])], size[jnp.array([2, 2, 1])]
    speed, spin = jnp.abs(vel), jnp.abs(ang_vel)
    viscous = jnp.pi * viscosity * (3.0 * r_eq * jnp.sum(vel * vel)
                                    + 4.0 * r_eq ** 3 * jnp.sum(ang_vel * ang_vel))
    quadratic = density * jnp.sum(2.0 / 3.0 * r_j * r_k * speed * vel * vel
                                  + 1.0 / 6.0 * size * (r_j ** 4 + r_k ** 4)
                                  * spin * ang_vel * ang_vel)
    return viscous + quadratic


@dataclasses.dataclass(frozen=True)
class FluidTerm(terms.EnergyTerm):
    """The fluid forces on `count` boxes: Δt D each (module docstring)."""

    count: int
    n_bodies = 1
    convex = True
    name = "fluid"

    def elements(self, model, state, control, stages):
        fluid = model.fluid
        body_index = np.asarray(fluid.body, np.int32)
        bodies = body_index[:, None]
        body = jnp.asarray(body_index)
        own = np.asarray(fluid.own, bool)
        size = fluid.half_size
        if own.any():   # (static: the where only where both kinds are present)
            box = equivalent_box(model.body.mass[body], model.body.inertia[body])
            size = box if own.all() else jnp.where(own[:, None], box, size)
        # the box's axes and lever in the world, frozen at the start of the step
        quat = state.quat[body]
        params = {"density": fluid.density, "viscosity": fluid.viscosity, "wind": fluid.wind,
                  "size": size, "rotation": quat_to_mat(quat_mul(quat, fluid.quat)),
                  "lever": quat_rotate(quat, fluid.offset)}
        particles = np.zeros((self.count, 0), np.int32)
        return terms.Elements(bodies=jnp.asarray(bodies), particles=jnp.asarray(particles),
                              start=dofs.gather_start(state, bodies, particles), params=params)

    def without_rows(self):
        return ("fluid (quadratic drag, a cubic potential of the velocities) has no "
                "compliance form; use jc.Newton() or jc.Descent()")

    def potential(self, x, p, shared, dt):
        rotation = p["rotation"]
        ang_vel = x.ang_vel[0]
        relative = x.vel[0] + jnp.cross(ang_vel, p["lever"]) - p["wind"]
        return dt * dissipation(rotation.T @ relative, rotation.T @ ang_vel, p["size"],
                                p["density"], p["viscosity"])


def _pack(records, columns) -> Fluid:
    return Fluid(density=columns.column(records, "density"),
                 viscosity=columns.column(records, "viscosity"),
                 **{name: columns.column(records, name, width) for name, width in
                    (("wind", 3), ("half_size", 3), ("offset", 3), ("quat", 4))},
                 body=columns.static(records, "body"), own=columns.static(records, "own"))


def _terms(records) -> list:
    return [FluidTerm(len(records))] if records else []


KIND = kinds.register(kinds.Kind("fluid", _pack, _terms, (add_fluid,)))
