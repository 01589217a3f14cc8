"""``swarp.env.selection``: compacting a mask into a device-side env list and the launch it picks."""

import pytest
import torch
import warp as wp

from swarp.core.launch import EAGER
from swarp.env.selection import (
    RESET_LIST_ENV,
    SELECT_ALL,
    SELECT_LIST,
    SELECT_MASK,
    EnvList,
    EnvSelection,
    list_pays,
    list_rows,
    selection_env,
    selection_stop,
)


@wp.kernel
def mark_selected(envs: EnvSelection, hits: wp.array2d(dtype=wp.int32)):
    """hits[env, slot] += 1 for every env the selection gives launch row ``row``."""
    row, slot = wp.tid()
    for i in range(row, selection_stop(envs, row), envs.stride):
        env = selection_env(envs, i)
        if env >= 0:
            wp.atomic_add(hits, env, slot, 1)


def launch_marks(envs: EnvSelection, rows: int, n_envs: int, threads: int = 2) -> torch.Tensor:
    hits = wp.zeros((n_envs, threads), dtype=wp.int32, device="cpu")
    wp.launch(mark_selected, dim=(rows, threads), inputs=[envs], outputs=[hits], device="cpu")
    return wp.to_torch(hits)


@pytest.mark.parametrize("rows", [None, 1, 2, 5, 64])
def test_every_selected_env_is_visited_exactly_once_by_each_slot(generator, rows):
    n_envs = 37
    mask_t = torch.rand(n_envs, generator=generator) < 0.4
    mask = wp.array(mask_t.numpy(), dtype=wp.bool, device="cpu")
    envs = EnvList(n_envs, "cpu")
    envs.rows = rows
    envs.launch_compact(EAGER, mask)
    count = int(wp.to_torch(envs.count)[0])
    assert count == int(mask_t.sum())
    assert sorted(wp.to_torch(envs.envs)[:count].tolist()) == torch.nonzero(mask_t).flatten().tolist()
    selection, launch_rows = envs.select(mask, threads_per_env=2)
    assert selection.mode == SELECT_LIST and launch_rows == (rows if rows is not None else 1)
    hits = launch_marks(selection, launch_rows, n_envs)
    assert torch.equal(hits, mask_t.view(-1, 1).int().expand(n_envs, 2))


def test_other_masks_and_a_cleared_list_launch_over_every_env(generator):
    n_envs = 9
    mask_t = torch.rand(n_envs, generator=generator) < 0.5
    mask = wp.array(mask_t.numpy(), dtype=wp.bool, device="cpu")
    other = wp.array((~mask_t).numpy(), dtype=wp.bool, device="cpu")
    envs = EnvList(n_envs, "cpu")
    envs.launch_compact(EAGER, mask)
    selection, rows = envs.select(other, 2)  # not the listed mask: the mask itself, a row per env
    assert selection.mode == SELECT_MASK and rows == n_envs
    assert torch.equal(launch_marks(selection, rows, n_envs)[:, 0], (~mask_t).int())
    selection, rows = envs.select(None, 2)
    assert selection.mode == SELECT_ALL and rows == n_envs
    assert (launch_marks(selection, rows, n_envs) == 1).all()
    envs.mask = None  # what the environment does once the mask may change
    assert envs.select(mask, 2)[0].mode == SELECT_MASK


def test_list_rows_on_the_cpu_are_one_row_and_lists_only_when_forced(monkeypatch):
    assert list_rows("cpu", 1000, 16) == 1
    assert not list_pays("cpu", 10**6, 64)
    monkeypatch.setenv(RESET_LIST_ENV, "on")
    assert list_pays("cpu", 4, 4)
    monkeypatch.setenv(RESET_LIST_ENV, "maybe")
    with pytest.raises(ValueError, match=RESET_LIST_ENV):
        list_pays("cpu", 4, 4)


@pytest.mark.gpu
def test_list_rows_fill_the_gpu_twice_and_stay_within_the_envs():
    sm = wp.get_device("cuda:0").sm_count
    assert list_rows("cuda:0", 10**7, 64) == -(-2 * sm * 2048 // 64)
    assert list_rows("cuda:0", 10, 64) == 10
    threads = 2 * sm * 2048
    assert list_pays("cuda:0", threads // 16, 16) and not list_pays("cuda:0", threads // 16 - 1, 16)
