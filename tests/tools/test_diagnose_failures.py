"""`python -m fastprep diagnose` when the pipeline raises while it is measured: one line naming the
stage (loading item N, the transform, collation, the step function), the item where it is known,
the error and when it was raised; exit status 1; --traceback prints the whole traceback first."""

import os
import re
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep.tools.cli._commands import main

pytestmark = pytest.mark.one_backend

BAD = 5  # reached only by level 5 (nothing cached): the first batch is items 0-1, levels 3-4 cache item 0


class Items(Dataset):
    def __init__(self, bad=None, transform=None, n=8):
        self.bad, self.transform, self.n = bad, transform, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"no such key: {i}")
        x = torch.full((3, 8, 8), i, dtype=torch.uint8)
        return (self.transform(x) if self.transform is not None else x), i


class Crop:
    """A transform object failing on the image of item `bad`."""

    def __init__(self, bad):
        self.bad = bad

    def __call__(self, x):
        if int(x[0, 0, 0]) == self.bad:
            raise ValueError("cannot crop 8x8 to 16x16")
        return x


def collate_refusing(bad):
    def collate(batch):
        if any(label == bad for _, label in batch):
            raise TypeError(f"collate refuses a batch with item {bad}")
        return torch.stack([x for x, _ in batch]), torch.tensor([y for _, y in batch])
    return collate


def step(batch):
    return batch[0].float().sum()


def failing_step(batch):
    raise RuntimeError("CUDA out of memory (pretend)")


def item_raises():
    return Items(bad=BAD), step, 2


def first_item_raises():
    return Items(bad=0), step, 2


def transform_raises():
    return Items(transform=Crop(BAD)), step, 2


def first_transform_raises():
    return Items(transform=Crop(0)), step, 2


def collate_raises():
    return Items(), step, 2, collate_refusing(0)


def later_collate_raises():
    return Items(), step, 2, collate_refusing(BAD)


def step_raises():
    return Items(), failing_step, 2


def worker_item_raises():
    return DataLoader(Items(bad=BAD), batch_size=2, num_workers=1), step


def loader_item_raises():
    return fastprep.Loader(Items(bad=BAD), 2, threads=1, seed=0), step


def loader_transform_raises():
    return fastprep.Loader(Items(), 2, transform=Crop(BAD), threads=1, seed=0), step


FAST = ["--repeats", "1", "--steps", "2", "--warmup", "1", "--time-limit", "0", "--progress", "off"]
FIRST = r" while reading the first batch and item 0 for the cached levels"
LEVEL5 = r" while measuring level 5/5 \(nothing cached\)"
CASES = [
    ("item_raises", rf"loading item 5 raised KeyError: 'no such key: 5'{LEVEL5}"),
    ("first_item_raises", rf"loading item 0 raised KeyError: 'no such key: 0'{FIRST}"),
    ("transform_raises", rf"the transform \(item 5\) raised ValueError: cannot crop 8x8 to 16x16{LEVEL5}"),
    ("first_transform_raises", rf"the transform \(item 0\) raised ValueError: cannot crop 8x8 to 16x16{FIRST}"),
    ("collate_raises", rf"collation raised TypeError: collate refuses a batch with item 0{FIRST}"),
    ("later_collate_raises", rf"collation raised TypeError: collate refuses a batch with item 5{LEVEL5}"),
    ("step_raises", r"the step function raised RuntimeError: CUDA out of memory \(pretend\) while measuring level "
                    r"1/5 \(device-cached batch\)"),
    ("worker_item_raises", rf"loading an item raised KeyError: 'no such key: 5' \(in DataLoader worker process "
                           rf"0\){LEVEL5}"),
    ("loader_item_raises", rf"loading item 5 raised KeyError: 'no such key: 5'{LEVEL5}"),
    ("loader_transform_raises", rf"the transform raised ValueError: cannot crop 8x8 to 16x16{LEVEL5}"),
]


@pytest.mark.parametrize(("factory", "says"), CASES, ids=[c[0] for c in CASES])
def test_a_failure_while_measuring_is_one_line_naming_the_stage(factory, says, capsys):
    assert main(["diagnose", f"{__name__}:{factory}", *FAST]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.fullmatch(rf"python -m fastprep diagnose: error: {says}; --traceback prints the whole traceback\n",
                        err), err


def test_traceback_prints_the_whole_traceback_then_the_line(capsys):
    assert main(["diagnose", f"{__name__}:transform_raises", *FAST, "--traceback"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and 'in __call__\n    raise ValueError' in err
    last = err.rstrip("\n").splitlines()[-1]
    assert last == "python -m fastprep diagnose: error: the transform (item 5) raised ValueError: cannot crop 8x8 " \
                   "to 16x16 while measuring level 5/5 (nothing cached)"


def test_the_command_line_exits_1_with_one_line():
    run = subprocess.run([sys.executable, "-m", "fastprep", "diagnose", "test_diagnose_failures:item_raises", *FAST],
                         capture_output=True, text=True, cwd=os.path.dirname(__file__), timeout=120)
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.count("\n") == 1 and "loading item 5 raised KeyError" in run.stderr, run.stderr
