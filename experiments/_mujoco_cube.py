"""MuJoCo baseline for the real cube tosses (issue 17): the ContactNets cube simulated in MuJoCo,
its sliding friction and `solref` fitted by CMA-ES on windows of the recorded tosses.

Used by `experiments/real_cube_tosses.py`:

    from experiments import _mujoco_cube as mjc
    sim = mjc.CubeSim()                                    # timestep SAMPLE_PERIOD / 4
    windows = mjc.make_windows(tosses, range(10), length=20, stride=10)
    loss = mjc.window_loss(sim, mjc.DEFAULT_PARAMS, tosses, windows)
    fit = mjc.fit_cmaes(sim, tosses, windows, budget=3000)

The model (MJCF built by `cube_xml`): the ground plane z = 0 (an infinite MuJoCo plane) and a
free-joint box of half size EDGE/2 = 0.0524 m, mass MASS = 0.37 kg and diagonal inertia INERTIA
= 0.00081 kg m² about each principal axis (given explicitly, not derived from the box's
density), gravity (0, 0, -9.81) m/s², no air (density and viscosity 0). Constants from
`jaxcontact.data`.

Time step: `SAMPLE_PERIOD / substeps`, by default 0.0068 / 4 = 0.0017 s, so that an integer
number of MuJoCo steps spans one sample and the simulated states land exactly on the sample
times. MuJoCo's other options are its defaults unless `CubeSim` says otherwise: the
semi-implicit "Euler" integrator, the pyramidal friction cone, the Newton solver.

Contact parameters (`Params`):
- `friction`: the sliding (Coulomb) μ, `geom_friction[:, 0]`. Contacts have `condim` = 3 (the
  default: normal and two tangential directions), so the torsional and rolling frictions
  (`geom_friction[:, 1:]`, left at MuJoCo's defaults 0.005 and 0.0001) are not used at all.
- `timeconst` (s) and `dampratio`: MuJoCo's `solref` = (timeconst, dampratio) of the normal
  contact (and, since `solreffriction` is left at 0, of its friction directions too).
- `solimp` is MuJoCo's default (0.9, 0.95, 0.001, 0.5, 2), fixed (a `CubeSim` argument).

How MuJoCo combines the two geoms' parameters (no `<pair>`, equal `priority` 0, `solmix` 1):
the contact's friction is the element-wise maximum of the two geoms', its solref and solimp
the solmix-weighted mean (here the plain mean). `CubeSim.set_params` writes the same values
into BOTH geoms (`model.geom_friction`, `model.geom_solref`), so the maximum and the mean are
those values; `CubeSim.contact_params` reads back what the contacts of the current state carry
(checked in `_self_check`). No XML is recompiled between evaluations.

MuJoCo clamps a `timeconst` below 2 x timestep to 2 x timestep (its "refsafe" flag, on by
default), silently: `Params` below that are refused with a ValueError here, and the CMA-ES
bounds start at max(0.002, 2 x timestep) (0.0034 s at the default step).

State conventions: qpos = (x, y, z, qw, qx, qy, qz), the quaternion body to world, w first (as
in the data); qvel = (v, ω_body): the linear velocity of the centre in the WORLD frame and the
angular velocity in the BODY frame (MuJoCo's free-joint convention, checked in `_self_check`
by stepping a spinning body). `jc.data.Toss.ang_vel` is in the world frame, so `rollout`
starts from ω_body = R(q)ᵀ ω_world. A rollout starts from the observed state of its start
sample as recorded: the recorded linear velocity is about a backward difference of the
positions (it lags by half a sample), which this does not correct, like `jc.data.initial_state`.

Loss (`window_loss`): the mean, over windows, over the `length` predicted samples of each
window (start + 1 ... start + length; the start sample matches by construction and is left
out) and over the 8 corners, of the squared distance |corner_pred - corner_obs|², in m².

Simulation budget: one simulation = one window rollout (whatever its length). `fit_cmaes`
counts them exactly and never exceeds its budget.

Run this file for a smoke run (a few seconds):
    python -m experiments._mujoco_cube [--tosses 10] [--budget 300]
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from jaxcontact import data as jcdata

__all__ = ["DEFAULT_PARAMS", "CubeSim", "Params", "bounds", "corners", "cube_xml", "fit_cmaes",
           "make_windows", "rollout", "window_errors", "window_loss"]

EDGE = jcdata.EDGE
MASS = jcdata.MASS
INERTIA = jcdata.INERTIA
FRICTION = jcdata.FRICTION
SAMPLE_PERIOD = jcdata.SAMPLE_PERIOD
GRAVITY = (0.0, 0.0, -9.81)

class Params(NamedTuple):
    """MuJoCo contact parameters of the cube on the ground.

    Attributes:
      friction:  sliding Coulomb μ (dimensionless, > 0).
      timeconst: solref[0], the time constant of the contact's reference dynamics, s (>= 2 x
                 the MuJoCo time step, which MuJoCo would otherwise clamp to it).
      dampratio: solref[1], the damping ratio of the reference dynamics (> 0; 1 = critical).
    """

    friction: float
    timeconst: float
    dampratio: float


# the nominal friction of the data and MuJoCo's default solref
DEFAULT_PARAMS = Params(friction=FRICTION, timeconst=0.02, dampratio=1.0)


def _positive(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return value


def cube_xml(timestep=SAMPLE_PERIOD / 4, *, params=DEFAULT_PARAMS,
             solimp=(0.9, 0.95, 0.001, 0.5, 2.0), cone="pyramidal", integrator="Euler") -> str:
    """The MJCF of the scene (see the module docstring): ground plane "ground" (z = 0) and
    the free-joint box "cube" (body and geom), both geoms with the friction and solref of
    `params` and the given `solimp`.

    Args:
      timestep: MuJoCo time step, s.
      params: `Params` written into both geoms.
      solimp: MuJoCo solimp (5 numbers), both geoms.
      cone: "pyramidal" (MuJoCo's default) or "elliptic".
      integrator: MuJoCo integrator name ("Euler", "implicitfast", "implicit", "RK4").
    """
    p = params
    imp = " ".join(repr(float(v)) for v in solimp)
    contact = (f'friction="{p.friction!r} 0.005 0.0001" solref="{p.timeconst!r} '
               f'{p.dampratio!r}" solimp="{imp}" condim="3"')
    g = " ".join(repr(float(v)) for v in GRAVITY)
    h = 0.5 * EDGE
    return f"""<mujoco model="contactnets_cube">
  <option timestep="{float(timestep)!r}" gravity="{g}" density="0" viscosity="0"
          cone="{cone}" integrator="{integrator}"/>
  <worldbody>
    <geom name="ground" type="plane" size="0 0 1" {contact}/>
    <body name="cube" pos="0 0 {h!r}">
      <freejoint name="cube"/>
      <inertial pos="0 0 0" mass="{MASS!r}" diaginertia="{INERTIA!r} {INERTIA!r} {INERTIA!r}"/>
      <geom name="cube" type="box" size="{h!r} {h!r} {h!r}" {contact}/>
    </body>
  </worldbody>
</mujoco>
"""


class CubeSim:
    """A compiled MuJoCo model of the cube on the ground, with its `MjData`, reused by every
    rollout (parameters are written into the compiled model; no XML is recompiled).

    Args:
      substeps: MuJoCo steps per sample: time step `SAMPLE_PERIOD / substeps` (default 4:
        0.0017 s).
      solimp, cone, integrator: see `cube_xml` (MuJoCo's defaults).

    Attributes:
      model, data: the `mujoco.MjModel` and `mujoco.MjData`.
      substeps, timestep: as above (timestep in s).
      min_timeconst: 2 x timestep, s: the smallest timeconst MuJoCo honours.

    Not thread-safe (one `MjData`); make one `CubeSim` per thread.
    """

    def __init__(self, substeps=4, *, solimp=(0.9, 0.95, 0.001, 0.5, 2.0), cone="pyramidal",
                 integrator="Euler"):
        import mujoco

        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) \
                or substeps < 1:
            raise ValueError(f"substeps must be an int >= 1, got {substeps!r}")
        if cone not in ("pyramidal", "elliptic"):
            raise ValueError(f"cone must be 'pyramidal' or 'elliptic', got {cone!r}")
        solimp = tuple(float(v) for v in solimp)
        if len(solimp) != 5:
            raise ValueError(f"solimp must have 5 numbers, got {solimp!r}")
        self._mujoco = mujoco
        self.substeps = int(substeps)
        self.timestep = SAMPLE_PERIOD / self.substeps
        self.min_timeconst = 2.0 * self.timestep
        self.model = mujoco.MjModel.from_xml_string(
            cube_xml(self.timestep, solimp=solimp, cone=cone, integrator=integrator))
        self.data = mujoco.MjData(self.model)
        self._geoms = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, name)
                       for name in ("ground", "cube")]
        self.params = None
        self.set_params(DEFAULT_PARAMS)

    def check_params(self, params) -> Params:
        """`params` as `Params` of floats (a `Params`, or any 3 numbers in its order).

        Raises:
          ValueError: not 3 numbers, a non-finite or non-positive one, or a timeconst under
            `min_timeconst` (MuJoCo would silently use `min_timeconst` instead).
        """
        try:
            friction, timeconst, dampratio = params
        except (TypeError, ValueError):
            raise ValueError("params must be 3 numbers (friction, timeconst, dampratio), got "
                             f"{params!r}") from None
        p = Params(_positive("friction", friction), _positive("timeconst", timeconst),
                   _positive("dampratio", dampratio))
        if p.timeconst < self.min_timeconst * (1 - 1e-12):
            raise ValueError(f"timeconst must be >= 2 x timestep = {self.min_timeconst:g} s "
                             f"(MuJoCo clamps smaller ones), got {p.timeconst!r}; use more "
                             "substeps for a smaller one")
        return p

    def set_params(self, params) -> Params:
        """Write `params` into both geoms of the compiled model (friction: `geom_friction[:,
        0]`, solref: `geom_solref`), so that MuJoCo's pair combination (max of frictions, mean
        of solrefs) gives exactly them. Returns the checked `Params`."""
        p = self.check_params(params)
        if p != self.params:
            for g in self._geoms:
                self.model.geom_friction[g, 0] = p.friction
                self.model.geom_solref[g] = (p.timeconst, p.dampratio)
            self.params = p
        return p

    def set_state(self, pos, quat, vel, ang_vel_world, time_=0.0) -> None:
        """Reset the data to a state: centre `pos` (3,) m and quaternion `quat` (4,) (w, x, y,
        z) body to world (normalized here), linear velocity `vel` (3,) m/s world frame,
        angular velocity `ang_vel_world` (3,) rad/s WORLD frame (rotated to the body frame
        that MuJoCo's free joint wants)."""
        mj = self._mujoco
        q = np.asarray(quat, dtype=np.float64)
        q = q / np.linalg.norm(q)
        d = self.data
        mj.mj_resetData(self.model, d)
        d.time = float(time_)
        d.qpos[0:3] = pos
        d.qpos[3:7] = q
        d.qvel[0:3] = vel
        d.qvel[3:6] = _rotate_inverse(q, np.asarray(ang_vel_world, dtype=np.float64))

    def advance(self, samples) -> tuple[np.ndarray, np.ndarray]:
        """Step `samples` sample periods (each `substeps` MuJoCo steps) from the current
        state; returns the poses at the ends of the periods: pos (samples, 3) m and quat
        (samples, 4) (w, x, y, z), body to world."""
        mj, m, d = self._mujoco, self.model, self.data
        out = np.empty((int(samples), 7))
        for i in range(int(samples)):
            mj.mj_step(m, d, self.substeps)
            out[i] = d.qpos[:7]
        return out[:, 0:3], out[:, 3:7] / np.linalg.norm(out[:, 3:7], axis=1, keepdims=True)

    def contact_params(self) -> list[tuple[float, tuple[float, float]]]:
        """(sliding friction, solref) of each contact of the current state (after a step or
        `mujoco.mj_forward`), as MuJoCo combined them."""
        d = self.data
        return [(float(c.friction[0]), (float(c.solref[0]), float(c.solref[1])))
                for c in d.contact[:d.ncon]] if d.ncon else []


def _rotate_inverse(q, v):
    """R(q)ᵀ v for a unit quaternion q (4,) (w, x, y, z) and a vector v (3,)."""
    w, u = q[0], -q[1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def _toss(tosses, k):
    """Toss k of a `jc.data.Tosses` or of a mapping / sequence of `jc.data.Toss`."""
    if isinstance(tosses, jcdata.Tosses):
        return tosses.toss(k)
    try:
        toss = tosses[k]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"no toss {k!r} in tosses") from None
    if not isinstance(toss, jcdata.Toss):
        raise ValueError(f"tosses[{k!r}] must be a jc.data.Toss, got {type(toss).__name__}")
    return toss


def rollout(sim: CubeSim, params, toss, start, steps) -> tuple[np.ndarray, np.ndarray]:
    """Simulate `toss` from its observed state at sample `start` for `steps` samples.

    Args:
      sim: the `CubeSim`.
      params: `Params` (or 3 numbers: friction, timeconst s, dampratio).
      toss: a `jc.data.Toss`.
      start: the start sample, 0 <= start; start + steps < len(toss.time).
      steps: samples to simulate, >= 0.

    Returns:
      pos (steps + 1, 3) m and quat (steps + 1, 4) (w, x, y, z) body to world: the predicted
      poses at the sample times t_start ... t_start + steps; row 0 is the observed start pose
      (quaternion normalized).

    Raises:
      ValueError: bad params, or a window outside the toss.
    """
    if not isinstance(toss, jcdata.Toss):
        raise ValueError(f"toss must be a jc.data.Toss, got {type(toss).__name__}")
    start, steps = _window_bounds(start, steps, len(toss.time))
    sim.set_params(params)
    sim.set_state(toss.pos[start], toss.quat[start], toss.vel[start], toss.ang_vel[start],
                  toss.time[start])
    pos, quat = sim.advance(steps)
    q0 = toss.quat[start] / np.linalg.norm(toss.quat[start])
    return np.concatenate([toss.pos[start][None], pos]), np.concatenate([q0[None], quat])


def _window_bounds(start, steps, count):
    for name, value in (("start", start), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if start + steps >= count:
        raise ValueError(f"window start {start} + steps {steps} must be < the toss's "
                         f"{count} samples")
    return int(start), int(steps)


def corners(pos, quat) -> np.ndarray:
    """World positions of the 8 cube corners (±EDGE/2 along each body axis), m.

    Args:
      pos: (T, 3) centres, m; quat: (T, 4) unit quaternions (w, x, y, z), body to world.

    Returns:
      (T, 8, 3); corner 4 i + 2 j + k has body coordinates EDGE/2 (±1, ±1, ±1), - for 0 and
      + for 1 (i on x, j on y, k on z).
    """
    pos = np.asarray(pos, dtype=np.float64)
    quat = np.asarray(quat, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 3 or quat.shape != (len(pos), 4):
        raise ValueError(f"pos must be (T, 3) and quat (T, 4), got {pos.shape} and "
                         f"{quat.shape}")
    return np.asarray(jcdata.corners(pos, quat))


def make_windows(tosses, ks, length=20, stride=10) -> list[tuple[int, int, int]]:
    """Windows (k, start, length) for `window_loss`: in each toss k of `ks`, starts 0, stride,
    2 stride, ... while start + length < the toss's samples (a window predicts samples start +
    1 ... start + length)."""
    for name, value in (("length", length), ("stride", stride)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    out = []
    for k in ks:
        count = len(_toss(tosses, k).time)
        out.extend((int(k), s, int(length)) for s in range(0, count - length, stride))
    return out


def window_errors(sim: CubeSim, params, tosses, windows) -> np.ndarray:
    """(W,) the mean squared corner error of each window, m² (see `window_loss`)."""
    windows = list(windows)
    if not windows:
        raise ValueError("windows must not be empty")
    p = sim.set_params(params)
    cache = {}
    out = np.empty(len(windows))
    for w, window in enumerate(windows):
        try:
            k, start, length = window
        except (TypeError, ValueError):
            raise ValueError(f"a window must be (k, start, length), got {window!r}") from None
        if k not in cache:
            cache[k] = _toss(tosses, k)
        toss = cache[k]
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise ValueError(f"window length must be an int >= 1, got {window!r}")
        pos, quat = rollout(sim, p, toss, start, length)
        pred = corners(pos[1:], quat[1:])
        obs = corners(toss.pos[start + 1:start + length + 1],
                      toss.quat[start + 1:start + length + 1])
        out[w] = np.mean(np.sum((pred - obs) ** 2, axis=-1))
    return out


def window_loss(sim: CubeSim, params, tosses, windows) -> float:
    """The mean over `windows` (k, start, length), over each window's `length` predicted
    samples (start + 1 ... start + length) and over the 8 corners, of |corner_pred -
    corner_obs|², m². Each window is simulated (`rollout`) from its observed start state;
    one window = one simulation.

    Args:
      sim: the `CubeSim`; params: `Params`.
      tosses: a `jc.data.Tosses`, or a mapping / sequence k -> `jc.data.Toss`.
      windows: a non-empty sequence of (k, start, length), start + length < toss k's samples.
    """
    return float(np.mean(window_errors(sim, params, tosses, windows)))


# --- CMA-ES -----------------------------------------------------------------------------------

def bounds(sim: CubeSim) -> dict:
    """The search box of `fit_cmaes`, per parameter (low, high): friction [0.01, 2],
    timeconst [max(0.002, 2 x timestep), 0.1] s, dampratio [0.1, 2]."""
    return {"friction": (0.01, 2.0), "timeconst": (max(0.002, sim.min_timeconst), 0.1),
            "dampratio": (0.1, 2.0)}


def _codec(sim):
    """Maps between Params and CMA-ES's unit-box coordinates z in [0, 1]³: z_i = (ln p_i -
    ln low_i) / (ln high_i - ln low_i)."""
    box = bounds(sim)
    lo = np.log([box[n][0] for n in Params._fields])
    hi = np.log([box[n][1] for n in Params._fields])

    def encode(p):
        return (np.log(np.asarray(p, dtype=np.float64)) - lo) / (hi - lo)

    def decode(z):
        z = np.clip(np.asarray(z, dtype=np.float64), 0.0, 1.0)
        return Params(*(float(v) for v in np.exp(lo + z * (hi - lo))))

    return encode, decode


def fit_cmaes(sim: CubeSim, train, windows, budget, seed=0, x0=None, sigma0=0.2,
              popsize=None, evaluate_start=True) -> dict:
    """Fit (friction, timeconst, dampratio) to `windows` of `train` by CMA-ES (`cma`), within a
    budget of window simulations.

    Search space: each parameter on a log scale, mapped linearly to [0, 1] over `bounds(sim)`
    (friction [0.01, 2], timeconst [max(0.002, 2 dt), 0.1] s, dampratio [0.1, 2]); CMA-ES
    works in that unit cube with `cma`'s bound handling (its default BoundTransform).

    Budget: one simulation = one window rollout, so one loss evaluation costs len(windows).
    The start point is evaluated first (if `evaluate_start`), then CMA-ES's candidates one
    by one; the fit stops before an evaluation that would take it over `budget`. A
    generation cut short is not told to CMA-ES (its evaluated candidates still count and can
    be the best).

    Args:
      sim: the `CubeSim`.
      train: a `jc.data.Tosses` or a mapping / sequence k -> `jc.data.Toss`.
      windows: (k, start, length) tuples (see `window_loss`).
      budget: the most window simulations to spend, >= len(windows).
      seed: int >= 0; CMA-ES's random seed is seed + 1 (`cma` reads 0 as "from the clock").
      x0: the start `Params`; default `DEFAULT_PARAMS` (nominal μ 0.15, MuJoCo's default
        solref (0.02, 1)). Clipped into the box.
      sigma0: CMA-ES's initial step in the unit cube (0.2: a factor of about 2.9 in friction,
        2 in timeconst, 1.8 in dampratio at the default step).
      popsize: CMA-ES population; default `cma`'s (7 for 3 parameters).
      evaluate_start: evaluate x0 first (counted in the budget).

    Returns:
      dict: `params` (best `Params`), `loss` (its window_loss, m²), `start_params`,
      `start_loss` (None if not evaluated), `history` (list of (simulations, best loss so far)
      after each evaluation), `simulations` (window rollouts used, <= budget), `evaluations`,
      `generations` (told to CMA-ES), `wall_time` (s), `budget`, `windows` (their number).

    Raises:
      ValueError: an empty window list, a budget under one evaluation, bad x0/seed/sigma0.
    """
    import cma

    windows = list(windows)
    if not windows:
        raise ValueError("windows must not be empty")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) \
            or budget < len(windows):
        raise ValueError(f"budget must be an int >= len(windows) = {len(windows)} (one loss "
                         f"evaluation), got {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    sigma0 = _positive("sigma0", sigma0)
    encode, decode = _codec(sim)
    start = decode(encode(sim.check_params(DEFAULT_PARAMS if x0 is None else x0)))
    cache = {k: _toss(train, k) for k in {w[0] for w in windows}}
    cost = len(windows)
    t0 = time.perf_counter()
    state = {"simulations": 0, "evaluations": 0, "best": None, "loss": math.inf}
    history = []

    def evaluate(p):
        loss = window_loss(sim, p, cache, windows)
        if not math.isfinite(loss):
            loss = math.inf
        state["simulations"] += cost
        state["evaluations"] += 1
        if loss < state["loss"]:
            state["best"], state["loss"] = p, loss
        history.append((state["simulations"], state["loss"]))
        return loss

    start_loss = evaluate(start) if evaluate_start else None
    opts = {"bounds": [[0.0] * 3, [1.0] * 3], "seed": int(seed) + 1, "verbose": -9}
    if popsize is not None:
        opts["popsize"] = int(popsize)
    es = cma.CMAEvolutionStrategy(list(encode(start)), sigma0, opts)
    generations = 0
    while state["simulations"] + cost <= budget and not es.stop():
        zs = es.ask()
        values = []
        for z in zs:
            if state["simulations"] + cost > budget:
                break
            loss = evaluate(decode(z))
            values.append(loss if math.isfinite(loss) else 1e30)
        if len(values) < len(zs):
            break
        es.tell(zs, values)
        generations += 1
    return {"params": state["best"], "loss": state["loss"], "start_params": start,
            "start_loss": start_loss, "history": history, "simulations": state["simulations"],
            "evaluations": state["evaluations"], "generations": generations,
            "wall_time": time.perf_counter() - t0, "budget": int(budget),
            "windows": len(windows)}


# --- checks and smoke run ---------------------------------------------------------------------

def _self_check(sim: CubeSim, tosses=None) -> dict:
    """Checks of the conventions; returns the measured numbers.

    - `drop`: released at rest 1 cm above the ground (centre at EDGE/2 + 0.01), after 1 s:
      the centre height and its offset from EDGE/2 (the resting penetration, m) and the
      contacts' combined (friction, solref) (must be the set ones).
    - `spin`: one step of a tilted body spinning about world z with gravity off (read
      against exp(ω dt) applied on the body or the world side: which frame qvel[3:6] is).
    - `flight` (with `tosses`): the longest in-flight stretch of each of the first 50
      tosses, simulated 10 samples from its first sample: max centre and corner errors, m.
    """
    mj = sim._mujoco
    out = {}
    p = sim.set_params(DEFAULT_PARAMS)
    sim.set_state((0.0, 0.0, EDGE / 2 + 0.01), (1.0, 0.0, 0.0, 0.0), np.zeros(3), np.zeros(3))
    pos, quat = sim.advance(int(round(1.0 / SAMPLE_PERIOD)))
    mj.mj_forward(sim.model, sim.data)
    combined = sim.contact_params()
    out["drop"] = {"z": float(pos[-1, 2]), "penetration": float(EDGE / 2 - pos[-1, 2]),
                   "contacts": len(combined),
                   "combined_ok": bool(combined) and all(
                       abs(f - p.friction) < 1e-12 and abs(s[0] - p.timeconst) < 1e-12
                       and abs(s[1] - p.dampratio) < 1e-12 for f, s in combined)}
    # spin: gravity off, a tilted cube high up, ω_world given; after one step compare
    g = sim.model.opt.gravity.copy()
    sim.model.opt.gravity[:] = 0
    try:
        q = np.array([math.cos(0.4), 0.6 * math.sin(0.4), 0.8 * math.sin(0.4), 0.0])
        omega = np.array([0.3, -1.0, 2.0])                      # world frame
        sim.set_state((0, 0, 1.0), q, np.zeros(3), omega)
        mj.mj_step(sim.model, sim.data)
        angle = np.linalg.norm(omega) * sim.timestep
        axis = omega / np.linalg.norm(omega)
        dq = np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
        expected = _quat_mul(dq, q)                             # world-side rotation
        out["spin_error"] = float(np.max(np.abs(sim.data.qpos[3:7] - expected)))
    finally:
        sim.model.opt.gravity[:] = g
    if tosses is not None:
        worst_c, worst_x, segments = 0.0, 0.0, 0
        for k in range(min(50, tosses.size)):
            toss = tosses.toss(k)
            fly = jcdata.in_flight(toss, 0.02)
            run, best = 0, (0, 0)
            for i, f in enumerate(fly):
                run = run + 1 if f else 0
                if run > best[1]:
                    best = (i - run + 1, run)
            if best[1] < 12:
                continue
            s = best[0]
            pos, quat = rollout(sim, p, toss, s, 10)
            err_c = np.linalg.norm(corners(pos, quat) - corners(toss.pos[s:s + 11],
                                                                 toss.quat[s:s + 11]), axis=-1)
            err_x = np.linalg.norm(pos - toss.pos[s:s + 11], axis=-1)
            worst_c = max(worst_c, float(np.max(err_c)))
            worst_x = max(worst_x, float(np.max(err_x)))
            segments += 1
        out["flight"] = {"segments": segments, "max_corner_error": worst_c,
                         "max_centre_error": worst_x}
    return out


def _quat_mul(a, b):
    w = a[0] * b[0] - a[1:] @ b[1:]
    return np.concatenate([[w], a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])])


def _main():
    import argparse

    ap = argparse.ArgumentParser(description="MuJoCo cube baseline: smoke run")
    ap.add_argument("--tosses", type=int, default=10)
    ap.add_argument("--length", type=int, default=20)
    ap.add_argument("--stride", type=int, default=10)
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--substeps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tosses = jcdata.load_tosses()
    sim = CubeSim(args.substeps)
    print(f"MuJoCo timestep {sim.timestep:g} s ({sim.substeps} per sample)")
    checks = _self_check(sim, tosses)
    print("checks:", checks)
    train = {k: tosses.toss(k) for k in range(args.tosses)}
    windows = make_windows(train, range(args.tosses), args.length, args.stride)
    t0 = time.perf_counter()
    loss0 = window_loss(sim, DEFAULT_PARAMS, train, windows)
    per = (time.perf_counter() - t0) / len(windows)
    print(f"{len(windows)} windows of {args.length} samples; loss at {DEFAULT_PARAMS}: "
          f"{loss0:.4e} m² (RMS corner error {math.sqrt(loss0) * 1e3:.1f} mm); "
          f"{per * 1e3:.3f} ms per window rollout")
    budget = max(args.budget, len(windows))
    fit = fit_cmaes(sim, train, windows, budget, seed=args.seed)
    print(f"CMA-ES: {fit['simulations']} simulations ({fit['evaluations']} evaluations, "
          f"{fit['generations']} generations) in {fit['wall_time']:.2f} s: best {fit['params']}"
          f", loss {fit['loss']:.4e} m² (RMS {math.sqrt(fit['loss']) * 1e3:.1f} mm)")


if __name__ == "__main__":
    _main()
