"""The registry of kinds of physics (`jaxcontact.models.kinds`): every kind's builder hook is a
method of every scene, its parameters an attribute of every model (empty where unused), and a
name that is taken is refused."""

import pytest

import jaxcontact as jc
from jaxcontact.models import kinds


def test_every_kind_is_offered_by_scenes_and_models():
    scene = jc.Scene()
    scene.add_sphere(0.1, 1.0)
    model, _ = scene.build()
    assert set(model.kinds) == set(kinds.KINDS)
    for name, kind in kinds.KINDS.items():
        for hook in kind.builders:
            assert hook.__name__ in dir(scene)
            assert getattr(scene, hook.__name__).__doc__ == hook.__doc__
        params = getattr(model, name)
        assert (len(params) if name == "energy" else params.size) == 0, name
    with pytest.raises(AttributeError, match="add_nothing"):
        scene.add_nothing()
    with pytest.raises(AttributeError, match="kinds of physics"):
        model.nothing


def test_model_replace_routes_a_kind_by_name():
    scene = jc.Scene()
    a, b = scene.add_sphere(0.1, 1.0), scene.add_sphere(0.1, 1.0, pos=(1.0, 0.0, 0.0))
    scene.add_spring(a, b, stiffness=10.0)
    model, _ = scene.build()
    stiffer = model.replace(spring=model.spring.replace(stiffness=2 * model.spring.stiffness))
    assert float(stiffer.spring.stiffness[0]) == 20.0
    assert float(model.spring.stiffness[0]) == 10.0
    assert stiffer.joint is model.joint


@pytest.mark.parametrize("name, hook_name", [("spring", "add_other"), ("gravity", "add_other"),
                                             ("other", "add_spring"), ("other", "make_other")])
def test_a_taken_or_badly_named_kind_is_refused(name, hook_name):
    def hook(scene):
        return None

    hook.__name__ = hook_name
    with pytest.raises(ValueError, match="taken|add_"):
        kinds.register(kinds.Kind(name, lambda records, columns: (), lambda records: [],
                                  (hook,)))
    assert "other" not in kinds.KINDS
