"""The generic assembly of the step's problem (`jaxcontact.terms`) against autodiff of Φ.

One small mixed scene exercises every kind of element at once: a box sliding and spinning on a
plane with friction (4 corner contacts), a sphere on the plane, a particle sliding on the
plane, a ball joint between the box and the sphere, a spring from the sphere to the world and
attachments of the particle to both bodies (elements mixing rigid and particle blocks; they
also exclude the particle-body contact pairs, whose colliders would double the compile time).
Everything is evaluated at velocities u that are not the step's solution (the state's
velocities perturbed, pressed into the plane so that every contact is active and slipping):

  - `gradient` is jax.grad of `value` (Φ) and matches central differences of Φ;
  - `hessian` (exact, the implicit gradients') is jax.hessian of Φ, symmetric; its contact
    share Σ Jᵀ ∇²ℓ J is positive semi-definite (Φ's contact part is convex);
  - `hessian(form="newton")` (Newton's directions) is the exact one but for the joint's rows,
    which take their Gauss-Newton part Jᵀψ''J: the Hessian of Φ less Σ ψ'(e) ∇²e of the
    joint's errors (computed here by autodiff of the rows);
  - `hessian(form="reweighted")` (Descent's) has the same gradient, is symmetric and differs
    from Newton's only in the contacts' share (friction's reweighted curvature);
  - `Hessian.matvec` / `block_diagonal` agree with `dense()`;
  - `along` is (φ'(α), φ''(α)) of φ(α) = Φ(u + α d) by autodiff;
  - residual = M⁻¹ g; the mass blocks; free flight = ũ + Δt gravity on the linear DOFs;
  - `contact_gaps` is the first-order gap d₀ + Δt v_n: it differs from the colliders' exact
    gaps at the end-of-step configuration q+(u) by O(|u|²).

Everything is computed by ONE jitted function (compilation dominates the cost of this file).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.models.geometry import FAR
from tests._helpers import contact_share

jax.config.update("jax_enable_x64", True)   # tests/conftest.py does it too

DT = 0.005
G = np.array([0.0, 0.0, -9.81])
MASSES = {"box": 1.0, "sphere": 0.5, "particle": 0.1}
ALPHAS = np.array([0.0, 0.3, 1.0])     # points of the line search's derivatives
# velocity scales ε of the gap expansion's probes ε w: each a factor 4 below the last, so the
# second-order error drops 16-fold between them
GAP_SCALES = np.array([2.0, 0.5, 0.125])
# central-difference step of Φ along v (|v| ~ 4): truncation ~ h² Φ''' ~ 1e-12 and rounding
# ~ eps Φ / h ~ 1e-10 relative to the slope, both far below the 1e-6 compared
FD_STEP = 1e-6
# autodiff against autodiff (same operations in another order): rounding of the largest entry
ROUNDING = 1e-12
# the stiff terms' Hessians (k Δt² ~ 1e1 against masses ~ 1e-1) sum entries of very different
# size; eigenvalues within this fraction of the largest count as zero
PSD_FLOOR = 1e-10


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


def _exact_gaps(u, args):
    """The colliders' gaps of every used contact row at the end-of-step configuration q+(u)
    (`ContactTerm.frames` at `dofs.local`), flat in `terms.contact_gaps`' order; FAR where
    a row is unused."""
    model, ctx = args
    out = []
    for term, el in zip(model.terms, ctx.elements):
        if not term.reports_gaps:
            continue

        def one(x, start, params, term=term, el=el):
            gap, _, _ = term.frames(dofs.local(start, x, model.dt), params, el.shared)
            return jnp.where(params["used"], gap, FAR)

        out.append(jax.vmap(one)(dofs.gather(u, el.index), el.start, el.params).reshape(-1))
    return jnp.concatenate(out)


def _joint_curvature(u, args):
    """Σ ψ'(e(u)) ∇²e(u) over the joints' rows (n, n): what their Gauss-Newton Hessian leaves
    out of the exact one, as the Hessian of Σ ψ'(e(u)) e(y) with the weights held at u."""
    model, ctx = args
    joints = [(t, el) for t, el in zip(model.terms, ctx.elements)
              if isinstance(t, jc.models.joints.JointTerm)]
    assert joints

    def weighted(y):
        total = 0.0
        for term, el in joints:
            def one(x_u, x_y, start, params):
                def groups(x):
                    return term.rows(dofs.local(start, x, model.dt), params, el.shared,
                                     model.dt)

                weights = [jax.vmap(jax.grad(g.law))(g.error, g.stiffness)
                           for g in groups(x_u)]
                return sum(jnp.dot(jax.lax.stop_gradient(wt), g.error)
                           for wt, g in zip(weights, groups(x_y)))

            total = total + jnp.sum(jax.vmap(one)(dofs.gather(u, el.index),
                                                  dofs.gather(y, el.index), el.start,
                                                  el.params))
        return total

    return jax.hessian(weighted)(u)


@jax.jit
def _evaluate(u, v, w, args):
    """Everything the tests compare, at u; v and w are probe vectors."""
    model, ctx = args

    def value(x):
        return terms.value(x, args)

    def phi(alpha):
        return value(u + alpha * v)

    g_exact, exact = terms.hessian(u, args)
    _, newton = terms.hessian(u, args, "newton")
    g_reweighted, reweighted = terms.hessian(u, args, "reweighted")
    contact, contact_reweighted = (contact_share(h, model) for h in (exact, reweighted))
    alphas = jnp.asarray(ALPHAS)
    out = {
        "g": terms.gradient(u, args), "g_ref": jax.grad(value)(u),
        "g_exact": g_exact, "g_reweighted": g_reweighted,
        "value_plus": value(u + FD_STEP * v), "value_minus": value(u - FD_STEP * v),
        "hessian_ref": jax.hessian(value)(u),
        "joint_curvature": _joint_curvature(u, args),
        "along": jax.vmap(lambda a: jnp.stack(terms.along(u, v, a, args)))(alphas),
        "along_ref": jax.vmap(lambda a: jnp.stack(jax.jvp(jax.grad(phi), (a,),
                                                          (jnp.ones_like(a),))))(alphas),
        "residual": terms.residual(u, args), "free": terms.free_flight(args),
        "u_free": ctx.u_free, "mass": terms.mass(args).dense(),
        "gaps": terms.contact_gaps(u, args),
        "gaps_at": jax.vmap(lambda e: terms.contact_gaps(e * w, args))(jnp.asarray(GAP_SCALES)),
        "gaps_exact": jax.vmap(lambda e: _exact_gaps(e * w, args))(jnp.asarray(GAP_SCALES)),
        "gaps_start": terms.contact_gaps(jnp.zeros_like(u), args),
        "gaps_start_exact": _exact_gaps(jnp.zeros_like(u), args),
        "contact": contact.dense(), "contact_local": contact.local,
        "contact_reweighted": contact_reweighted.dense(),
    }
    out["newton"] = newton.dense()
    for name, matrix in (("exact", exact), ("reweighted", reweighted)):
        out[name] = matrix.dense()
        out[name + "_mv"] = matrix.matvec(w)
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


def _min_eigenvalue(matrix):
    """The smallest eigenvalue of the symmetric part, relative to the largest |eigenvalue|."""
    eig = np.linalg.eigvalsh(0.5 * (matrix + matrix.T))
    return eig.min() / np.abs(eig).max()


# --- the evaluation point is a hard one ---------------------------------------------------------

def test_point_has_active_contacts_and_is_not_the_solution(ev):
    gaps = ev["gaps"]
    # box: 4 bottom corners (of its 8 rows); the sphere; the particle
    assert int(np.sum(gaps < 0.0)) == 6
    assert np.max(np.abs(ev["residual"])) > 1e-2          # u is far from the step's solution
    # friction slips: the reweighted Hessian differs from the exact one, so the checks of
    # the two below are different checks
    scale = np.max(np.abs(ev["exact"]))
    assert np.max(np.abs(ev["reweighted"] - ev["exact"])) > 1e-3 * scale


# --- gradient ------------------------------------------------------------------------------------

def test_gradient_is_the_gradient_of_the_value(ev):
    _close(ev["g"], ev["g_ref"], ROUNDING)
    _close(ev["g_exact"], ev["g"], ROUNDING)         # hessian returns the same g
    _close(ev["g_reweighted"], ev["g"], ROUNDING)    # reweighting keeps the gradient


def test_gradient_matches_finite_differences_of_the_value(ev):
    fd = (ev["value_plus"] - ev["value_minus"]) / (2.0 * FD_STEP)
    slope = float(ev["g"] @ ev["v"])
    assert abs(slope) > 1e-3
    assert fd == pytest.approx(slope, rel=1e-6, abs=1e-9)


# --- Hessians ------------------------------------------------------------------------------------

def test_exact_hessian_is_the_symmetric_hessian_of_the_value(ev):
    exact = ev["exact"]
    _close(exact, exact.T, ROUNDING)
    _close(exact, ev["hessian_ref"], 1e-10)


def test_newton_hessian_takes_the_joints_gauss_newton_part(ev):
    newton, joint = ev["newton"], ev["joint_curvature"]
    _close(newton, newton.T, ROUNDING)
    # the value's Hessian less Σ ψ' ∇²e over the joint's rows
    assert np.max(np.abs(joint)) > 1e-6 * np.max(np.abs(ev["hessian_ref"]))
    _close(newton, ev["hessian_ref"] - joint, 1e-10)


def test_reweighted_hessian_is_symmetric_and_differs_only_in_the_contacts(ev):
    reweighted, newton = ev["reweighted"], ev["newton"]
    _close(reweighted, reweighted.T, ROUNDING)
    # the mass, the joint (Gauss-Newton in both), the spring and the attachments: untouched
    _close(reweighted - ev["contact_reweighted"], newton - ev["contact"], ROUNDING)
    # the contacts (slipping): friction's curvature reweighted
    assert (np.max(np.abs(ev["contact_reweighted"] - ev["contact"]))
            > 1e-3 * np.max(np.abs(ev["contact"])))


@pytest.mark.parametrize("name", ["exact", "reweighted"])
def test_matvec_matches_dense(ev, name):
    _close(ev[name + "_mv"], ev[name] @ ev["w"], ROUNDING)


@pytest.mark.parametrize("name", ["exact", "reweighted"])
def test_block_diagonal_is_the_diagonal_blocks_of_dense(ev, name):
    model = ev["model"]
    mask = _block_mask(model.n_body, model.n_particle)
    _close(ev[name + "_bd"], np.where(mask, ev[name], 0.0), ROUNDING)
    # and it is not all of dense: the joint and the spring couple blocks off the diagonal
    assert np.max(np.abs(np.where(mask, 0.0, ev[name]))) > 1e-6


def test_contact_share_of_the_hessian_is_positive_semi_definite(ev):
    contact = ev["contact"]
    _close(contact, contact.T, ROUNDING)
    assert np.max(np.abs(contact)) > 1.0                 # the contacts are active
    assert _min_eigenvalue(contact) >= -PSD_FLOOR
    # element by element too: each contact's Jᵀ ∇²ℓ J
    for local in ev["contact_local"]:
        for a in local:
            if np.max(np.abs(a)) > 0.0:
                assert _min_eigenvalue(a) >= -PSD_FLOOR
    # and with the mass the whole Hessian is positive definite here
    assert _min_eigenvalue(ev["exact"]) > 0.0


# --- the line search's derivatives ----------------------------------------------------------------

def test_along_is_the_first_two_derivatives_of_the_value_on_the_line(ev):
    got, want = ev["along"], ev["along_ref"]
    for column, name in ((0, "slope"), (1, "curvature")):
        _close(got[:, column], want[:, column], 1e-11)
        assert np.all(np.abs(want[:, column]) > 0.0), name
    # at α = 0 the slope is the gradient's and the curvature vᵀ H v
    assert got[0, 0] == pytest.approx(float(ev["g"] @ ev["v"]), rel=1e-11)
    assert got[0, 1] == pytest.approx(float(ev["v"] @ ev["exact"] @ ev["v"]), rel=1e-10)


# --- residual, mass, free flight -----------------------------------------------------------------

def test_residual_is_inverse_mass_times_gradient(ev):
    _close(ev["residual"], np.linalg.solve(ev["mass"], ev["g"]), ROUNDING)


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
    expected = np.asarray(dofs.velocity(state)).copy()
    # no control; the inertias are isotropic, so no gyroscopic torque: ũ = the state's u plus
    # gravity's impulse on the linear velocities (box v, sphere v, particle v; ω unchanged)
    for start in (0, 6, 12):
        expected[start:start + 3] += DT * G
    np.testing.assert_allclose(ev["free"], expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ev["u_free"], ev["free"], rtol=0, atol=0)


# --- contact gaps --------------------------------------------------------------------------------

def test_contact_gaps_are_the_colliders_gaps_to_first_order(ev):
    used = ev["gaps_start_exact"] < FAR
    assert int(np.sum(used)) >= 10
    # at u = 0 the linearization is the collider's gap at the start of the step
    np.testing.assert_allclose(ev["gaps_start"][used], ev["gaps_start_exact"][used],
                               rtol=0, atol=1e-15)
    error = np.max(np.abs(ev["gaps_at"][:, used] - ev["gaps_exact"][:, used]), axis=1)
    moved = np.max(np.abs(ev["gaps_at"][:, used] - ev["gaps_start"][used]), axis=1)
    # the first-order change is resolved (the probe moves the rows) and much larger than
    # the error, which is second order: it shrinks 16-fold as ε does 4-fold (the box's
    # rotation moves its corners quadratically; within 25 % of the ratio, the third order's
    # share at the largest ε)
    assert np.all(moved > 1e3 * error), (moved, error)
    assert error[-1] > 1e-13, error
    ratios = error[:-1] / error[1:]
    np.testing.assert_allclose(ratios, (GAP_SCALES[:-1] / GAP_SCALES[1:]) ** 2, rtol=0.25)


# --- shared orientation expansions -------------------------------------------------------------

def _assembled(model, state, u):
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
    args = (model, terms.prepare(model, state, control))
    g, hessian = terms.hessian(u, args)
    return terms.value(u, args), terms.gradient(u, args), g, hessian.dense()


def test_orientations_are_shared_only_where_bodies_are_read_more_than_once(ev):
    # `terms.shares_turns` decides from the element tables alone: the mixed scene's elements
    # read its bodies more than once. A spinning box pressed into the plane with a particle
    # tied to a point of it reads the box once through one attachment (each element turns
    # its own), twice through the same attachment split into two halves (one shared
    # expansion): the same Φ, whose value, gradient and Hessian both ways give alike
    # (contacts read no orientation through the expansions)
    control = jc.Control.zeros(ev["model"].n_body, ev["model"].n_motor, dtype=jnp.float64)
    shapes = jax.eval_shape(terms.prepare, ev["model"], ev["state"], control)
    assert terms.shares_turns(ev["model"], shapes)
    assembled = {}
    for halves in (1, 2):
        scene = jc.Scene(dt=0.01, stiffness=1e4)
        scene.add_plane(friction=0.6)
        box = scene.add_box(0.05, 1.0, pos=(0.0, 0.0, 0.0495), quat=(0.8, 0.4, 0.2, 0.4),
                            vel=(0.5, 0.2, -0.3), ang_vel=(3.0, -4.0, 8.0))
        particle = scene.add_particle(0.1, (0.1, 0.1, 0.3), vel=(0.0, 0.3, 0.0))
        for _ in range(halves):
            scene.attach(particle, box, anchor=(0.04, 0.03, 0.04), stiffness=300.0 / halves,
                         damping=0.5 / halves)
        model, state = scene.build(dtype=jnp.float64)
        control = jc.Control.zeros(model.n_body, model.n_motor, dtype=jnp.float64)
        shares = terms.shares_turns(model, jax.eval_shape(terms.prepare, model, state, control))
        assert shares == (halves == 2), halves
        assembled[halves] = jax.jit(_assembled)(model, state, dofs.velocity(state))
    own, shared = assembled[1], assembled[2]
    assert np.max(np.abs(np.asarray(own[3]))) > 1.0   # the contacts are active
    for got, want in zip(shared, own):
        want = np.asarray(want)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
