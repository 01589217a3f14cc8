"""``swarp.runtime.env_list``: compacting a mask into a device-side env list and the launch it picks."""

import pytest
import torch
import warp as wp

import swarp
from swarp.runtime.env_list import EnvList, EnvListArgs, list_rows
from swarp.runtime.launch import EAGER, Launcher


@wp.kernel
def mark_listed(envs: EnvListArgs, hits: wp.array2d(dtype=wp.int32)):
    """hits[env, slot] += 1 for every env of the list that launch row ``row`` walks."""
    row, slot = wp.tid()
    for i in range(row, envs.count[0], envs.stride):
        wp.atomic_add(hits, envs.envs[i], slot, 1)


@pytest.mark.parametrize("rows", [None, 1, 2, 5, 64])
def test_every_listed_env_is_visited_exactly_once_by_each_slot(generator, rows):
    n_envs = 37
    mask_t = torch.rand(n_envs, generator=generator) < 0.4
    mask = wp.array(mask_t.numpy(), dtype=wp.bool, device="cpu")
    envs = EnvList(n_envs, "cpu")
    envs.rows = rows
    envs.launch_compact(EAGER, mask)
    count = int(wp.to_torch(envs.count)[0])
    assert count == int(mask_t.sum())
    assert sorted(wp.to_torch(envs.envs)[:count].tolist()) == torch.nonzero(mask_t).flatten().tolist()
    args, launch_rows = envs.select(mask, threads_per_env=2)
    assert launch_rows == args.stride == (rows if rows is not None else 1)
    hits = wp.zeros((n_envs, 2), dtype=wp.int32, device="cpu")
    wp.launch(mark_listed, dim=(launch_rows, 2), inputs=[args], outputs=[hits], device="cpu")
    assert torch.equal(wp.to_torch(hits), mask_t.view(-1, 1).int().expand(n_envs, 2))


def test_only_the_listed_mask_while_current_gets_the_list(generator):
    n_envs = 9
    mask_t = torch.rand(n_envs, generator=generator) < 0.5
    mask = wp.array(mask_t.numpy(), dtype=wp.bool, device="cpu")
    other = wp.array((~mask_t).numpy(), dtype=wp.bool, device="cpu")
    envs = EnvList(n_envs, "cpu")
    assert envs.select(mask, 2) is None  # nothing listed yet
    envs.launch_compact(EAGER, mask)
    assert envs.select(mask, 2) is not None
    assert envs.select(other, 2) is None and envs.select(None, 2) is None
    envs.mask = None  # what the environment does once the mask may change
    assert envs.select(mask, 2) is None


def test_list_rows_on_the_cpu_are_one_row():
    """On the CPU one row walks the whole list (its threads run one after another anyway)."""
    assert list_rows("cpu", 1000, 16) == 1


@pytest.mark.gpu
def test_list_rows_fill_the_gpu_twice_and_stay_within_the_envs():
    sm = wp.get_device("cuda:0").sm_count
    assert list_rows("cuda:0", 10**7, 64) == -(-2 * sm * 2048 // 64)
    assert list_rows("cuda:0", 10, 64) == 10


@pytest.mark.parametrize("list_resets", [True, False])
def test_the_auto_reset_launches_the_listed_twins_exactly_when_listing(list_resets):
    """With the list on, the auto-reset compacts the done mask and launches the listed twins of the
    reset and the masked observation; off, the masked kernels; ``reset_at`` always the masked ones."""
    plan = {"list_resets": list_resets}
    env = swarp.make("navigation", n_envs=4, device="cpu", seed=0, n_agents=3, auto_reset=True, plan=plan)
    launched = []

    class Spy(Launcher):
        def launch(self, kernel, *args, **kwargs):
            launched.append(kernel.key)
            super().launch(kernel, *args, **kwargs)

    env.launches.step(Spy())
    listed = [key for key in launched if "listed" in key or "compact_envs" in key]
    if list_resets:
        assert any("compact_envs" in k for k in listed)
        assert any("nav_reset_listed" in k for k in listed) and any("observe_listed" in k for k in listed)
        assert not any("nav_reset_" in k and "listed" not in k for k in launched)
    else:
        assert listed == []
    launched.clear()
    env.launches.reset(Spy())
    assert not any("listed" in k or "compact_envs" in k for k in launched)
    assert env.buffers.done_list.mask is None  # disarmed after the step
