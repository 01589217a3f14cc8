"""``python -m swarp.benchmark.profile_env`` on the CPU: each launch of a recorded step timed in place."""

import pytest

from swarp.benchmark import profile_env


def test_cpu_kernel_times_name_every_launch_of_the_step():
    rows = profile_env.cpu_kernel_times(6, 3, 3, substeps=2)
    names = [row[3] for row in rows]
    assert names[-1] == "total" and {"fused_substep", "observe", "nav_finish"} <= set(names)
    assert all(row[4] > 0 for row in rows)
    assert sum(row[5] for row in rows[:-1]) == pytest.approx(1.0)


def test_the_cpu_table_and_its_refusal_of_the_stages(capsys):
    profile_env.main(["--device", "cpu", "--kernels", "--envs", "4", "--agents", "2", "--iters", "2"])
    out = capsys.readouterr().out
    assert "CPU us per step" in out and "fused_substep" in out
    with pytest.raises(SystemExit):
        profile_env.main(["--device", "cpu", "--envs", "4", "--agents", "2"])


def test_cpu_kernel_times_without_auto_reset_leave_out_the_restart():
    with_reset = {row[3] for row in profile_env.cpu_kernel_times(6, 3, 2, substeps=2)}
    without = {row[3] for row in profile_env.cpu_kernel_times(6, 3, 2, substeps=2, auto_reset=False)}
    assert {"fused_substep", "observe"} <= without
    assert any("reset" in name for name in with_reset) and not any("reset" in name for name in without)
