"""The optimization tasks of issue 66 (`experiments/gradient_estimators.py`): problems where
exact gradients of the simulated map can stall, each with its exact loss, the same loss
differentiated under backward-only smoothing, its starts and its scales.

- `e11`: ADD E11, a convex body thrown to a target pose via the floor and a wall
  (`experiments/add_e11_mesh_throw.py`); 6 initial velocities.
- `e3`: ADD E3's throw of a rock to a target pose at k_n = 1000 without continuation
  (`experiments/add_e3_continuation.py`, where direct L-BFGS stalls at a median Φ/Φ₀ of
  0.05); 6 initial velocities, starts drawn as there.
- `zhong_hit`: Zhong et al.'s "hit" on the true system (`experiments/zhong_throwing.py`): a
  bouncing ball's initial (v_x, v_z) so that it is at a target after 1 s and one bounce;
  the other bounce timings are local minima.
- `push`: after Suh et al. (ICML 2022)'s pushing example: a rolling ball launched at a box
  must push it to a target; a launch that misses the box has a zero gradient (the box never
  moves), and the loss jumps where the ball starts to graze the box.
- `wall`: after Suh et al.'s ball thrown at a wall: a ball launched with (v_x, v_z) must
  land at a target behind a 1 m wall; a throw that hits the wall falls back, so the loss
  jumps at the wall's top edge, and just below it exact gradients point back into the wall.

The tasks are built here from their descriptions; Suh et al.'s own scenes and numbers are
not reproduced. Every task is float64 with the default linear normal law; its smoothing is a
smooth normal law reaching out `width` (m) and linear friction, in the backward pass only.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxcontact as jc
from jaxcontact.math import quat_rotate


@dataclasses.dataclass(frozen=True)
class Task:
    """A task: `loss(x)` exact and `smoothed(x)` differentiated with backward smoothing
    (both simulate the same step), the starts of seeds 0, 1, ..., L-BFGS's relative stop
    `rtol`, CMA-ES's σ₀ and the stochastic estimators' σ (in x's units), and a line on
    what makes it hard."""

    name: str
    title: str
    loss: Callable
    smoothed: Callable
    starts: Callable            # seeds -> list of x0
    rtol: float
    cmaes_sigma: float
    sigma: float
    hard: str


def smoothing(width):
    return jc.Contact(normal="smooth", smooth_width=width, friction="linear")


def _with_smoothing(model, contact):
    return model.replace(solver=dataclasses.replace(
        model.solver, adjoint=jc.Implicit(smoothing=contact)))


def _perturbed(center, scale, seeds, first=None):
    """Seed 0: `first` (or `center`); seed k: center + N(0, scale²) per coordinate."""
    out = [np.asarray(center if first is None else first, float)]
    for k in range(1, seeds):
        rng = np.random.default_rng(k)
        out.append(np.asarray(center, float) + np.asarray(scale) * rng.standard_normal(
            len(center)))
    return out


def _losses(build, outcome, reference, width, mean=False):
    """(exact, smoothed) losses: the squared distance of `outcome(model, state, x)` (an
    array whose last axis is a point's coordinates) to its value at `reference`, summed over
    the points (or with `mean`, averaged), without and with backward smoothing of `width`."""
    def make(contact):
        model, state = build()
        if contact is not None:
            model = _with_smoothing(model, contact)
        return lambda x: outcome(model, state, x)

    exact = make(None)
    target = jc.jit(exact)(jnp.asarray(reference))

    def loss_of(f):
        def loss(x):
            d2 = jnp.sum((f(x) - target) ** 2, axis=-1)
            return jnp.mean(d2) if mean else jnp.sum(d2)
        return loss

    return loss_of(exact), loss_of(make(smoothing(width)))


def _in_plane(x):
    """(v_x, 0, v_z) from x = (v_x, v_z)."""
    return jnp.stack([x[0], jnp.zeros_like(x[0]), x[1]])


# --- ADD E11 -------------------------------------------------------------------------------

def e11(width=0.05):
    from experiments import add_e11_mesh_throw as e

    def vertices(model, state, x):
        local = model.mesh.vertices[0, :model.mesh.count[0]]
        s = state.replace(vel=x[None, :3], ang_vel=x[None, 3:])
        final, _ = jc.rollout(model, s, steps=e.STEPS)
        return final.pos[0] + jax.vmap(lambda v: quat_rotate(final.quat[0], v))(local)

    return Task("e11", "ADD E11: convex body via floor and wall to a target pose",
                *_losses(e.build, vertices, e.REFERENCE, width),
                lambda seeds: _perturbed(e.START, 0.2, seeds), e.RTOL, e.SIGMA0, 0.2,
                "contact sequences: a start with the reference's sequence rests on another "
                "face")


# --- ADD E3 --------------------------------------------------------------------------------

def e3(width=0.05):
    from experiments import add_e3_continuation as e

    def corners(model, state, x):
        local = jnp.asarray(model.mesh.vertices[0][:model.mesh.count[0]])
        s = state.replace(vel=x[None, :3], ang_vel=x[None, 3:])
        final, _ = jc.rollout(model, s, steps=e.STEPS)
        return final.pos[0] + local @ jc.math.quat_to_mat(final.quat[0]).T

    def starts(seeds):
        # E3's own starts (seed 0 of its generator), as many as asked
        rng = np.random.default_rng(0)
        n = max(seeds, 8)
        drawn = np.asarray(e.REFERENCE) + np.c_[rng.uniform(-0.6, 0.6, (n, 3)),
                                                rng.uniform(-4.0, 4.0, (n, 3))]
        return list(drawn[:seeds])

    return Task("e3", "ADD E3: rock thrown to a target pose, k_n = 1000 (no continuation)",
                *_losses(e.build, corners, e.REFERENCE, width, mean=True), starts, 1e-10,
                0.5, 0.2, "a long tumble over a soft floor: many nearby contact sequences")


# --- Zhong et al.'s "hit" ------------------------------------------------------------------

def zhong_hit(width=0.05):
    from experiments import zhong_throwing as e

    def final(model, state, x):
        end, _ = jc.rollout(model, state.replace(vel=_in_plane(x)[None]), steps=e.STEPS)
        return end.pos[0]

    def starts(seeds):
        fixed = [np.asarray(s, float) for s in e.HIT_STARTS]
        rng = np.random.default_rng(7)
        more = [np.asarray(e.HIT_REFERENCE) + rng.uniform(-1.0, 1.0, 2)
                for _ in range(max(0, seeds - len(fixed)))]
        return (fixed + more)[:seeds]

    return Task("zhong_hit", "Zhong et al.'s \"hit\": a ball to a target after one bounce",
                *_losses(e.build, final, e.HIT_REFERENCE, width), starts, 1e-12, 0.5, 0.1,
                "bounce timing: each number of bounces before T is its own basin")


# --- after Suh et al.: pushing -------------------------------------------------------------

PUSH_REFERENCE = (2.0, 0.4)     # the ball's launch (v_x, v_y), m/s: it hits the box off-centre
PUSH_MISS = (1.5, 1.0)          # seed 0: a launch that passes the box by (zero gradient)


def _push_scene():
    scene = jc.Scene(dt=0.02, friction=0.5, stiffness=1e4, damping=50.0)
    scene.add_plane()
    scene.add_box((0.1, 0.1, 0.05), 0.5, pos=(0.0, 0.0, 0.05))
    scene.add_sphere(0.05, 0.5, pos=(-0.5, 0.0, 0.05))
    return scene.build(solver=jc.Newton(iterations=30))


def push(width=0.05):
    def box(model, state, x):
        v = jnp.stack([x[0], x[1], jnp.zeros_like(x[0])])
        # a rolling start (ω = z x v / r), so the ball does not skid first
        w = jnp.stack([-x[1], x[0], jnp.zeros_like(x[0])]) / 0.05
        s = state.replace(vel=state.vel.at[1].set(v), ang_vel=state.ang_vel.at[1].set(w))
        end, _ = jc.rollout(model, s, steps=50)
        return end.pos[0, :2]

    return Task("push", "after Suh et al.: a rolling ball pushes a box to a target",
                *_losses(_push_scene, box, PUSH_REFERENCE, width),
                lambda seeds: _perturbed(PUSH_REFERENCE, 0.6, seeds, first=PUSH_MISS), 1e-12,
                0.5, 0.2, "a launch that misses the box: zero gradient, a flat loss")


# --- after Suh et al.: a ball thrown over a wall --------------------------------------------

WALL_X, WALL_HEIGHT = 1.5, 1.0      # m: the wall's face and top
WALL_REFERENCE = (4.0, 5.5)         # (v_x, v_z), m/s: clears the wall, lands at x ≈ 4.5 m
WALL_LOW = (4.0, 3.0)               # seed 0: hits the wall at 0.5 m and falls back


def _wall_scene():
    from jaxcontact.io import mjcf_geoms
    scene = jc.Scene(dt=0.01, friction=0.5, stiffness=1e4, damping=5.0)
    scene.add_plane()
    grid, _, _ = mjcf_geoms.static_obstacle(
        "box", (0.05, 1.0, WALL_HEIGHT / 2), (WALL_X + 0.05, 0.0, WALL_HEIGHT / 2), np.eye(3),
        reach=0.05)
    scene.add_obstacle(grid)
    scene.add_sphere(0.05, 0.1, pos=(0.0, 0.0, 0.05))
    return scene.build(solver=jc.Newton(iterations=30))


def wall(width=0.05):
    def final(model, state, x):
        end, _ = jc.rollout(model, state.replace(vel=_in_plane(x)[None]), steps=150)
        return end.pos[0, ::2]

    return Task("wall", "after Suh et al.: a ball thrown over a 1 m wall to a target",
                *_losses(_wall_scene, final, WALL_REFERENCE, width),
                lambda seeds: _perturbed(WALL_REFERENCE, 1.0, seeds, first=WALL_LOW), 1e-12,
                1.0, 0.3, "the wall's top edge: a jump in the loss, and gradients that point "
                "back into the wall just below it")


TASKS = {"e11": e11, "e3": e3, "zhong_hit": zhong_hit, "push": push, "wall": wall}
