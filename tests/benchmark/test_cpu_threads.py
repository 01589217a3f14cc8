"""``python -m swarp.benchmark.cpu_threads``: a row per (envs, shards) cell, bit-identical to one shard."""

from swarp.benchmark import cpu_threads


def test_a_small_grid_prints_every_cell_with_the_same_bits(capsys):
    cpu_threads.main(["--envs", "16", "--shards", "1", "2", "3", "--min-envs", "4", "--iters", "2", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("16 ")]
    assert [row[2] for row in rows] == ["1", "2", "3"]
    assert all(row[-1] == "yes" for row in rows)
    assert rows[0][-2] == "1.00x"


def test_the_benchmark_leaves_torch_s_thread_count_as_it_found_it():
    import torch

    before = torch.get_num_threads()
    cpu_threads.main(["--envs", "8", "--shards", "1", "--iters", "1", "--repeats", "1"])
    assert torch.get_num_threads() == before
