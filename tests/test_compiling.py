"""`jc.jit`: jax.jit with the library's XLA settings (jaxcontact/compiling.py)."""

import functools

import jax
import jax.numpy as jnp
import pytest

import jaxcontact as jc
from jaxcontact import compiling


def _poly(x, power=3):
    return jnp.sum(x ** power) + jnp.sin(x[0])


def test_options_are_cpu_only():
    assert compiling.compiler_options("cpu") == compiling.CPU_OPTIONS
    assert compiling.compiler_options("gpu") == {}
    assert compiling.compiler_options("tpu") == {}


def test_jit_computes_what_jax_jit_computes():
    x = jnp.linspace(-1.0, 2.0, 7)
    expected = float(jnp.sum(x ** 3) + jnp.sin(x[0]))
    assert float(jc.jit(_poly)(x)) == pytest.approx(expected, rel=1e-12)
    # as a decorator with static arguments, and through lower / compile
    squares = functools.partial(jc.jit, static_argnames="power")(_poly)
    assert float(squares(x, power=2)) == pytest.approx(float(jnp.sum(x * x) + jnp.sin(x[0])),
                                                     rel=1e-12)
    compiled = jc.jit(_poly).lower(x).compile()
    assert float(compiled(x)) == pytest.approx(expected, rel=1e-12)
    assert jc.jit(_poly).__name__ == "_poly"


def test_options_reach_the_compiler():
    """The options are handed to XLA (an unknown one is refused there), and the caller's
    own `compiler_options` are merged over the library's."""
    x = jnp.ones(3)
    with pytest.raises(Exception, match="xla_no_such_option"):
        jc.jit(_poly, compiler_options={"xla_no_such_option": 1})(x)
    if jax.default_backend() == "cpu":
        on = jc.jit(_poly, compiler_options={"xla_cpu_use_fusion_emitters": True})
        assert float(on(x)) == pytest.approx(3.0 + float(jnp.sin(1.0)), rel=1e-12)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the options are the CPU backend's")
def test_library_fusions_are_off_in_the_compiled_program():
    """XLA's CPU backend hands a small batched reduction (the shape of an energy's local
    Hessian sums) to a YNNPACK library fusion by default; `jc.jit` compiles it without one
    (design note 48), with the same value."""
    def outer_sums(x):
        return jnp.sum(x[:, :, None] * x[:, None, :], axis=0)

    x = jnp.linspace(-1.0, 1.0, 40 * 36).reshape(40, 36)
    default = jax.jit(outer_sums).lower(x).compile()
    ours = jc.jit(outer_sums).lower(x).compile()
    if "ynn_fusion" not in default.as_text():
        pytest.skip("this XLA makes no library fusion of the reduction anyway")
    assert "ynn_fusion" not in ours.as_text()
    assert jnp.allclose(ours(x), default(x), rtol=1e-12, atol=1e-12)


def test_backend_is_read_at_first_use():
    run = jc.jit(_poly)
    assert run._built is None           # defining it compiled nothing, read no backend
    run(jnp.ones(2))
    assert run._built is not None


def test_not_callable_is_refused():
    with pytest.raises(ValueError, match="fun must be callable"):
        jc.jit(3.0)


def test_nested_in_other_transformations():
    """Inside jax.jit, grad, vmap and scan it is plain jax.jit (JAX takes compiler options
    only at the top level), with the same values and derivatives."""
    inner = jc.jit(_poly)
    x = jnp.linspace(0.5, 1.5, 4)
    top = float(inner(x))
    assert float(jax.jit(lambda y: inner(y))(x)) == pytest.approx(top, rel=1e-12)
    expected_grad = 3.0 * x ** 2 + jnp.zeros_like(x).at[0].set(jnp.cos(x[0]))
    assert jnp.allclose(jax.grad(inner)(x), expected_grad, rtol=1e-12)
    assert jnp.allclose(jax.vmap(inner)(jnp.stack([x, x])), top, rtol=1e-12)
    total, _ = jax.lax.scan(lambda c, y: (c + inner(y), None), 0.0, jnp.stack([x, x, x]))
    assert float(total) == pytest.approx(3.0 * top, rel=1e-12)


def test_nested_with_the_callers_own_options():
    """A caller's `compiler_options` apply at the top level and are left out where it is
    nested (JAX would refuse them there)."""
    options = {"xla_cpu_use_fusion_emitters": True} if jax.default_backend() == "cpu" else {}
    inner = jc.jit(_poly, compiler_options=options)
    x = jnp.linspace(0.5, 1.5, 4)
    top = float(inner(x))
    assert float(jax.jit(lambda y: 2.0 * inner(y))(x)) == pytest.approx(2.0 * top, rel=1e-12)


def test_nested_first_call_keeps_its_keyword_arguments():
    """The first call from inside a transformation passes the caller's keyword arguments
    through (not the jit options), static ones included."""
    scaled = jc.jit(lambda x, *, power: jnp.sum(x ** power), static_argnames="power",
                    compiler_options={})
    x = jnp.linspace(0.5, 1.5, 4)
    nested = jax.jit(lambda y: scaled(y, power=3))(x)
    assert float(nested) == pytest.approx(float(jnp.sum(x ** 3)), rel=1e-6)


def test_traced_with_the_collector_rarely_run_and_thresholds_restored():
    """The function `jit` compiles is traced with the youngest generation's threshold raised
    to `TRACING_GC_THRESHOLD`, the older ones untouched; the process's thresholds are back
    after the trace, after a failed trace, and a threshold already higher stays as it is."""
    import gc

    seen = []

    def recorder(x):
        seen.append(gc.get_threshold())
        return 2.0 * x

    def failing(x):
        raise RuntimeError("trace failed")

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        x = jnp.arange(3.0)
        assert list(jc.jit(recorder)(x)) == [0.0, 2.0, 4.0]
        assert seen == [(compiling.TRACING_GC_THRESHOLD, 10, 10)]
        assert gc.get_threshold() == (700, 10, 10)
        jc.jit(recorder).lower(x + 1.0)     # `lower` traces too
        assert seen[-1] == (compiling.TRACING_GC_THRESHOLD, 10, 10)
        with pytest.raises(RuntimeError, match="trace failed"):
            jc.jit(failing)(x)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(10 * compiling.TRACING_GC_THRESHOLD, 5, 5)
        jc.jit(recorder)(jnp.arange(4.0))
        assert seen[-1] == (10 * compiling.TRACING_GC_THRESHOLD, 5, 5)
        assert gc.get_threshold() == (10 * compiling.TRACING_GC_THRESHOLD, 5, 5)
    finally:
        gc.set_threshold(*before)
