"""Multilevel preconditioning of mesh scenes (`jaxcontact.aggregation`,
`jaxcontact.solvers.multilevel`): aggregates cover the mesh, the coarse spaces are
orthonormal rigid motions, every level's matrix is the Galerkin product Pᵀ A P of the step's
Hessian (`terms.hessian`), and the V-cycle cuts the conjugate gradients' iterations on a
cloth while solving H x = b to the same answer as block-Jacobi and dense elimination."""

import functools

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
    the contact elements), the step's Hessian at the free flight, and a 2-level coarse space
    (level 1 capped low so that a second level exists)."""
    model, state = sheet_scene()
    structure = aggregation.hierarchy(model.n_particle, tuple(model.cloth.tris), coarsest=24)
    # the sheet sagging and the ball pressing into it
    sag = 0.02 * np.cos(np.pi * np.asarray(state.particle_pos[:, :2]) / 0.36).prod(axis=1)
    state = state.replace(particle_pos=state.particle_pos.at[:, 2].add(-jnp.asarray(sag)),
                          pos=state.pos.at[0, 2].add(-0.022))
    control = Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)

    @jax.jit
    def assembled(model, state):
        args = (model, terms.prepare(model, state, control))
        hessian = terms.hessian(terms.free_flight(args), args)[1]
        return hessian.replace(coarse=aggregation.coarse_space(structure, state.particle_pos))

    return model, state, assembled(model, state)


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
    model, _, hessian = sheet
    levels = hessian.coarse.structure.levels
    assert len(levels) == 2 and levels[1].count < levels[0].count < model.n_particle
    # every mesh particle is in an aggregate; the diagonal pairs come first
    assert np.all(levels[0].aggregate < levels[0].count)
    for level in levels:
        np.testing.assert_array_equal(level.rows[:level.count], np.arange(level.count))
        np.testing.assert_array_equal(level.cols[:level.count], np.arange(level.count))
        pairs = set(zip(level.rows.tolist(), level.cols.tolist()))
        assert pairs == {(j, i) for i, j in pairs}


def test_coarse_spaces_are_orthonormal_rigid_motions(sheet):
    _, state, hessian = sheet
    space = hessian.coarse
    p1 = dense_prolongation(space, 0, state.particle_pos.shape[0])
    p2 = dense_prolongation(space, 1, space.structure.levels[0].count)
    for p, kept in ((p1, space.kept[0]), (p1 @ p2, space.kept[1])):
        np.testing.assert_allclose(p.T @ p, np.diag(np.asarray(kept).reshape(-1)), atol=1e-10)
    # a rigid motion of the whole sheet is in both coarse spaces: P Pᵀ v = v
    x = np.asarray(state.particle_pos)
    v = (np.array([0.3, -0.2, 0.5]) + np.cross(np.array([1.0, 2.0, -0.5]), x)).reshape(-1)
    for p in (p1, p1 @ p2):
        np.testing.assert_allclose(p @ (p.T @ v), v, atol=1e-12)


def test_every_level_is_the_galerkin_product_of_the_hessian(sheet):
    _, state, hessian = sheet
    space, levels = hessian.coarse, hessian.coarse.structure.levels
    bodies = 6 * hessian.diagonal.blocks[0].shape[0]
    a = np.asarray(hessian.dense())[bodies:, bodies:]       # the particles' rows and columns
    p1 = dense_prolongation(space, 0, state.particle_pos.shape[0])
    p2 = dense_prolongation(space, 1, levels[0].count)
    matrices = jax.jit(multilevel.galerkin)(hessian, space)
    a1 = dense_level(matrices[0], levels[0])
    np.testing.assert_allclose(a1, p1.T @ a @ p1, atol=1e-9 * np.abs(a1).max())
    np.testing.assert_allclose(dense_level(matrices[1], levels[1]), p2.T @ a1 @ p2,
                               atol=1e-9 * np.abs(a1).max())


# the solves below stop at this residual relative to |b|
RTOL = 1e-10
# their error against the dense answer, relative to its largest entry: both reach ~7e-12;
# the worst case RTOL cond(H) (4e-4 here) is far from what either does
ANSWER_RTOL = 1e-9
CAP = 1000


@functools.partial(jax.jit, static_argnums=2)
def _cg(hessian, b, kind):
    """CG on H x = b preconditioned by `kind`, stopping at RTOL; counts its iterations (one
    product with H each: the preconditioner's own products are not counted)."""
    def matvec(v):
        jax.debug.callback(_count)
        return hessian.matvec(v)

    return linear.cg(matvec, linear.preconditioner(hessian, kind), b, CAP, RTOL,
                     early_exit=True)


_CALLS = []


def _count():
    _CALLS.append(1)


def test_the_v_cycle_cuts_conjugate_gradient_iterations_to_the_same_answer(sheet):
    _, _, hessian = sheet
    # a right-hand side with smooth and rough parts alike
    b = jnp.asarray(np.random.default_rng(0).normal(size=hessian.size))
    a = np.asarray(hessian.dense())
    assert np.linalg.eigvalsh(a)[0] > 0.0      # symmetric positive definite: CG applies
    exact = np.linalg.solve(a, np.asarray(b))
    out = {}
    for kind in ("block_jacobi", "multilevel"):
        _CALLS.clear()
        x = np.asarray(_cg(hessian, b, kind))
        jax.effects_barrier()
        out[kind] = len(_CALLS)
        assert np.linalg.norm(b - a @ x) <= 2 * RTOL * np.linalg.norm(b), kind
        np.testing.assert_allclose(x, exact, rtol=0, atol=ANSWER_RTOL * np.abs(exact).max(),
                                   err_msg=kind)
    jacobi, multi = out["block_jacobi"], out["multilevel"]
    assert jacobi < CAP          # both stopped at the tolerance
    # the V-cycle needs at most half of block-Jacobi's iterations (measured: 65 and 201)
    assert 2 * multi <= jacobi, (multi, jacobi)


def test_multilevel_needs_meshes_and_a_known_name(sheet):
    _, _, hessian = sheet
    with pytest.raises(ValueError, match="multilevel"):
        linear.preconditioner(hessian.replace(coarse=None), "multilevel")
    with pytest.raises(ValueError, match="preconditioner"):
        linear.preconditioner(hessian, "ilu")
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
