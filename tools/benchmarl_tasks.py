"""Regenerate swarp/interop/benchmarl_tasks/<scenario>.yaml from the scenario defaults and the task records
(swarp/train/tasks.py): `python tools/benchmarl_tasks.py` after changing either (a test fails until then)."""

import yaml

import swarp
from swarp.interop.benchmarl import CONFIG_DIR, default_config
from swarp.train.tasks import TASKS, get_task


def scalar(v):
    if isinstance(v, list):
        return "[" + ", ".join(scalar(x) for x in v) + "]"
    text = yaml.safe_dump(v, default_flow_style=True).strip()
    return text[: -len("\n...")] if text.endswith("\n...") else text


for name in swarp.scenario_names():
    task = get_task(name)
    config = default_config(name)
    overrides = {}
    if task.max_steps is not None:
        overrides["max_steps"] = task.max_steps
    overrides.update(task.options)
    for k, v in overrides.items():
        assert k in config, (name, k)
        config[k] = list(v) if isinstance(v, tuple) else v
    if name in TASKS and overrides:
        tail = (
            "except those of its training record (swarp/train/tasks.py): "
            + ", ".join(f"{k}={v}" for k, v in overrides.items())
            + "."
        )
    elif name in TASKS:
        tail = "(its training record in swarp/train/tasks.py changes none)."
    else:
        tail = "(it has no training record in swarp/train/tasks.py)."
    head = (
        f"# BenchMARL task swarp/{name} (swarp.interop.benchmarl.SwarpTask.{name.upper()}).\n"
        "# Keywords of swarp.make: scenario options and Environment keywords (BenchMARL sets n_envs,\n"
        "# device and seed). max_steps is the episode length [steps], also the length of BenchMARL's\n"
        "# evaluation rollouts. Written by tools/benchmarl_tasks.py. Every option of the scenario is at\n"
        "# its default\n"
        f"# {tail}\n"
    )
    body = "".join(f"{k}: {scalar(v)}\n" for k, v in config.items())
    assert yaml.safe_load(body) == config, name
    (CONFIG_DIR / f"{name}.yaml").write_text(head + body)
    print(name, overrides)
