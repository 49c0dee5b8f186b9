"""MJCF (MuJoCo's XML format) to `jc.Scene`, through MuJoCo's own compiler.

The file is compiled by the `mujoco` package, so defaults classes, frames, `fromto`, mesh
centring and inertias from geoms are MuJoCo's; the compiled `mjModel` and the forward
kinematics of one `mjData` at the chosen configuration give every world pose. Then:

- Bodies welded together (no joint between them) become one compound body: masses add, the
  centre of mass is the mass-weighted mean, inertias combine by the parallel-axis theorem
  (what MuJoCo does for a welded subtree), and each member's geoms become `add_geom`s.
- A body's joints become soft joints (`Scene.add_joint`, ADD §5.3) to its parent: hinge,
  slide ("slider") and ball; a free joint is a free body. Several joints on one body
  (MuJoCo composes them in series, e.g. the planar root x / z / pitch of hopper and half
  cheetah) become a chain of light bodies (`chain_mass` of the body's mass) joined by one
  joint each. Joint damping is the joints' damping. Hinge and slide ranges become limits
  (`add_joint(limit_stiffness, limit_damping)`) that hold a load as MuJoCo's soft limits
  do: `mjcf_solref.impedance_law` maps solref / solimp to the static stiffness
  k_lim = m d k / (1 - d) (m the coordinate's effective inertia, 1 / `dof_invweight0`) and
  MuJoCo's damping ratio. (A penalty cannot match both MuJoCo's static hold and its
  transient, which is 1/sqrt(1 - d) = 4.5 times slower at d = 0.95; gymnasium's cart-pole
  rests on its limit within 0.005 rad of MuJoCo's.)
- Position actuators of gear 1 on hinges become motors (`Scene.add_motor`: kp, kv as kd);
  torque actuators (`<motor>`: gain times gear times ctrl) on hinges and slides become joint
  torques / forces between the two bodies, which `MjcfImport.control` computes from MuJoCo's
  ctrl vector for each step; every other actuator with a fixed gain and an affine bias on a
  hinge, a slide or a fixed tendon becomes `Scene.add_actuator` (`io.mjcf_actuation`).
- Fixed tendons, spatial tendons between two sites, and joint, tendon, connect and weld
  equalities: `io.mjcf_actuation`.
- MuJoCo's disable flags for gravity, limits, springs, dampers and friction loss (and for
  all constraints) switch the same parts of ours off.
- A hinge's or slide's stiffness (with springref), armature and frictionloss become its
  `add_joint_properties` (rows on the joint's coordinate, `models/joints.py`).
- Geoms: sphere, capsule, box and mesh on bodies; cylinders and ellipsoids on bodies as convex
  meshes whose vertices lie on the exact surface (a prism on a 24-gon, a geodesic sphere of
  162 points stretched to the semi-axes: gaps at most 0.86 % of the radius, 1.78 % of the
  largest semi-axis; `models.primitives`); planes of the world body as ground planes; its
  other geoms (sphere, capsule, box, cylinder, ellipsoid, mesh: its convex hull) as
  obstacles (`Scene.add_obstacle`), their exact signed distance sampled at an eighth of
  their smallest half size (interpolation error at most 0.4 % of a curved surface's radius);
  height fields (upright, or turned 180° about z) as `sdf.from_heightfield` obstacles laid
  out as MuJoCo lays them out (`io.mjcf_geoms`). The mass and inertia are MuJoCo's.
  contype / conaffinity: a geom that can touch nothing is drawn but never collides (a
  static geom of the world body that no moving geom can touch, like the cart-poles' rails,
  is left out without a word; an obstacle touches every moving geom, and one whose masks
  exclude some is named); MuJoCo's disable flags for contact (or all constraints) leave
  every geom drawn only; body pairs none of whose geoms may touch, `<exclude>` pairs and
  parent-child pairs (MuJoCo's filterparent) never collide. Friction is the geom's sliding coefficient (pairs take the
  mean, MuJoCo the max). Contact stiffness and damping are penalty parameters of ours, given
  as arguments, or with contact="mujoco" each geom's from its solref / solimp
  (`io.mjcf_solref.contact_law`: MuJoCo's resting penetration and damping ratio against
  the static world).
- Fluid forces (`<option density viscosity wind>`): MuJoCo's inertia-based model on every
  moving MuJoCo body, welded ones each on its own box (`io.mjcf_fluid`, `models.fluid`).

Everything else that changes the physics (wrapping spatial tendons, equalities MuJoCo's
bodies do not satisfy at build, other actuators, activation dynamics, ball joints' springs
and armature, planes on moving bodies, height fields on moving bodies or
turned about another axis, sdf geoms, explicit contact pairs, MuJoCo's ellipsoid fluid model)
is listed in one `MjcfWarning` (or a ValueError with `unsupported="raise"`): nothing is
dropped silently.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import jax.numpy as jnp
import numpy as np

from jaxcontact import validate as check
from jaxcontact.io import mjcf_fluid, mjcf_geoms
from jaxcontact.io.mjcf_actuation import Actuation
from jaxcontact.io.mjcf_solref import contact_law, impedance_law
from jaxcontact.math import mat_to_quat_numpy, quat_rotate
from jaxcontact.scene import Scene
from jaxcontact.types import Control


class MjcfWarning(UserWarning):
    """Parts of an MJCF model that were not imported."""


@dataclasses.dataclass
class MjcfImport:
    """What `load_mjcf` mapped to what.

    Attributes:
      body: MuJoCo body name (or "body<i>") -> our body index (welded bodies share one).
      joint: MuJoCo joint name -> our joint index (free joints map to nothing).
      motor: MuJoCo actuator name -> our motor index (`Control.motor[i]`).
      motor_offset: (M,) MuJoCo's coordinate of each motor's hinge where our hinge angle is
        0 (its value at build, or its range's middle where the range reaches past ±180° from
        there), rad: a MuJoCo `ctrl` is the target `ctrl - offset` (0 for `add_actuator`s).
      geom: MuJoCo geom id -> our geom index (or -1: a world plane or not imported).
      skipped: one line per part not imported (also the warning's text).
      mj_model: the compiled `mujoco.MjModel`.
      actuators: per imported MuJoCo actuator, in MuJoCo's order: (actuator index, "motor"
        with our motor index, "actuator" with our motor index (`add_actuator`), or "hinge" /
        "slider" torque with our joint index and its gain × gear), used by `control`.
    """

    body: dict
    joint: dict
    motor: dict
    motor_offset: np.ndarray
    geom: dict
    skipped: list
    mj_model: object
    actuators: tuple = ()

    def control(self, model, state, ctrl, act=None) -> Control:
        """Our `jc.Control` for MuJoCo's actuator inputs `ctrl` (nu,) at `state` (clamped
        to ctrlrange where the actuator is ctrllimited), and with `act` (na,), MuJoCo's
        activations (`activate`), the actuators with activation dynamics driven by their
        activation instead of their ctrl, as MuJoCo drives them (without `act`, by ctrl at
        once). Position actuators set their
        motor's target (ctrl - `motor_offset`), other actuators (`add_actuator`) their
        input `Control.motor[m]` = ctrl; a torque actuator on a hinge applies
        g ctrl about the hinge axis to the child body and the opposite to the parent, on a
        slide the force g ctrl along the axis at the joint anchor, with its reaction on the
        parent (g: gain × gear). Differentiable in `ctrl` and `state`; jittable.
        """
        m = self.mj_model
        ctrl = jnp.asarray(ctrl, state.pos.dtype)
        if ctrl.shape != (m.nu,):
            raise ValueError(f"ctrl must have shape ({m.nu},) (the model's actuators), got "
                             f"{ctrl.shape}")
        limited = np.asarray(m.actuator_ctrllimited, bool)
        ranges = jnp.asarray(m.actuator_ctrlrange, ctrl.dtype)     # (the model's precision)
        ctrl = jnp.where(limited, jnp.clip(ctrl, ranges[:, 0], ranges[:, 1]), ctrl)
        if act is not None:
            act = jnp.asarray(act, ctrl.dtype)
            if act.shape != (m.na,):
                raise ValueError(f"act must have shape ({m.na},) (the model's activations), "
                                 f"got {act.shape}")
            stateful = np.nonzero(np.asarray(m.actuator_actadr) >= 0)[0]
            ctrl = ctrl.at[stateful].set(act[np.asarray(m.actuator_actadr)[stateful]])
        n = model.n_body
        force = jnp.zeros((n + 1, 3), ctrl.dtype)     # row n: the world, dropped
        torque = jnp.zeros((n + 1, 3), ctrl.dtype)
        motor = jnp.zeros((model.n_motor,), ctrl.dtype)
        for a, kind, index, gain in self.actuators:
            if kind == "motor":
                motor = motor.at[index].set(ctrl[a] - float(self.motor_offset[index]))
                continue
            if kind == "actuator":
                motor = motor.at[index].set(ctrl[a])
                continue
            child, parent = model.joint.body_a[index], model.joint.body_b[index]
            axis = quat_rotate(state.quat[child], model.joint.axis_a[index])
            value = gain * ctrl[a] * axis
            other = parent if parent >= 0 else n
            if kind == "hinge":
                torque = torque.at[child].add(value).at[other].add(-value)
                continue
            anchor = state.pos[child] + quat_rotate(state.quat[child],
                                                    model.joint.anchor_a[index])
            force = force.at[child].add(value).at[other].add(-value)
            torque = torque.at[child].add(jnp.cross(anchor - state.pos[child], value))
            if parent >= 0:
                torque = torque.at[parent].add(jnp.cross(anchor - state.pos[parent], -value))
        return Control(force=force[:n], torque=torque[:n], motor=motor)


    def activate(self, act, ctrl, dt=None):
        """MuJoCo's activations (na,) one step on: act + Δt ȧ for actuators with a filter
        (ȧ = (ctrl - act)/τ; filterexact: act + (ctrl - act)(1 - exp(-Δt/τ))) or an
        integrator (ȧ = ctrl), clamped to actrange where actlimited (MuJoCo's Euler step of
        `act`, its `actearly` off: the force of a step uses the activation at its start).
        Start from zeros (MuJoCo's act0). `dt`: the step (default the model file's).
        Jittable and differentiable; carry `act` beside the state and pass it to `control`.
        """
        mujoco = _mujoco()
        m = self.mj_model
        dt = float(m.opt.timestep) if dt is None else dt
        ctrl = jnp.asarray(ctrl)
        act = jnp.asarray(act, ctrl.dtype)
        if ctrl.shape != (m.nu,) or act.shape != (m.na,):
            raise ValueError(f"ctrl and act must have shapes ({m.nu},) and ({m.na},), got "
                             f"{ctrl.shape} and {act.shape}")
        limited = np.asarray(m.actuator_ctrllimited, bool)
        ranges = jnp.asarray(m.actuator_ctrlrange, ctrl.dtype)     # (the model's precision)
        ctrl = jnp.where(limited, jnp.clip(ctrl, ranges[:, 0], ranges[:, 1]), ctrl)
        dyn = mujoco.mjtDyn
        for a in range(m.nu):
            i, kind = int(m.actuator_actadr[a]), int(m.actuator_dyntype[a])
            if i < 0:
                continue
            tau = max(float(m.actuator_dynprm[a, 0]), 1e-12)   # MuJoCo's own floor on τ
            if kind == int(dyn.mjDYN_FILTER):
                new = act[i] + dt * (ctrl[a] - act[i]) / tau
            elif kind == int(dyn.mjDYN_FILTEREXACT):
                new = act[i] + (ctrl[a] - act[i]) * (1.0 - np.exp(-dt / tau))
            elif kind == int(dyn.mjDYN_INTEGRATOR):
                new = act[i] + dt * ctrl[a]
            else:
                raise ValueError(f"actuator {a}: activation dynamics {dyn(kind).name} are not "
                                 "supported by activate")
            if m.actuator_actlimited[a]:
                new = jnp.clip(new, *(float(v) for v in m.actuator_actrange[a]))
            act = act.at[i].set(new)
        return act


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError("MJCF import compiles the file with MuJoCo: pip install "
                          "'jaxcontact[mjcf]' (the `mujoco` package)") from None
    return mujoco


def _compile(mujoco, source):
    """The compiled MjModel of a path or of XML text (an MjModel is taken as it is)."""
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                           and not source.lstrip().startswith("<")):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ValueError(f"source must be an MJCF file or its XML text, got {source!r} "
                             "(no such file)")
        compile_, what = mujoco.MjModel.from_xml_path, path
    elif isinstance(source, str):
        compile_, what = mujoco.MjModel.from_xml_string, source
    else:
        raise ValueError(f"source must be an MJCF file path, its XML text or a compiled "
                         f"mujoco.MjModel, got {source!r}")
    try:
        return compile_(what)
    except ValueError as error:   # MuJoCo's compiler errors
        raise ValueError(f"source: MuJoCo could not compile the model: {error}") from None


def _name(mujoco, m, kind, i):
    return mujoco.mj_id2name(m, kind, i) or f"{kind.name[6:].lower()}{i}"


def _combined_inertia(masses, centres, rotations, moments):
    """(mass, centre, principal moments, principal axes) of rigidly joined bodies: the
    parallel-axis theorem, I = Σ R_i diag(I_i) R_iᵀ + m_i (|d_i|² E - d_i d_iᵀ)."""
    mass = float(np.sum(masses))
    centre = np.einsum("i,ij->j", masses, centres) / mass
    tensor = np.zeros((3, 3))
    for m_i, c_i, r_i, i_i in zip(masses, centres, rotations, moments):
        d = c_i - centre
        tensor += r_i @ np.diag(i_i) @ r_i.T + m_i * (d @ d * np.eye(3) - np.outer(d, d))
    values, axes = np.linalg.eigh(0.5 * (tensor + tensor.T))
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    return mass, centre, values, axes


def _limit_law(mujoco, m, j, dof):
    """limit_stiffness and limit_damping of joint j's range from its solref / solimp
    (`mjcf_solref.impedance_law`, on the coordinate's effective inertia at qpos0)."""
    stiffness, damping = impedance_law(mujoco, m, m.jnt_solref[j], m.jnt_solimp[j],
                                       1.0 / float(m.dof_invweight0[dof]))
    return {"limit_stiffness": stiffness, "limit_damping": damping}


# A chain's light carrier turns at least as slowly, on its joint's angular rows (k ℓ²), as
# CARRIER_RATIO (ω Δt)² allows: its moments of inertia are at least k ℓ² Δt² / CARRIER_RATIO.
# dm_control's point mass (a 3 g carrier of 1.2e-7 kg m²: (ω Δt)² ~ 6e6) converged on 97 % of
# its float32 steps, with the floor on all of them. A slide's carrier does not turn; a
# hinge's adds at most the floor to what the hinge turns (gymnasium's humanoid: 1.5e-3 kg m²
# at its 3 ms, on its abdomen, which turns the whole lower body).
CARRIER_RATIO = 1e4

# contact="mujoco": the world's surfaces are this many times stiffer than the stiffest geom,
# so that a pair with the world has the geom's stiffness (`_surface`) to 1e-6 relative
WORLD_STIFFNESS = 1e6


def _contact_laws(mujoco, m, gravity):
    """{geom: (stiffness, damping)} of every colliding geom on a moving body, as its contact
    with the static world (`mjcf_solref.contact_law`: the geom's solref / solimp; the contact
    inertia its MuJoCo body's 1 / body_invweight0; μ the larger of its and the world's, as
    MuJoCo takes a pair's)."""
    colliding = (m.geom_contype > 0) | (m.geom_conaffinity > 0)
    on_world = colliding & (m.geom_bodyid == 0)
    world_mu = float(np.max(m.geom_friction[on_world, 0], initial=0.0))
    laws = {}
    for g in np.flatnonzero(colliding & (np.asarray(m.body_weldid)[m.geom_bodyid] != 0)):
        inverse = float(m.body_invweight0[m.geom_bodyid[g], 0])
        laws[int(g)] = contact_law(mujoco, m, m.geom_solref[g], m.geom_solimp[g],
                                   1.0 / max(inverse, 1e-12), float(np.linalg.norm(gravity)),
                                   max(float(m.geom_friction[g, 0]), world_mu),
                                   int(m.geom_condim[g]))
    return laws


def _surface(law):
    """A geom's stiffness and damping of its `_contact_laws` entry: pairs take the harmonic
    mean of stiffness and the mean of damping (`models.contacts.HOW`), so half the stiffness
    and twice the damping give the law against the world (stiffness WORLD_STIFFNESS times
    larger, damping 0). Two geoms together get the harmonic pair's stiffness m1 m2 / (m1 + m2)
    κ, MuJoCo's, and the sum of their dampings: over-damped, by (m1 + m2)² / (m1 m2) >= 4
    for one κ."""
    if law is None:
        return {}
    return {"stiffness": 0.5 * law[0], "damping": 2.0 * law[1]}


def _mesh_vertices(m, g):
    """The vertices (V, 3) of mesh geom g in its frame (MuJoCo's, centred by its compiler)."""
    mesh = m.geom_dataid[g]
    return m.mesh_vert[m.mesh_vertadr[mesh]:m.mesh_vertadr[mesh] + m.mesh_vertnum[mesh]]


def load_mjcf(source, *, dt=None, qpos=None, qvel=None, stiffness=None, damping=None,
              contact="penalty", joint_stiffness=None, chain_mass=0.01, unsupported="warn"):
    """Build a `jc.Scene` from an MJCF model, and report what was mapped (`MjcfImport`).

    Args:
      source: a path to an MJCF file, its XML text, or a compiled `mujoco.MjModel` (e.g. a
        dm_control suite model, `suite.load(...).physics.model._model`, or one MuJoCo's
        compiler made from a URDF).
      dt: the time step, s (default: the file's `timestep`).
      qpos, qvel: MuJoCo's generalized position (nq,) and velocity (nv,) of the initial
        state (default: the model's qpos0, at rest). Joint angles and motor targets of ours
        are 0 at this configuration (`MjcfImport.motor_offset`), limits shifted to match,
        except a hinge whose range reaches past ±180° from it: its angle is 0 at the
        range's middle (`add_joint(coordinate=)`)
      stiffness, damping: contact penalty stiffness (N/m) and damping (N s/m) of every geom
        and plane (default: `jc.Scene`'s), with contact="penalty".
      contact: "penalty" (the same stiffness and damping everywhere: the arguments above) or
        "mujoco": each geom's from its solref / solimp, so that it rests on the static world
        at MuJoCo's penetration under its body's weight with MuJoCo's damping ratio
        (`io.mjcf_solref.contact_law`; the world's surfaces then take no part).
      joint_stiffness: k of the joints' position rows, N/m (angular rows: k ℓ² N m/rad, ℓ
        MuJoCo's model extent). Default: the total weight over 1e-3 ℓ (a sag of at most
        about 1e-3 ℓ).
      chain_mass: mass (and inertia) of each light body that carries one of several joints
        of a body, as a fraction of that body's (> 0, < 1); its moments of inertia are at
        least the joint's angular stiffness times Δt² / 1e4 (`CARRIER_RATIO`).
      unsupported: "warn" (an `MjcfWarning` listing what was not imported) or "raise"
        (a ValueError listing it).

    Returns:
      (scene, MjcfImport).

    Raises:
      ImportError: the `mujoco` package is missing.
      ValueError: a bad argument, a file MuJoCo cannot compile, or with unsupported="raise"
        anything not imported.
    """
    mujoco = _mujoco()
    check.choice("unsupported", unsupported, ("warn", "raise"))
    chain_mass = check.number("chain_mass", chain_mass, positive=True, high=0.999)
    check.choice("contact", contact, ("penalty", "mujoco"))
    if contact == "mujoco" and (stiffness is not None or damping is not None):
        raise ValueError(f"stiffness, damping: give them with contact='penalty' only, got "
                         f"stiffness={stiffness!r}, damping={damping!r} with contact='mujoco'")
    m = _compile(mujoco, source)
    d = mujoco.MjData(m)
    for name, value, size, target in (("qpos", qpos, m.nq, d.qpos), ("qvel", qvel, m.nv, d.qvel)):
        if value is not None:
            target[:] = check.vector(name, value, size)
    mujoco.mj_forward(m, d)
    obj, geom_t, joint_t = mujoco.mjtObj, mujoco.mjtGeom, mujoco.mjtJoint
    skipped = []

    # MuJoCo's disable flags switch whole parts of its physics off: so do they ours
    off = int(m.opt.disableflags)
    flag = {name: int(getattr(mujoco.mjtDisableBit, "mjDSBL_" + name))
            for name in ("LIMIT", "CONSTRAINT", "SPRING", "DAMPER", "FRICTIONLOSS", "GRAVITY")}
    limits_on = not off & (flag["LIMIT"] | flag["CONSTRAINT"])
    springs_on, dampers_on = not off & flag["SPRING"], not off & flag["DAMPER"]
    friction_loss_on = not off & (flag["FRICTIONLOSS"] | flag["CONSTRAINT"])
    gravity = np.asarray(m.opt.gravity, float) * (0.0 if off & flag["GRAVITY"] else 1.0)
    extent = float(m.stat.extent)
    if joint_stiffness is None:
        weight = float(np.sum(m.body_mass)) * max(float(np.linalg.norm(gravity)), 9.81)
        joint_stiffness = weight / (1e-3 * extent)
    joint_stiffness = check.number("joint_stiffness", joint_stiffness, positive=True)
    surface = {k: v for k, v in (("stiffness", stiffness), ("damping", damping))
               if v is not None}
    scene = Scene(dt=m.opt.timestep if dt is None else dt, gravity=gravity, **surface)

    # --- bodies: one per weld group ------------------------------------------------------------
    root = np.asarray(m.body_weldid)
    groups = {int(r): [b for b in range(m.nbody) if root[b] == r]
              for r in sorted(set(root.tolist()) - {0})}
    ours, body_map, props = {}, {}, {}
    for r, members in groups.items():
        mass, centre, moments, axes = _combined_inertia(
            m.body_mass[members], d.xipos[members], d.ximat[members].reshape(-1, 3, 3),
            m.body_inertia[members])
        if mass <= 0.0:
            raise ValueError(f"source: body {_name(mujoco, m, obj.mjOBJ_BODY, r)!r} moves "
                             "but has no mass")
        moments = np.maximum(moments, 1e-12 * max(float(np.max(moments)), 1e-12))
        # velocity of the group's centre of mass from MuJoCo's (angular, linear) at the
        # centre of mass of its root body (mjOBJ_BODY's point: xipos)
        spatial = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, obj.mjOBJ_BODY, r, spatial, 0)
        ang_vel = spatial[:3]
        vel = spatial[3:] + np.cross(ang_vel, centre - d.xipos[r])
        props[r] = dict(pos=centre, quat=mat_to_quat_numpy(axes), vel=vel, ang_vel=ang_vel)
        ours[r] = scene.add_body(mass, moments, **props[r])
        props[r].update(mass=mass, inertia=moments)
        for b in members:
            body_map[_name(mujoco, m, obj.mjOBJ_BODY, b)] = ours[r]

    def group_of(body):
        return ours.get(int(root[body]), -1)

    # --- joints -------------------------------------------------------------------------------
    angular = joint_stiffness * extent ** 2
    kinds = {int(joint_t.mjJNT_HINGE): "hinge", int(joint_t.mjJNT_SLIDE): "slider",
             int(joint_t.mjJNT_BALL): "ball"}
    joint_map, of_mj_joint, origin = {}, {}, {}
    for r in groups:
        joints = [j for j in range(m.njnt) if m.jnt_bodyid[j] == r]
        if [int(m.jnt_type[j]) for j in joints] == [int(joint_t.mjJNT_FREE)]:
            continue
        parent = group_of(m.body_parentid[r])
        body = ours[r]
        previous = parent
        for n, j in enumerate(joints):
            name = _name(mujoco, m, obj.mjOBJ_JOINT, j)
            kind = kinds.get(int(m.jnt_type[j]))
            if kind is None:
                raise ValueError(f"source: joint {name!r} is free but its body has other "
                                 "joints")
            if n < len(joints) - 1:      # a light body carries this joint of the chain
                p = props[r]
                floor = angular * scene.dt ** 2 / CARRIER_RATIO
                carrier = scene.add_body(chain_mass * p["mass"],
                                         np.maximum(chain_mass * p["inertia"], floor),
                                         pos=p["pos"], quat=p["quat"], vel=p["vel"],
                                         ang_vel=p["ang_vel"])
            else:
                carrier = body
            dof = m.jnt_dofadr[j]
            # our coordinate is MuJoCo's less an origin q: the build pose's (0 at build), or
            # for a hinge whose range reaches past ±180° from there, the range's middle
            q_now = float(d.qpos[m.jnt_qposadr[j]]) if kind != "ball" else 0.0
            q, limit = q_now, None
            if m.jnt_limited[j] and limits_on and kind != "ball":
                span = np.asarray(m.jnt_range[j], float)
                if kind == "hinge" and (span[0] - q < -np.pi or span[1] - q > np.pi):
                    q = float(np.mean(span))
                    if span[1] - span[0] > 2.0 * np.pi:
                        skipped.append(f"joint {name!r}: range wider than 360°, clipped to "
                                       "±180° about its middle")
                limit = np.clip(span - q, -np.pi, np.pi) if kind == "hinge" else span - q
            elif m.jnt_limited[j] and limits_on:
                skipped.append(f"joint {name!r}: ball joint range (a cone) not imported")
            origin[j] = q
            properties = {"spring_stiffness": float(m.jnt_stiffness[j]) * springs_on,
                          "armature": float(m.dof_armature[dof]),
                          "friction_loss": float(m.dof_frictionloss[dof]) * friction_loss_on}
            if kind == "ball":
                for what, value in properties.items():
                    if value != 0.0:
                        skipped.append(f"joint {name!r}: {what} {value:g} of a ball joint "
                                       "not imported")
            # side a is the child: our θ (a relative to b) is then MuJoCo's q less its origin
            joint_map[name] = scene.add_joint(
                kind, carrier, previous, anchor=d.xanchor[j], axis=d.xaxis[j],
                stiffness=joint_stiffness, angular_stiffness=angular,
                damping=float(m.dof_damping[dof]) * dampers_on,
                limit=None if limit is None else tuple(limit), coordinate=q_now - q,
                **({} if limit is None else _limit_law(mujoco, m, j, dof)))
            of_mj_joint[j] = joint_map[name]
            if kind != "ball" and any(properties.values()):
                # MuJoCo's springref is a joint coordinate like qpos: ours is less the origin
                reference = float(m.qpos_spring[m.jnt_qposadr[j]]) - q
                scene.add_joint_properties(joint_map[name], spring_reference=reference,
                                           **properties)
            previous = carrier
        if parent >= 0 and not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
            scene.exclude_pair(parent, body)     # MuJoCo's filterparent

    # --- tendons and equality constraints (`mjcf_actuation`) -----------------------------------
    actuation = Actuation(mujoco, m, d, scene, of_mj_joint, origin, group_of, joint_stiffness,
                          skipped, lambda kind, i: _name(mujoco, m, kind, i))
    actuation.tendons()
    actuation.equalities()

    # --- geoms --------------------------------------------------------------------------------
    shapes = {int(geom_t.mjGEOM_SPHERE): "sphere", int(geom_t.mjGEOM_CAPSULE): "capsule",
              int(geom_t.mjGEOM_BOX): "box", int(geom_t.mjGEOM_MESH): "mesh",
              int(geom_t.mjGEOM_CYLINDER): "cylinder", int(geom_t.mjGEOM_ELLIPSOID): "ellipsoid",
              int(geom_t.mjGEOM_HFIELD): "hfield"}
    # MuJoCo's disable flags: no contact at all (dm_control's cart-pole, reacher, fish, ...)
    contact_on = not m.opt.disableflags & (mujoco.mjtDisableBit.mjDSBL_CONTACT
                                           | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    geom_map, masks, static, reach = {}, {}, [], 0.0
    laws = _contact_laws(mujoco, m, gravity) if contact == "mujoco" else {}
    world = {"stiffness": WORLD_STIFFNESS * max([k for k, _ in laws.values()], default=1.0),
             "damping": 0.0} if laws else {}
    for g in range(m.ngeom):
        name = _name(mujoco, m, obj.mjOBJ_GEOM, g)
        kind, body = int(m.geom_type[g]), group_of(m.geom_bodyid[g])
        collides = bool(m.geom_contype[g] or m.geom_conaffinity[g]) and contact_on
        geom_map[g] = -1
        friction = float(m.geom_friction[g, 0])
        rotation = d.geom_xmat[g].reshape(3, 3)
        if kind == int(geom_t.mjGEOM_PLANE):
            if body >= 0:
                skipped.append(f"geom {name!r}: a plane on a moving body")
            elif collides:
                scene.add_plane(rotation[:, 2], float(rotation[:, 2] @ d.geom_xpos[g]),
                                friction=friction, **world)
            continue
        if kind not in shapes:
            # (a geom that touches nothing is only drawn: the body's inertia is MuJoCo's)
            if collides:
                skipped.append(f"geom {name!r}: type {geom_t(kind).name[7:].lower()} is not "
                               "supported (sphere, capsule, box, cylinder, ellipsoid, mesh, "
                               "plane, hfield)")
            continue
        if body < 0:
            if collides:      # an obstacle below if a moving geom could touch it
                static.append((g, name, shapes[kind], int(m.geom_contype[g]),
                               int(m.geom_conaffinity[g])))
            continue
        if shapes[kind] == "hfield":
            if collides:
                skipped.append(f"geom {name!r}: a height field on a moving body")
            continue
        size = m.geom_size[g]
        extra = {"sphere": lambda: {"radius": size[0]},
                 "capsule": lambda: {"radius": size[0], "half_length": size[1]},
                 "box": lambda: {"half_size": tuple(size)},
                 "mesh": lambda: {"vertices": _mesh_vertices(m, g)},
                 # a convex polyhedron on the exact surface (mjcf_geoms, models.primitives)
                 "cylinder": lambda: {"vertices": mjcf_geoms.convex_vertices("cylinder", size)},
                 "ellipsoid": lambda: {"vertices": mjcf_geoms.convex_vertices("ellipsoid",
                                                                              size)}}
        ours_kind = {"cylinder": "mesh", "ellipsoid": "mesh"}.get(shapes[kind], shapes[kind])
        geom_map[g] = scene.add_geom(body, ours_kind, pos=d.geom_xpos[g],
                                     quat=mat_to_quat_numpy(rotation), friction=friction,
                                     collide=collides, **_surface(laws.get(g)),
                                     **extra[shapes[kind]]())
        if collides:
            masks.setdefault(body, []).append((int(m.geom_contype[g]),
                                               int(m.geom_conaffinity[g])))
            if shapes[kind] in ("sphere", "capsule"):     # its contact ball's radius
                reach = max(reach, float(size[0]))

    moving = [mask for body_masks in masks.values() for mask in body_masks]
    for g, name, shape, contype, conaffinity in static:
        touching = sum(bool((contype & ca) or (ct & conaffinity)) for ct, ca in moving)
        if not touching:      # nothing can touch it (the cart-poles' rails): not a loss
            continue
        pose = (d.geom_xpos[g], d.geom_xmat[g].reshape(3, 3), reach)
        if shape == "hfield":
            h = int(m.geom_dataid[g])
            rows, cols = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
            data = m.hfield_data[m.hfield_adr[h]:m.hfield_adr[h] + rows * cols]
            grid, note = mjcf_geoms.height_field(data.reshape(rows, cols), m.hfield_size[h],
                                                 *pose)
        else:
            grid, spacing, thinnest = mjcf_geoms.static_obstacle(
                shape, m.geom_size[g], *pose,
                vertices=_mesh_vertices(m, g) if shape == "mesh" else None)
            note = None if spacing <= thinnest else (
                f"static {shape} sampled at {spacing:.3g} m, coarser than its smallest half "
                f"size {thinnest:.3g} m: thin parts may be missed")
        if grid is None:
            skipped.append(f"geom {name!r}: {note} is not imported")
            continue
        scene.add_obstacle(grid, friction=float(m.geom_friction[g, 0]), **world)
        if note is not None:
            skipped.append(f"geom {name!r}: {note}")
        if touching < len(moving):    # an obstacle meets every moving geom
            skipped.append(f"geom {name!r}: a static {shape} (an obstacle) also touches "
                           f"{len(moving) - touching} moving geom(s) its contype / "
                           "conaffinity exclude")

    # --- which body pairs may touch -------------------------------------------------------------
    bodies = sorted(masks)
    for i, a in enumerate(bodies):
        for b in bodies[i + 1:]:
            if not any((ta & cb) or (tb & ca) for ta, ca in masks[a] for tb, cb in masks[b]):
                scene.exclude_pair(a, b)
    for k in range(m.nexclude):
        signature = int(m.exclude_signature[k])
        a, b = group_of(signature >> 16), group_of(signature & 0xFFFF)
        if a >= 0 and b >= 0 and a != b:
            scene.exclude_pair(a, b)

    # --- actuators ------------------------------------------------------------------------------
    motor_map, offsets, actuators = {}, [], []
    for a in range(m.nu):
        name = _name(mujoco, m, obj.mjOBJ_ACTUATOR, a)
        j = int(m.actuator_trnid[a, 0])
        kp, bias = float(m.actuator_gainprm[a, 0]), m.actuator_biasprm[a]
        plain = (m.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
                 and not m.actuator_forcelimited[a])
        position = (plain and m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                    and m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                    and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
                    and kp > 0 and bias[0] == 0 and np.isclose(bias[1], -kp)
                    and m.actuator_gear[a, 0] == 1.0 and j in of_mj_joint
                    and int(m.jnt_type[j]) == int(joint_t.mjJNT_HINGE))
        torque = (plain and m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                  and m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                  and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE
                  and j in of_mj_joint and np.all(m.actuator_gear[a, 1:] == 0)
                  and int(m.jnt_type[j]) in (int(joint_t.mjJNT_HINGE),
                                             int(joint_t.mjJNT_SLIDE)))
        if position:
            motor_map[name] = scene.add_motor(of_mj_joint[j], kp, -float(bias[2]))
            actuators.append((a, "motor", motor_map[name], 1.0))
            offsets.append(origin[j])
        elif torque:
            kind = kinds[int(m.jnt_type[j])]
            actuators.append((a, kind, of_mj_joint[j], kp * float(m.actuator_gear[a, 0])))
        else:
            index = actuation.actuator(a, name)
            if index is not None:
                motor_map[name] = index
                actuators.append((a, "actuator", index, 1.0))
                offsets.append(0.0)
    actuation.finish()

    # --- the rest of the model ------------------------------------------------------------------
    for count, what in ((m.npair, "explicit contact pair(s) (<contact><pair>)"),):
        if count:
            skipped.append(f"{count} {what} not imported")
    skipped.extend(mjcf_fluid.add_fluid(m, d, scene, group_of,      # MuJoCo's fluid forces
                                        lambda b: _name(mujoco, m, obj.mjOBJ_BODY, b)))

    if skipped:
        message = "MJCF: not imported:\n  " + "\n  ".join(skipped)
        if unsupported == "raise":
            raise ValueError(message)
        warnings.warn(message, MjcfWarning, stacklevel=3)
    return scene, MjcfImport(body=body_map, joint=joint_map, motor=motor_map,
                             motor_offset=np.asarray(offsets, float), geom=geom_map,
                             skipped=skipped, mj_model=m, actuators=tuple(actuators))


def from_mjcf(path_or_xml, **options) -> Scene:
    """A `jc.Scene` of an MJCF model (a file path, its XML text or a compiled
    `mujoco.MjModel`): `load_mjcf`'s scene.

    Example:
      scene = jc.io.from_mjcf("pendulum.xml")
      model, state = scene.build()
      final, traj = jc.rollout(model, state, steps=500)
    """
    return load_mjcf(path_or_xml, **options)[0]
