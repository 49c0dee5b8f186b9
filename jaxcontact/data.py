"""Real data: 550 motion-capture tosses of a cube onto a table (the ContactNets cube).

    tosses = jc.data.load_tosses()                  # the archive, as recorded
    toss = tosses.toss(7)                           # one toss, in jaxcontact's conventions
    model, _ = jc.data.cube_scene().build()
    state = jc.data.initial_state(model, toss, index=0)
    final, traj = jc.rollout(model, state, steps=len(toss.time) - 1)

The data (Pfrommer, Halm, Posa, "ContactNets", CoRL 2020; DAIRLab's `dair_pll` repository,
BSD 3-Clause) is a NumPy archive `tosses.npz`: `states` (58362, 13) float64 with every sample
of every toss one after the other, and `offsets` (551,) int: toss k is
`states[offsets[k]:offsets[k + 1]]`, 85 to 139 samples `SAMPLE_PERIOD` = 0.0068 s apart
(148 Hz). A row is `qw qx qy qz  x y z  wx wy wz  vx vy vz`: orientation (unit quaternion, w
first), centre position (m), angular velocity (rad/s), linear velocity (m/s). The ground is
the plane z = 0. SI units throughout.

Conventions, measured from the data (`check_conventions`; medians over the 6937 in-flight
samples, those whose lowest cube corner and both neighbours' are over 1 cm above the ground,
with |ω| > 1 rad/s, of relative errors |ω_fd - ω_rec| / |ω_rec|, where ω_fd comes from the
central difference q̇ = (q[i+1] - q[i-1]) / 2Δt):

- the recorded angular velocity is in the BODY frame and the quaternion maps body to world:
  ω_body = 2 q* ⊗ q̇ matches with median error 1.4% (90th percentile 3.5%), while
  ω_world = 2 q̇ ⊗ q* gives 138%; taking the quaternion as world to body instead gives 199%
  (world-frame ω) and 144% (body-frame ω). The least-squares slope of the finite-difference
  ω against the recorded one is 0.992. `Tosses.toss` rotates ω to the world frame
  (ω_world = R(q) ω_body), as `jc.State.ang_vel` wants;
- the recorded linear velocity is in the WORLD frame: it matches the central difference of
  the positions with median error 2.5% (slope 1.001) and the backward difference
  (x[i] - x[i-1]) / Δt more closely, 0.9% (median absolute error 1.2 cm/s; the forward
  difference gives 5.0%); rotated into the body frame it would be off by 140%. It is
  therefore, up to some filtering, a backward difference: it lags the state by half a
  sample;
- gravity in flight measures about -9.5 m/s² along z, 3% short of 9.81: -9.52 (median of the
  second differences of z), -9.55 (median of the central differences of v_z) and -9.49
  (median over 234 tosses of a parabola fitted to each toss's longest flight of more than
  15 samples; 10th to 90th percentile -9.55 to -9.41). The horizontal second differences
  have medians of -0.010 (x) and 0.001 (y) m/s². A true sample period 1.5% shorter than the
  nominal one (0.00670 s, 149 Hz) would explain it, as would a scale error of the tracking;
  air drag (about 0.08 m/s² at 2 m/s, and against the motion both ways) would not. We keep
  the nominal period and g = 9.81 and leave this to identification;
- at rest (the last sample of each toss) the centre sits at z = 0.0512 m (median; 0.0501 to
  0.0520) instead of the half edge 0.0524: the lowest corner is 1.9 mm (0.9 to 3.1 mm) under
  the plane z = 0, and the corners of the bottom face differ in height by about 1.4 mm (medians of the lowest
  and the fourth lowest: -1.9 and -0.5 mm).
  The tracked pose and the nominal geometry disagree by a millimetre or two: a simulation
  started from a resting sample first rises by 0.4 to 2.3 mm and levels by up to 1.1°
  (`cube_scene` defaults, over all 550 tosses), then stays still.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import validate as check
from jaxcontact.math import quat_rotate
from jaxcontact.scene import Scene
from jaxcontact.step import rollout
from jaxcontact.types import Array, Model, State

__all__ = ["EDGE", "ENV_VAR", "FRICTION", "INERTIA", "MASS", "SAMPLE_PERIOD", "Toss", "Tosses",
           "Windows", "CONTACT_PARAMETERS", "check_conventions", "corners", "cube_scene",
           "default_path", "in_flight", "initial_state", "load_tosses", "window_residual",
           "windows", "with_contact"]

EDGE = 0.1048             # m, the cube's edge (half size 0.0524 m)
MASS = 0.37               # kg
INERTIA = 0.00081         # kg m², about each principal axis
FRICTION = 0.15           # nominal Coulomb μ of the cube on the table
SAMPLE_PERIOD = 0.0068    # s between samples (148 Hz)

ENV_VAR = "JAXCONTACT_DATA"
_RELATIVE = pathlib.Path("contactnets_cube") / "tosses.npz"
# <repository>/../shared/data: where the project keeps its data sets next to the checkout
_REPO_DATA = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "data"


# --- quaternions on NumPy arrays (w, x, y, z), batched over leading axes ----------------------

def _quat_mul(a, b):
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - np.sum(av * bv, axis=-1, keepdims=True)
    v = aw * bv + bw * av + np.cross(av, bv)
    return np.concatenate([w, v], axis=-1)


def _conj(q):
    return np.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def _rotate(q, v):
    """R(q) v for unit quaternions q (..., 4) and vectors v (..., 3)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


# --- loading ----------------------------------------------------------------------------------

class Toss(NamedTuple):
    """One toss in jaxcontact's conventions (those of `jc.State`). NumPy float64 arrays.

    Attributes:
      time:    (T,)   s from the toss's first sample, multiples of `SAMPLE_PERIOD`.
      quat:    (T, 4) unit quaternion (w, x, y, z), body to world.
      pos:     (T, 3) centre of the cube, world frame, m.
      ang_vel: (T, 3) angular velocity in the WORLD frame, rad/s (recorded in the body frame
               and rotated here, see the module docstring).
      vel:     (T, 3) linear velocity of the centre, world frame, m/s (as recorded: about a
               backward difference of `pos`).
    """

    time: np.ndarray
    quat: np.ndarray
    pos: np.ndarray
    ang_vel: np.ndarray
    vel: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Tosses:
    """The archive as recorded (read-only arrays).

    Attributes:
      states:  (S, 13) every sample: qw qx qy qz, x y z, ω in the BODY frame, v in the world
               frame (SI units).
      offsets: (K + 1,) int: toss k is `states[offsets[k]:offsets[k + 1]]`.
      path:    the file it was read from.
    """

    states: np.ndarray
    offsets: np.ndarray
    path: str

    @property
    def size(self) -> int:
        """K, the number of tosses."""
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return self.size

    @property
    def lengths(self) -> np.ndarray:
        """(K,) int: the number of samples of each toss."""
        return np.diff(self.offsets)

    def toss(self, k) -> Toss:
        """Toss k in [0, K), converted to jaxcontact's conventions (`Toss`)."""
        k = check.index("k", k, self.size)
        rows = self.states[self.offsets[k]:self.offsets[k + 1]]
        quat = rows[:, 0:4] / np.linalg.norm(rows[:, 0:4], axis=1, keepdims=True)
        return Toss(time=SAMPLE_PERIOD * np.arange(len(rows), dtype=np.float64), quat=quat,
                    pos=rows[:, 4:7].copy(), ang_vel=_rotate(quat, rows[:, 7:10]),
                    vel=rows[:, 10:13].copy())


def default_path() -> pathlib.Path:
    """Where `load_tosses` looks without a path: `$JAXCONTACT_DATA/contactnets_cube/tosses.npz`
    when the environment variable is set, else `../shared/data/contactnets_cube/tosses.npz`
    from the repository root."""
    root = os.environ.get(ENV_VAR)
    return (pathlib.Path(root) if root else _REPO_DATA) / _RELATIVE


def load_tosses(path=None) -> Tosses:
    """Read the cube tosses.

    Args:
      path: the `tosses.npz` file; default `default_path()` (environment variable
        `JAXCONTACT_DATA`: a folder holding `contactnets_cube/tosses.npz`).

    Raises:
      FileNotFoundError: no file there (the message says where it looked and how to point
        elsewhere).
      ValueError: the archive lacks `states` (S, 13) or consistent `offsets`.
    """
    where = pathlib.Path(path) if path is not None else default_path()
    if not where.is_file():
        how = ("" if path is not None else
               f" (set {ENV_VAR} to a folder holding {_RELATIVE}, or pass path=)")
        raise FileNotFoundError(f"no cube toss data at {where}{how}")
    with np.load(where) as archive:
        if "states" not in archive or "offsets" not in archive:
            raise ValueError(f"{where} must hold arrays 'states' and 'offsets', got "
                             f"{sorted(archive.files)}")
        states = np.asarray(archive["states"], dtype=np.float64)
        offsets = np.asarray(archive["offsets"], dtype=np.int64)
    if states.ndim != 2 or states.shape[1] != 13:
        raise ValueError(f"states must have shape (S, 13), got {states.shape}")
    if (offsets.ndim != 1 or len(offsets) < 2 or offsets[0] != 0
            or offsets[-1] != len(states) or np.any(np.diff(offsets) < 1)):
        raise ValueError("offsets must rise from 0 to the number of states "
                         f"({len(states)}), got {offsets!r}")
    states.setflags(write=False)
    offsets.setflags(write=False)
    return Tosses(states=states, offsets=offsets, path=str(where))


# --- geometry of the flight -------------------------------------------------------------------

_CORNERS = 0.5 * EDGE * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)],
                                 dtype=np.float64)


def in_flight(toss: Toss, clearance=0.01) -> np.ndarray:
    """(T,) bool: the samples whose lowest cube corner (nominal edge) is over `clearance` (m)
    above the ground z = 0."""
    clearance = check.number("clearance", clearance)
    corners = _rotate(toss.quat[:, None, :], np.broadcast_to(_CORNERS, (len(toss.quat), 8, 3)))
    return toss.pos[:, 2] + np.min(corners[..., 2], axis=1) > clearance


def check_conventions(tosses: Tosses, clearance=0.01) -> dict:
    """Measure the frames of the recorded velocities against finite differences of the poses
    over the in-flight samples (the sample and both neighbours in flight): the numbers of the
    module docstring.

    Returns a dict of medians over the samples: `omega_body`, `omega_world` (quaternion body
    to world, ω taken in the body or world frame), `omega_body_w2b`, `omega_world_w2b`
    (quaternion read as world to body), `vel_central`, `vel_backward`, `vel_body`: relative
    errors |fd - recorded| / |recorded| (ω over samples with |ω| > 1 rad/s); `gravity_pos`,
    `gravity_vel`: z accelerations from second differences of z and central differences of
    v_z, m/s²; `samples`: the number of samples used for ω.
    """
    dt = SAMPLE_PERIOD
    err = {name: [] for name in ("omega_body", "omega_world", "omega_body_w2b",
                                 "omega_world_w2b", "vel_central", "vel_backward", "vel_body",
                                 "gravity_pos", "gravity_vel")}
    raw = tosses.states
    for k in range(tosses.size):
        rows = raw[tosses.offsets[k]:tosses.offsets[k + 1]]
        toss = tosses.toss(k)
        fly = in_flight(toss, clearance)
        i = np.nonzero(fly[:-2] & fly[1:-1] & fly[2:])[0] + 1
        if len(i) == 0:
            continue
        q = toss.quat[i]
        qdot = (toss.quat[i + 1] - toss.quat[i - 1]) / (2 * dt)
        omega = rows[i, 7:10]
        size = np.linalg.norm(omega, axis=1)
        spinning = size > 1.0
        candidates = {"omega_body": _quat_mul(_conj(q), qdot),
                      "omega_world": _quat_mul(qdot, _conj(q)),
                      # q read as world to body: the body-to-world quaternion is q*
                      "omega_body_w2b": _quat_mul(q, _conj(qdot)),
                      "omega_world_w2b": _quat_mul(_conj(qdot), q)}
        for name, half in candidates.items():
            miss = np.linalg.norm(2 * half[:, 1:] - omega, axis=1)
            err[name].extend(miss[spinning] / size[spinning])
        vel = rows[i, 10:13]
        speed = np.linalg.norm(vel, axis=1)
        central = (toss.pos[i + 1] - toss.pos[i - 1]) / (2 * dt)
        backward = (toss.pos[i] - toss.pos[i - 1]) / dt
        err["vel_central"].extend(np.linalg.norm(central - vel, axis=1) / speed)
        err["vel_backward"].extend(np.linalg.norm(backward - vel, axis=1) / speed)
        err["vel_body"].extend(np.linalg.norm(central - _rotate(_conj(q), vel), axis=1) / speed)
        z = toss.pos[:, 2]
        err["gravity_pos"].extend((z[i + 1] - 2 * z[i] + z[i - 1]) / dt**2)
        err["gravity_vel"].extend((rows[i + 1, 12] - rows[i - 1, 12]) / (2 * dt))
    out = {name: float(np.median(values)) for name, values in err.items()}
    out["samples"] = len(err["omega_body"])
    return out


# --- simulation -------------------------------------------------------------------------------

def cube_scene(dt=SAMPLE_PERIOD, *, friction=FRICTION, stiffness=None, damping=None,
               rounding=None, gravity=(0.0, 0.0, -9.81)) -> Scene:
    """The ground plane z = 0 and the cube (body 0) with the nominal edge, mass and inertia,
    resting on a face at the origin. Returns the `Scene`, to `build` with the contact laws,
    solver and dtype of your choice; start it from data with `initial_state`.

    Args:
      dt: time step, s (default the sample period).
      friction: Coulomb μ of the cube and the ground.
      stiffness, damping: normal contact stiffness (N/m) and damping (N s/m); default the
        `Scene` defaults.
      rounding: radius of the cube's rounded edges, m; default `Scene.add_box`'s.
      gravity: (3,) m/s².
    """
    surface = {"friction": friction}
    if stiffness is not None:
        surface["stiffness"] = stiffness
    if damping is not None:
        surface["damping"] = damping
    scene = Scene(dt=dt, gravity=gravity, **surface)
    scene.add_plane()
    scene.add_box(EDGE / 2, mass=MASS, pos=(0.0, 0.0, EDGE / 2),
                  inertia=(INERTIA, INERTIA, INERTIA), rounding=rounding)
    return scene


def initial_state(model: Model, toss: Toss, index=0) -> State:
    """A `jc.State` of `model` at the observed sample `index` of `toss`: the pose and
    velocities of body 0, `time` the sample's time in the toss, in the model's dtype.

    Args:
      model: a model of one rigid body (the cube, e.g. `cube_scene().build()[0]`) and no
        particles.
      toss: a `Toss` (`Tosses.toss(k)`).
      index: the sample, in [-T, T) (negative counts from the end, as in Python).

    Raises:
      ValueError: a model of other than one body or with particles, a `toss` that is not a
        `Toss`, or an `index` out of range.
    """
    check.instance("model", model, Model, "a jc.Model")
    if model.n_body != 1 or model.n_particle != 0:
        raise ValueError("model must have one rigid body (the cube) and no particles, got "
                         f"{model.n_body} bodies and {model.n_particle} particles")
    check.instance("toss", toss, Toss, "a jc.data.Toss (from Tosses.toss(k))")
    count = len(toss.time)
    if (isinstance(index, bool) or not isinstance(index, (int, np.integer))
            or not -count <= index < count):
        raise ValueError(f"index must be an int in [{-count}, {count}), got {index!r}")
    dtype = model.dt.dtype

    def body(values):
        return jnp.asarray(np.asarray(values)[index][None, :], dtype)

    return State(pos=body(toss.pos), quat=body(toss.quat), vel=body(toss.vel),
                 ang_vel=body(toss.ang_vel), time=jnp.asarray(toss.time[index], dtype),
                 particle_pos=jnp.zeros((0, 3), dtype), particle_vel=jnp.zeros((0, 3), dtype))


# --- windows of tosses: the pieces of a multiple-shooting fit -------------------------------

def corners(pos, quat):
    """(..., 8, 3) world positions of the cube's 8 corners (nominal edge) from centre
    positions (..., 3) and body-to-world unit quaternions (..., 4): what a fit compares,
    since the centre alone does not show the orientation. JAX, batched over leading axes."""
    local = jnp.asarray(_CORNERS, jnp.result_type(pos, quat))
    spin = jnp.vectorize(lambda q: jax.vmap(quat_rotate, (None, 0))(q, local),
                         signature="(4)->(8,3)")
    return pos[..., None, :] + spin(quat)


class Windows(NamedTuple):
    """B windows of `length` samples cut from tosses: each is simulated from its observed
    first sample and compared with the `length` samples after it.

    Attributes:
      start:  a `jc.State` with a leading axis B (one cube per window, `initial_state`).
      pos:    (B, length, 3) observed centres after each step, m.
      quat:   (B, length, 4) observed body-to-world quaternions after each step.
      toss:   (B,) int, the toss of each window.
      first:  (B,) int, the index of its first sample in the toss.
    """

    start: State
    pos: Array
    quat: Array
    toss: np.ndarray
    first: np.ndarray


def windows(model: Model, tosses: Tosses, toss_ids, length, stride=None) -> Windows:
    """Every window of `length` steps (one step per sample: `model.dt` should be
    `SAMPLE_PERIOD`) starting every `stride` samples (default `length`) in each of the tosses
    `toss_ids`, in the model's dtype.

    Raises:
      ValueError: `length` or `stride` not a positive int, a toss id out of range, or no
        toss long enough for one window.
    """
    length = check.integer("length", length, low=1)
    stride = length if stride is None else check.integer("stride", stride, low=1)
    ids = [check.index("toss_ids", k, tosses.size) for k in np.atleast_1d(toss_ids).tolist()]
    starts, pos, quat, which, first = [], [], [], [], []
    for k in ids:
        toss = tosses.toss(k)
        for i in range(0, len(toss.time) - length, stride):
            starts.append(initial_state(model, toss, i))
            pos.append(toss.pos[i + 1:i + length + 1])
            quat.append(toss.quat[i + 1:i + length + 1])
            which.append(k)
            first.append(i)
    if not starts:
        raise ValueError(f"length must leave room for a window in one of the tosses, got "
                         f"{length} (longest toss: {max(tosses.lengths[ids])} samples)")
    dtype = model.dt.dtype
    return Windows(start=jax.tree.map(lambda *x: jnp.stack(x), *starts),
                   pos=jnp.asarray(np.stack(pos), dtype), quat=jnp.asarray(np.stack(quat), dtype),
                   toss=np.asarray(which), first=np.asarray(first))


# --- identification: the contact parameters of the cube and the ground ----------------------

CONTACT_PARAMETERS = ("log_friction", "log_stiffness", "log_damping", "ground_mm")


def with_contact(model: Model, x) -> Model:
    """`model` with the contact parameters x = (log μ, log k_n, log k_d, δ / 1 mm) on every
    geom and plane: Coulomb μ, normal stiffness k_n (N/m) and damping k_d (N s/m), the same
    on both sides of each contact, and every plane's offset δ (the ground's height). Logs
    keep the parameters positive and equally scaled for a fit; differentiable in x."""
    x = jnp.asarray(x)
    surface = {"friction": jnp.exp(x[0]), "stiffness": jnp.exp(x[1]),
               "damping": jnp.exp(x[2])}

    def put(leaves):
        return leaves.replace(**{n: jnp.full_like(getattr(leaves, n), v)
                                 for n, v in surface.items()})

    plane = put(model.plane).replace(offset=jnp.full_like(model.plane.offset, 1e-3 * x[3]))
    return model.replace(geom=put(model.geom), plane=plane)


def window_residual(model: Model, x, win: Windows) -> Array:
    """(B · length · 24,) the predicted minus the observed corner positions (m) after every
    step of every window, the model's contact set to x (`with_contact`): a multiple-shooting
    residual for `jc.optim.gauss_newton`. Each window is simulated from its observed first
    sample (`windows`); give the model forward-mode gradients (`jc.optim.forward_mode`) for
    a Gauss-Newton Jacobian."""
    moved = with_contact(model, x)
    steps = win.pos.shape[1]

    def one(start, pos, quat):
        traj = rollout(moved, start, steps=steps)[1]
        return corners(traj.pos[:, 0], traj.quat[:, 0]) - corners(pos, quat)

    return jax.vmap(one)(win.start, win.pos, win.quat).reshape(-1)
