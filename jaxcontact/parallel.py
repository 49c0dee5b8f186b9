"""Batches of scenes over several devices: the batch axis sharded with `jax.sharding`.

`shard_batch` places the leading (batch) axis of every leaf of a batched pytree (the models
and states of `jc.randomize`) on a 1-D device mesh, `NamedSharding(mesh, P(axis))`. A
`jax.jit(jax.vmap(rollout))` of sharded inputs is partitioned by XLA (GSPMD): each device
steps its own slice of the scenes, and the outputs keep the batch sharding. Nothing is
communicated per step but the loop conditions of the solvers (whether any scene of the batch
still iterates: an all-reduce of one flag per iteration) and, with `rollout(on_failure=...)`,
the few summary scalars the failure callback reads on device 0. See docs/parallel.md, which
also covers several hosts (`jax.distributed`). `map_batch` runs the same function per device
with `jax.shard_map` instead, each device's loops its own: on a CPU split into devices
(`--xla_force_host_platform_device_count`) that is the fast way (design note 60).

The mesh's batch axis must be of `AxisType.Auto`: the library's code is written for plain
`jit` partitioning, and under `Explicit` axes (the default of `jax.make_mesh`) sharding
becomes part of the array types and its reshapes of sharded batches fail.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec


def batch_mesh(axis: str = "batch", devices=None) -> Mesh:
    """A 1-D mesh named `axis` over `devices` (default: every device of every process,
    `jax.devices()`), with an `AxisType.Auto` axis (module docstring)."""
    devices = jax.devices() if devices is None else list(devices)
    return jax.make_mesh((len(devices),), (axis,), axis_types=(AxisType.Auto,),
                         devices=devices)


def shard_batch(tree, mesh: Mesh | None = None, axis: str = "batch", *,
                process_local: bool = False):
    """Place the leading batch axis of every array leaf of `tree` on `mesh`'s axis `axis`.

    Every leaf of one or more dimensions is split along its first axis over the mesh axis
    (`NamedSharding(mesh, PartitionSpec(axis))`; replicated over any other mesh axes);
    0-dimensional leaves, which have no batch axis, are replicated (`PartitionSpec()`).
    Static fields of a `Model` are not leaves and stay as they are. An unbatched model
    shared by all scenes needs no placing: pass it to the jitted function as it is (or
    `jax.device_put(model, NamedSharding(mesh, PartitionSpec()))` to replicate it).

    Args:
      tree: a pytree of arrays with a common leading batch size B (e.g. `(models, states)`
        from `jc.randomize(model, state, key, B)`).
      mesh: a `jax.sharding.Mesh` with an axis named `axis` of `AxisType.Auto`; None:
        `batch_mesh(axis)`, all devices.
      axis: the mesh axis the batch is split over.
      process_local: `tree` holds only this process's consecutive slice of the global batch
        (several hosts, `jax.distributed`): the global batch is B times the process count,
        assembled with `jax.make_array_from_process_local_data`; replicated leaves must be
        the same on every process. With one process this equals the default.

    Returns:
      The same pytree of global `jax.Array`s; `x.sharding` tells where each lives and
      `x.addressable_shards` gives each local device's slice.

    Raises:
      ValueError: `axis` not a mesh axis or not `AxisType.Auto`, no leaf of one or more
        dimensions, leaves of different leading sizes (the message names the leaves and
        their shapes), or a global batch size that the mesh axis's device count does not
        divide (the message names both).
    """
    mesh = batch_mesh(axis) if mesh is None else mesh
    if axis not in mesh.axis_names:
        raise ValueError(f"axis must be an axis of mesh, whose axes are {mesh.axis_names}, "
                         f"got {axis!r}")
    kind = dict(zip(mesh.axis_names, mesh.axis_types))[axis]
    if kind != AxisType.Auto:
        raise ValueError(f"mesh axis {axis!r} must be of AxisType.Auto, got {kind} (make the "
                         "mesh with jax.make_mesh(..., axis_types=(AxisType.Auto,)) or "
                         "jc.batch_mesh)")
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    sizes = {jax.tree_util.keystr(path): np.shape(x) for path, x in leaves if np.ndim(x) > 0}
    if not sizes:
        raise ValueError(f"tree has no leaf with a batch axis (leaves: {len(leaves)})")
    leading = {shape[0] for shape in sizes.values()}
    if len(leading) != 1:
        shown = ", ".join(f"{name}: {shape}" for name, shape in list(sizes.items())[:6])
        raise ValueError(f"every leaf of tree must have the same leading batch size, got "
                         f"sizes {sorted(leading)} ({shown}, ...)")
    local = leading.pop()
    batch = local * (jax.process_count() if process_local else 1)
    devices = mesh.shape[axis]
    if batch % devices:
        raise ValueError(f"the batch size {batch} must be a multiple of the {devices} devices "
                         f"of mesh axis {axis!r}")
    split, whole = NamedSharding(mesh, PartitionSpec(axis)), NamedSharding(mesh, PartitionSpec())

    def place(x):
        sharding = split if np.ndim(x) > 0 else whole
        if not process_local:
            return jax.device_put(x, sharding)
        shape = (batch,) + np.shape(x)[1:] if np.ndim(x) > 0 else ()
        return jax.make_array_from_process_local_data(sharding, np.asarray(x), shape)

    return jax.tree_util.tree_unflatten(treedef, [place(x) for _, x in leaves])


def map_batch(fn, mesh: Mesh | None = None, axis: str = "batch"):
    """fn, a function of batched pytrees (every leaf's leading axis the batch, e.g. a
    `jax.vmap` of `jc.rollout`), run by each device of `mesh`'s `axis` on its own slice of the
    batch (`jax.shard_map`); outputs are sharded along `axis`. The solvers' early-exit loops
    then stay local to each device, where GSPMD's partitioning of the same program
    communicates on every iteration: with a 2-core CPU split into two devices, gymnasium's
    humanoid ran 2.4x faster than on one device this way and 2x slower partitioned by GSPMD
    (design note 60). The batch must be a multiple of the axis's device count."""
    mesh = batch_mesh(axis) if mesh is None else mesh
    spec = PartitionSpec(axis)
    # (check_vma=False: the solvers' custom batching rules do not declare varying axes)
    mapped = jax.shard_map(fn, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False)

    def run(*args):
        devices = mesh.shape[axis]
        sizes = sorted({np.shape(x)[0] for x in jax.tree.leaves(args) if np.ndim(x)})
        if not sizes or any(size % devices for size in sizes):
            raise ValueError(f"map_batch needs every argument leaf batched along its first axis "
                             f"by a multiple of the {devices} devices of mesh axis {axis!r}, got "
                             f"leading sizes {sizes}")
        return mapped(*args)

    return run
