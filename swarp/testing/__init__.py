"""``check_scenario``: the contract every scenario keeps, runnable on yours.

The built-in scenarios' contract tests (``tests/scenarios/test_contract.py``) call the same checks.
Each check builds small CPU environments of the scenario, steps them with random actions (beyond
the action bounds, so clamping acts) and raises ``ScenarioContractError`` naming the check and the
scenario method at fault (and, for a non-finite value, the step, env and agent).

    import swarp.testing
    swarp.testing.check_scenario("my_scenario", n_agents=4)   # {"declared shapes": "ok", ...}

The parts: ``contract.py`` (``check_scenario`` and its checks), ``host_transfers.py``
(``forbid_host_transfers``) and ``rollouts.py`` (recorded rollouts and their comparison);
``vmas_parity.py`` (imported on its own) reads a live VMAS world into the VMAS physics mode's table,
state and forces.
"""

from swarp.testing.contract import ScenarioContractError, check_scenario
from swarp.testing.host_transfers import (
    DATA_SIZED,
    HOST_TRANSFERS,
    HOST_UPLOADS,
    MASK_INDEXING,
    HostTransferError,
    forbid_host_transfers,
)
from swarp.testing.rollouts import (
    PARITY_ATOL,
    first_difference,
    flat_outputs,
    random_actions,
    record,
    rollout,
    row_difference,
)

__all__ = [
    "flat_outputs",
    "DATA_SIZED",
    "HOST_TRANSFERS",
    "HOST_UPLOADS",
    "MASK_INDEXING",
    "PARITY_ATOL",
    "HostTransferError",
    "ScenarioContractError",
    "check_scenario",
    "first_difference",
    "forbid_host_transfers",
    "random_actions",
    "record",
    "rollout",
    "row_difference",
]
