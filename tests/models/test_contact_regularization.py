"""The contact's regularization by its effective mass (`jc.Contact(near_rigid=...,
friction_regularization=...)`, `models.contact.regularization`, SAP's, Castro et al. 2022),
against closed forms on a particle, whose contact's effective mass is its own mass m:

- near-rigid: where the linear law's contact period 2π sqrt(m / k) is below β Δt, the stiffness
  is lowered to k' = 4π² m / (β² Δt T), so a particle resting on the ground sinks
  m g / k' = g β² Δt T / 4π² (T = Δt without damping); elsewhere, and with β = 0, m g / k;
- friction: under gravity tilted by θ (tan θ < μ), a sticking particle creeps at the steady
  velocity v = m g sin θ Δt / s with s = min(Δt k_f, m / σ): F / k_f for a heavy particle,
  σ g sin θ Δt for a light one, F / k_f again with σ = 0.
"""

import math

import jax.numpy as jnp
import pytest

import jaxcontact as jc

G, DT, K = 9.81, 1e-2, 1e6
STEPS = 150


def _rest(mass, contact, tilt=0.0, friction=1.0):
    """The particle's final state after STEPS steps from rest on the ground, gravity tilted by
    `tilt` rad about y (critical damping where the step resolves the contact's period, so
    that it settles within the steps; none where it does not)."""
    resolved = K * DT * DT / mass < 4 * math.pi ** 2
    s = jc.Scene(dt=DT, gravity=(G * math.sin(tilt), 0.0, -G * math.cos(tilt)),
                 friction=friction, stiffness=K,
                 damping=2 * math.sqrt(K * mass) if resolved else 0.0)
    s.add_plane()
    s.add_particle(mass, (0.0, 0.0, 0.0))
    model, state = s.build(contact=contact, dtype=jnp.float64)
    final, _, info = jc.jit(lambda st: jc.rollout(model, st, steps=STEPS,
                                                  return_info=True))(state)
    assert bool(jnp.all(info.converged))
    return final


@pytest.mark.parametrize("mass,beta", [(1e-2, 1.0), (1e-2, 2.0), (1e-2, 0.0), (1e3, 1.0)])
def test_resting_depth_is_the_resolved_stiffness(mass, beta):
    final = _rest(mass, jc.Contact(near_rigid=beta))
    k_used = K
    if beta > 0.0 and K * DT * DT / mass > 4 * math.pi ** 2 / beta ** 2:
        k_used = 4 * math.pi ** 2 * mass / (beta * DT) ** 2
    depth = -float(final.particle_pos[0, 2])
    assert depth == pytest.approx(mass * G / k_used, rel=1e-6)
    if mass == 1e-2 and beta > 0.0:
        assert depth == pytest.approx(G * (beta * DT / (2 * math.pi)) ** 2, rel=1e-6)


@pytest.mark.parametrize("mass,sigma", [(1e-3, 1e-3), (1e-3, 0.0), (10.0, 1e-3)])
def test_sticking_creep_is_bounded_by_the_effective_mass(mass, sigma):
    tilt, k_f = math.atan(0.5), 1e4
    final = _rest(mass, jc.Contact(friction_regularization=sigma, friction_stiffness=k_f),
                  tilt=tilt)
    s = DT * k_f if sigma == 0.0 else min(DT * k_f, mass / sigma)
    creep = float(final.particle_vel[0, 0])
    assert creep == pytest.approx(mass * G * math.sin(tilt) * DT / s, rel=1e-6)
