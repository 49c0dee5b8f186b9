"""Newton's method on the step's potential (`jaxcontact.solvers.newton`): its settings are
checked by name, it solves directions densely up to `DENSE_MAX` unknowns, its exact line
search finds the minimum where the curvature jumps, a step it solves in one iteration ends
the solve there, and a light box tipping at a large step converges on every step. (The
driver it shares with the other solvers: test_base.py; its matrix-free solves against the
dense ones: test_solvers_agree.py.)
"""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.solvers import tolerances


# --- settings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,name", [
    (dict(iterations=0), "iterations"), (dict(iterations=-3), "iterations"),
    (dict(iterations=2.5), "iterations"), (dict(iterations=12.0), "iterations"),
    (dict(iterations="12"), "iterations"),
    (dict(tol=0.0), "tol"), (dict(tol=-1e-8), "tol"), (dict(tol=float("nan")), "tol"),
    (dict(tol="1e-8"), "tol"),
    (dict(line_search=0), "line_search"), (dict(line_search=-1), "line_search"),
    (dict(line_search=2.0), "line_search"), (dict(line_search=None), "line_search"),
    (dict(ad="reverse"), "ad"), (dict(ad=None), "ad"), (dict(ad="VJP"), "ad"),
    (dict(iterations=True), "iterations"),
    (dict(linear="bicgstab"), "linear"), (dict(linear="cr"), "linear"),
    (dict(linear="krylov"), "linear"), (dict(linear=None), "linear"),
    (dict(krylov_iterations=0), "krylov_iterations"),
    (dict(krylov_iterations=2.5), "krylov_iterations"),
    (dict(krylov_iterations=True), "krylov_iterations"),
    (dict(preconditioner="ilu"), "preconditioner"), (dict(preconditioner=None), "preconditioner"),
    (dict(early_exit=1), "early_exit"), (dict(adjoint="lu"), "adjoint"),
])
def test_newton_rejects(kwargs, name):
    with pytest.raises(ValueError, match=re.escape(name)):
        jc.Newton(**kwargs)


def test_newton_solves_directions_densely_up_to_dense_max_unknowns():
    """linear="auto": dense elimination up to `tolerances.DENSE_MAX` (384) unknowns (64 bodies),
    `DENSE_MAX_RIGID` (768, 128 bodies) where all are rigid bodies', conjugate gradients above;
    an explicit choice holds at every size."""
    assert jc.Newton().method(384) == "dense" and jc.Newton().method(385) == "cg"
    assert jc.Newton().method(768, rigid=True) == "dense"
    assert jc.Newton().method(769, rigid=True) == "cg"
    assert jc.Newton(linear="cg").method(6) == "cg"
    assert jc.Newton(linear="dense").method(6 * 100) == "dense"


def test_newton_accepts_valid_settings():
    solver = jc.Newton(iterations=3, tol=1e-9, line_search=1, ad="jvp")
    assert (solver.iterations, solver.tol, solver.line_search, solver.ad) == (3, 1e-9, 1, "jvp")
    for ad in ("vjp", "jvp", "unrolled"):
        jc.Newton(ad=ad)


# --- convergence and the line search ----------------------------------------------------------

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


@pytest.mark.parametrize("curvature, expected", [(2.5, 1.0), (4.0, 0.5)])
def test_line_search_takes_the_whole_step_on_the_looser_test(curvature, expected):
    # φ'(α) = -2 + c α: at c = 2.5 the whole step leaves |φ'(1)| = 0.25 |φ'(0)|, within
    # FULL_STEP_TOL, and is taken as it is; at c = 4, |φ'(1)| = |φ'(0)| and the search goes on
    # to the minimizer 0.5 within LINE_TOL
    problem = _Slopes(-2.0, [], [curvature])
    alpha = float(jc.Newton().search(problem, None, None, jnp.asarray(-2.0), None))
    assert tolerances.LINE_TOL < tolerances.FULL_STEP_TOL < 1.0
    if expected == 1.0:
        assert alpha == 1.0
    else:
        assert abs(-2.0 + curvature * alpha) <= tolerances.LINE_TOL * 2.0, alpha
        assert abs(alpha - expected) <= tolerances.LINE_TOL * 2.0 / curvature
