"""Neighbor lists: brute and grid backends, overflow, env isolation, edge index
(``swarp/physics/neighbors.py``)."""

import numpy as np
import pytest
import torch
import warp as wp

from swarp import AgentConfig, Stepper, World, WorldConfig
from swarp.runtime.plan import ExecutionPlan, choose_neighbor_method

#: Neighbor radius [m] of every world below (agents have the default radius of 0.05 m).
RADIUS = 0.15
METHODS = ("brute", "grid")


def make_world(n_envs: int, n_agents: int, method: str, *, max_neighbors=16, dtype="float64", plan=None) -> World:
    world = WorldConfig(neighbor_method=method, neighbor_radius=RADIUS, max_neighbors=max_neighbors)
    return World(Stepper([AgentConfig()] * n_agents, device="cpu", world=world, dtype=dtype, plan=plan), n_envs)


def lists_of(world: World) -> dict[str, np.ndarray]:
    """The lists of a world as numpy arrays: nbr [E, A, K] (-1 padded), count, total [E, A], overflow."""
    nbr, count = world.neighbor_lists()
    return {
        "nbr": nbr.numpy().copy(),
        "count": count.numpy().copy(),
        "total": world.neighbors.total.numpy(),
        "overflow": world.neighbors.overflow.numpy(),
    }


def reference_lists(pos: np.ndarray, radius: float, max_neighbors: int) -> dict[str, np.ndarray]:
    """All-pairs numpy reference: lists sorted by (squared distance, index), truncated to K."""
    n_envs, n_agents = pos.shape[:2]
    nbr = np.full((n_envs, n_agents, max_neighbors), -1, np.int32)
    count = np.zeros((n_envs, n_agents), np.int32)
    total = np.zeros((n_envs, n_agents), np.int32)
    for env in range(n_envs):
        delta = pos[env][None, :, :] - pos[env][:, None, :]  # [i, j] = p_j - p_i
        d2 = delta[..., 0] * delta[..., 0] + delta[..., 1] * delta[..., 1]
        for agent in range(n_agents):
            candidates = np.flatnonzero((d2[agent] <= radius * radius) & (np.arange(n_agents) != agent))
            order = candidates[np.lexsort((candidates, d2[agent, candidates]))]
            kept = order[:max_neighbors]
            nbr[env, agent, : len(kept)] = kept
            count[env, agent] = len(kept)
            total[env, agent] = len(candidates)
    return {"nbr": nbr, "count": count, "total": total}


def random_positions(rng, kind: str, n_envs: int, n_agents: int) -> np.ndarray:
    """Worlds of several densities: each env draws its own positions."""
    if kind == "sparse":
        return rng.uniform(-1.5, 1.5, (n_envs, n_agents, 2))
    if kind == "crowded":
        return rng.uniform(-0.2, 0.2, (n_envs, n_agents, 2))
    if kind == "clusters":
        # Tight clusters straddling cell boundaries, with exact duplicates (ties broken by index).
        centres = rng.uniform(-1.0, 1.0, (n_envs, 4, 2)).round(1)
        pos = centres[:, rng.integers(0, 4, n_agents)] + rng.normal(0, 0.05, (n_envs, n_agents, 2))
        pos[:, 1::5] = pos[:, 0::5][:, : pos[:, 1::5].shape[1]]
        return pos
    if kind == "wide":
        # Far from the origin and beyond the grid's clamped cell range.
        pos = rng.uniform(-0.3, 0.3, (n_envs, n_agents, 2)) + rng.choice([-1e3, 0.0, 250.0], (n_envs, 1, 2))
        pos[:, :3] = [[1e6, -1e6], [1e6 + 0.1, -1e6], [3e5, 2e5]]
        return pos
    raise ValueError(kind)


KINDS = ("sparse", "crowded", "clusters", "wide")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", KINDS)
def test_brute_and_grid_lists_are_identical(rng, kind, dtype):
    n_envs, n_agents = 3, 48
    pos = random_positions(rng, kind, n_envs, n_agents)
    lists = {}
    for method in METHODS:
        world = make_world(n_envs, n_agents, method, max_neighbors=8, dtype=dtype)
        world.set_state(pos=torch.as_tensor(pos, dtype=world.stepper.torch_dtype))
        lists[method] = lists_of(world)
    for name, brute in lists["brute"].items():
        np.testing.assert_array_equal(lists["grid"][name], brute, err_msg=name)
    assert lists["brute"]["count"].sum() > 0
    if kind == "crowded":
        assert lists["brute"]["overflow"][0] == 1 and (lists["brute"]["total"] > 8).any()


def test_grid_matches_brute_at_the_exact_radius_across_cell_seams():
    """Pairs exactly one radius apart, placed on every cell seam: float rounding must not hide them."""
    f32 = np.float32
    radius = f32(RADIUS)
    pairs = []
    for seam in range(-12, 13):
        base = f32(seam * RADIUS)
        for step in range(-4, 5):
            first = f32(base + f32(step) * np.spacing(f32(max(abs(base), 1e-3))))
            for nudge in (-1, 0, 1):
                second = f32(first + radius)
                second = f32(second + f32(nudge) * np.spacing(second))
                pairs.append(((first, 0.0), (second, 0.0)))
                pairs.append(((0.3, first), (0.3, second)))
    pos = np.array(pairs, np.float32)  # [E, 2, 2]: one pair per env
    lists = {}
    for method in METHODS:
        world = make_world(len(pos), 2, method, dtype="float32")
        world.set_state(pos=torch.as_tensor(pos))
        lists[method] = lists_of(world)
    in_range = lists["brute"]["count"][:, 0] == 1
    assert 0.2 < in_range.mean() < 1.0, "the pairs should straddle the radius"
    for name, brute in lists["brute"].items():
        np.testing.assert_array_equal(lists["grid"][name], brute, err_msg=name)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", KINDS)
def test_lists_match_numpy_reference(rng, method, kind):
    n_envs, n_agents, max_neighbors = 3, 40, 6
    pos = random_positions(rng, kind, n_envs, n_agents)
    world = make_world(n_envs, n_agents, method, max_neighbors=max_neighbors)
    world.set_state(pos=torch.as_tensor(pos))
    lists = lists_of(world)
    expected = reference_lists(pos, RADIUS, max_neighbors)
    for name, value in expected.items():
        np.testing.assert_array_equal(lists[name], value, err_msg=name)
    # Entries are valid up to count and -1 after it, nearest first.
    slots = np.arange(max_neighbors)
    assert np.array_equal(lists["nbr"] >= 0, slots < lists["count"][..., None])
    listed = np.take_along_axis(pos, np.maximum(lists["nbr"], 0).reshape(n_envs, -1)[..., None], axis=1)
    d2 = np.sum((listed.reshape(n_envs, n_agents, max_neighbors, 2) - pos[:, :, None]) ** 2, axis=-1)
    d2 = np.where(lists["nbr"] >= 0, d2, np.finfo(np.float64).max)
    assert np.all(d2[lists["nbr"] >= 0] <= RADIUS**2)
    assert np.all(np.diff(d2, axis=-1) >= 0)


@pytest.mark.parametrize("method", METHODS)
def test_lists_never_cross_envs(method):
    """Envs overlap in space but not in membership: agent i of env 1 sits 1 cm from agent i of env 0."""
    n_agents = 12
    pos = np.zeros((3, n_agents, 2))
    pos[:, :, 0] = np.arange(n_agents) * 0.5  # spaced wider than the neighbor radius
    pos[1, :, 0] += 0.01
    pos[2, :, 1] += 0.01
    world = make_world(3, n_agents, method)
    world.set_state(pos=torch.as_tensor(pos))
    lists = lists_of(world)
    assert np.all(lists["total"] == 0) and np.all(lists["nbr"] == -1)
    # A neighbor inside the env is found, and only that one.
    pos[1, 1] = pos[1, 0] + [0.1, 0.0]
    world.set_state(pos=torch.as_tensor(pos))
    lists = lists_of(world)
    assert lists["total"].sum() == 2
    assert lists["nbr"][1, 0, 0] == 1 and lists["nbr"][1, 1, 0] == 0


@pytest.mark.parametrize("method", METHODS)
def test_overflow_flag_is_set_exactly_when_a_list_is_truncated(rng, method):
    n_envs, n_agents = 4, 32
    for trial in range(6):
        pos = rng.uniform(-0.4, 0.4, (n_envs, n_agents, 2)) * (0.5 + trial * 0.5)
        true_counts = reference_lists(pos, RADIUS, n_agents)["total"]
        for max_neighbors in (true_counts.max() - 1, true_counts.max(), true_counts.max() + 1):
            max_neighbors = max(int(max_neighbors), 1)
            world = make_world(n_envs, n_agents, method, max_neighbors=max_neighbors)
            world.set_state(pos=torch.as_tensor(pos))
            assert bool(world.neighbor_overflow()) == bool((true_counts > max_neighbors).any()), (trial, max_neighbors)
            np.testing.assert_array_equal(world.neighbors.total.numpy(), true_counts)
            np.testing.assert_array_equal(world.neighbors.count.numpy(), np.minimum(true_counts, max_neighbors))


@pytest.mark.parametrize("method", METHODS)
def test_overflow_flag_is_sticky_until_cleared(method):
    world = make_world(1, 6, method, max_neighbors=2)
    crowded = torch.zeros(1, 6, 2, dtype=torch.float64)
    apart = torch.arange(12, dtype=torch.float64).view(1, 6, 2)
    assert not bool(world.neighbor_overflow())
    world.set_state(pos=crowded)
    assert bool(world.neighbor_overflow())
    world.set_state(pos=apart)
    assert bool(world.neighbor_overflow()), "sticky: a clean rebuild does not lower the flag"
    world.clear_neighbor_overflow()
    world.build_neighbors()
    assert not bool(world.neighbor_overflow())
    # Steps rebuild the lists and raise the flag too.
    world.set_state(pos=crowded)
    world.clear_neighbor_overflow()
    world.step(torch.zeros(1, 6, 2, dtype=torch.float64))
    assert bool(world.neighbor_overflow())


@pytest.mark.parametrize("method", METHODS)
def test_env_mask_rebuilds_only_masked_envs(rng, method):
    n_envs, n_agents = 4, 20
    world = make_world(n_envs, n_agents, method)
    old = rng.uniform(-0.3, 0.3, (n_envs, n_agents, 2))
    new = rng.uniform(-0.3, 0.3, (n_envs, n_agents, 2))
    world.set_state(pos=torch.as_tensor(old))
    world.state.torch.pos.copy_(torch.as_tensor(new))
    mask = np.array([True, False, True, False])
    world.build_neighbors(env_mask=wp.array(mask, dtype=wp.bool, device="cpu"))
    nbr = world.neighbor_lists()[0].numpy()
    expected_new = reference_lists(new, RADIUS, 16)["nbr"]
    expected_old = reference_lists(old, RADIUS, 16)["nbr"]
    np.testing.assert_array_equal(nbr[mask], expected_new[mask])
    np.testing.assert_array_equal(nbr[~mask], expected_old[~mask])
    assert not np.array_equal(expected_new[~mask], expected_old[~mask])


def test_non_finite_positions_are_nobodys_neighbor(rng):
    pos = rng.uniform(-0.2, 0.2, (2, 16, 2))
    pos[0, 3] = np.nan
    pos[1, 5] = [np.inf, 0.0]
    lists = {}
    for method in METHODS:
        world = make_world(2, 16, method)
        world.state.torch.pos.copy_(torch.as_tensor(pos))  # set_state rejects non-finite values
        world.build_neighbors()
        lists[method] = lists_of(world)
    for name, brute in lists["brute"].items():
        np.testing.assert_array_equal(lists["grid"][name], brute, err_msg=name)
    nbr = lists["brute"]["nbr"]
    assert not (nbr[0] == 3).any() and not (nbr[1] == 5).any()
    assert lists["brute"]["total"][0, 3] == 0


def test_auto_method_switches_to_grid_at_threshold():
    world = WorldConfig(neighbor_method="auto", grid_threshold=10)
    assert Stepper([AgentConfig()] * 9, device="cpu", world=world).neighbor_method == "brute"
    assert Stepper([AgentConfig()] * 10, device="cpu", world=world).neighbor_method == "grid"
    # The measured thresholds: 128 agents an env on the CPU, 512 on CUDA.
    assert choose_neighbor_method(WorldConfig(), 127, "cpu") == "brute"
    assert choose_neighbor_method(WorldConfig(), 128, "cpu") == "grid"
    assert choose_neighbor_method(WorldConfig(), 511, "cuda:0") == "brute"
    assert choose_neighbor_method(WorldConfig(), 512, "cuda") == "grid"
    assert choose_neighbor_method(world, 10, "cuda:0") == "grid"  # a threshold given holds on every device


def test_auto_method_keeps_brute_force_where_the_grid_cells_cover_the_arena():
    # 3 x 3 cells of 0.5 m cover 2.25 m^2: 56% of a 4 m^2 arena, 1/16 of 36 m^2, under 1/64 of 256 m^2.
    small, middle, large = (WorldConfig(bounds=half, neighbor_radius=0.5) for half in (1.0, 3.0, 8.0))
    for device in ("cpu", "cuda:0"):
        assert choose_neighbor_method(small, 4096, device) == "brute"
        assert choose_neighbor_method(large, 4096, device) == "grid"
    assert choose_neighbor_method(middle, 128, "cpu") == "grid"  # within the CPU's 1/16
    assert choose_neighbor_method(middle, 4096, "cuda:0") == "brute"  # over CUDA's 1/64
    assert choose_neighbor_method(large, 511, "cuda:0") == "brute"
    # Without the radius or the bounds the agents decide alone.
    assert choose_neighbor_method(WorldConfig(bounds=1.0), 512, "cuda:0") == "grid"
    assert choose_neighbor_method(WorldConfig(neighbor_radius=0.5), 128, "cpu") == "grid"
    assert (
        choose_neighbor_method(WorldConfig(bounds=1.0, neighbor_radius=0.5, neighbor_method="grid"), 4, "cpu") == "grid"
    )


def test_neighbor_radius_must_cover_contacts():
    with pytest.raises(ValueError, match="neighbor_radius=0.05 is smaller than twice the largest agent radius"):
        Stepper([AgentConfig(radius=0.05)], device="cpu", world=WorldConfig(neighbor_radius=0.05))
    # Without agent collisions a short radius is allowed (lists then only feed observations).
    Stepper([AgentConfig(radius=0.05)], device="cpu", world=WorldConfig(neighbor_radius=0.05, collisions=False))


# --- edge index -------------------------------------------------------------------------------


@pytest.mark.parametrize("max_neighbors", [4, 47])
def test_edge_index_is_consistent_with_the_lists(rng, max_neighbors):
    n_envs, n_agents = 3, 48
    world = make_world(n_envs, n_agents, "grid", max_neighbors=max_neighbors)
    world.set_state(pos=torch.as_tensor(rng.uniform(-0.4, 0.4, (n_envs, n_agents, 2))))
    nbr, count = world.neighbor_lists()
    edges, valid = world.edge_index()
    assert edges.shape == (2, n_envs * n_agents * max_neighbors) and edges.dtype == torch.int64
    assert torch.equal(valid, (nbr >= 0).reshape(-1))
    compact = world.edge_index(compact=True)
    assert torch.equal(compact, edges[:, valid])
    assert compact.shape[1] == int(count.sum())
    source, target = compact
    assert torch.all(source // n_agents == target // n_agents), "edges stay inside their env"
    assert torch.all(source != target)
    env, agent = target // n_agents, target % n_agents
    # Every edge points from a listed neighbor to the agent whose list holds it, in list order.
    slot = torch.cat([torch.arange(int(c)) for c in count.reshape(-1)])
    assert torch.equal(nbr[env, agent, slot].long(), source % n_agents)
    if not bool(world.neighbor_overflow()):
        pairs = set(zip(source.tolist(), target.tolist(), strict=True))
        assert pairs == {(t, s) for s, t in pairs}, "untruncated radius graphs are symmetric"
    else:
        assert max_neighbors == 4


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("max_neighbors", [1, 3, 8, 16])
@pytest.mark.parametrize("n_agents", [40, 150])
def test_every_list_layout_builds_the_same_lists(rng, method, max_neighbors, n_agents):
    """The two ways of keeping the top-K list (``ExecutionPlan.register_lists``: in registers,
    filled by the two-pass brute scan, on CUDA up to K = 16; shifting insertion elsewhere) give the
    same sorted lists, ties and overflow included, with more than one 64-agent mask word at 150
    agents."""
    pos = random_positions(rng, "clusters", 3, n_agents)
    lists = []
    for register_lists in (False, True):
        plan = ExecutionPlan(register_lists=register_lists)
        world = make_world(3, n_agents, method, max_neighbors=max_neighbors, plan=plan)
        world.set_state(pos=torch.as_tensor(pos))
        lists.append(lists_of(world))
    for other in lists[1:]:
        for key in ("nbr", "count", "total", "overflow"):
            np.testing.assert_array_equal(lists[0][key], other[key], err_msg=key)
    np.testing.assert_array_equal(lists[0]["nbr"], reference_lists(pos, RADIUS, max_neighbors)["nbr"])


def test_world_set_state_rejects_non_finite_values_and_writes_nothing():
    world = make_world(2, 4, "brute")
    before = world.state.torch.pos.clone()
    pos = torch.zeros_like(before)
    pos[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"pos must be finite, got nan at index \[1, 2, 0\]"):
        world.set_state(vel=torch.ones_like(world.state.torch.vel), pos=pos)
    assert torch.equal(world.state.torch.pos, before) and not world.state.torch.vel.any()


def test_the_grid_bins_each_env_into_its_own_block_of_the_sorted_agents():
    from swarp.physics.neighbors import NeighborBuffers, bin_agents

    n_envs, n_agents = 3, 150
    gen = torch.Generator().manual_seed(4)
    pos = wp.from_torch((torch.rand(n_envs, n_agents, 2, generator=gen) * 4 - 2).contiguous(), dtype=wp.vec2)
    out = NeighborBuffers(n_envs, n_agents, 8, wp.float32, "cpu", grid=True)
    bin_agents(pos, 0.5, out)
    counts = out.bucket_count.numpy().reshape(n_envs, -1)
    starts = out.bucket_start.numpy().reshape(n_envs, -1)
    assert counts.sum(axis=1).tolist() == [n_agents] * n_envs
    np.testing.assert_array_equal(starts, np.cumsum(counts, axis=1) - counts + n_agents * np.arange(n_envs)[:, None])
    blocks = out.sorted_agents.numpy().reshape(n_envs, n_agents)
    for env in range(n_envs):  # each env's block lists every agent of the env once
        np.testing.assert_array_equal(np.sort(blocks[env]), np.arange(n_agents))
