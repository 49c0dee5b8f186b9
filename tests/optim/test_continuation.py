"""Continuation (`jc.optim.continuation`, jaxcontact/optim/continuation.py): every stage is
warm-started at the last one's answer and reuses its compiled program; bad schedules are
refused.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc


def test_continuation_warm_starts_every_stage():
    """Stage s minimizes (x - s)²: each stage starts where the last one ended and the last
    stage reaches the final value."""
    starts = []

    def optimizer(loss, x0, **options):
        starts.append(float(x0))
        return jc.optim.lbfgs(loss, x0, **options)

    traces = []

    def loss(x, s):
        traces.append(1)            # Python runs only while JAX traces (compiles)
        return (x - s) ** 2 + 1e-3 * x ** 2

    stages = jc.optim.continuation(loss, jnp.array(0.0), [1.0], optimizer=optimizer,
                                   gtol=1e-10)
    first_compile = len(traces)
    stages += jc.optim.continuation(loss, stages[-1].x, [2.0, 4.0], optimizer=optimizer,
                                    gtol=1e-10)
    assert len(stages) == 3 and all(r.converged for r in stages)
    # the stage value is a traced argument: the later stages reuse the first one's program
    assert first_compile > 0 and len(traces) == first_compile
    np.testing.assert_allclose(starts[1:], [float(r.x) for r in stages[:-1]])
    np.testing.assert_allclose(stages[-1].x, 4.0 / 1.001, rtol=1e-8)
    for bad in ([], [1.0, 0.0], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="schedule"):
            jc.optim.continuation(loss, {}, bad)
