"""The bounded loops every iteration of the library runs in (Newton, descent, dual ascent and
the Krylov solves inside them).

`iterate` runs carry = iteration(carry) `length` times, either as a `lax.scan` (every scene of
a vmapped batch pays every iteration, finished ones masked by the iteration itself; reverse
mode can differentiate it) or, with `early_exit`, as a bounded `lax.while_loop` that stops
once done(carry) holds for the whole batch (forward mode only; reverse mode cannot go through
it, which is why solves run it only where the implicit rules, not autodiff, give gradients).

`until_done` is the solvers' outer loop with `early_exit`. Under `vmap` a plain while loop
runs every scene of the batch until the slowest has converged: in a batch of 1024 tossed
boxes a step needs 1.07 iterations per scene on average but 7-9 for the slowest, so the batch
pays several times the work it needs. `until_done` has its own batching rule
(`jax.custom_batching.custom_vmap`): on CPU each pass runs the iteration on a working set of
at most `working_width(B)` (16) of the scenes still iterating, gathered by index and written
back by index, so the few scenes that need many iterations no longer hold up the rest. On
the 2-core CPU, box_drop at B = 1024 ran 7x faster than with the plain loop (13,500 against
1,900 scene-steps/s, 200 steps); wider working sets were slower there (16: 13,500; 32: 7,800;
128: 6,300), narrower too (8: 10,100). A pass costs its whole width however few of its
slots still run, so where one scene's iteration costs far more than a pass's fixed cost the
set is narrower: at most `_WORKING_DOFS_CPU` (192) unknowns in all. At B = 64, 8 colliding
boxes per scene (48 unknowns) ran 1.6x faster with 4 scenes per pass than with 16 (48.5
against 29.9 scene-steps/s; 2: 50.0, 1: 49.7), and 4 boxes (24 unknowns) 1.3x faster with
8; but the demo's box and sphere (12 unknowns, B = 1024) ran 1.6x slower with 8 than with
16 (design note 53). On accelerators a pass should cost kernel launches more than scenes, so
there the batch runs whole, as a plain loop would; that is not measured yet (design note 18).

Both `until_done` and `where_needed` are `custom_vmap`s, whose primal form is traced even
when only the batching rule runs. The function they run is traced there once (`_Traced`),
and the rule batches that trace (a jaxpr) instead of running the function's Python again
under `vmap`: the same program, traced in about 30 % less time (design note 38).
"""

from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp

# the working set of `until_done` under vmap on CPU: at most this many scenes, and at most
# `_WORKING_DOFS_CPU` unknowns in all (measured: module docstring)
_WORKING_WIDTH_CPU = 16
_WORKING_DOFS_CPU = 192


def iterate(iteration, init, length, early_exit, done):
    """The carry after `length` iterations, or after the first at which done(carry) holds."""
    if early_exit:
        def cond(carry):
            return ~done(carry[0]) & (carry[1] < length)

        def body(carry):
            return iteration(carry[0]), carry[1] + 1

        return jax.lax.while_loop(cond, body, (init, 0))[0]
    return jax.lax.scan(lambda c, _: (iteration(c), None), init, None, length=length)[0]


def working_width(batch: int, unknowns: int | None = None) -> int:
    """How many scenes of a vmapped batch of `batch`, each of `unknowns` unknowns (None: not
    known), one pass of `until_done` iterates: on CPU at most `_WORKING_WIDTH_CPU` scenes
    holding at most `_WORKING_DOFS_CPU` unknowns in all (one scene at least); on
    accelerators the whole batch."""
    if jax.default_backend() != "cpu":
        return batch
    width = _WORKING_WIDTH_CPU
    if unknowns is not None:
        width = min(width, max(1, _WORKING_DOFS_CPU // max(1, unknowns)))
    return min(batch, width)


def until_done(iteration, init, operands, length, done, unknowns=None):
    """state = iteration(state, operands) until done(state) or `length` iterations, per scene.

    A forward-only while loop (not reverse-differentiable). iteration must leave a scene whose
    done(state) holds unchanged. Everything the iteration reads is passed in `operands` (no
    batched values closed over: the batching rule must see them). Under vmap, scenes iterate
    in passes over a working set of the unfinished ones (module docstring), whose width
    `working_width` sets from the batch and each scene's `unknowns`; each scene still runs at
    most `length` iterations, and its answer is the same as alone.
    """
    traced = _Traced(iteration)

    @jax.custom_batching.custom_vmap
    def run(init, operands):
        step = traced.trace(init, operands)
        return iterate(lambda state: step(state, operands), init, length, True, done)

    @run.def_vmap
    def run_batched(batch, in_batched, init, operands):
        init_batched, operands_batched = in_batched
        state = jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (batch,) + jnp.shape(x)),
            init, init_batched)
        axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)
        step = jax.vmap(traced.replay, in_axes=(0, axes))
        width = working_width(batch, unknowns)

        def running(state, count):
            return ~jax.vmap(done)(state) & (count < length)

        def cond(carry):
            return jnp.any(running(*carry))

        def whole(carry):
            state, count = carry
            active = running(state, count)
            new = step(state, operands)
            new = jax.tree.map(lambda a, b: jnp.where(_expand(active, a), a, b), new, state)
            return new, count + active.astype(jnp.int32)

        def working_set(carry):
            state, count = carry
            # the first `width` unfinished scenes; empty slots point past the end: they read
            # the last scene (clipped) and their results are dropped
            (index,) = jnp.nonzero(running(state, count), size=width, fill_value=batch)
            sub = jax.tree.map(lambda x: jnp.take(x, index, axis=0, mode="clip"), state)
            sub_operands = jax.tree.map(
                lambda x, b: jnp.take(x, index, axis=0, mode="clip") if b else x,
                operands, operands_batched)
            new = step(sub, sub_operands)
            state = jax.tree.map(lambda x, y: x.at[index].set(y, mode="drop"), state, new)
            return state, count.at[index].add(1, mode="drop")

        body = whole if width == batch else working_set
        final, _ = jax.lax.while_loop(cond, body, (state, jnp.zeros((batch,), jnp.int32)))
        return final, jax.tree.map(lambda _: True, init)

    return run(init, operands)


def where_needed(needed, fn, fallback, operands, branch=True):
    """fn(operands) where `needed` holds, else `fallback`, evaluating fn only when some scene
    needs it.

    A `lax.cond` becomes a select under `vmap`, which evaluates both branches for every scene:
    Newton's lag-phase direction, which a batch of tossed boxes needs in a few scenes of a few
    steps, would then cost every scene of every iteration. Here the batching rule
    (`custom_vmap`) runs fn on the whole batch only if any scene needs it, and selects per
    scene. With `branch=False` fn is always evaluated and selected (`jnp.where`): the form
    reverse mode can differentiate (unrolled gradients), as `custom_vmap` cannot be.
    Everything fn reads is passed in `operands` (no batched values closed over)."""
    if not branch:
        out = fn(operands)
        return jax.tree.map(lambda a, b: jnp.where(needed, a, b), out, fallback)

    traced = _Traced(fn)

    @jax.custom_batching.custom_vmap
    def run(needed, fallback, operands):
        compute = traced.trace(operands)
        return jax.lax.cond(needed, lambda: compute(operands), lambda: fallback)

    @run.def_vmap
    def run_batched(batch, in_batched, needed, fallback, operands):
        needed_batched, fallback_batched, operands_batched = in_batched
        if not needed_batched:
            needed = jnp.broadcast_to(needed, (batch,))
        fallback = jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (batch,) + jnp.shape(x)),
            fallback, fallback_batched)
        axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)

        def compute():
            if any(jax.tree.leaves(operands_batched)):
                out = jax.vmap(traced.replay, in_axes=(axes,))(operands)
            else:
                out = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)),
                                   traced.replay(operands))
            return jax.tree.map(lambda a, b: jnp.where(_expand(needed, a), a, b), out,
                                fallback)

        out = jax.lax.cond(jnp.any(needed), compute, lambda: fallback)
        return out, jax.tree.map(lambda _: True, out)

    return run(needed, fallback, operands)


def _expand(mask, x):
    """A (B,) mask broadcast against a (B, ...) array."""
    return mask.reshape(mask.shape + (1,) * (x.ndim - 1))


class _Traced:
    """A function traced once, by the primal form of a `custom_vmap`, and replayed from that
    trace (a jaxpr) by both forms: its batching rule then batches the jaxpr instead of running
    the function's Python again under `vmap` (design note 38)."""

    def __init__(self, fn):
        self.fn = fn
        self.closed = self.shapes = None

    def trace(self, *args):
        """Trace fn at args (tracers of the primal form); returns `replay`."""
        self.closed, self.shapes = jax.make_jaxpr(self.fn, return_shape=True)(*args)
        return self.replay

    def replay(self, *args):
        flat = jax.extend.core.jaxpr_as_fun(self.closed)(*jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(self.shapes), flat)
