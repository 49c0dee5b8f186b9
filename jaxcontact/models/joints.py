"""Soft joints, motors and limits between two bodies (ADD §5.3), as constraint rows.

Each joint kind is a term whose elements are the joints of that kind; a world side (body -1)
is the fixed identity frame, so its anchor and axes are world vectors. With p the world
anchor points, n = R_b â_b the joint axis and r = R r̂ the reference directions (⊥ â, equal at
build time, so the hinge angle is 0 there), the rows of each kind are:

    ball      p_a - p_b                                   3, stiffness k (ADD Eq. 23, l0 = 0)
    hinge     ball + R_a â_a - R_b â_b                    3 + 3, angular stiffness (Eq. 24)
    slider    (I - n nᵀ)(p_a - p_b) + align + lock         3 + 3 + 3
    fixed     ball + align + lock (r_a - r_b)             3 + 3 + 3
    distance  L - |p_a - p_b|                             1, one-sided: a cable

plus the damping of the joint's free coordinate(s), a velocity row ẋ = G u with its Jacobian
frozen at the start of the step and stiffness Δt c (ADD Eq. 26): the relative spin about n
(hinge), the relative spin (ball, world axes), the sliding along n (slider), the rate of
stretch while taut (distance). Motors (ADD Eq. 25-26) hold a hinge's angle at the control's
target α: R_a r̂_a - Rot(n, α) R_b r̂_b (3 rows, kp) and damp its spin (kd). Limits are
one-sided rows on the hinge angle θ or the slider position s: x - lo >= 0 and hi - x >= 0.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact import dofs, terms
from jaxcontact.math import quat_to_mat, rotate_about, safe_atan2, safe_norm, safe_normalize

KINDS = ("ball", "hinge", "slider", "fixed", "distance")
_VECTORS = ("anchor_a", "anchor_b", "axis_a", "axis_b", "ref_a", "ref_b")


def frames(x, p):
    """World anchors, axes and reference directions of both sides of one joint."""
    rot_a, rot_b = quat_to_mat(x.quat[0]), quat_to_mat(x.quat[1])
    side = {}
    for k, rot, pos in (("a", rot_a, x.pos[0]), ("b", rot_b, x.pos[1])):
        side["p_" + k] = pos + rot @ p["anchor_" + k]
        side["axis_" + k] = rot @ p["axis_" + k]
        side["ref_" + k] = rot @ p["ref_" + k]
    return side


def hinge_angle(f):
    """θ: signed angle of body a relative to body b about n = R_b â_b, rad.

    θ = atan2(n·(r_b × r_a), r_b·r_a): smooth except at θ = ±π (the branch cut of atan2).
    """
    n, r_a, r_b = f["axis_b"], f["ref_a"], f["ref_b"]
    return safe_atan2(n @ jnp.cross(r_b, r_a), r_b @ r_a)


def slider_position(f):
    """s = n·(p_a - p_b): displacement of a's anchor along b's axis, m (0 at build time)."""
    return f["axis_b"] @ (f["p_a"] - f["p_b"])


def _gather(model_part, index, names):
    idx = jnp.asarray(index, jnp.int32)
    return {name: getattr(model_part, name)[idx] for name in names}


def _two_bodies(model, state, index):
    """(bodies (E, 2), start) of joints `index`."""
    j = np.asarray(index)
    bodies = np.stack([np.asarray(model.joint.body_a)[j], np.asarray(model.joint.body_b)[j]],
                      axis=1).astype(np.int32)
    empty = np.zeros((len(j), 0), np.int32)
    return jnp.asarray(bodies), jnp.asarray(empty), dofs.gather_start(state, bodies, empty)


def _velocity_rows(x, p):
    """G u of frozen velocity rows: jac_a·(v_a, ω_a) + jac_b·(v_b, ω_b), (r,)."""
    u_a = jnp.concatenate([x.vel[0], x.ang_vel[0]])
    u_b = jnp.concatenate([x.vel[1], x.ang_vel[1]])
    return p["jac_a"] @ u_a + p["jac_b"] @ u_b


def _damping_jacobians(kind, f, start_pos):
    """Jacobians (r, 6) of each side's damping rows at the start-of-step frames f."""
    n = f["axis_b"]
    if kind in ("hinge", "ball"):
        dirs = n[None, :] if kind == "hinge" else jnp.eye(3, dtype=n.dtype)
        spin = jnp.concatenate([jnp.zeros_like(dirs), dirs], axis=1)
        return spin, -spin
    if kind == "slider":
        d, point_b = n, f["p_a"]          # b's material point at a's anchor
    else:                                 # distance: the rate of stretch
        d, point_b = safe_normalize(f["p_a"] - f["p_b"]), f["p_b"]
    jac_a = jnp.concatenate([d, jnp.cross(f["p_a"] - start_pos[0], d)])
    jac_b = -jnp.concatenate([d, jnp.cross(point_b - start_pos[1], d)])
    return jac_a[None, :], jac_b[None, :]


@dataclasses.dataclass(frozen=True)
class JointTerm(terms.RowTerm):
    """The joints of one kind (module docstring); `joints` indexes `model.joint`."""

    kind: str
    joints: tuple
    n_bodies = 2

    @property
    def name(self):
        return f"{self.kind} joint"

    def elements(self, model, state, control, stages):
        bodies, particles, start = _two_bodies(model, state, self.joints)
        params = _gather(model.joint, self.joints, _VECTORS + (
            "stiffness", "angular_stiffness", "damping", "rest_length"))
        if self.kind != "fixed":
            params.update(_start_damping(self.kind, start, params, model.dt))
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    # Newton's directions take the Gauss-Newton Hessian: a joint's errors are its load over
    # its stiffness, so the dropped Σ ψ'(e) ∇²e is that small against Jᵀ ψ'' J, at a fifth of
    # the exact Hessian's cost (the humanoid's 17 joints, 16 scenes: 1.1 against 6.5 ms;
    # design note 58). The gradient, the answer and the implicit gradients stay exact.
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        point = f["p_a"] - f["p_b"]
        k3 = jnp.full((3,), p["stiffness"])
        ka3 = jnp.full((3,), p["angular_stiffness"])
        align = terms.bilateral(f["axis_a"] - f["axis_b"], ka3)
        lock = terms.bilateral(f["ref_a"] - f["ref_b"], ka3)
        if self.kind == "ball":
            groups = (terms.bilateral(point, k3),)
        elif self.kind == "hinge":
            groups = (terms.bilateral(point, k3), align)
        elif self.kind == "slider":
            n = f["axis_b"]
            groups = (terms.bilateral(point - (n @ point) * n, k3), align, lock)
        elif self.kind == "fixed":
            groups = (terms.bilateral(point, k3), align, lock)
        else:
            cable = p["rest_length"] - safe_norm(point)
            groups = (terms.unilateral(cable[None], p["stiffness"][None]),)
        if self.kind == "fixed":
            return groups
        rates = _velocity_rows(x, p)
        return groups + (terms.bilateral(rates, dt * p["coef"]),)


def _start_damping(kind, start, params, dt):
    """Frozen damping rows of every joint of a kind at the start of the step: jac_a, jac_b
    (E, r, 6) and coefficients (E, r)."""
    def one(s, p):
        x = dofs.local(s, jnp.zeros((12,), s.pos.dtype), dt)
        f = frames(x, p)
        jac_a, jac_b = _damping_jacobians(kind, f, s.pos)
        coef = jnp.full((jac_a.shape[0],), p["damping"])
        if kind == "distance":   # a cable is damped only while taut
            taut = safe_norm(f["p_a"] - f["p_b"]) > p["rest_length"]
            coef = coef * taut.astype(coef.dtype)
        return {"jac_a": jac_a, "jac_b": jac_b, "coef": coef}

    return jax.vmap(one)(start, params)


@dataclasses.dataclass(frozen=True)
class MotorTerm(terms.RowTerm):
    """Position motors on hinges (ADD Eq. 25-26): kp/2 |R_a r̂_a - Rot(n, α) R_b r̂_b|² holds the
    hinge angle at the target α = `Control.motor[m]`; kd damps the spin about the axis (n
    frozen at the start of the step)."""

    motors: tuple            # motor indices m
    joints: tuple            # the hinge of each motor
    n_bodies = 2
    name = "motor"

    def elements(self, model, state, control, stages):
        bodies, particles, start = _two_bodies(model, state, self.joints)
        params = _gather(model.joint, self.joints, _VECTORS)
        m = jnp.asarray(self.motors, jnp.int32)
        params.update(kp=model.motor.kp[m], kd=model.motor.kd[m],
                      target=jnp.asarray(control.motor, state.pos.dtype)[m])

        def spin(s, p):
            f = frames(dofs.local(s, jnp.zeros((12,), s.pos.dtype), model.dt), p)
            return _damping_jacobians("hinge", f, s.pos)

        params["jac_a"], params["jac_b"] = jax.vmap(spin)(start, params)
        params["coef"] = params["kd"][:, None]
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        error = f["ref_a"] - rotate_about(f["axis_b"], p["target"], f["ref_b"])
        return (terms.bilateral(error, jnp.full((3,), p["kp"])),
                terms.bilateral(_velocity_rows(x, p), dt * p["coef"]))


@dataclasses.dataclass(frozen=True)
class LimitTerm(terms.RowTerm):
    """Limits of hinges (on θ, rad) or sliders (on s, m): k_lim/2 (min(x - lo, 0)² +
    min(hi - x, 0)²) as two one-sided rows."""

    kind: str                # "hinge" | "slider"
    joints: tuple
    n_bodies = 2

    @property
    def name(self):
        return f"{self.kind} limit"

    def elements(self, model, state, control, stages):
        bodies, particles, start = _two_bodies(model, state, self.joints)
        params = _gather(model.joint, self.joints,
                         _VECTORS + ("lower", "upper", "limit_stiffness"))
        return terms.Elements(bodies=bodies, particles=particles, start=start, params=params)

    # a limit may start far outside its range (gymnasium's ant: its ankles 0.52 rad out,
    # k_lim = 7.1e5 on legs of 3e-4 kg m²): the exact Hessian k (∇e∇eᵀ + e∇²e) is then
    # strongly indefinite and Newton diverged; its Gauss-Newton part converges in 2-5
    # iterations (design note 57). The implicit gradients take the exact Hessian.
    gauss_newton_directions = True

    def rows(self, x, p, shared, dt):
        f = frames(x, p)
        coord = hinge_angle(f) if self.kind == "hinge" else slider_position(f)
        error = jnp.stack([coord - p["lower"], p["upper"] - coord])
        return (terms.unilateral(error, jnp.full((2,), p["limit_stiffness"])),)
