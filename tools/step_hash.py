"""Hashes of 200 steps of every scenario, to compare two swarp trees bit for bit.

    mkdir -p .ab/base57 && git archive <commit> swarp | tar -x -C .ab/base57
    python tools/step_hash.py --trees .ab/base57 .            # CPU; --device cuda:0 on a GPU

Each tree runs in its own process. Per scenario (its defaults, 8 envs, seed 0, auto-reset) and per
path (the fused kernels where the scenario has them, and the torch reference), 200 steps of
continuous actions drawn uniformly in the action box from a fixed generator; the hash covers every
step's observation, reward, terminated and truncated bytes. Scenarios of only one tree are listed
as missing. Exit status 1 where two trees differ on a scenario both have. ``--variants`` adds the
issue-57 paths (a channel, discrete actions, the alive mask: ``VARIANTS``), their actions drawn by
``swarp.testing.rollouts.random_actions``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

#: Scenario options beyond the defaults whose hashes ``--variants`` adds (label -> (scenario, options)).
VARIANTS = {
    "flocking+comm": ("flocking", {"comm_dim": 4}),
    "flocking+comm+discrete": ("flocking", {"comm_dim": 4, "action_space": "discrete"}),
    "navigation+counts": ("navigation", {"n_agents": (2, 4)}),
    "navigation+leave": ("navigation", {"leave_on_goal": True}),
    "speaker_listener+discrete": ("speaker_listener", {"action_space": "discrete"}),
}

WORKER = """
import hashlib, json, sys, torch, swarp
device, steps, variants = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
out = {}
if variants:
    from swarp.testing.rollouts import flat_outputs, random_actions
for label, (name, options) in variants.items():
    for fused in (True, False):
        key = f"{label}/{'fused' if fused else 'torch'}"
        options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        env = swarp.make(name, n_envs=8, device=device, seed=0, auto_reset=True, fused=fused, **options)
        generator = torch.Generator().manual_seed(0)
        digest = hashlib.sha256()
        for _ in range(steps):
            obs, reward, terminated, truncated, _ = flat_outputs(env, env.step(random_actions(env, generator)))
            for tensor in (obs, reward, terminated, truncated):
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        out[key] = digest.hexdigest()[:16]
for name in swarp.scenario_names() if not variants else ():
    for fused in (True, False):
        key = f"{name}/{'fused' if fused else 'torch'}"
        try:
            env = swarp.make(name, n_envs=8, device=device, seed=0, auto_reset=True, fused=fused)
        except ValueError:
            continue  # no fused kernels
        except Exception as error:  # a scenario this tree cannot build here: named, not fatal
            out[key] = f"error: {type(error).__name__}: {str(error)[:80]}"
            continue
        low, high = (b.to(env.torch_device) for b in env.action_bounds)
        generator = torch.Generator().manual_seed(0)
        digest = hashlib.sha256()
        for _ in range(steps):
            u = torch.rand((env.n_envs, env.n_agents, low.shape[-1]), generator=generator).to(env.torch_device)
            env.step(low + (high - low) * u)
            for tensor in (env.obs, env.reward, env.terminated, env.truncated):
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        out[key] = digest.hexdigest()[:16]
print("RESULT" + json.dumps(out))
"""


def hashes(root: pathlib.Path, device: str, steps: int, variants: dict) -> dict[str, str]:
    """``{scenario/path: hash}`` of the tree at ``root`` (of ``variants`` instead, where given)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root.resolve()), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-c", WORKER, device, str(steps), json.dumps(variants)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    if result.returncode != 0:
        sys.exit(f"{root}: the worker failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.split("RESULT")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs=2, required=True, help="two swarp trees (folders holding swarp/)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--variants", action="store_true", help="the issue-57 variants instead of the defaults")
    args = parser.parse_args()
    variants = VARIANTS if args.variants else {}
    a, b = (hashes(pathlib.Path(tree), args.device, args.steps, variants) for tree in args.trees)
    differ = 0
    print(f"| scenario/path | {args.trees[0]} | {args.trees[1]} | same |")
    print("| --- | --- | --- | --- |")
    for key in sorted(a.keys() | b.keys()):
        same = "missing" if key not in a or key not in b else "yes" if a[key] == b[key] else "NO"
        same = "error" if "error" in a.get(key, "") + b.get(key, "") else same
        differ += same == "NO"
        print(f"| {key} | {a.get(key, '-')} | {b.get(key, '-')} | {same} |")
    print(f"{differ} differ on {args.device}, {args.steps} steps")
    differ += sum("error" in value for value in [*a.values(), *b.values()])
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
