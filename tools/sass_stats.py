"""Registers, spills and static SASS instruction counts of swarp's CUDA kernels, without a GPU.

    python tools/sass_stats.py integrate contact_forces observe_rows [--arch 90] [--agents 16]
    python tools/sass_stats.py contact_forces integrate --plan fused_substep=False   # a plan field on top

Builds an environment of the scenario on the CPU with the plan of a small CUDA batch (``CUDA_PLAN``:
register lists, one agent per thread, the fused substep, the tiled row store and fused end, starts
prepared ahead, the grouped lidar kernel), so the step launches the kernels it launches on a GPU.
Compiles their modules ahead of time for ``sm_<arch>`` (Warp's NVRTC, no driver needed) and reads
the cubins with ``cuobjdump`` (set ``CUOBJDUMP`` or put it on PATH). Without cuobjdump but with
``ptxas`` (set ``PTXAS``, or on PATH, or under /usr/local/cuda/bin) it prints registers and spills
only, from ``ptxas -v`` of Warp's PTX: where that ptxas is older than Warp's NVRTC, the PTX's
``.version`` is lowered to the newest it reads (the kernels use nothing newer; the counts matched
the H200's ncu reports in s26). Use it to compare kernel variants before spending GPU time; speed
itself is only measured on the GPU.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import warp as wp

import swarp
from swarp.benchmark.common import parse_option
from swarp.env.make import ENV_KWARGS
from swarp.physics import substep
from swarp.runtime.launch import Launcher
from swarp.runtime.plan import ENV_BLOCK, FUSED_SUBSTEP_CHOSEN_MAX_AGENTS, LIDAR_RAYS_PER_THREAD
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


def step_kernels(n_agents: int, scenario: str, plan_fields: dict | None = None, **options) -> dict:
    """``{kernel key: kernel}`` of one fused step (auto-reset included) of ``scenario``, with
    ``plan_fields`` fixed on top of ``CUDA_PLAN`` (e.g. ``{"fused_substep": False}``)."""
    wp.config.enable_cpu_blocks = True  # Warp honours CPU block widths (the tiled kernels)
    kw = dict(n_envs=2, device="cpu", seed=0, n_agents=n_agents, auto_reset=True, **options)
    sc = get_scenario(scenario)(**{k: v for k, v in kw.items() if k not in ENV_KWARGS})
    world = sc.make_world()
    hooks = sc.step_end_hooks(world)
    plan = dict(CUDA_PLAN)
    # The fused substep where the world allows it and CUDA chooses it (up to 64 agents an env).
    plan["fused_substep"] = substep.can_fuse(world.agents, world.world) and n_agents <= FUSED_SUBSTEP_CHOSEN_MAX_AGENTS
    if hooks is not None:  # the scenario's latency fusions, as on a small CUDA batch
        plan.update(fused_step_end=hooks.fuses_end, reset_ahead=hooks.prepares_ahead)
    plan.update(plan_fields or {})
    env = swarp.make(scenario, **kw, plan=plan)
    found = {}

    class Spy(Launcher):
        def launch(self, kernel, *args, **kwargs):
            found[kernel.key] = kernel

        def zero(self, array):
            pass

    env.launches.step(Spy())
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


def ptxas_stats(kernel, arch: int, ptxas: str) -> list[tuple[str, dict]]:
    """``(kernel function, {"reg", "spill_stores", "spill_loads"})`` of ``kernel``'s module from
    ``ptxas -v``, for a machine without cuobjdump."""
    out_dir = tempfile.mkdtemp(prefix="swarp_ptx_")

    def run(path: pathlib.Path, text: str) -> subprocess.CompletedProcess:
        path.write_text(text)
        cmd = [ptxas, f"-arch=sm_{arch}", "-v", str(path), "-o", os.devnull]
        return subprocess.run(cmd, capture_output=True, text=True)

    rows = []
    for path in map(pathlib.Path, wp.compile_aot_module(kernel.module, arch=arch, module_dir=out_dir, use_ptx=True)):
        text = path.read_text().rstrip("\x00")  # NVRTC's PTX ends in a NUL that ptxas rejects
        result = run(path, text)
        older = re.search(r"current version is '(\d+\.\d+)'", result.stderr)
        if result.returncode != 0 and older:  # an older ptxas: the newest .version it reads
            result = run(path, re.sub(r"^\.version \S+", f".version {older.group(1)}", text, count=1, flags=re.M))
        if result.returncode != 0:
            raise SystemExit(f"ptxas failed on {path}:\n{result.stderr}")
        entry = r"Compiling entry function '(\w+)'(.*?)(?=Compiling entry function|\Z)"
        entries = re.findall(entry, result.stderr, re.S)
        for name, body in entries:
            if not name.endswith("_forward"):
                continue
            reg = re.search(r"Used (\d+) registers", body)
            spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", body)
            stores, loads = (int(g) for g in spills.groups()) if spills else (0, 0)
            rows.append((name, dict(reg=int(reg.group(1)) if reg else 0, spill_stores=stores, spill_loads=loads)))
    shutil.rmtree(out_dir, ignore_errors=True)
    return rows


def find_ptxas() -> str | None:
    """``ptxas``: ``PTXAS``, on PATH, or under /usr/local/cuda/bin; ``None`` if none is there."""
    found = os.environ.get("PTXAS") or shutil.which("ptxas")
    default = "/usr/local/cuda/bin/ptxas"
    return found or (default if os.path.exists(default) else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", help="substrings of kernel keys (default: every kernel of the step)")
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--lidar-rays", type=int, default=0)
    parser.add_argument(
        "--plan", action="append", type=parse_option, default=[], help="ExecutionPlan field=value on top (repeatable)"
    )
    args = parser.parse_args()
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    ptxas = None if cuobjdump else find_ptxas()
    if cuobjdump is None and ptxas is None:
        raise SystemExit("neither cuobjdump nor ptxas found: set CUOBJDUMP or PTXAS, or put one on PATH")
    wp.config.quiet = True
    options = {"lidar_rays": args.lidar_rays} if args.lidar_rays else {}
    for key, kernel in step_kernels(args.agents, args.scenario, dict(args.plan), **options).items():
        if args.kernels and not any(k in key for k in args.kernels):
            continue
        if ptxas is not None:
            for name, s in ptxas_stats(kernel, args.arch, ptxas):
                spills = f"spill stores {s['spill_stores']}, loads {s['spill_loads']}"
                print(f"{name}: {s['reg']} registers, {spills} (ptxas)")
            continue
        for name, s in cubin_stats(kernel, args.arch, cuobjdump):
            top = ", ".join(f"{op} {n}" for op, n in s["top"])
            print(
                f"{name}: {s['reg']} registers, stack {s['stack']}, local {s['local']},"
                f" {s['instructions']} SASS ({top})"
            )


if __name__ == "__main__":
    main()
