"""Where a CPU step's time goes inside its Warp kernels: Linux ``perf`` samples mapped onto them.

    python tools/cpu_hotspots.py                                   # navigation 512 x 4, VMAS's task
    python tools/cpu_hotspots.py --annotate fused_substep          # its instructions with samples
    python tools/cpu_hotspots.py --envs 1024 --agents 16 --option substeps=1 --auto-reset

Steps one environment on one thread (``cpu_shards=1``) in a loop while ``perf record`` samples this
process for ``--seconds``, then maps every sample onto the Warp kernel it landed in (Warp loads
CPU kernels into anonymous memory, so ``perf report`` alone shows raw addresses): the share of
the samples per kernel and per ``--bucket`` bytes of each kernel's code, and with ``--annotate``
the disassembly of a kernel (its object file in Warp's kernel cache) with the samples per
instruction. A sample lands on the instruction after a slow one (skid): read the counts as "the
work just before here". The kernels' addresses come from Warp's loaded modules (internals: a
development tool, not part of the package). Needs ``perf`` with access to this process
(``kernel.perf_event_paranoid`` <= 2 does) and ``objdump``; the timer-based ``cpu-clock`` event
works in virtual machines without hardware counters.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import ctypes
import gc
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import torch
import warp as wp

from swarp.benchmark.common import parse_option
from swarp.benchmark.compare_sims import matched_options
from swarp.benchmark.profile_env import warm_env


def loaded_kernels() -> list[tuple[int, str, str]]:
    """``(entry address, mangled name, module hash prefix)`` of every CPU kernel Warp has loaded, by
    address (the prefix names the module's directory in Warp's kernel cache)."""
    found = []
    for obj in gc.get_objects():
        if type(obj).__name__ == "ModuleExec" and getattr(obj, "device", None) is not None and obj.device.is_cpu:
            prefix = obj.module_hash.hex()[:7] if isinstance(obj.module_hash, bytes) else ""
            for name, hooks in obj.kernel_hooks.items():
                address = ctypes.cast(hooks.forward, ctypes.c_void_p).value if hooks.forward else None
                if address:
                    found.append((address, name, prefix))
    return sorted(found)


def object_file(mangled: str, prefix: str = "") -> tuple[str, int] | None:
    """``(path, offset of the kernel's entry)`` of the object file in Warp's kernel cache that
    defines ``mangled``'s CPU entry point, or ``None``; the module directory ending in ``prefix``
    first (the same kernel can sit in modules built with other options)."""
    entry = f"{mangled}_cpu_forward"
    cache = wp.config.kernel_cache_dir
    mine = glob.glob(os.path.join(cache, f"*_{prefix}", "*.cpp")) if prefix else []
    for cpp in mine + glob.glob(os.path.join(cache, "**", "*.cpp"), recursive=True):
        with open(cpp, encoding="utf-8", errors="replace") as f:
            if entry not in f.read():
                continue
        for obj in glob.glob(os.path.join(os.path.dirname(cpp), "*.o")):
            symbols = subprocess.run(["objdump", "-t", obj], capture_output=True, text=True).stdout
            for line in symbols.splitlines():
                if line.endswith(" " + entry):
                    return obj, int(line.split()[0], 16)
    return None


def sample(seconds: float, step) -> list[int]:
    """Instruction addresses of ``perf record``'s samples of this process while ``step()`` loops."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        perf = subprocess.Popen(
            ["perf", "record", "-q", "-F", "4999", "-p", str(os.getpid()), "-o", data, "--", "sleep", str(seconds)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        while perf.poll() is None:
            step()
        if perf.returncode != 0:
            raise RuntimeError(f"perf record failed: {perf.stderr.read().decode().strip()}")
        script = subprocess.run(["perf", "script", "-F", "ip", "-i", data], capture_output=True, text=True, check=True)
    return [int(word, 16) for word in script.stdout.split()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--envs", type=int, default=512)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--option", action="append", default=[], type=parse_option, help="scenario option key=value")
    parser.add_argument("--auto-reset", action="store_true", help="with auto-reset (VMAS's task has none)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bucket", type=lambda s: int(s, 0), default=0x80, help="bytes of code per row")
    parser.add_argument("--annotate", default=None, help="print this kernel's instructions (a name substring)")
    parser.add_argument("--min-samples", type=int, default=10, help="annotate rows with at least this many")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("perf", "objdump") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"{' and '.join(missing)} not found on PATH: this tool needs Linux perf and binutils")
    # Navigation as VMAS's task (compare_vmas' swarp run); other scenarios as they come.
    options = matched_options("vmas", args.agents) if args.scenario == "navigation" else {}
    options.update(dict(args.option), auto_reset=args.auto_reset)
    env, actions = warm_env(args.envs, args.agents, args.scenario, "cpu", plan={"cpu_shards": 1}, **options)
    with torch.no_grad():
        for _ in range(100):
            env.step(actions)
        start = time.perf_counter()
        for _ in range(200):
            env.step(actions)
        us = (time.perf_counter() - start) / 200 * 1e6
        print(f"{args.scenario} {args.envs} x {args.agents}, one thread: {us:.1f} us/step")
        kernels = loaded_kernels()
        ips = sample(args.seconds, lambda: env.step(actions))
    starts = [address for address, _, _ in kernels]
    per_kernel: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    elsewhere = 0
    for ip in ips:
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip - starts[i] < 1 << 16:  # a kernel's code is far below 64 KiB
            per_kernel[kernels[i][1]][ip - starts[i]] += 1
        else:
            elsewhere += 1
    total = len(ips)
    print(f"{total} samples; outside the kernels (Python, Warp's runtime, torch, the system): {elsewhere / total:.1%}")
    for name, offsets in sorted(per_kernel.items(), key=lambda item: -item[1].total()):
        n = offsets.total()
        print(f"\n{n / total:6.1%}  {name}")
        buckets = collections.Counter({offset // args.bucket * args.bucket: 0 for offset in offsets})
        for offset, count in offsets.items():
            buckets[offset // args.bucket * args.bucket] += count
        print("   " + "  ".join(f"+{b:x}: {c / n:.0%}" for b, c in sorted(buckets.items()) if c / n >= 0.01))
    if args.annotate:
        matches = [name for name in per_kernel if args.annotate in name]
        if not matches:
            raise SystemExit(f"no sampled kernel's name contains {args.annotate!r}")
        name = matches[0]
        found = object_file(name, next(prefix for _, kernel, prefix in kernels if kernel == name))
        if found is None:
            raise SystemExit(f"{name}'s object file is not in {wp.config.kernel_cache_dir}")
        obj, entry = found
        offsets = per_kernel[name]
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True).stdout
        print(f"\n{name} ({obj}); instructions with >= {args.min_samples} samples and the two before each:")
        pattern = re.compile(r"^\s+([0-9a-f]+):\s+(.*)$", re.M)
        lines = [(int(m.group(1), 16) - entry, m.group(2)) for m in pattern.finditer(listing)]
        shown = set()
        for i, (offset, _) in enumerate(lines):
            if offsets.get(offset, 0) >= args.min_samples:
                shown.update(range(max(0, i - 2), i + 1))
        previous = None
        for i in sorted(shown):
            if previous is not None and i != previous + 1:
                print("   ...")
            offset, text = lines[i]
            print(f"{offsets.get(offset, 0):6d}  +{offset:5x}  {text}")
            previous = i


if __name__ == "__main__":
    main()
