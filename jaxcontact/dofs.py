"""Degrees of freedom of the step: blocks of rigid bodies (6 DOF) and particles (3 DOF).

The step's unknown is one flat velocity vector u. Its layout is a sequence of blocks:

    u = (v_1, ω_1, ..., v_N, ω_N, v̇_1, ..., v̇_P)      N rigid bodies, then P particles

a rigid body's block is its linear and angular velocity (world frame, 6 DOF), a particle's its
velocity (3 DOF). Everything that maps between this vector and per-body or per-element values
lives here: splitting and joining u, the end-of-step configuration q+(u) = q- ⊕ Δt u
(positions by x + Δt v, orientations by the exact exponential map; thesis Eq. 104-106), and
gathering the blocks an element of a term touches into a `Local` view, with the world
(block index -1) as a fixed block at the origin. Solver and assembly code never assume a
block size: they ask the `Layout` for its groups.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact.math import quat_integrate, quat_integrate_derivatives
from jaxcontact.types import Array

BODY_DOF = 6
PARTICLE_DOF = 3


@dataclasses.dataclass(frozen=True)
class Layout:
    """Static layout of u: `n_body` rigid blocks then `n_particle` particle blocks.

    Attributes:
      n_body: N, rigid bodies (6 DOF each: v, ω).
      n_particle: P, particles (3 DOF each: v).
    """

    n_body: int
    n_particle: int = 0

    @property
    def size(self) -> int:
        """n = 6 N + 3 P, the length of u. Index n is the dropped slot of the world."""
        return BODY_DOF * self.n_body + PARTICLE_DOF * self.n_particle

    @property
    def groups(self) -> tuple:
        """((count, block size), ...) of the block groups, in the order of u."""
        return ((self.n_body, BODY_DOF), (self.n_particle, PARTICLE_DOF))


def split(u, layout: Layout):
    """u (n,) -> (vel (N, 3), ang_vel (N, 3), particle_vel (P, 3))."""
    rigid = u[:BODY_DOF * layout.n_body].reshape(layout.n_body, BODY_DOF)
    return rigid[:, :3], rigid[:, 3:], u[BODY_DOF * layout.n_body:].reshape(-1, 3)


def join(vel, ang_vel, particle_vel):
    """The inverse of `split`: (N, 3), (N, 3), (P, 3) -> u (n,)."""
    rigid = jnp.concatenate([vel, ang_vel], axis=-1).reshape(-1)
    return jnp.concatenate([rigid, particle_vel.reshape(-1)])


def velocity(state):
    """u of a `State` (its current velocities)."""
    return join(state.vel, state.ang_vel, state.particle_vel)


def configuration(state, u, dt):
    """q+(u): end-of-step (pos, quat, particle_pos) for velocities u."""
    layout = Layout(state.pos.shape[0], state.particle_pos.shape[0])
    vel, ang_vel, particle_vel = split(u, layout)
    return (state.pos + dt * vel, quat_integrate(state.quat, ang_vel, dt),
            state.particle_pos + dt * particle_vel)


def dof_index(bodies, particles, layout: Layout):
    """Indices into u of every DOF of each element, (E, 6 kb + 3 kp).

    bodies (E, kb) and particles (E, kp) are block indices; a body index of -1 is the world,
    whose DOFs map to the dropped slot n (a gather reads 0 there, a scatter discards it).
    """
    bodies = jnp.asarray(bodies, jnp.int32)
    particles = jnp.asarray(particles, jnp.int32)
    n = layout.size
    rigid = BODY_DOF * bodies[..., None] + jnp.arange(BODY_DOF)[None, None, :]
    rigid = jnp.where(bodies[..., None] < 0, n, rigid)
    point = (BODY_DOF * layout.n_body + PARTICLE_DOF * particles[..., None]
             + jnp.arange(PARTICLE_DOF)[None, None, :])
    point = jnp.where(particles[..., None] < 0, n, point)
    e = bodies.shape[0]
    return jnp.concatenate([rigid.reshape(e, -1), point.reshape(e, -1)], axis=1)


def take(a, index):
    """a[index] along a's first axis, for an int `index` (any shape) within [0, len(a)): one
    gather (`a[index]` also adds the wrapping of negative indices to the program, in every
    derivative of the step)."""
    k = index.ndim
    dims = jax.lax.GatherDimensionNumbers(offset_dims=tuple(range(k, k + a.ndim - 1)),
                                          collapsed_slice_dims=(0,), start_index_map=(0,))
    return jax.lax.gather(a, index[..., None], dims, (1,) + a.shape[1:],
                          mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def gather(u, index):
    """u at `index` (any shape), 0 at the dropped slot n."""
    return take(jnp.concatenate([u, jnp.zeros((1,), u.dtype)]), index)


def scatter(values, index, n):
    """Σ of `values` into a vector of length n by `index` (same shape); slot n is dropped."""
    flat = jax.ops.segment_sum(values.reshape(-1), index.reshape(-1), num_segments=n + 1)
    return flat[:n]


@struct.dataclass
class Start:
    """Start-of-step poses of the blocks of each element (gathered once per step).

    Attributes:
      pos:          (E, kb, 3) body positions (origin for the world).
      quat:         (E, kb, 4) body orientations (identity for the world).
      particle_pos: (E, kp, 3) particle positions.
      velocity:     (E, 6 kb + 3 kp) the element's local velocity vector at the start of the
                    step (the state's velocities; zero for the world).
    """

    pos: Array
    quat: Array
    particle_pos: Array
    velocity: Array


def gather_start(state, bodies, particles) -> Start:
    """The `Start` of elements touching `bodies` (E, kb) and `particles` (E, kp)."""
    dtype = state.pos.dtype
    zero = jnp.zeros((1, 3), dtype)
    pos = jnp.concatenate([state.pos, zero])
    quat = jnp.concatenate([state.quat, jnp.asarray([[1.0, 0.0, 0.0, 0.0]], dtype)])
    bodies = jnp.asarray(bodies, jnp.int32)   # -1 picks the appended world row
    particles = jnp.asarray(particles, jnp.int32)
    rigid = jnp.concatenate([jnp.concatenate([state.vel, zero]),
                             jnp.concatenate([state.ang_vel, zero])], axis=-1)[bodies]
    velocity = jnp.concatenate([rigid.reshape(bodies.shape[0], -1),
                                state.particle_vel[particles].reshape(particles.shape[0], -1)],
                               axis=1)
    return Start(pos=pos[bodies], quat=quat[bodies], particle_pos=state.particle_pos[particles],
                 velocity=velocity)


@struct.dataclass
class Local:
    """One element's view of its blocks at the end of the step (a world side: the origin, at
    rest). This is what a term's local function sees (`scene.add_energy` documents it).

    Attributes:
      pos (kb, 3), quat (kb, 4), vel (kb, 3), ang_vel (kb, 3): the element's bodies.
      particle_pos (kp, 3), particle_vel (kp, 3): its particles.
    """

    pos: Array
    quat: Array
    vel: Array
    ang_vel: Array
    particle_pos: Array
    particle_vel: Array


@struct.dataclass
class Turn:
    """End-of-step orientations q+(ω) = exp(Δt ω) ⊗ q- (thesis Eq. 106) to second order about
    the angular velocities `at`: q+(at + d) ≈ quat + jac d + ½ hess[d, d].

    An element's local Jacobians need q+ and its first two derivatives at the iterate only, so
    the assembly computes them once per body (`turn`) and every term reads this expansion
    (`local`) instead of differentiating the exponential map twice in each of its elements
    (a quarter of a compiled box_drop rollout's operations did: design note 39).

    The expansion is exact where it is used, d = 0: its value and first two derivatives in d
    are those of q+. As `at` is itself the iterate's angular velocity (not held), derivatives
    of any order along x = at, the ones outer autodiff takes (implicit and unrolled
    gradients), are also exact.

    Attributes (leading axes: bodies, or elements and their bodies):
      at:   (..., 3) the angular velocity expanded about.
      quat: (..., 4) q+(at).
      jac:  (..., 4, 3) ∂q+/∂ω at `at`, or None: the value alone (for Φ's values, whose
            local derivatives no one takes; outer autodiff still flows through `at`).
      hess: (..., 4, 3, 3) ∂²q+/∂ω² at `at`, or None: first order (for gradients alone).
    """

    at: Array
    quat: Array
    jac: Any = None
    hess: Any = None


def turn(quat, ang_vel, dt, order=2) -> Turn:
    """The `Turn` of bodies at start orientations quat (..., 4), angular velocities ang_vel
    (..., 3) to `order` 0 (q+ alone), 1 or 2 (`quat_integrate_derivatives`, in closed form;
    what a lower order leaves out is not computed)."""
    if order == 0:
        return Turn(at=ang_vel, quat=quat_integrate(quat, ang_vel, dt))
    value, jac, hess = quat_integrate_derivatives(quat, ang_vel, dt)
    return Turn(at=ang_vel, quat=value, jac=jac, hess=hess if order == 2 else None)


def _turned(at: Turn, ang_vel):
    """q+(ang_vel) from the expansion `at` (kb, ...) of the element's bodies."""
    if at.jac is None:
        return at.quat
    d = ang_vel - at.at
    # products and sums, not einsums: tiny batched dot products are slow on CPU, and these
    # fuse with the element's other elementwise work
    first = at.quat + jnp.sum(at.jac * d[:, None, :], axis=-1)
    if at.hess is None:
        return first
    return first + 0.5 * jnp.sum(at.hess * (d[:, None, :, None] * d[:, None, None, :]),
                                 axis=(-2, -1))


def local(start: Start, x, dt, travel=None, at: Turn | None = None) -> Local:
    """The `Local` of one element for its local velocity vector x (6 kb + 3 kp,); the
    configuration moves by `travel` (default x) over the step, so that the two parts can be
    told apart (`terms.configuration_floor`). Orientations come from the bodies' expansion
    `at` where given (`Turn`), else from the exponential map itself."""
    kb, kp = start.pos.shape[0], start.particle_pos.shape[0]
    travel = x if travel is None else travel
    if kb:
        rigid = x[:BODY_DOF * kb].reshape(kb, BODY_DOF)
        moved = travel[:BODY_DOF * kb].reshape(kb, BODY_DOF)
        quat = (quat_integrate(start.quat, moved[:, 3:], dt) if at is None
                else _turned(at, moved[:, 3:]))
        pos, vel, ang_vel = start.pos + dt * moved[:, :3], rigid[:, :3], rigid[:, 3:]
    else:   # (no operation on empty blocks: they would be in every derivative of the step)
        pos, quat, vel, ang_vel = start.pos, start.quat, start.pos, start.pos
    if kp:
        particle_vel = x[BODY_DOF * kb:].reshape(kp, PARTICLE_DOF)
        particle_pos = start.particle_pos + dt * travel[BODY_DOF * kb:].reshape(kp, PARTICLE_DOF)
    else:
        particle_vel = particle_pos = start.particle_pos
    return Local(pos=pos, quat=quat, vel=vel, ang_vel=ang_vel, particle_pos=particle_pos,
                 particle_vel=particle_vel)


def local_size(kb: int, kp: int) -> int:
    """Length of the local velocity vector of an element with kb bodies and kp particles."""
    return BODY_DOF * kb + PARTICLE_DOF * kp


def slots(kb: int, kp: int) -> tuple:
    """Static (group, offset, size) of each block of an element, in local order."""
    return (tuple((0, BODY_DOF * i, BODY_DOF) for i in range(kb))
            + tuple((1, BODY_DOF * kb + PARTICLE_DOF * i, PARTICLE_DOF) for i in range(kp)))


def block_ids(bodies, particles):
    """Group-relative block index of each slot, (E, kb + kp) (-1 for the world)."""
    return jnp.concatenate([jnp.asarray(bodies, jnp.int32), jnp.asarray(particles, jnp.int32)],
                           axis=1)


def as_table(values, width: int) -> np.ndarray:
    """A static (E, width) int table from a sequence of rows (width 0 gives (E, 0))."""
    table = np.asarray(values, dtype=np.int32)
    return table.reshape(-1, width) if table.size else np.zeros((0, width), np.int32)
