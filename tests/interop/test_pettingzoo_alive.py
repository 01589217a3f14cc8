"""``swarp/interop/pettingzoo.py`` over an alive mask: agents absent from an episode are not in
``agents``, and an agent that leaves is terminated and drops out, as PettingZoo's agents do."""

import pytest

pytest.importorskip("pettingzoo")  # the pettingzoo extra; CI installs it

from pettingzoo.test import parallel_api_test  # noqa: E402

from swarp.interop.pettingzoo import parallel_env  # noqa: E402

#: A goal radius that random actions reach: agents leave mid-episode.
LEAVING = dict(n_agents=(2, 5), leave_on_goal=True, goal_radius=0.4, world_size=0.5, max_steps=30)


@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test_with_agents_leaving(auto_reset):
    parallel_api_test(parallel_env(auto_reset=auto_reset, seed=3, **LEAVING), num_cycles=200)


def test_agents_arrive_and_leave():
    env = parallel_env(seed=3, **LEAVING)
    counts, left_alone = set(), 0
    for episode in range(6):
        env.reset(seed=episode)
        present = env.sim.alive[0].tolist()
        assert env.agents == [agent for agent, alive in zip(env.possible_agents, present, strict=True) if alive]
        counts.add(len(env.agents))
        while env.agents:
            live = list(env.agents)
            _, rewards, terminations, truncations, _ = env.step(
                {agent: env.action_space(agent).sample() for agent in live}
            )
            assert set(rewards) == set(live)
            gone = [agent for agent in live if terminations[agent] and agent not in env.agents]
            assert all(agent not in env.agents for agent in live if terminations[agent] or truncations[agent])
            if gone and env.agents:
                left_alone += 1  # some agents left while others went on
    assert len(counts) > 1 and left_alone > 0
