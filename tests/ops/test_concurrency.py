"""Threads, intra-op threading, worker counts and large inputs give the serial results."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import transforms as T

IMG = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (300, 280, 3), dtype=np.uint8))


def _work(seed):
    img = fastprep.crop_mask_ycbcr(IMG, 128, 96, 0.25, seed)
    mask = fastprep.random_dilated_mask([64, 100], 0.3, seed, "square")
    return (img, mask, fastprep.pack_bits(mask), fastprep.dilate(mask, "cross", 2),
            fastprep.rgb_to_ycbcr(IMG, "HWC", torch.float32, 1 / 255))


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_four_threads_give_the_serial_results():
    seeds = list(range(24))
    serial = [_work(s) for s in seeds]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(_work, seeds))
    assert all(_same(a, b) for a, b in zip(serial, threaded))


def test_results_do_not_depend_on_torch_num_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _work(5)
        torch.set_num_threads(2)
        two = _work(5)
    finally:
        torch.set_num_threads(before)
    assert _same(one, two)


class _Items(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return T.seed_workload(32, layout="HWC")(IMG[i:i + 64, i:i + 64]), i


def _epoch(workers):
    torch.manual_seed(1234)
    ds = T.SeedByIndex(_Items())
    return [b.data[0] for b in DataLoader(ds, batch_size=4, num_workers=workers,
                                          collate_fn=fastprep.compact_collate)]


def test_fixed_seed_gives_identical_epochs_for_0_1_2_workers():
    epochs = [_epoch(w) for w in (0, 1, 2)]
    for other in epochs[1:]:
        assert len(other) == len(epochs[0]) and all(torch.equal(a, b) for a, b in zip(epochs[0], other))


@pytest.mark.slow
def test_large_image_crop_touching_the_last_row_and_column():
    big = torch.randint(0, 256, (8192, 8192, 3), dtype=torch.uint8)
    h, w = 300, 257
    out = fastprep.crop(big, 8192 - h, 8192 - w, h, w, "HWC")
    assert torch.equal(out, big[-h:, -w:].permute(2, 0, 1))
    ycc = fastprep.rgb_to_ycbcr(big[-h:, -w:], "HWC")
    assert ycc.shape == (3, h, w)
    fused = fastprep.crop_mask_ycbcr(big, 8192, 8192, 0.0, 3)  # the whole image, nothing masked
    assert torch.equal(fused, fastprep.rgb_to_ycbcr(big, "HWC"))


@pytest.mark.slow  # the bad-input tables again, in a subprocess
def test_invalid_arguments_never_crash_the_process():
    """Every bad-input case, run in a child: a segfault or abort there is a failure here, not a
    dead test process."""
    # Under Numba, the cases that run whatever the backend (the Numba kernel's and the fake's) ran
    # in the native pass already: .ci/test skips them there, and so does this child.
    marks = ["-m", "not one_backend"] if fastprep.backend() == "numba" else []
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k",
                          "(bad_input or bad_batches or bad_arguments) and not never_crash", *marks, "tests"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " passed" in out.stdout
