"""URDF (the ROS robot description format) to `jc.Scene`, through MuJoCo's URDF compiler.

The file is read by the `mujoco` package's own URDF reader (`mujoco.MjSpec.from_file`), its
mesh references are resolved here (below), and the compiled `mjModel` goes to `load_mjcf`,
which maps it exactly as it maps an MJCF model. What maps to what, with MuJoCo's URDF
defaults (fusestatic, discardvisual, autolimits):

- `<link>` -> a MuJoCo body with the link's `<inertial>` (mass, centre, inertia tensor).
  A link without `<inertial>` takes its mass and inertia from its collision geoms at
  1000 kg/m³ (MuJoCo's inertiafromgeom="auto"), or is massless if it has none. Links joined
  by `fixed` joints are one body (MuJoCo's fusestatic; `load_mjcf` would weld them anyway):
  masses add and inertias combine, so a massless link must be fixed to a massive one.
- The root link is fixed to the world (URDF has no floating base: MuJoCo welds the root
  to the world, and its geoms become static world geoms). `floating_base=True` gives the
  root a free joint (`mujoco.MjsBody.add_freejoint`), so the robot is a free body tree; a
  URDF `world` link is MuJoCo's world, and each link fixed to it is then a root.
- `revolute` -> hinge with its `<limit lower upper>` as a limit; `continuous` -> hinge
  without one; `prismatic` -> slide with its limit; `fixed` -> fused; `floating` -> a free
  joint (MuJoCo accepts it on the root only). The hinge or slide then maps as in MJCF: a
  soft joint (`Scene.add_joint`), its limit holding as MuJoCo's default soft limit does.
- `<dynamics damping friction>` -> the joint's damping (`add_joint(damping=)`) and its
  friction loss (`add_joint_properties(friction_loss=)`).
- `<limit effort velocity>` are not imported and not named: URDF has no actuators
  (`<transmission>` describes hardware), so the scene has no motors; drive the joints with
  `jc.Control` or add motors to the scene.
- `<collision>` geometry -> MuJoCo geoms (`box`, `sphere`, `cylinder`, `mesh`: STL or OBJ,
  which MuJoCo reads, not COLLADA), imported as `load_mjcf` imports them (a mesh as its
  convex hull, as MuJoCo collides it; a fixed root's geoms are static geoms of the world).
  `<visual>` is discarded. Every collision geom may touch every other but its parent's and
  child's (MuJoCo's contype = conaffinity = 1 and filterparent).
- A `<mimic>` joint, which MuJoCo compiles to a joint equality (x = multiplier x_other +
  offset), is held to it by a stiff coupling tendon (`io.mjcf_actuation`). What `load_mjcf`
  cannot import is named in its `MjcfWarning`, as for MJCF.
- Gravity (0, 0, -9.81) m/s² and the time step (2 ms, or `dt=`) are MuJoCo's defaults.

Mesh files. MuJoCo opens a mesh's `filename` relative to the URDF file and does not know
ROS's `package://NAME/PATH`. Each collision mesh is looked up here, the first file that
exists winning: with `mesh_dir`, in `mesh_dir` (as PATH, as NAME/PATH and as the file name
alone, MuJoCo's strippath convention); then `package://NAME/PATH` in the nearest folder
named NAME above the URDF file (the ROS layout, NAME/urdf/robot.urdf, and a Python package
that ships its robot), a relative path relative to the URDF file, a `file://` URI or an
absolute path as it is. A URDF's own `<mujoco><compiler meshdir=.../></mujoco>` is the
default `mesh_dir` (relative to the file). A mesh found nowhere is a ValueError naming it.
"""

from __future__ import annotations

import inspect
import os
import xml.etree.ElementTree as ElementTree

from jaxcontact import validate as check
from jaxcontact.io.mjcf import load_mjcf
from jaxcontact.scene import Scene

# load_mjcf's keyword options, which load_urdf passes through (its first parameter is the
# model itself)
_OPTIONS = tuple(inspect.signature(load_mjcf).parameters)[1:]


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError("URDF import compiles the file with MuJoCo: pip install "
                          "'jaxcontact[mjcf]' (the `mujoco` package)") from None
    return mujoco


def _check_path(path) -> str:
    """`path` as a string, once it is an existing file whose root element is <robot>."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a URDF file path, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"path must be a URDF file, got {path!r} (no such file)")
    try:
        _, root = next(ElementTree.iterparse(path, events=("start",)))
    except (ElementTree.ParseError, StopIteration) as error:
        raise ValueError(f"path {path!r} is not a readable XML file: {error}") from None
    if root.tag != "robot":
        hint = " (an MJCF file: use jc.io.from_mjcf)" if root.tag == "mujoco" else ""
        raise ValueError(f"path must be a URDF file (root element <robot>), got {path!r} "
                         f"with <{root.tag}>{hint}")
    return path


def _mesh_candidates(name, urdf_dir, mesh_dir):
    """The files that a URDF mesh `filename` may mean, in the order they are tried."""
    candidates = []
    if name.startswith("package://"):
        package, _, rest = name[len("package://"):].partition("/")
        if mesh_dir is not None:
            candidates += [os.path.join(mesh_dir, rest), os.path.join(mesh_dir, package, rest)]
        folder = urdf_dir
        while True:                    # the nearest folder named `package` above the file
            if os.path.basename(folder) == package:
                candidates.append(os.path.join(folder, rest))
                break
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    else:
        path = name[len("file://"):] if name.startswith("file://") else name
        if mesh_dir is not None and not os.path.isabs(path):
            candidates.append(os.path.join(mesh_dir, path))
        candidates.append(os.path.join(urdf_dir, path))    # an absolute path stays itself
    if mesh_dir is not None:
        candidates.append(os.path.join(mesh_dir, os.path.basename(name)))
    return candidates


def _resolve_meshes(spec, path, mesh_dir):
    """Point every mesh of `spec` at its file, by absolute path (module docstring)."""
    urdf_dir = os.path.dirname(os.path.abspath(path))
    if mesh_dir is None and spec.meshdir:      # the URDF's own <compiler meshdir>
        mesh_dir = os.path.join(urdf_dir, spec.meshdir)
    for mesh in spec.meshes:
        if not mesh.file:
            continue
        candidates = _mesh_candidates(mesh.file, urdf_dir, mesh_dir)
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None:
            raise ValueError(f"path {path!r}: mesh file {mesh.file!r} not found (looked for "
                             f"{candidates}); give mesh_dir=, the folder that holds it")
        mesh.file = os.path.abspath(found)
    spec.meshdir = ""           # the files are absolute now: nothing to prefix or strip
    spec.strippath = False


def _free_roots(spec, path):
    """A free joint on each body attached directly to the world (the root link)."""
    roots = list(spec.worldbody.bodies)
    for body in roots:
        if list(body.joints):
            raise ValueError(f"floating_base=True, but the root link {body.name!r} of {path!r} "
                             "already has a joint to the world")
    for body in roots:
        body.add_freejoint()


def load_urdf(path, *, floating_base=False, mesh_dir=None, **options):
    """Build a `jc.Scene` from a URDF file, and report what was mapped (`MjcfImport`).

    MuJoCo's compiler reads the file and `load_mjcf` imports the compiled model; the module
    docstring says what maps to what and how mesh files are found.

    Args:
      path: the URDF file.
      floating_base: False (default, as MuJoCo and URDF have it): the root link is fixed
        to the world. True: the root link is a free body (MuJoCo's free joint, whose 7
        coordinates come first in `qpos` and 6 in `qvel`).
      mesh_dir: a folder to look for mesh files in first (default: the URDF's own
        `<mujoco><compiler meshdir>`, else none).
      **options: `load_mjcf`'s options (dt, qpos, qvel, stiffness, damping,
        joint_stiffness, chain_mass, unsupported), passed on as they are.

    Returns:
      (scene, MjcfImport): `MjcfImport.mj_model` is the compiled model, `body` maps the
      MuJoCo body names (the URDF link names; a link fused into another is named by that
      one) and `joint` the URDF joint names to ours.

    Raises:
      ImportError: the `mujoco` package is missing.
      ValueError: a bad argument; a missing file, not a URDF file, a mesh file not found,
        or a file MuJoCo cannot compile (naming `path`); with unsupported="raise" anything
        not imported.
    """
    mujoco = _mujoco()
    path = _check_path(path)
    floating_base = check.boolean("floating_base", floating_base)
    if mesh_dir is not None:
        if not isinstance(mesh_dir, (str, os.PathLike)) or not os.path.isdir(mesh_dir):
            raise ValueError(f"mesh_dir must be a folder, got {mesh_dir!r}")
        mesh_dir = os.path.abspath(os.fspath(mesh_dir))
    for name in options:
        if name not in _OPTIONS:
            raise ValueError(f"options: unknown option {name!r} (load_urdf takes "
                             f"floating_base, mesh_dir and {', '.join(_OPTIONS)})")
    try:
        spec = mujoco.MjSpec.from_file(path)
    except ValueError as error:        # MuJoCo's reader errors
        raise ValueError(f"path {path!r}: MuJoCo could not read the URDF: {error}") from None
    _resolve_meshes(spec, path, mesh_dir)
    if floating_base:
        _free_roots(spec, path)
    try:
        model = spec.compile()
    except ValueError as error:        # MuJoCo's compiler errors
        raise ValueError(f"path {path!r}: MuJoCo could not compile the URDF: {error}") \
            from None
    return load_mjcf(model, **options)


def from_urdf(path, **options) -> Scene:
    """A `jc.Scene` of a URDF file: `load_urdf`'s scene (same options).

    Example:
      scene = jc.io.from_urdf("ur5e.urdf")                       # the base fixed
      scene = jc.io.from_urdf("robot.urdf", floating_base=True)  # a free root
      model, state = scene.build()
    """
    return load_urdf(path, **options)[0]
