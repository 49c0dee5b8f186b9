"""Multilevel preconditioning of mesh scenes (`jaxcontact.aggregation`,
`jaxcontact.solvers.multilevel`): aggregates cover the mesh, the coarse spaces are
orthonormal rigid motions, every level's matrix is the Galerkin product Pᵀ A P of the
Jacobian, and the V-cycle cuts BiCGSTAB's iterations on a cloth while solving J x = b and
Jᵀ x = b to the same answer. Also the other large-mesh measure: element passes in cache-sized
chunks give the numbers of whole-array passes."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import aggregation, terms
from jaxcontact.solvers import linear, multilevel
from jaxcontact.types import Control


def test_greedy_aggregates_cover_a_path_with_connected_groups():
    neighbours = [[1], [0, 2], [1, 3], [2, 4], [3, 5], [4], []]   # a path and a lone node
    aggregate, count = aggregation.greedy_aggregates(neighbours)
    np.testing.assert_array_equal(aggregate, [0, 0, 1, 1, 1, 1, 2])
    assert count == 3


def sheet_scene():
    verts, tris = jc.meshes.grid((0.36, 0.36), (12, 12))
    scene = jc.Scene(dt=0.01)
    index = scene.add_cloth(verts, tris, density=0.2, stretch_stiffness=1e3,
                            bend_stiffness=1e-4, damping=0.05, pos=(0.0, 0.0, 0.5))
    for corner in (0, 12, 156, 168):
        scene.attach(int(index[corner]), -1, stiffness=1e4)
    scene.add_sphere(0.05, mass=0.05, pos=(0.0, 0.0, 0.55))
    return scene.build()


@pytest.fixture(scope="module")
def sheet():
    """A 12 x 12 cloth held at its corners with a ball pressed into its middle (body slots in
    the contact elements), its Jacobian there, and a 2-level
    coarse space (level 1 capped low so that a second level exists)."""
    model, state = sheet_scene()
    structure = aggregation.hierarchy(model.n_particle, tuple(model.cloth.tris), coarsest=24)
    # the sheet sagging and the ball pressing into it
    sag = 0.02 * np.cos(np.pi * np.asarray(state.particle_pos[:, :2]) / 0.36).prod(axis=1)
    state = state.replace(particle_pos=state.particle_pos.at[:, 2].add(-jnp.asarray(sag)),
                          pos=state.pos.at[0, 2].add(-0.022))
    control = Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)

    @jax.jit
    def linearized(model, state):
        args = (model, terms.prepare(model, state, control))
        jac = terms.linearize(args[1].u_flight, args)[1]
        return jac.replace(coarse=aggregation.coarse_space(structure, state.particle_pos))

    return model, state, linearized(model, state)


def dense_prolongation(space, depth, n_finer):
    """The level-(depth + 1) prolongation as a dense (n_finer x 6 count) matrix."""
    level, basis = space.structure.levels[depth], np.asarray(space.basis[depth])
    size = basis.shape[1]
    out = np.zeros((size * n_finer, 6 * level.count))
    for i, a in enumerate(level.aggregate):
        if a < level.count:
            out[size * i:size * i + size, 6 * a:6 * a + 6] = basis[i]
    return out


def dense_level(values, level):
    out = np.zeros((level.count, level.count, 6, 6))
    np.add.at(out, (level.rows, level.cols), np.asarray(values))
    return out.transpose(0, 2, 1, 3).reshape(6 * level.count, 6 * level.count)


def test_the_hierarchy_shrinks_and_its_patterns_are_symmetric(sheet):
    model, _, jac = sheet
    levels = jac.coarse.structure.levels
    assert len(levels) == 2 and levels[1].count < levels[0].count < model.n_particle
    # every mesh particle is in an aggregate; the diagonal pairs come first
    assert np.all(levels[0].aggregate < levels[0].count)
    for level in levels:
        np.testing.assert_array_equal(level.rows[:level.count], np.arange(level.count))
        np.testing.assert_array_equal(level.cols[:level.count], np.arange(level.count))
        pairs = set(zip(level.rows.tolist(), level.cols.tolist()))
        assert pairs == {(j, i) for i, j in pairs}


def test_coarse_spaces_are_orthonormal_rigid_motions(sheet):
    _, state, jac = sheet
    space = jac.coarse
    p1 = dense_prolongation(space, 0, state.particle_pos.shape[0])
    p2 = dense_prolongation(space, 1, space.structure.levels[0].count)
    for p, kept in ((p1, space.kept[0]), (p1 @ p2, space.kept[1])):
        np.testing.assert_allclose(p.T @ p, np.diag(np.asarray(kept).reshape(-1)), atol=1e-10)
    # a rigid motion of the whole sheet is in both coarse spaces: P Pᵀ v = v
    x = np.asarray(state.particle_pos)
    v = (np.array([0.3, -0.2, 0.5]) + np.cross(np.array([1.0, 2.0, -0.5]), x)).reshape(-1)
    for p in (p1, p1 @ p2):
        np.testing.assert_allclose(p @ (p.T @ v), v, atol=1e-12)


def test_every_level_is_the_galerkin_product_of_the_jacobian(sheet):
    _, state, jac = sheet
    space, levels = jac.coarse, jac.coarse.structure.levels
    bodies = 6 * jac.diagonal.blocks[0].shape[0]
    a = np.asarray(jac.dense())[bodies:, bodies:]       # the particles' rows and columns
    p1 = dense_prolongation(space, 0, state.particle_pos.shape[0])
    p2 = dense_prolongation(space, 1, levels[0].count)
    matrices = jax.jit(multilevel.galerkin)(jac, space)
    a1 = dense_level(matrices[0], levels[0])
    np.testing.assert_allclose(a1, p1.T @ a @ p1, atol=1e-9 * np.abs(a1).max())
    np.testing.assert_allclose(dense_level(matrices[1], levels[1]), p2.T @ a1 @ p2,
                               atol=1e-9 * np.abs(a1).max())


@pytest.mark.parametrize("transpose", [False, True])
def test_the_v_cycle_cuts_bicgstab_iterations_to_the_same_answer(sheet, transpose):
    _, _, jac = sheet
    # a right-hand side with smooth and rough parts alike
    b = jnp.asarray(np.random.default_rng(0).normal(size=jac.size))
    a = np.asarray(jac.dense())
    exact = np.linalg.solve(a.T if transpose else a, np.asarray(b))

    @partial(jax.jit, static_argnums=(2, 3))
    def solve(jac, b, iterations, kind):
        matvec = jac.rmatvec if transpose else jac.matvec
        return linear.bicgstab(matvec, linear.preconditioner(jac, kind, transpose), b,
                               iterations, rtol=1e-10)

    def error(kind, iterations):
        x = solve(jac, b, iterations, kind)
        return float(jnp.max(jnp.abs(x - exact)) / np.abs(exact).max())

    # in 100 iterations the V-cycle solves to 1e-9, block-Jacobi not to 1e-5
    assert error("multilevel", 100) < 1e-9
    assert error("block_jacobi", 100) > 1e-5


def test_multilevel_needs_meshes_and_a_known_name(sheet):
    _, _, jac = sheet
    with pytest.raises(ValueError, match="multilevel"):
        linear.preconditioner(jac.replace(coarse=None), "multilevel")
    with pytest.raises(ValueError, match="preconditioner"):
        linear.preconditioner(jac, "ilu")
    with pytest.raises(ValueError, match="preconditioner"):
        jc.Newton(preconditioner="ilu")
    with pytest.raises(ValueError, match="preconditioner"):
        jc.Implicit(preconditioner="amg")


@pytest.mark.slow
def test_steps_and_gradients_are_the_same_with_either_preconditioner():
    """The ball dropped on the sheet for 20 steps: Newton's Krylov directions and the
    adjoint preconditioned by the V-cycle give the block-Jacobi rollout and its gradient
    with respect to the stretch stiffness."""
    model, state = sheet_scene()

    def loss(log_k, kind):
        solver = jc.Newton(preconditioner=kind, adjoint=jc.Implicit(preconditioner=kind))
        m = model.replace(solver=solver, cloth=model.cloth.replace(
            stretch_stiffness=jnp.exp(log_k) * jnp.ones_like(model.cloth.stretch_stiffness)))
        final, _, info = jc.rollout(m, state, steps=20, return_info=True)
        return final.pos[0, 2] + jnp.mean(final.particle_pos[:, 2]), info

    x = jnp.log(1e3)
    out = {kind: jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)(x, kind)
           for kind in ("block_jacobi", "multilevel")}
    for kind, ((_, info), _) in out.items():
        assert bool(jnp.all(info.converged)), kind
    (v0, _), g0 = out["block_jacobi"]
    (v1, _), g1 = out["multilevel"]
    np.testing.assert_allclose(v1, v0, rtol=1e-9)
    np.testing.assert_allclose(g1, g0, rtol=1e-6)
    assert abs(float(g0)) > 0.0


def test_cache_sized_chunks_of_large_terms_give_the_same_numbers(sheet, monkeypatch):
    """Large terms' element passes run in cache-sized pieces (`terms._each`,
    `terms.merit_change`): with the thresholds lowered so that every term of the sheet is
    chunked (chunks of 32 elements that do not divide the element counts), the gradient, the
    exact and Gauss-Newton Jacobians and the line search's merit changes are those of the
    whole-array passes."""
    model, state, _ = sheet
    control = Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)
    args = (model, jax.jit(terms.prepare)(model, state, control))
    u = args[1].u_flight
    direction = jax.random.normal(jax.random.PRNGKey(0), u.shape, u.dtype)
    trial = u[None] + jnp.asarray([1e-3, 1e-2, 1e-1])[:, None] * direction[None]

    def passes(u, trial, args):
        g, jac = terms.linearize(u, args)
        return (g, jac.dense(), terms.gauss_newton(u, args).dense(),
                terms.merit_change(u, u, trial, args))

    whole = jax.jit(passes)(u, trial, args)
    big = [el.index.shape[0] for el in args[1].elements if el.live is None]
    assert max(big) > 64 and any(n % 32 for n in big if n > 64)
    monkeypatch.setattr(terms, "_CACHE_CHUNK", 32)
    monkeypatch.setattr(terms, "_CACHED_ENTRIES", 1)
    monkeypatch.setattr(terms, "_CACHED_VALUES", 1)
    chunked = jax.jit(passes)(u, trial, args)
    for name, a, b in zip(("gradient", "exact Jacobian", "Gauss-Newton", "merit change"),
                          jax.tree.leaves(chunked), jax.tree.leaves(whole)):
        scale = float(jnp.max(jnp.abs(b)))
        assert scale > 0.0, name
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale, err_msg=name)
