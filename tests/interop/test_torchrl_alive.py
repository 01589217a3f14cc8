"""``swarp/interop/torchrl.py`` over an alive mask (navigation's ``n_agents=(lo, hi)`` and
``leave_on_goal``): the specs hold (``check_env_specs``) in both layouts, with and without the
simulator's auto-reset, and the mask reaches the tensordict as the per-agent info entry ``alive``."""

import pytest

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from torchrl.envs.utils import check_env_specs  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402

OPTIONS = dict(n_agents=(2, 4), leave_on_goal=True, goal_radius=0.3, world_size=0.5, max_steps=10)


@pytest.mark.parametrize("auto_reset", [False, True])
@pytest.mark.parametrize("layout", ["flat", "agents"])
def test_specs_hold_and_the_mask_is_an_info_entry(layout, auto_reset):
    sim = swarp.make("navigation", n_envs=4, device="cpu", seed=0, auto_reset=auto_reset, **OPTIONS)
    env = SwarpEnv(sim, layout=layout)
    check_env_specs(env)
    rollout = env.rollout(20, break_when_any_done=False)
    key = ("agents", "info", "alive") if layout == "agents" else ("info", "alive")
    alive = rollout[("next", *key)]
    assert alive.shape[:3] == (4, 20, 4)
    alive = alive.bool().reshape(4, 20, 4)
    assert bool(alive.any()) and not bool(alive.all())
    # An agent dead after step t - 1 earns nothing at step t (its env going on).
    reward = rollout["next", "agents", "reward"] if layout == "agents" else rollout["next", "reward"]
    reward = reward.reshape(4, 20, 4)[:, 1:]
    ongoing = ~rollout["next", "done"].reshape(4, 20, 1)[:, :-1]
    dead = ~alive[:, :-1] & ongoing
    assert bool(dead.any()) and bool((reward[dead] == 0).all())
