"""The solver family: Newton (dense and matrix-free), Descent and Dual reach the same step.

- the constraint rows are an exact view of the primal problem (stationarity, Jacobians, and
  the contacts' Hessian as the derivative of the rows' projection),
- every solver converges to the dense-Newton solution, and gives the same implicit gradient
  (the scene and its runs: _helpers.py; an unconverged solve's report: test_step.py; the
  dense vs matrix-free adjoint: test_adjoint.py),
- Dual's projections onto friction's disc and cone are the projections in their metric (the
  Krylov solves: test_linear.py).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.solvers import tolerances
from jaxcontact.solvers.dual import project_cone, project_contact
from _helpers import contact_share, solver_rollout, solver_run, solver_scene

SOLVERS = {
    "newton": jc.Newton(),
    # conjugate gradients on the exact Hessian (inexact Newton: FORCING), loops exiting early
    "newton_cg": jc.Newton(linear="cg", early_exit=True),
    "descent": jc.Descent(iterations=400),
    "dual": jc.Dual(iterations=600, update="exact"),
}


@functools.cache
def _run(name):
    """(final, traj, info) of the solver scene's rollout with SOLVERS[name]; computed once."""
    model, state = solver_scene(SOLVERS[name])
    return solver_rollout(model, state)


@functools.cache
def _gradient(name):
    """The gradient of a linear functional of the solver scene's final state with
    SOLVERS[name] (`_helpers.solver_run`: its rollout and gradient as one program, the larger
    of the two). Only the slow run asks for it: CI checks implicit gradients on smaller scenes
    (against finite differences in test_gradients.py, dense against matrix-free in
    test_adjoint.py)."""
    return solver_run(SOLVERS[name])[1]


@pytest.fixture(scope="module")
def newton_run():
    model, _ = solver_scene(SOLVERS["newton"])
    final, traj, info = _run("newton")
    return model, final, traj, info


@pytest.fixture(scope="module")
def reference(newton_run):
    _, final, _, info = newton_run
    assert bool(jnp.all(info.converged))
    return final


def _assert_reaches(final, info, reference):
    assert bool(jnp.all(info.converged)), f"max residual {float(jnp.max(info.residual)):.2e}"
    assert float(jnp.max(info.residual)) <= 1e-10
    np.testing.assert_allclose(final.pos, reference.pos, atol=1e-9)
    np.testing.assert_allclose(final.vel, reference.vel, atol=1e-7)
    np.testing.assert_allclose(final.ang_vel, reference.ang_vel, atol=1e-6)


# all slow (each ~1-2 min of compilation, plus the Newton reference). In CI, test_physics
# runs Descent and Dual against closed forms, and the matrix-free Newton solvers are checked
# on a small scene by test_krylov_newton_reaches_the_dense_newton_solution below
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) for n in SOLVERS if n != "newton"])
def test_every_solver_reaches_the_newton_solution(name, reference):
    final, _, info = _run(name)
    _assert_reaches(final, info, reference)


def _coupled_spheres(solver):
    """Two spheres sliding and spinning on the ground, coupled by a spring: the spring's
    off-diagonal blocks keep the block-Jacobi preconditioner from solving the step alone."""
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    a = s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 3.0))
    b = s.add_sphere(0.05, 2.0, (0.3, 0.0, 0.052), vel=(0.0, 0.5, -0.2), ang_vel=(1.0, 2.0, 0.5))
    s.add_spring(a, b, stiffness=5e2, anchor_a=(0.0, 0.0, 0.05), anchor_b=(-0.1, 0.0, 0.0),
                 rest_length=0.1)
    s.exclude_pair(a, b)
    return s.build(solver=solver)


@functools.cache
def _coupled_run(name):
    """(final, traj, info) of the coupled spheres' rollout with SOLVERS[name]; computed once."""
    model, state = _coupled_spheres(SOLVERS[name])
    return solver_rollout(model, state)


# CI's check of the matrix-free Newton solver (the solver scene's runs above are slow)
def test_krylov_newton_reaches_the_dense_newton_solution():
    # same step as dense Newton, on a small coupled scene
    reference, traj, info = _coupled_run("newton")
    assert bool(jnp.all(info.converged))
    # both spheres stay on the ground, within 2 mm of resting on it (sliding, they ride up
    # by μ |v_t| T with the cone coupling, `models.contact`; in free fall they would end 8
    # and 14 mm lower)
    assert float(jnp.max(jnp.abs(traj.pos[:, :, 2] - 0.05))) < 2e-3, \
        "both spheres must stay in contact"
    final, _, info = _coupled_run("newton_cg")
    _assert_reaches(final, info, reference)


@pytest.fixture(scope="module")
def reference_grad():
    return _gradient("newton")


@pytest.mark.parametrize("name", [
    pytest.param("newton_cg", marks=pytest.mark.slow),
    pytest.param("descent", marks=pytest.mark.slow), pytest.param("dual", marks=pytest.mark.slow)])
def test_implicit_gradient_is_the_same_whichever_solver_converged(name, reference_grad):
    grad = _gradient(name)
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# --- the rows are an exact view of the primal problem ------------------------------------

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
# test_physics.py and test_springs.py
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
    """λ = Π(-s e) per block of rows, the rows' laws in compliance form: free for bilateral
    rows, λ >= 0 for one-sided ones, a contact's onto its disc or cone (`_project`)."""
    out = []
    for rb in rows:
        lam = -rb.stiffness * rb.error
        if rb.kind == "unilateral":
            lam = jnp.maximum(lam, 0.0)
        elif rb.kind in ("contact", "cone"):
            lam = _project(rb.kind, lam, rb.limit, _ratio(rb.stiffness))
        out.append(lam)
    return out


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


# --- settings validation ------------------------------------------------------------------

@pytest.mark.parametrize("cls, kwargs, name", [
    (jc.Descent, {"iterations": 0}, "iterations"),
    (jc.Descent, {"alpha": 1.5}, "alpha"),
    (jc.Descent, {"alpha": 0.0}, "alpha"),
    (jc.Dual, {"update": "lazy"}, "update"),
    (jc.Dual, {"mass_splitting": 1}, "mass_splitting"),
    (jc.Dual, {"tol": -1.0}, "tol"),
    (jc.Newton, {"linear": "gmres"}, "linear"),
    (jc.Newton, {"linear": "bicgstab"}, "linear"),
    (jc.Newton, {"linear": "cr"}, "linear"),
    (jc.Newton, {"krylov_iterations": 0}, "krylov_iterations"),
    (jc.Dual, {"ad": "fd"}, "ad"),
    (jc.Descent, {"adjoint": "lu"}, "adjoint"),
    (jc.Descent, {"preconditioner": "jacobi"}, "preconditioner"),
])
def test_bad_solver_settings_name_the_argument(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


@pytest.mark.parametrize("contact, law", [(jc.Contact(normal="power"), "normal"),
                                          (jc.Contact(friction="tanh"), "friction")])
def test_dual_refuses_laws_without_a_compliance_form(contact, law):
    s = jc.Scene()
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0, 0, 0.05))
    with pytest.raises(ValueError, match=law):
        s.build(contact=contact, solver=jc.Dual())


def test_a_newton_step_that_converges_ends_the_solve():
    """The driver tests the residual at the iterate a step just reached (design note 34): a
    particle on a zero-length spring to the world is a quadratic step, which one Newton
    iteration solves, and the solve stops there. Before, the driver found convergence only at
    the start of the next iteration, so this step cost two whole iterations."""
    passes = []

    @dataclasses.dataclass(frozen=True)
    class CountingNewton(jc.Newton):
        def iteration(self, problem, carry, args):
            jax.debug.callback(lambda: passes.append(1))
            return super().iteration(problem, carry, args)

    m, k = 0.5, 1e3
    scene = jc.Scene(dt=0.002)
    p = scene.add_particle(m, (0.3, 0.0, 1.0))
    scene.attach(p, -1, stiffness=k, damping=2.0 * np.sqrt(k * m))
    model, state = scene.build(solver=CountingNewton(), dtype=jnp.float64)
    _, info = jax.jit(jc.step)(model, state)
    jax.effects_barrier()
    assert bool(info.converged) and int(info.iterations) == 1
    assert len(passes) == 1


def test_a_light_box_tipping_at_a_large_step_converges():
    """A 10 g cube rolling onto its leading edge at Δt = 1e-2, μ = 1, critically damped
    k_n = 1e5 (k_n Δt²/m = 1e3; the convergence grid's hardest kind of cell, where v1's
    Newton circled the roots of the tipping steps, design notes 43, 51). Each step minimizes
    one convex Φ: every step converges, the box pivoting on its leading edge, its centre
    rising as h (cos θ + sin θ) does."""
    mass, k = 0.01, 1e5
    half = 0.05
    scene = jc.Scene(dt=0.01, friction=1.0, stiffness=k, damping=2.0 * np.sqrt(k * mass))
    scene.add_plane()
    scene.add_box(half, mass, (0.0, 0.0, half), vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 20.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    # batched with the same box thrown at half the speed: the solver under vmap
    states = jax.tree.map(lambda a: jnp.stack([a, a]), state)
    states = states.replace(vel=states.vel.at[1].multiply(0.5))
    _, traj, info = jax.jit(jax.vmap(lambda s: jc.rollout(model, s, steps=25,
                                                          return_info=True)))(states)
    assert bool(jnp.all(info.converged)), (np.asarray(info.iterations),
                                           np.asarray(info.residual))
    assert int(jnp.max(info.iterations)) < model.solver.iterations
    traj = jax.tree.map(lambda a: a[0], traj)
    # after the first step the box stands on its leading edge (+x), tilted by θ about y
    quat = np.asarray(traj.quat[0, 0])
    theta = 2.0 * np.arctan2(quat[2], quat[0])
    assert 0.05 < theta < 0.25, theta
    np.testing.assert_allclose(float(traj.pos[0, 0, 2]),
                               half * (np.cos(theta) + np.sin(theta)), atol=1e-3)


class _Slopes:
    """A one-dimensional 'problem' for Newton's line search: φ'(α) piecewise linear and
    increasing, given by breakpoints and the slope of φ' (curvature) on each piece."""

    def __init__(self, start, breaks, curvatures):
        self.start, self.breaks, self.curvatures = start, breaks, curvatures

    def along(self, u, d, alpha, args):
        s, c, left = jnp.asarray(self.start), self.curvatures[0], 0.0
        for b, c_next in zip(self.breaks, self.curvatures[1:]):
            s = s + c * (jnp.clip(alpha, left, b) - left)
            s, left, c = s, b, jnp.where(alpha > b, c_next, c)
        return s + c * jnp.maximum(alpha - left, 0.0), c


@pytest.mark.parametrize("start, breaks, curvatures", [
    # a contact that comes into play at α = 3e-6, 3.6e5 times stiffer than the inertia that
    # made the direction (fuzz benchmark, 1 mg bodies on a 4e5 N/m surface)
    (-1.465e-5, [3e-6, 3e-5], [1.465e-5, 5.288, 4.226]),
    # a slip passing through zero along d: friction sticks on a narrow, stiff segment
    # (the tipping box of tests/test_step.py, coupling "lagged", step 11)
    (-0.02623, [2.6e-4, 4.41e-3], [0.02622, 6.870, 0.02622]),
    # plain quadratic: the first trial is the answer
    (-2.0, [], [2.0]),
])
def test_line_search_finds_the_minimum_where_the_curvature_jumps(start, breaks, curvatures):
    problem = _Slopes(start, breaks, curvatures)
    alpha = jc.Newton().search(problem, None, None, jnp.asarray(start), None)
    slope, _ = problem.along(None, None, alpha, None)
    assert 0.0 < float(alpha) and abs(float(slope)) <= tolerances.LINE_TOL * abs(start), (
        alpha, slope)


def test_element_projection_clamps_negative_eigenvalues_and_keeps_psd_matrices():
    """`linalg.project_psd` (Newton's directions for solids, design note 60): the nearest
    positive semi-definite matrix, eigenvectors kept, negative eigenvalues set to 0; the
    Cholesky test flags only matrices with an eigenvalue below -√eps max|a| (a rank-deficient
    PSD matrix, like a tetrahedron's with its rigid modes, passes)."""
    from jaxcontact import linalg
    rng = np.random.default_rng(3)
    q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    w = np.linspace(-2.0, 5.0, 12)
    a = q @ np.diag(w) @ q.T
    psd = q @ np.diag(np.maximum(w, 0.0)) @ q.T
    np.testing.assert_allclose(linalg.project_psd(jnp.asarray(a)), psd, atol=1e-12)
    np.testing.assert_allclose(np.linalg.eigvalsh(np.asarray(linalg.project_psd(jnp.asarray(a)))),
                               np.sort(np.maximum(w, 0.0)), atol=1e-12)
    flags = linalg.indefinite(jnp.asarray(np.stack([a, psd, q[:, :6] @ q[:, :6].T])))
    assert flags.tolist() == [True, False, False]
    # with a floor (an element's share of the mass): indefinite only below -floor
    assert linalg.indefinite(jnp.asarray(a), 1.9).tolist() is True
    assert linalg.indefinite(jnp.asarray(a), 2.1).tolist() is False


def test_newton_projects_only_the_elements_that_could_make_the_hessian_indefinite():
    """`Hessian.projected` (design note 60): an element of a solid whose negative curvature
    its share of the mass covers is kept as it is (H stays positive definite with it); one
    whose negative curvature exceeds that share has its negative eigenvalues set to 0."""
    verts = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
    scene = jc.Scene(gravity=(0.0, 0.0, 0.0))
    scene.add_solid(verts, np.array([[0, 1, 2, 3]]), density=1000.0, youngs_modulus=1e4,
                    poisson_ratio=0.3)
    model, state = scene.build(dtype=jnp.float64)
    args = (model, terms.prepare(model, state, jc.Control.zeros(0, 0, jnp.float64)))
    _, hessian = terms.hessian(args[1].u_free, args, "newton")
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
    from jaxcontact.problem import Factored, worth_factoring

    assert worth_factoring(3, 12) and not worth_factoring(3, 6) and not worth_factoring(6, 12)
    scene = jc.Scene(dt=0.01, friction=0.5, stiffness=1e4)
    scene.add_plane()
    scene.add_sphere(0.05, 1.0, pos=(0.0, 0.0, 0.049), vel=(0.3, 0.0, -0.2))
    scene.add_sphere(0.05, 0.5, pos=(0.01, 0.0, 0.146), vel=(-0.4, 0.2, -0.5),
                     ang_vel=(1.0, 2.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    args = (model, terms.prepare(model, state, jc.Control.zeros(2, 0, jnp.float64)))
    _, hessian = terms.hessian(args[1].u_free, args)
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
