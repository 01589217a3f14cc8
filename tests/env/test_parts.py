"""The environment's parts (swarp/env/environment.py's module docstring): none imports the facade
back, the facade shows its core's attributes as its own, and the plan picks the step end."""

import ast
import pathlib

import pytest
import torch

import swarp
from swarp.env import step_end
from swarp.env.core import PUBLIC

ENV_DIR = pathlib.Path(swarp.__file__).parent / "env"
#: Modules above the facade (they build environments), free to import it.
ABOVE = {"environment.py", "make.py", "pool.py", "__init__.py"}


def runtime_imports(path: pathlib.Path) -> set[str]:
    """The ``swarp`` modules ``path`` imports outside ``if TYPE_CHECKING:`` blocks."""
    found = set()

    def visit(node, checking: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, checking)
            return
        if not checking and isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("swarp"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        if not checking and isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, checking)

    visit(ast.parse(path.read_text()), False)
    return found


@pytest.mark.parametrize("name", sorted(p.name for p in ENV_DIR.glob("*.py") if p.name not in ABOVE))
def test_a_part_does_not_import_the_environment(name):
    assert "swarp.env.environment" not in runtime_imports(ENV_DIR / name)


def test_the_core_attributes_read_and_write_through():
    env = swarp.make("navigation", n_envs=3, n_agents=2, device="cpu")
    for name in PUBLIC:
        assert getattr(env, name) is getattr(env.core, name), name
    plan = env.plan
    env.plan = plan  # written through: the core holds the one plan every part reads
    assert env.core.plan is plan and "plan" not in vars(env)


@pytest.mark.parametrize(
    ("plan", "kind"),
    [({"reset_ahead": False}, step_end.StepEnd), ({"reset_ahead": True, "list_resets": False}, step_end.AheadStepEnd)],
)
def test_the_plan_picks_the_step_end(plan, kind):
    env = swarp.make("navigation", n_envs=4, n_agents=3, device="cpu", auto_reset=True, plan=plan)
    assert type(env.launches.step_end) is kind
    actions = torch.zeros(env.n_envs, env.n_agents, env.act_dim)
    for _ in range(3):
        env.step(actions)


def test_the_torch_reference_has_no_step_end():
    env = swarp.make("navigation", n_envs=2, n_agents=2, device="cpu", fused=False)
    assert env.launches.step_end is None
    env.step(torch.zeros(env.n_envs, env.n_agents, env.act_dim))
