"""The constraint rows of a step (`terms.rows`, blocks of `problem.RowBlock`) are an exact
view of the primal problem: at the step's solution the rows' impulses λ = Π(-s e) balance
the momentum (stationarity), their Jacobians are autodiff's of their errors, and the contacts'
share of Φ's Hessian is the derivative of the rows' projection. Checked on the 4th step of
the solver scene's dense-Newton rollout (tests/_helpers.py). (The joints' rows:
models/test_joints.py.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.solvers.dual import project_cone, project_contact
from tests._helpers import contact_share, row_multipliers, solver_rollout, solver_scene


@pytest.fixture(scope="module")
def newton_run():
    model, state = solver_scene(jc.Newton())
    final, traj, info = solver_rollout(model, state)
    return model, final, traj, info


def _flat(values):
    return jnp.concatenate([v.reshape(-1) for v in values])


@jax.jit
def _views(model, state, u):
    """The step from `state` at its solution u, seen as rows and as the primal problem."""
    args = (model, terms.prepare(model, state, jc.Control.zeros(model.n_body)))
    return {"args": args, "rows": terms.rows(u, args),
            "jacobian": jax.jacfwd(lambda x: _flat(rb.error for rb in terms.rows(x, args)))(u),
            "gradient": terms.gradient(u, args), "free_flight": terms.free_flight(args),
            "hessian": terms.hessian(u, args)[1]}


# slow: the solver scene's dense-Newton rollout they read is ~100 s of compilation. In CI the
# same derivation from the terms is checked by test_terms.py (gradient and Hessians of a mixed
# scene against autodiff), and Dual, which steps on these rows, against closed forms by
# models/test_contact_physics.py and models/test_springs.py
ROWS_TIER = pytest.mark.slow


@pytest.fixture(scope="module")
def solved_step(newton_run):
    # the 4th step of the Newton rollout: the box lands on two corners, the ball slides (a
    # few steps later it lifts off: sliding, a contact rides up by μ |v_t| T with the cone
    # coupling). Its solution u (the solver's answer from the velocities after 3 steps) is
    # the velocity after it
    model, _, traj, info = newton_run
    assert bool(info.converged[3])
    state, after = (jax.tree.map(lambda x: x[i], traj) for i in (2, 3))
    u = dofs.velocity(after)
    return model, u, _views(model, state, u)


def _project(kind, y, limit, ratio):
    """A contact's multipliers y (..., 3) projected onto its set: friction's disc of radius
    `limit` ("contact") or the cone of μ = `limit` in the metric of the rows' compliance R
    (ratio R_t / R_n = s_n / s_t: SAP's impulse, Castro et al. 2022, Sec. V)."""
    if kind == "cone":
        return project_cone(y, limit, ratio)
    return project_contact(y, limit)


def _ratio(stiffness):
    """s_n / s_t of each contact (1 for unused rows, stiffness 0: their y is 0)."""
    used = stiffness[..., 1] > 0.0
    return jnp.where(used, stiffness[..., 0] / jnp.where(used, stiffness[..., 1], 1.0), 1.0)



def _multipliers(rows):
    """λ = Π(-s e) per block of rows (`row_multipliers`), a contact's onto its disc or cone
    (`_project`)."""
    return row_multipliers(rows, lambda rb, y: _project(rb.kind, y, rb.limit,
                                                        _ratio(rb.stiffness)))


def _assemble(rows, n):
    """The rows' Jacobians as one dense (R, n) matrix G."""
    return np.concatenate([np.asarray(rb.dense_jac(n)) for rb in rows])


def _contact_blocks(model, rows):
    """Indices of the contact terms' blocks of rows."""
    names = {t.name for t in model.terms if t.reports_gaps}
    return [i for i, rb in enumerate(rows) if rb.term in names]


@ROWS_TIER
def test_rows_stationarity_is_the_primal_residual(solved_step):
    # M (u - ũ) = Σ Gᵀ λ with λ = Π(-s e) at the primal solution (huber friction, linear law)
    model, u, view = solved_step
    rows, args = view["rows"], view["args"]
    contact = [rows[i] for i in _contact_blocks(model, rows)]
    assert all(rb.kind == jc.Contact().coupling for rb in contact)   # "cone" by default
    lam = _multipliers(rows)
    pushing = sum(int(jnp.sum(lam[i][..., 0] > 0.0)) for i in _contact_blocks(model, rows))
    assert pushing >= 3, "the ball and two corners of the box must push"
    n = u.shape[0]
    impulse = sum(rb.transpose_apply(l, n) for rb, l in zip(rows, lam))
    momentum = terms.mass(args).apply(u - view["free_flight"])
    np.testing.assert_allclose(momentum, impulse, atol=1e-9)
    np.testing.assert_allclose(view["gradient"], momentum - impulse, atol=1e-9)


@ROWS_TIER
def test_row_jacobians_match_autodiff_of_the_errors(solved_step):
    model, u, view = solved_step
    rows, dense = view["rows"], np.asarray(view["jacobian"])  # (R, 6N)
    # spring rows depend on u through q+(u); contact rows are linear in u, J x - v̂ with J
    # and v̂ frozen at the start of the step
    n = model.n_body
    assembled = _assemble(rows, 6 * n)
    np.testing.assert_allclose(assembled, dense, atol=1e-10)
    contact = _contact_blocks(model, rows)
    offsets = np.cumsum([0] + [rb.error.size for rb in rows])
    linear = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in contact])
    error = np.asarray(_flat(rb.error for rb in rows))
    target = np.asarray(_flat(rows[i].error - jnp.einsum("ecrd,ed->ecr", rows[i].jac,
                                                         dofs.gather(u, rows[i].index))
                              for i in contact))
    np.testing.assert_allclose(assembled[linear] @ np.asarray(u) + target, error[linear],
                               atol=1e-12)
    # the target v̂ = (-d₀/T, 0, 0): friction rows are the slip velocity itself (to rounding:
    # target = e - J x is a difference; exactly 0 in one run order, 4e-15 in another)
    np.testing.assert_allclose(target.reshape(-1, 3)[:, 1:], 0.0, rtol=0, atol=1e-12)
    # K contacts with a normal and two friction rows each; the springs: one stretch row (rest
    # length 0.1) and the three rows of the zero-length one
    k = sum(rows[i].error.shape[0] * rows[i].error.shape[1] for i in contact)
    assert assembled.shape == (3 * k + 1 + 3, 6 * n)


@ROWS_TIER
def test_contact_hessian_is_the_derivative_of_the_rows_projection(solved_step):
    # the contacts' impulse at velocity v is γ = Π(y), y = -S (v - v̂) (the stationarity
    # above), and -γ is ℓ's gradient: their share of Φ's Hessian is Jᵀ (∂Π/∂y) S J
    model, u, view = solved_step
    rows, n = view["rows"], 6 * model.n_body
    got = np.asarray(contact_share(view["hessian"], model).dense())
    want = np.zeros((n, n))
    for i in _contact_blocks(model, rows):
        rb = rows[i]
        s = rb.stiffness.reshape(-1, 3)
        y = -s * rb.error.reshape(-1, 3)
        limit, ratio = rb.limit.reshape(-1), _ratio(s)
        slope = jax.vmap(jax.jacfwd(lambda y, b, r, kind=rb.kind: _project(kind, y, b, r)))(
            y, limit, ratio)
        local = np.asarray(slope * s[:, None, :])            # (∂Π/∂y) S per contact
        count = local.shape[0]
        curvature = np.zeros((3 * count, 3 * count))
        for c in range(count):
            curvature[3 * c:3 * c + 3, 3 * c:3 * c + 3] = local[c]
        jac = np.asarray(rb.dense_jac(n))
        want += jac.T @ curvature @ jac
    assert np.max(np.abs(want)) > 0.1                       # the contacts push
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.max(np.abs(want)))
