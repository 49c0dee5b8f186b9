"""The layout of the step's velocity vector u (`jaxcontact.dofs`).

u = (v_1, ω_1, ..., v_N, ω_N, v̇_1, ..., v̇_P): rigid blocks of 6, then particle blocks of 3.
Checked: sizes and groups, split/join round trips, the dropped world slot n of gather/scatter,
`dof_index` for the world, bodies and particles, the end-of-step configuration q+(u) against
closed forms (positions by Δt v, orientations by the exact exponential map), and the `Local`
view of an element against `configuration` on the gathered blocks.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs
from jaxcontact.math import quat_mul, quat_normalize, quat_to_mat

N, P = 3, 2                      # a mixed layout: 3 bodies, 2 particles
LAYOUT = dofs.Layout(N, P)
SIZE = 6 * N + 3 * P             # 24


def _state(seed=0, n=N, p=P):
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=(n, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return jc.State(pos=jnp.asarray(rng.normal(size=(n, 3))), quat=jnp.asarray(quat),
                    vel=jnp.asarray(rng.normal(size=(n, 3))),
                    ang_vel=jnp.asarray(rng.normal(size=(n, 3))), time=jnp.zeros(()),
                    particle_pos=jnp.asarray(rng.normal(size=(p, 3))),
                    particle_vel=jnp.asarray(rng.normal(size=(p, 3))))


# --- layout, split and join -------------------------------------------------------------------

@pytest.mark.parametrize("n, p, size", [(3, 2, 24), (1, 0, 6), (0, 4, 12), (2, 1, 15)])
def test_layout_size_and_groups(n, p, size):
    layout = dofs.Layout(n, p)
    assert layout.size == size
    assert layout.groups == ((n, 6), (p, 3))
    assert sum(c * s for c, s in layout.groups) == layout.size


def test_split_join_round_trip():
    u = jnp.arange(SIZE, dtype=jnp.float64)
    vel, ang_vel, particle_vel = dofs.split(u, LAYOUT)
    assert vel.shape == (N, 3) and ang_vel.shape == (N, 3) and particle_vel.shape == (P, 3)
    # block order: v_i then ω_i for each body, then particles
    np.testing.assert_array_equal(vel[1], [6, 7, 8])
    np.testing.assert_array_equal(ang_vel[1], [9, 10, 11])
    np.testing.assert_array_equal(particle_vel[0], [18, 19, 20])
    np.testing.assert_array_equal(dofs.join(vel, ang_vel, particle_vel), u)
    # and the other way round
    rng = np.random.default_rng(1)
    parts = [jnp.asarray(rng.normal(size=(k, 3))) for k in (N, N, P)]
    for a, b in zip(dofs.split(dofs.join(*parts), LAYOUT), parts):
        np.testing.assert_array_equal(a, b)


def test_velocity_of_a_state_is_its_joined_velocities():
    state = _state()
    u = dofs.velocity(state)
    assert u.shape == (SIZE,)
    vel, ang_vel, particle_vel = dofs.split(u, LAYOUT)
    np.testing.assert_array_equal(vel, state.vel)
    np.testing.assert_array_equal(ang_vel, state.ang_vel)
    np.testing.assert_array_equal(particle_vel, state.particle_vel)


# --- dof_index, gather, scatter --------------------------------------------------------------

def test_dof_index_of_world_bodies_and_particles():
    bodies = np.array([[0, -1], [2, 1]])
    particles = np.array([[1], [-1]])
    index = np.asarray(dofs.dof_index(bodies, particles, LAYOUT))
    assert index.shape == (2, 6 * 2 + 3 * 1)
    np.testing.assert_array_equal(index[0, :6], np.arange(0, 6))        # body 0
    np.testing.assert_array_equal(index[0, 6:12], np.full(6, SIZE))     # world: slot n
    np.testing.assert_array_equal(index[0, 12:], 18 + 3 + np.arange(3))  # particle 1
    np.testing.assert_array_equal(index[1, :6], 12 + np.arange(6))      # body 2
    np.testing.assert_array_equal(index[1, 6:12], 6 + np.arange(6))     # body 1
    np.testing.assert_array_equal(index[1, 12:], np.full(3, SIZE))      # no particle


def test_dof_index_covers_every_dof_once():
    bodies = np.arange(N).reshape(-1, 1)
    particles = np.zeros((N, 0), np.int32)
    rigid = np.asarray(dofs.dof_index(bodies, particles, LAYOUT)).ravel()
    point = np.asarray(dofs.dof_index(np.zeros((P, 0), np.int32),
                                      np.arange(P).reshape(-1, 1), LAYOUT)).ravel()
    np.testing.assert_array_equal(np.sort(np.concatenate([rigid, point])), np.arange(SIZE))


def test_gather_reads_zero_at_the_world_slot():
    u = jnp.arange(1.0, SIZE + 1.0)
    index = dofs.dof_index(np.array([[1, -1]]), np.array([[0]]), LAYOUT)
    x = np.asarray(dofs.gather(u, index))
    np.testing.assert_array_equal(x[0, :6], np.arange(7.0, 13.0))
    np.testing.assert_array_equal(x[0, 6:12], 0.0)
    np.testing.assert_array_equal(x[0, 12:], [19.0, 20.0, 21.0])
    # the appended slot is not a value of u: the gather of the world is 0 even for u = 1
    ones = dofs.gather(jnp.ones(SIZE), index)
    np.testing.assert_array_equal(np.asarray(ones)[0, 6:12], 0.0)


def test_scatter_sums_and_drops_the_world_slot():
    index = dofs.dof_index(np.array([[0, -1], [0, 2]]), np.array([[1], [1]]), LAYOUT)
    values = jnp.ones(index.shape)
    out = np.asarray(dofs.scatter(values, index, SIZE))
    assert out.shape == (SIZE,)
    expected = np.zeros(SIZE)
    expected[0:6] = 2.0           # body 0 in both elements
    expected[12:18] = 1.0         # body 2 once
    expected[21:24] = 2.0         # particle 1 in both
    np.testing.assert_array_equal(out, expected)    # the world's 6 ones are gone
    assert out.sum() == pytest.approx(values.size - 6)


def test_scatter_is_the_transpose_of_gather():
    rng = np.random.default_rng(2)
    index = dofs.dof_index(np.array([[0, -1], [2, 1], [1, 0]]),
                           np.array([[1], [-1], [0]]), LAYOUT)
    u = jnp.asarray(rng.normal(size=SIZE))
    w = jnp.asarray(rng.normal(size=index.shape))
    # <gather(u), w> = <u, scatter(w)> for every u, w: the adjoint pair of the assembly
    lhs = float(jnp.sum(dofs.gather(u, index) * w))
    rhs = float(jnp.dot(u, dofs.scatter(w, index, SIZE)))
    assert lhs == pytest.approx(rhs, rel=1e-12)


# --- configuration -----------------------------------------------------------------------------

def test_configuration_moves_positions_by_dt_v():
    state = _state(3)
    rng = np.random.default_rng(4)
    u = jnp.asarray(rng.normal(size=SIZE))
    dt = 0.01
    pos, quat, particle_pos = dofs.configuration(state, u, dt)
    vel, _, particle_vel = dofs.split(u, LAYOUT)
    np.testing.assert_allclose(pos, state.pos + dt * vel, rtol=0, atol=1e-15)
    np.testing.assert_allclose(particle_pos, state.particle_pos + dt * particle_vel, rtol=0,
                               atol=1e-15)
    np.testing.assert_allclose(jnp.linalg.norm(quat, axis=-1), 1.0, rtol=0, atol=1e-14)


@pytest.mark.parametrize("rate", [0.0, 1e-4, 3.0, 40.0, -250.0])
def test_configuration_rotates_about_z_by_angle_omega_dt(rate):
    """Constant ω = (0, 0, w): q+ = (cos(w Δt/2), 0, 0, sin(w Δt/2)) ⊗ q, so every body
    vector turns by the angle w Δt about z (closed form, also for w Δt beyond π)."""
    dt = 0.02
    state = _state(5, n=2, p=0)
    u = dofs.join(jnp.zeros((2, 3)), jnp.asarray([[0.0, 0.0, rate]] * 2), jnp.zeros((0, 3)))
    _, quat, _ = dofs.configuration(state, u, dt)
    angle = rate * dt
    step = jnp.asarray([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)])
    expected = quat_mul(jnp.broadcast_to(step, (2, 4)), state.quat)
    np.testing.assert_allclose(quat, expected, rtol=0, atol=1e-14)
    c, s = np.cos(angle), np.sin(angle)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(quat_to_mat(quat), rz @ np.asarray(quat_to_mat(state.quat)),
                               rtol=0, atol=1e-13)


def test_configuration_exponential_map_about_any_axis():
    """exp(Δt ω) rotates by |ω| Δt about ω/|ω| (Rodrigues), whatever the axis."""
    dt = 0.05
    state = _state(6, n=3, p=0)
    rng = np.random.default_rng(7)
    omega = rng.normal(size=(3, 3)) * np.array([[1.0], [10.0], [1e-3]])
    u = dofs.join(jnp.zeros((3, 3)), jnp.asarray(omega), jnp.zeros((0, 3)))
    _, quat, _ = dofs.configuration(state, u, dt)
    for i in range(3):
        theta = np.linalg.norm(omega[i]) * dt
        k = omega[i] / np.linalg.norm(omega[i])
        kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        rot = np.eye(3) + np.sin(theta) * kx + (1 - np.cos(theta)) * kx @ kx
        np.testing.assert_allclose(np.asarray(quat_to_mat(quat[i])),
                                   rot @ np.asarray(quat_to_mat(state.quat[i])), rtol=0,
                                   atol=1e-13)


def test_configuration_composes_over_steps_at_constant_omega():
    """Exact exponential map: k steps of Δt at constant ω equal one step of k Δt."""
    state = _state(8, n=2, p=0)
    u = dofs.join(jnp.zeros((2, 3)), jnp.asarray([[3.0, -2.0, 5.0], [0.1, 7.0, 0.0]]),
                  jnp.zeros((0, 3)))
    dt, k = 0.013, 7
    s = state
    for _ in range(k):
        pos, quat, particle_pos = dofs.configuration(s, u, dt)
        s = s.replace(pos=pos, quat=quat, particle_pos=particle_pos)
    _, once, _ = dofs.configuration(state, u, k * dt)
    np.testing.assert_allclose(s.quat, once, rtol=0, atol=1e-13)


def test_configuration_is_smooth_at_zero_rotation():
    """The derivative of q+ in ω at ω = 0 is finite and equals (Δt/2) (0, e_i) ⊗ q."""
    state = _state(9, n=1, p=0)
    dt = 0.1

    def quat_of(w):
        return dofs.configuration(state, dofs.join(jnp.zeros((1, 3)), w[None],
                                                   jnp.zeros((0, 3))), dt)[1][0]

    jac = jax.jacfwd(quat_of)(jnp.zeros(3))
    assert bool(jnp.all(jnp.isfinite(jac)))
    for i in range(3):
        e = jnp.zeros(4).at[1 + i].set(0.5 * dt)
        np.testing.assert_allclose(jac[:, i], quat_mul(e, state.quat[0]), rtol=0, atol=1e-15)


# --- Local view ----------------------------------------------------------------------------------

def test_local_agrees_with_configuration_on_gathered_blocks():
    state = _state(10)
    rng = np.random.default_rng(11)
    u = jnp.asarray(rng.normal(size=SIZE) * 3.0)
    dt = 0.02
    bodies = np.array([[2, 0], [1, -1], [-1, 2]])
    particles = np.array([[1], [0], [1]])
    index = dofs.dof_index(bodies, particles, LAYOUT)
    start = dofs.gather_start(state, bodies, particles)
    pos, quat, particle_pos = dofs.configuration(state, u, dt)
    vel, ang_vel, particle_vel = dofs.split(u, LAYOUT)
    x = dofs.gather(u, index)
    views = jax.vmap(lambda s, xe: dofs.local(s, xe, dt))(start, x)
    assert isinstance(views, jc.Local)
    for e in range(3):
        for slot, b in enumerate(bodies[e]):
            if b < 0:   # the world: at the origin, identity, at rest
                np.testing.assert_array_equal(views.pos[e, slot], 0.0)
                np.testing.assert_array_equal(views.quat[e, slot], [1.0, 0.0, 0.0, 0.0])
                np.testing.assert_array_equal(views.vel[e, slot], 0.0)
                np.testing.assert_array_equal(views.ang_vel[e, slot], 0.0)
                continue
            np.testing.assert_allclose(views.pos[e, slot], pos[b], rtol=0, atol=1e-15)
            np.testing.assert_allclose(views.quat[e, slot], quat[b], rtol=0, atol=1e-15)
            np.testing.assert_array_equal(views.vel[e, slot], vel[b])
            np.testing.assert_array_equal(views.ang_vel[e, slot], ang_vel[b])
        for slot, p in enumerate(particles[e]):
            np.testing.assert_allclose(views.particle_pos[e, slot], particle_pos[p], rtol=0,
                                       atol=1e-15)
            np.testing.assert_array_equal(views.particle_vel[e, slot], particle_vel[p])


def test_local_from_a_turn_has_the_exact_value_and_derivatives():
    # an element's view from the bodies' expansion about u (`dofs.Turn`) against the exact
    # exponential map: Ψ(x), ∇Ψ and ∇²Ψ at x = u, and the derivative in u of that local
    # Hessian (the expansion moves with u: unrolled gradients differentiate through it)
    state = _state(12)
    rng = np.random.default_rng(13)
    dt = 0.05
    bodies, particles = np.array([[0, 2], [-1, 1]]), np.array([[1], [0]])
    index = dofs.dof_index(bodies, particles, LAYOUT)
    start = dofs.gather_start(state, bodies, particles)
    arm = jnp.asarray(rng.normal(size=3))

    def psi(view):
        return jnp.sum(jnp.sin(jax.vmap(quat_to_mat)(view.quat) @ arm)) + jnp.sum(view.pos ** 2)

    def local_hessians(u, expanded):
        quat = jnp.concatenate([state.quat, jnp.asarray([[1.0, 0.0, 0.0, 0.0]])])
        _, ang_vel, _ = dofs.split(u, LAYOUT)
        turn = dofs.turn(quat, jnp.concatenate([ang_vel, jnp.zeros((1, 3))]), dt)
        turn = jax.tree.map(lambda a: a[bodies], turn)

        def one(s, x, t):
            f = (lambda y: psi(dofs.local(s, y, dt, at=t))) if expanded else (
                lambda y: psi(dofs.local(s, y, dt)))
            return f(x), jax.grad(f)(x), jax.hessian(f)(x)
        return jax.vmap(one)(start, dofs.gather(u, index), turn)

    def with_tangent(u, du, expanded):
        # one compiled program per variant: op-by-op, the nested derivatives took 14 s
        values = local_hessians(u, expanded)
        return values, jax.jvp(lambda u: local_hessians(u, expanded)[2], (u,), (du,))[1]

    u = jnp.asarray(rng.normal(size=SIZE) * 4.0)
    du = jnp.asarray(rng.normal(size=SIZE))
    run = jax.jit(with_tangent, static_argnums=2)
    (got, got_tangent), (want, want_tangent) = run(u, du, True), run(u, du, False)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got_tangent, want_tangent, rtol=1e-12, atol=1e-12)


def test_local_sizes_and_slots():
    assert dofs.local_size(2, 1) == 15
    assert dofs.local_size(0, 1) == 3
    assert dofs.slots(2, 1) == ((0, 0, 6), (0, 6, 6), (1, 12, 3))
    ids = np.asarray(dofs.block_ids(np.array([[1, -1]]), np.array([[0]])))
    np.testing.assert_array_equal(ids, [[1, -1, 0]])


def test_quaternions_stay_unit_under_large_rotations():
    """The exponential map keeps |q| = 1 to rounding without renormalization."""
    state = _state(12, n=2, p=0)
    state = state.replace(quat=quat_normalize(state.quat))
    u = dofs.join(jnp.zeros((2, 3)), jnp.asarray([[300.0, -200.0, 500.0], [1e-9, 0.0, 0.0]]),
                  jnp.zeros((0, 3)))
    _, quat, _ = dofs.configuration(state, u, 0.1)
    np.testing.assert_allclose(jnp.linalg.norm(quat, axis=-1), 1.0, rtol=0, atol=1e-14)
