"""Observations for policies: the usual features of a state as flat arrays.

A policy `pi(params, state) -> jc.Control` may read the `State` directly; these helpers give
the features controllers are usually trained on, each as a 1-D array (or (N, k) with
`flat=False`) ready to concatenate:

    obs = jnp.concatenate([jc.observe.positions(state, relative_to=target),
                           jc.observe.velocities(state, frame="body"),
                           jc.observe.contacts(model, state).astype(float),
                           jc.observe.time(state)])

All are differentiable functions of the state (contact flags are booleans: no gradient).
`contact_points` (and `contact_table`, its jittable fixed-size form) gives the contact rows
themselves: world points, normals, gaps and normal forces (the viewer's overlay and plots).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxcontact import dofs, terms
from jaxcontact.compiling import jit
from jaxcontact.models import cloth, solids
from jaxcontact.models import contacts as colliders
from jaxcontact.math import quat_rotate, quat_rotate_inverse, quat_to_mat
from jaxcontact.types import Control, Model, State

FRAMES = ("world", "body")
ORIENTATIONS = ("quat", "matrix", "up")


def _bodies(state: State, bodies):
    n = state.pos.shape[0]
    if bodies is None:
        return jnp.arange(n)
    index = jnp.asarray(bodies)
    if index.dtype.kind not in "iu" or index.ndim != 1 or (
            index.size and (int(index.min()) < 0 or int(index.max()) >= n)):
        raise ValueError(f"bodies must be a sequence of body indices in [0, {n}), got {bodies!r}")
    return index


def _out(x, flat):
    return x.reshape(-1) if flat else x


def positions(state: State, bodies=None, *, relative_to=None, flat=True):
    """Body positions (N, 3) in the world frame, minus `relative_to` (a 3-vector, e.g. a
    target) if given."""
    pos = state.pos[_bodies(state, bodies)]
    if relative_to is not None:
        target = jnp.asarray(relative_to, pos.dtype)
        if target.shape != (3,):
            raise ValueError(f"relative_to must be a 3-vector, got shape {target.shape}")
        pos = pos - target[None, :]
    return _out(pos, flat)


def body_points(state: State, points, body=0):
    """World positions (..., K, 3) of `points` (K, 3) fixed in body `body`'s frame, for a
    state or a trajectory (leading axes of `state.pos`): markers, e.g. what
    `jc.optim.fit(observe=...)` compares with measured marker positions."""
    local = jnp.asarray(points, state.pos.dtype)
    if local.ndim != 2 or local.shape[1] != 3:
        raise ValueError(f"points must be a (K, 3) array, got shape {local.shape}")
    rotation = jnp.vectorize(quat_to_mat, signature="(4)->(3,3)")(state.quat[..., body, :])
    return state.pos[..., body, None, :] + jnp.einsum("...ij,kj->...ki", rotation, local)


def orientations(state: State, bodies=None, *, representation="quat", flat=True):
    """Body orientations: "quat" (N, 4) (w, x, y, z), "matrix" (N, 9) rotation matrices row
    by row, or "up" (N, 3) the body z axis in the world frame (tilt, without heading)."""
    if representation not in ORIENTATIONS:
        raise ValueError(f"representation must be one of {ORIENTATIONS}, got "
                         f"{representation!r}")
    quat = state.quat[_bodies(state, bodies)]
    if representation == "quat":
        out = quat
    elif representation == "matrix":
        out = quat_to_mat(quat).reshape(quat.shape[0], 9)
    else:
        up = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 1.0], quat.dtype), (quat.shape[0], 3))
        out = quat_rotate(quat, up)
    return _out(out, flat)


def velocities(state: State, bodies=None, *, frame="world", flat=True):
    """Linear and angular velocities (N, 6), (v, ω), in the world frame or each body's own
    frame ("body": what an on-board IMU measures)."""
    if frame not in FRAMES:
        raise ValueError(f"frame must be one of {FRAMES}, got {frame!r}")
    index = _bodies(state, bodies)
    vel, ang_vel = state.vel[index], state.ang_vel[index]
    if frame == "body":
        quat = state.quat[index]
        vel, ang_vel = quat_rotate_inverse(quat, vel), quat_rotate_inverse(quat, ang_vel)
    return _out(jnp.concatenate([vel, ang_vel], axis=1), flat)


def contacts(model: Model, state: State, bodies=None, *, margin=0.0):
    """(N,) bool: the body touches something (a contact row's gap <= margin, m) in `state`."""
    if not (isinstance(margin, (int, float)) and margin >= 0.0):
        raise ValueError(f"margin must be a number >= 0, got {margin!r}")
    control = Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)
    args = (model, terms.prepare(model, state, control))
    u = jnp.zeros_like(dofs.velocity(state))
    return terms.body_contacts(u, args, margin)[_bodies(state, bodies)]


def strain_energy(model: Model, state: State):
    """The elastic energy (J) of the deformables at `state`: Σ V ψ(F) of the solids'
    tetrahedra plus the cloth's membrane and bending energies. With the kinetic energy
    ½ Σ m |v|² (`model.particle_masses`) and gravity it gives the total energy."""
    return (solids.strain_energy(model, state.particle_pos)
            + cloth.strain_energy(model, state.particle_pos))


def time(state: State):
    """The state's time as a 1-vector (s)."""
    return jnp.reshape(state.time, (1,))


# --- contact points (the viewer's overlay, contact force plots) -------------------------------

class ContactPoints(NamedTuple):
    """Contact rows of a state: where, which way, how deep, how hard.

    Attributes:
      point:  (K, 3) world contact points, m.
      normal: (K, 3) unit normals from side b into side a (up, out of the ground).
      gap:    (K,) signed distances, m (negative: penetration).
      force:  (K,) normal force magnitudes of the normal law, -ψ'(gap), N (the damping and
              friction rows are not included).
      active: (K,) bool, the row exists and its gap is <= the margin (`contact_table`; all
              True in what `contact_points` returns).
    """

    point: jnp.ndarray
    normal: jnp.ndarray
    gap: jnp.ndarray
    force: jnp.ndarray
    active: jnp.ndarray


def contact_table(model: Model, state: State, *, margin=0.0) -> ContactPoints:
    """Every contact row of the step that starts at `state`, at that configuration: K is the
    static number of rows of the model's contact terms (broad-phase slots and mesh padding
    included, `active` False). Jittable and vmappable over states.

    Args:
      model: the scene.
      state: one state (no time axis: vmap it over a trajectory).
      margin: rows with gap <= margin (m) are `active`.

    Returns:
      A `ContactPoints` of K rows.
    """
    rows = colliders.contact_rows(model, state)
    return ContactPoints(rows.point, rows.normal, rows.gap, rows.force,
                         rows.used & (rows.gap <= margin))


def contact_points(model: Model, state: State, *, margin=0.0) -> ContactPoints:
    """The contact rows of `state` in contact (gap <= margin, m): world points (K, 3),
    normals (K, 3), gaps (K,) and normal force magnitudes (K,) (`ContactPoints`), K the
    number found. Not jittable (K depends on the state): use `contact_table` under `jit`.

    Raises:
      ValueError: `margin` not a number >= 0, or `state` with a time or batch axis.
    """
    if not (isinstance(margin, (int, float)) and margin >= 0.0):
        raise ValueError(f"margin must be a number >= 0, got {margin!r}")
    if jnp.ndim(state.pos) != 2:
        raise ValueError("state must be one state (pos of shape (N, 3)), got pos of shape "
                         f"{jnp.shape(state.pos)}: index the time or batch axis first")
    table = _contact_table(model, state, float(margin))
    keep = np.flatnonzero(np.asarray(table.active))
    return ContactPoints(*(x[keep] for x in table))


_contact_table = jit(lambda model, state, margin: contact_table(model, state, margin=margin),
                         static_argnums=2)
