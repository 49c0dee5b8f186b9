"""Contact laws as pure energy and dissipation functions of local contact quantities.

Each law sees a gap `d` (m, negative in penetration), a normal slip-free velocity or a
tangential slip velocity, and parameters; it returns a scalar energy per contact. Forces come
from `jax.grad` of these energies, never from a second hand-written formula. Every law is
finite in value and gradient at zero slip and at zero normal force (DESIGN.md section 4).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxcontact import validate as check
from jaxcontact.math import safe_div
from jaxcontact.terms import bilateral_energy, disc_energy, unilateral_energy

NORMAL_LAWS = ("linear", "power", "smooth")
FRICTION_LAWS = ("huber", "pseudo_huber", "tanh", "linear")

# Below this friction bound μ f_n (N) the tanh law is taken as exactly zero: the law divides by
# (μ f_n)², which must stay far from float32 underflow (~1e-38).
_TANH_MIN_BOUND = 1e-12


# --- normal penalties -----------------------------------------------------------------------

def linear_energy(d, k):
    """U = k/2 min(d, 0)², the force f = k max(-d, 0) of ADD Eq. 16: the one-sided row of
    `terms.unilateral_energy` (so Dual projects it as a compliant constraint)."""
    return unilateral_energy(d, k, None)


def power_energy(d, k, p):
    """U = k/p |min(d, 0)|^p (thesis Eq. 129, with |.| so that odd p keep the sign right).

    p = 2 is `linear`; p = 3 gives a C1 force.
    """
    pen = jnp.maximum(-d, 0.0)
    inside = pen > 0.0
    # placeholder 1 outside contact: pen**p has NaN higher derivatives at 0 for 2 <= p < 3
    return jnp.where(inside, k / p * jnp.where(inside, pen, 1.0) ** p, 0.0)


def smooth_energy(d, k, delta):
    """C2 mollified penalty of width δ: U = k R_δ(-d).

    The force k ρ_δ(x) (x = -d) uses the quartic ramp ρ_δ(x) = (x+δ)³(3δ-x)/(16δ³) on
    |x| < δ, which matches 0 and the ramp x to second order at x = -δ and x = δ. So the force
    starts at a gap of +δ, and for penetrations beyond δ it equals the `linear` force exactly;
    R_δ(x) = x²/2 + δ²/10 there. Trade-off: larger δ gives smoother gradients near the edge of
    contact but a force (and so a visible gap up to δ) before the surfaces touch; resting
    penetration under a load F is F/k only once F/k > δ. As δ → 0 this tends to `linear`.
    """
    x = -d
    y = jnp.clip(x + delta, 0.0, 2.0 * delta)
    inner = (delta * y ** 4 - y ** 5 / 5.0) / (16.0 * delta ** 3)
    outer = 0.5 * x * x + delta * delta / 10.0
    return k * jnp.where(x >= delta, outer, jnp.where(x <= -delta, 0.0, inner))


def normal_energy(d, k, law="linear", p=3.0, delta=1e-3):
    """Normal penalty energy for the named law (see DESIGN.md section 4)."""
    if law == "linear":
        return linear_energy(d, k)
    if law == "power":
        return power_energy(d, k, p)
    if law == "smooth":
        return smooth_energy(d, k, delta)
    raise ValueError(f"normal law must be one of {NORMAL_LAWS}, got {law!r}")


def normal_force(d, k, law="linear", p=3.0, delta=1e-3):
    """Magnitude of the repulsive normal force f_n = -dU/dd (elementwise)."""
    grad = jax.grad(lambda dd: jnp.sum(normal_energy(dd, k, law, p, delta)))
    return -grad(d)


def contact_fraction(gap_start, gap_end):
    """Fraction of the step during which the gap, interpolated linearly, is negative.

    1 if in contact at both ends, 0 if at neither, else the time of impact (or separation)
    as a fraction of the step. ADD Eq. 21 switches damping on where the end-of-step gap is
    negative; that switch makes the residual of the step discontinuous in u (an impact whose
    root lies on the switch has no solution, and Newton cycles), and the damping impulse of a
    step jump as the impact time crosses a step boundary. Weighting by this fraction is
    continuous in both, and equals ADD's switch whenever a contact spans the whole step.
    """
    into = (gap_start > 0.0) & (gap_end < 0.0)
    out_of = (gap_start <= 0.0) & (gap_end > 0.0)
    both = (gap_start <= 0.0) & (gap_end <= 0.0)
    crossing = safe_div(gap_start, gap_start - gap_end)  # time of the zero crossing, in (0, 1]
    return jnp.where(both, 1.0, jnp.where(into, 1.0 - crossing, jnp.where(out_of, crossing, 0.0)))


def damping_dissipation(v_n, k_d, weight):
    """D = w k_d/2 v_n²: the damping force -k_d v_n of ADD Eq. 21, weighted by the fraction w of
    the step spent in contact (`contact_fraction`): an equality row of stiffness w k_d."""
    return bilateral_energy(v_n, weight * k_d, None)


# --- friction (dissipation potentials of the tangential slip velocity) --------------------
# All are written in z = |u_s|² so that they are smooth at u_s = 0 including their Hessian.

def huber_dissipation(z, bound, k_f):
    """Relaxed Coulomb potential of thesis Eq. 132, with bound = μ f_n.

    D = k_f/2 |u_s|²                  if k_f |u_s| < μ f_n   (stick: viscous, stiffness k_f)
      = μ f_n |u_s| - (μ f_n)²/(2 k_f)  otherwise              (slip: exact Coulomb force)
    The force is -min(k_f, μ f_n/|u_s|) u_s (Eq. 133) and ADD's clamped linear law (Eq. 17).
    """
    return disc_energy(z, k_f, bound)   # the disc rows of `terms` (Dual projects them)


def pseudo_huber_dissipation(z, bound, eps):
    """D = μ f_n (sqrt(|u_s|² + ε²) - ε): C∞, force → μ f_n for |u_s| >> ε."""
    return bound * (jnp.sqrt(z + eps * eps) - eps)


def _log_cosh_sqrt(y):
    """log cosh(sqrt(y)) for y >= 0, smooth at 0 (series below 1e-3, error < 1e-11 rel.)."""
    small = y < 1e-3
    x = jnp.sqrt(jnp.where(small, 1.0, y))
    big = x + jnp.log1p(jnp.exp(-2.0 * x)) - math.log(2.0)
    series = y / 2.0 - y * y / 12.0 + y ** 3 / 45.0 - 17.0 * y ** 4 / 2520.0
    return jnp.where(small, series, big)


def tanh_dissipation(z, bound, k_t):
    """Potential of ADD Eq. 18, f_t = -t μ f_n tanh(k_t |u_s| / (μ f_n)).

    D = (μ f_n)²/k_t log cosh(k_t |u_s| / (μ f_n)); D = 0 where μ f_n = 0 (the limit).
    """
    ok = bound > _TANH_MIN_BOUND
    b = jnp.where(ok, bound, 1.0)
    return jnp.where(ok, b * b / k_t * _log_cosh_sqrt(k_t * k_t * z / (b * b)), 0.0)


def friction_dissipation(z, bound, law, k_f, eps, k_t_linear):
    """Friction potential of the named law at squared slip z and bound μ f_n.

    `linear` is ADD's clamped law (Eq. 17), which is `huber` with k_t = k_n Δt.
    """
    if law == "huber":
        return huber_dissipation(z, bound, k_f)
    if law == "pseudo_huber":
        return pseudo_huber_dissipation(z, bound, eps)
    if law == "tanh":
        return tanh_dissipation(z, bound, k_f)
    if law == "linear":
        return huber_dissipation(z, bound, k_t_linear)
    raise ValueError(f"friction law must be one of {FRICTION_LAWS}, got {law!r}")


# --- restitution (ADD Eq. 22) ----------------------------------------------------------------

def restitution_to_damping(restitution, stiffness, mass):
    """Damping k_d giving coefficient of restitution e for a point mass (ADD Eq. 22 inverted).

    e = exp(-π k_d / sqrt(4 k_n m - k_d²))  ⇔  k_d = 2 L sqrt(k_n m) / sqrt(π² + L²), L = -ln e.
    e = 0 gives critical damping 2 sqrt(k_n m); e = 1 gives 0.

    This is the law of the continuous spring-damper. The implicit step adds numerical damping
    of its own, so a simulated bounce reaches e only when the contact, which lasts
    π sqrt(m / k_n), spans many steps: e.g. at dt = 2e-5 s, k_n = 1e5, m = 1 the measured e is
    0.49 for e = 0.5, but at dt = 2 ms (5 steps per contact) it is about 0.26.
    """
    check.number_or_array("restitution", restitution, low=0.0, high=1.0)
    check.number_or_array("stiffness", stiffness, positive=True)
    check.number_or_array("mass", mass, positive=True)
    e = jnp.asarray(restitution)
    crit = 2.0 * jnp.sqrt(stiffness * mass)
    # e = 0 (L = ∞) is the critical limit; elsewhere L/sqrt(π²+L²) is smooth, also at e = 1
    positive = e > 0.0
    log_e = -jnp.log(jnp.where(positive, e, 1.0))
    return crit * jnp.where(positive, log_e / jnp.sqrt(math.pi ** 2 + log_e ** 2), 1.0)


def damping_to_restitution(damping, stiffness, mass):
    """Coefficient of restitution of a point mass, ADD Eq. 22: e = exp(-π k_d/sqrt(4 k m - k_d²)).

    Returns 0 at or above critical damping (k_d² >= 4 k m), where the contact does not rebound.
    """
    check.number_or_array("damping", damping, low=0.0)
    check.number_or_array("stiffness", stiffness, positive=True)
    check.number_or_array("mass", mass, positive=True)
    disc = 4.0 * stiffness * mass - damping * damping
    under = disc > 0
    return jnp.where(under, jnp.exp(-math.pi * damping / jnp.sqrt(jnp.where(under, disc, 1.0))),
                     0.0)


# --- settings ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Contact:
    """Choice of contact and friction laws, passed to `Scene.build(contact=...)`.

    Attributes:
      normal: "linear" (ADD Eq. 16, default), "power" (thesis Eq. 129) or "smooth" (C2).
      power: exponent p >= 2 of the "power" law.
      smooth_width: width δ (m) of the "smooth" law.
      friction: "huber" (thesis Eq. 132, default), "pseudo_huber", "tanh" (ADD Eq. 18) or
        "linear" (ADD Eq. 17, clamped linear with k_t = k_n Δt).
      friction_stiffness: k_f (N s/m) of "huber" and k_t of "tanh". Under a tangential load F
        below the Coulomb bound a body creeps at F / k_f (relaxed friction has no force at
        zero slip, thesis Sec. 5.5): the default 1e4 gives 0.1 mm/s per N of load.
      friction_eps: regularization velocity ε (m/s) of "pseudo_huber".
    """

    normal: str = "linear"
    power: float = 3.0
    smooth_width: float = 1e-3
    friction: str = "huber"
    friction_stiffness: float = 1e4
    friction_eps: float = 1e-4

    def __post_init__(self):
        check.choice("normal", self.normal, NORMAL_LAWS)
        check.choice("friction", self.friction, FRICTION_LAWS)
        check.number("power", self.power, low=2)
        for name in ("smooth_width", "friction_stiffness", "friction_eps"):
            check.number(name, getattr(self, name), positive=True)
