"""Test configuration: float64, strict promotion, and a project-local compilation cache.

Compilation dominates the run time of JAX tests; the persistent cache makes re-runs cheap
and module-scoped fixtures share jitted functions between tests. (XLA_FLAGS
--xla_cpu_use_fusion_emitters=false compiles about a quarter faster, but it changes float32
rounding enough that test_float32's thrown boxes converge on 98.75 % of steps instead of
>= 99 %; it is not used.)
"""

import os
import pathlib

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
_CACHE = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAXCONTACT_CACHE", str(_CACHE)))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
