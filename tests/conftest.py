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
"""

import os

_FAST_COMPILE = {"--xla_cpu_use_fusion_emitters": "false", "--xla_backend_optimization_level": "0"}
_flags = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = " ".join(
    [_flags] + [f"{k}={v}" for k, v in _FAST_COMPILE.items() if k not in _flags]).strip()

import pathlib

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
_CACHE = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAXCONTACT_CACHE", str(_CACHE)))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
