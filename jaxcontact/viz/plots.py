"""Plots of a rollout: energy, contact forces, and what the solver did per step.

Each plot returns a matplotlib `Figure`, draws into `ax` (or `axes`) when given, and saves a
PNG to `path` when given. matplotlib is optional (`pip install jaxcontact[viz]`): it is
imported when a plot is made. The numbers behind the energy and force plots are
`energies` and `contact_force_totals`, which need NumPy only.
"""

from __future__ import annotations

import os

import jax
import numpy as np


def _matplotlib():
    """The `Figure` class of matplotlib (not pyplot: no GUI backend, no global figures)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("jaxcontact.viz.plots needs matplotlib: pip install jaxcontact[viz] "
                          "(or pip install matplotlib)") from error
    return Figure


def _figure(ax, rows=1):
    """(figure, axes): those of `ax` (an Axes, or a sequence of `rows` Axes), or new ones."""
    Figure = _matplotlib()
    if ax is None:
        fig = Figure(figsize=(7.0, 2.6 + 1.6 * rows), layout="constrained")
        axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
        return fig, list(axes)
    axes = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
    if len(axes) != rows:
        raise ValueError(f"ax must be {'one Axes' if rows == 1 else f'{rows} Axes'}, got "
                         f"{len(axes)}")
    return axes[0].figure, axes


def _save(fig, path):
    if path is not None:
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)) or not \
                os.fspath(path):
            raise ValueError(f"path must be a file path (str or os.PathLike), got {path!r}")
        fig.savefig(path, dpi=100)
    return fig


def _frames(model, traj, scene):
    from jaxcontact.viz.html import _one_scene

    return _one_scene(model, traj, scene)


def energies(model, traj, *, scene=0):
    """Kinetic and gravitational potential energy of each frame of a trajectory (J).

    Kinetic: ½ m |v|² of bodies and particles, plus ½ ωᵦᵀ diag(I) ωᵦ of bodies, ωᵦ = Rᵀ ω the
    angular velocity in the body frame (`State.ang_vel` is in the world frame; I the principal
    moments `model.body.inertia`). Potential: -m g·x of bodies and particles (zero at the
    origin). Contact, spring and joint energies are not included.

    Args:
      model: the scene.
      traj: a `jc.State` with a time axis (or one state, or a batch (T, B, ...): `scene`).
      scene: which trajectory of a batch.

    Returns:
      dict of (T,) NumPy arrays: "time", "kinetic", "potential", "total".
    """
    model, frames = _frames(model, traj, scene)
    mass = np.asarray(model.body.mass, float)
    inertia = np.asarray(model.body.inertia, float)
    particle_mass = np.asarray(model.particle_masses, float)
    gravity = np.asarray(model.gravity, float)
    quat = np.asarray(frames.quat, float)
    w, u = quat[..., :1], quat[..., 1:]
    omega = np.asarray(frames.ang_vel, float)
    # Rᵀ ω: rotate by the conjugate quaternion (w, -u)
    t = 2.0 * np.cross(-u, omega)
    body_omega = omega + w * t + np.cross(-u, t)
    vel, particle_vel = np.asarray(frames.vel, float), np.asarray(frames.particle_vel, float)
    kinetic = (0.5 * np.einsum("n,tnk->t", mass, vel * vel)
               + 0.5 * np.einsum("nk,tnk->t", inertia, body_omega * body_omega)
               + 0.5 * np.einsum("p,tpk->t", particle_mass, particle_vel * particle_vel))
    potential = -(np.einsum("n,tnk,k->t", mass, np.asarray(frames.pos, float), gravity)
                  + np.einsum("p,tpk,k->t", particle_mass,
                              np.asarray(frames.particle_pos, float), gravity))
    return {"time": np.asarray(frames.time, float), "kinetic": kinetic, "potential": potential,
            "total": kinetic + potential}


def contact_force_totals(model, traj, *, scene=0, margin=0.0):
    """The sum of the normal forces of the contact rows in contact (gap <= margin, m) in each
    frame (N): `jc.observe.contact_table` per frame.

    Returns:
      (time (T,), total (T,)) NumPy arrays.
    """
    from jaxcontact import validate
    from jaxcontact.viz.html import contact_tables

    margin = validate.number("margin", margin, low=0.0)
    model, frames = _frames(model, traj, scene)
    table = contact_tables(model, frames, margin)
    force = np.where(np.asarray(table.active), np.asarray(table.force, float), 0.0)
    return np.asarray(frames.time, float), force.sum(axis=-1)


def _label(axis, ylabel, title):
    """Axis labels over time, a title, the legend and a light grid."""
    axis.set_xlabel("time (s)")
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(loc="best")
    axis.grid(True, alpha=0.3)


def plot_energy(model, traj, *, ax=None, path=None, scene=0):
    """Kinetic, gravitational potential and total energy over time (`energies`).

    Args:
      model, traj, scene: as for `energies`.
      ax: a matplotlib Axes to draw in (default: a new figure).
      path: also save the figure there (PNG).

    Returns:
      The matplotlib Figure; its lines are labelled "kinetic", "potential", "total".
    """
    values = energies(model, traj, scene=scene)
    fig, (axis,) = _figure(ax)
    for name, style in (("kinetic", "-"), ("potential", "-"), ("total", "--")):
        axis.plot(values["time"], values[name], style, label=name)
    _label(axis, "energy (J)", "Energy")
    return _save(fig, path)


def plot_contact_forces(model, traj, *, ax=None, path=None, scene=0, margin=0.0):
    """The total normal contact force over time (`contact_force_totals`), with the total
    weight Σ m |g| of bodies and particles for reference (what it equals at rest).

    Returns:
      The matplotlib Figure; lines "total normal force" and "weight".
    """
    time, total = contact_force_totals(model, traj, scene=scene, margin=margin)
    fig, (axis,) = _figure(ax)
    scene_model, _ = _frames(model, traj, scene)
    weight = (float(np.sum(np.asarray(scene_model.body.mass, float)))
              + float(np.sum(np.asarray(scene_model.particle_masses, float)))) * float(
        np.linalg.norm(np.asarray(scene_model.gravity, float)))
    axis.plot(time, total, label="total normal force")
    axis.plot(time, np.full_like(time, weight), ":", color="0.4", label="weight")
    _label(axis, "force (N)", "Contact normal force")
    return _save(fig, path)


def plot_info(infos, *, axes=None, path=None, scene=0):
    """What the solver did over a rollout (`jc.rollout(..., return_info=True)`): the residual
    against its tolerance (log scale) and the iterations of each step, with the steps that did
    not converge marked (red crosses, on both panels).

    Args:
      infos: a `jc.StepInfo` with a time axis (T,), or (T, B) for a batch (`scene`).
      axes: two matplotlib Axes to draw in (residual, iterations); default a new figure.
      path: also save the figure there (PNG).
      scene: which rollout of a batch.

    Returns:
      The matplotlib Figure; lines "residual", "tolerance", "iterations" and "not converged"
      (one per panel).
    """
    from jaxcontact.types import StepInfo

    if not isinstance(infos, StepInfo):
        raise ValueError(f"infos must be a jc.StepInfo, got {type(infos).__name__}")
    residual = np.asarray(infos.residual, float)
    if residual.ndim == 2:
        if isinstance(scene, bool) or not isinstance(scene, (int, np.integer)) or not (
                0 <= scene < residual.shape[1]):
            raise ValueError(f"scene must be an index in [0, {residual.shape[1]}), got "
                             f"{scene!r}")
        infos = jax.tree.map(lambda x: np.asarray(x)[:, scene], infos)
    elif residual.ndim == 0:
        infos = jax.tree.map(lambda x: np.asarray(x)[None], infos)
    elif residual.ndim != 1:
        raise ValueError(f"infos must have a time axis (T,) or (T, B), got residual of shape "
                         f"{residual.shape}")
    step = np.arange(np.shape(infos.residual)[0])
    residual = np.asarray(infos.residual, float)
    tolerance = np.asarray(infos.tolerance, float)
    iterations = np.asarray(infos.iterations, float)
    failed = ~np.asarray(infos.converged, bool)
    fig, (top, bottom) = _figure(axes, rows=2)
    top.semilogy(step, residual, label="residual")
    top.semilogy(step, tolerance, "--", color="0.4", label="tolerance")
    top.plot(step[failed], residual[failed], "x", color="red", label="not converged")
    top.set_ylabel("residual (m/s)")
    top.set_title(f"Solver: {int(failed.sum())} of {len(step)} steps not converged")
    top.legend(loc="best")
    bottom.plot(step, iterations, drawstyle="steps-mid", label="iterations")
    bottom.plot(step[failed], iterations[failed], "x", color="red", label="not converged")
    bottom.set_xlabel("step")
    bottom.set_ylabel("iterations")
    for axis in (top, bottom):
        axis.grid(True, alpha=0.3)
    return _save(fig, path)
