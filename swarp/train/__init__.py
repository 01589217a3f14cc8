"""``swarp.train``: MAPPO / IPPO for any registered scenario, the whole iteration on the device.

    python -m swarp.train navigation --target-success 0.95          # train (GPU when there is one)
    python -m swarp.train.eval runs/navigation__0__*/checkpoint.pt   # greedy vs random, 95% intervals

    result = swarp.train.train("navigation", seeds=(0,), total_steps=2_000_000)
    actions = result.policy(obs)                                     # [E, A, O] -> [E, A, U]
    swarp.train.evaluate(result.checkpoint, episodes=4096)
    swarp.train.resume(result.run_dir, total_steps=4_000_000)        # continue from its checkpoint

The algorithm is ``swarp.train.ppo``; per-scenario defaults are ``swarp.train.tasks``; a scenario of
agent groups trains one policy and one critic per group (``swarp.train.groups``).
"""

from swarp.train.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from swarp.train.config import TrainConfig, make_config
from swarp.train.evaluate import Evaluator, evaluate, wilson_interval
from swarp.train.groups import GroupedPolicy
from swarp.train.health import TrainingDiverged
from swarp.train.networks import Actor, Critic, Normalizer, Policy
from swarp.train.ppo import Trainer
from swarp.train.run import TrainResult, resume, train
from swarp.train.tasks import TASKS, Task, get_task

__all__ = [
    "TASKS",
    "Actor",
    "Checkpoint",
    "Critic",
    "Evaluator",
    "GroupedPolicy",
    "Normalizer",
    "Policy",
    "Task",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "evaluate",
    "get_task",
    "load_checkpoint",
    "make_config",
    "resume",
    "save_checkpoint",
    "train",
    "wilson_interval",
]
