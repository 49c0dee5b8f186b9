"""Test configuration: float64, strict promotion, fast XLA compilation and a project-local
compilation cache.

Compilation dominates the run time of JAX tests. XLA's CPU backend is told to compile for
speed of compilation (set before JAX starts its backend; flags already in XLA_FLAGS win):
the legacy loop emitters instead of the fusion emitters and LLVM optimization level 0. On the
9-body geometry scene's Jacobian program that compiles 2.6x faster (50 s -> 19 s) and runs
1.6x slower (2.2 -> 3.7 ms); the tests run few steps: the fast suite on 2 cores, cold cache,
went from 31 to 19 minutes.
The library's defaults (what users, benchmarks and the demo get) are untouched. The
persistent cache makes re-runs cheap, and module-scoped fixtures share jitted functions
between tests.

`JAXCONTACT_TEST_XLA=user` runs the tests at the XLA settings users get: the fast-compile
flags are not added (XLA_FLAGS as given; everything else here, float64 included, holds).
test_user_xla_settings.py runs one module that way in a fresh process (the flags must be set
before JAX starts), so that code the fast flags compile differently (fusions, LLVM's
optimizations) is checked at the settings users run. By hand:
`JAXCONTACT_TEST_XLA=user python -m pytest tests/solvers/test_base.py` (with the fast flags
left out of XLA_FLAGS).

The tests mirror the package: tests/solvers/test_newton.py checks jaxcontact/solvers/
newton.py, tests/test_step.py jaxcontact/step.py; `test_<module>_<topic>.py` checks one side
of a module (test_step_float32.py), and a paper figure's claim sits beside the module it
exercises under a descriptive name (solvers/test_mass_ratio_stack.py: Descent and Dual on
the thesis's Fig. 30). Each folder is a package (`__init__.py`), so that basenames may
repeat; shared helpers import as `from tests._helpers import ...`.
"""

import os

FAST_COMPILE = {"--xla_cpu_use_fusion_emitters": "false", "--xla_backend_optimization_level": "0"}
XLA_SETTINGS = os.environ.get("JAXCONTACT_TEST_XLA", "fast")
if XLA_SETTINGS not in ("fast", "user"):
    raise ValueError(f"JAXCONTACT_TEST_XLA must be 'fast' or 'user', got {XLA_SETTINGS!r}")
if XLA_SETTINGS == "fast":
    _flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join(
        [_flags] + [f"{k}={v}" for k, v in FAST_COMPILE.items() if k not in _flags]).strip()

import gc
import pathlib

import jax

from jaxcontact.compiling import TRACING_GC_THRESHOLD

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
_CACHE = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAXCONTACT_CACHE", str(_CACHE)))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)

# Tracing a step allocates millions of short-lived Python objects (jaxpr variables, tracers,
# equations); CPython's cyclic collector, at its default thresholds (700, 10, 10), spent a
# quarter of the tracing time of a 20-step rollout of a sphere and a box (4.4 s -> 3.4 s with
# it off). The suite collects rarely instead, and the objects alive after collection (modules,
# fixtures' scenes) are frozen out of every later collection (`pytest_collection_finish`).
# (`jc.jit` raises the first threshold to the same value while it traces: compiling.py.)
gc.set_threshold(TRACING_GC_THRESHOLD, 50, 50)


def pytest_collection_finish(session):
    gc.freeze()


# --- optional compile profile ----------------------------------------------------------------
# JAXCONTACT_TEST_PROFILE=dir writes, per pytest worker, a JSON of the seconds each test (setup,
# call and teardown together) spent tracing, lowering and compiling JAX programs, and the count
# of backend compilations (those under 0.5 s counted apart: mostly eager operations): the
# costs that dominate a cold run, which --durations cannot split.

_PROFILE_DIR = os.environ.get("JAXCONTACT_TEST_PROFILE")
if _PROFILE_DIR:
    import json

    import pytest
    from jax._src import monitoring

    _EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
               "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
               "/jax/core/compile/backend_compile_duration": "compile"}
    _profile: dict = {}
    _current = ["<collection>"]

    def _record(event, seconds, **_):
        kind = _EVENTS.get(event)
        if kind is not None:
            entry = _profile.setdefault(_current[0], {"trace": 0.0, "lower": 0.0,
                                                      "compile": 0.0, "programs": 0,
                                                      "small_compile": 0.0, "small_programs": 0})
            entry[kind] += seconds
            if kind == "compile":
                entry["programs"] += 1
                # eager operations on new shapes each compile a small program
                small = seconds < 0.5
                entry["small_compile"] += seconds * small
                entry["small_programs"] += small

    monitoring.register_event_duration_secs_listener(_record)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _current[0] = item.nodeid
        yield
        _current[0] = "<between tests>"

    def pytest_sessionfinish(session):
        out = pathlib.Path(_PROFILE_DIR)
        out.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (out / f"profile_{worker}.json").write_text(json.dumps(_profile, indent=1))


# --- heavy modules first ------------------------------------------------------------------------
# `make test` runs `--dist loadfile`: each module goes whole to one worker, in collection order.
# A compile-heavy module that starts last leaves the other worker idle while it finishes, so the
# modules that took longest in a cold 2-worker run (`--durations`: the first eight on
# 2026-12-07, the others on 2026-11-27; the user-settings module, a second process, last of
# them) go first; the rest keep pytest's order. Paths relative to tests/.
_HEAVY_FIRST = ("models/test_tendons.py", "test_scenes_fuzz.py", "test_terms.py",
                "io/test_mjcf_coverage.py", "solvers/test_smoothing.py", "test_step.py",
                "models/test_joint_properties.py", "io/test_mjcf_actuation.py",
                "solvers/test_adjoint_finite_differences.py",
                "scene/test_particles.py", "test_randomize.py", "scene/test_compound_bodies.py",
                "test_step_closed_loop.py", "control/test_apg.py", "test_step_float32.py",
                "optim/test_fit.py", "models/test_joints.py", "models/test_broad_phase.py",
                "solvers/test_solvers_agree.py", "solvers/test_newton.py",
                "models/test_energy.py", "models/test_contact_physics.py", "io/test_mjcf.py",
                "test_user_xla_settings.py")
_TESTS = pathlib.Path(__file__).resolve().parent


def _relative(path):
    try:
        return pathlib.Path(path).resolve().relative_to(_TESTS).as_posix()
    except ValueError:      # a test file outside tests/
        return str(path)


def pytest_report_header(config):
    return f"XLA settings: {XLA_SETTINGS} (XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r})"


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(_HEAVY_FIRST)}
    # a stable sort: within a module, and among the rest, pytest's order stays
    items.sort(key=lambda item: rank.get(_relative(item.path), len(rank)))
