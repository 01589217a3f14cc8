"""Counter-based random numbers: a pure function of (seed, env, episode, draw index).

Resets draw from this on the device, with no generator state to advance, so a reset is
capturable in a CUDA graph, replays identically, and gives the same numbers whichever envs are
reset together. The torch twin computes the very same bits, so the torch reference of a
scenario's reset and its Warp kernel agree exactly. Uniforms have 24 random bits, exactly
representable in float32 and float64 alike.

The env in the key is the *global* env index: an ``Environment`` built with ``env_offset=k`` keys
its local env i as env ``k + i``. A batch split into shards (one per process or GPU, see
``swarp.distributed``, or partial batches of one process) therefore draws exactly what the unsplit
batch draws, env for env. ``split_envs`` is the one rule for cutting a batch into such slices.
"""

from __future__ import annotations

import torch
import warp as wp

_MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_INV_2_24 = 1.0 / 16777216.0
_M1_U32 = wp.constant(wp.uint32(_M1))
_M2_U32 = wp.constant(wp.uint32(_M2))


@wp.func
def hash_u32(x: wp.uint32) -> wp.uint32:
    """32-bit integer mixer (lowbias32): every input bit affects every output bit."""
    x = x ^ (x >> wp.uint32(16))
    x = x * _M1_U32
    x = x ^ (x >> wp.uint32(15))
    x = x * _M2_U32
    x = x ^ (x >> wp.uint32(16))
    return x


@wp.func
def stream_key(seed: int, env: int, episode: int) -> wp.uint32:
    """The key of one env's episode; combine with a draw index in ``uniform``."""
    h = hash_u32(wp.uint32(seed))
    h = hash_u32(h ^ wp.uint32(env))
    return hash_u32(h ^ wp.uint32(episode))


@wp.struct
class ResetStreams:
    """The reset random streams of one ``Environment``, as one argument of a scenario's reset kernel.

    Attributes:
        seed: [1] int32, the env's seed.
        episode: [E] int32, each env's episode counter.
        env_offset: Global index of local env 0 (``Environment.env_offset``).
    """

    seed: wp.array(dtype=wp.int32)
    episode: wp.array(dtype=wp.int32)
    env_offset: int


@wp.func
def episode_key(streams: ResetStreams, env: int) -> wp.uint32:
    """The key of local env ``env``'s current episode (its global index is ``env_offset + env``)."""
    return stream_key(streams.seed[0], streams.env_offset + env, streams.episode[env])


@wp.func
def uniform_u24_hashed(key: wp.uint32, index_hash: wp.uint32) -> int:
    """``uniform_u24(key, index)`` given ``index_hash = hash_u32(index)`` (``index_hashes``): the
    index half of the hashing does not depend on the key, so loops that draw the same indices for
    many keys (every cell of a ranked spawn, in every env) look it up instead of recomputing it."""
    return int(hash_u32(key ^ index_hash) >> wp.uint32(8))


@wp.func
def uniform_u24(key: wp.uint32, index: int) -> int:
    """24 random bits (an int in [0, 2^24)) of draw ``index`` under ``key``."""
    return uniform_u24_hashed(key, hash_u32(wp.uint32(index)))


@wp.kernel(enable_backward=False, grid_stride=False)
def _fill_index_hashes(first: int, out: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    out[i] = hash_u32(wp.uint32(first + i))


def index_hashes(first: int, count: int, device) -> wp.array:
    """``[hash_u32(first + i) for i < count]`` as a ``wp.array(uint32)`` on ``device`` (for
    ``uniform_u24_hashed``); computed by the same Warp function the draws use."""
    out = wp.empty(count, dtype=wp.uint32, device=device)
    wp.launch(_fill_index_hashes, dim=count, inputs=[int(first)], outputs=[out], device=device)
    return out


def _hash_torch(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = (x * _M1) & _MASK32
    x = x ^ (x >> 15)
    x = (x * _M2) & _MASK32
    return x ^ (x >> 16)


def stream_key_torch(seed: torch.Tensor, env: torch.Tensor, episode: torch.Tensor) -> torch.Tensor:
    """Torch twin of ``stream_key``; int64 tensors broadcast together, result int64 in [0, 2^32)."""
    h = _hash_torch(seed.long() & _MASK32)
    h = _hash_torch(h ^ (env.long() & _MASK32))
    return _hash_torch(h ^ (episode.long() & _MASK32))


def uniform_u24_torch(key: torch.Tensor, index: int | torch.Tensor) -> torch.Tensor:
    """Torch twin of ``uniform_u24``: int64 in [0, 2^24). An int ``index`` is hashed on the host (the
    same bits as a tensor's: every product is masked to 32 bits), so no constant goes to the device."""
    if not isinstance(index, torch.Tensor):
        index = int(index)
    return _hash_torch(key ^ _hash_torch(index & _MASK32)) >> 8


INV_2_24 = _INV_2_24


def split_envs(n_envs: int, parts: int) -> list[tuple[int, int]]:
    """``[(env_offset, n_envs), ...]`` of ``parts`` contiguous slices of ``n_envs`` envs in order,
    sizes differing by at most one (the larger first): ranks of ``swarp.distributed``, CPU shards."""
    base, extra = divmod(n_envs, parts)
    return [(i * base + min(i, extra), base + (i < extra)) for i in range(parts)]
