"""The broad phase (`models.broad_phase`): the sweep finds exactly the overlapping bounding
spheres that brute force finds, works under vmap, reports overflow instead of dropping pairs,
and a pile simulated with it equals the all-pairs simulation.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import terms
from jaxcontact.models import broad_phase as bp


def _context(model, state):
    """The step's per-step data (broad phase, candidate elements, overflow) at `state`."""
    control = jc.Control.zeros(model.n_body, model.n_motor, state.pos.dtype)
    return terms.prepare(model, state, control)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sweep_finds_exactly_the_overlapping_pairs(seed):
    rng = np.random.default_rng(seed)
    n = 60
    centre = rng.uniform(-1.0, 1.0, size=(n, 3)) * np.array([1.0, 0.3, 0.3])
    radius = rng.uniform(0.02, 0.15, size=n)
    i, j, hit, overflow = bp.sweep(jnp.asarray(centre), jnp.asarray(radius), n)
    found = {tuple(sorted(p)) for p, h in zip(zip(np.asarray(i), np.asarray(j)),
                                              np.asarray(hit)) if h}
    dist = np.linalg.norm(centre[:, None] - centre[None], axis=-1)
    brute = {(a, b) for a, b in itertools.combinations(range(n), 2)
             if dist[a, b] <= radius[a] + radius[b]}
    assert found == brute and not bool(overflow)
    # a window too small for this density reports overflow (never a silent drop)
    *_, small = bp.sweep(jnp.asarray(centre), jnp.asarray(radius), 1)
    assert bool(small)


def _candidates(model, state):
    """What the broad phase and pairing decide at the start of a step: each contact
    element's bodies and particles, its rows' use flags, the frozen edge pairings, and the
    overflow flag."""
    ctx = _context(model, state)
    out = {"overflow": ctx.overflow, "bodies": [], "particles": [], "edges": []}
    used = []
    for term, el in zip(model.terms, ctx.elements):
        if term.reports_gaps:
            out["bodies"].append(el.bodies), out["particles"].append(el.particles)
            used.append(el.params["used"].reshape(-1))
            out["edges"] += [el.params[k] for k in ("edge", "edge_sign") if k in el.params]
    out["used"] = jnp.concatenate(used)
    return out


def test_broad_phase_is_vmappable(pile):
    # a batch of poses through vmap gives each pose's own candidates, slots and edge pairings
    model, state = pile.build(dtype=jnp.float64, broad_phase=jc.BroadPhase(mode="sweep"))
    rng = np.random.default_rng(4)
    pos = state.pos[None] + jnp.asarray(rng.uniform(-0.02, 0.02, size=(3,) + state.pos.shape))

    def at(p):
        return _candidates(model, state.replace(pos=p))

    # one program: the batch through vmap, and each pose on its own (a loop, not batched)
    batch, each = jax.jit(lambda p: (jax.vmap(at)(p), jax.lax.map(at, p)))(pos)
    for k in range(3):
        for got, want in zip(jax.tree.leaves(batch), jax.tree.leaves(each)):
            np.testing.assert_array_equal(np.asarray(got)[k], np.asarray(want)[k])
    assert int(np.asarray(batch["used"]).sum(axis=1).min()) > 0


@pytest.fixture(scope="module")
def pile():
    """12 spheres and 2 boxes dropped in a loose heap (91 body pairs)."""
    scene = jc.Scene(dt=0.002, stiffness=1e5, damping=50.0)
    scene.add_plane()
    rng = np.random.default_rng(3)
    for x, z in itertools.product(range(7), range(2)):
        pos = np.array([0.105 * x, 0.0, 0.05 + 0.101 * z]) + rng.uniform(-0.003, 0.003, size=3)
        if (x, z) in ((2, 0), (5, 1)):
            scene.add_box(0.04, 1.0, pos - [0.0, 0.0, 0.01])
        else:  # rows closing in on the middle
            scene.add_sphere(0.05, 1.0, pos, vel=(-0.5 * (x - 3), 0.0, -0.2))
    return scene


@pytest.mark.slow  # compile-heavy; the sweep's pair sets are checked against brute force above
def test_broad_phase_pile_equals_all_pairs(pile):
    runs = {}
    for mode in ("all_pairs", "sweep"):
        model, state = pile.build(dtype=jnp.float64, broad_phase=jc.BroadPhase(mode=mode))
        runs[mode] = jc.rollout(model, state, steps=25, return_info=True)
        assert (not any(t.stages for t in model.terms)) == (mode == "all_pairs")
    (fa, _, ia), (fs, _, is_) = runs["all_pairs"], runs["sweep"]
    assert not bool(jnp.any(is_.overflow))
    assert int(jnp.max(ia.active_contacts)) > 10  # the pile does touch
    np.testing.assert_allclose(np.asarray(fs.pos), np.asarray(fa.pos), atol=1e-9)
    np.testing.assert_array_equal(np.asarray(is_.active_contacts), np.asarray(ia.active_contacts))


_overflow = jax.jit(lambda model, state: _context(model, state).overflow)


def test_broad_phase_capacity_overflow_is_reported(pile):
    # `step` copies this flag into StepInfo.overflow (false in the run above)
    for capacity, dropped in ((1, True), (40, False)):
        model, state = pile.build(dtype=jnp.float64,
                                  broad_phase=jc.BroadPhase(mode="sweep", capacity=capacity))
        assert bool(_overflow(model, state)) == dropped


@pytest.mark.parametrize("kwargs,name", [
    ({"mode": "octree"}, "mode"), ({"window": 0}, "window"), ({"capacity": -1}, "capacity"),
    ({"margin": -0.1}, "margin"),
])
def test_bad_broad_phase_raises(kwargs, name):
    with pytest.raises(ValueError, match=name):
        jc.BroadPhase(**kwargs)


@jax.jit
def _assembled(model, state):
    """Φ, ∇Φ and the dense Hessian at velocities pressing a row of spheres together, and the
    numbers of filled and of all broad-phase slots."""
    args = (model, _context(model, state))
    u = terms.free_flight(args) + jnp.tile(jnp.asarray([0.2, 0.0, -0.1, 0.0, 0.5, 0.0]),
                                           model.n_body)
    g, hessian = terms.hessian(u, args)
    slots = [jnp.any(el.params["used"], axis=1) for t, el in zip(model.terms, args[1].elements)
             if getattr(t, "sweep", None) is not None and not t.pairs]
    live = sum(jnp.sum(s) for s in slots) if slots else jnp.zeros((), jnp.int32)
    return (terms.value(u, args), g, hessian.dense()), (live, sum(s.shape[0] for s in slots))


def test_empty_broad_phase_slots_add_nothing_to_the_step():
    # a row of 12 spheres on the ground, touching pairs at one end and far apart at the other:
    # the sweep's 66 slots, a few filled, pose the same Φ, gradient and Hessian as the 66
    # static pairs of all-pairs (whose distant pairs are inactive rows)
    scene = jc.Scene(dt=0.002)
    scene.add_plane()
    for k in range(12):
        scene.add_sphere(0.05, 1.0, (0.099 * k if k < 4 else 0.3 * k, 0.0, 0.05))
    out = {}
    for mode in ("all_pairs", "sweep"):
        model, state = scene.build(dtype=jnp.float64, broad_phase=jc.BroadPhase(mode=mode))
        assembled, (live, slots) = _assembled(model, state)
        out[mode] = [np.asarray(x) for x in assembled]
        if mode == "sweep":
            assert 0 < int(live) < slots // 4, (int(live), slots)
    for name, got, want in zip(("value", "gradient", "hessian"), out["sweep"],
                               out["all_pairs"]):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.max(np.abs(want)),
                                   err_msg=name)
    # the touching pairs do act: the Hessian couples the first spheres
    assert np.max(np.abs(out["sweep"][2][:6, 6:12])) > 1e-3


def _sweep(model):
    """The scene's sweep stage (`broad_phase.Sweep`), shared by its pair terms."""
    return next(t.sweep for t in model.terms if getattr(t, "sweep", None) is not None)


def _swept(model, state):
    """The sweep stage alone at `state`, compiled: {group: (a, b, used)} and overflow."""
    return jax.jit(_sweep(model))(model, state)


def test_the_default_window_covers_a_dense_pile():
    """`default_window` (2 n^(2/3) above 256 objects, all successors below): a 10 x 10 x 4
    pile of 400 touching spheres, 80 successors deep in sweep order, is swept without
    overflow; the former fixed window of 24 overflowed on every step of that pile (design
    note 60)."""
    scene = jc.scenes.sphere_pile(400, spacing=0.1, jitter=0.0)   # every neighbour touching
    model, state = scene.build(dtype=jnp.float64)
    assert bp.default_window(400) == 109 and bp.default_window(8) == 7
    assert not bool(_swept(model, state).overflow)
    small, _ = scene.build(dtype=jnp.float64, broad_phase=jc.BroadPhase(window=24))
    assert bool(_swept(small, state).overflow)


def _slots(model):
    """{(kind_a, kind_b): slots} of the scene's broad phase."""
    return {(a, b): n for a, b, n in _sweep(model).groups}


def test_jointed_bodies_get_slots_for_their_reach_and_a_pile_for_its_packing():
    """`group_capacity`: the 66 box pairs of a self-colliding chain of 12 links, 0.11 m apart,
    bounding radius 0.057 m, get the 21 pairs within twice their bounding radii (neighbours
    and next-but-one) plus one slot per link; the same 12 boxes not joined get the packing
    bound, 13 per box, at most the 66 pairs there are."""
    box = int(jc.Shape.BOX)
    chain, _ = jc.scenes.spring_chain(12, self_collision=True).build()
    assert _slots(chain) == {(box, box): 21 + 12}
    loose = jc.Scene()
    for k in range(12):
        loose.add_box((0.05, 0.02, 0.02), 0.1, pos=(0.11 * k, 0.0, 1.0))
    model, _ = loose.build()
    assert _slots(model) == {(box, box): 66}


def test_geoms_that_never_collide_take_no_place_in_the_sweep():
    """Only colliding geoms are swept: six touching balls in a row, each carrying three
    drawn-only geoms at its centre, are swept with a window of 2 without overflow, and every
    neighbouring pair is a candidate (drawn-only geoms filled the window: dm_control's dog
    has 164 of its 290 geoms drawn only)."""
    scene = jc.Scene()
    for k in range(6):
        body = scene.add_sphere(0.06, 1.0, (0.1 * k, 0.0, 1.0))
        for _ in range(3):
            scene.add_geom(body, "sphere", radius=0.05, pos=(0.1 * k, 0.0, 1.0), collide=False)
    model, state = scene.build(dtype=jnp.float64,
                               broad_phase=jc.BroadPhase(mode="sweep", window=2))
    found = _swept(model, state)
    assert not bool(found.overflow)
    body = np.asarray(model.geom.body)
    pairs = {tuple(sorted((int(body[a]), int(body[b]))))
             for a_s, b_s, used in found.slots.values()
             for a, b, u in zip(np.asarray(a_s), np.asarray(b_s), np.asarray(used)) if u}
    assert pairs == {(k, k + 1) for k in range(5)}
