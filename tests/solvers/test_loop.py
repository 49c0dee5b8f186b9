"""The solvers' loops (`jaxcontact.solvers.loop`): `until_done` under vmap runs each scene as it
would run alone, to its own stop or to the cap, whether its operands are batched or shared,
whatever the working set's width, and nested in a second vmap; `where_needed` gives fn where a
scene needs it and the fallback elsewhere, and runs fn only if some scene needs it.

The iteration is a toy with a closed form (x ← x - step until x <= 0, so a scene stops after
ceil(x0 / step) iterations, or at the cap), so the module compiles in seconds.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact.solvers import loop

CAP = 12


def _iteration(state, operands):
    """One step of the toy: frozen once done (as the solvers' iterations are)."""
    x, used, done = state
    step, offset = operands
    new_x = x - step + 0.0 * offset
    stop = done | (x <= 0.0)
    return (jnp.where(stop, x, new_x), used + jnp.where(stop, 0, 1), stop | (new_x <= 0.0))


def _run(x0, step, offset, width=None):
    init = (x0, jnp.zeros((), jnp.int32), x0 <= 0.0)
    return loop.until_done(_iteration, init, (step, offset), CAP, lambda s: s[2], width=width)


def _expected_iterations(x0, step):
    return np.array([min(max(math.ceil(x / s), 0), CAP) for x, s in zip(x0, step)])


@pytest.fixture(scope="module")
def starts():
    rng = np.random.default_rng(0)
    # most scenes stop after 0-2 iterations, a few run long or hit the cap: as a batch of
    # scenes at a step with an impact
    x0 = rng.uniform(-1.0, 2.0, 100)
    x0[::17] = rng.uniform(5.0, 20.0, x0[::17].shape)
    step = rng.uniform(0.8, 1.2, 100)
    return x0, step


def test_a_scene_alone_stops_at_its_closed_form_count(starts):
    x0, step = starts
    run = jax.jit(_run)
    for i in (0, 17, 34):
        _, used, done = run(x0[i], step[i], 0.0)
        assert int(used) == _expected_iterations(x0[i:i + 1], step[i:i + 1])[0]
        assert bool(done) == (x0[i] - int(used) * step[i] <= 0.0)


def test_vmap_runs_each_scene_to_its_own_stop_or_the_cap(starts):
    x0, step = starts
    if jax.default_backend() == "cpu":  # the working-set rule, not a whole batch
        assert loop.working_width(x0.size) < x0.size
    x, used, done = jax.jit(jax.vmap(_run, in_axes=(0, 0, None)))(x0, step, 0.0)
    expected = _expected_iterations(x0, step)
    np.testing.assert_array_equal(np.asarray(used), expected)
    assert np.any(expected == CAP) and np.any(expected == 0)
    np.testing.assert_allclose(np.asarray(x), x0 - expected * step, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(done), x0 - expected * step <= 0.0)


def test_shared_operands_and_nested_vmap_give_the_same_answers(starts):
    x0, step = starts
    # a shared (unbatched) step, and the batch as 4 x 25 under two vmaps
    shared = jax.jit(jax.vmap(_run, in_axes=(0, None, None)))(x0, 1.0, 0.0)
    np.testing.assert_array_equal(np.asarray(shared[1]),
                                  _expected_iterations(x0, np.ones_like(x0)))
    nested = jax.jit(jax.vmap(jax.vmap(_run, in_axes=(0, 0, None)), in_axes=(0, 0, None)))(
        x0.reshape(4, 25), step.reshape(4, 25), 0.0)
    np.testing.assert_array_equal(np.asarray(nested[1]).reshape(-1),
                                  _expected_iterations(x0, step))


def test_every_working_width_gives_the_same_answers(starts):
    # a working set of one scene, of a few, and the whole batch (on any backend)
    x0, step = starts
    expected = _expected_iterations(x0, step)
    for width in (1, 7, 100):
        _, used, _ = jax.vmap(functools.partial(_run, width=width), in_axes=(0, 0, None))(
            x0, step, 0.0)
        np.testing.assert_array_equal(np.asarray(used), expected, f"width {width}")


def test_working_width_holds_at_most_its_unknowns():
    # on CPU: at most `max_scenes` scenes and `max_unknowns` unknowns, at least one scene
    for scenes, budget in ((16, 192), (5, 40)):
        width = functools.partial(loop.working_width, backend="cpu", max_scenes=scenes,
                                  max_unknowns=budget)
        assert width(1024) == scenes
        assert width(3) == 3
        for unknowns in (1, 6, 12, 48, 96, 97, 10_000):
            got = width(1024, unknowns)
            assert 1 <= got <= scenes
            # as many scenes as fit the unknowns' budget, at least one
            assert got == 1 or got * unknowns <= budget
            assert got == scenes or (got + 1) * unknowns > budget
        assert width(2, 6) == 2
    # the defaults bound the working set; accelerators iterate the whole batch
    assert 1 <= loop.working_width(1024, backend="cpu") < 1024
    assert loop.working_width(1024, 6, backend="gpu") == 1024


def test_a_narrow_working_set_gives_the_same_answers(starts):
    # scenes of more unknowns than a working set holds: one scene at a time on CPU
    x0, step = starts
    unknowns = 10 ** 9
    if jax.default_backend() == "cpu":
        assert loop.working_width(x0.size, unknowns) == 1
    init = (x0, jnp.zeros_like(x0, jnp.int32), x0 <= 0.0)
    run = jax.vmap(lambda i, s: loop.until_done(_iteration, i, (s, 0.0), CAP, lambda c: c[2],
                                                unknowns=unknowns))
    _, used, _ = run(init, step)
    np.testing.assert_array_equal(np.asarray(used), _expected_iterations(x0, step))


# --- where_needed ---------------------------------------------------------------------------

def _where_needed(needed, x, scale, branch=True):
    calls = []

    def fn(operands):
        x, scale = operands
        jax.debug.callback(lambda: calls.append(1))
        return scale * x * x

    out = loop.where_needed(needed, fn, -x, (x, scale), branch=branch)
    return out, calls


@pytest.mark.parametrize("branch", [True, False])
def test_where_needed_gives_fn_where_needed_and_the_fallback_elsewhere(branch):
    x = jnp.arange(1.0, 7.0)
    needed = jnp.array([True, False, True, False, False, True])
    run = jax.jit(jax.vmap(lambda n, v: _where_needed(n, v, 2.0, branch)[0]))
    np.testing.assert_array_equal(run(needed, x), np.where(needed, 2.0 * x * x, -x))
    # batched scale (every operand batched), and one scene alone
    run = jax.jit(jax.vmap(lambda n, v, s: _where_needed(n, v, s, branch)[0]))
    np.testing.assert_array_equal(run(needed, x, x), np.where(needed, x ** 3, -x))
    for n in (True, False):
        alone = jax.jit(lambda v: _where_needed(n, v, 2.0, branch)[0])(3.0)
        assert float(alone) == (18.0 if n else -3.0)


def test_where_needed_runs_fn_only_if_some_scene_needs_it():
    x = jnp.arange(1.0, 5.0)
    for needed, runs in ((jnp.zeros(4, bool), 0), (jnp.array([False, True, False, False]), 1)):
        calls = []

        def one(n, v):
            out, inner = _where_needed(n, v, 2.0)
            calls.append(inner)
            return out

        jax.block_until_ready(jax.vmap(one)(needed, x))
        # the callback runs once per (vmapped) evaluation of fn, or not at all
        assert (len(calls[0]) > 0) == (runs > 0), (needed, calls[0])


def test_batching_rules_replay_one_trace_of_the_python(starts):
    # the primal form of each custom_vmap traces the function; the batching rule replays
    # that trace instead of running the Python again (design note 38), with the same answers
    x0, step = starts
    traced = []

    def counted(state, operands):
        traced.append("iteration")
        return _iteration(state, operands)

    def fn(operands):
        traced.append("fn")
        x, scale = operands
        return scale * x * x

    def run(x, s):
        init = (x, jnp.zeros((), jnp.int32), x <= 0.0)
        final = loop.until_done(counted, init, (s, 0.0), CAP, lambda c: c[2])
        return final, loop.where_needed(x > 1.0, fn, -x, (x, s))

    (x, used, _), out = jax.jit(jax.vmap(run))(x0, step)
    assert sorted(traced) == ["fn", "iteration"]
    expected = _expected_iterations(x0, step)
    np.testing.assert_array_equal(np.asarray(used), expected)
    np.testing.assert_allclose(np.asarray(x), x0 - expected * step, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out), np.where(x0 > 1.0, step * x0 * x0, -x0),
                               rtol=1e-15)
