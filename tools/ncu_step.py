"""One eager fused step of a scenario between cudaProfilerStart/Stop, for Nsight Compute:

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy \\
        python tools/ncu_step.py --envs 16384 --agents 64 [--lidar-rays 32] [--option key=value]

Warm-up steps (compilation, graph capture) run outside the profiled range, so ncu reports exactly
the kernels of one step, in launch order. ``--lineinfo`` compiles the kernels with line information
mapped to their Python lines, for ncu's source view (``--section SourceCounters``, then
``ncu -i REPORT --page source --csv --print-source cuda``).
"""

from __future__ import annotations

import argparse

import torch

from swarp.benchmark.common import parse_option
from swarp.benchmark.profile_env import warm_env
from swarp.runtime.launch import EAGER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--envs", type=int, default=16384)
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--lidar-rays", type=int, default=0)
    parser.add_argument("--option", action="append", type=parse_option, default=[])
    parser.add_argument("--lineinfo", action="store_true", help="line information for ncu's source view")
    args = parser.parse_args()
    if args.lineinfo:
        import warp as wp

        wp.config.lineinfo = True  # with wp.config.line_directives (default), lines of the Python source
    env, _ = warm_env(args.envs, args.agents, args.scenario, lidar_rays=args.lidar_rays, **dict(args.option))
    with torch.no_grad():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        env.launches.step(EAGER)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
