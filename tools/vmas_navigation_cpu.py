"""VMAS navigation on the CPU, for the side-by-side figure in docs/benchmarks.md.

    pip install vmas==1.5.2 && python tools/vmas_navigation_cpu.py [n_envs]

The full cross-simulator comparison (throughput and memory, GPU, several peers) is
``swarp.benchmark.compare_vmas`` / ``compare_sims`` (issue 11).
"""

import sys
import time

import torch
import vmas

n_envs = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
torch.set_num_threads(2)
env = vmas.make_env("navigation", num_envs=n_envs, device="cpu", continuous_actions=True, n_agents=4, seed=0)
env.reset()
actions = [torch.rand(n_envs, 2) * 2 - 1 for _ in range(4)]
for _ in range(3):
    env.step(actions)
n_steps = 20
start = time.perf_counter()
for _ in range(n_steps):
    env.step(actions)
seconds = (time.perf_counter() - start) / n_steps
rate = n_envs / seconds
print(f"vmas {vmas.__version__} navigation cpu {n_envs}x4: {seconds * 1e3:.2f} ms/step, {rate:,.0f} env-steps/s")
