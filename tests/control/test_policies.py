"""Policies (jaxcontact/control/policies.py): an MLP policy's `output_scale` sets the size of
its first actions. (Policies in the loop: tests/test_step_closed_loop.py; trained:
test_apg.py.)
"""

import jax
import numpy as np
import pytest

from jaxcontact import control


def test_mlp_policy_output_scale_sets_the_size_of_the_first_actions():
    push = control.pusher_task()
    state = push.task.state
    sizes = []
    for scale in (0.01, 10.0):
        policy = push.mlp_policy(hidden=(50, 200), output_scale=scale)
        actions = [policy.action(policy.init(jax.random.key(k), state), state)
                   for k in range(8)]
        sizes.append(float(np.mean(np.abs(np.asarray(actions)))))
    # weights' standard deviation grows with sqrt(scale): 31.6x before the tanh squash
    assert sizes[1] > 10 * sizes[0], sizes
    with pytest.raises(ValueError, match="output_scale"):
        push.mlp_policy(output_scale=0.0)
