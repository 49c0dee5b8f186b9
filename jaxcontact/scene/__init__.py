"""The scene builder: `Scene` (builder.py: the add_* methods, thin, making typed records),
its checks (validate.py) and its compilation into `(Model, State)` (compile.py)."""

from jaxcontact.scene.builder import Scene

__all__ = ["Scene"]
