def test_split_envs_cuts_contiguous_slices_differing_by_at_most_one():
    from swarp.core.rng import split_envs

    assert split_envs(7, 3) == [(0, 3), (3, 2), (5, 2)]
    assert split_envs(8, 2) == [(0, 4), (4, 4)]
    for n, parts in ((1, 1), (5, 5), (1000, 7)):
        slices = split_envs(n, parts)
        assert [o for o, _ in slices] == [sum(k for _, k in slices[:i]) for i in range(parts)]
        assert sum(k for _, k in slices) == n and max(k for _, k in slices) - min(k for _, k in slices) <= 1
