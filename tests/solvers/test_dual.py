"""Dual ascent (`jaxcontact.solvers.dual`, Jacobi XPBD): its projections onto friction's
disc and cone are the projections in their metric; one Jacobi sweep clamps one-sided rows and
leaves two-sided ones free; laws without a compliance form are refused by name. (Dual against
closed forms: models/test_contact_physics.py, models/test_springs.py; against Newton:
test_solvers_agree.py; its mass-ratio weakness: test_mass_stiffness_ratios.py and
test_mass_ratio_stack.py; the rows it steps on: tests/test_terms_rows.py.)
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.problem import BlockDiagonal, Problem, RowBlock
from jaxcontact.solvers.dual import project_cone, project_contact


# --- projection -------------------------------------------------------------------------

def _projection_is_optimal(y, p, inside, metric, samples):
    """The variational inequality of the projection p of y onto a convex set in the metric
    diag(metric): (y - p)ᵀ D (q - p) <= 0 for every q of the set (`samples`, all inside)."""
    assert np.all(inside(samples))
    assert np.all(inside(p[:, None, :]))
    slack = np.einsum("ki,i,kmi->km", y - p, metric, samples - p[:, None, :])
    assert np.max(slack) <= 1e-12 * np.max(np.abs(y)) ** 2, np.max(slack)


def test_dual_projection_onto_friction_disc():
    # λ_n >= 0, |λ_t| <= b: a product of sets, its projection componentwise
    rng = np.random.default_rng(0)
    y = rng.normal(size=(64, 3))
    bound = rng.uniform(0.0, 1.0, size=64)
    p = np.asarray(project_contact(jnp.asarray(y), jnp.asarray(bound)))
    np.testing.assert_allclose(p[:, 0], np.maximum(y[:, 0], 0.0))
    radius = np.linalg.norm(y[:, 1:], axis=1)
    np.testing.assert_allclose(np.linalg.norm(p[:, 1:], axis=1), np.minimum(radius, bound),
                               rtol=1e-14)
    # the direction of the slip is kept
    np.testing.assert_allclose(p[:, 1] * y[:, 2], p[:, 2] * y[:, 1], atol=1e-15)

    def inside(q):
        return (q[..., 0] >= 0.0) & (np.linalg.norm(q[..., 1:], axis=-1)
                                     <= (bound if q.ndim == 2 else bound[:, None]) * (1 + 1e-12))

    samples = rng.normal(size=(64, 200, 3))
    samples[..., 0] = np.abs(samples[..., 0])
    samples[..., 1:] *= (bound[:, None] * rng.uniform(size=(64, 200)) / np.linalg.norm(
        samples[..., 1:], axis=-1))[..., None]
    _projection_is_optimal(y, p, inside, np.ones(3), samples)


@pytest.mark.parametrize("ratio", [1.0, 0.2, 5.0])
def test_dual_projection_onto_the_cone_in_its_metric(ratio):
    # |λ_t| <= μ λ_n, projected in the metric diag(D_n, D_t, D_t), ratio = D_t / D_n: inside
    # stays, the polar cone goes to 0, the rest to the surface (the nearest point)
    rng = np.random.default_rng(1)
    mu = 0.6
    y = rng.normal(size=(64, 3))
    p = np.asarray(project_cone(jnp.asarray(y), mu, ratio))

    def inside(q):
        return np.linalg.norm(q[..., 1:], axis=-1) <= mu * q[..., 0] * (1 + 1e-12) + 1e-15

    cases = {"inside": inside(y), "polar": mu * ratio * np.linalg.norm(y[:, 1:], axis=1)
             <= -y[:, 0]}
    assert all(c.any() for c in cases.values()) and not np.all(cases["inside"]
                                                              | cases["polar"])
    np.testing.assert_array_equal(p[cases["inside"]], y[cases["inside"]])
    np.testing.assert_array_equal(p[cases["polar"]], 0.0)
    samples = rng.normal(size=(64, 200, 3))
    samples[..., 0] = np.abs(samples[..., 0]) * 3.0
    samples[..., 1:] *= (mu * samples[..., 0] * rng.uniform(size=(64, 200)) / np.linalg.norm(
        samples[..., 1:], axis=-1))[..., None]
    _projection_is_optimal(y, p, inside, np.array([1.0, ratio, ratio]), samples)


@pytest.mark.parametrize("contact, law", [(jc.Contact(normal="power"), "normal"),
                                          (jc.Contact(friction="tanh"), "friction")])
def test_dual_refuses_laws_without_a_compliance_form(contact, law):
    s = jc.Scene()
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0, 0, 0.05))
    with pytest.raises(ValueError, match=law):
        s.build(contact=contact, solver=jc.Dual())


# --- one Jacobi sweep on rows ----------------------------------------------------------------

def _one_body_rows(args):
    """Two blocks of two rows on body 0 (the world on the other side), bilateral and
    one-sided, with constant errors: row j pushes along axis j."""
    jac = jnp.zeros((1, 2, 12)).at[0, 0, 0].set(1.0).at[0, 1, 1].set(1.0)

    def block(kind):
        return RowBlock(error=args["error"], jac=jac, stiffness=args["stiffness"],
                        limit=jnp.zeros((1, 2)),
                        index=jnp.asarray([list(range(6)) + [6] * 6], jnp.int32),
                        blocks=jnp.asarray([[0, -1]], jnp.int32),
                        slots=((0, 0, 6), (0, 6, 6)), kind=kind)

    return block("bilateral"), block("unilateral")


_UNIT_MASS = BlockDiagonal((jnp.eye(6)[None], jnp.zeros((0, 3, 3))),
                           inverses=(jnp.eye(6)[None], jnp.zeros((0, 3, 3))))
_ROWS_PROBLEM = Problem(
    gradient=lambda u, args: u - args["free"], hessian=None, along=None,
    rows=lambda u, args: _one_body_rows(args), mass=lambda args: _UNIT_MASS,
    start=lambda args: args["free"], resolution=lambda args: jnp.zeros_like(args["free"]))


def test_dual_clamps_one_sided_joint_rows_and_leaves_two_sided_ones_free():
    # one Jacobi sweep from λ = 0: λ = -s e / (s W + 1), W = g M̃⁻¹ gᵀ with the unit mass split
    # among the 3 active rows (both bilateral rows, the violated one-sided row): W = 3
    args = {"error": jnp.asarray([[-1.0, 2.0]]), "stiffness": jnp.full((1, 2), 2.0),
            "free": jnp.arange(6.0)}
    solver = jc.Dual()
    carry = solver.start(_ROWS_PROBLEM, None, args)
    carry, moved = solver.iteration(_ROWS_PROBLEM, carry, args)
    assert bool(moved)
    bilateral, one_sided = (np.asarray(l).reshape(-1) for l in carry.lam)
    np.testing.assert_allclose(bilateral, [2.0 / 7.0, -4.0 / 7.0], rtol=1e-14)
    np.testing.assert_allclose(one_sided, [2.0 / 7.0, 0.0], rtol=1e-14)    # λ >= 0
    # u moves by M⁻¹ Σ Gᵀ λ: rows 0 along x, rows 1 along y
    np.testing.assert_allclose(carry.u - args["free"], [4.0 / 7.0, -4.0 / 7.0, 0, 0, 0, 0],
                               rtol=1e-14, atol=1e-15)
