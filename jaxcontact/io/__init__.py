"""Loading scenes from other formats.

    scene = jc.io.from_mjcf("hopper.xml")          # a MuJoCo MJCF file (or its XML text)
    scene = jc.io.from_urdf("ur5e.urdf")           # a URDF file (its root fixed to the world)
    model, state = scene.build()

`from_mjcf` and `from_urdf` compile the file with the `mujoco` package (`pip install
jaxcontact[mjcf]`), so defaults, frames and inertias are MuJoCo's own; `load_mjcf` and
`load_urdf` also return what was mapped to what and what could not be imported.
"""

from jaxcontact.io.mjcf import MjcfImport, MjcfWarning, from_mjcf, load_mjcf
from jaxcontact.io.urdf import from_urdf, load_urdf

__all__ = ["MjcfImport", "MjcfWarning", "from_mjcf", "from_urdf", "load_mjcf", "load_urdf"]
