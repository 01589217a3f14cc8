"""The numpy rasterizer (``swarp/render/raster.py``): coverage, anti-aliasing, orientation, outlines,
clipping and the one-owner-per-pixel compositing rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swarp.render.raster import Canvas

WHITE, RED, BLUE = (255, 255, 255), (255, 0, 0), (0, 0, 255)


def test_disc_covers_its_inside_and_antialiases_its_rim():
    canvas = Canvas(40, 50, WHITE)
    canvas.capsules([[20.0, 15.0]], [[20.0, 15.0]], 8.0, RED)
    image = canvas.image
    assert image.shape == (40, 50, 3) and image.dtype == np.uint8
    rows, cols = np.mgrid[0:40, 0:50]
    distance = np.hypot(cols + 0.5 - 20.0, rows + 0.5 - 15.0)
    assert (image[distance < 7.4] == RED).all()
    assert (image[distance > 8.6] == WHITE).all()
    rim = (distance > 7.6) & (distance < 8.4)
    assert ((image[rim, 1] > 0) & (image[rim, 1] < 255)).all()  # partly covered: blended


def test_box_orientation_is_clockwise_on_screen():
    canvas = Canvas(60, 60, WHITE)
    # Pixel y points down: +angle turns the long axis from +x towards +y (down-right).
    canvas.boxes([[30.0, 30.0]], [[20.0, 3.0]], math.pi / 4, BLUE)
    image = canvas.image
    assert (image[30 + 10, 30 + 10] == BLUE).all()
    assert (image[30 - 10, 30 + 10] == WHITE).all()


def test_outline_is_an_inner_band():
    canvas = Canvas(40, 40, WHITE)
    canvas.capsules([[20.5, 20.5]], [[20.5, 20.5]], 10.0, RED, width=2.0)
    canvas.boxes([[20.0, 20.0]], [[4.0, 4.0]], 0.0, BLUE, width=1.0)
    image = canvas.image
    assert (image[20, 20] == WHITE).all()  # inside both outlines
    assert (image[20, 20 + 9] == RED).all()  # centre of the ring band [8, 10]
    assert (image[20, 20 + 12] == WHITE).all()
    assert (image[20 - 4, 20] == BLUE).all()  # the box's top edge band [3, 4] px from its centre


def test_primitives_stay_inside_their_clip_rectangle():
    canvas = Canvas(20, 40, WHITE)
    canvas.capsules([[18.0, 10.0]], [[18.0, 10.0]], 6.0, RED, clip=[[0, 0, 20, 20]])
    image = canvas.image
    assert (image[:, 20:] == WHITE).all()
    assert (image[10, 19] == RED).all()


def test_highest_coverage_wins_within_a_batch_and_later_batches_go_on_top():
    canvas = Canvas(20, 30, WHITE)
    # Two overlapping discs in one batch: where both cover a pixel fully, the later one wins;
    # where one covers fully and the other partly, the full one wins.
    canvas.capsules([[10.0, 10.0], [16.0, 10.0]], [[10.0, 10.0], [16.0, 10.0]], 5.0, [RED, BLUE])
    image = canvas.image
    assert (image[10, 13] == BLUE).all()
    assert (image[10, 7] == RED).all()
    assert (image[10, 19] == BLUE).all()
    canvas.capsules([[16.0, 10.0]], [[16.0, 10.0]], 2.0, RED)
    assert (canvas.image[10, 16] == RED).all()


def test_scratch_is_left_clean_and_degenerate_input_is_skipped():
    scratch = np.full(30 * 30, -1, dtype=np.int64)
    canvas = Canvas(30, 30, WHITE, scratch=scratch)
    canvas.capsules([[5.0, 5.0], [np.nan, 1.0], [-50.0, -50.0]], [[25.0, 25.0], [1.0, 1.0], [-40.0, -40.0]], 1.0, RED)
    canvas.boxes(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0), RED)
    assert (scratch == -1).all()
    assert (canvas.image[15, 15] == RED).all()
    # Many primitives of mixed sizes go through several chunks and give the same image as one by one.
    rng = np.random.default_rng(0)
    start = rng.uniform(0, 30, (300, 2))
    end = start + rng.uniform(-10, 10, (300, 2))
    batched = Canvas(30, 30, WHITE)
    batched.capsules(start, end, 0.4, RED)
    single = Canvas(30, 30, WHITE)
    for a, b in zip(start, end, strict=True):
        single.capsules([a], [b], 0.4, RED)
    # Same color everywhere: the batch takes each pixel's best coverage, one-by-one blends them all,
    # so every fully covered pixel of the batch is fully covered one by one too.
    assert ((batched.image == RED).all(-1) <= (single.image == RED).all(-1)).all()


def test_bad_canvas_arguments():
    with pytest.raises(ValueError, match="background image"):
        Canvas(10, 10, np.zeros((5, 5, 3), np.uint8))
    with pytest.raises(ValueError, match="scratch"):
        Canvas(10, 10, WHITE, scratch=np.zeros(7, np.int64))
