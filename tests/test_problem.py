"""The step's problem as the solvers see it (jaxcontact/problem.py): `Hessian.projected`
projects only the solid elements that could make the Hessian indefinite, and a two-body
contact's element Hessian is kept `Factored` and acts as its matrices. (The assembly of the
problem from the terms: test_terms.py; its rows: test_terms_rows.py.)
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxcontact as jc
from jaxcontact import terms
from jaxcontact.problem import Factored, worth_factoring


@functools.partial(jax.jit, static_argnames="form")
def _hessian(model, state, form="exact"):
    """The step's `Hessian` (of `form`) at its free-flight velocities, one program."""
    control = jc.Control.zeros(model.n_body, model.n_motor, state.pos.dtype)
    args = (model, terms.prepare(model, state, control))
    return terms.hessian(args[1].u_free, args, form)[1]


def test_newton_projects_only_the_elements_that_could_make_the_hessian_indefinite():
    """`Hessian.projected` (design note 60): an element of a solid whose negative curvature
    its share of the mass covers is kept as it is (H stays positive definite with it); one
    whose negative curvature exceeds that share has its negative eigenvalues set to 0."""
    verts = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
    scene = jc.Scene(gravity=(0.0, 0.0, 0.0))
    scene.add_solid(verts, np.array([[0, 1, 2, 3]]), density=1000.0, youngs_modulus=1e4,
                    poisson_ratio=0.3)
    model, state = scene.build(dtype=jnp.float64)
    hessian = _hessian(model, state, "newton")
    (k,) = [k for k, p in enumerate(hessian.project) if p]
    share = float(hessian.diagonal.diagonal()[0])        # 4 particles of one tetrahedron
    q = np.linalg.qr(np.random.default_rng(0).normal(size=(12, 12)))[0]
    for lowest, projected in ((-0.5 * share, False), (-2.0 * share, True)):
        w = np.linspace(lowest, 3.0 * share, 12)
        a = jnp.asarray(q @ np.diag(w) @ q.T)[None]
        out = hessian.replace(local=hessian.local[:k] + (a,) + hessian.local[k + 1:]).projected()
        expect = q @ np.diag(np.maximum(w, 0.0) if projected else w) @ q.T
        np.testing.assert_allclose(out.local[k][0], expect, atol=1e-9 * share)


def test_a_two_body_contact_hessian_is_kept_factored_and_acts_as_its_matrices():
    """`problem.Factored`: two spheres pressed together keep their contact's element Hessian
    as (J, ∇²ℓ) (3 rows on 12 DOFs: 45 numbers instead of 144); the Hessian's product, block
    diagonal and dense form are those of the same matrices stored whole, and a sphere on the
    plane (6 DOFs) keeps its matrix whole."""
    assert worth_factoring(3, 12) and not worth_factoring(3, 6) and not worth_factoring(6, 12)
    scene = jc.Scene(dt=0.01, friction=0.5, stiffness=1e4)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.049), vel=(0.3, 0.0, -0.2))
    scene.add_sphere(0.05, 0.5, pos=(0.01, 0.0, 0.146), vel=(-0.4, 0.2, -0.5),
                     ang_vel=(1.0, 2.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    hessian = _hessian(model, state)
    kinds = [isinstance(a, Factored) for a in hessian.local]
    assert sorted(kinds) == [False, True]
    whole = hessian.replace(local=tuple(a.matrices() if isinstance(a, Factored) else a
                                        for a in hessian.local))
    (pair,) = [a for a in hessian.local if isinstance(a, Factored)]
    assert np.max(np.abs(pair.matrices())) > 1.0            # the contact is active
    v = jnp.asarray(np.random.default_rng(0).normal(size=hessian.size))
    scale = np.max(np.abs(whole.dense()))
    np.testing.assert_allclose(hessian.matvec(v), whole.dense() @ v, atol=1e-12 * scale * 12)
    np.testing.assert_allclose(hessian.dense(), whole.dense(), atol=1e-12 * scale)
    np.testing.assert_allclose(hessian.block_diagonal().dense(),
                               whole.block_diagonal().dense(), atol=1e-12 * scale)
