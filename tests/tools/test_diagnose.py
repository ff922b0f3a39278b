"""The caching method on the pipelines fastprep gives (CompactBatch, SeedByIndex, Subset,
fastprep.Loader), its measurement (warm-up, worker start-up and epoch restarts outside the timed
steps, block means), its verdict rules on given numbers, and the sweeps.

Injected costs are sleeps that dwarf everything else these tiny pipelines do; no speed is
asserted beyond them. The 10-repeat reliability runs are in test_diagnose_reliability.py."""

import io
import itertools
import pickle
import re
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, Subset

import fastprep
import fastprep.tools.measuring._stand_ins as si
from fastprep import transforms as T
from fastprep.tools.diagnose._bottleneck import find_bottleneck, split_dataset, sweep, sweep_loader, sweep_threads
from fastprep.tools.diagnose._verdict import LEVELS, BottleneckReport, Level, judge, side_by_side
from fastprep.tools.measuring._measure import Settings, Source, Stats, block_means, measure
from fastprep.tools.measuring._run_plan import Plan, Progress

# serial: the verdicts time sleeps, so .ci/test runs this module alone, not beside another worker.
pytestmark = [pytest.mark.one_backend, pytest.mark.serial]

SLOW = 0.01  # seconds per sample of an injected cost; batches of 2
FAST = dict(repeats=2, max_seconds=1.0)


class Split(Dataset):
    """load_raw(i) + apply_transform(raw), each with an optional injected cost."""

    def __init__(self, raw=0.0, tf=0.0, n=8):
        self.raw, self.tf, self.n = raw, tf, n

    def __len__(self):
        return self.n

    def load_raw(self, i):
        if self.raw:
            time.sleep(self.raw)
        return torch.full((3, 4, 4), i % 256, dtype=torch.uint8), i

    def apply_transform(self, raw):
        if self.tf:
            time.sleep(self.tf)
        return raw[0] + 1, raw[1]

    def __getitem__(self, i):
        return self.apply_transform(self.load_raw(i))


class Torchvisionish(Dataset):
    """torchvision's convention: a `transform` attribute that may be None."""

    def __init__(self, transform=None, n=8):
        self.transform, self.n = transform, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.full((3, 4, 4), float(i))
        return (self.transform(x) if self.transform is not None else x), i


def _slow(x):
    time.sleep(SLOW)
    return x * 2


def _step(batch):
    return batch[0].float().sum()


def test_seed_by_index_and_subset_are_looked_through():
    inner = Torchvisionish(transform=_slow)
    split = split_dataset(T.SeedByIndex(Subset(inner, [5, 3, 1]), seed=0))
    assert split.path == "SeedByIndex.dataset -> Subset.dataset -> Torchvisionish.transform"
    raw = split.load(1)  # Subset index 1 -> item 3, without the transform
    assert torch.equal(raw[0], torch.full((3, 4, 4), 3.0)) and raw[1] == 3
    assert torch.equal(split.apply(raw)[0], torch.full((3, 4, 4), 6.0))
    assert inner.transform is _slow  # the dataset itself is untouched

    report = find_bottleneck(DataLoader(T.SeedByIndex(Torchvisionish(transform=_slow), seed=0), batch_size=2),
                             _step, **FAST)
    assert report.levels[3].stats is not None, report.table()  # level 4 no longer lost
    assert report.verdict == "transforms", report.table()


def test_transform_attributes_switched_off_by_identity():
    class CallsAlways(Dataset):  # calls its transform without checking for None
        def __init__(self):
            self.transform = _slow

        def __getitem__(self, i):
            return self.transform(torch.full((2,), float(i))), i

    class Joint(Dataset):  # a joint transforms(image, target), as torchvision's detection datasets
        transform = None

        def __init__(self):
            self.transforms = lambda image, target: (image * 3, target + 1)

        def __getitem__(self, i):
            return self.transforms(torch.full((2,), float(i)), i)

    split = split_dataset(CallsAlways())
    assert torch.equal(split.load(2)[0], torch.full((2,), 2.0)) and torch.equal(split.apply(split.load(2))[0],
                                                                               torch.full((2,), 4.0))
    split = split_dataset(Joint())
    raw = split.load(2)
    assert torch.equal(raw[0], torch.full((2,), 2.0)) and raw[1] == 2
    assert torch.equal(split.apply(raw)[0], torch.full((2,), 6.0)) and split.apply(raw)[1] == 3


def test_levels_that_cannot_be_measured_say_why():
    class Opaque(Dataset):  # no transform attribute, no load_raw, nothing wrapped
        def __len__(self):
            return 8

        def __getitem__(self, i):
            time.sleep(SLOW)
            return torch.zeros(2), i

    with pytest.raises(TypeError, match=r"Opaque has neither load_raw\(i\) \+ apply_transform\(raw\)"):
        split_dataset(T.SeedByIndex(Opaque(), seed=0))
    report = find_bottleneck(DataLoader(Opaque(), batch_size=2), _step, **FAST)
    assert report.levels[3].stats is None and "load_raw" in report.levels[3].note
    assert report.levels[1].absent and "no host->device copy" in report.levels[1].note
    assert report.verdict == "transforms + raw loading", report.table()
    assert "fastprep's transforms for your steps" in report.advice and "decode less" in report.advice


def test_compact_batch_is_expanded_before_step_fn():
    seen = []
    loader = DataLoader(Split(n=4), batch_size=2, collate_fn=fastprep.compact_collate)
    expected = fastprep.compact_collate([loader.dataset[0], loader.dataset[1]]).expand()
    find_bottleneck(loader, seen.append, steps=2, warmup=1, repeats=1)
    assert seen and not any(isinstance(b, fastprep.CompactBatch) for b in seen)
    assert all(torch.equal(a, b) for a, b in zip(seen[0], expected))

    seen.clear()
    find_bottleneck(loader, seen.append, expand=False, steps=2, warmup=1, repeats=1)
    assert all(isinstance(b, fastprep.CompactBatch) for b in seen)
    find_bottleneck(loader, seen.append, expand=lambda b: "mine", steps=2, warmup=1, repeats=1)
    assert seen[-1] == "mine"
    with pytest.raises(ValueError, match="expected expand to be a bool or a callable, got 'yes'"):
        find_bottleneck(loader, seen.append, expand="yes", steps=2, warmup=1, repeats=1)


@pytest.mark.parametrize("where,verdict", [("transform", "transforms"), ("raw", "raw loading")])
def test_fastprep_loader(where, verdict):
    seen = []

    def step(batch):
        seen.append(batch)

    dataset = Split(raw=SLOW if where == "raw" else 0.0)
    loader = fastprep.Loader(dataset, 2, transform=_slow if where == "transform" else (lambda x: x + 1),
                             threads=1, seed=0)
    report = find_bottleneck(loader, step, **FAST)
    assert report.verdict == verdict, report.table()
    assert all(lv.stats for k, lv in enumerate(report.levels) if k != 1)
    assert seen and not any(isinstance(b, fastprep.CompactBatch) for b in seen)  # expanded for step_fn
    assert all(isinstance(b[0], torch.Tensor) and b[0].shape == (2, 3, 4, 4) for b in seen)


def test_worker_start_and_epoch_restarts_stay_out_of_the_timed_steps():
    class SlowStart:  # a loader iterator whose start-up is long, as workers' start-up is
        def __init__(self):
            self.n = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            time.sleep(0.3 if self.n == 1 else 0.001)
            return self.n

    timing = measure(Source(SlowStart, lambda b: None), Settings(), lambda: None)
    assert max(timing.step_times) < 0.3 and timing.steady and timing.warmup_steps >= 4

    epochs = []

    class Counted(DataLoader):
        def __iter__(self):
            epochs.append(1)
            return super().__iter__()

    small = Split(raw=SLOW, n=4)  # two batches an epoch: the old measurement restarted constantly
    loader = Counted(small, batch_size=2, num_workers=1, persistent_workers=False)
    report = find_bottleneck(loader, _step, repeats=1, max_seconds=1.0)
    assert report.verdict == "raw loading", report.table()
    assert not any("restart" in lv.note for lv in report.levels)
    assert len(epochs) == 1  # the loader handed in is only asked for a first batch; stand-ins are rebuilt


def test_views_forward_attributes_map_indices_and_pickle():
    data = Split(n=3)
    view = si.Cycle(data, 10)
    assert len(view) == 10 and view[4][1] == 1 and view.load_raw(5)[1] == 2 and view.n == 3
    repeat = si.Repeat(si.Constant(7), 5, Torchvisionish(transform=_slow))
    assert repeat[3] == 7 and repeat.transform is _slow and not hasattr(repeat, "load_raw")
    back = pickle.loads(pickle.dumps(view))  # spawn-started workers pickle the dataset
    assert back[4][1] == 1 and back.load_raw(5)[1] == 2


def test_measure_blocks_and_fixed_steps():
    assert block_means([1, 3, 5, 7, 9], 2) == [2, 7]  # the short tail joins the last block
    ticks = []
    t = measure(Source(lambda: itertools.repeat(0), lambda b: time.sleep(0.001)), Settings(steps=7, warmup=3),
                lambda: None, lambda done, planned: ticks.append((done, planned)))
    assert len(t.step_times) == 7 and t.warmup_steps == 3 and ticks[-1][0] == 1 + 3 + 7
    with pytest.raises(ValueError, match="expected repeats to be an int >= 1, got 0"):
        Settings(repeats=0)
    with pytest.raises(ValueError, match=r"expected precision in \(0, 1\), got 2"):
        Settings(precision=2)


def _stats(rate, noise=0.02):
    return Stats([rate * (1 - noise), rate, rate * (1 + noise)], 30, noise, True)


def _levels(*rates, cpu=True):
    levels = [Level(name, _stats(r) if r else None) for name, r in zip(LEVELS, rates)]
    if cpu:
        levels[1] = Level(LEVELS[1], None, "no host->device copy on the CPU", absent=True)
    return levels


@pytest.mark.parametrize("rates,verdict,says", [
    ((100, 0, 98, 97, 96), "model-bound", "96% of the ceiling"),
    ((100, 0, 90, 10, 9.5), "transforms", "next: raw loading"),
    ((100, 0, 99, 98, 10), "raw loading", "100% of what the stages add (nothing cached runs at 10% of the ceiling, 90 ms more"),
    ((100, 0, 9, 8.9, 8.8), "collate/IPC", "collate/IPC adds"),
    ((100, 50, 49, 48, 47), "host->device copy", "host->device copy adds 10 ms"),
    ((100, 0, 99, 20, 10), "inconclusive", "raw loading (50 ms per step) and transforms (39.9 ms) are less than 1.5x apart"),
    ((100, 0, 99, 0, 10), "transforms + raw loading", "transforms + raw loading adds"),
    # A level faster than one before it shows noise the intervals miss: comparisons widen by it, and
    # the fastest level is the ceiling, so no share is above 100%.
    ((100, 0, 150, 20, 19), "transforms", "the ceiling (level 1) measured only 67% of level 3 (cached processed "
                                          "sample): noise the intervals miss, so each was widened by 3.33 ms"),
    ((100, 0, 200, 60, 45), "inconclusive", "are within noise of each other; nothing cached runs at 22% of the "
                                            "ceiling; the ceiling (level 1) measured only 50% of level 3"),
    ((100, 0, 90, 95, 50), "raw loading", "level 3 (cached processed sample) measured only 95% of level 4 (cached"),
])
def test_verdict_rules(rates, verdict, says):
    report = BottleneckReport(_levels(*rates, cpu=rates[1] == 0), *judge(_levels(*rates, cpu=rates[1] == 0)))
    assert report.verdict == verdict and says in report.margin, report.margin
    assert says in report.table() and report.as_dict()["verdict"] == verdict
    shares = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", report.table())]
    assert max(shares) <= 100, report.table()  # no share of the ceiling, nor of anything, above 100%
    if max(rates) > rates[0]:
        assert "measured slower than level 3, which runs the same step with more work" in report.table()


def test_verdict_is_inconclusive_when_the_drop_is_within_noise():
    levels = _levels(100, 0, 90, 80, 70)
    levels[4].stats = Stats([50, 70, 104], 6, 0.3, True)  # 70% of the ceiling, but it reaches it
    verdict, margin, _ = judge(levels)
    assert verdict == "inconclusive" and "overlap within noise" in margin


def test_side_by_side_and_progress():
    a = BottleneckReport(_levels(100, 0, 90, 10, 9), *judge(_levels(100, 0, 90, 10, 9)))
    b = BottleneckReport(_levels(100, 0, 99, 98, 10), *judge(_levels(100, 0, 99, 98, 10)))
    text = side_by_side({"usual": a, "fastprep": b})
    assert "usual: verdict transforms" in text and "fastprep: verdict raw loading" in text

    out = io.StringIO()
    progress = Progress("diagnose", stream=out, use_tqdm=False)
    plan = Plan(["a", "b"], 4, progress)
    plan.begin(0)
    progress._last = -10.0  # let the first update through the throttle
    plan.tick("level 1", 1, 4)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("diagnose: level 1") and "s left" in lines[0]
    assert lines[-1].startswith("diagnose: done in")


def test_sweeps_cover_their_grids():
    report = sweep_loader(Split(n=8), batch_size=2, num_workers=(0, 1), prefetch_factor=(2,),
                          persistent_workers=(False, True), steps=3, warmup=1)
    pins = (False, True) if torch.cuda.is_available() else (False,)
    keys = {(r["num_workers"], r["prefetch_factor"], r["pin_memory"], r["persistent_workers"]) for r in report.rows}
    assert keys == {(w, pf, pin, pers) for pin in pins for w, pf, pers in [(0, None, False), (1, 2, False), (1, 2, True)]}
    assert report.best in report.rows and "<- best" in report.table()

    seen = []
    threads = sweep_threads(Split(n=8), 2, seen.append, transform=lambda x: x + 1, threads=(1, 2), depth=(1, 2),
                            steps=2, warmup=1)
    assert {(r["threads"], r["depth"]) for r in threads.rows} == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert seen and not any(isinstance(b, fastprep.CompactBatch) for b in seen)
    assert all(r["samples_per_s"] > 0 for r in threads.rows)
    via = sweep(fastprep.Loader(Split(n=8), 2, threads=1), _step, threads=(1,), depth=(1,), steps=2, warmup=1)
    assert [(r["threads"], r["depth"]) for r in via.rows] == [(1, 1)]
    with pytest.raises(TypeError, match="expected a DataLoader .* or a fastprep.Loader, got list"):
        sweep([], _step)
