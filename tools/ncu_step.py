"""A few navigation steps to profile under Nsight Compute, on a CUDA machine:

    ncu --clock-control none --kernel-name regex:"contact|integrate|nav_" --launch-skip 12 --launch-count 6 \
        --metrics gpu__time_duration.sum,launch__registers_per_thread,\
sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,lts__t_sectors.sum \
        python3 tools/ncu_step.py 16384 16

(use_graph=False so each kernel is a separate launch; skip the construction and warm-up launches.)
"""

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
