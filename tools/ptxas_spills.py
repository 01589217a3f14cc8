"""Registers and spills of every Warp CUDA kernel in one or two kernel caches, from ``ptxas -v``.

    WARP_CACHE_PATH=/tmp/wc_new python tools/ptxas_spills.py --compile -- -m swarp.benchmark.scenarios ...
    python tools/ptxas_spills.py /tmp/wc_base /tmp/wc_new        # the report (base, then new)

``--compile`` runs the given Python command with Warp writing PTX (``warp.config.cuda_output``), so the
cache holds text ``ptxas`` can read; the report assembles each ``.ptx`` for the GPU here (``-arch``,
default sm_90) with the ``ptxas`` that ships with Triton (or the one on PATH). A kernel is named
without Warp's module hash, so the two caches' kernels line up where their names did not change.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '(\w+)'")
SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")


def find_ptxas() -> str:
    try:
        import triton

        bundled = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("ptxas")
    if found is None:
        sys.exit("no ptxas: install triton (it ships one) or put the CUDA toolkit's on PATH")
    return found


def kernel_name(entry: str) -> str:
    # Warp names an entry <kernel>_<module hash>_cuda_kernel_<forward|backward>.
    return re.sub(r"_[0-9a-f]{7,}_cuda_kernel", "_cuda_kernel", entry)


def assemble(cache: pathlib.Path, ptxas: str, arch: str) -> dict[str, tuple[int, int, int]]:
    """kernel -> (registers, spill stores, spill loads) [bytes] over every .ptx under ``cache``."""
    found: dict[str, tuple[int, int, int]] = {}
    for ptx in sorted(cache.rglob("*.ptx")):
        out = subprocess.run(
            [ptxas, "-v", f"-arch={arch}", str(ptx), "-o", os.devnull], capture_output=True, text=True
        ).stderr
        name, spills = None, (0, 0)
        for line in out.splitlines():
            if m := ENTRY.search(line):
                name = kernel_name(m.group(1))
            elif m := SPILLS.search(line):
                spills = (int(m.group(2)), int(m.group(3)))
            elif (m := REGISTERS.search(line)) and name:
                old = found.get(name, (0, 0, 0))
                found[name] = max(old, (int(m.group(1)), *spills))
                name, spills = None, (0, 0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("caches", nargs="*", type=pathlib.Path)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--compile", action="store_true", help="then -- -m module args...: run it writing PTX")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if args.compile:
        import warp

        warp.config.cuda_output = "ptx"
        assert command[0] == "-m", "--compile takes -- -m module [args]"
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        return
    ptxas = find_ptxas()
    tables = [assemble(cache, ptxas, args.arch) for cache in args.caches]
    for cache, table in zip(args.caches, tables, strict=True):
        spilling = {k: v for k, v in table.items() if v[1] or v[2]}
        most = max(table.values(), default=(0, 0, 0))[0]
        print(f"{cache}: {len(table)} kernels, most registers {most}, {len(spilling)} spilling")
        for name, (regs, stores, loads) in sorted(spilling.items()):
            print(f"  spills: {name}: {regs} registers, {stores} B stores, {loads} B loads")
    if len(tables) == 2:
        base, new = tables
        changed = [(k, base[k][0], new[k][0]) for k in sorted(base.keys() & new.keys()) if base[k][0] != new[k][0]]
        print(f"{len(base.keys() & new.keys())} kernels in both; {len(changed)} with other register counts:")
        for name, before, after in changed:
            print(f"  {name}: {before} -> {after}")
        print(f"only in base: {len(base.keys() - new.keys())}; only in new: {len(new.keys() - base.keys())}")


if __name__ == "__main__":
    main()
