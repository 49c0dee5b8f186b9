"""The `jaxcontact` command (also `python -m jaxcontact`).

    jaxcontact run SCENE.py|MODEL.xml [--steps 500] [--out traj.npz] [--dt S] [--float32|--float64]
                   [--cache DIR|--no-cache]
    jaxcontact view traj.npz [-o traj.html]
    jaxcontact bench [--batch 1 64] [--steps 100] [--out bench.json]
    jaxcontact demo [--batch 1024] [--steps 150] [--out results/demo.json] [--seed 0]
                    [--cache DIR|--no-cache]

`run` simulates a scene file (Python) or an MJCF model and writes its trajectory and the
solver's per-step report to an `.npz` file; `view` turns such a file into an HTML animation
(`jaxcontact.viz`); `bench` measures the throughput of a small standard scene; `demo` runs
`jaxcontact.demo.run_demo` (a randomized batch and a gradient-based fit of a bouncing throw).

`run` and `demo` keep their compiled programs in JAX's persistent compilation cache
(`cache_dir`: `--cache DIR`, $JAXCONTACT_CACHE or ~/.cache/jaxcontact/xla; `--no-cache`).

Errors in what the user gave (a missing file, a wrong extension, a scene file without `scene`
or `build`, bad numbers) print one line `jaxcontact: error: ...` on stderr and exit with
status 2, like argparse's own errors.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import textwrap
import time

PROG = "jaxcontact"

# the trajectory arrays `run` writes (a `State` with a time axis) and the StepInfo arrays
STATE_FIELDS = ("time", "pos", "quat", "vel", "ang_vel", "particle_pos", "particle_vel")
INFO_FIELDS = ("residual", "iterations", "converged", "result", "active_contacts",
               "max_penetration", "overflow", "tolerance")

SCENE_CONTRACT = """\
scene files:
  A .py file is executed (as a module named `jaxcontact_scene`, so code under
  `if __name__ == "__main__":` does not run) and must define one of:
    build()  a function returning a jc.Scene or a (model, state) pair
    scene    a jc.Scene
  build() wins when both are defined. A Scene is built with the chosen dtype (float64
  unless --float32); a (model, state) pair keeps its own dtype unless --float32 or
  --float64 is given. The smallest scene file:

    import jaxcontact as jc
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(radius=0.1, mass=1.0, pos=(0, 0, 1.0))

  A .xml file is an MJCF model, read by jaxcontact.io.from_mjcf (needs mujoco).

output (.npz, one array per name):
  time (T,), pos (T, N, 3), quat (T, N, 4), vel, ang_vel (T, N, 3),
  particle_pos, particle_vel (T, P, 3): the state after each of the T steps, as
  jc.rollout returns it; residual, iterations, converged, result, active_contacts,
  max_penetration, overflow, tolerance (T,): each step's jc.StepInfo; source (the
  absolute path of the scene file, which `jaxcontact view` rebuilds), source_kind,
  dtype, dt, steps, solver, compile_s, run_s.
"""

# the subcommands, in the order of `jaxcontact --help`: name -> (its line there, its --help's
# description (wrapped) and epilog (examples, kept as written), whether it takes --cache: run
# and demo keep their compiled programs between invocations; bench, which measures compile
# time, does not)
SUBCOMMANDS = {
    "run": ("simulate a scene file or an MJCF model, save the trajectory",
            "Simulate a scene for a number of steps (jc.rollout) and write the trajectory and "
            "each step's solver report to an .npz file; print a summary (steps, wall time, "
            "converged fraction, final positions).",
            SCENE_CONTRACT + "\nexamples:\n"
            "  jaxcontact run scene.py --steps 500 --out traj.npz\n"
            "  jaxcontact run robot.xml --steps 1000 --dt 0.001 --float32\n", True),
    "view": ("write an HTML animation of a trajectory from `run`",
             "Rebuild the model of a trajectory written by `jaxcontact run` (from the scene file "
             "or MJCF model it names, with the same dt and dtype) and write a self-contained "
             "HTML animation of it (jaxcontact.viz.save_html).",
             "example:\n  jaxcontact run scene.py --out traj.npz\n"
             "  jaxcontact view traj.npz -o traj.html\n", False),
    "bench": ("measure simulation throughput on this machine",
              "Measure the forward throughput of a small standard scene: one box (half size "
              "0.05 m, 1 kg) dropped from 0.3 m onto a plane with random linear and angular "
              "velocities ~ N(0, 1), dt = 0.002 s, float32, default Newton solver (the "
              "`box_drop` scene of benchmarks/throughput.py), batched with jax.vmap. For each "
              "batch size it prints the compile time and the scene-steps per second of the "
              "compiled rollout (the best of --repeats calls after a first one).",
              "example:\n  jaxcontact bench --batch 1 64 256 --steps 200 --out bench.json\n",
              False),
    "demo": ("randomized batch throughput + gradient-based throw fitting",
             "Simulate a randomized batch of thrown boxes and spheres (float32), then fit a "
             "bouncing throw with gradients through the simulator (float64). Prints a report "
             "and writes all numbers to a JSON file.",
             "example:\n  jaxcontact demo --batch 256 --out results/demo.json\n", True),
}


def _wrap(text):
    """A description paragraph wrapped for the terminal (the formatter keeps text as given,
    for the epilogs' examples)."""
    return textwrap.fill(text, 79)


class UserError(Exception):
    """A problem with what the user gave: reported as one line, exit status 2."""


# --------------------------------------------------------------------------------------------
# argument types


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0.0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


# --------------------------------------------------------------------------------------------
# the parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `jaxcontact` command.

    Returns:
      An `argparse.ArgumentParser` with the subcommands run, view, bench and demo.
    """
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=raw,
        description=_wrap("Differentiable rigid-body simulation with smoothed frictional "
                          "contact."),
        epilog="examples:\n"
               "  jaxcontact run scene.py --steps 500 --out traj.npz\n"
               "  jaxcontact view traj.npz -o traj.html\n"
               "  jaxcontact bench --batch 1 64 256\n"
               "  jaxcontact demo --batch 256\n\n"
               "`jaxcontact COMMAND --help` explains each command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # --cache and --no-cache, for the commands that SUBCOMMANDS marks
    cached = argparse.ArgumentParser(add_help=False)
    where = cached.add_mutually_exclusive_group()
    where.add_argument("--cache", metavar="DIR", default=None,
                       help="keep compiled programs in DIR, so that a later run skips XLA's "
                            "compile (default $JAXCONTACT_CACHE, else "
                            "~/.cache/jaxcontact/xla; JAX_COMPILATION_CACHE_DIR, if set, "
                            "wins)")
    where.add_argument("--no-cache", dest="cache", action="store_const", const="",
                       help="compile every program anew")
    run, view, bench, demo = (
        sub.add_parser(name, formatter_class=raw, parents=[cached] if cached_programs else [],
                       help=summary, description=_wrap(description), epilog=epilog)
        for name, (summary, description, epilog, cached_programs) in SUBCOMMANDS.items())

    run.add_argument("source", metavar="SCENE.py|MODEL.xml",
                     help="a Python scene file or an MJCF model")
    run.add_argument("--steps", type=_positive_int, default=500,
                     help="number of time steps (default 500)")
    run.add_argument("--out", default=None,
                     help="output .npz path (default: the source's name with .npz, in the "
                          "current directory)")
    run.add_argument("--dt", type=_positive_float, default=None,
                     help="time step in s, replacing the scene's own")
    precision = run.add_mutually_exclusive_group()
    precision.add_argument("--float32", dest="dtype", action="store_const", const="float32",
                           help="simulate in float32")
    precision.add_argument("--float64", dest="dtype", action="store_const", const="float64",
                           help="simulate in float64 (the default for a Scene)")

    view.add_argument("trajectory", metavar="TRAJ.npz", help="a file written by `jaxcontact run`")
    view.add_argument("-o", "--out", default=None,
                      help="output .html path (default: next to the trajectory, .html)")

    bench.add_argument("--batch", type=_positive_int, nargs="+", default=[1, 64],
                       help="batch sizes (default 1 64)")
    bench.add_argument("--steps", type=_positive_int, default=100,
                       help="time steps per scene (default 100)")
    bench.add_argument("--repeats", type=_positive_int, default=3,
                       help="timed calls per batch size; the best counts (default 3)")
    bench.add_argument("--seed", type=int, default=0, help="seed of the velocities (default 0)")
    bench.add_argument("--out", default=None, help="also write the numbers to this JSON file")

    demo.add_argument("--batch", type=_positive_int, default=1024,
                      help="number of randomized scenes (default 1024)")
    demo.add_argument("--steps", type=_positive_int, default=150,
                      help="time steps of 0.002 s per scene (default 150)")
    demo.add_argument("--iterations", type=_positive_int, default=30,
                      help="gradient steps of the throw fit (default 30)")
    demo.add_argument("--out", default="results/demo.json",
                      help="JSON output path (default results/demo.json)")
    demo.add_argument("--seed", type=int, default=0, help="randomization seed (default 0)")
    demo.add_argument("--devices", type=_positive_int, default=None,
                      help="CPU devices to spread the batch over (default: one per core)")
    return parser


def _configure_jax(devices):
    """Set JAX options before its backend starts: float64 on, one CPU device per core.

    float64 is needed by the throw fit (the batch builds its arrays in float32 explicitly).
    Several CPU devices let the independent scenes of the batch run on all cores.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", devices or os.cpu_count() or 1)


def cache_dir(option):
    """The folder of JAX's persistent compilation cache for `--cache` / `--no-cache`
    (`option`: None when neither was given, "" for --no-cache), or None for no cache.

    A cache JAX was already given (JAX_COMPILATION_CACHE_DIR, which JAX reads itself, or
    `jax_compilation_cache_dir` set in this process) is kept: then None. Else the option,
    $JAXCONTACT_CACHE, and ~/.cache/jaxcontact/xla. With the cache, a later run of the same
    program skips XLA's compile: box_drop's batched rollout, 25.9 s the first time, took
    9.8 s (its tracing) in the next process (design note 38)."""
    import jax

    if (os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir
            or option == ""):
        return None
    if option is not None:
        return pathlib.Path(option).expanduser()
    if os.environ.get("JAXCONTACT_CACHE"):
        return pathlib.Path(os.environ["JAXCONTACT_CACHE"]).expanduser()
    return pathlib.Path.home() / ".cache" / "jaxcontact" / "xla"


def _use_cache(option):
    """Turn on JAX's persistent compilation cache where `cache_dir` says."""
    folder = cache_dir(option)
    if folder is not None:
        import jax

        jax.config.update("jax_compilation_cache_dir", str(folder))


# --------------------------------------------------------------------------------------------
# loading scenes


def _exec_scene_file(path: pathlib.Path) -> dict:
    """Run a scene file and return its namespace; its own errors become a `UserError`."""
    import runpy
    import traceback

    sys.path.insert(0, str(path.parent))  # as `python scene.py`: its folder's modules import
    try:
        return runpy.run_path(str(path), run_name="jaxcontact_scene")
    except SyntaxError as e:
        raise UserError(f"{path.name}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # the user's code: name where it failed, in one line
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if pathlib.Path(f.filename).resolve() == path]
        where = f"{path.name}:{frames[-1].lineno}" if frames else path.name
        raise UserError(f"{where}: {type(e).__name__}: {e}") from None
    finally:
        sys.path.remove(str(path.parent))


def _from_python(path: pathlib.Path):
    """What a scene file defines: a `Scene`, or a (model, state) pair."""
    from jaxcontact.scene import Scene
    from jaxcontact.types import Model, State

    namespace = _exec_scene_file(path)
    if callable(namespace.get("build")):
        try:
            made = namespace["build"]()
        except Exception as e:
            raise UserError(f"{path.name}: build() raised {type(e).__name__}: {e}") from None
        what = "build()"
    elif "scene" in namespace:
        made, what = namespace["scene"], "scene"
    else:
        raise UserError(f"{path.name} defines neither `scene` (a jc.Scene) nor a function "
                        "`build()` returning a jc.Scene or (model, state); see "
                        "`jaxcontact run --help`")
    if isinstance(made, Scene):
        return made
    if (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], Model)
            and isinstance(made[1], State)):
        return made
    raise UserError(f"{path.name}: {what} must be a jc.Scene or a (model, state) pair, "
                    f"got {type(made).__name__}")


def _from_mjcf(path: pathlib.Path):
    """The `Scene` of an MJCF model (`jaxcontact.io.from_mjcf`, imported here: optional)."""
    import importlib

    try:
        io = importlib.import_module("jaxcontact.io")
    except ModuleNotFoundError as e:
        if e.name in ("jaxcontact.io", "jaxcontact"):
            raise UserError("reading MJCF models needs jaxcontact.io, which this installation "
                            "of jaxcontact does not have") from None
        raise UserError(f"reading MJCF models needs the package {e.name!r}, which is not "
                        f"installed (pip install {e.name})") from None
    except ImportError as e:
        raise UserError(f"reading MJCF models: {e}") from None
    try:
        return io.from_mjcf(str(path))
    except ModuleNotFoundError as e:
        raise UserError(f"reading MJCF models needs the package {e.name!r}, which is not "
                        f"installed (pip install {e.name})") from None
    except (ValueError, OSError, ImportError) as e:
        raise UserError(f"{path.name}: {e}") from None


def _cast(tree, dtype):
    """`tree` with every floating array leaf cast to `dtype` (static fields untouched)."""
    import jax
    import jax.numpy as jnp

    def cast(x):
        return x.astype(dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x
    return jax.tree.map(cast, tree)


def load_source(source, dtype=None, dt=None):
    """Build the model and the initial state of a scene file or an MJCF model.

    Args:
      source: path of a `.py` scene file (see `jaxcontact run --help`) or an `.xml` MJCF
        model.
      dtype: "float32", "float64" or None: a Scene is built in this dtype (None: float64);
        a (model, state) pair from `build()` is cast to it (None: kept as built).
      dt: a time step (s) replacing the scene's own, or None.

    Returns:
      (model, state, kind): a `jc.Model`, a `jc.State` and "py" or "mjcf".

    Raises:
      UserError: a missing file, another extension, a scene file that fails or defines
        neither `scene` nor `build`, a model jaxcontact.io cannot read.
    """
    import jax
    import jax.numpy as jnp

    from jaxcontact.scene import Scene

    path = pathlib.Path(source).expanduser().resolve()
    suffix = path.suffix.lower()
    if suffix not in (".py", ".xml"):
        raise UserError(f"expected a .py scene file or an .xml MJCF model, got {str(source)!r}")
    if not path.is_file():
        raise UserError(f"no such file: {str(source)!r}")
    kind = "py" if suffix == ".py" else "mjcf"
    made = _from_python(path) if kind == "py" else _from_mjcf(path)
    if isinstance(made, Scene):
        if dtype != "float32":
            jax.config.update("jax_enable_x64", True)
        try:
            model, state = made.build(dtype=dtype or "float64")
        except ValueError as e:
            raise UserError(f"{path.name}: building the scene: {e}") from None
    else:
        model, state = made
        if dtype is not None:
            model, state = _cast(model, dtype), _cast(state, dtype)
    if dt is not None:
        model = model.replace(dt=jnp.asarray(dt, model.dt.dtype))
    return model, state, kind


# --------------------------------------------------------------------------------------------
# run


_ROLLOUT = []


def rollout_fn():
    """`jc.rollout` jitted with `steps` and `return_info` static (one per process, so that
    every `run` of a scene of the same structure reuses the compiled program)."""
    if not _ROLLOUT:
        from jaxcontact.compiling import jit
        from jaxcontact.step import rollout

        _ROLLOUT.append(jit(rollout, static_argnames=("steps", "return_info")))
    return _ROLLOUT[0]


def _default_out(source, suffix):
    return pathlib.Path(pathlib.Path(source).name).with_suffix(suffix)


def _count(n, one, many=None):
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _summary_positions(pos):
    """Lines describing the final body positions (N, 3)."""
    import numpy as np

    if pos.shape[0] == 0:
        return []
    if pos.shape[0] <= 8:
        return [f"  body {i}: ({p[0]:+.4f}, {p[1]:+.4f}, {p[2]:+.4f}) m"
                for i, p in enumerate(pos)]
    low, high = np.min(pos, axis=0), np.max(pos, axis=0)
    return [f"  {pos.shape[0]} bodies: x in [{low[0]:+.4f}, {high[0]:+.4f}], "
            f"y in [{low[1]:+.4f}, {high[1]:+.4f}], z in [{low[2]:+.4f}, {high[2]:+.4f}] m"]


def _write_npz(out, arrays):
    import numpy as np

    out = pathlib.Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as f:  # np.savez(path) would append .npz to other names
            np.savez(f, **arrays)
    except OSError as e:
        raise UserError(f"cannot write {str(out)!r}: {e.strerror or e}") from None
    return out


def cmd_run(args) -> int:
    """`jaxcontact run`: simulate, write the .npz, print a summary."""
    import jax
    import numpy as np

    from jaxcontact.types import Result

    jax.config.update("jax_enable_x64", True)
    _use_cache(args.cache)
    model, state, kind = load_source(args.source, dtype=args.dtype, dt=args.dt)
    out = pathlib.Path(args.out) if args.out else _default_out(args.source, ".npz")
    if out.suffix.lower() != ".npz":
        raise UserError(f"--out must name an .npz file, got {str(out)!r}")

    t0 = time.perf_counter()
    compiled = rollout_fn().lower(model, state, steps=args.steps, return_info=True).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    final, traj, infos = jax.block_until_ready(compiled(model, state))
    run_s = time.perf_counter() - t0

    arrays = {name: np.asarray(getattr(traj, name)) for name in STATE_FIELDS}
    arrays.update({name: np.asarray(getattr(infos, name)) for name in INFO_FIELDS})
    dtype = str(np.asarray(state.pos).dtype)
    dt = float(model.dt)
    arrays.update(source=np.array(str(pathlib.Path(args.source).expanduser().resolve())),
                  source_kind=np.array(kind), dtype=np.array(dtype), dt=np.array(dt),
                  steps=np.array(args.steps), solver=np.array(type(model.solver).__name__),
                  compile_s=np.array(compile_s), run_s=np.array(run_s))
    out = _write_npz(out, arrays)

    converged = arrays["converged"]
    result = arrays["result"]
    iterations = arrays["iterations"]
    lines = [
        f"ran {pathlib.Path(args.source).name}: {_count(model.n_body, 'body', 'bodies')}, "
        f"{_count(model.n_particle, 'particle')}, {args.steps} steps of {dt:g} s ({dtype}, "
        f"{type(model.solver).__name__})",
        f"  compile {compile_s:.2f} s, run {run_s:.3f} s ({args.steps / run_s:,.0f} steps/s)",
        f"  converged {int(converged.sum())}/{converged.size} steps "
        f"({100.0 * converged.mean():.1f} %), max residual {np.max(arrays['residual']):.2e}, "
        f"iterations mean {iterations.mean():.1f} max {iterations.max()}",
    ]
    diverged = result == int(Result.NONFINITE)
    if diverged.any():
        lines.append(f"  warning: {int(diverged.sum())} steps diverged (non-finite residual), "
                     f"the first at step {int(np.argmax(diverged)) + 1}")
    lines.append(f"  final state at t = {float(arrays['time'][-1]):.4g} s:")
    lines += _summary_positions(np.asarray(final.pos))
    if model.n_particle:
        p = np.asarray(final.particle_pos)
        lines.append(f"  {model.n_particle} particles: z in [{p[:, 2].min():+.4f}, "
                     f"{p[:, 2].max():+.4f}] m")
    lines.append(f"wrote {out}")
    print("\n".join(lines))
    return 0


# --------------------------------------------------------------------------------------------
# view


def load_trajectory(path):
    """Read a file written by `jaxcontact run`.

    Args:
      path: the .npz path.

    Returns:
      (traj, meta): a `jc.State` with a leading time axis (as `jc.rollout` returns it) and a
      dict of the other entries (source, source_kind, dtype, dt, steps and the StepInfo
      arrays), NumPy values.

    Raises:
      UserError: a missing or unreadable file, or one `run` did not write.
    """
    import jax.numpy as jnp
    import numpy as np

    from jaxcontact.types import State

    path = pathlib.Path(path)
    if path.suffix.lower() != ".npz":
        raise UserError(f"expected an .npz file written by `jaxcontact run`, got {str(path)!r}")
    if not path.is_file():
        raise UserError(f"no such file: {str(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            content = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {str(path)!r}: {e}") from None
    missing = [k for k in STATE_FIELDS + ("source", "dtype", "dt") if k not in content]
    if missing:
        raise UserError(f"{path.name} was not written by `jaxcontact run` (it has no "
                        f"{', '.join(missing)})")
    traj = State(**{k: jnp.asarray(content.pop(k)) for k in STATE_FIELDS})
    meta = {k: (v.item() if v.ndim == 0 else v) for k, v in content.items()}
    return traj, meta


def cmd_view(args) -> int:
    """`jaxcontact view`: rebuild the model of a trajectory and write its HTML animation."""
    import importlib
    import importlib.util

    import jax

    jax.config.update("jax_enable_x64", True)
    traj, meta = load_trajectory(args.trajectory)
    out = pathlib.Path(args.out or pathlib.Path(args.trajectory).with_suffix(".html"))
    if out.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"-o must name an .html file, got {str(out)!r}")
    if out.is_dir():
        raise UserError(f"-o must name a file, got the folder {str(out)!r}")
    source = meta["source"]
    if not pathlib.Path(source).is_file():
        raise UserError(f"the source of {pathlib.Path(args.trajectory).name}, {source!r}, no "
                        "longer exists: run it again")
    if importlib.util.find_spec("jaxcontact.viz") is None:
        raise UserError("viewing needs jaxcontact.viz, which this installation of jaxcontact "
                        "does not have")
    try:
        viz = importlib.import_module("jaxcontact.viz")
    except ImportError as e:
        raise UserError(f"jaxcontact.viz cannot be imported: {e}") from None
    if not callable(getattr(viz, "save_html", None)):
        raise UserError("viewing needs jaxcontact.viz.save_html, which this installation of "
                        "jaxcontact does not have")
    model, _, _ = load_source(source, dtype=meta["dtype"], dt=meta["dt"])
    if (traj.pos.shape[1:] != (model.n_body, 3)
            or traj.particle_pos.shape[1:] != (model.n_particle, 3)):
        raise UserError(f"{source} now builds {_count(model.n_body, 'body', 'bodies')} and "
                        f"{_count(model.n_particle, 'particle')}, the trajectory has "
                        f"{traj.pos.shape[1]} and {traj.particle_pos.shape[1]}: run it again")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        viz.save_html(model, traj, str(out))
    except OSError as e:
        raise UserError(f"cannot write {str(out)!r}: {e.strerror or e}") from None
    print(f"wrote {out} ({traj.pos.shape[0]} frames of {_count(model.n_body, 'body', 'bodies')}"
          f", {_count(model.n_particle, 'particle')})")
    return 0


# --------------------------------------------------------------------------------------------
# bench


def bench_scene(batch, seed=0):
    """The `bench` scene: one box dropped on a plane (float32), B random initial velocities.

    Args:
      batch: number of scenes B.
      seed: PRNG seed of the velocities.

    Returns:
      (model, states): the shared `Model` and a `State` with a leading batch axis (B, ...).
    """
    import jax
    import jax.numpy as jnp

    from jaxcontact.scene import Scene

    scene = Scene(dt=0.002)
    scene.add_plane(friction=0.5)
    scene.add_box(0.05, 1.0, (0.0, 0.0, 0.3), friction=0.5)
    model, state = scene.build(dtype="float32")
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    v = jax.random.normal(k1, (batch, 1, 3), jnp.float32)
    w = jax.random.normal(k2, (batch, 1, 3), jnp.float32)
    return model, jax.vmap(lambda a, b: state.replace(vel=a, ang_vel=b))(v, w)


def bench(batches, steps, repeats=3, seed=0):
    """Throughput of the `bench` scene for each batch size.

    Args:
      batches: batch sizes.
      steps: time steps per scene.
      repeats: timed calls per batch size after a first one; the fastest counts.
      seed: PRNG seed of the initial velocities.

    Returns:
      A list with one dict per batch size: batch, compile_s (lower + compile),
      first_call_s, run_s (best timed call), steps_per_s (batch * steps / run_s),
      converged_fraction, mean_final_z (m; a resting box: ~0.05).
    """
    import jax
    import numpy as np

    from jaxcontact.compiling import best_time, jit
    from jaxcontact.step import rollout

    rows = []
    for batch in batches:
        model, states = bench_scene(batch, seed)
        fn = jit(jax.vmap(lambda m, s: rollout(m, s, steps=steps, return_info=True),
                              in_axes=(None, 0)))
        t0 = time.perf_counter()
        compiled = fn.lower(model, states).compile()
        compile_s = time.perf_counter() - t0
        first_s, (final, _, infos) = best_time(compiled, model, states, repeats=1)
        run_s, _ = best_time(compiled, model, states, repeats=repeats)
        rows.append({"batch": batch, "compile_s": compile_s, "first_call_s": first_s,
                     "run_s": run_s, "steps_per_s": batch * steps / run_s,
                     "converged_fraction": float(np.mean(np.asarray(infos.converged))),
                     "mean_final_z": float(np.mean(np.asarray(final.pos[..., 2])))})
    return rows


def cmd_bench(args) -> int:
    """`jaxcontact bench`: print a throughput table, optionally write it as JSON."""
    import jax

    from jaxcontact import __version__

    if args.out and pathlib.Path(args.out).suffix.lower() != ".json":
        raise UserError(f"--out must name a .json file, got {args.out!r}")
    device = jax.devices()[0]
    print(f"box dropped on a plane, float32, {args.steps} steps of 0.002 s, jax "
          f"{jax.__version__} on {device.platform} ({device.device_kind}), "
          f"{os.cpu_count()} cores")
    print(f"{'batch':>7} {'compile_s':>10} {'run_s':>9} {'scene-steps/s':>14} "
          f"{'converged':>10}")
    rows = []
    for batch in args.batch:  # one row at a time: large batches take a while
        row = bench([batch], args.steps, args.repeats, args.seed)[0]
        rows.append(row)
        print(f"{batch:>7} {row['compile_s']:>10.2f} {row['run_s']:>9.4f} "
              f"{row['steps_per_s']:>14,.0f} {100 * row['converged_fraction']:>9.1f}%",
              flush=True)
    if args.out:
        doc = {"scene": "box_drop", "dtype": "float32", "dt": 0.002, "steps": args.steps,
               "repeats": args.repeats, "seed": args.seed, "jax": jax.__version__,
               "jaxcontact": __version__, "backend": device.platform,
               "device": device.device_kind, "cpu_count": os.cpu_count(), "rows": rows}
        out = pathlib.Path(args.out)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(doc, indent=1) + "\n")
        except OSError as e:
            raise UserError(f"cannot write {args.out!r}: {e.strerror or e}") from None
        print(f"wrote {out}")
    return 0


# --------------------------------------------------------------------------------------------
# entry point


def cmd_demo(args) -> int:
    """`jaxcontact demo`: the randomized batch and the throw fit (`jaxcontact.demo`)."""
    _configure_jax(args.devices)
    _use_cache(args.cache)
    from jaxcontact.demo import run_demo

    run_demo(batch=args.batch, out=args.out, seed=args.seed, steps=args.steps,
             opt_iterations=args.iterations)
    return 0


COMMANDS = {"run": cmd_run, "view": cmd_view, "bench": cmd_bench, "demo": cmd_demo}


def main(argv=None) -> int:
    """Entry point of the `jaxcontact` console script and of `python -m jaxcontact`.

    Args:
      argv: the arguments (default `sys.argv[1:]`).

    Returns:
      The exit status: 0, or 2 after a one-line error on stderr about what the user gave
      (argparse's own errors exit with status 2 through `SystemExit`).
    """
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
