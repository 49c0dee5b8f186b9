"""Closed-loop control through the simulator: tasks, policies, training, environment adapters.

- `Task`: a scene, its reward, its episode length and how an episode starts (randomized).
- `MLPPolicy`: a flax network from observations (`jc.observe`) to a `jc.Control`.
- `train`: analytic policy gradients through the simulator (truncated windows, batched
  environments, resets inside the jitted loop, optax, a progress bar, JSON log and curve);
  `evaluate`: the mean return of whole episodes.
"""

from jaxcontact.control.apg import TrainResult, evaluate, train
from jaxcontact.control.policies import MLPPolicy
from jaxcontact.control.task import Task

__all__ = ["MLPPolicy", "Task", "TrainResult", "evaluate", "train"]
