"""Loading scenes from other formats.

    scene = jc.io.from_mjcf("hopper.xml")          # a MuJoCo MJCF file (or its XML text)
    model, state = scene.build()

`from_mjcf` compiles the file with the `mujoco` package (`pip install jaxcontact[mjcf]`), so
defaults, frames and inertias are MuJoCo's own; `load_mjcf` also returns what was mapped to
what and what could not be imported.
"""

from jaxcontact.io.mjcf import MjcfImport, MjcfWarning, from_mjcf, load_mjcf

__all__ = ["MjcfImport", "MjcfWarning", "from_mjcf", "load_mjcf"]
