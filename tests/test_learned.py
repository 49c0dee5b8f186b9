"""Neural potentials as user terms (`jc.learned`, Zhong et al. 2021's learned V).

A network term's potential is the module's output at its features, with the force of its
gradient; one set of weights is shared by all elements (its gradient sums theirs); the
planar chain's angles are the generalized coordinates of a known chain; a tiny network fitted
to a spring's trajectory reproduces the spring's force (slow) and bad input is refused by name.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.models.energy import UserEnergy

M, K, REST, DT = 0.1, 40.0, 0.3, 0.01
# the slow fit: a 16-unit network against a quadratic potential over the visited range,
# stopped after 150 L-BFGS iterations: its force matches to about 0.3% of the largest force
# (measured); 2% leaves room across platforms while an unfitted network is off by > 50%
FORCE_TOL = 0.02
TRAJ_TOL = 1e-3   # m, over 40 steps of a 0.15 m oscillation


class Quadratic(nn.Module):
    """U(r) = w₁ r + w₂ r² (a known parametric family: the spring for w = (-k L, k/2))."""

    @nn.compact
    def __call__(self, r):
        return nn.Dense(1, use_bias=False)(jnp.concatenate([r, r * r]))


class TinyMLP(nn.Module):
    width: int = 16

    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.softplus(nn.Dense(self.width)(x)))


def radius(local):
    """Distance of the element's particle from the world origin (the spring's anchor)."""
    return jc.math.safe_norm(local.particle_pos[0])[None]


def _local(particle_pos):
    particle_pos = jnp.asarray(particle_pos)
    return jc.Local(pos=jnp.zeros((0, 3)), quat=jnp.zeros((0, 4)), vel=jnp.zeros((0, 3)),
                    ang_vel=jnp.zeros((0, 3)), particle_pos=particle_pos,
                    particle_vel=jnp.zeros_like(particle_pos))


def _term(model, t):
    return next(x for x in model.terms if isinstance(x, UserEnergy) and x.index == t)


def _spring_weights():
    return {"params": {"Dense_0": {"kernel": jnp.array([[-K * REST], [0.5 * K]])}}}


def test_network_term_is_the_module_potential_with_its_force():
    scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
    p = scene.add_particle(M, (0.45, 0.0, 0.0))
    module = Quadratic()
    init = module.init(jax.random.key(0), jnp.zeros(1))
    t = jc.learned.add_network_energy(scene, module, init, particles=[[p]], features=radius,
                                      scale=2.0)
    model, _ = scene.build(dtype=jnp.float64)
    model = jc.learned.with_network_params(model, t, _spring_weights())
    fn, prm = _term(model, t).fn, jax.tree.map(lambda x: x[0], model.energy[t])
    x = jnp.array([[0.2, 0.3, -0.1]])
    r = float(jnp.linalg.norm(x[0]))
    # scale 2 times w₁ r + w₂ r² = 2 (k/2 (r - L)² - k L²/2)
    expected = 2.0 * (0.5 * K * (r - REST) ** 2 - 0.5 * K * REST ** 2)
    value, grad = jax.jit(jax.value_and_grad(lambda q: fn(_local(q), prm)))(x)
    assert float(value) == pytest.approx(expected, rel=1e-12)
    force = -grad[0]
    np.testing.assert_allclose(np.asarray(force), -2.0 * K * (r - REST) * np.asarray(x[0]) / r,
                               rtol=1e-12, err_msg="force of the network term")


def test_one_set_of_weights_is_shared_by_every_element():
    scene = jc.Scene(dt=DT)
    ps = [scene.add_particle(M, (0.1 * i + 0.2, 0.0, 1.0)) for i in range(3)]
    module = TinyMLP(width=4)
    init = module.init(jax.random.key(1), jnp.zeros(1))
    t = jc.learned.add_network_energy(scene, module, init, particles=[[q] for q in ps],
                                      features=radius)
    model, state = scene.build(dtype=jnp.float64)
    stored = jax.tree.leaves(model.energy[t])
    assert all(leaf.shape[0] == 3 for leaf in stored), "a copy per element"
    new = jax.tree.map(lambda w: w + 0.5, jc.learned.network_params(model, t))
    replaced = jc.learned.with_network_params(model, t, new)
    for leaf, want in zip(jax.tree.leaves(replaced.energy[t]), jax.tree.leaves(new)):
        np.testing.assert_array_equal(np.asarray(leaf), np.broadcast_to(want, leaf.shape))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)),
                                     jc.learned.network_params(replaced, t), new))
    # the shared weights' gradient is the sum of the elements' gradients
    fn = _term(model, t).fn
    points = state.particle_pos

    def total(w):
        m = jc.learned.with_network_params(model, t, w)
        return sum(fn(_local(points[i:i + 1]), jax.tree.map(lambda x: x[i], m.energy[t]))
                   for i in range(3))

    @jax.jit
    def both(w):
        each = [jax.grad(lambda v, i=i: fn(_local(points[i:i + 1]), v))(w) for i in range(3)]
        return jax.grad(total)(w), jax.tree.map(lambda a, b, c: a + b + c, *each)

    shared, summed = both(new)
    for g, s in zip(jax.tree.leaves(shared), jax.tree.leaves(summed)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(s), rtol=1e-12, atol=1e-15)


def test_chain_angles_are_the_links_angles_from_straight_down():
    theta = np.array([0.3, -1.1, 2.5])
    pivot = np.array([0.0, 0.0, 2.0])
    lengths = np.array([1.0, 0.7, 0.4])
    # rotating "down" (0, 0, -1) by θ about +y gives (-sin θ, 0, -cos θ)
    steps = lengths[:, None] * np.stack([-np.sin(theta), 0 * theta, -np.cos(theta)], -1)
    points = pivot + np.cumsum(steps, axis=0)
    angles = jax.jit(lambda q: jc.learned.chain_angles(q, jnp.asarray(pivot)))
    np.testing.assert_allclose(np.asarray(angles(jnp.asarray(points))), theta, rtol=0,
                               atol=1e-12)
    # gradient finite at a link of zero length (safe atan2)
    g = jax.jit(jax.grad(lambda q: jnp.sum(angles(q))))(
        jnp.asarray(np.stack([pivot, pivot + [0.0, 0.0, -1.0]])))
    assert bool(jnp.all(jnp.isfinite(g)))


class TwoOutputs(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)


@pytest.mark.parametrize("change, match", [
    ({"scene": "scene"}, "scene must be a jc.Scene"),
    ({"module": lambda x: x}, "module must be a flax.linen.Module"),
    ({"params": {}}, "params must be a non-empty pytree"),
    ({"features": 3}, "features must be callable"),
    ({"scale": -1.0}, "scale must be a positive"),
    ({"scale": float("nan")}, "scale must be a positive"),
    ({"particles": None}, "give bodies or particles"),
    ({"particles": [[[0]]]}, "particles must be a non-empty"),
    ({"features": lambda local: jnp.zeros(3)}, "module could not be applied"),
    ({"module": TwoOutputs()}, "module must output a scalar"),
])
def test_add_network_energy_rejects_bad_input(change, match):
    scene = jc.Scene(dt=DT)
    p = scene.add_particle(M, (0.3, 0.0, 0.0))
    module = change.get("module", TinyMLP(width=2))
    init = (module.init(jax.random.key(0), jnp.zeros(1)) if isinstance(module, nn.Module)
            else {"w": jnp.zeros(1)})
    kwargs = {"scene": scene, "module": module, "params": init, "particles": [[p]],
              "features": radius, **change}
    with pytest.raises(ValueError, match=match):
        jc.learned.add_network_energy(kwargs.pop("scene"), kwargs.pop("module"),
                                      kwargs.pop("params"), **kwargs)


def test_replacing_weights_rejects_bad_input():
    scene = jc.Scene(dt=DT)
    p = scene.add_particle(M, (0.3, 0.0, 0.0))
    scene.add_energy(lambda local, prm: jnp.sum(local.particle_pos ** 2), particles=[[p]])
    module = TinyMLP(width=2)
    t = jc.learned.add_network_energy(scene, module, module.init(jax.random.key(0),
                                                                 jnp.zeros(1)),
                                      particles=[[p]], features=radius)
    model, _ = scene.build(dtype=jnp.float64)
    good = jc.learned.network_params(model, t)
    with pytest.raises(ValueError, match="t must be the index of a network energy"):
        jc.learned.network_params(model, 0)          # a plain user term
    with pytest.raises(ValueError, match="t must be the index of a network energy"):
        jc.learned.with_network_params(model, 7, good)
    with pytest.raises(ValueError, match="params must have the structure"):
        jc.learned.with_network_params(model, t, {"params": {}})
    wrong = jax.tree.map(lambda x: jnp.zeros(x.shape + (1,)), good)
    with pytest.raises(ValueError, match="params leaves must have the shapes"):
        jc.learned.with_network_params(model, t, wrong)


@pytest.mark.slow  # compiles a rollout's gradient inside L-BFGS; fast counterpart:
# test_network_term_is_the_module_potential_with_its_force
def test_learned_energy_reproduces_a_spring_from_its_trajectory():
    """A particle on a spring (k = 40 N/m, rest length 0.3 m, no gravity) oscillates along x
    between r = 0.15 and 0.45 m for 40 steps. A 16-unit softplus network of r replaces the
    spring and is fitted with L-BFGS to the trajectory's 4-step chunks; its force -dU/dr must
    match the spring's -k (r - L) over the visited range, and its rollout the trajectory."""
    steps, chunk = 40, 4

    def scene_with(add):
        scene = jc.Scene(dt=DT, gravity=(0.0, 0.0, 0.0))
        p = scene.add_particle(M, (REST + 0.15, 0.0, 0.0))
        return scene, add(scene, p)

    def spring(scene, p):
        return scene.add_energy(
            lambda local, prm: 0.5 * prm["k"] * (radius(local)[0] - prm["rest"]) ** 2,
            particles=[[p]], params={"k": np.array([K]), "rest": np.array([REST])})

    module = TinyMLP(width=16)
    init = module.init(jax.random.key(0), jnp.zeros(1))
    true_scene, _ = scene_with(spring)
    model_true, state = true_scene.build(dtype=jnp.float64)
    net_scene, t = scene_with(lambda s, p: jc.learned.add_network_energy(
        s, module, init, particles=[[p]], features=radius))
    model, _ = net_scene.build(dtype=jnp.float64)
    rollout = jax.jit(lambda m, s: jc.rollout(m, s, steps=steps)[1])
    observed = rollout(model_true, state)
    pos = jnp.concatenate([state.particle_pos[None], observed.particle_pos])
    vel = jnp.concatenate([state.particle_vel[None], observed.particle_vel])
    n = steps - chunk + 1
    starts = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), state).replace(
        particle_pos=pos[:n], particle_vel=vel[:n])
    targets = jnp.stack([pos[i + 1:i + 1 + chunk] for i in range(n)])

    def loss(w):
        m = jc.learned.with_network_params(model, t, w)
        _, traj = jax.vmap(lambda s: jc.rollout(m, s, steps=chunk))(starts)
        return jnp.mean((traj.particle_pos - targets) ** 2) / 1e-4

    result = jc.optim.lbfgs(loss, jc.learned.network_params(model, t), max_iterations=150,
                            rtol=1e-12)
    r = jnp.linalg.norm(pos[:, 0], axis=-1)
    grid = jnp.linspace(jnp.min(r), jnp.max(r), 50)

    def force_error(w):
        force = -jax.vmap(jax.grad(lambda x: module.apply(w, x[None])[0]))(grid)
        return float(jnp.max(jnp.abs(force + K * (grid - REST)))) / float(
            jnp.max(jnp.abs(K * (grid - REST))))

    assert float(jnp.min(r)) < REST - 0.1 and float(jnp.max(r)) > REST + 0.1, "range visited"
    assert force_error(result.x) < FORCE_TOL, (force_error(result.x), result.status)
    assert force_error(init) > 0.5, "the unfitted network is far from the spring"
    fitted = rollout(jc.learned.with_network_params(model, t, result.x), state)
    error = float(jnp.max(jnp.abs(fitted.particle_pos - observed.particle_pos)))
    assert error < TRAJ_TOL, f"rolled-out trajectory off by {error} m"
