"""The CPU torch reference compiled (``plan.compile_torch``, ``use_graph=True``): the torch work of
its step runs through ``torch.compile`` with the bits of the plain step, the health check still
sees a NaN, and a failed compile falls back to the plain step with one warning."""

import warnings

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

import swarp
from swarp.scenarios.navigation import NavigationScenario
from swarp.testing import first_difference, random_actions, rollout
from tests.support import template_scenario

NAME = "compiled_dispersion"
N_ENVS, N_AGENTS, N_STEPS = 32, 4, 40


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The scenario class ``python -m swarp.scenario new`` writes (torch only), registered."""
    yield from template_scenario(NAME, tmp_path_factory.mktemp("template"))


def build(scenario, use_graph, **kwargs) -> swarp.Environment:
    options = {"n_envs": N_ENVS, "auto_reset": True, "max_steps": 12, "fused": False, "seed": 3, "device": "cpu"}
    return swarp.Environment(scenario, use_graph=use_graph, **options, **kwargs)


def actions_for(env) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [random_actions(env, generator) for _ in range(N_STEPS)]


@pytest.mark.parametrize("which", ["template", "navigation with lidar"])
def test_the_compiled_torch_step_matches_the_plain_one(template, which):
    """Observations, rewards, flags, info and final observations over 40 steps with resets on the
    way (episodes of 12 steps), compiled against plain: the template's bit for bit; navigation's
    with its lidar up to float rounding (fused loops round a norm or a ray hit differently, by a
    few units in the last place), every flag and count equal."""
    scenario = (lambda: template(n_agents=N_AGENTS)) if which == "template" else NavigationScenario
    extra = {"lidar_rays": 8} if "lidar" in which else {}
    plain = build(scenario(), False, **extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = build(scenario(), True, **extra)
    assert not [w for w in caught if "not capturable" in str(w.message)]  # compiling is the CPU's graph
    assert compiled.plan.compile_torch and not plain.plan.compile_torch
    assert compiled.launches.torch_calls.compiled and not compiled.graph_mode
    actions = actions_for(plain)
    expected, got = rollout(plain, actions), rollout(compiled, actions)
    if which == "template":
        assert first_difference(expected, got) is None
    for t, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert a.keys() == b.keys()
        for key in a:
            if a[key].is_floating_point():
                torch.testing.assert_close(b[key], a[key], atol=1e-5, rtol=1e-5, msg=f"step {t}: {key}")
            else:
                assert torch.equal(a[key], b[key]), f"step {t}: {key}"
    assert (compiled.episode > 0).all()  # every env restarted at least once


def test_the_compiled_health_check_sees_a_nan(template):
    """A NaN in one env's observation raises that env's health flag (inductor folds the plain
    check's ``x * 0`` to 0, so the compiled check tests finiteness itself)."""
    env = build(template(n_agents=N_AGENTS), True)
    actions = actions_for(env)
    env.step(actions[0])
    assert not bool(env.non_finite())
    env.scenario.landmarks[5, 1, 0] = float("nan")
    env.step(actions[1])
    assert bool(env.non_finite()) and env.non_finite_envs().tolist() == [5]


def test_a_failed_compile_runs_the_plain_step_and_says_so(template):
    env = build(template(n_agents=N_AGENTS), True)
    plain = build(template(n_agents=N_AGENTS), False)

    def failing(*_):
        raise BackendCompilerFailed(failing, RuntimeError("no C++ compiler"), None)

    env.launches.torch_calls._outputs = failing
    actions = actions_for(env)
    with pytest.warns(UserWarning, match=r"compile_torch: torch.compile failed .*running the torch step uncompiled"):
        first = env.step(actions[0])
    assert not env.plan.compile_torch and not env.launches.torch_calls.compiled
    expected = plain.step(actions[0])
    assert torch.equal(first[0], expected[0]) and torch.equal(first[1], expected[1])
