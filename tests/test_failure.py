"""`rollout(on_failure=...)`: the first failing step is found and reported (warning or error)
outside jit, under jit, vmap and grad; converged rollouts stay silent; bad values raise; and a
compiled rollout gives bit-identical results when run again.

Compilation dominates (a program with a host callback has the callback's address in its
persistent-cache key, so a new process never finds it), so every test uses one particle of
radius 5 cm dropped from 10 cm onto the ground (the cheapest contact program): with `Descent(iterations=3)` its contact steps cannot converge (it touches
at step 9), with `Descent(iterations=50)` every step converges. Each program is compiled once
(module-scoped fixtures).
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc

# Two compiled programs that differ only by the failure check may sum in another order:
# results agree to a few ulps (float64), not bit for bit.
_ULPS = 1e-14

STEPS = 20


def _drop(iterations, z=0.1):
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_particle(1.0, (0.0, 0.0, z), radius=0.05)
    return scene.build(solver=jc.Descent(iterations=iterations), dtype=jnp.float64)


def _first_failure(infos):
    """(first failing step, failing steps) from the infos alone (the states stay finite)."""
    failed = ~np.asarray(infos.converged) | np.asarray(infos.overflow)
    assert failed.any(), "the scene was meant to fail"
    return int(np.argmax(failed)), int(failed.sum())


def _rollout(on_failure, **kwargs):
    return lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True, on_failure=on_failure,
                                   **kwargs)


@pytest.fixture(scope="module")
def failing():
    return _drop(3)


@pytest.fixture(scope="module")
def failing_trajectory(failing):
    """The failing scene's traj and infos, from the rollout without a policy (cacheable), and
    that jitted rollout."""
    run = jax.jit(_rollout("ignore"))
    _, traj, infos = run(*failing)
    first, count = _first_failure(infos)
    assert 0 < first < STEPS - 1 and count > 1  # the free fall converges, contact does not
    assert int(infos.result[first]) == jc.Result.MAX_ITERATIONS
    return traj, infos, run


def _expected(first, count, infos):
    """What the message must say about the first failing step."""
    return (f"step {first} (", f"{count} of {STEPS} steps failed",
            f"iterations={int(infos.iterations[first])}",
            f"result={int(jc.Result.MAX_ITERATIONS)}",
            jc.RESULT_MESSAGES[jc.Result.MAX_ITERATIONS])


def test_warn_under_jit_names_the_first_failing_step(failing, failing_trajectory):
    with pytest.warns(jc.SimulationWarning) as record:
        _, traj, infos = jax.jit(_rollout("warn"))(*failing)
        jax.effects_barrier()  # on accelerators the callback runs asynchronously
    assert len(record) == 1, [str(w.message) for w in record]  # one report per rollout
    text = str(record[0].message)
    first, count = _first_failure(infos)
    for part in _expected(first, count, infos):
        assert part in text, f"{part!r} not in {text!r}"
    assert f"state time {float(traj.time[first]):.6g} s after it" in text
    # the policy changed nothing the rollout computes (up to XLA's reassociation of sums in
    # the two programs, an ulp or two)
    for a, b in zip(jax.tree.leaves((traj, infos)), jax.tree.leaves(failing_trajectory[:2])):
        np.testing.assert_allclose(a, b, rtol=_ULPS, atol=0)


def test_raise_under_jit(failing, failing_trajectory):
    first, count = _first_failure(failing_trajectory[1])
    # XLA wraps the callback's exception: a JaxRuntimeError (a RuntimeError) carrying the
    # SimulationError's type name and message
    with pytest.raises(RuntimeError, match=rf"SimulationError: .*step {first} \(") as error:
        jax.block_until_ready(jax.jit(_rollout("raise"))(*failing))
        jax.effects_barrier()
    assert f"{count} of {STEPS} steps failed" in str(error.value)


def test_outside_jit_warn_and_raise_are_python_level(failing, failing_trajectory):
    first, count = _first_failure(failing_trajectory[1])
    with pytest.warns(jc.SimulationWarning, match=rf"step {first} \(") as record:
        jc.rollout(*failing, steps=STEPS, on_failure="warn")
    assert len(record) == 1
    assert record[0].filename == __file__, "the warning should point at the rollout call"
    with pytest.raises(jc.SimulationError, match=rf"step {first} \(") as error:
        jc.rollout(*failing, steps=STEPS, on_failure="raise")
    for part in _expected(first, count, failing_trajectory[1]):
        assert part in str(error.value)
    # the same check on the outputs of a (jitted) rollout run without a policy
    traj, infos, _ = failing_trajectory
    with pytest.raises(jc.SimulationError, match=rf"step {first} \("):
        jc.check_rollout(traj, infos)
    assert jc.check_rollout(traj, infos, on_failure="ignore") == count


def test_nonfinite_initial_velocity_is_reported(failing):
    model, state = failing
    state = state.replace(particle_vel=state.particle_vel.at[0, 2].set(jnp.nan))
    with pytest.raises(jc.SimulationError, match=r"step 0 \(.*non-finite") as error:
        jc.rollout(model, state, steps=STEPS, on_failure="raise")
    assert f"{STEPS} of {STEPS} steps failed" in str(error.value)


def test_nonfinite_state_counts_even_when_converged():
    # a solver can report convergence at a finite residual while the state is not finite
    # (e.g. an inf position that the velocity step does not see): synthetic outputs
    steps = 4
    infos = jc.StepInfo(residual=np.zeros(steps), iterations=np.ones(steps, np.int32),
                        converged=np.ones(steps, bool), result=np.zeros(steps, np.int32),
                        active_contacts=np.zeros(steps, np.int32),
                        max_penetration=np.zeros(steps), overflow=np.zeros(steps, bool),
                        tolerance=np.full(steps, 1e-10))
    _, state = _drop(3)
    traj = jax.tree.map(lambda x: np.repeat(np.asarray(x)[None], steps, axis=0), state)
    assert jc.check_rollout(traj, infos) == 0
    traj.particle_pos[2:, 0, 0] = np.inf
    with pytest.raises(jc.SimulationError, match=r"step 2 \(.*non-finite state.*converged=True"):
        jc.check_rollout(traj, infos)
    overflow = infos.replace(overflow=np.arange(steps) == 1)
    with pytest.warns(jc.SimulationWarning, match=r"step 1 \(.*broad-phase overflow"):
        assert jc.check_rollout(traj, overflow, on_failure="warn") == 3


def test_warn_under_vmap_names_the_batch_members():
    # heights: touches at step 9; never touches in 20 steps (converges); touches earlier
    model, state = _drop(3)
    heights = jnp.array([0.1, 1.0, 0.06])
    states = jax.vmap(lambda z: state.replace(particle_pos=state.particle_pos.at[0, 2].set(z)))(
        heights)
    with pytest.warns(jc.SimulationWarning) as record:
        _, _, infos = jax.jit(jax.vmap(_rollout("warn"), in_axes=(None, 0)))(model, states)
        jax.effects_barrier()
    assert len(record) == 1, "one report for the whole batch"
    text = str(record[0].message)
    assert "2 of 3 batch members" in text and "members [0, 2]" in text, text
    assert "batch member 1:" not in text
    firsts = []
    for member in (0, 2):
        first, count = _first_failure(jax.tree.map(lambda x: x[member], infos))
        firsts.append(first)
        assert re.search(rf"batch member {member}: step {first} \(.*?{count} of {STEPS} steps "
                         "failed", text), text
    assert firsts[1] < firsts[0], "the lower particle should fail first"
    assert bool(np.all(infos.converged[1]))


def test_grad_with_warn_is_unchanged(failing):
    model, state = failing

    def loss(vel, on_failure):
        s = state.replace(particle_vel=vel)
        final, _ = jc.rollout(model, s, steps=STEPS, on_failure=on_failure)
        return jnp.sum(final.particle_pos[:, 2] ** 2) + jnp.sum(final.particle_vel ** 2)

    both = jax.jit(lambda v: (jax.grad(loss)(v, "warn"), jax.grad(loss)(v, "ignore")))
    vel = state.particle_vel + jnp.array([[0.1, 0.0, -0.2]])
    with pytest.warns(jc.SimulationWarning, match=r"step \d+ \("):  # the callback ran
        g_warn, g_ignore = both(vel)
        jax.effects_barrier()
    assert np.all(np.isfinite(g_warn)) and np.any(g_warn != 0.0)
    np.testing.assert_allclose(g_warn, g_ignore, rtol=_ULPS, atol=0)


@pytest.fixture(scope="module")
def converging():
    return _drop(50)


def test_converging_scene_is_silent(converging):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning (or error) from the callback fails
        _, traj, infos = jax.jit(_rollout("warn"))(*converging)
        jax.effects_barrier()
    assert bool(np.all(infos.converged)) and int(np.max(infos.active_contacts)) == 1
    assert jc.check_rollout(traj, infos) == 0


def test_same_program_is_bit_identical(failing, failing_trajectory):
    # the failing scene's program: Descent's early-exit loops and contact (converged or not
    # does not matter for determinism)
    run = failing_trajectory[2]
    first = run(*failing)
    again = run(*failing)
    rejit = jax.jit(lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True))(*failing)
    assert run._cache_size() == 1
    leaves = jax.tree.leaves(first)
    n_state, n_info = len(jax.tree.leaves(failing[1])), len(jc.StepInfo.__dataclass_fields__)
    assert len(leaves) == 2 * n_state + n_info  # final and traj States, the StepInfo
    for other in (again, rejit):
        for a, b in zip(leaves, jax.tree.leaves(other), strict=True):
            assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("value", ["Warn", "error", None, 1, True])
def test_bad_on_failure_raises(failing, value):
    with pytest.raises(ValueError, match=rf"on_failure.*{re.escape(repr(value))}"):
        jc.rollout(*failing, steps=STEPS, on_failure=value)


def test_check_rollout_validates(failing):
    _, state = failing
    traj = jax.tree.map(lambda x: np.repeat(np.asarray(x)[None], 3, axis=0), state)
    infos = jc.StepInfo(*(np.zeros(4) for _ in range(8)))
    with pytest.raises(ValueError, match="leading"):
        jc.check_rollout(traj, infos)
    with pytest.raises(ValueError, match="on_failure.*'loud'"):
        jc.check_rollout(traj, infos, on_failure="loud")
