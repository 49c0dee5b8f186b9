"""A fixed slice of the fuzz benchmark (`benchmarks/fuzz.py`, issue 63): random scene
structures (`jc.scenes.random_structure`) batched over random scenes
(`jc.scenes.randomize_scene`: masses 1e-3 to 1e3 kg, k_n 1e2 to 1e7 N/m, μ 0 to 2, Δt 1e-4 to
2e-2 s, thrown with spin), stepped and differentiated in reverse mode. The keys are fixed, so
the slice is the same on every run: every step of it converges, every state and gradient is
finite, in float32 and float64. Plus the generators' own contract: a seed gives one
structure, and a key's scene lies in the stated ranges (in both dtypes the same scene).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import scenes

STRUCTURE = 0          # a capsule, a box and a particle: every kind of pair, small to compile
SCENES, STEPS = 8, 20


def _structure():
    return scenes.random_structure(STRUCTURE, max_bodies=2, max_particles=1)


def test_a_seed_gives_one_structure_and_keys_stay_in_range():
    a, b = _structure(), _structure()
    assert a.info["shapes"] == b.info["shapes"] and a.info["n_particle"] == b.info["n_particle"]
    draws = {}
    for dtype in (jnp.float32, jnp.float64):
        model, state = a.build(dtype=dtype)
        keys = jax.random.split(jax.random.PRNGKey(0), 64)
        m, s = jax.vmap(lambda k: scenes.randomize_scene(model, state, a.info, k))(keys)
        draws[dtype] = (m, s)
        assert np.all((m.dt >= 1e-4 * (1 - 1e-6)) & (m.dt <= 2e-2 * (1 + 1e-6)))
        assert np.all((m.body.mass >= 1e-3 / 3 * (1 - 1e-6)) & (m.body.mass <= 3e3 * (1 + 1e-6)))
        k = m.geom.stiffness
        assert np.all((k >= 1e2 * (1 - 1e-6)) & (k <= 1e7 * (1 + 1e-6)))
        assert np.all((m.geom.friction >= 0.0) & (m.geom.friction <= 2.0))
        assert np.all(np.linalg.norm(s.vel, axis=-1) <= 3.0 * (1 + 1e-6))
        assert np.all(np.linalg.norm(s.ang_vel, axis=-1) <= 10.0 * (1 + 1e-5))
    # drawn in float32 whatever the dtype: one key, one scene
    np.testing.assert_allclose(draws[jnp.float64][0].body.mass,
                               draws[jnp.float32][0].body.mass, rtol=1e-6)


# float32, the dtype of batched training, in the fast suite; float64 in the slow one
@pytest.mark.parametrize("dtype", [jnp.float32,
                                   pytest.param(jnp.float64, marks=pytest.mark.slow)])
def test_fuzz_slice_converges_with_finite_gradients(dtype):
    scene = _structure()
    model, state = scene.build(dtype=dtype)

    def one(key):
        m, s = scenes.randomize_scene(model, state, scene.info, key)

        def loss(vel, ang_vel, mass):
            mm = m.replace(body=m.body.replace(mass=mass))
            final, _, info = jc.rollout(mm, s.replace(vel=vel, ang_vel=ang_vel), steps=STEPS,
                                        return_info=True)
            return jnp.sum(final.pos) + 0.1 * jnp.sum(final.vel), info

        (value, info), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(
            s.vel, s.ang_vel, m.body.mass)
        return value, grads, info.converged

    keys = jax.random.split(jax.random.PRNGKey(STRUCTURE), SCENES)
    value, grads, converged = jc.jit(jax.vmap(one))(keys)
    assert np.all(np.isfinite(value))
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert np.all(converged), np.argwhere(~np.asarray(converged))
