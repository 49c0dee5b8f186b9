"""The generic assembly of the step's problem (`jaxcontact.terms`) against autodiff of its merit.

One small mixed scene exercises every kind of element at once: a box sliding and spinning on a
plane with friction (4 corner contacts), a sphere on the plane, a particle sliding on the
plane, a ball joint between the box and the sphere, a spring from the sphere to the world and
attachments of the particle to both bodies (elements mixing rigid and particle blocks; they
also exclude the particle-body contact pairs, whose colliders would double the compile time).
Everything is evaluated at velocities u that are not the step's solution (the state's
velocities perturbed, pressed into the plane so that every contact is active and slipping):

  - g(u) = ∂Φ(u; ū)/∂u at ū = u, and it matches finite differences of Φ with ū held;
  - the "exact" Jacobian is ∂g/∂u, lag terms included (= jacfwd of g: H_uu + H_uū);
  - the "lagged" Jacobian is the symmetric Hessian H_uu of Φ(·; ū);
  - `Jacobian.matvec` / `rmatvec` / `block_diagonal` agree with `dense()`;
  - the Gauss-Newton model is symmetric positive semi-definite and >= M;
  - residual = M⁻¹ g; free flight = ũ + Δt gravity on the linear DOFs;
  - the row model of Φ(·; ū) has Φ's gradient at u and a symmetric positive definite
    Hessian, and for a sphere and a particle on the plane (gaps linear in u) it is Φ itself.
  - the configuration's rounding floor is all of |J - M| resolution for a spring, whose
    energy reads only the configuration, and leaves out friction's stiffness at stick (two
    small scenes of their own).

Everything is computed by ONE jitted function (compilation dominates the cost of this file).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.solvers import newton

jax.config.update("jax_enable_x64", True)   # tests/conftest.py does it too

DT = 0.005
G = np.array([0.0, 0.0, -9.81])
MASSES = {"box": 1.0, "sphere": 0.5, "particle": 0.1}
ALPHAS = np.array([1.0, 0.1, 1e-3])   # trial step lengths of the merit change


def _scene():
    scene = jc.Scene(dt=DT, friction=0.5, stiffness=1e4, damping=50.0)
    scene.add_plane(friction=0.7)
    box = scene.add_box(0.1, MASSES["box"], pos=(0.0, 0.0, 0.099), vel=(0.8, 0.1, 0.0),
                        ang_vel=(0.0, 0.0, 1.0))
    sphere = scene.add_sphere(0.05, MASSES["sphere"], pos=(0.3, 0.0, 0.0495),
                              vel=(-0.3, 0.2, 0.0), ang_vel=(1.0, 0.0, 0.0))
    particle = scene.add_particle(MASSES["particle"], (-0.3, 0.0, 0.0195),
                                  vel=(0.5, -0.4, 0.0), radius=0.02)
    scene.attach(particle, box, stiffness=300.0, damping=0.5)
    scene.attach(particle, sphere, stiffness=100.0)
    scene.add_joint("ball", box, sphere, anchor=(0.2, 0.0, 0.05), stiffness=500.0,
                    damping=0.1)
    scene.add_spring(sphere, -1, stiffness=200.0, anchor_b=(0.3, 0.3, 0.3), rest_length=0.2)
    return scene.build(dtype=jnp.float64)


def _point(state, n):
    """A u that is not the solution: the state's velocities perturbed, vertical velocities
    pressing into the plane (every contact active at the end of the step)."""
    u = dofs.velocity(state) + 0.2 * jax.random.normal(jax.random.PRNGKey(0), (n,),
                                                         jnp.float64)
    vel, ang_vel, particle_vel = dofs.split(u, dofs.Layout(state.pos.shape[0],
                                                           state.particle_pos.shape[0]))
    return dofs.join(vel.at[:, 2].set(-0.05), ang_vel, particle_vel.at[:, 2].set(-0.05))


@jax.jit
def _evaluate(u, v, w, args):
    """Everything the tests compare, at u; v and w are probe vectors."""
    merit = terms.merit

    def g_lag(x, lag):
        return jax.grad(merit)(x, lag, args)

    g_exact, jac = terms.linearize(u, args, "exact")
    g_lagged, lagged = terms.linearize(u, args, "lagged")
    gn = terms.gauss_newton(u, args)
    h_uu, h_ulag = jax.jacfwd(g_lag, argnums=(0, 1))(u, u)
    row_model = terms.row_model(u, u + 0.1 * w, args)
    step = 1e-6
    out = {
        "g": terms.gradient(u, args), "g_ref": g_lag(u, u + 0.0),
        "g_exact": g_exact, "g_lagged": g_lagged,
        "merit_plus": merit(u + step * v, u, args), "merit_minus": merit(u - step * v, u, args),
        "step": step, "residual": terms.residual(u, args), "free": terms.free_flight(args),
        "merit_change": terms.merit_change(u, u + 0.1 * w,
                                           u[None, :] + ALPHAS[:, None] * v[None, :], args),
        "merit_at": jnp.stack([merit(u + a * v, u + 0.1 * w, args) for a in (0.0, *ALPHAS)]),
        "u_free": args[1].u_free, "mass": args[1].mass.dense(),
        "gaps": terms.contact_gaps(u, args), "jacfwd": h_uu + h_ulag, "hessian": h_uu,
        "model_gradient": row_model.gradient_at(jnp.zeros_like(u)),
        "g_held": g_lag(u, u + 0.1 * w),
        "model_hessian": row_model.dense().hessian(jnp.zeros_like(u)),
        "model_curvature": row_model.curvature(0.3 * v).dense(),
        "model_hessian_at": row_model.dense().hessian(0.3 * v),
    }
    for name, matrix in (("exact", jac), ("lagged", lagged), ("gn", gn)):
        out[name] = matrix.dense()
        out[name + "_mv"] = matrix.matvec(w)
        out[name + "_rmv"] = matrix.rmatvec(w)
        out[name + "_bd"] = matrix.block_diagonal().dense()
    return out


@pytest.fixture(scope="module")
def ev():
    model, state = _scene()
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
    ctx = jax.jit(terms.prepare)(model, state, control)
    n = terms.layout(model).size
    u = _point(state, n)
    key_v, key_w = jax.random.split(jax.random.PRNGKey(1))
    v = jax.random.normal(key_v, (n,), jnp.float64)
    w = jax.random.normal(key_w, (n,), jnp.float64)
    out = jax.tree.map(np.asarray, _evaluate(u, v, w, (model, ctx)))
    return {**out, "u": np.asarray(u), "v": np.asarray(v), "w": np.asarray(w), "n": n,
            "model": model, "state": state}


def _close(a, b, rtol):
    """|a - b| <= rtol max|b| elementwise (relative to the scale of the whole matrix)."""
    scale = np.max(np.abs(b))
    assert scale > 0
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


def _block_mask(n_body, n_particle):
    sizes = [6] * n_body + [3] * n_particle
    mask = np.zeros((sum(sizes),) * 2, bool)
    start = 0
    for s in sizes:
        mask[start:start + s, start:start + s] = True
        start += s
    return mask


# --- the evaluation point is a hard one ---------------------------------------------------------

def test_point_has_active_contacts_and_is_not_the_solution(ev):
    gaps = ev["gaps"]
    # box: 4 bottom corners (of its 8 rows); the sphere; the particle
    assert int(np.sum(gaps < 0.0)) == 6
    assert np.max(np.abs(ev["residual"])) > 1e-2          # u is far from the step's solution
    # friction is slipping and its lagged frame and bound matter: the exact Jacobian is not
    # symmetric, so the exact and lagged checks below are different checks
    asym = np.max(np.abs(ev["exact"] - ev["exact"].T))
    assert asym > 1e-3 * np.max(np.abs(ev["exact"]))
    assert np.max(np.abs(ev["exact"] - ev["lagged"])) > 1e-3 * np.max(np.abs(ev["exact"]))


# --- gradient ------------------------------------------------------------------------------------

def test_gradient_is_the_u_gradient_of_merit_with_lag_at_u(ev):
    _close(ev["g"], ev["g_ref"], 1e-13)
    _close(ev["g_exact"], ev["g"], 1e-12)       # linearize returns the same g
    _close(ev["g_lagged"], ev["g"], 1e-12)


def test_gradient_matches_finite_differences_of_merit(ev):
    fd = (ev["merit_plus"] - ev["merit_minus"]) / (2.0 * ev["step"])
    assert fd == pytest.approx(float(ev["g"] @ ev["v"]), rel=1e-6, abs=1e-9)


def test_merit_change_is_the_difference_of_merit_values(ev):
    # with a lag that is not u, at steps of three sizes; the change is formed without Φ
    change, magnitude = ev["merit_change"]
    at = ev["merit_at"]
    np.testing.assert_allclose(change, at[1:] - at[0], rtol=1e-9, atol=0)
    assert np.all(magnitude >= np.abs(change))


def test_merit_change_resolves_what_merit_values_cannot_in_float32():
    # a 10 g ball rolling at 1 m/s, 5 cm above the origin: its spin corrected by 1e-3 rad/s
    # changes Φ by 5e-12 J, far below the rounding of Φ (gravity m g z and the kinetic
    # energy) in float32; the change in float32 matches float64's to 1 %
    def changes(model, state):
        control = jc.Control.zeros(1, 0, dtype=state.pos.dtype)
        args = (model, terms.prepare(model, state, control))
        u = dofs.velocity(state)
        trial = u[None, :] + jnp.asarray([[0.0, 0.0, 0.0, 0.0, -1e-3, 0.0]], u.dtype)
        change = terms.merit_change(u, u, trial, args)[0][0]
        return change, terms.merit(trial[0], u, args) - terms.merit(u, u, args)

    def evaluate(dtype):
        scene = jc.Scene(dt=1e-4, stiffness=1e5, damping=63.0)
        scene.add_plane()
        scene.add_sphere(0.05, 0.01, pos=(0.0, 0.0, 0.05), vel=(1.0, 0.0, 0.0),
                         ang_vel=(0.0, 20.0, 0.0))
        return [float(x) for x in jax.jit(changes)(*scene.build(dtype=dtype))]

    reference, _ = evaluate(jnp.float64)
    change, values = evaluate(jnp.float32)
    assert 1e-12 < abs(reference) < 1e-10
    assert change == pytest.approx(reference, rel=1e-2)
    assert abs(values - reference) >= 0.5 * abs(reference)   # what comparing Φ values gives


# --- Jacobians -----------------------------------------------------------------------------------

def test_exact_jacobian_is_jacfwd_of_gradient(ev):
    _close(ev["exact"], ev["jacfwd"], 1e-8)


def test_lagged_jacobian_is_the_symmetric_hessian_of_merit_at_fixed_lag(ev):
    lagged = ev["lagged"]
    _close(lagged, lagged.T, 1e-12)
    _close(lagged, ev["hessian"], 1e-8)


@pytest.mark.parametrize("name", ["exact", "lagged", "gn"])
def test_matvec_and_rmatvec_match_dense(ev, name):
    dense, w = ev[name], ev["w"]
    _close(ev[name + "_mv"], dense @ w, 1e-12)
    _close(ev[name + "_rmv"], dense.T @ w, 1e-12)


@pytest.mark.parametrize("name", ["exact", "lagged", "gn"])
def test_block_diagonal_is_the_diagonal_blocks_of_dense(ev, name):
    model = ev["model"]
    mask = _block_mask(model.n_body, model.n_particle)
    _close(ev[name + "_bd"], np.where(mask, ev[name], 0.0), 1e-12)
    # and it is not all of dense: the joint and the spring couple blocks off the diagonal
    assert np.max(np.abs(np.where(mask, 0.0, ev[name]))) > 1e-6


def test_gauss_newton_is_symmetric_psd_and_above_the_mass(ev):
    gn, mass = ev["gn"], ev["mass"]
    _close(gn, gn.T, 1e-12)
    eig = np.linalg.eigvalsh(0.5 * (gn + gn.T))
    assert eig.min() >= -1e-9 * eig.max()
    extra = np.linalg.eigvalsh(0.5 * (gn + gn.T) - mass)   # Gᵀ c G >= 0
    assert extra.min() >= -1e-9 * eig.max()
    assert extra.max() > 1e-3 * eig.max()                  # and the rows do add curvature


# --- residual, mass, free flight -----------------------------------------------------------------

def test_residual_is_inverse_mass_times_gradient(ev):
    _close(ev["residual"], np.linalg.solve(ev["mass"], ev["g"]), 1e-12)


def test_mass_blocks(ev):
    mass, n = ev["mass"], ev["n"]
    np.testing.assert_allclose(mass, mass.T, rtol=0, atol=1e-15)
    diag = np.diag(mass)
    np.testing.assert_allclose(diag[0:3], MASSES["box"])
    np.testing.assert_allclose(diag[6:9], MASSES["sphere"])
    np.testing.assert_allclose(diag[12:15], MASSES["particle"])
    # a cube and a sphere: isotropic inertia, I = m (2h)²/6 and 2/5 m r²
    np.testing.assert_allclose(mass[3:6, 3:6], MASSES["box"] * 0.2 ** 2 / 6 * np.eye(3),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mass[9:12, 9:12], 0.4 * MASSES["sphere"] * 0.05 ** 2 * np.eye(3),
                               rtol=1e-12, atol=1e-15)
    assert n == 15


def test_free_flight_adds_dt_gravity_to_linear_velocities(ev):
    state = ev["state"]
    u_free = ev["u_free"]
    # no control; the inertias are isotropic, so no gyroscopic torque: ũ = the state's u
    np.testing.assert_allclose(u_free, dofs.velocity(state), rtol=0, atol=1e-15)
    expected = u_free.copy()
    for start in (0, 6, 12):           # box v, sphere v, particle v; ω unchanged
        expected[start:start + 3] += DT * G
    np.testing.assert_allclose(ev["free"], expected, rtol=0, atol=1e-14)


# --- the row model of Φ(·; ū) (Newton's lag phase, design note 24) ----------------------------

def test_row_model_has_the_gradient_of_the_merit_with_the_lag_held(ev):
    _close(ev["model_gradient"], ev["g_held"], 1e-12)


def test_row_model_hessian_is_symmetric_positive_definite_and_above_the_mass(ev):
    h = ev["model_hessian"]
    np.testing.assert_allclose(h, h.T, rtol=0, atol=1e-12 * np.max(np.abs(h)))
    assert np.min(np.linalg.eigvalsh(h - ev["mass"])) >= -1e-9 * np.max(np.abs(h))


def test_row_model_curvature_is_its_hessian_in_block_sparse_form(ev):
    """`RowModel.curvature` (the Krylov lag phase's matrix, design note 47) assembles the
    same A + Gᵀ C G as the dense `hessian`, at a δ where contacts change state."""
    _close(ev["model_curvature"], ev["model_hessian_at"], 1e-12)


def _sliding_sphere_and_particle():
    scene = jc.Scene(dt=0.01, friction=0.8, stiffness=1e4, damping=20.0)
    scene.add_plane()
    scene.add_sphere(0.05, 0.3, pos=(0.0, 0.0, 0.0495), vel=(1.0, 0.2, 0.0),
                     ang_vel=(0.0, 3.0, 1.0))
    scene.add_particle(0.1, (0.3, 0.0, 0.0195), vel=(-0.5, 0.4, 0.0), radius=0.02)
    return scene.build(dtype=jnp.float64)


@jax.jit
def _model_against_merit(u, lag, deltas, args):
    model = terms.row_model(u, lag, args)
    changes = jax.vmap(lambda d: model.change(d)[0])(deltas)
    delta = newton.minimize_row_model(model, args[1].mass.diagonal(), 1e-12, iterations=60)
    # the Krylov form: conjugate gradients on the block-sparse curvature
    delta_cg = newton.minimize_row_model(model, args[1].mass.diagonal(), 1e-12, iterations=60,
                                         krylov=40)
    return {"changes": changes,
            "reference": terms.merit_change(u, lag, u[None, :] + deltas, args)[0],
            "held_residual": args[1].mass.solve(jax.grad(terms.merit)(u + delta, lag, args)),
            "held_residual_cg": args[1].mass.solve(
                jax.grad(terms.merit)(u + delta_cg, lag, args)),
            "start_residual": args[1].mass.solve(jax.grad(terms.merit)(u, lag, args))}


def test_row_model_is_the_merit_where_every_gap_is_linear_in_u():
    """Sphere-plane and particle-plane gaps are linear in the velocities (rotation does not
    move them), and friction and damping rows are linear for a held lag: the model then
    changes exactly as Φ(·; ū), including contacts it switches on or off."""
    model, state = _sliding_sphere_and_particle()
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
    args = (model, jax.jit(terms.prepare)(model, state, control))
    n = terms.layout(model).size
    u = dofs.velocity(state)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    lag = u + 0.3 * jax.random.normal(keys[0], (n,), jnp.float64)
    deltas = jax.random.normal(keys[1], (4, n), jnp.float64) * jnp.array([[1.0], [0.3], [0.1],
                                                                           [0.01]])
    out = _model_against_merit(u, lag, deltas, args)
    assert np.all(np.abs(np.asarray(out["reference"])) > 1e-8)
    np.testing.assert_allclose(out["changes"], out["reference"], rtol=1e-9)
    # where the model is Φ(·; ū), its minimizer is the lag-held problem's: ∇₁Φ(u + δ; ū) = 0
    assert np.max(np.abs(out["start_residual"])) > 0.1
    assert np.max(np.abs(out["held_residual"])) < 1e-8, out["held_residual"]
    assert np.max(np.abs(out["held_residual_cg"])) < 1e-8, out["held_residual_cg"]


# --- the configuration's rounding floor ------------------------------------------------------------

@jax.jit
def _floors(model, state):
    """(configuration_floor, |J - M| resolution, resolution) at the state's velocities."""
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)
    args = (model, terms.prepare(model, state, control))
    u = dofs.velocity(state)
    _, jac = terms.linearize(u, args, "exact")
    resolution = terms.resolution(args)
    loose = jnp.abs(jac.dense() - args[1].mass.dense()) @ resolution
    return terms.configuration_floor(u, args), loose, resolution


def test_configuration_floor_is_the_jacobian_where_only_the_configuration_counts():
    # a spring between two spheres in flight: its energy reads only the configuration, so how
    # far g moves under the configuration's rounding is all of |J - M| resolution
    scene = jc.Scene(dt=DT)
    a = scene.add_sphere(0.05, 1.0, pos=(0.1, -0.2, 1.0), vel=(0.3, 0.1, 0.0),
                         ang_vel=(0.0, 2.0, 0.0))
    b = scene.add_sphere(0.05, 0.5, pos=(0.4, 0.1, 1.2), vel=(-0.2, 0.0, 0.5))
    scene.add_spring(a, b, stiffness=300.0, anchor_a=(0.05, 0.0, 0.0), rest_length=0.3)
    floor, loose, resolution = map(np.asarray, _floors(*scene.build(dtype=jnp.float64)))
    assert np.all(resolution > 0) and np.max(loose) > 0
    np.testing.assert_allclose(floor, loose, rtol=1e-10, atol=1e-14 * np.max(loose))


def test_configuration_floor_leaves_out_friction_stiffness_at_stick():
    # a box resting on the plane far from the origin: friction's stiffness at zero slip
    # times the rounding of its horizontal position dominates |J - M| resolution on the
    # horizontal and tilting DOFs, though friction reads the velocity, not the configuration
    scene = jc.Scene(dt=0.002, stiffness=1e5)
    scene.add_plane(friction=0.8)
    scene.add_box(0.05, 1.0, pos=(3.0, -2.0, 0.0495))
    model, state = scene.build(dtype=jnp.float64)
    floor, loose, _ = map(np.asarray, _floors(model, state))
    assert np.all(np.isfinite(floor)) and np.all(floor >= 0)
    for dof in (0, 1, 3, 4):   # x, y and the tilts
        assert floor[dof] < 1e-2 * loose[dof], dof
    # along the normal the contact's stiffness reads the configuration: the two agree
    assert floor[2] == pytest.approx(loose[2], rel=1e-2)


def _exact_linearization(model, state, u):
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
    args = (model, terms.prepare(model, state, control))
    g, jac = terms.linearize(u, args, "exact")
    return g, jac.dense(), terms.gradient(u, args)


def test_orientations_are_shared_only_where_bodies_are_read_more_than_once(ev, monkeypatch):
    # `terms.shares_turns` decides from the element tables alone; both ways give the same
    # g and exact Jacobian (a spinning box pressed into the plane, read by one element)
    control = jc.Control.zeros(ev["model"].n_body, ev["model"].n_motor, dtype=jnp.float64)
    shapes = jax.eval_shape(terms.prepare, ev["model"], ev["state"], control)
    assert terms.shares_turns(ev["model"], shapes)
    scene = jc.Scene(dt=0.01, stiffness=1e4)
    scene.add_plane(friction=0.6)
    scene.add_box(0.05, 1.0, pos=(0.0, 0.0, 0.0495), quat=(0.8, 0.4, 0.2, 0.4),
                  vel=(0.5, 0.2, -0.3), ang_vel=(3.0, -4.0, 8.0))
    model, state = scene.build(dtype=jnp.float64)
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
    assert not terms.shares_turns(model, jax.eval_shape(terms.prepare, model, state, control))
    u = dofs.velocity(state)
    own = jax.jit(_exact_linearization)(model, state, u)
    monkeypatch.setattr(terms, "shares_turns", lambda model, ctx: True)
    shared = jax.jit(_exact_linearization)(model, state, u)
    assert np.max(np.abs(np.asarray(own[1]))) > 1.0   # the contacts are active
    for got, want in zip(shared, own):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
