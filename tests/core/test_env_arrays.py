"""``swarp.core.env_arrays``: while a shard is built, named per-env arrays are rows of its
environment's buffers; every other allocation is new memory."""

import torch
import warp as wp

from swarp.core import env_arrays


def test_outside_a_shard_every_array_is_new_and_filled():
    a = env_arrays.zeros("state.pos", (3, 2), wp.vec2, "cpu")
    b = env_arrays.full("neighbors.nbr", (3, 4), -1, wp.int32, "cpu")
    assert a.shape == (3, 2) and not a.numpy().any()
    assert (b.numpy() == -1).all()


def test_a_fitting_named_array_is_the_environments_rows_with_their_values():
    pos = torch.arange(5 * 2 * 2, dtype=torch.float32).reshape(5, 2, 2)
    nbr = torch.arange(5 * 3 * 2, dtype=torch.int32).reshape(5, 3, 2)
    with env_arrays.views_of({"state.pos": pos, "neighbors.nbr": nbr}, 1, 4):
        view = env_arrays.zeros("state.pos", (3, 2), wp.vec2, "cpu")
        listed = env_arrays.full("neighbors.nbr", (3, 3, 2), -1, wp.int32, "cpu")
    assert view.ptr == pos[1:4].data_ptr() and listed.ptr == nbr[1:4].data_ptr()
    assert torch.equal(wp.to_torch(view), pos[1:4]) and torch.equal(wp.to_torch(listed), nbr[1:4])
    wp.to_torch(view)[0, 0, 0] = -7.0  # the shard writes the environment's row
    assert pos[1, 0, 0] == -7.0


def test_anything_that_does_not_fit_is_new_memory():
    pos = torch.zeros(5, 2, 2)
    with env_arrays.views_of({"state.pos": pos}, 1, 4):
        others = [
            env_arrays.zeros("state.vel", (3, 2), wp.vec2, "cpu"),  # a name the environment lacks
            env_arrays.zeros(None, (3, 2), wp.vec2, "cpu"),  # unnamed (a scratch state)
            env_arrays.zeros("state.pos", (2, 2), wp.vec2, "cpu"),  # not the shard's rows
            env_arrays.zeros("state.pos", (3, 2), wp.vec3, "cpu"),  # another trailing width
            env_arrays.zeros("state.pos", (3, 2), wp.vec2d, "cpu"),  # another precision
            env_arrays.zeros("state.pos", (3, 2), wp.vec2, "cpu", requires_grad=True),  # taped
        ]
    lo, hi = pos.data_ptr(), pos.data_ptr() + pos.numel() * pos.element_size()
    assert all(not lo <= a.ptr < hi for a in others)
