"""MuJoCo's soft constraints (solref, solimp) as our penalty laws: the one place of the mapping.

MuJoCo (its documentation, "Computation", soft constraints) pulls a constraint violated by r
toward the reference acceleration a_ref = -b ṙ - k r, weighted by the impedance d(r) in
(0, 1): solimp's sigmoid of |r| (d0 at 0, d_w from |r| = width on; its midpoint and power).
With d_w = solimp's d_width,

    solref (τ, ζ), τ > 0:   b = 2 / (d_w τ),   k = d(r) / (d_w² τ² ζ²)    (τ >= 2 Δt: refsafe)
    solref (-K, -B):         b = B / d_w,       k = d(r) K / d_w².

Its force is (a_ref - J a) / R, R = (1 - d) / d · A, A the constraint's inverse inertia
(MuJoCo's approximation of it: `body_invweight0` for contacts, `dof_invweight0` for joint
rows). On a coordinate of effective inertia m = 1 / A it therefore

- holds a load m a, statically, at the violation r where a = κ(r) r, κ = d k / (1 - d): the
  penalty that holds the same load at the same violation has stiffness m κ(r);
- moves, about a rest, as stiffness d k and damping d b per unit mass: the damping ratio
  ζ* = d b / (2 sqrt(d k)) (ζ itself for (τ, ζ) at d = d_w). The penalty's damping
  2 ζ* sqrt(stiffness m) keeps it.

A penalty cannot match both: MuJoCo's transient is 1 / sqrt(1 - d) times slower than its
static stiffness's (4.5 times at d = 0.95). We keep the static hold and the damping ratio.

Where the violation is taken: a joint limit, an equality or a tendon range at |r| >= width
(d = d_w: the load is not known); a contact where it holds its own body's weight,
κ(r) r = |g| (`contact_law`; MuJoCo's own resting penetration, checked in the tests).

MuJoCo's default cone is pyramidal: for condim 3 its four edges carry the normal force, and
their regularizers make κ and b smaller by F = μ² (1 + μ²) / 2 (μ the pair's sliding friction;
the same as an impedance d' with (1 - d') / d' = F (1 - d) / d). This was found and checked
against MuJoCo's resting penetration of a sphere for μ from 0.3 to 2 (agreement 1e-9
relative); for condim 4 and 6 the same F is an approximation. An elliptic cone or condim 1
has F = 1.
"""

from __future__ import annotations

import numpy as np

MIN_IMPEDANCE, MAX_IMPEDANCE = 1e-4, 0.9999    # MuJoCo's mjMINIMP, mjMAXIMP: its clamp of d


def impedance(solimp, r) -> float:
    """MuJoCo's impedance d(r) of solimp (d0, d_width, width, midpoint, power) at |r|."""
    d0, dw, width, mid, power = (float(v) for v in solimp[:5])
    d0, dw = (min(max(v, MIN_IMPEDANCE), MAX_IMPEDANCE) for v in (d0, dw))
    x = 1.0 if width <= 0.0 else min(abs(float(r)) / width, 1.0)
    if power == 1.0 or x in (0.0, 1.0):
        y = x
    elif x <= mid:
        y = x ** power / mid ** (power - 1.0)
    else:
        y = 1.0 - (1.0 - x) ** power / (1.0 - mid) ** (power - 1.0)
    return d0 + y * (dw - d0)


def _reference(mujoco, m, solref, d_width):
    """(K, b): MuJoCo's k = d(r) K and its b, from solref (module docstring)."""
    first, second = (float(v) for v in solref[:2])
    if first > 0.0:
        if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE:
            first = max(first, 2.0 * float(m.opt.timestep))
        return 1.0 / (d_width * d_width * first * first * second * second), 2.0 / (d_width * first)
    return -first / (d_width * d_width), -second / d_width


def _penalty(mujoco, m, solref, solimp, mass, accel, pyramid):
    d_width = min(max(float(solimp[1]), MIN_IMPEDANCE), MAX_IMPEDANCE)
    K, b = _reference(mujoco, m, solref, d_width)

    def at(r):
        """(κ, ζ*) at violation r (d' the impedance the cone's edges make of d)."""
        d = impedance(solimp, r)
        k, d_eff = d * K, d / (d + pyramid * (1.0 - d))
        return d_eff * k / (1.0 - d_eff), d_eff * b / (2.0 * np.sqrt(d_eff * k))

    width = max(float(solimp[2]), 0.0)
    kappa_width = at(width)[0]
    if accel is None or accel <= 0.0:
        r = width
    elif width == 0.0 or accel / kappa_width >= width:   # held where d = d_width
        r = accel / kappa_width
    else:                     # κ(r) r rises with r: bisect on (0, width)
        lo, hi = 0.0, width
        for _ in range(64):   # width / 2^64: below float64's resolution of r
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if at(mid)[0] * mid < accel else (lo, mid)
        r = 0.5 * (lo + hi)
    kappa, ratio = at(r)
    stiffness = mass * kappa
    return stiffness, 2.0 * ratio * np.sqrt(stiffness * mass)


def impedance_law(mujoco, m, solref, solimp, mass):
    """(stiffness, damping) of a penalty that holds a load as MuJoCo's soft constraint with
    `solref`, `solimp` does at d = d_width, on a coordinate of effective inertia `mass`
    (joint limits, equalities, tendon ranges: module docstring)."""
    return _penalty(mujoco, m, solref, solimp, mass, None, 1.0)


def contact_law(mujoco, m, solref, solimp, mass, gravity, friction, condim):
    """(stiffness, damping) of the contact of one geom against the static world, as MuJoCo's
    contact with `solref`, `solimp` on a body of contact inertia `mass` (1 / body_invweight0):
    the same resting penetration under its weight (`gravity`, m/s²) and MuJoCo's damping
    ratio. `friction` is the pair's sliding μ and `condim` the geom's, for the pyramidal
    cone's factor F (module docstring)."""
    pyramid = 1.0
    if int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_PYRAMIDAL) and condim > 1:
        mu2 = float(friction) ** 2
        pyramid = max(mu2 * (1.0 + mu2) / 2.0, MIN_IMPEDANCE)
    return _penalty(mujoco, m, solref, solimp, mass, float(gravity), pyramid)
