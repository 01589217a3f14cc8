"""Warp's no-driver line is dropped on machines without a CUDA driver; nothing else Warp says is."""

import os
import subprocess
import sys

import pytest
import torch

from swarp.core.warp_init import NO_DRIVER_MESSAGE, drop_no_driver_message, run_dropping_no_driver_message

needs_no_cuda = pytest.mark.skipif(
    torch.cuda.is_available(), reason="with CUDA available Warp never prints its no-driver line"
)


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)


@needs_no_cuda
@pytest.mark.parametrize(
    "code",
    [
        "import swarp",
        # Warp started (and a kernel run) after the import: still nothing about the driver.
        "import swarp, warp; warp.init(); swarp.make('navigation', n_envs=2, device='cpu').reset()",
    ],
)
def test_import_says_nothing_about_the_cuda_driver(code):
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        assert "CUDA driver" not in stream
        assert "Warp CUDA warning" not in stream


def test_drop_keeps_every_other_line():
    text = f"before\n{NO_DRIVER_MESSAGE}\nWarp CUDA error: something else\r\n{NO_DRIVER_MESSAGE}"
    assert drop_no_driver_message(text) == "before\nWarp CUDA error: something else\r\n"
    # A line that only contains the message (a prefix, a suffix) is not the message: kept.
    assert drop_no_driver_message(f"note: {NO_DRIVER_MESSAGE}\n") == f"note: {NO_DRIVER_MESSAGE}\n"


def test_other_native_output_and_errors_pass_through(capfd):
    def start():
        os.write(2, f"{NO_DRIVER_MESSAGE}\n".encode())
        os.write(2, b"Warp CUDA error: another problem\n")
        print("python-side warning", file=sys.stderr)
        raise RuntimeError("init failed")

    with pytest.raises(RuntimeError, match="init failed"):
        run_dropping_no_driver_message(start)
    out, err = capfd.readouterr()
    assert NO_DRIVER_MESSAGE not in err
    assert "Warp CUDA error: another problem\n" in err
    assert "python-side warning\n" in err
    assert out == ""
