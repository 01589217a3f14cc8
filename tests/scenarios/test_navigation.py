"""The navigation scenario (``swarp/scenarios/navigation.py``, its Warp twin ``navigation_kernels.py``
and the spawn sampler ``spawn.py``): fused/reference parity, spawn separation and spawn variety."""

import math

import pytest
import torch
import warp as wp

import swarp
from swarp.core.config import ObstacleShape
from swarp.scenarios.framework.arena import contact_overflow
from tests.support import PARITY_ATOL, PARITY_RTOL, make_pair, parity_rollout

N_PARITY_STEPS = 50

#: Chi-square limit for the per-cell marginal counts (24 degrees of freedom: p ~ 1e-6 under uniformity).
CELL_CHI2_LIMIT = 70.0
#: Allowed shortfall of the distinct spawn layouts below the expectation of uniform sampling [standard deviations].
COVERAGE_SIGMAS = 5.0

PARITY_CASES = {
    # Small arena, goal-seeking half of the batch: terminations and truncations both happen.
    "plain": dict(n_agents=4, world_size=0.5, max_steps=20),
    "obstacles": dict(n_agents=4, n_obstacles=2, world_size=0.6, max_steps=20),
    # Everyone sees everyone: neighbor lists overflow, agents collide, progress is shared.
    "shared_crowded": dict(
        n_agents=6, shared_reward=True, obs_range=2.0, max_neighbors=3, agent_radius=0.08, world_size=0.5, max_steps=20
    ),
    "diff_drive_boxes": dict(
        n_agents=5, model="diff_drive", ctrl_mode="acceleration", n_obstacles=3, obstacle_shape="box", max_steps=20
    ),
    # Fewer agents than neighbor slots: the reference pads, the kernel zero-fills.
    "single_agent": dict(n_agents=1, obs_neighbors=3, world_size=0.5, max_steps=20),
    "float64_bicycle": dict(
        n_agents=4, model="kinematic_bicycle", n_obstacles=1, obstacle_shape="circle", dtype="float64", max_steps=20
    ),
    # The sort-based grid neighbor search (the others use all pairs).
    "grid_neighbors": dict(
        n_agents=130, world_size=2.0, obs_range=0.4, max_neighbors=6, max_steps=20, n_envs=2, neighbor_method="grid"
    ),
}
#: Cases whose fleet can drive straight to its goals, so whole episodes end in success.
TERMINATING_CASES = ("plain", "obstacles", "shared_crowded", "single_agent")


def excuse_truncated_lists(fused: dict, reference: dict) -> None:
    """Where an env's neighbor lists overflowed, the kernels only see the K nearest neighbors (the
    physics does too), so collisions counted from the lists are a lower bound of the reference's
    all-pairs count. Check the bound, then take the reference's collision terms for those envs."""
    overflow = fused["info.neighbor_overflow"]
    assert torch.equal(overflow, reference["info.neighbor_overflow"])
    rows = overflow.view(-1, 1)
    assert bool((fused["info.collisions"] <= reference["info.collisions"]).all())
    missed = (reference["info.collisions"] - fused["info.collisions"]).to(fused["reward"].dtype)
    penalty = 1.0  # NavigationConfig.collision_penalty default, used by every parity case
    for key in ("reward", "env.reward"):
        fused[key] = torch.where(rows, fused[key] - penalty * missed, fused[key])
    fused["info.collisions"] = torch.where(rows, reference["info.collisions"], fused["info.collisions"])


# --- fused twin against the torch reference ------------------------------------------------------


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    """Even envs of holonomic fleets drive to their goals (the scripted controller), so episodes
    terminate; odd envs (and other models) act at random, 20% past the action bounds."""
    options = dict(PARITY_CASES[case])
    if case == "grid_neighbors":
        assert swarp.make("navigation", device="cpu", **options).stepper.neighbor_method == "grid"
    seen = parity_rollout("navigation", options, N_PARITY_STEPS, generator, excuse=excuse_truncated_lists)
    # The comparison covered the interesting branches: auto-resets after time limits (and after
    # success where the fleet can drive to its goals), and for the crowded case overflow and contacts.
    assert seen["truncated"] > 0
    assert seen["info.on_goal"] > 0
    if case in TERMINATING_CASES:
        assert seen["terminated"] > 0
    if case == "shared_crowded":
        assert seen["info.neighbor_overflow"] > 0 and seen["info.collisions"] > 0


@pytest.mark.parametrize(
    "options",
    [
        dict(n_agents=5, n_obstacles=3, obstacle_shape="mixed"),
        dict(n_agents=3, n_obstacles=4, obstacle_shape="box"),
        dict(n_agents=18, n_obstacles=4, obstacle_shape="mixed", world_size=2.0),
    ],
    ids=["mixed", "box", "many-cells"],
)
def test_resets_are_identical_between_fused_and_reference(options):
    """Both paths draw from the same counter-based stream, so reset layouts agree bit for bit (box
    obstacle sizes included: the kernel gets the box extent rounded once, as the reference does)."""
    fused, reference = make_pair("navigation", **options)
    mask = torch.arange(fused.n_envs) % 3 == 0
    for seed in (0, 1, 123456):
        fused.reset(seed=seed)
        reference.reset(seed=seed)
        for _ in range(2):  # a full reset, then a masked one
            for key in ("pos", "theta", "vel", "speed", "ang_vel"):
                assert torch.equal(getattr(fused.state, key), getattr(reference.state, key)), f"seed {seed}: {key}"
            assert torch.equal(fused.scenario.goals, reference.scenario.goals), f"seed {seed}: goals"
            # Distances are computed, not drawn: equal to float32 rounding.
            torch.testing.assert_close(fused.scenario.prev_dist, reference.scenario.prev_dist, atol=PARITY_ATOL, rtol=0)
            fused_obstacles = fused.world.model.obstacle_tensors()
            for key, value in reference.world.model.obstacle_tensors().items():
                assert torch.equal(fused_obstacles[key], value), f"seed {seed}: obstacle {key}"
            torch.testing.assert_close(fused.obs, reference.obs, atol=PARITY_ATOL, rtol=PARITY_RTOL)
            fused.reset_at(mask)
            reference.reset_at(mask)


# --- spawn sampling ------------------------------------------------------------------------------


def obstacle_signed_distance(points: torch.Tensor, obstacles: dict[str, torch.Tensor]) -> torch.Tensor:
    """Signed distance [m] from ``points`` [E, N, 2] to every obstacle slot [E, O] -> [E, N, O]
    (``inf`` for empty slots). Independent of swarp's kernels: plain circle and box geometry."""
    shape, center, angle, size = (obstacles[k] for k in ("shape", "center", "angle", "size"))
    delta = points.unsqueeze(2) - center.unsqueeze(1)  # [E, N, O, 2]
    circle = delta.norm(dim=-1) - size[..., 0].unsqueeze(1)
    cos, sin = torch.cos(angle).unsqueeze(1), torch.sin(angle).unsqueeze(1)
    local = torch.stack([cos * delta[..., 0] + sin * delta[..., 1], -sin * delta[..., 0] + cos * delta[..., 1]], -1)
    q = local.abs() - size.unsqueeze(1)
    box = q.clamp(min=0).norm(dim=-1) + q.max(dim=-1).values.clamp(max=0)
    kind = shape.unsqueeze(1)
    distance = torch.where(kind == int(ObstacleShape.CIRCLE), circle, box)
    return torch.where(kind == int(ObstacleShape.NONE), torch.full_like(distance, math.inf), distance)


def min_pairwise_distance(points: torch.Tensor) -> torch.Tensor:
    """[E, N, 2] -> [E] smallest distance between two different points of an env."""
    d = torch.cdist(points.double(), points.double())
    d = d.masked_fill(torch.eye(points.shape[1], dtype=torch.bool), math.inf)
    return d.flatten(1).min(dim=1).values


SPAWN_CASES = [
    dict(n_agents=16, n_obstacles=4, obstacle_shape="mixed"),
    dict(n_agents=16, n_obstacles=0, spawn_cells=4),  # every cell taken: the tightest packing
    dict(n_agents=8, n_obstacles=3, obstacle_shape="box", spawn_cells=5),
    dict(n_agents=3, n_obstacles=6, obstacle_shape="circle", agent_radius=0.1),
    dict(n_agents=12, n_obstacles=12, obstacle_shape="mixed", world_size=2.0, agent_radius=0.15),
]


@pytest.mark.parametrize("options", SPAWN_CASES, ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items()))
def test_spawns_are_separated_inside_the_arena_and_clear_of_obstacles(options):
    env = swarp.make("navigation", n_envs=64, device="cpu", seed=0, **options)
    cfg = env.scenario.cfg
    r, half = cfg.agent_radius, cfg.world_size
    for seed in (0, 1, 2, 99, 2**31 - 1):
        env.reset(seed=seed)
        for _ in range(4):
            pos, goals = env.state.pos, env.scenario.goals
            obstacles = env.world.model.obstacle_tensors()
            assert bool((min_pairwise_distance(pos) >= 2 * r).all()), f"seed {seed}: overlapping spawns"
            assert bool((min_pairwise_distance(goals) >= 2 * r).all()), f"seed {seed}: overlapping goals"
            for name, points in (("spawn", pos), ("goal", goals)):
                assert bool((points.abs() <= half - r).all()), f"seed {seed}: {name} outside the arena"
                if cfg.n_obstacles:
                    clearance = obstacle_signed_distance(points, obstacles)
                    assert bool((clearance > r).all()), f"seed {seed}: {name} overlaps an obstacle"
            if cfg.n_obstacles:
                shape = obstacles["shape"]
                assert bool((shape != int(ObstacleShape.NONE)).all())
                reach = obstacles["center"].abs() + obstacles["size"].norm(dim=-1, keepdim=True)
                assert bool((reach <= half).all()), f"seed {seed}: obstacle outside the arena"
            # Everything starts at rest, headings in [-pi, pi).
            assert bool((env.state.vel == 0).all() and (env.state.speed == 0).all())
            assert bool((env.state.theta.abs() <= math.pi).all())
            env.reset()


def layouts(points: torch.Tensor, side: int, world_size: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Cells of ``points`` [E, N, 2] on the ``side x side`` grid: ``(cells [E, N], subset bitmask [E])``."""
    width = 2 * world_size / side
    ij = torch.floor((points.double() + world_size) / width).long()
    cells = ij[..., 1] * side + ij[..., 0]
    return cells, (torch.ones_like(cells) << cells).sum(dim=1)


def expected_coverage(n_subsets: int, n_draws: int) -> tuple[float, float]:
    """Mean and standard deviation of the number of distinct values in ``n_draws`` uniform draws
    from ``n_subsets`` values (the occupancy distribution)."""
    m, n = n_subsets, n_draws
    miss1 = (1 - 1 / m) ** n
    miss2 = (1 - 2 / m) ** n
    mean = m * (1 - miss1)
    variance = m * (m - 1) * miss2 + m * miss1 - (m * miss1) ** 2
    return mean, math.sqrt(variance)


def test_spawn_layouts_are_uniform_subsets():
    """4 agents on a 5x5 grid: the chosen cell sets must look like uniform 4-subsets of the 25 cells.

    Separation tests cannot tell a uniform draw from a structured one (say, neighbouring cells or a
    few fixed patterns); the number of distinct layouts and the cell marginals can.
    """
    n_agents, side, n_envs, n_resets = 4, 5, 2048, 2
    env = swarp.make("navigation", n_envs=n_envs, device="cpu", seed=3, n_agents=n_agents, spawn_cells=side)
    assert env.scenario.side == side
    cfg = env.scenario.cfg
    spawn_cells, spawn_sets, goal_sets = [], [], []
    for _ in range(n_resets):
        env.reset()
        cells, bitmask = layouts(env.state.pos, side, cfg.world_size)
        spawn_cells.append(cells)
        spawn_sets.append(bitmask)
        goal_sets.append(layouts(env.scenario.goals, side, cfg.world_size)[1])
    cells = torch.cat(spawn_cells)
    # Every agent got its own cell.
    assert bool((cells.sort(dim=1).values.diff(dim=1) > 0).all())
    n_draws = n_envs * n_resets
    n_subsets = math.comb(side * side, n_agents)
    mean, sd = expected_coverage(n_subsets, n_draws)
    for name, sets in (("spawn", torch.cat(spawn_sets)), ("goal", torch.cat(goal_sets))):
        _, counts = torch.unique(sets, return_counts=True)
        coverage = counts.numel()
        assert coverage >= mean - COVERAGE_SIGMAS * sd, (
            f"{name} layouts: {coverage} distinct 4-subsets in {n_draws} resets, uniform sampling gives "
            f"{mean:.0f} +- {sd:.0f}"
        )
        # No layout is drawn suspiciously often (Poisson with mean n_draws / n_subsets ~ 0.3).
        assert int(counts.max()) <= 8, f"{name}: one layout drawn {int(counts.max())} times"
    # Each cell is used with probability 4/25 (chi-square on the 25 marginal counts).
    hits = torch.bincount(cells.flatten(), minlength=side * side).double()
    expected = n_draws * n_agents / (side * side)
    chi2 = float(((hits - expected) ** 2 / expected).sum())
    assert chi2 < CELL_CHI2_LIMIT, f"cell marginals far from uniform: chi2 = {chi2:.1f} (24 dof)"
    # The agent -> cell assignment is a random order too: agent 0 is not always in the lowest cell.
    first_is_lowest = (cells[:, 0] == cells.min(dim=1).values).double().mean()
    assert abs(float(first_is_lowest) - 1 / n_agents) < 0.05


def test_structured_draws_fail_the_coverage_check():
    """The coverage check has teeth: a draw of 4 consecutive cells, or of a few random patterns, fails it."""
    n_draws, n_subsets = 4096, math.comb(25, 4)
    mean, sd = expected_coverage(n_subsets, n_draws)
    generator = torch.Generator().manual_seed(0)
    start = torch.randint(0, 22, (n_draws,), generator=generator)
    consecutive = start.view(-1, 1) + torch.arange(4)
    patterns = torch.stack([torch.randperm(25, generator=generator)[:4] for _ in range(2000)])
    few_patterns = patterns[torch.randint(0, 2000, (n_draws,), generator=generator)]
    for cells in (consecutive, few_patterns):
        coverage = torch.unique((torch.ones_like(cells) << cells).sum(dim=1)).numel()
        assert coverage < mean - COVERAGE_SIGMAS * sd


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "n_agents must be an int >= 1"),
        (dict(n_agents=2.5), "n_agents must be an int"),
        (dict(n_agents=True), "n_agents must be an int"),
        (dict(n_obstacles=-1), "n_obstacles must be an int >= 0"),
        (dict(obstacle_shape="triangle"), "obstacle_shape must be 'circle', 'box' or 'mixed'"),
        (dict(obs_neighbors=5, max_neighbors=4), r"max_neighbors \(4\) must be >= obs_neighbors \(5\)"),
        (dict(agent_radius=0.0), "agent_radius must be a finite number > 0"),
        (dict(world_size=float("nan")), "world_size must be a finite number > 0"),
        (dict(obs_range=-1.0), "obs_range must be a finite number > 0"),
        (dict(collision_penalty=-0.5), "collision_penalty must be a finite number >= 0"),
        (dict(goal_radius=0.0), "goal_radius must be a finite number > 0"),
        (dict(model="tank"), "model"),
        (dict(ctrl_mode="torque"), "ctrl_mode"),
        (dict(n_agents=400), "cannot place 400 separated points"),
        (dict(n_agents=10, spawn_cells=3), "cannot place 10 separated points"),
        (
            dict(neighbor_method="octree"),
            "navigation option neighbor_method must be one of brute, grid, auto, got 'octree'",
        ),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("navigation", n_envs=1, device="cpu", **options)


def test_grid_and_brute_neighbor_methods_give_the_same_bits(generator):
    """The ``neighbor_method`` option changes how lists are found, not what they hold: 40 steps with
    auto-resets of 20 agents per env, grid against all pairs, identical outputs and states."""
    envs = {
        method: swarp.make(
            "navigation",
            n_envs=3,
            device="cpu",
            seed=4,
            n_agents=20,
            max_steps=15,
            auto_reset=True,
            neighbor_method=method,
        )
        for method in ("brute", "grid")
    }
    assert [env.stepper.neighbor_method for env in envs.values()] == ["brute", "grid"]
    low, high = envs["brute"].action_bounds
    for _ in range(40):
        actions = low + (high - low) * torch.rand(3, 20, 2, generator=generator)
        brute, grid = (envs[m].step(actions) for m in ("brute", "grid"))
        for x, y in zip(brute[:4], grid[:4], strict=True):
            assert torch.equal(x, y)
        assert torch.equal(brute[4]["final_obs"], grid[4]["final_obs"])
    assert torch.equal(envs["brute"].state.pos, envs["grid"].state.pos)
    assert int(envs["brute"].episode.sum()) > 3  # auto-resets happened


def test_observation_layout_matches_the_docstring():
    """Slices 0:8 of the observation are position, velocity, heading and goal offset."""
    env = swarp.make("navigation", n_envs=3, device="cpu", n_agents=4, obs_neighbors=2)
    assert env.obs_dim == 8 + 5 * 2
    obs, _ = env.reset()
    state = env.state
    torch.testing.assert_close(obs[..., 0:2], state.pos)
    torch.testing.assert_close(obs[..., 2:4], state.vel)
    torch.testing.assert_close(obs[..., 4], torch.cos(state.theta))
    torch.testing.assert_close(obs[..., 5], torch.sin(state.theta))
    torch.testing.assert_close(obs[..., 6:8], env.scenario.goals - state.pos)
    # Neighbor slots hold a 0/1 valid flag; invalid slots are all zeros.
    slots = obs[..., 8:].reshape(3, 4, 2, 5)
    valid = slots[..., 4]
    assert bool(((valid == 0) | (valid == 1)).all())
    assert bool((slots[valid == 0] == 0).all())


def test_neighbor_overflow_flags_only_lists_that_may_have_lost_a_contact():
    """Lists keep the K nearest within obs_range: a truncated list whose farthest kept agent is
    beyond contact reach lost no contact partner (the flag stays down); a list of K agents all within
    contact reach may have (the flag goes up). Default K is max(8, obs_neighbors)."""
    assert swarp.make("navigation", n_envs=1, device="cpu").world.neighbors.max_neighbors == 8
    assert swarp.make("navigation", n_envs=1, device="cpu", obs_neighbors=10).world.neighbors.max_neighbors == 10
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=9, obs_range=2.0, max_neighbors=3)
    spread = torch.stack(torch.meshgrid(torch.arange(3.0), torch.arange(3.0), indexing="ij"), -1).reshape(9, 2)
    pos = torch.stack([spread * 0.4 - 0.4, spread * 0.02])  # env 0: 0.4 m apart; env 1: a pile-up
    env.world.set_state(pos=pos)
    nb = env.world.neighbors
    truncated = (wp.to_torch(nb.total) > wp.to_torch(nb.count)).any(dim=1)
    assert truncated.tolist() == [True, True]
    assert contact_overflow(env.world).tolist() == [False, True]


def test_starts_are_prepared_ahead_only_over_brute_force_lists():
    options = dict(n_envs=2, device="cpu", auto_reset=True, plan={"reset_ahead": True})
    assert swarp.make("navigation", **options).plan.reset_ahead
    with pytest.raises(ValueError, match="prepares its starts ahead .* over brute-force neighbor lists"):
        swarp.make("navigation", neighbor_method="grid", **options)
