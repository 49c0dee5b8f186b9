"""Thesis Figs. 26 and 27: the dual (XPBD) solver suffers from mass ratios, primal descent from
stiffness ratios, at the same fixed iteration budget.

Short rollouts of the scenes of experiments/fig26_mass_ratio_pendulum.py and
experiments/fig27_stiffness_ratio_springs.py. All four scenes share one structure, so they run
as one vmapped batch per solver (two compilations in all).
"""

import numpy as np
import pytest

import jaxcontact as jc

from experiments.fig26_mass_ratio_pendulum import (ANGLE, DT, HEAVY, LENGTH, RATIO, STIFFNESS,  # noqa: E402
                                       simulate)
from experiments.fig27_stiffness_ratio_springs import K_TOP, MASS, case  # noqa: E402

# compile-heavy experiment checks: run by `make test-all`, not by CI
pytestmark = pytest.mark.slow

STEPS, BUDGET = 24, 20  # 0.2 s: the Dual (update="exact") blows up after ~0.25 s
PENDULUM = dict(stiffnesses=(STIFFNESS, STIFFNESS), dt=DT, angle=ANGLE)
CASES = {"pendulum_ratio": dict(masses=(HEAVY / RATIO, HEAVY), **PENDULUM),
         "pendulum_control": dict(masses=(HEAVY, HEAVY), **PENDULUM),
         "springs_ratio": case(RATIO * K_TOP), "springs_control": case(K_TOP)}
STATIC_TOP = 2 * MASS * 9.81 / K_TOP / LENGTH  # top spring's static stretch / L
SOLVERS = {"descent": jc.Descent(iterations=BUDGET), "dual": jc.Dual(iterations=BUDGET, update="exact")}


@pytest.fixture(scope="module")
def errors():
    """Per solver and scene: max over time of each link's error / L (pendulum: vs the rest
    length, springs: vs the exact static length)."""
    out = {}
    for name, solver in SOLVERS.items():
        links, _, _, result = simulate(solver, list(CASES.values()), STEPS)
        assert np.all(result != int(jc.Result.NONFINITE)), name
        out[name] = {scene: np.max(np.abs(links[c] - np.asarray(
            kw.get("lengths", (LENGTH, LENGTH)))), axis=0) / LENGTH
            for c, (scene, kw) in enumerate(CASES.items())}
    return out


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_controls_are_accurate_for_both_solvers(errors, solver):
    e = errors[solver]
    # 1:1 pendulum: only the physical stretch, tension / k < 1e-3 L
    assert np.max(e["pendulum_control"]) < 1e-3
    # equal springs: the chain stays at its closed-form static lengths
    assert np.max(e["springs_control"]) < 1e-3 * STATIC_TOP


def test_mass_ratio_stretches_the_dual_not_the_primal(errors):
    # Fig. 26: heavy sphere below a 1e4x lighter one
    dual, descent = np.max(errors["dual"]["pendulum_ratio"]), np.max(
        errors["descent"]["pendulum_ratio"])
    assert dual > 0.05  # links stretched by > 5% of their length
    assert dual > 10 * descent
    assert descent < 5e-3  # a small multiple of the physical stretch (~3e-4)


def test_stiffness_ratio_stretches_the_primal_not_the_dual(errors):
    # Fig. 27: lower spring 1e4x stiffer; index 0 is the top spring
    descent, dual = errors["descent"]["springs_ratio"][0], errors["dual"]["springs_ratio"][0]
    assert descent > STATIC_TOP  # error larger than the whole static stretch
    assert descent > 100 * dual
    assert dual < 1e-2 * STATIC_TOP
