"""Closed-loop control through the simulator: tasks, policies, training, environment adapters.

- `Task`: a scene, its reward, its episode length and how an episode starts (randomized).
- `MLPPolicy`: a flax network from observations (`jc.observe`) to a `jc.Control`.
- `train`: analytic policy gradients through the simulator (truncated windows, batched
  environments, resets inside the jitted loop, optax, a progress bar, JSON log and curve);
  `evaluate`: the mean return of whole episodes. `Critic`: a learned value closing each
  window (short-horizon actor-critic, for tasks whose episodes end early).
- `push_task`, `pusher_task`, `walk_task`: ready-made tasks (a ball pushed to a target; a
  box pushed to a random target by a ball; the legged robot walking on randomized
  friction and mass), for examples, tests and experiments.
- `hopper_task`, `ant_task`: gymnasium's Hopper-v5 and Ant-v5 on its own MJCF files, with its
  reward terms (`jaxcontact.control.locomotion`; MuJoCo's coordinates of our states:
  `jaxcontact.control.coordinates.MjcfCoordinates`).
- `jaxcontact.control.brax_env.BraxEnv`: a Brax environment over a task, so Brax's PPO and
  SAC train on it (imported on its own: it needs Brax, `pip install -e ".[rl]"`).
"""

from jaxcontact.control.apg import TrainResult, evaluate, train
from jaxcontact.control.critic import Critic
from jaxcontact.control.locomotion import ant_task, hopper_task
from jaxcontact.control.policies import MLPPolicy
from jaxcontact.control.task import Task
from jaxcontact.control.tasks import push_task, pusher_task, walk_task

__all__ = ["Critic", "MLPPolicy", "Task", "TrainResult", "ant_task", "evaluate", "hopper_task",
           "push_task", "pusher_task", "train", "walk_task"]
