"""The block row store (``rows.block_rows_store``): every block's rows land in their own rows and
columns, the rest of the output (a lidar's columns, rows past the end) untouched."""

import functools

import numpy as np
import pytest
import torch
import warp as wp

from swarp.runtime.rows import OBS_BLOCK, block_rows_store

DEVICES = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])


@functools.cache
def store_kernel(scalar, width: int):
    """Each thread of blocks of ``block_rows`` threads makes row ``first + lane`` (value
    ``row * 1000 + column``) and hands it to the store."""
    store_rows = block_rows_store(scalar, width)
    row_type = wp.types.vector(width, scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def store(rows_out: wp.array2d(dtype=scalar), block_rows: int):
        block, lane = wp.tid()
        first = block * block_rows
        row = row_type()
        for c in range(wp.static(width)):
            row[c] = scalar(first + lane) * scalar(1000.0) + scalar(c)
        store_rows(rows_out, row, first, lane, block_rows)

    return store


@DEVICES
@pytest.mark.parametrize("scalar", [wp.float32, wp.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("width, extra", [(23, 0), (6, 4), (1, 2)])
@pytest.mark.parametrize("block_rows, n_rows", [(OBS_BLOCK, 150), (63, 189), (48, 47)])
def test_block_rows_land_in_their_rows_and_columns_only(device, scalar, width, extra, block_rows, n_rows, monkeypatch):
    wp.init()  # wp.from_torch needs the runtime
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    dtype = torch.float32 if scalar is wp.float32 else torch.float64
    full = torch.full((n_rows + 70, width + extra), -1.0, dtype=dtype, device=device)
    blocks = -(-n_rows // block_rows)
    wp.launch(
        store_kernel(scalar, width),
        dim=(blocks, block_rows),
        inputs=[wp.from_torch(full[:n_rows]), block_rows],
        device=device,
        block_dim=block_rows,
    )
    got = full.cpu().numpy()
    rows, cols = np.meshgrid(np.arange(n_rows), np.arange(width), indexing="ij")
    np.testing.assert_array_equal(got[:n_rows, :width], rows * 1000.0 + cols)
    assert (got[:n_rows, width:] == -1.0).all()  # the columns after the row's (a lidar's) are untouched
    assert (got[n_rows:] == -1.0).all()  # the last block's lanes past the end store nothing


def test_a_row_store_for_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="float32 or float64"):
        block_rows_store(wp.float16, 4)
