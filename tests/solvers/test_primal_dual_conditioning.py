"""Fig. 28 of Macklin's thesis: conditioning of the primal (Eq. 126) and dual (Eq. 127) Hessians.

Checks the experiment script experiments/fig28_conditioning.py: the stiffness-ratio claim for every
stiffness, the mass-ratio claim in the stiff-spring regime dt^2 k/m >> mass ratio (and its reversal
for soft springs), and the exact primal/dual duality heavy end mass <-> softened anchor spring.
"""

import numpy as np
import pytest

from experiments.fig28_conditioning import DT, MASS, hessians, sweeps  # noqa: E402

RATIOS = np.logspace(0, 6, 13)


@pytest.fixture(scope="module", params=[1e4, 1e6, 1e9, 1e12, MASS / DT**2])
def run(request):
    return request.param, sweeps(RATIOS, k=request.param)


def test_hessians_are_the_thesis_forms():
    m, k = np.array([1.0, 2.0, 5.0]), np.array([10.0, 20.0, 30.0])
    hp, hd = hessians(m, k, 0.1)
    J = np.array([[1.0, 0, 0], [-1, 1, 0], [0, -1, 1]])
    np.testing.assert_allclose(hp, np.diag(m) + 0.01 * J.T @ np.diag(k) @ J)
    np.testing.assert_allclose(hd, 0.01 * J @ np.diag(1 / m) @ J.T + np.diag(1 / k))


def test_equal_at_ratio_one(run):
    _, res = run
    first = [v[0] for v in res.values()]
    np.testing.assert_allclose(first, first[0], rtol=1e-12)


def test_stiffness_ratio_claim_holds_for_every_k(run):
    _, res = run
    assert res["stiff_primal"][-1] > 1e5 * res["stiff_primal"][0]
    assert res["stiff_dual"].max() < 1.1 * res["stiff_dual"].min()


def test_exact_duality_heavy_mass_vs_soft_anchor_spring(run):
    _, res = run
    np.testing.assert_allclose(res["mass_dual"], res["soft_primal"], rtol=1e-7)
    np.testing.assert_allclose(res["mass_primal"], res["soft_dual"], rtol=1e-7)


def test_dual_bound_whatever_the_masses(run):
    k, res = run
    assert res["mass_dual"].max() <= 1 + 4 * DT**2 * k / MASS


def test_mass_ratio_claim_in_the_stiff_regime():
    res = sweeps(RATIOS, k=1e12)  # dt^2 k / m = 2.8e8 >> 1e6
    assert res["mass_dual"][-1] > 1e5 * res["mass_dual"][0]
    assert res["mass_primal"].max() < 1.1 * res["mass_primal"].min()
    # mirrored in shape, not equal: both slope ~1, within a factor 3 at ratio 1e6
    assert 1 / 3 < res["mass_dual"][-1] / res["stiff_primal"][-1] < 3


@pytest.mark.parametrize("k", [1e4, 1e6])
def test_mass_ratio_claim_reverses_for_soft_springs(k):
    res = sweeps(RATIOS, k=k)
    assert res["mass_primal"][-1] > 30 * res["mass_dual"][-1]
    assert res["mass_dual"][-1] < 10 * res["mass_dual"][0]


def test_unit_dt2k_over_m_gives_no_mirror():
    res = sweeps(RATIOS, k=MASS / DT**2)
    assert res["mass_dual"][-1] < 1.1 * res["mass_dual"][0]
    assert res["stiff_primal"][-1] > 1e5 * res["stiff_primal"][0]
