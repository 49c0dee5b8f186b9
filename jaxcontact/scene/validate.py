"""The scene's own checks, each written once: surface parameters, a body's mass or density, a
box's size, the arguments of a geom, and those of `build`. Each raises `ValueError` naming
the argument and quoting the value, through the library's argument checks
(`jaxcontact.validate`, which the kinds' builder hooks and settings objects use too)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxcontact import validate as check
from jaxcontact.models.broad_phase import BroadPhase
from jaxcontact.models.contact import Contact
from jaxcontact.solvers import SOLVERS
from jaxcontact.solvers.newton import Newton

SURFACE = ("friction", "stiffness", "damping")
GEOM_ARGUMENTS = {"sphere": ("radius",), "box": ("half_size", "rounding"),
                  "capsule": ("radius", "half_length"), "mesh": ("vertices",)}


def surface(defaults, friction, stiffness, damping) -> dict:
    """Surface parameters (Coulomb μ >= 0, k_n > 0, k_d >= 0); None takes `defaults`'s."""
    given = {"friction": friction, "stiffness": stiffness, "damping": damping}
    limits = {"friction": {"low": 0}, "stiffness": {"positive": True}, "damping": {"low": 0}}
    return {k: defaults[k] if given[k] is None and k in defaults else
            check.number(k, given[k], **limits[k]) for k in SURFACE}


def mass_or_density(mass, density):
    """(mass, density): exactly one given, and positive."""
    if (mass is None) == (density is None):
        raise ValueError(f"give exactly one of mass and density, got mass={mass!r}, "
                         f"density={density!r}")
    if mass is not None:
        return check.number("mass", mass, positive=True), None
    return None, check.number("density", density, positive=True)


def box_size(half_size, rounding):
    """Validated (half sizes (3,), rounding) of a box; a number is a cube's half size; the
    default rounding is 2% of the smallest half size."""
    if isinstance(half_size, (int, float)) and not isinstance(half_size, bool):
        half_size = (half_size,) * 3
    h = check.vector("half_size", half_size, 3, positive=True)
    rounding = 0.02 * float(np.min(h)) if rounding is None else check.number(
        "rounding", rounding, low=0)
    if rounding >= np.min(h):
        raise ValueError(f"rounding must be smaller than the smallest half size "
                         f"{np.min(h):g}, got {rounding!r}")
    return h, rounding


def geom_arguments(kind, given: dict) -> None:
    """A geom of `kind` takes only its own shape arguments (`GEOM_ARGUMENTS`)."""
    check.choice("kind", kind, tuple(GEOM_ARGUMENTS))
    for name, value in given.items():
        if value is not None and name not in GEOM_ARGUMENTS[kind]:
            raise ValueError(f"{name} is not an argument of a {kind} geom, got {value!r}")


def build_arguments(contact, solver, dtype, broad_phase):
    """`Scene.build`'s arguments with their defaults: (contact, solver, dtype, broad_phase)."""
    contact = Contact() if contact is None else contact
    solver = Newton() if solver is None else solver
    broad_phase = BroadPhase() if broad_phase is None else broad_phase
    check.instance("contact", contact, Contact, "a jc.Contact")
    check.instance("solver", solver, SOLVERS, "a jc.Newton, jc.Descent or jc.Dual")
    check.instance("broad_phase", broad_phase, BroadPhase, "a jc.BroadPhase")
    try:
        dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a float dtype, got {dtype!r}") from None
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a float dtype, got {dtype!r}")
    return contact, solver, dtype, broad_phase
