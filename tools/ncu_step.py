"""One navigation step under Nsight Compute: python tools/ncu_step.py N_ENVS N_AGENTS (see device notes)."""

import sys

import torch

import swarp

n_envs, n_agents = int(sys.argv[1]), int(sys.argv[2])
env = swarp.make("navigation", n_envs=n_envs, n_agents=n_agents, device="cuda", auto_reset=True, use_graph=False)
env.step_count.copy_(torch.randint(0, 200, (n_envs,), dtype=torch.int32))
actions = torch.rand(n_envs, n_agents, 2, device="cuda") * 2 - 1
with torch.no_grad():
    for _ in range(4):
        env.step(actions)
torch.cuda.synchronize()
