"""Run by tests/test_parallel.py in a fresh process with 4 forced CPU devices (XLA_FLAGS must be
set before JAX starts): a randomized batch sharded with `jc.shard_batch`, rolled out by
jit(vmap(rollout)), compared with the unsharded run. Prints one JSON line of facts that the
test asserts on (facts, not verdicts, so that a failure shows what happened).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np

import jaxcontact as jc

BATCH, STEPS = 8, 20


def scene():
    # spheres on a plane, the pair between them excluded, and Descent: the smallest program
    # with bodies in contact (a cold compile is what this check costs; Newton's is 2x)
    s = jc.Scene(dt=0.005)
    s.add_plane(friction=0.6)
    s.add_sphere(0.05, mass=1.0, pos=(0.0, 0.0, 0.06))
    s.add_sphere(0.04, mass=0.5, pos=(0.3, 0.0, 0.05))
    s.exclude_pair(0, 1)
    return s.build(dtype=jnp.float64, solver=jc.Descent(iterations=30))


def main():
    facts = {"device_count": jax.device_count(),
             "x64": bool(jax.config.jax_enable_x64),
             "rank_promotion": jax.config.jax_numpy_rank_promotion}
    model, state = scene()
    models, states = jc.randomize(model, state, jax.random.PRNGKey(0), BATCH,
                                  friction=(0.2, 1.0), vel=((-0.5, -0.5, -0.5), (0.5, 0.5, 0.0)))
    run = jax.jit(jax.vmap(lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True)))
    reference = jax.block_until_ready(run(models, states))

    mesh = jc.batch_mesh()
    sharded = jc.shard_batch((models, states), mesh)
    out = jax.block_until_ready(run(*sharded))

    # where each input and output leaf lives: its sharding spec and, per shard, the batch
    # slice it holds and its device; in mesh order, shard i should hold scenes 2i, 2i + 1
    order = [d.id for d in mesh.devices.flat]
    per_device = BATCH // len(order)
    facts["expected_placement"] = [
        [i * per_device, (i + 1) * per_device, d] for i, d in enumerate(order)]
    placements = []
    for name, tree in (("inputs", sharded), ("outputs", out)):
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
            where = sorted([s.index[0].start, s.index[0].stop, s.device.id]
                           for s in leaf.addressable_shards) if leaf.ndim else None
            host = np.asarray(leaf)
            placements.append({
                "io": name, "leaf": jax.tree_util.keystr(path), "size": int(leaf.size),
                "spec": [str(a) for a in leaf.sharding.spec], "where": where,
                "uniform": bool(leaf.ndim and np.all(host == host[:1]))})
    facts["placements"] = placements

    # the same numbers: shard by shard against the unsharded run
    worst, identical = 0.0, True
    for a, b in zip(jax.tree.leaves(reference), jax.tree.leaves(out), strict=True):
        for shard in b.addressable_shards:
            ref = np.asarray(a)[shard.index]
            got = np.asarray(shard.data)
            identical &= bool(np.array_equal(ref, got))
            if np.issubdtype(ref.dtype, np.floating):
                worst = max(worst, float(np.max(np.abs(ref - got), initial=0.0)))
    facts["max_abs_diff"], facts["bit_identical"] = worst, identical
    facts["contacts"] = int(np.max(np.asarray(out[2].active_contacts)))

    # each device its own slice by shard_map (`jc.parallel.map_batch`), unsharded inputs
    mapped = jax.jit(jc.map_batch(jax.vmap(
        lambda m, s: jc.rollout(m, s, steps=STEPS, return_info=True)), mesh))
    out = jax.block_until_ready(mapped(models, states))
    facts["map_batch_max_abs_diff"] = max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0))
        for a, b in zip(jax.tree.leaves(reference), jax.tree.leaves(out), strict=True)
        if np.issubdtype(np.asarray(a).dtype, np.floating))
    facts["map_batch_devices"] = sorted({d.id for leaf in jax.tree.leaves(out)
                                         for d in leaf.sharding.device_set})

    # a batch the devices do not divide
    six = jax.tree.map(lambda x: x[:6], (models, states))
    try:
        jc.map_batch(lambda m, s: s, mesh)(*six)
        facts["map_batch_indivisible_error"] = None
    except ValueError as error:
        facts["map_batch_indivisible_error"] = str(error)
    try:
        jc.shard_batch(six, mesh)
        facts["indivisible_error"] = None
    except ValueError as error:
        facts["indivisible_error"] = str(error)
    # the multi-host path, in one process: the same arrays as the default path
    local = jc.shard_batch((models, states), mesh, process_local=True)
    facts["process_local_same"] = all(
        a.sharding == b.sharding and np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(local), jax.tree.leaves(sharded), strict=True))
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
