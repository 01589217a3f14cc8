"""The torch reference's step as one CUDA graph (``swarp.env.reference.CapturedTorchStep``): captured
on the second step, the bits of the step without a graph, no allocations; a step that is not
capture-safe runs eagerly from then on, with one warning that names why. On the CPU, the torch
path's auto-reset runs only when some env finished."""

import warnings

import pytest
import torch

import swarp
from swarp.env.reference import changed_attributes, scenario_fingerprint
from swarp.scenarios.navigation import NavigationScenario
from swarp.testing import check_scenario, first_difference, random_actions, rollout
from tests.support import assert_no_steady_state_allocations, template_scenario

NAME = "graph_dispersion"
N_ENVS, N_AGENTS, N_STEPS = 64, 4, 50


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The scenario class ``python -m swarp.scenario new`` writes (torch only), registered."""
    yield from template_scenario(NAME, tmp_path_factory.mktemp("template"))


def build(scenario, device="cuda:0", **kwargs) -> swarp.Environment:
    kwargs = {"n_envs": N_ENVS, "auto_reset": True, "max_steps": 15, "fused": False, "seed": 3, **kwargs}
    return swarp.Environment(scenario, device=device, **kwargs)


def actions_for(env, n_steps=N_STEPS) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [random_actions(env, generator) for _ in range(n_steps)]


def rollout_without_warnings(env, actions) -> tuple[list[dict], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = rollout(env, actions)
    return rows, [str(w.message) for w in caught]


# --- what the capture must not change (CPU) -------------------------------------------------------


class Holder:
    pass


def test_the_fingerprint_flags_rebound_resized_and_counted_attributes_not_in_place_writes():
    holder = Holder()
    holder.x, holder.parts, holder.count, holder.cfg = torch.zeros(4), {"a": torch.zeros(2)}, 0, object()
    before = scenario_fingerprint(holder)
    holder.x.add_(1.0)
    holder.parts["a"].copy_(torch.ones(2))
    assert changed_attributes(before, scenario_fingerprint(holder)) == []
    holder.x = holder.x + 1.0  # rebound
    holder.parts["a"] = torch.zeros(2)  # rebound inside a dict
    holder.count += 1  # Python state: a replay would not count
    holder.extra = torch.zeros(1)  # added
    assert changed_attributes(before, scenario_fingerprint(holder)) == ["count", "extra", "parts", "x"]
    resized = Holder()
    resized.x = torch.zeros(4)
    before = scenario_fingerprint(resized)
    resized.x.resize_(2)
    assert changed_attributes(before, scenario_fingerprint(resized)) == ["x"]


def test_the_torch_reference_on_the_cpu_runs_no_torch_graph():
    env = swarp.make("navigation", n_envs=4, device="cpu", fused=False, auto_reset=True)
    assert env.launches.torch_step is None and not env.graph_mode and env.no_graph_reason is None


class CountedResets(NavigationScenario):
    def bind(self, env) -> None:
        super().bind(env)
        self.resets = []

    def reset_world(self, env_mask) -> None:
        self.resets.append(env_mask.clone())
        super().reset_world(env_mask)


def test_the_cpu_torch_path_resets_only_when_an_env_finished():
    env = build(CountedResets(), device="cpu", n_envs=8, max_steps=3)
    env.scenario.resets.clear()
    actions = torch.zeros(8, N_AGENTS, env.act_dim)
    for _ in range(2):
        env.step(actions)  # no episode ends on steps 1 and 2
    assert env.scenario.resets == []
    env.step(actions)  # every episode reaches the time limit
    assert len(env.scenario.resets) == 1 and env.scenario.resets[0].all() and (env.episode == 1).all()


# --- on CUDA --------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["template", "navigation", "navigation with lidar"])
def test_the_torch_step_is_one_cuda_graph_with_the_bits_of_the_step_without_one(template, which):
    scenario = (lambda: template(n_agents=N_AGENTS)) if which == "template" else (lambda: NavigationScenario())
    extra = {"lidar_rays": 8} if "lidar" in which else {}
    graph_env, eager_env = build(scenario(), **extra), build(scenario(), use_graph=False, **extra)
    assert graph_env.graph_mode and graph_env.execution_mode == "graph" and not eager_env.graph_mode
    actions = actions_for(graph_env)
    graph, messages = rollout_without_warnings(graph_env, actions)
    assert messages == [] and graph_env.no_graph_reason is None and graph_env.launches.torch_step.graph is not None
    assert eager_env.launches.torch_step.graph is None
    assert first_difference(graph, rollout(eager_env, actions)) is None
    assert sum(int(row["truncated"].sum()) for row in graph) > 0  # auto-resets ran inside the graph
    # An explicit reset and a restored snapshot are read by the graph in place.
    mask = torch.arange(N_ENVS, device="cuda:0") % 3 == 0
    snapshot = graph_env.get_state()
    for env in (graph_env, eager_env):
        env.reset_at(mask)
        env.set_state(snapshot)
    assert first_difference(rollout(graph_env, actions[:10]), rollout(eager_env, actions[:10])) is None


class HostSyncing(NavigationScenario):
    """Reads a device value on the host in its step: a graph cannot capture that."""

    def post_step(self) -> None:
        super().post_step()
        if bool(self.env.state.pos.abs().max() > 1e6):
            raise AssertionError("unreachable")


class Rebinding(NavigationScenario):
    """Replaces a tensor in its step instead of writing it: a graph would keep the old memory."""

    def post_step(self) -> None:
        super().post_step()
        self.scratch = self.env.state.pos.sum(dim=-1)


class Counting(NavigationScenario):
    """Keeps a Python counter: a graph replay runs no Python."""

    def bind(self, env) -> None:
        super().bind(env)
        self.steps_seen = 0

    def post_step(self) -> None:
        super().post_step()
        self.steps_seen += 1


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("cls", "reason"),
    [(HostSyncing, "capturing it failed"), (Rebinding, "attribute(s) scratch"), (Counting, "attribute(s) steps_seen")],
)
def test_a_step_that_is_not_capture_safe_runs_eagerly_and_says_why(cls, reason):
    env, eager_env = build(cls()), build(cls(), use_graph=False)
    actions = actions_for(env)
    rows, messages = rollout_without_warnings(env, actions)
    assert len(messages) == 1 and reason in messages[0] and f"{cls.__name__}'s torch step" in messages[0]
    assert env.no_graph_reason == messages[0] and not env.graph_mode and env.execution_mode == "replay"
    assert env.launches.torch_step.graph is None
    assert first_difference(rows, rollout(eager_env, actions)) is None
    # A failed capture leaves torch's CUDA random numbers working, and torch on the caller's stream.
    assert torch.rand(4, device="cuda:0").shape == (4,)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


@pytest.mark.gpu
@pytest.mark.parametrize("use_graph", ["auto", False])
def test_the_torch_step_joins_a_capture_the_caller_opened(use_graph):
    """A rollout captured by the caller (as ``swarp.train`` does) replays the torch step's physics too."""
    env, eager_env = build(NavigationScenario(), use_graph=use_graph), build(NavigationScenario(), use_graph=False)
    actions = torch.stack(actions_for(env, 8)).cuda()
    staged = torch.zeros_like(actions[0])
    env.step(staged)  # loads the modules and warms torch up
    eager_env.step(staged)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        env.step(staged)
    for step_actions in actions:
        staged.copy_(step_actions)
        graph.replay()
        eager_env.step(step_actions)
        assert torch.equal(env.obs, eager_env.obs) and torch.equal(env.reward, eager_env.reward)
        assert torch.equal(env.state.pos, eager_env.state.pos)


@pytest.mark.gpu
def test_the_captured_torch_step_allocates_nothing():
    # The step only: an explicit reset of the torch reference runs its torch ops eagerly.
    assert_no_steady_state_allocations(build(NavigationScenario(), n_envs=256), reset=False)


@pytest.mark.gpu
def test_check_scenario_runs_the_template_captured(template):
    report = check_scenario(NAME, device="cuda:0", max_steps=15, n_agents=3)
    assert report["CUDA graph"] == "ok", report
