"""Tests of `jc.data`: the real cube tosses (ContactNets), their conventions and a simulation
started from them. Tests that need the archive skip when it is missing."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import data

# Flight: the sample and both neighbours have the lowest corner over 1 cm above the ground.
CLEARANCE = 0.01
# Median relative error of ω from finite differences of the loader's quaternions against the
# loader's world-frame ω, over the 6937 in-flight samples spinning faster than 1 rad/s:
# measured 1.45% (90th percentile 3.5%; the central difference's O(Δt²) error and tracking
# noise). The wrong frame gives 138%.
OMEGA_MEDIAN_TOL = 0.03
OMEGA_P90_TOL = 0.07


# 24 of the 550 tosses (every 23rd: `source_tosses` in the archive), kept in the repository
# (BSD 3-Clause, tests/data/contactnets_cube_LICENSE) so the tests that simulate run in CI
SAMPLE = pathlib.Path(__file__).parent / "data" / "contactnets_cube_sample.npz"


@pytest.fixture(scope="module")
def tosses():
    """The whole archive (tests of its shape and of the numbers measured on all of it)."""
    try:
        return data.load_tosses()
    except FileNotFoundError as error:
        pytest.skip(f"cube toss data not available: {error}")


@pytest.fixture(scope="module")
def sample():
    return data.load_tosses(SAMPLE)


@pytest.fixture(scope="module")
def model():
    return data.cube_scene().build()[0]


def _quat_mul(a, b):
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    return np.concatenate([aw * bw - np.sum(av * bv, -1, keepdims=True),
                           aw * bv + bw * av + np.cross(av, bv)], -1)


def _conj(q):
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def _angle_deg(q0, q1):
    """Angle of the rotation between unit quaternions q0 and q1 (either sign), degrees."""
    return np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(q0 * q1, -1)), 0.0, 1.0)))


# --- loading ----------------------------------------------------------------------------------

def test_shapes(tosses):
    assert tosses.states.shape == (58362, 13) and tosses.states.dtype == np.float64
    assert tosses.offsets.shape == (551,)
    assert len(tosses) == tosses.size == 550
    assert tosses.lengths.min() == 85 and tosses.lengths.max() == 139
    assert not tosses.states.flags.writeable
    for k in (0, 273, 549):
        toss = tosses.toss(k)
        n = tosses.lengths[k]
        for name, width in (("quat", 4), ("pos", 3), ("ang_vel", 3), ("vel", 3)):
            assert getattr(toss, name).shape == (n, width), name
        assert toss.time.shape == (n,)
        np.testing.assert_allclose(np.linalg.norm(toss.quat, axis=1), 1.0, atol=1e-6,
                                   err_msg="quat")
        np.testing.assert_allclose(np.diff(toss.time), 0.0068, rtol=1e-12, err_msg="time")
        assert toss.time[0] == 0.0
        np.testing.assert_array_equal(toss.pos, tosses.states[tosses.offsets[k]:][:n, 4:7])


def test_sample_is_a_subset_of_the_archive(tosses, sample):
    with np.load(SAMPLE) as archive:
        source = archive["source_tosses"]
    assert len(sample) == len(source) == 24
    for j, k in enumerate(source):
        np.testing.assert_array_equal(sample.states[sample.offsets[j]:sample.offsets[j + 1]],
                                      tosses.states[tosses.offsets[k]:tosses.offsets[k + 1]])


def test_bad_toss_index(tosses):
    for k in (-1, 550, 1.0, True, "3"):
        with pytest.raises(ValueError, match="k must be"):
            tosses.toss(k)


def test_missing_file(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="nowhere.npz"):
        data.load_tosses(tmp_path / "nowhere.npz")
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    assert data.default_path() == tmp_path / "contactnets_cube" / "tosses.npz"
    with pytest.raises(FileNotFoundError, match="JAXCONTACT_DATA"):
        data.load_tosses()


def test_env_var(tosses, monkeypatch):
    root = data.default_path().parent.parent
    monkeypatch.setenv(data.ENV_VAR, str(root))
    np.testing.assert_array_equal(data.load_tosses().offsets, tosses.offsets)


# --- conventions ------------------------------------------------------------------------------

def test_world_angular_velocity(sample):
    """q̇ = ½ (0, ω_world) ⊗ q for the loader's quaternions and ω, over in-flight samples."""
    errors, wrong = [], []
    for k in range(len(sample)):
        toss = sample.toss(k)
        fly = data.in_flight(toss, CLEARANCE)
        i = np.nonzero(fly[:-2] & fly[1:-1] & fly[2:])[0] + 1
        qdot = (toss.quat[i + 1] - toss.quat[i - 1]) / (2 * data.SAMPLE_PERIOD)
        omega = toss.ang_vel[i]
        size = np.linalg.norm(omega, axis=1)
        keep = size > 1.0
        world = 2 * _quat_mul(qdot, _conj(toss.quat[i]))[:, 1:]
        body = 2 * _quat_mul(_conj(toss.quat[i]), qdot)[:, 1:]
        errors.extend((np.linalg.norm(world - omega, axis=1) / size)[keep])
        wrong.extend((np.linalg.norm(body - omega, axis=1) / size)[keep])
    assert len(errors) > 300  # 330 in-flight samples spin faster than 1 rad/s
    assert np.median(errors) < OMEGA_MEDIAN_TOL, np.median(errors)
    assert np.percentile(errors, 90) < OMEGA_P90_TOL, np.percentile(errors, 90)
    assert np.median(wrong) > 0.5, np.median(wrong)


def test_check_conventions(tosses):
    """The numbers of the module docstring (measured: see there)."""
    found = data.check_conventions(tosses, CLEARANCE)
    assert found["samples"] == 6937
    assert found["omega_body"] < OMEGA_MEDIAN_TOL
    for name in ("omega_world", "omega_body_w2b", "omega_world_w2b", "vel_body"):
        assert found[name] > 1.0, (name, found[name])
    assert found["vel_backward"] < 0.02 and found["vel_central"] < 0.04, found
    # gravity measures -9.52 and -9.55 m/s², 3% short of 9.81
    for name in ("gravity_pos", "gravity_vel"):
        assert -9.7 < found[name] < -9.4, (name, found[name])


# --- simulation -------------------------------------------------------------------------------

def test_initial_state(sample, model):
    toss = sample.toss(5)
    state = data.initial_state(model, toss, 7)
    np.testing.assert_array_equal(state.pos, toss.pos[7:8])
    np.testing.assert_array_equal(state.quat, toss.quat[7:8])
    np.testing.assert_array_equal(state.vel, toss.vel[7:8])
    np.testing.assert_array_equal(state.ang_vel, toss.ang_vel[7:8])
    assert float(state.time) == toss.time[7]
    assert state.particle_pos.shape == state.particle_vel.shape == (0, 3)
    model32 = data.cube_scene().build(dtype=jnp.float32)[0]
    last = data.initial_state(model32, toss, -1)
    for leaf in jax.tree.leaves(last):
        assert leaf.dtype == jnp.float32
    np.testing.assert_allclose(last.pos[0], toss.pos[-1], rtol=1e-6)
    for index in (len(toss.time), -len(toss.time) - 1, 1.0, None):
        with pytest.raises(ValueError, match="index"):
            data.initial_state(model, toss, index)
    with pytest.raises(ValueError, match="toss"):
        data.initial_state(model, toss.pos, 0)
    two = data.cube_scene()
    two.add_sphere(0.05, mass=1.0, pos=(1.0, 0.0, 0.05))
    with pytest.raises(ValueError, match="one rigid body"):
        data.initial_state(two.build()[0], toss, 0)


# At rest (last samples) the tracked cube sits 0.5 to 2.3 mm lower than the nominal geometry
# allows (centre z 0.0501 to 0.0520 m, half edge 0.0524 m) and tilted by up to 1°. Over all 550
# tosses (50 steps of 0.0068 s, default stiffness and damping) the simulated cube settles onto
# its face within 6 steps: its centre moves up by 0.4 to 2.3 mm, sideways by at most 0.99 mm
# (levelling the tilt about an edge), it turns by at most 1.08°, and then stays still (under
# 1e-13 m and 3e-6° over the last 25 steps). Bounds below: those maxima with margin.
REST_TOSSES = (0, 4, 9, 23)          # of the sample: tosses 0, 92, 207 and 529. Their steps all
#                                      converge (4 of the sample's 24 have a first step that hits
#                                      the iteration limit while pushing out the penetration)
REST_STEPS = 50
REST_HORIZONTAL_TOL = 1.5e-3         # m
REST_ROTATION_TOL = 1.5              # degrees
REST_HEIGHT_TOL = 2e-5               # m from the half edge (mg/4k = 9 µm in the corners)
STILL_TOL = 1e-9                     # m moved over the last half of the steps
STILL_ROTATION_TOL = 1e-4            # degrees turned then (arccos near 1 resolves ~1e-6°)


# one compiled rollout of the cube (the model is an argument), shared by the tests below
run = jax.jit(lambda m, s: jc.rollout(m, s, steps=REST_STEPS, return_info=True))


def test_rest_stays_at_rest(sample, model):
    half = REST_STEPS // 2
    for k in REST_TOSSES:               # one compiled program, run per toss
        start = data.initial_state(model, sample.toss(k), -1)
        _, traj, info = run(model, start)
        assert bool(jnp.all(info.converged)), (k, info.result)
        pos, quat = np.asarray(traj.pos[:, 0]), np.asarray(traj.quat[:, 0])
        horizontal = np.linalg.norm(pos[:, :2] - np.asarray(start.pos[0, :2]), axis=-1).max()
        assert horizontal < REST_HORIZONTAL_TOL, (k, horizontal)
        rotation = _angle_deg(quat, np.asarray(start.quat[0])).max()
        assert rotation < REST_ROTATION_TOL, (k, rotation)
        height = abs(pos[-1, 2] - data.EDGE / 2)
        assert height < REST_HEIGHT_TOL, (k, height)
        still = np.linalg.norm(pos[-1] - pos[half])
        assert still < STILL_TOL, (k, still)
        turn = _angle_deg(quat[-1], quat[half])
        assert turn < STILL_ROTATION_TOL, (k, turn)


# --- identification ---------------------------------------------------------------------------

@pytest.mark.slow  # 27 s; CI: optim/test_fit.py recovers friction and stiffness of a box
def test_identification_recovers_synthetic_contact(sample, model):
    """The experiment's pipeline on tosses our simulator made: windows cut from real tosses,
    their observations replaced by rollouts at known contact parameters, fitted from the
    nominal ones by Gauss-Newton through the simulator, recover them within 1 %."""
    win = data.windows(model, sample, [1, 2], length=8)
    truth = jnp.array([np.log(0.3), np.log(3e4), np.log(100.0), -1.0])
    moved = data.with_contact(model, truth)
    # observations from the rest test's compiled rollout, window by window (no new program)
    trajs = [run(moved, jax.tree.map(lambda x: x[b], win.start))[1]
             for b in range(len(win.toss))]
    synthetic = win._replace(pos=jnp.stack([t.pos[:8, 0] for t in trajs]),
                             quat=jnp.stack([t.quat[:8, 0] for t in trajs]))
    forward = jc.optim.forward_mode(model)
    x0 = jnp.array([np.log(data.FRICTION), np.log(1e5), np.log(300.0), 0.0])
    found = jc.optim.gauss_newton(lambda x, w: data.window_residual(forward, x, w), x0,
                                  args=(synthetic,), max_iterations=20)
    # the nominal start misses the synthetic corners by millimetres (RMS over 24 B 8 entries)
    assert np.sqrt(2 * found.history[0] / (24 * 8 * len(win.toss))) > 1e-3, found.history
    assert found.value < 1e-20, found.status                 # ½|r|² at the estimate, m²
    ratio = np.exp(np.asarray(found.x[:3]) - np.asarray(truth[:3]))
    np.testing.assert_allclose(ratio, 1.0, rtol=1e-2, err_msg=found.status)
    assert abs(float(found.x[3] - truth[3])) < 1e-2, found.x     # mm
