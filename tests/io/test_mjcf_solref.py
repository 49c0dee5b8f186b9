"""MuJoCo's solref / solimp as our penalties (`io.mjcf_solref`): the impedance curve, the
limits' closed form, and `load_mjcf(contact="mujoco")` against MuJoCo's own resting
penetration and damping ratio."""

import warnings

import jax
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact.io import mjcf_solref

mujoco = pytest.importorskip("mujoco", reason="MJCF import needs the mujoco package "
                                              "(pip install 'jaxcontact[mjcf]')")

DEFAULT_IMP = "0.9 0.95 0.001 0.5 2"


def sphere_on_plane(cone="pyramidal", mu=1.0, solref="0.02 1", solimp=DEFAULT_IMP, mass=2.0):
    """A sphere of radius 0.1 just touching a plane, both with the same contact settings."""
    surface = f'solref="{solref}" solimp="{solimp}" friction="{mu} 0.005 0.0001"'
    return f"""<mujoco><option timestep="0.002" cone="{cone}"/><worldbody>
    <geom type="plane" size="5 5 .1" {surface}/>
    <body pos="0 0 0.1"><freejoint/><geom type="sphere" size="0.1" mass="{mass}" {surface}/>
    </body></worldbody></mujoco>"""


_settle = jax.jit(lambda model, state: jc.rollout(model, state, steps=400)[0])


@pytest.mark.parametrize("cone, mu, solref, solimp", [
    ("pyramidal", 1.0, "0.02 1", DEFAULT_IMP),             # MuJoCo's defaults
    ("pyramidal", 0.3, "0.02 1", DEFAULT_IMP),             # the pyramid's factor F(μ)
    ("elliptic", 0.7, "0.005 1", "0.9 0.97 0.001 0.5 2"),  # dm_control's manipulator
    ("pyramidal", 1.0, "-10000 -100", DEFAULT_IMP),        # direct stiffness and damping
    ("pyramidal", 0.4, "0.02 1", "0 0.8 0.01 0.5 2"),      # gymnasium's half cheetah
])
def test_resting_penetration_is_mujocos(cone, mu, solref, solimp):
    xml = sphere_on_plane(cone, mu, solref, solimp)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    theirs = 0.1 - float(d.qpos[2])
    scene, _ = jc.io.load_mjcf(xml, contact="mujoco")
    model, state = scene.build()
    ours = 0.1 - float(_settle(model, state).pos[0, 2])
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_damping_ratio_is_mujocos():
    # an elliptic cone (F = 1): the penalty's damping ratio c / (2 sqrt(k m)) is solref's ζ
    xml = sphere_on_plane("elliptic", 1.0, "0.02 0.7")
    scene, _ = jc.io.load_mjcf(xml, contact="mujoco")
    geom, = scene.records("geom")
    k, c = 2.0 * geom.stiffness, 0.5 * geom.damping     # the pair with the world
    assert c / (2.0 * np.sqrt(k * 2.0)) == pytest.approx(0.7, rel=1e-9)
    plane, = scene.records("plane")
    assert plane.damping == 0.0 and plane.stiffness >= 1e6 * geom.stiffness


def test_impedance_curve():
    solimp = (0.2, 0.9, 0.01, 0.3, 3.0)
    assert mjcf_solref.impedance(solimp, 0.0) == pytest.approx(0.2)
    assert mjcf_solref.impedance(solimp, 0.01) == pytest.approx(0.9)
    assert mjcf_solref.impedance(solimp, -0.5) == pytest.approx(0.9)
    # at the midpoint both branches give y = midpoint
    assert mjcf_solref.impedance(solimp, 0.003) == pytest.approx(0.2 + 0.3 * 0.7)
    y = 0.001 ** 3 / 0.003 ** 3 * 0.3    # x = 0.1 below the midpoint: x^p / mid^(p-1)
    assert mjcf_solref.impedance(solimp, 0.001) == pytest.approx(0.2 + y * 0.7)


def test_limit_law_closed_form():
    # (τ, ζ) at d = d_width: stiffness m / ((1 - d) τ² ζ²), damping ratio ζ; direct (-K, -B):
    # stiffness m K / (1 - d)
    m = mujoco.MjModel.from_xml_string(sphere_on_plane())
    k, c = mjcf_solref.impedance_law(mujoco, m, (0.03, 0.8), (0.9, 0.95, 0.001, 0.5, 2), 2.0)
    assert k == pytest.approx(2.0 / (0.05 * 0.03 ** 2 * 0.8 ** 2))
    assert c / (2.0 * np.sqrt(k * 2.0)) == pytest.approx(0.8)
    k, _ = mjcf_solref.impedance_law(mujoco, m, (-500.0, -10.0), (0.9, 0.95, 0.001, 0.5, 2), 2.0)
    assert k == pytest.approx(2.0 * 500.0 / 0.05)
    # refsafe: a time constant below 2 Δt is raised to it
    k, _ = mjcf_solref.impedance_law(mujoco, m, (0.001, 1.0), (0.9, 0.95, 0.001, 0.5, 2), 1.0)
    assert k == pytest.approx(1.0 / (0.05 * 0.004 ** 2))


def test_contact_argument_errors():
    xml = sphere_on_plane()
    with pytest.raises(ValueError, match="contact"):
        jc.io.load_mjcf(xml, contact="soft")
    with pytest.raises(ValueError, match="stiffness"):
        jc.io.load_mjcf(xml, contact="mujoco", stiffness=1e4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # everything in the file is imported
        scene, _ = jc.io.load_mjcf(xml, contact="penalty", stiffness=1e4)
    assert scene.records("geom")[0].stiffness == 1e4
