"""`jc.jit`: `jax.jit` with the XLA settings under which simulation programs compile fastest.

A step's program is large (tens of thousands of operations: the energies' local Hessians,
the line search, the floors), and XLA's compile time follows its size (design note 17). On
the CPU, XLA's newer fusion emitters cost a third of that compile time and gave these
programs nothing at run time. On a 2-core CPU, box_drop's batched rollout (B = 1024,
float32, 500 steps) compiled in 11.7 s instead of 16.0 s and ran at 42.5k instead of 39.7k
scene-steps/s; a chain of 10 boxes on ball joints (float64, 100 steps) compiled in 54 s
instead of 69 s (design note 45). XLA's YNNPACK library fusions (reductions and products
handed to a library kernel) ran the small per-element reductions of the energies' local
Hessians slower than XLA's own loops: a chain of 40 boxes stepped in 6.8 ms instead of
10.3 ms, a 100-sphere pile in 99 instead of 113 ms, box_drop as fast (design note 48).
`jit` turns both off for the programs it compiles, on the CPU only; elsewhere it adds no
XLA options.

The setting is per program (`jax.jit`'s `compiler_options`), not global: it applies to what
`jc.jit` compiles and to nothing else of the process. A `jc.jit` function called inside
another jitted (or transformed) function is plain `jax.jit` there: it is inlined into the
outer program and compiled with the outer one's settings.

Tracing a step allocates millions of short-lived Python objects (tracers, jaxpr variables,
equations), and CPython's cyclic collector, at its default thresholds (700, 10, 10), spends
a fifth of the tracing time walking them: box_drop's batched rollout (B = 64, float32,
500 steps) traced in 4.1 s with them and in 3.2 s with the youngest generation collected
every 50,000 allocations instead (design note 54). On every backend, the function a `jit`
compiles runs (is traced) under those thresholds (`collecting_rarely`), and the process's
own are restored after; calls of the compiled program do not pay for it.

`best_time` times a compiled program the one way the benchmarks, experiments and the CLI do:
the best of a few calls, each waited for.
"""

from __future__ import annotations

import functools
import gc
import time

import jax

#: XLA options `jit` adds on the CPU backend (option name -> value; `jax.jit`'s
#: `compiler_options`).
CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_experimental_ynn_fusion_type": ""}


#: the youngest generation's collection threshold while a `jit` function traces (CPython's
#: default is 700); the older generations' are left as they are.
TRACING_GC_THRESHOLD = 50_000


def collecting_rarely(fn, *args, **kwargs):
    """fn(*args, **kwargs) with CPython's cyclic collector at a first threshold of at least
    `TRACING_GC_THRESHOLD` (module docstring); the process's thresholds are restored after,
    whatever fn raised. Nothing is switched off: garbage is still collected."""
    before = gc.get_threshold()
    if before[0] >= TRACING_GC_THRESHOLD:
        return fn(*args, **kwargs)
    gc.set_threshold(TRACING_GC_THRESHOLD, before[1], before[2])
    try:
        return fn(*args, **kwargs)
    finally:
        gc.set_threshold(*before)


def _traced_rarely(fun):
    """fun, its Python run under `collecting_rarely`: what `jax.jit` traces. The compiled
    program's calls never run it, so they pay nothing for this."""
    @functools.wraps(fun)
    def traced(*args, **kwargs):
        return collecting_rarely(fun, *args, **kwargs)
    return traced


def compiler_options(backend: str | None = None) -> dict:
    """The options `jit` compiles with on `backend` (default: JAX's default backend)."""
    backend = jax.default_backend() if backend is None else backend
    return dict(CPU_OPTIONS) if backend == "cpu" else {}


def jit(fun=None, /, **kwargs):
    """`jax.jit(fun, **kwargs)` with `compiler_options()` added (options given in kwargs'
    `compiler_options` win), fun traced under `collecting_rarely`. Usable as a decorator,
    with or without arguments:

        run = jc.jit(jax.vmap(rollout_fn))
        @jc.jit
        def f(x): ...
        @functools.partial(jc.jit, static_argnames="steps")
        def g(x, steps): ...

    The backend is read at the first call (or `lower`, `trace`, ...), not here, so that
    library modules can define jitted functions at import without starting JAX's backend.
    """
    if fun is None:
        return lambda f: jit(f, **kwargs)
    if not callable(fun):
        raise ValueError(f"fun must be callable, got {fun!r}")
    return _Jitted(fun, kwargs)


try:   # JAX's probe of whether anything is being traced (internal: absent from some versions)
    from jax._src.core import trace_ctx as _trace_ctx
except ImportError:   # pragma: no cover - depends on JAX's internals
    _trace_ctx = None


def _top_level() -> bool:
    """Whether JAX is tracing nothing here (a call from Python, not from inside a `jit`,
    `grad`, `vmap` or loop being traced). Unknown (a JAX without this probe): False, so that
    `jit` falls back to plain `jax.jit`."""
    is_top_level = getattr(_trace_ctx, "is_top_level", None)
    return bool(is_top_level()) if is_top_level is not None else False


class _Jitted:
    """A `jax.jit` object built on first use (`jit`); every attribute is the built one's.

    Called from inside a transformation (another `jit`, `grad`, `vmap`, a loop), it is
    plain `jax.jit`: JAX accepts compiler options only on the outermost compiled function,
    and the outer one's settings hold for the whole program anyway."""

    def __init__(self, fun, kwargs):
        self._fun, self._kwargs, self._built, self._nested = fun, kwargs, None, None
        functools.update_wrapper(self, fun)

    def _jitted(self):
        if self._built is None:
            kwargs = dict(self._kwargs)
            options = {**compiler_options(), **(kwargs.pop("compiler_options", None) or {})}
            self._built = jax.jit(_traced_rarely(self._fun), compiler_options=options or None,
                                  **kwargs)
        return self._built

    def __call__(self, *args, **kwargs):
        if _top_level():
            return self._jitted()(*args, **kwargs)
        if self._nested is None:   # (without anyone's compiler options: refused here)
            options = {k: v for k, v in self._kwargs.items() if k != "compiler_options"}
            self._nested = jax.jit(self._fun, **options)
        return self._nested(*args, **kwargs)

    def __getattr__(self, name):   # lower, trace, eval_shape, ...
        if name.startswith("__") or name in ("_fun", "_kwargs", "_built", "_nested"):
            raise AttributeError(name)
        return getattr(self._jitted(), name)


def best_time(compiled, *args, repeats=3):
    """(best wall time in s of `repeats` calls of compiled(*args), each waited for with
    `jax.block_until_ready`, the last call's output)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best, out
