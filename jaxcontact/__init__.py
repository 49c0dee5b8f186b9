"""jaxcontact: differentiable simulation of rigid bodies in smoothed frictional contact."""

from jaxcontact.models import sdf
from jaxcontact.models.broad_phase import BroadPhase
from jaxcontact.models.contact import Contact, damping_to_restitution, restitution_to_damping
from jaxcontact.randomize import randomize
from jaxcontact.scene import Scene
from jaxcontact.solvers import Descent, Dual, Newton
from jaxcontact.step import rollout, step
from jaxcontact.types import (RESULT_MESSAGES, Body, Control, Geom, Joint, Model, Motor, Plane,
                              Result, Shape, Spring, State, StepInfo)

__version__ = "0.1.0"

__all__ = [
    "Body", "BroadPhase", "Contact", "Control", "Descent", "Dual", "Geom", "Joint", "Model",
    "Motor", "Newton", "Plane", "RESULT_MESSAGES", "Result", "Scene", "Shape", "Spring", "State",
    "StepInfo", "damping_to_restitution", "randomize", "rollout", "restitution_to_damping", "sdf",
    "step",
]
