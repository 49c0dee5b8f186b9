"""MJCF import of MuJoCo's fluid forces (`<option density viscosity wind>`): its inertia-based
model on every moving body, as `Scene.add_fluid` elements (`jaxcontact.models.fluid`).

MuJoCo applies the model per MuJoCo body, at its centre of mass (`xipos`) and on the
equivalent inertia box of its own mass and principal moments, in its inertial frame
(`ximat`). `load_mjcf` may weld several MuJoCo bodies into one body of ours: each of them
becomes one element of that body, its box's centre and axes given in our body's frame, so the
compound gets the sum of the members' forces and torques, as in MuJoCo (not the drag of one
box for the compound). A body whose geoms use MuJoCo's ellipsoid model (`fluidshape=
"ellipsoid"`, which turns the inertia model off for that body) is named as not imported.
"""

from __future__ import annotations

import numpy as np

from jaxcontact.math import mat_to_quat_numpy


def box_half_sizes(mass, moments) -> np.ndarray:
    """The equivalent inertia box's half sizes, r_i = sqrt(3 / (2 M) (I_j + I_k - I_i))
    (MuJoCo's documentation, "Fluid forces / Inertia model"), in NumPy; a moment sum that
    rounds below 0 (a flat or thin body) gives 0."""
    moments = np.asarray(moments, float)
    return np.sqrt(np.maximum(1.5 * (np.sum(moments) - 2.0 * moments) / mass, 0.0))


def add_fluid(m, d, scene, group_of, body_name) -> list:
    """Add MuJoCo's inertia-based fluid forces of model `m` (at the configuration of `d`,
    the poses of the scene's bodies) to `scene`: one `add_fluid` element per moving MuJoCo
    body of positive mass, on our body `group_of(b)`. Returns what was not imported (a
    list of sentences; `body_name(b)` names MuJoCo body b).

    Nothing is added where density and viscosity are both 0: the model is then off (a wind
    alone exerts no force). A MuJoCo body welded to the world (`group_of(b)` = -1) does not
    move, and a massless one has no equivalent box (MuJoCo skips it too)."""
    density, viscosity = float(m.opt.density), float(m.opt.viscosity)
    if density == 0.0 and viscosity == 0.0:
        return []
    wind = np.asarray(m.opt.wind, float)
    ellipsoid = set(int(b) for b in m.geom_bodyid[np.asarray(m.geom_fluid)[:, 0] > 0])
    skipped = []
    for b in range(1, m.nbody):
        ours = group_of(b)
        if ours < 0 or m.body_mass[b] <= 0.0:
            continue
        if b in ellipsoid:
            skipped.append(f"body {body_name(b)!r}: MuJoCo's ellipsoid fluid model "
                           "(geom fluidshape=\"ellipsoid\") not imported")
            continue
        rotation, origin = scene.frame(ours)
        axes = rotation.T @ np.asarray(d.ximat[b], float).reshape(3, 3)
        scene.add_fluid(ours, density=density, viscosity=viscosity, wind=wind,
                        half_size=box_half_sizes(float(m.body_mass[b]), m.body_inertia[b]),
                        offset=rotation.T @ (np.asarray(d.xipos[b], float) - origin),
                        quat=mat_to_quat_numpy(axes))
    return skipped
