"""MJCF import of what acts on joint coordinates: tendons, equality constraints and actuators
(`load_mjcf`'s helpers; `jaxcontact.io.mjcf` builds the bodies and joints first).

- A fixed tendon (joints only) becomes `Scene.add_tendon` with MuJoCo's coefficients: its
  stiffness and spring length, its damping, its range as limits (held as MuJoCo's soft
  limits hold a load: `impedance_law`). A fixed tendon that nothing acts on and no actuator or
  equality uses changes nothing and is left out without a word.
- A spatial tendon between two sites with no wrapping is a distance between two body points:
  its range's upper end becomes a one-sided cable (`add_joint("distance")`, dm_control's
  ball-in-cup string), its stiffness a spring (`add_spring`).
- An equality on two tendons or two joints, x1 - x1_0 = a0 + a1 (x2 - x2_0) (the linear part
  of MuJoCo's polynomial; x_0 at qpos0), or on one (x1 - x1_0 = a0), becomes a tendon with
  coefficients c1 - a1 c2 held at its reference by the stiffness and damping that MuJoCo's
  solref / solimp give it (`impedance_law`). A connect becomes a ball joint and a weld a fixed
  joint (`Scene.add_joint`, the import's joint stiffness) where the bodies satisfy it at
  build time (MuJoCo's compiler makes them so at qpos0).
- Actuators with a fixed gain and no or an affine bias on a hinge, a slide or an imported
  fixed tendon become `Scene.add_actuator` (MuJoCo's force clamp(gain ctrl + b0 + b1 l +
  b2 l̇) with its gear and forcerange; l measured from the joints' origins, so b0 takes b1
  times MuJoCo's length there), except the two forms `mjcf` maps to its own laws: a position
  actuator of gear 1 on a hinge (a motor, `add_motor`) and a torque actuator on a hinge or a
  slide (a joint torque in `MjcfImport.control`). Activation dynamics (filter, filterexact,
  integrator) are the controller's state: `MjcfImport.activate` steps MuJoCo's act and
  `MjcfImport.control(..., act=)` drives those actuators by it; others are named.
"""

from __future__ import annotations

import numpy as np

from jaxcontact.io.mjcf_solref import impedance_law


def _merge(*parts):
    """One combination (joints, coefficients) of several, adding coefficients of a joint."""
    out = {}
    for joints, coefficients in parts:
        for j, c in zip(joints, coefficients):
            out[j] = out.get(j, 0.0) + c
    joints = tuple(j for j, c in out.items() if c != 0.0)
    return joints, tuple(out[j] for j in joints)


class Actuation:
    """The import of tendons, equalities and actuators of one compiled model `m` (state `d`)
    into `scene`, given the joints already imported: `of_mj_joint` (MuJoCo joint -> ours),
    `origin` (MuJoCo joint -> its coordinate where ours is 0: its build value, or its
    range's middle), `group_of` (MuJoCo body -> ours)."""

    def __init__(self, mujoco, m, d, scene, of_mj_joint, origin, group_of, joint_stiffness,
                 skipped, name):
        self.mujoco, self.m, self.d, self.scene = mujoco, m, d, scene
        self.of_mj_joint, self.origin, self.group_of = of_mj_joint, origin, group_of
        self.joint_stiffness, self.skipped, self.name = joint_stiffness, skipped, name
        self.fixed = {}   # MuJoCo tendon -> (our joints, coefficients, its length at ours 0)
        self.instant = []  # actuators whose activation dynamics are not imported

    def _coordinate(self, j):
        """(our joint, MuJoCo's coordinate where ours is 0) of a hinge or slide MuJoCo joint
        j, or None."""
        kinds = (int(self.mujoco.mjtJoint.mjJNT_HINGE), int(self.mujoco.mjtJoint.mjJNT_SLIDE))
        if int(self.m.jnt_type[j]) not in kinds or j not in self.of_mj_joint:
            return None
        return self.of_mj_joint[j], self.origin[j]

    # --- tendons -----------------------------------------------------------------------------
    def tendons(self):
        mujoco, m, obj = self.mujoco, self.m, self.mujoco.mjtObj
        wrap = mujoco.mjtWrap
        used = self._used_tendons()
        for t in range(m.ntendon):
            name = self.name(obj.mjOBJ_TENDON, t)
            wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
            types = [int(m.wrap_type[w]) for w in wraps]
            acts = bool(m.tendon_limited[t] or m.tendon_stiffness[t] or m.tendon_damping[t]
                        or m.tendon_frictionloss[t] or m.tendon_armature[t])
            if all(k == int(wrap.mjWRAP_JOINT) for k in types):
                coordinates = [self._coordinate(int(m.wrap_objid[w])) for w in wraps]
                if any(c is None for c in coordinates):
                    if acts or t in used:
                        self.skipped.append(f"tendon {name!r}: a fixed tendon over a joint "
                                            "other than a hinge or slide")
                    continue
                joints = tuple(c[0] for c in coordinates)
                coefficients = tuple(float(m.wrap_prm[w]) for w in wraps)
                at_build = sum(c * q for c, (_, q) in zip(coefficients, coordinates))
                self.fixed[t] = (joints, coefficients, at_build)
                if acts:
                    self._fixed_tendon(t, name, joints, coefficients, at_build)
            elif types == [int(wrap.mjWRAP_SITE)] * 2 and acts:
                self._string(t, name, [int(m.wrap_objid[w]) for w in wraps])
            elif acts or t in used:
                self.skipped.append(f"tendon {name!r}: a spatial tendon that wraps (only two "
                                    "sites)")

    def _used_tendons(self):
        m, eq, trn = self.m, self.mujoco.mjtEq, self.mujoco.mjtTrn
        used = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)
                if m.actuator_trntype[a] == trn.mjTRN_TENDON}
        for e in range(m.neq):
            if m.eq_type[e] == eq.mjEQ_TENDON:
                used |= {int(m.eq_obj1id[e]), int(m.eq_obj2id[e])} - {-1}
        return used

    def _fixed_tendon(self, t, name, joints, coefficients, at_build):
        m = self.m
        for what, value in (("frictionloss", m.tendon_frictionloss[t]),
                            ("armature", m.tendon_armature[t])):
            if value:
                self.skipped.append(f"tendon {name!r}: {what} {float(value):g} not imported")
        spring = np.asarray(m.tendon_lengthspring[t], float)
        if m.tendon_stiffness[t] and spring[0] != spring[1]:
            self.skipped.append(f"tendon {name!r}: a spring with a dead band "
                                f"{spring.tolist()} (its lower end is imported)")
        options = {}
        if m.tendon_limited[t]:
            k, c = impedance_law(self.mujoco, m, m.tendon_solref_lim[t], m.tendon_solimp_lim[t],
                                 1.0 / float(m.tendon_invweight0[t]))
            options = {"limit": tuple(np.asarray(m.tendon_range[t], float) - at_build),
                       "limit_stiffness": k, "limit_damping": c}
        self.scene.add_tendon(joints, coefficients, stiffness=float(m.tendon_stiffness[t]),
                              rest_length=float(spring[0]) - at_build,
                              damping=float(m.tendon_damping[t]), **options)

    def _string(self, t, name, sites):
        """A spatial tendon between two sites: a cable at its range's upper end, a spring."""
        m, d, scene = self.m, self.d, self.scene
        bodies = [self.group_of(int(m.site_bodyid[s])) for s in sites]
        points = [np.asarray(d.site_xpos[s], float) for s in sites]
        if bodies[0] == bodies[1]:
            return
        if bodies[0] < 0:
            bodies, points = bodies[::-1], points[::-1]
        lost = [w for w, v in (("damping", m.tendon_damping[t]),
                               ("frictionloss", m.tendon_frictionloss[t])) if v]
        if m.tendon_limited[t]:
            k, c = impedance_law(self.mujoco, m, m.tendon_solref_lim[t], m.tendon_solimp_lim[t],
                                 1.0 / float(m.tendon_invweight0[t]))
            scene.add_joint("distance", bodies[0], bodies[1], anchor=points[0],
                            anchor_b=points[1], rest_length=float(m.tendon_range[t, 1]),
                            stiffness=k, damping=c, collide=True)
            if m.tendon_range[t, 0] > 0:
                lost.append(f"range's lower end {float(m.tendon_range[t, 0]):g}")
        if m.tendon_stiffness[t]:
            rot, pos = scene.frame(bodies[0])
            rot_b, pos_b = scene.frame(bodies[1])
            scene.add_spring(bodies[0], bodies[1], stiffness=float(m.tendon_stiffness[t]),
                             anchor_a=rot.T @ (points[0] - pos),
                             anchor_b=(points[1] if bodies[1] < 0
                                       else rot_b.T @ (points[1] - pos_b)),
                             rest_length=float(m.tendon_lengthspring[t, 0]))
        for what in lost:
            self.skipped.append(f"tendon {name!r}: {what} of a spatial tendon not imported")

    # --- equality constraints ----------------------------------------------------------------
    def equalities(self):
        mujoco, m, eq = self.mujoco, self.m, self.mujoco.mjtEq
        if m.opt.disableflags & (mujoco.mjtDisableBit.mjDSBL_EQUALITY
                                 | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT):
            return       # MuJoCo applies none of them
        for e in range(m.neq):
            name = self.name(mujoco.mjtObj.mjOBJ_EQUALITY, e)
            kind = int(m.eq_type[e])
            if not m.eq_active0[e]:
                self.skipped.append(f"equality {name!r}: inactive at the start (equalities "
                                    "switched on later are not imported)")
            elif kind in (int(eq.mjEQ_TENDON), int(eq.mjEQ_JOINT)):
                self._coupling(e, name, kind == int(eq.mjEQ_TENDON))
            elif kind in (int(eq.mjEQ_CONNECT), int(eq.mjEQ_WELD)):
                self._attach(e, name, kind == int(eq.mjEQ_CONNECT))
            else:
                self.skipped.append(f"equality {name!r}: type "
                                    f"{eq(kind).name[5:].lower()} not imported")

    def _combination(self, i, tendon):
        """(joints, coefficients, MuJoCo's value where ours is 0, at qpos0, effective mass)
        of tendon or joint i, or None."""
        m = self.m
        if tendon:
            if i not in self.fixed:
                return None
            joints, coefficients, at_build = self.fixed[i]
            return (joints, coefficients, at_build, float(m.tendon_length0[i]),
                    1.0 / float(m.tendon_invweight0[i]))
        found = self._coordinate(i)
        if found is None:
            return None
        return ((found[0],), (1.0,), found[1], float(m.qpos0[m.jnt_qposadr[i]]),
                1.0 / float(m.dof_invweight0[m.jnt_dofadr[i]]))

    def _coupling(self, e, name, tendon):
        m = self.m
        poly = np.asarray(m.eq_data[e, :5], float)
        first = self._combination(int(m.eq_obj1id[e]), tendon)
        other = int(m.eq_obj2id[e])
        second = self._combination(other, tendon) if other >= 0 else None
        if first is None or (other >= 0 and second is None):
            self.skipped.append(f"equality {name!r}: on a {'tendon' if tendon else 'joint'} "
                                "that was not imported as a coordinate")
            return
        if other >= 0 and np.any(poly[2:]):
            self.skipped.append(f"equality {name!r}: its polynomial's terms past the linear "
                                "one not imported")
        # x1 - x1_0 = a0 + a1 (x2 - x2_0), in ours (MuJoCo's value less its value at build):
        # L1 - a1 L2 = a0 + x1_0 - b1 - a1 (x2_0 - b2)
        joints, coefficients, built, zero, mass = first
        reference = poly[0] + zero - built
        parts = [(joints, coefficients)]
        if second is not None:
            a1 = poly[1]
            parts.append((second[0], tuple(-a1 * c for c in second[1])))
            reference -= a1 * (second[3] - second[2])
        joints, coefficients = _merge(*parts)
        if not joints:
            return
        k, c = impedance_law(self.mujoco, m, m.eq_solref[e], m.eq_solimp[e], mass)
        self.scene.add_tendon(joints, coefficients, stiffness=k, rest_length=reference,
                              damping=c)

    def _attach(self, e, name, connect):
        """A connect (a ball joint at its anchor) or a weld (a fixed joint at its anchor in
        body 2), where the bodies satisfy it at build (MuJoCo's own residual, `efc_pos`)."""
        m, d = self.m, self.d
        mujoco = self.mujoco
        if int(m.eq_objtype[e]) != int(mujoco.mjtObj.mjOBJ_BODY):
            self.skipped.append(f"equality {name!r}: between sites (only bodies)")
            return
        b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        a, b = self.group_of(b1), self.group_of(b2)
        if a == b:
            return
        rows = (d.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)) & (d.efc_id == e)
        if np.any(np.abs(d.efc_pos[rows]) > 1e-6 * max(float(m.stat.extent), 1.0)):
            self.skipped.append(f"equality {name!r}: its bodies do not satisfy it at build "
                                "(only a connect or weld holding the pose at build)")
            return
        body = b1 if connect else b2
        anchor = d.xpos[body] + d.xmat[body].reshape(3, 3) @ np.asarray(m.eq_data[e, :3], float)
        self.scene.add_joint("ball" if connect else "fixed", a, b, anchor=anchor,
                             stiffness=self.joint_stiffness,
                             angular_stiffness=self.joint_stiffness * float(m.stat.extent) ** 2,
                             collide=True)

    # --- actuators ---------------------------------------------------------------------------
    def actuator(self, a, name):
        """Import actuator a with `add_actuator`; returns our motor index, or None (named)."""
        mujoco, m = self.mujoco, self.m
        trn, target = m.actuator_trntype[a], int(m.actuator_trnid[a, 0])
        if trn == mujoco.mjtTrn.mjTRN_JOINT:
            found = self._coordinate(target)
            where = None if found is None else {"joint": found[0]}
            at_build = None if found is None else found[1]
        elif trn == mujoco.mjtTrn.mjTRN_TENDON and target in self.fixed:
            joints, coefficients, at_build = self.fixed[target]
            where = {"tendon": self.scene.add_tendon(joints, coefficients)}
        else:
            where = None
        if where is None:
            self.skipped.append(f"actuator {name!r}: only actuators on hinges, slides and fixed "
                                "tendons are imported")
            return None
        biases = (int(mujoco.mjtBias.mjBIAS_NONE), int(mujoco.mjtBias.mjBIAS_AFFINE))
        if int(m.actuator_gaintype[a]) != int(mujoco.mjtGain.mjGAIN_FIXED) or \
                int(m.actuator_biastype[a]) not in biases:
            self.skipped.append(f"actuator {name!r}: only fixed gains and affine biases are "
                                "imported")
            return None
        stepped = {int(mujoco.mjtDyn.mjDYN_NONE), int(mujoco.mjtDyn.mjDYN_FILTER),
                   int(mujoco.mjtDyn.mjDYN_FILTEREXACT), int(mujoco.mjtDyn.mjDYN_INTEGRATOR)}
        if int(m.actuator_dyntype[a]) not in stepped:
            self.instant.append(name)
        gear = float(m.actuator_gear[a, 0])
        bias = np.asarray(m.actuator_biasprm[a, :3], float)
        if int(m.actuator_biastype[a]) == biases[0]:
            bias = np.zeros(3)
        if bias[1] > 0 or bias[2] > 0:
            self.skipped.append(f"actuator {name!r}: a bias pushing away from its reference "
                                f"(b1 {bias[1]:g}, b2 {bias[2]:g} > 0) is not imported")
            return None
        # MuJoCo's length is gear × its coordinate; ours is less the origin's
        bias[0] += bias[1] * gear * at_build
        force_range = (tuple(float(v) for v in m.actuator_forcerange[a])
                       if m.actuator_forcelimited[a] else None)
        return self.scene.add_actuator(**where, gear=gear, gain=float(m.actuator_gainprm[a, 0]),
                                       bias=tuple(bias), force_range=force_range)

    def finish(self):
        """Name, in one line, the actuators whose activation dynamics `MjcfImport.activate`
        cannot step (muscles, user dynamics)."""
        if self.instant:
            self.skipped.append(f"{len(self.instant)} actuator(s) ({', '.join(self.instant[:4])}"
                                f"{', ...' if len(self.instant) > 4 else ''}): activation "
                                "dynamics other than filter or integrator not imported, the "
                                "force follows ctrl at once")
