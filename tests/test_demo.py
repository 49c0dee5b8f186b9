"""Tests of the demo job: the landing-point loss, the throw fit at a small size, and the CLI.

The throw fit compiles one value-and-gradient program through a 450-step rollout (the
dominant cost of this file); everything else runs on synthetic trajectories.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact import cli, demo

G = 9.81


def _thrown_ball(vx, vz, z0=0.5, e=0.7, radius=0.05, dt=0.002, steps=600, contact=0.007):
    """Centre positions (T, 3) of a ball bouncing once with restitution e, and the x of its
    second landing. Flights are exact parabolas; a contact lasts `contact` s, 1 mm deep."""
    h = z0 - radius
    t1 = (vz + math.sqrt(vz * vz + 2.0 * G * h)) / G          # first contact
    up = e * (G * t1 - vz)                                    # rebound speed
    t_off = t1 + contact                                      # leaves the ground
    t2 = t_off + 2.0 * up / G                                 # landing
    t = dt * np.arange(1, steps + 1)
    first = z0 + vz * t - 0.5 * G * t ** 2
    tb = t - t_off
    second = radius + up * tb - 0.5 * G * tb ** 2
    z = np.where(t < t1, first, np.where(t < t_off, radius - 1e-3, second))
    pos = np.stack([vx * t, np.zeros_like(t), z], axis=-1)
    return jnp.asarray(pos), vx * t2


def test_landing_x_matches_closed_form():
    pos, expected = _thrown_ball(vx=1.2, vz=0.8)
    x, found = demo.landing_x(pos)
    assert bool(found)
    # linear interpolation of a parabola within one 2 ms step: error ~ g dt² / (8 v_z) vx ~ 2e-6 m
    assert abs(float(x) - expected) < 1e-5, f"landing x {float(x)} vs closed form {expected}"


def test_landing_x_without_second_contact():
    pos, _ = _thrown_ball(vx=1.0, vz=0.5, steps=200)  # ends in the first flight after a bounce
    pos = pos.at[:, 2].set(jnp.maximum(pos[:, 2], 0.06))  # never touches: no crossing at all
    x, found = demo.landing_x(pos)
    assert not bool(found)
    assert float(x) == pytest.approx(float(pos[-1, 0]))


def test_measured_restitution_of_synthetic_bounce():
    vz = np.concatenate([-np.linspace(0.0, 3.0, 100), [-1.0, 1.5, 2.1], 2.1 - np.arange(50) * 0.02])
    assert demo.measured_restitution(vz) == pytest.approx(0.7)


@pytest.mark.slow  # compile-heavy; `make demo` runs the fit
def test_throw_fit_reduces_loss():
    result = demo.optimize_bounce(iterations=6)
    losses = [h["loss"] for h in result["history"]]
    assert all(np.isfinite(losses)), f"non-finite loss: {losses}"
    assert all(h["found"] for h in result["history"]), "a throw did not land within the horizon"
    assert all(np.all(np.isfinite(h["grad"])) for h in result["history"]), "non-finite gradient"
    # 6 gradient steps take the loss down by orders of magnitude (measured: 0.65 -> ~1e-4)
    assert result["final_loss"] < 1e-2 * result["initial_loss"], losses
    assert result["final_miss_m"] < 0.1 * result["initial_miss_m"]
    assert 0.3 < result["restitution_simulated"] < result["restitution_requested"]


def test_cli_parser():
    args = cli.build_parser().parse_args(["demo"])
    assert (args.batch, args.out, args.seed) == (1024, "results/demo.json", 0)
    args = cli.build_parser().parse_args(["demo", "--batch", "2048", "--seed", "3",
                                          "--out", "x.json"])
    assert (args.batch, args.out, args.seed) == (2048, "x.json", 3)
    for bad in (["demo", "--batch", "0"], ["demo", "--batch", "many"], ["unknown"], []):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(bad)
