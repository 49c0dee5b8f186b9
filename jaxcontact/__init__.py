"""jaxcontact: differentiable simulation of rigid bodies and particles in smoothed frictional
contact."""

from jaxcontact import control, data, domain, io, learned, meshes, observe, optim, viz
from jaxcontact.dofs import Local
from jaxcontact.compiling import jit
from jaxcontact.failure import SimulationError, SimulationWarning, check_rollout
from jaxcontact.models import sdf
from jaxcontact.models.broad_phase import BroadPhase
from jaxcontact.models.contact import Contact, damping_to_restitution, restitution_to_damping
from jaxcontact.parallel import batch_mesh, map_batch, shard_batch
from jaxcontact.randomize import randomize
from jaxcontact.scene import Scene
from jaxcontact.solvers import Descent, Dual, Implicit, Newton, Unrolled
from jaxcontact.step import rollout, step
from jaxcontact.models import Attachment, Cloth, Joint, Motor, Solid, Spring
from jaxcontact.types import (RESULT_MESSAGES, Body, Control, Geom, Model, Particle, Plane,
                              Result, Shape, State, StepInfo)

__version__ = "0.1.0"

__all__ = [
    "Attachment", "Body", "BroadPhase", "Cloth", "Contact", "Control", "Descent", "Dual", "Geom",
    "Implicit", "Joint", "Local", "Model", "Motor", "Newton", "Particle", "Plane",
    "RESULT_MESSAGES", "Result", "Scene", "Shape", "SimulationError", "SimulationWarning", "Solid",
    "Spring", "State", "StepInfo", "Unrolled", "batch_mesh", "check_rollout",
    "control", "damping_to_restitution", "data", "domain", "io", "jit", "learned", "map_batch", "meshes", "observe", "optim", "randomize", "rollout", "restitution_to_damping", "sdf", "shard_batch", "step", "viz",
]
