"""The rollout plots (`jc.viz.plots`): the energies of free fall and of a spinning body, the
energy, contact-force and solver-report plots, and the extra they need when matplotlib is
missing. On the viewer's rollout (`tests._helpers.falling_and_resting`: sphere A falls from
1 m, sphere B rests on the ground).
"""

import math

import numpy as np
import pytest

from jaxcontact.viz import plots
from tests._helpers import VIEW, falling_and_resting

DT, STEPS, MASS, G = VIEW.dt, VIEW.steps, VIEW.mass, VIEW.g


@pytest.fixture(scope="module")
def run():
    return falling_and_resting()


def test_energy_of_free_fall_changes_as_implicit_euler_says(run):
    values = plots.energies(run.model, run.traj)
    np.testing.assert_allclose(values["time"], np.asarray(run.traj.time))
    np.testing.assert_allclose(values["total"], values["kinetic"] + values["potential"])
    # A: v+ = v + g dt, x+ = x + dt v+ loses m g² dt² / 2 per step; B rests (constant)
    np.testing.assert_allclose(np.diff(values["total"]), -0.5 * MASS * G * G * DT * DT,
                               atol=1e-7)
    speed = G * np.asarray(run.traj.time)
    np.testing.assert_allclose(values["kinetic"], 0.5 * MASS * speed ** 2, rtol=1e-6)
    height = np.asarray(run.traj.pos)[:, :, 2].sum(axis=1)
    np.testing.assert_allclose(values["potential"], MASS * G * height, rtol=1e-9)


def test_rotational_energy_is_taken_in_the_body_frame(run):
    # a box-like inertia, turned 90 degrees about x, spinning about world y = body -z
    inertia = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    model = run.model.replace(body=run.model.body.replace(inertia=inertia),
                              gravity=np.zeros(3))
    half = math.sqrt(0.5)
    state = run.final.replace(vel=np.zeros((2, 3)), quat=np.array([[half, half, 0, 0],
                                                                   [1.0, 0, 0, 0]]),
                              ang_vel=np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]))
    values = plots.energies(model, state)
    assert values["kinetic"] == pytest.approx([0.5 * 3.0 * 2.0 ** 2])   # I_z = 3


def test_plot_energy_draws_the_energies(run, tmp_path):
    path = tmp_path / "energy.png"
    fig = plots.plot_energy(run.model, run.traj, path=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (axis,) = fig.axes
    lines = {line.get_label(): line for line in axis.get_lines()}
    assert set(lines) == {"kinetic", "potential", "total"}
    values = plots.energies(run.model, run.traj)
    for name, line in lines.items():
        np.testing.assert_allclose(line.get_ydata(), values[name])
        np.testing.assert_allclose(line.get_xdata(), values["time"])


def test_plot_contact_forces_is_the_resting_weight(run):
    time, total = plots.contact_force_totals(run.model, run.traj)
    np.testing.assert_allclose(total, MASS * G, rtol=1e-3)    # B's weight; A is in the air
    fig = plots.plot_contact_forces(run.model, run.traj)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    np.testing.assert_allclose(lines["total normal force"].get_ydata(), total)
    np.testing.assert_allclose(lines["weight"].get_ydata(), 2 * MASS * G)


def test_plot_info_marks_the_unconverged_steps(run):
    fig = plots.plot_info(run.infos)
    top, bottom = fig.axes
    assert top.get_yscale() == "log"
    lines = {line.get_label(): line for line in top.get_lines()}
    np.testing.assert_allclose(lines["residual"].get_ydata(), np.asarray(run.infos.residual))
    assert len(lines["not converged"].get_xdata()) == 0         # the rollout converged
    converged = np.ones(STEPS, bool)
    converged[[3, 17]] = False
    infos = run.infos.replace(converged=converged, residual=np.where(converged, 1e-9, 1e-3))
    fig = plots.plot_info(infos)
    for axis in fig.axes:
        marked = next(l for l in axis.get_lines() if l.get_label() == "not converged")
        np.testing.assert_array_equal(marked.get_xdata(), [3, 17])
    assert "2 of 30 steps not converged" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="infos must be a jc.StepInfo"):
        plots.plot_info(run.traj)


def test_plots_ask_for_matplotlib_when_it_is_missing(run, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install jaxcontact\[viz\]"):
        plots.plot_energy(run.model, run.traj)
