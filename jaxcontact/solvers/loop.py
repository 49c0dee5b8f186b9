"""The bounded loops of the solvers: `iterate` (a scan, or a while loop for forward mode),
`until_done` (the solvers' early-exit loop, whose batching rule iterates working sets of the
unfinished scenes on CPU: box_drop at B = 1024 7x faster; design notes 18 and 53) and
`where_needed` (a branch run only if some scene needs it), tracing once (design note 38).
"""

from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp

# `until_done`'s working set on CPU: at most this many scenes and unknowns (design note 53)
_WORKING_WIDTH_CPU = 16
_WORKING_DOFS_CPU = 192


def iterate(iteration, init, length, early_exit, done):
    """The carry after `length` iterations, or after the first at which done(carry) holds."""
    if early_exit:
        return jax.lax.while_loop(lambda c: ~done(c[0]) & (c[1] < length),
                                  lambda c: (iteration(c[0]), c[1] + 1), (init, 0))[0]
    return jax.lax.scan(lambda c, _: (iteration(c), None), init, None, length=length)[0]


def working_width(batch, unknowns=None, *, backend=None, max_scenes=_WORKING_WIDTH_CPU,
                  max_unknowns=_WORKING_DOFS_CPU) -> int:
    """Scenes of a vmapped batch (`unknowns` each) one pass of `until_done` iterates: on CPU
    (`backend`: JAX's default) at most `max_scenes`, `max_unknowns` unknowns, >= 1; else all."""
    if (jax.default_backend() if backend is None else backend) != "cpu":
        return batch
    return min(batch, max_scenes, max(1, max_unknowns // max(1, unknowns or 1)))


def until_done(iteration, init, operands, length, done, unknowns=None, *, width=None):
    """state = iteration(state, operands) until done(state) or `length` iterations, per scene
    (forward mode only; each answer as alone; under vmap `width` unfinished scenes a pass, None:
    `working_width`). iteration must leave a done scene unchanged, read batches from operands."""
    traced = _Traced(iteration)

    @jax.custom_batching.custom_vmap
    def run(init, operands):
        step = traced.trace(init, operands)
        return iterate(lambda state: step(state, operands), init, length, True, done)

    @run.def_vmap
    def run_batched(batch, in_batched, init, operands):
        init_batched, operands_batched = in_batched
        state = _broadcast(init, init_batched, batch)
        axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)
        step = jax.vmap(traced.replay, in_axes=(0, axes))
        size = working_width(batch, unknowns) if width is None else min(batch, width)

        def running(state, count):
            return ~jax.vmap(done)(state) & (count < length)

        def whole(carry):
            state, count = carry
            active = running(state, count)
            return _select(active, step(state, operands), state), count + active.astype(jnp.int32)

        def working_set(carry):
            state, count = carry
            # the first `size` unfinished scenes; empty slots read the last and are dropped
            (index,) = jnp.nonzero(running(state, count), size=size, fill_value=batch)
            take = lambda x, b=True: jnp.take(x, index, axis=0, mode="clip") if b else x  # noqa
            new = step(jax.tree.map(take, state), jax.tree.map(take, operands, operands_batched))
            state = jax.tree.map(lambda x, y: x.at[index].set(y, mode="drop"), state, new)
            return state, count.at[index].add(1, mode="drop")

        final, _ = jax.lax.while_loop(lambda c: jnp.any(running(*c)),
                                      whole if size == batch else working_set,
                                      (state, jnp.zeros((batch,), jnp.int32)))
        return final, jax.tree.map(lambda _: True, init)

    return run(init, operands)


def where_needed(needed, fn, fallback, operands, branch=True):
    """fn(operands) where `needed` holds, else `fallback`; under vmap fn runs only if some
    scene needs it (a `lax.cond` would run both branches). `branch=False`: always evaluated and
    selected, which reverse mode can differentiate. fn reads batched values from `operands`."""
    if not branch:
        return _select(needed, fn(operands), fallback)

    traced = _Traced(fn)

    @jax.custom_batching.custom_vmap
    def run(needed, fallback, operands):
        compute = traced.trace(operands)
        return jax.lax.cond(needed, lambda: compute(operands), lambda: fallback)

    @run.def_vmap
    def run_batched(batch, in_batched, needed, fallback, operands):
        needed_batched, fallback_batched, operands_batched = in_batched
        needed, fallback = _broadcast((needed, fallback), (needed_batched, fallback_batched),
                                      batch)
        axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)

        def compute():
            return _select(needed, jax.vmap(traced.replay, in_axes=(axes,), axis_size=batch)(
                operands), fallback)

        out = jax.lax.cond(jnp.any(needed), compute, lambda: fallback)
        return out, jax.tree.map(lambda _: True, out)

    return run(needed, fallback, operands)


def _broadcast(tree, batched, batch):
    """The leaves of tree not batched (`batched`: a matching tree of bools) given a batch axis."""
    return jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (batch,) + jnp.shape(x)),
                        tree, batched)


def _select(mask, new, old):
    """new where mask, else old, leaf by leaf; a (B,) mask selects along the leading axis."""
    mask = jnp.asarray(mask)
    return jax.tree.map(lambda a, b: jnp.where(
        mask.reshape(mask.shape + (1,) * (jnp.ndim(a) - mask.ndim)), a, b), new, old)


class _Traced:
    """fn traced once by a `custom_vmap`'s primal form, replayed from the jaxpr (design note 38)."""

    def __init__(self, fn):
        self.fn = fn

    def trace(self, *args):
        self.closed, self.shapes = jax.make_jaxpr(self.fn, return_shape=True)(*args)
        return self.replay

    def replay(self, *args):
        flat = jax.extend.core.jaxpr_as_fun(self.closed)(*jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(self.shapes), flat)
