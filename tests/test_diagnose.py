"""The caching method names the injected slow stage; the sweep covers the grid."""

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from fastprep.tools.diagnose import find_bottleneck, sweep_loader

# Injected delays dwarf everything else these tiny pipelines do, so verdicts are robust on a
# noisy 2-core machine; no timing is asserted beyond them.
SLOW = 0.02


class Synthetic(Dataset):
    def __init__(self, raw_delay=0.0, transform_delay=0.0, n=64):
        self.raw_delay, self.n = raw_delay, n
        self.transform = (lambda x: (time.sleep(transform_delay), x * 2)[1]) if transform_delay else (lambda x: x * 2)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.raw_delay:
            time.sleep(self.raw_delay)
        img = torch.full((3, 4, 4), float(i))
        return (self.transform(img) if self.transform else img), i


def _slow_collate(batch):
    time.sleep(SLOW * 4)
    return torch.utils.data.default_collate(batch)


def _run(dataset, step_delay=0.0, collate_fn=None):
    base = dataset

    def loader_factory(dataset=None):
        return DataLoader(dataset if dataset is not None else base, batch_size=4, collate_fn=collate_fn)

    def step(batch):
        if step_delay:
            time.sleep(step_delay)
        return batch[0].sum()

    return find_bottleneck(loader_factory, step, device="cpu", steps=5, warmup=1)


@pytest.mark.parametrize("setup,verdict", [
    (dict(dataset=Synthetic(transform_delay=SLOW)), "transforms"),
    (dict(dataset=Synthetic(raw_delay=SLOW)), "raw loading"),
    (dict(dataset=Synthetic(), step_delay=SLOW * 4), "model-bound"),
    (dict(dataset=Synthetic(), collate_fn=_slow_collate), "collate/IPC"),
])
def test_verdict_names_the_injected_stage(setup, verdict):
    report = _run(**setup)
    assert report.verdict == verdict, report.table()
    assert all(lv.steps_per_s for lv in report.levels)
    assert verdict.split("/")[0] in report.table()


def test_levels_that_cannot_be_measured_say_why():
    class Opaque(Dataset):  # no transform attribute, no load_raw: raw and transforms can't split
        def __len__(self):
            return 16

        def __getitem__(self, i):
            time.sleep(SLOW)
            return torch.zeros(2), i

    report = _run(Opaque())
    assert report.levels[3].steps_per_s is None and "load_raw" in report.levels[3].note
    assert report.verdict == "transforms + raw loading"

    report = find_bottleneck(lambda: DataLoader(Synthetic(raw_delay=SLOW), batch_size=4),
                             lambda b: None, steps=3, warmup=1)
    assert "no `dataset=` keyword" in report.levels[2].note
    assert report.verdict == "collate/IPC + transforms + raw loading"
    assert "CompactCollate" in report.advice and "fastprep ops" in report.advice


def test_load_raw_protocol():
    class Split(Dataset):
        def __len__(self):
            return 8

        def load_raw(self, i):
            return torch.full((2,), float(i))

        def apply_transform(self, raw):
            time.sleep(SLOW)
            return raw + 1, 0

        def __getitem__(self, i):
            return self.apply_transform(self.load_raw(i))

    assert _run(Split()).verdict == "transforms"


def test_sweep_loader_grid_and_best():
    seen = []
    report = sweep_loader(Synthetic(n=32), batch_size=4, num_workers=(0, 1), prefetch_factor=(2,),
                          persistent_workers=(False, True), steps=3, warmup=1, progress=seen.append)
    pins = (False, True) if torch.cuda.is_available() else (False,)  # pinning is swept only with CUDA
    keys = {(r["num_workers"], r["prefetch_factor"], r["pin_memory"], r["persistent_workers"]) for r in report.rows}
    assert keys == {(w, pf, pin, pers) for pin in pins
                    for w, pf, pers in [(0, None, False), (1, 2, False), (1, 2, True)]}
    assert len(seen) == 3 * len(pins) and report.best in report.rows
    assert all(r["samples_per_s"] > 0 for r in report.rows)
    assert "<- best" in report.table()
