"""Registers, spills and static SASS instruction counts of swarp's CUDA kernels, without a GPU.

    python tools/sass_stats.py integrate contact_forces observe_rows [--arch 90] [--agents 16]

Builds an environment of the scenario on the CPU with the plan of a small CUDA batch
(``CUDA_PLAN``: register lists, one agent per thread, the tiled row store and fused end, starts
prepared ahead, the grouped lidar kernel), so the step launches the kernels it launches on a GPU. Compiles their modules
ahead of time for ``sm_<arch>`` (Warp's NVRTC, no driver needed) and reads the cubins with
``cuobjdump`` (set ``CUOBJDUMP`` or put it on PATH). Use it to compare kernel variants before
spending GPU time; speed itself is only measured on the GPU.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import tempfile

import warp as wp

import swarp
from swarp.env.make import ENV_KWARGS
from swarp.runtime.launch import Launcher
from swarp.runtime.plan import ENV_BLOCK, LIDAR_RAYS_PER_THREAD
from swarp.scenarios.framework.base import get_scenario

#: What ``choose_plan`` gives a latency-bound CUDA batch (the fused end and reset ahead where the
#: scenario has them).
CUDA_PLAN = {
    "one_thread_per_env": False,
    "env_block": ENV_BLOCK,
    "register_lists": True,
    "tiled_rows": True,
    "list_resets": False,
    "lidar_rays_per_thread": LIDAR_RAYS_PER_THREAD,
}


def step_kernels(n_agents: int, scenario: str, **options) -> dict:
    """``{kernel key: kernel}`` of one fused step (auto-reset included) of ``scenario``."""
    wp.config.enable_cpu_blocks = True  # Warp honours CPU block widths (the tiled kernels)
    kw = dict(n_envs=2, device="cpu", seed=0, n_agents=n_agents, auto_reset=True, **options)
    sc = get_scenario(scenario)(**{k: v for k, v in kw.items() if k not in ENV_KWARGS})
    hooks = sc.step_end_hooks(sc.make_world())
    plan = dict(CUDA_PLAN)
    if hooks is not None:  # the scenario's latency fusions, as on a small CUDA batch
        plan.update(fused_step_end=hooks.fuses_end, reset_ahead=hooks.prepares_ahead)
    env = swarp.make(scenario, **kw, plan=plan)
    found = {}

    class Spy(Launcher):
        def launch(self, kernel, *args, **kwargs):
            found[kernel.key] = kernel

        def zero(self, array):
            pass

    env._fused_step(Spy())
    return found


def cubin_stats(kernel, arch: int, cuobjdump: str) -> list[tuple[str, dict]]:
    out_dir = tempfile.mkdtemp(prefix="swarp_sass_")
    paths = wp.compile_aot_module(kernel.module, arch=arch, module_dir=out_dir, use_ptx=False)
    rows = []
    for path in paths:
        usage = subprocess.run([cuobjdump, "-res-usage", str(path)], capture_output=True, text=True).stdout
        sass = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True).stdout
        for name, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function : |\Z)", sass, re.S):
            if not name.endswith("_forward"):
                continue
            ops = collections.Counter(
                m.split(".")[0] for m in re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", body)
            )
            match = re.search(
                rf"Function {re.escape(name)}:\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage
            )
            reg, stack, _, local = (int(g) for g in match.groups()) if match else (0, 0, 0, 0)
            rows.append(
                (name, dict(reg=reg, stack=stack, local=local, instructions=sum(ops.values()), top=ops.most_common(6)))
            )
    shutil.rmtree(out_dir, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", help="substrings of kernel keys (default: every kernel of the step)")
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--lidar-rays", type=int, default=0)
    args = parser.parse_args()
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("cuobjdump not found: set CUOBJDUMP or put it on PATH")
    wp.config.quiet = True
    options = {"lidar_rays": args.lidar_rays} if args.lidar_rays else {}
    for key, kernel in step_kernels(args.agents, args.scenario, **options).items():
        if args.kernels and not any(k in key for k in args.kernels):
            continue
        for name, s in cubin_stats(kernel, args.arch, cuobjdump):
            top = ", ".join(f"{op} {n}" for op, n in s["top"])
            print(
                f"{name}: {s['reg']} registers, stack {s['stack']}, local {s['local']},"
                f" {s['instructions']} SASS ({top})"
            )


if __name__ == "__main__":
    main()
