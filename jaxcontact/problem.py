"""The step's problem as the solvers see it: a residual, a merit function and constraint rows.

Physics (`dynamics.py`) provides these functions; solvers (`solvers/`) consume them; neither
imports the other, and `step.py` hands one to the other. Every function is global (not a
closure over arrays) and takes the solver's `args` pytree last, so the implicit-gradient rules
can see every parameter.

Constraint rows are the quadratic-penalty view of the step (thesis Eq. 111-122). Row j couples
at most two bodies a, b (index -1 is the world) and has

    an error e_j(u) (a gap or stretch of q+(u), m; or a velocity, m/s),
    its Jacobian G_j = ∂e_j/∂u, given per side as the (6,) blocks jac_a, jac_b
    (with respect to each body's (v, ω)),
    a stiffness s_j, such that the row's multiplier at the solution is λ_j = -s_j e_j
    (projected for contacts and friction) and M (u - ũ) = Σ_j G_jᵀ λ_j,
    a curvature c_j: the Gauss-Newton second derivative of the row's energy in e_j (thesis
    Eq. 131 and 136), for primal preconditioners (s_j, except for contact and friction laws
    whose curvature varies along the row).

The rows are laid out in static blocks:

    [normal (K) | normal damping (K) | friction t1 (K) | friction t2 (K) | springs (S) |
     joint rows (B) | joint damping (V) | one-sided joint rows (U)]

Normal rows are unilateral (λ >= 0), damping rows act only while in contact, the two friction
rows of a contact share the disc |λ_t| <= μ Δt λ_n (`cone`). Joint rows (`models/joints.py`,
ADD §5.3) are the components of the joints' error vectors (ball, hinge axis, slider line,
orientation lock, motor) with their stiffness k; joint damping rows are velocity rows
ẋ = G u with Jacobians frozen at the start of the step and stiffness Δt c (ADD Eq. 26); the
last U rows are one-sided (cables, joint limits): e >= 0 is slack, the energy is
s/2 min(e, 0)², so like normal rows λ = max(-s e, 0) >= 0, the stiffness is s throughout and
the curvature s only while e < 0.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from flax import struct

from jaxcontact.types import Array


@struct.dataclass
class Rows:
    """Constraint rows at one iterate (module docstring). R = 4 K + S + B + V + U rows.

    Attributes:
      body_a, body_b: (R,) int body indices (-1 = world); contact rows' come from the
                      broad phase, so they are arrays, not static.
      jac_a, jac_b:   (R, 6) ∂e/∂(v, ω) of side a and side b.
      error:          (R,) e_j.
      stiffness:      (R,) s_j (0 for rows that are inactive).
      curvature:      (R,) Gauss-Newton curvature c_j >= 0.
      cone:           (K,) μ Δt: friction bound per unit of normal multiplier.
      n_contact:      static K.
      n_unilateral:   static U, the number of one-sided joint rows (the last rows).
    """

    jac_a: Array
    jac_b: Array
    error: Array
    stiffness: Array
    curvature: Array
    cone: Array
    body_a: Array
    body_b: Array
    n_contact: int = struct.field(pytree_node=False)
    n_unilateral: int = struct.field(pytree_node=False, default=0)


class Problem(NamedTuple):
    """The functions of one step's problem (all global; `args` is the last argument).

    Attributes:
      residual:    r(u, args) -> (n,), M⁻¹ ∂Φ/∂u: the equations every solver drives to zero.
      gradient:    g(u, args) -> (n,), ∂Φ/∂u (u; ū = u) (= M r).
      objective:   Φ(u, u_lag, args) -> (): merit function whose u-gradient at u_lag = u is g.
      direction:   (u, args, damped) -> (n,): r's value; with damped = 1 its Jacobian uses a
                   conservative (IRLS) friction model (Newton's directions).
      model_gradient: (u, u_lag, args, damped) -> (n,): ∂Φ/∂u at fixed ū (its u-Jacobian is
                   the symmetric Hessian of Φ(·; ū), for matrix-free solvers).
      rows:        (u, args) -> `Rows` at u.
      mass:        (args) -> (N, 6, 6) block-diagonal mass (world frame).
      start:       (args) -> (n,) ũ, the free-flight velocities.
    """

    residual: Callable
    gradient: Callable
    objective: Callable
    direction: Callable
    model_gradient: Callable
    rows: Callable
    mass: Callable
    start: Callable
