"""Contact and friction laws, and the one convex cost per contact that the step minimizes.

A contact is linearized at the start of the step (`models.contacts`): its gap d₀ and, for the
velocities u being solved for, its relative velocity at the contact point in the contact frame,
v = (v_n, v_t) = J u (normal component, two tangential ones). Everything that happens at the
contact during the step is one function ℓ(v) of those three numbers (`contact_cost`), convex
in v, so that the step's potential is one fixed convex function of u (DESIGN.md section 1).

Normal law. A potential U(d) of the gap (`linear` ADD Eq. 16, `power` thesis Eq. 129,
`smooth`), its force f = -U'(d). Damping is the law read at the gap a time τ = k_d/k_n later,
f = f_U(d + τ ḋ) (the linear dissipation model of Drake's SAP, Castro et al. 2022): for the
linear law f = max(0, k_n(-d) - k_d ḋ), a spring and damper in parallel that never pull. Over
the step, with the end-of-step gap d₀ + Δt v_n and T = Δt + τ, the normal impulse is

    γ_n(x) = Δt f_U(d₀ + T x) = -N'(x),     N(x) = (Δt / T) U(d₀ + T x),

at normal velocity x, and N is convex and non-increasing. The damper is continuous in the
state (no switch on the gap at the start of the step, which made the step discontinuous).

Friction. A dissipation H(v_t; b) of the slip velocity bounded by b = μ γ_n (impulse), each
concave in b: `huber` (thesis Eq. 132-133; stick stiffness s = Δt k_f), ADD's clamped
`linear` (Eq. 17, s = Δt k_n Δt), `pseudo_huber` b (sqrt(|v|² + ε²) - ε) and `tanh` (ADD Eq. 18).

Coupling (maximum dissipation over the friction cone). With friction's bound taken from the
normal impulse of the same step, the cost is

    ℓ(v) = max_{γ >= 0} [ -γ v_n - h(γ) + H(v_t; μ γ) ]   (h the conjugate of N)
         = max_x [ N(x) + γ_n(x) (x - v_n) + H(v_t; μ γ_n(x)) ],

a supremum of functions affine in v: convex. Its gradient is minus the impulses,
∂ℓ/∂v_n = -γ_n, ∂ℓ/∂v_t = ∂H/∂v_t, with |friction| <= μ γ_n (Coulomb). The maximizing x
solves r(x) = x - v_n + μ ∂_b H(v_t; μ γ_n(x)) = 0, r increasing. For the default pair
(linear normal law, huber or linear friction) ℓ has SAP's closed form (Castro, Permenter,
Han 2022, Sec. V; `_linear_huber`); with pseudo_huber, x = v_n - μ (sqrt(|v|² + ε²) - ε) in
closed form for every normal law; the other pairs find x by a bracketed scalar Newton.

What the coupling costs: a sliding contact behaves as if its normal velocity were
v_n - μ |slip| (Anitescu's relaxation): a body sliding at speed w rests μ w T higher on its
contact than at rest (1 mm at 1 m/s, μ = 0.5, T = 2 ms); its friction force is exact Coulomb.
Where the contact sticks (|friction| < μ γ_n) the normal and tangential parts separate.

Every law is finite in value and derivatives at zero slip and at zero normal force.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from jaxcontact import validate as check
from jaxcontact.math import safe_sqrt

NORMAL_LAWS = ("linear", "power", "smooth")
FRICTION_LAWS = ("huber", "pseudo_huber", "tanh", "linear")

# Below this friction bound μ γ_n the tanh law is taken as exactly zero: the law divides by
# the bound squared, which must stay far from float32 underflow (~1e-38).
_TANH_MIN_BOUND = 1e-12
# Iterations of the bracketed scalar Newton of the pairs without a closed form (`_maximizer`):
# its function is monotone with slope >= 1, and the bracket halves where Newton leaves it.
_ROOT_ITERATIONS = 24


# --- normal penalties -----------------------------------------------------------------------

def linear_energy(d, k):
    """U = k/2 min(d, 0)², the force f = k max(-d, 0) of ADD Eq. 16."""
    low = jnp.minimum(d, 0.0)
    return 0.5 * k * low * low


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
    """Normal penalty energy U(d) for the named law (see DESIGN.md section 4)."""
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


# --- friction (dissipation potentials of the tangential slip, per unit of time) ------------
# All are written in z = |u_s|² so that they are smooth at u_s = 0 including their Hessian.

def huber_dissipation(z, bound, k_f):
    """Relaxed Coulomb potential of thesis Eq. 132, with bound = μ f_n.

    D = k_f/2 |u_s|²                  if k_f |u_s| < μ f_n   (stick: viscous, stiffness k_f)
      = μ f_n |u_s| - (μ f_n)²/(2 k_f)  otherwise              (slip: exact Coulomb force)
    The force is -min(k_f, μ f_n/|u_s|) u_s (Eq. 133) and ADD's clamped linear law (Eq. 17).
    Smooth in z at u_s = 0; a zero bound gives no force.
    """
    stick = z < (bound / k_f) ** 2
    # strict: with bound 0 there is no stick stiffness either; the slip branch then sees
    # z = 0 only through safe_sqrt, which is finite there
    slip = bound * safe_sqrt(jnp.where(stick, 1.0, z)) - bound * bound / (2.0 * k_f)
    return jnp.where(stick, 0.5 * k_f * z, slip)


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


# --- the contact's cost in the step ----------------------------------------------------------

COUPLINGS = ("cone", "lagged")


@dataclasses.dataclass(frozen=True)
class Laws:
    """The static choice of laws (from `jc.Contact`): normal law, its power, friction law,
    and how friction's bound is coupled to the normal impulse."""

    normal: str = "linear"
    power: float = 3.0
    friction: str = "huber"
    coupling: str = "cone"
    near_rigid: float = 1.0
    friction_regularization: float = 1e-3


def stick_stiffness(laws: Laws, k, dt, k_f):
    """s, friction's stiffness in stick as written (impulse per slip velocity, N s/m): Δt k_f
    (huber, tanh's k_t), Δt k_n Δt (ADD's clamped linear law, Eq. 17)."""
    return dt * (k * dt if laws.friction == "linear" else k_f)


def regularization(laws: Laws, delassus, k, damping, dt, k_f):
    """Each row's stick stiffness s and normal stiffness factor f, from the diagonal block
    W = J M⁻¹ Jᵀ (3, 3) of its contact (the inverse of its effective mass; SAP's
    regularization, Castro, Permenter, Han 2022, Sec. V, with its defaults σ = 1e-3, β = 1):

      s = min(s_law, 1 / (σ w_t)),   w_t = (W₁₁ + W₂₂) / 2   (σ = `friction_regularization`)
      f = min(1, 4π² / (β² w_n Δt k T)),   w_n = W₀₀          (β = `near_rigid`, linear law)

    Under a tangential load F a sticking contact creeps at F Δt / s: with the bound, at most σ
    times the velocity change F Δt / m_eff that the load gives the contact in one step, and
    never more than F / k_f. The normal law's stiffness k (and its damping, so that
    τ = k_d/k stays) is scaled by f where the contact's natural period 2π sqrt(m_eff / k)
    (with T = Δt + τ for Δt) would fall below β Δt: a contact stiffer than the step resolves
    acts rigid either way, and its stiffness only makes the step's problem ill-conditioned
    (k_n Δt²/m ~ 1e4 took the fuzz benchmark's light bodies 20-50 Newton iterations per
    step; design note 57). σ = 0, β = 0: the laws exactly as written. The effective mass is
    the contact's bodies' own (joints to other bodies are not counted)."""
    s = jnp.broadcast_to(stick_stiffness(laws, k, dt, k_f), jnp.shape(k))
    if laws.friction_regularization > 0.0:
        w_t = 0.5 * (delassus[..., 1, 1] + delassus[..., 2, 2])
        s = jnp.minimum(s, 1.0 / (laws.friction_regularization * w_t))
    if laws.near_rigid == 0.0 or laws.normal != "linear":
        return s, jnp.ones_like(s)
    T = dt + damping / k
    cap = 4.0 * math.pi ** 2 / (laws.near_rigid ** 2 * delassus[..., 0, 0])
    return s, jnp.minimum(1.0, cap / (dt * k * T))


def normal_impulse(vn, gap, k, damping, dt, laws: Laws, shared):
    """γ_n(v_n) = Δt f_U(d₀ + T v_n) (module docstring): the normal impulse over the step at
    normal velocity v_n, without friction."""
    T = dt + damping / k
    return dt * normal_force(gap + T * vn, k, laws.normal, laws.power, shared["smooth_width"])


def _linear_huber(vn, z, gap, k, tau, mu, dt, s):
    """ℓ of the linear normal law with huber friction in closed form (SAP, Castro et al. 2022,
    Sec. V, in this module's terms): with P = -(d₀ + T v_n), ŷ = Δt k max(P, 0) the normal
    impulse without friction and μ̂² = Δt k T μ² / s,

        stick (s |v_t| < μ ŷ):   ℓ = N(v_n) + s/2 |v_t|²
        slip:                    ℓ = N(v_n - μ |v_t|) / (1 + μ̂²),

    continuous where they meet (s |v_t| = μ ŷ)."""
    T = dt + tau

    def n_of(x):
        low = jnp.minimum(gap + T * x, 0.0)
        return 0.5 * dt * k / T * low * low

    free = dt * k * jnp.maximum(-(gap + T * vn), 0.0)
    # strict: without a normal impulse there is no stick stiffness either, also at zero slip
    # (a free flight's implicit gradients would otherwise see one)
    stick = s * s * z < (mu * free) ** 2
    slip = n_of(vn - mu * safe_sqrt(z)) / (1.0 + dt * k * T * mu * mu / s)
    return jnp.where(stick, n_of(vn) + 0.5 * s * z, slip)


def _blocks(corner, edge, inner):
    """The symmetric 3 x 3 [[corner, edgeᵀ], [edge, inner]] (stacked, not scattered)."""
    top = jnp.concatenate([corner[None], edge])
    rest = jnp.concatenate([edge[:, None], inner], axis=1)
    return jnp.concatenate([top[None, :], rest], axis=0)


def closed_form(laws: Laws) -> bool:
    """Whether `contact_derivatives` has the laws' value, gradient and Hessian in closed form
    (the linear normal law with huber or linear friction, either coupling)."""
    return laws.normal == "linear" and laws.friction in ("huber", "linear")


def contact_derivatives(v, gap, k, damping, mu, dt, laws: Laws, shared, bound,
                        reweighted=False, stick=None):
    """(ℓ, ∇ℓ (3,), ∇²ℓ (3, 3)) of `contact_cost` in closed form, for the laws of
    `closed_form` (the same function, differentiated by hand: the solver's loop evaluates
    these for every contact row; autodiff's nested derivatives of the branches cost several
    times more).

    With P = -(d₀ + T x) (x = v_n, T = Δt + k_d/k), w = v_t, r = |w|, ŵ = w/r, s the stick
    stiffness and N(x) = Δt k/(2T) max(P, 0)²:
      lagged coupling, bound b:  ℓ = N(x) + H_b(w) (huber: s/2 r² for s r < b, b r - b²/(2s)
        beyond), ∇²ℓ = Δt k T [P > 0] ⊕ (s I, or (b/r)(I - ŵŵᵀ) in slip);
      cone coupling (`_linear_huber`): stick as above with b = μ Δt k max(P, 0); in slip, with
        Q = P + T μ r, a = Δt k T [Q > 0]/(1 + μ̂²), β = Δt k μ max(Q, 0)/(1 + μ̂²):
        ∇ℓ = (-β/μ, β ŵ), ∇²ℓ = [[a, -a μ ŵᵀ], [-a μ ŵ, a μ² ŵŵᵀ + (β/r)(I - ŵŵᵀ)]].
    `reweighted` adds (β/r) ŵŵᵀ (or (b/r) ŵŵᵀ) along the slip: friction's curvature held at
    its slope, for Descent's preconditioner (`_slope_held`)."""
    T = dt + damping / k
    s = stick_stiffness(laws, k, dt, shared["friction_stiffness"]) if stick is None else stick
    x, w = v[0], v[1:]
    z = jnp.sum(w * w)
    r = safe_sqrt(z)
    unit = jnp.where(r > 0.0, w / jnp.where(r > 0.0, r, 1.0), 0.0)
    eye = jnp.eye(2, dtype=v.dtype)
    along = unit[:, None] * unit[None, :]
    P = -(gap + T * x)
    pushing = P > 0.0
    push = jnp.maximum(P, 0.0)
    normal_value = 0.5 * dt * k / T * push * push
    if laws.coupling == "lagged":
        b = bound
    else:
        b = mu * dt * k * push
    stick = s * s * z < b * b
    # the lagged huber (and the cone's stick branch)
    friction_value = jnp.where(stick, 0.5 * s * z, b * r - b * b / (2.0 * s))
    friction_grad = jnp.where(stick, s, jnp.where(r > 0.0, b / jnp.where(r > 0.0, r, 1.0),
                                                  0.0)) * w
    slip_curve = jnp.where(r > 0.0, b / jnp.where(r > 0.0, r, 1.0), 0.0)
    friction_hess = jnp.where(stick, s * eye, slip_curve * (eye - along)
                              + (slip_curve * along if reweighted else 0.0))
    normal_curve = jnp.where(pushing, dt * k * T, 0.0)
    value = normal_value + friction_value
    grad = jnp.concatenate([-dt * k * push[None], friction_grad])
    zero = jnp.zeros((2,), v.dtype)
    hess = _blocks(normal_curve, zero, friction_hess)
    if laws.coupling == "lagged":
        return value, grad, hess
    # the cone's slip branch
    ratio = 1.0 + dt * k * T * mu * mu / s
    Q = P + T * mu * r
    q_push = jnp.maximum(Q, 0.0)
    a = jnp.where(Q > 0.0, dt * k * T, 0.0) / ratio
    beta = dt * k * mu * q_push / ratio
    curve = jnp.where(r > 0.0, beta / jnp.where(r > 0.0, r, 1.0), 0.0)
    slip_value = 0.5 * dt * k / T * q_push * q_push / ratio
    slip_grad = jnp.concatenate([-dt * k * q_push[None] / ratio, beta * unit])
    slip_hess = _blocks(a, -a * mu * unit, a * mu * mu * along + curve * (eye - along)
                        + (curve * along if reweighted else 0.0))
    return (jnp.where(stick, value, slip_value), jnp.where(stick, grad, slip_grad),
            jnp.where(stick, hess, slip_hess))


def _maximizer(r, low, high):
    """The root of the increasing scalar function r in [low, high] (r(low) <= 0 <= r(high)),
    by Newton's method kept in the bracket (a step that leaves it bisects instead), with
    `_ROOT_ITERATIONS` iterations; no derivative flows through it (`contact_cost`)."""
    slope = jax.grad(r)

    def body(_, carry):
        x, lo, hi = carry
        value = r(x)
        lo = jnp.where(value <= 0.0, x, lo)
        hi = jnp.where(value >= 0.0, x, hi)
        newton = x - value / jnp.maximum(slope(x), 1.0)
        inside = (newton > lo) & (newton < hi)
        return jnp.where(inside, newton, 0.5 * (lo + hi)), lo, hi

    start = jax.lax.stop_gradient((high, low, high))
    return jax.lax.fori_loop(0, _ROOT_ITERATIONS, body, start)[0]


def _slope_held(fn):
    """fn(laws, z, ...) with its value and first derivatives, but a second derivative in z of
    zero:
    the potential whose Hessian in v is 2 fn'(z) I, friction's reweighted curvature (thesis
    Eq. 136): along the slip it is b/|v| where the exact Hessian has none. Descent's block
    preconditioner needs it: a fixed step along a direction without curvature overshoots."""
    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def held(laws, z, *params):
        return fn(laws, z, *params)

    @held.defjvp
    def _jvp(laws, primals, tangents):
        z, *params = primals
        slope = jax.grad(lambda y: fn(laws, y, *params))(z)
        value, dparams = jax.jvp(lambda *p: fn(laws, z, *p), tuple(params),
                                 tuple(tangents[1:]))
        return value, jax.lax.stop_gradient(slope) * tangents[0] + dparams

    return held


def contact_cost(v, gap, k, damping, mu, dt, laws: Laws, shared, bound=None,
                 reweighted=False, stick=None):
    """ℓ(v) of one contact (module docstring): its share of the step's potential, in J.

    Args:
      v: (3,) (v_n, v_t1, v_t2), the relative velocity at the contact point in its frame
        (normal from side b into side a; v_n > 0 separates), m/s.
      gap: () d₀, the signed distance at the start of the step, m.
      k, damping, mu: () the pair's normal stiffness k_n, damping k_d, friction μ.
      dt: () the time step.
      laws: the static `Laws`.
      shared: {"friction_stiffness", "friction_eps", "smooth_width"} of `jc.Contact`.
      bound: () with coupling "lagged": friction's bound μ γ̄_n, fixed for the step.
      reweighted: (static) friction's curvature reweighted (`_slope_held`): the same value
        and gradient, a positive definite Hessian along the slip (Descent's preconditioner).
      stick: () friction's stiffness in stick s (`regularization`); None: the law's own,
        `stick_stiffness`.

    Returns:
      () ℓ, convex in v; -∂ℓ/∂v is the contact's impulse over the step in the contact frame.
    """
    vn, z = v[0], v[1] * v[1] + v[2] * v[2]
    cost = _slope_held(_cost) if reweighted else _cost
    bound = jnp.zeros_like(gap) if bound is None else bound
    if stick is None:
        stick = stick_stiffness(laws, k, dt, shared["friction_stiffness"])
    return cost(laws, z, vn, gap, k, damping, mu, dt, bound, stick, shared["friction_eps"],
                shared["smooth_width"])


def _cost(laws, z, vn, gap, k, damping, mu, dt, bound, s, eps, width):
    """`contact_cost` as a function of v_n and z = |v_t|² (friction is isotropic), with s
    friction's stiffness in stick."""
    tau = damping / k
    T = dt + tau

    def n_of(x):
        return dt / T * normal_energy(gap + T * x, k, laws.normal, laws.power, width)

    def slip_potential(bound):
        return friction_dissipation(z, bound, laws.friction, s, eps, s)

    if laws.coupling == "lagged":
        return n_of(vn) + slip_potential(bound)
    if laws.normal == "linear" and laws.friction in ("huber", "linear"):
        return _linear_huber(vn, z, gap, k, tau, mu, dt, s)
    if laws.friction == "pseudo_huber":
        return n_of(vn - mu * (jnp.sqrt(z + eps * eps) - eps))
    impulse = jax.grad(lambda x: -n_of(x))
    bound_slope = jax.grad(slip_potential)

    def residual(x, v_n=vn):
        return x - v_n + mu * bound_slope(mu * impulse(x))

    x_star = jax.lax.stop_gradient(_maximizer(residual, vn - mu * safe_sqrt(z), vn))
    # one Newton step from the root found, with v and the parameters live: its value is the
    # root's and its first derivatives are the root's (implicit function theorem), so ℓ
    # below has the exact gradient and Hessian (∂ℓ/∂x = 0 at the root)
    x = x_star - residual(x_star) / jax.grad(residual)(x_star)
    gamma = impulse(x)
    return n_of(x) + gamma * (x - vn) + slip_potential(mu * gamma)


# --- restitution of the damped law ------------------------------------------------------------

def _restitution_exponent(zeta):
    """A(ζ) with e = exp(-2 ζ A(ζ)) (`damping_to_restitution`): arccos ζ / sqrt(1 - ζ²)
    below 1, arccosh ζ / sqrt(ζ² - 1) above, and its series 1 - u/3 + 2u²/15 - 2u³/35 about
    ζ = 1 (u = ζ - 1) within 1e-3 of it (error < 1e-13)."""
    u = zeta - 1.0
    near = jnp.abs(u) < 1e-3
    below = zeta < 1.0
    safe = jnp.where(near, 0.5, zeta)
    low, high = jnp.where(below, safe, 0.5), jnp.where(below, 2.0, safe)
    under = jnp.arccos(low) / jnp.sqrt(1.0 - low * low)
    over = jnp.arccosh(high) / jnp.sqrt(high * high - 1.0)
    series = 1.0 - u / 3.0 + 2.0 * u * u / 15.0 - 2.0 * u ** 3 / 35.0
    return jnp.where(near, series, jnp.where(below, under, over))


def damping_to_restitution(damping, stiffness, mass):
    """Coefficient of restitution of a point mass on the damped linear law.

    The force max(0, k_n(-d) - k_d ḋ) (module docstring) releases the mass once the damper
    outweighs the spring, before the gap reopens; with ζ = k_d / (2 sqrt(k_n m)),

        e = exp(-2 ζ arccos(ζ) / sqrt(1 - ζ²))        (ζ < 1; arccosh and sqrt(ζ² - 1) above)

    which is 1 at ζ = 0, exp(-2) = 0.135 at critical damping and tends to 0 as 1/(4ζ²).
    (ADD Eq. 22, exp(-π ζ/sqrt(1 - ζ²)), is the same spring and damper allowed to pull.)
    This is the law of the continuous contact; the implicit step adds numerical damping of its
    own, so a simulated bounce reaches e only when the contact, which lasts about
    π sqrt(m / k_n), spans many steps.
    """
    check.number_or_array("damping", damping, low=0.0)
    check.number_or_array("stiffness", stiffness, positive=True)
    check.number_or_array("mass", mass, positive=True)
    zeta = jnp.asarray(damping) / (2.0 * jnp.sqrt(stiffness * mass))
    return jnp.exp(-2.0 * zeta * _restitution_exponent(zeta))


# bisection steps of `restitution_to_damping` over log ζ in [-40, 40]: 80 / 2^64 < 1e-17
_RESTITUTION_BISECTIONS = 64


def restitution_to_damping(restitution, stiffness, mass):
    """Damping k_d giving coefficient of restitution e for a point mass (the inverse of
    `damping_to_restitution`). e = 1 gives 0; e must be > 0 (the damped law always releases
    the mass with some speed: e → 0 needs k_d → ∞). Differentiable in all three arguments."""
    check.number_or_array("restitution", restitution, low=0.0, high=1.0)
    if isinstance(restitution, (int, float)) and restitution == 0:
        raise ValueError(f"restitution must be > 0 (the damper releases a bounce before the "
                         f"gap reopens: e -> 0 needs infinite damping), got {restitution!r}")
    check.number_or_array("stiffness", stiffness, positive=True)
    check.number_or_array("mass", mass, positive=True)
    e = jnp.asarray(restitution)
    e = e.astype(e.dtype if jnp.issubdtype(e.dtype, jnp.floating) else jnp.float32)
    target = -jnp.log(e)     # 2 ζ A(ζ), increasing in ζ

    def excess(log_zeta, target):
        zeta = jnp.exp(log_zeta)
        return 2.0 * zeta * _restitution_exponent(zeta) - target

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        up = excess(mid, target) < 0.0
        return jnp.where(up, mid, lo), jnp.where(up, hi, mid)

    lo = jnp.full(e.shape, -40.0, e.dtype)
    root = jax.lax.stop_gradient(0.5 * sum(jax.lax.fori_loop(
        0, _RESTITUTION_BISECTIONS, bisect, (lo, lo + 80.0))))
    # one Newton step from the root: the value is the root's, the derivative the implicit one
    slope = jax.vmap(jax.grad(excess))(root.reshape(-1), target.reshape(-1)).reshape(e.shape)
    log_zeta = root - excess(root, target) / slope
    zeta = jnp.where(e < 1.0, jnp.exp(log_zeta), 0.0)
    return 2.0 * zeta * jnp.sqrt(stiffness * mass)


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
        zero slip, thesis Sec. 5.5): the default 1e4 gives 0.1 mm/s per N of load. Light
        contacts creep faster (`friction_regularization`).
      friction_regularization: σ (default 1e-3, SAP's): friction's stiffness in stick is at
        most 1/(σ w_t), w_t the inverse of the contact's effective mass, so that a light
        body creeps at most σ times the velocity change its load gives it per step (and
        never less than F / k_f). 0: k_f alone.
      near_rigid: β (default 1, SAP's): the linear normal law's stiffness (and damping) is
        lowered where the contact's natural period would fall below β Δt, which the step
        cannot resolve (the contact acts rigid either way). A contact carrying the weight
        of its own effective mass then sinks g β² Δt² / 4π² (25 µm at Δt = 10 ms), one
        carrying a heavier load proportionally more: a heavy body on light ones (a 0.1 kg
        marble on 1.7 g cloth nodes at Δt = 40 ms sinks 8 mm deeper). 0: k_n as given.
        Both: `models.contact.regularization`.
      friction_eps: regularization velocity ε (m/s) of "pseudo_huber".
      coupling: how friction's bound follows the normal impulse (module docstring). "cone"
        (default; SAP's): μ times the normal impulse of the same step, in one convex cost
        per contact; a sliding contact hovers about μ |slip| (Δt + k_d/k_n) above its
        surface. "lagged": μ times the normal impulse at the velocities the step starts
        from; exact Coulomb while sliding, but a contact that closes during the step gets
        its start's bound (at coarse steps, impacts stick). Design note 57 measures both.
      relinearize: after each step's solve, linearize contact again at its answer (the
        end-of-step configuration and velocities) and solve again, this many times (default
        0). Each costs a solve, warm-started; gradients go through all of them. With
        coupling "lagged" the fixed point is the fully implicit step (frame, gap and
        friction's bound at the end of the step).
    """

    normal: str = "linear"
    power: float = 3.0
    smooth_width: float = 1e-3
    friction: str = "huber"
    friction_stiffness: float = 1e4
    friction_eps: float = 1e-4
    coupling: str = "cone"
    relinearize: int = 0
    near_rigid: float = 1.0
    friction_regularization: float = 1e-3

    def __post_init__(self):
        check.choice("coupling", self.coupling, COUPLINGS)
        check.integer("relinearize", self.relinearize, low=0)
        check.choice("normal", self.normal, NORMAL_LAWS)
        check.choice("friction", self.friction, FRICTION_LAWS)
        check.number("power", self.power, low=2)
        for name in ("smooth_width", "friction_stiffness", "friction_eps"):
            check.number(name, getattr(self, name), positive=True)
        for name in ("near_rigid", "friction_regularization"):
            check.number(name, getattr(self, name), low=0)

    @property
    def laws(self) -> Laws:
        """The static choice of laws that the model and its contact terms carry."""
        return Laws(self.normal, float(self.power), self.friction, self.coupling,
                    float(self.near_rigid), float(self.friction_regularization))
