"""Seeing a trajectory: a self-contained 3D viewer in one HTML file, and plots of a rollout.

    final, traj = jc.rollout(model, state, steps=500)
    jc.viz.save_html(model, traj, "run.html")      # open it in a browser, offline
    jc.viz.plots.plot_energy(model, traj, path="energy.png")   # needs matplotlib

`plots` imports matplotlib only when a plot is made (`pip install jaxcontact[viz]`).
"""

from jaxcontact.viz import plots
from jaxcontact.viz.html import save_html

__all__ = ["plots", "save_html"]
