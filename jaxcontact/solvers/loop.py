"""The one bounded loop every iteration of the library runs in (Newton, descent, dual ascent and
the Krylov solves inside them).

`iterate` runs carry = iteration(carry) `length` times, either as a `lax.scan` (every scene of
a vmapped batch pays every iteration, finished ones masked by the iteration itself; reverse
mode can differentiate it) or, with `early_exit`, as a bounded `lax.while_loop` that stops
once done(carry) holds for the whole batch (forward mode only; reverse mode cannot go through
it, which is why solves run it only where the implicit rules, not autodiff, give gradients).
"""

from __future__ import annotations

import jax


def iterate(iteration, init, length, early_exit, done):
    """The carry after `length` iterations, or after the first at which done(carry) holds."""
    if early_exit:
        def cond(carry):
            return ~done(carry[0]) & (carry[1] < length)

        def body(carry):
            return iteration(carry[0]), carry[1] + 1

        return jax.lax.while_loop(cond, body, (init, 0))[0]
    return jax.lax.scan(lambda c, _: (iteration(c), None), init, None, length=length)[0]
