"""MuJoCo's generalized coordinates (qpos, qvel, ctrl) of a model imported with `jc.io.load_mjcf`.

Our bodies are maximal coordinates: each has a centre of mass and principal axes, and joints
are penalty rows. MuJoCo's tasks (gymnasium's rewards, observations and reset noise) are
written in MuJoCo's joint coordinates. `MjcfCoordinates` maps between the two, in JAX
(differentiable, jittable), for trees of hinge, slide and free joints:

- `frames(state)`: every MuJoCo body's frame (origin `xpos`, orientation `xquat`): our
  body's pose composed with the fixed offset of the MuJoCo frame in it, measured at build
  (a body welded to others shares their compound body, so it keeps its own frame).
- `qpos(state)`, `qvel(state)`: a hinge's angle is its build value plus the rotation of the
  child relative to the parent about the axis since build, 2 atan2(δ·a, δ_w) of the relative
  quaternion change δ; its rate (ω_child - ω_parent)·a. A slide's coordinate is its build
  value plus the child's displacement relative to the parent along the axis (in the
  parent's frame), its rate the time derivative of that. A free joint's qpos is its body
  frame (position, quaternion), its qvel the frame origin's world velocity and the angular
  velocity in the body frame (MuJoCo's convention). Several joints on one body are read
  from the light bodies that carry them (`load_mjcf(chain_mass=)`): each joint between
  its own carrier and the previous one.
- `state(qpos, qvel)`: MuJoCo's forward kinematics (mj_kinematics: slides translate the frame
  along their axis by q - qpos0, hinges turn it by q - qpos0 about their anchor, a free
  joint sets it), then each body's centre of mass and principal axes from its frame, and
  the velocities as the time derivative (`jax.jvp`) of those poses along q̇.
- `ctrl(model, state, control)`: the inverse of `MjcfImport.control` for the imported
  actuators: a hinge torque actuator's ctrl is the torque about its axis on the subtree it
  drives, divided by its gain (the torques of hinge actuators inside the subtree cancel in
  pairs; exact where the subtree holds no slide actuator); a slide's the force along its
  axis; a position actuator's the motor target plus `MjcfImport.motor_offset`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcontact.math import quat_mul, quat_normalize, quat_rotate, quat_rotate_inverse, safe_atan2

_CONJ = np.array([1.0, -1.0, -1.0, -1.0])


def _conj(q):
    """The conjugate of a quaternion (4,) or of each row of (N, 4)."""
    return q * jnp.asarray(_CONJ, q.dtype).reshape((1,) * (q.ndim - 1) + (4,))


def _conj_np(q):
    return np.asarray(q, float) * _CONJ


def _rotate_np(q, v):
    w, x, y, z = np.asarray(q, float)
    rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                    [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                    [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return rot @ np.asarray(v, float)


def _qmul_np(a, b):
    w1, x1, y1, z1 = np.asarray(a, float)
    w2, x2, y2, z2 = np.asarray(b, float)
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _axis_angle(axis, angle):
    half = 0.5 * angle
    return jnp.concatenate([jnp.cos(half)[None], jnp.sin(half) * axis])


class MjcfCoordinates:
    """MuJoCo's qpos / qvel / ctrl of an imported model, from and to our states (module
    docstring).

    Args:
      imported: the `MjcfImport` that `jc.io.load_mjcf` returned.
      model, state: the model and state its scene built (the state at the import's qpos).
      qpos: the generalized position the scene was imported at (`load_mjcf(qpos=)`);
        default the model's qpos0.

    Raises:
      ValueError: a ball joint (not mapped here), or a state whose body count differs from
        the model's.
    """

    def __init__(self, imported, model, state, qpos=None):
        import mujoco

        m = imported.mj_model
        self.mj_model = m
        self.imported = imported
        if state.pos.shape[0] != model.n_body:
            raise ValueError(f"state must be the model's build state ({model.n_body} bodies), "
                             f"got {state.pos.shape[0]} bodies")
        d = mujoco.MjData(m)
        build = np.asarray(m.qpos0 if qpos is None else qpos, float)
        if build.shape != (m.nq,):
            raise ValueError(f"qpos must have shape ({m.nq},), got {build.shape}")
        d.qpos[:] = build
        mujoco.mj_forward(m, d)
        self.qpos_build = build
        pos0, quat0 = np.asarray(state.pos, float), np.asarray(state.quat, float)
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
                 for b in range(m.nbody)]
        # each MuJoCo body's our body, and its frame in our body's frame (at build)
        self.group = np.array([-1] + [imported.body[names[b]] for b in range(1, m.nbody)])
        self.frame_pos = np.zeros((m.nbody, 3))
        self.frame_quat = np.tile([1.0, 0.0, 0.0, 0.0], (m.nbody, 1))
        for b in range(1, m.nbody):
            g = self.group[b]
            self.frame_pos[b] = _rotate_np(_conj_np(quat0[g]), d.xpos[b] - pos0[g])
            self.frame_quat[b] = _qmul_np(_conj_np(quat0[g]), d.xquat[b])

        kinds = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE):
                 "slide", int(mujoco.mjtJoint.mjJNT_FREE): "free"}
        joints = []
        for j in range(m.njnt):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
            kind = kinds.get(int(m.jnt_type[j]))
            if kind is None:
                raise ValueError(f"joint {name!r}: only hinge, slide and free joints are mapped "
                                 "to qpos (a ball joint is not)")
            row = {"kind": kind, "body": int(m.jnt_bodyid[j]), "qadr": int(m.jnt_qposadr[j]),
                   "vadr": int(m.jnt_dofadr[j]), "axis": np.asarray(m.jnt_axis[j], float),
                   "anchor": np.asarray(m.jnt_pos[j], float), "name": name}
            if kind != "free":
                ours = imported.joint[name]
                child, parent = int(model.joint.body_a[ours]), int(model.joint.body_b[ours])
                q_child = quat0[child]
                q_parent = quat0[parent] if parent >= 0 else np.array([1.0, 0, 0, 0])
                c_parent = pos0[parent] if parent >= 0 else np.zeros(3)
                row.update(child=child, parent=parent,
                           # the axis in the child's frame (hinge) / the parent's (slide)
                           axis_child=_rotate_np(_conj_np(q_child), d.xaxis[j]),
                           axis_parent=_rotate_np(_conj_np(q_parent), d.xaxis[j]),
                           rel0=_qmul_np(_conj_np(q_parent), q_child),
                           offset0=_rotate_np(_conj_np(q_parent), pos0[child] - c_parent))
            joints.append(row)
        self.joints = joints
        # our bodies that carry one joint of a chain (not a MuJoCo body's own pose): body ->
        # (MuJoCo body, index of its last joint applied)
        self.carriers = {}
        for b in range(1, m.nbody):
            mine = [j for j, row in enumerate(joints) if row["body"] == b]
            for n, j in enumerate(mine[:-1]):
                self.carriers[joints[j]["child"]] = (b, n)
        # a group's own frame: the member that roots the weld group
        self.root = {int(self.group[b]): b for b in range(1, m.nbody) if m.body_weldid[b] == b}
        self.n_body = model.n_body
        self._actuators(model)

    # --- state -> MuJoCo ------------------------------------------------------------------------
    def frames(self, state):
        """(xpos (nbody, 3), xquat (nbody, 4)) of every MuJoCo body (row 0, the world, at
        the origin)."""
        dtype = state.pos.dtype
        g = self.group[1:]
        q = state.quat[g]
        pos = state.pos[g] + quat_rotate(q, jnp.asarray(self.frame_pos[1:], dtype))
        quat = quat_mul(q, jnp.asarray(self.frame_quat[1:], dtype))
        return (jnp.concatenate([jnp.zeros((1, 3), dtype), pos]),
                jnp.concatenate([jnp.asarray([[1.0, 0.0, 0.0, 0.0]], dtype), quat]))

    def _pose(self, state, body):
        dtype = state.pos.dtype
        if body < 0:
            return (jnp.zeros(3, dtype), jnp.asarray([1.0, 0.0, 0.0, 0.0], dtype),
                    jnp.zeros(3, dtype), jnp.zeros(3, dtype))
        return state.pos[body], state.quat[body], state.vel[body], state.ang_vel[body]

    def qpos(self, state):
        """MuJoCo's qpos (nq,) of `state`."""
        dtype = state.pos.dtype
        xpos, xquat = self.frames(state)
        out = []
        for row in self.joints:
            if row["kind"] == "free":
                out += [xpos[row["body"]], xquat[row["body"]]]
                continue
            c_pos, c_quat, _, _ = self._pose(state, row["child"])
            p_pos, p_quat, _, _ = self._pose(state, row["parent"])
            q0 = self.qpos_build[row["qadr"]]
            if row["kind"] == "hinge":
                rel = quat_mul(_conj(p_quat), c_quat)
                delta = quat_mul(jnp.asarray(_conj_np(row["rel0"]), dtype), rel)
                # q and -q are one rotation: the angle of the one with w >= 0, in (-π, π]
                sign = jnp.where(delta[0] < 0.0, -1.0, 1.0).astype(dtype)
                along = jnp.dot(delta[1:], jnp.asarray(row["axis_child"], dtype))
                angle = 2.0 * safe_atan2(sign * along, sign * delta[0])
                out.append(jnp.reshape(q0 + angle, (1,)))
            else:
                offset = quat_rotate_inverse(p_quat, c_pos - p_pos)
                shift = offset - jnp.asarray(row["offset0"], dtype)
                out.append(jnp.reshape(q0 + jnp.dot(shift, jnp.asarray(row["axis_parent"],
                                                                        dtype)), (1,)))
        return jnp.concatenate(out)

    def qvel(self, state):
        """MuJoCo's qvel (nv,) of `state`."""
        dtype = state.pos.dtype
        xpos, xquat = self.frames(state)
        out = []
        for row in self.joints:
            if row["kind"] == "free":
                g = self.group[row["body"]]
                w = state.ang_vel[g]
                v = state.vel[g] + jnp.cross(w, xpos[row["body"]] - state.pos[g])
                out += [v, quat_rotate_inverse(xquat[row["body"]], w)]
                continue
            c_pos, c_quat, c_vel, c_w = self._pose(state, row["child"])
            p_pos, p_quat, p_vel, p_w = self._pose(state, row["parent"])
            if row["kind"] == "hinge":
                axis = quat_rotate(c_quat, jnp.asarray(row["axis_child"], dtype))
                out.append(jnp.reshape(jnp.dot(c_w - p_w, axis), (1,)))
            else:
                rate = quat_rotate_inverse(p_quat, c_vel - p_vel - jnp.cross(p_w, c_pos - p_pos))
                out.append(jnp.reshape(jnp.dot(rate, jnp.asarray(row["axis_parent"], dtype)),
                                       (1,)))
        return jnp.concatenate(out)

    # --- MuJoCo -> state ------------------------------------------------------------------------
    def _kinematics(self, qpos):
        """World frames (xpos, xquat) of every MuJoCo body at `qpos`, and of every carrier
        (mj_kinematics, with a carrier's later joints at their build values)."""
        m = self.mj_model
        dtype = qpos.dtype
        build = jnp.asarray(self.qpos_build, dtype)
        xpos = [jnp.zeros(3, dtype)]
        xquat = [jnp.asarray([1.0, 0.0, 0.0, 0.0], dtype)]
        carrier_frames = {}
        for b in range(1, m.nbody):
            parent = int(m.body_parentid[b])
            base_pos = xpos[parent] + quat_rotate(xquat[parent],
                                                  jnp.asarray(m.body_pos[b], dtype))
            base_quat = quat_mul(xquat[parent], jnp.asarray(m.body_quat[b], dtype))
            mine = [row for row in self.joints if row["body"] == b]

            def apply(values, base_pos=base_pos, base_quat=base_quat, mine=mine):
                pos, quat = base_pos, base_quat
                for row, q in zip(mine, values):
                    axis = jnp.asarray(row["axis"], dtype)
                    if row["kind"] == "free":
                        pos, quat = q[:3], quat_normalize(q[3:7])
                    elif row["kind"] == "slide":
                        zero = self.qpos0[row["qadr"]]
                        pos = pos + quat_rotate(quat, axis) * (q[0] - zero)
                    else:
                        zero = self.qpos0[row["qadr"]]
                        anchor = pos + quat_rotate(quat, jnp.asarray(row["anchor"], dtype))
                        quat = quat_mul(quat, _axis_angle(axis, q[0] - zero))
                        pos = anchor - quat_rotate(quat, jnp.asarray(row["anchor"], dtype))
                return pos, quat

            def values(source, row):
                size = 7 if row["kind"] == "free" else 1
                return source[row["qadr"]:row["qadr"] + size]

            current = [values(qpos, row) for row in mine]
            for n in range(len(mine) - 1):
                partial = current[:n + 1] + [values(build, row) for row in mine[n + 1:]]
                carrier_frames[(b, n)] = apply(partial)
            pos, quat = apply(current)
            xpos.append(pos)
            xquat.append(quat)
        return jnp.stack(xpos), jnp.stack(xquat), carrier_frames

    @property
    def qpos0(self):
        return np.asarray(self.mj_model.qpos0, float)

    def _poses(self, qpos):
        """Our bodies' (pos (N, 3), quat (N, 4)) at MuJoCo's `qpos`."""
        xpos, xquat, carrier_frames = self._kinematics(qpos)
        dtype = qpos.dtype
        pos, quat = [None] * self.n_body, [None] * self.n_body
        for g, b in self.root.items():
            frames = [(g, xpos[b], xquat[b], b)]
            for body, (mj_body, n) in self.carriers.items():
                if mj_body == b:
                    frames.append((body, *carrier_frames[(b, n)], b))
            for ours, fpos, fquat, member in frames:
                # our body's pose from its MuJoCo frame: the inverse of the build offset
                q = quat_mul(fquat, jnp.asarray(_conj_np(self.frame_quat[member]), dtype))
                pos[ours] = fpos - quat_rotate(q, jnp.asarray(self.frame_pos[member], dtype))
                quat[ours] = q
        return jnp.stack(pos), jnp.stack(quat)

    def state(self, template, qpos, qvel):
        """`template` (a `State` of this model) moved to MuJoCo's (qpos (nq,), qvel (nv,))."""
        dtype = template.pos.dtype
        qpos, qvel = jnp.asarray(qpos, dtype), jnp.asarray(qvel, dtype)
        if qpos.shape != (self.mj_model.nq,) or qvel.shape != (self.mj_model.nv,):
            raise ValueError(f"qpos and qvel must have shapes ({self.mj_model.nq},) and "
                             f"({self.mj_model.nv},), got {qpos.shape} and {qvel.shape}")
        rate = []
        for row in self.joints:
            if row["kind"] == "free":
                q = quat_normalize(qpos[row["qadr"] + 3:row["qadr"] + 7])
                w = qvel[row["vadr"] + 3:row["vadr"] + 6]
                rate += [qvel[row["vadr"]:row["vadr"] + 3],
                         0.5 * quat_mul(q, jnp.concatenate([jnp.zeros(1, dtype), w]))]
            else:
                rate.append(qvel[row["vadr"]:row["vadr"] + 1])
        (pos, quat), (vel, quat_rate) = jax.jvp(self._poses, (qpos,), (jnp.concatenate(rate),))
        # ω = 2 vec(q̇ q*) (world frame) for the unit quaternion q
        ang_vel = 2.0 * jax.vmap(quat_mul)(quat_rate, _conj(quat))[:, 1:]
        return template.replace(pos=pos, quat=quat, vel=vel, ang_vel=ang_vel)

    # --- actuators ------------------------------------------------------------------------------
    def _actuators(self, model):
        children = {}
        for j, (a, b) in enumerate(zip(model.joint.body_a, model.joint.body_b)):
            children.setdefault(int(b), []).append(int(a))

        def subtree(body):
            out, todo = [], [body]
            while todo:
                node = todo.pop()
                out.append(node)
                todo += children.get(node, [])
            return out

        rows = []
        for a, kind, index, gain in self.imported.actuators:
            if kind == "motor":
                rows.append((a, kind, index, float(self.imported.motor_offset[index]), None))
                continue
            child = int(model.joint.body_a[index])
            mask = np.zeros(model.n_body)
            mask[subtree(child)] = 1.0
            rows.append((a, kind, index, float(gain), mask))
        self._ctrl_rows = rows

    def ctrl(self, model, state, control):
        """MuJoCo's ctrl (nu,) that `MjcfImport.control(model, state, ctrl)` maps to
        `control` (module docstring; actuators not imported read 0)."""
        dtype = state.pos.dtype
        out = jnp.zeros((self.mj_model.nu,), dtype)
        for a, kind, index, gain, mask in self._ctrl_rows:
            if kind == "motor":
                out = out.at[a].set(control.motor[index] + gain)
                continue
            axis = quat_rotate(state.quat[int(model.joint.body_a[index])],
                               model.joint.axis_a[index])
            load = control.torque if kind == "hinge" else control.force
            total = jnp.sum(jnp.asarray(mask, dtype)[:, None] * load, axis=0)
            out = out.at[a].set(jnp.dot(total, axis) / (gain * jnp.dot(axis, axis)))
        return out
