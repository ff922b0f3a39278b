"""Loader(on_error="skip" | "warn"): a sample whose loading or transform raises is replaced in its
slot by the first next index that loads and transforms (mod len), under the bad sample's seed
(fastprep/core/_bad_samples.py). The plain reference: the same Loader over a dataset where each bad
index was replaced by hand by its substitute's item, with on_error="raise"; it must give the same
batches bit for bit, whatever threads, shuffle, drop_last, fused or foreign transform,
deterministic=True, an iterable dataset or the decode split."""

import logging
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import IterableDataset

import fastprep
from fastprep import transforms as T
from fastprep.errors import MAX_SUBSTITUTES, BadSampleWarning, SubstitutesExhausted

CROP, N = 24, 20


def _image(i: int, small: bool = False) -> np.ndarray:
    side = CROP - 8 if small else 40  # a small image: fastprep's crop refuses it, so does _foreign
    return np.random.default_rng(i).integers(0, 256, (side, side, 3), dtype=np.uint8)


class Flaky(torch.utils.data.Dataset):
    """(HWC uint8 image, label) items; those in `bad` raise in loading ("load") or load an image
    the transform refuses ("transform"). `replace`: {index: the index whose item it loads instead}
    (the reference: bad items swapped for their substitutes by hand)."""

    def __init__(self, bad=(), kind="load", replace=None, n=N):
        self.bad, self.kind, self.replace, self.n = set(bad), kind, replace or {}, n

    def __len__(self):
        return self.n

    def load_raw(self, i):
        i = self.replace.get(i, i)
        if i in self.bad and self.kind == "load":
            raise OSError(f"item {i} is unreadable")
        if i in self.bad and self.kind == "memory":
            raise MemoryError("out of memory")
        return _image(i, small=i in self.bad), i

    __getitem__ = load_raw


def _fused(fuse=True):
    return T.seed_workload(CROP, layout="HWC", fuse=fuse)


def _foreign(image):
    """Not fastprep's: a crop drawn from torch's generator (seeded per sample with deterministic=True)."""
    if image.shape[0] < CROP:
        raise ValueError(f"image {image.shape} smaller than the crop")
    top = int(torch.randint(0, image.shape[0] - CROP + 1, ()))
    return torch.from_numpy(np.ascontiguousarray(image[top:top + CROP, :CROP]))


def _centre(image):
    if image.shape[0] < CROP:
        raise ValueError(f"image {image.shape} smaller than the crop")
    return torch.from_numpy(np.ascontiguousarray(image[:CROP, :CROP]))


def _batches(dataset, **kw):
    kw.setdefault("seed", 3)
    return [tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in b.expand()) for b in
            fastprep.Loader(dataset, **kw)]


def _equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(g, w, strict=True))
        assert g[0].shape[0] == w[0].shape[0]


def _substitutes(bad, n=N):
    """The rule by hand: each bad index -> the first next index (mod n) that is not bad."""
    out = {}
    for i in bad:
        j = (i + 1) % n
        while j in bad:
            j = (j + 1) % n
        out[i] = j
    return out


CASES = [  # (bad, kind, transform, loader arguments)
    ({3, 7}, "load", "fused", dict(batch_size=4, threads=1)),
    ({3, 7}, "load", "fused", dict(batch_size=6, threads=2, shuffle=True, drop_last=True)),
    ({3, 7}, "transform", "fused", dict(batch_size=4, threads=2)),
    ({3, 7}, "transform", "fused", dict(batch_size=6, threads=1, shuffle=True)),
    ({3, 4, 19}, "transform", "unfused", dict(batch_size=5, threads=2, shuffle=True)),  # a run of two, and wrap
    ({3, 7}, "transform", "centre", dict(batch_size=4, threads=2, shuffle=True)),
    ({3, 7}, "load", "centre", dict(batch_size=6, threads=1, drop_last=True)),
    ({3, 7}, "transform", "foreign", dict(batch_size=4, threads=2, deterministic=True, shuffle=True)),
    ({3, 7, 8}, "load", "fused", dict(batch_size=4, threads=2, deterministic=True)),
    ({3, 7}, "load", None, dict(batch_size=4, threads=2)),  # no transform: dataset[i] itself
]
TRANSFORMS = {"fused": _fused, "unfused": lambda: _fused(fuse=False),
              "centre": lambda: _centre, "foreign": lambda: _foreign, None: lambda: None}


@pytest.mark.parametrize("bad, kind, tf, kw", CASES)
def test_bad_samples_are_their_substitutes_under_their_own_seeds(bad, kind, tf, kw):
    want = _batches(Flaky(bad, kind, replace=_substitutes(bad)), transform=TRANSFORMS[tf](), **kw)
    loader = fastprep.Loader(Flaky(bad, kind), transform=TRANSFORMS[tf](), on_error="skip", seed=3, **kw)
    got = [tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in b.expand()) for b in loader]
    _equal(got, want)
    assert len(got) == len(loader)
    if kw.get("drop_last"):
        assert all(g[0].shape[0] == kw["batch_size"] for g in got)
    delivered = {i for i in loader.indices()[:len(got) * kw["batch_size"]]}
    assert loader.bad_samples.indices == sorted(bad & delivered)
    assert loader.bad_samples.count == len(bad & delivered)
    for name in loader.bad_samples.names():
        assert ("OSError" if kind == "load" else "Error") in name and "(in " in name


def test_the_same_seed_gives_the_same_batches_whatever_threads():
    runs = [_batches(Flaky({3, 7}, "transform"), batch_size=6, transform=_fused(), shuffle=True, threads=t,
                     on_error="skip", seed=11) for t in (1, 2, 3)]
    _equal(runs[1], runs[0])
    _equal(runs[2], runs[0])


class Stream(IterableDataset):
    """Items 0..n-1 in order (those in `bad` refused by the transform), or those `replace` names instead."""

    def __init__(self, bad=(), replace=None, n=N, fail_at=None):
        self.bad, self.replace, self.n, self.fail_at = set(bad), replace or {}, n, fail_at

    def __iter__(self):
        for p in range(self.n):
            if p == self.fail_at:
                raise OSError("the stream broke")
            i = self.replace.get(p, p)
            yield _image(i, small=i in self.bad), i


@pytest.mark.parametrize("threads, tf, deterministic", [(1, "fused", False), (2, "fused", False), (2, "foreign", True)])
def test_an_iterable_datasets_bad_item_is_the_next_of_its_batch(threads, tf, deterministic):
    # batches of 4: item 3 (its batch's last) wraps around to 0, item 6 takes 7
    kw = dict(transform=TRANSFORMS[tf](), threads=threads, deterministic=deterministic)
    want = _batches(Stream({3, 6}, replace={3: 0, 6: 7}), batch_size=4, **kw)
    loader = fastprep.Loader(Stream({3, 6}), 4, on_error="skip", seed=3, **kw)
    got = [tuple(x.clone() for x in b.expand()) for b in loader]
    _equal(got, want)
    assert loader.bad_samples.indices == [3, 6] and "position" not in loader.bad_samples.names()[0]


# (stream length, batch size, bad positions, {bad: the item that takes its place}): a bad item alone
# in its batch, or whose batch's other items are bad too, takes the latest item read before its batch
ALONE = [
    (9, 4, {8}, {8: 7}),  # the last item, alone in its batch
    (6, 1, {3}, {3: 2}),  # batch_size=1: every item is alone
    (6, 1, {2, 3}, {2: 1, 3: 1}),  # ... and the latest read before it is bad too
    (10, 4, {8, 9}, {8: 7, 9: 7}),  # a short last batch all bad
    (12, 4, {4, 5, 6, 7}, {4: 3, 5: 3, 6: 3, 7: 3}),  # a whole batch bad
]


@pytest.mark.parametrize("n, size, bad, replace", ALONE)
@pytest.mark.parametrize("threads, tf, deterministic", [(1, "fused", False), (2, "fused", False), (2, "foreign", True)])
def test_an_iterable_datasets_bad_item_alone_in_its_batch_takes_an_item_read_before(n, size, bad, replace, threads, tf,
                                                                                      deterministic):
    kw = dict(transform=TRANSFORMS[tf](), threads=threads, deterministic=deterministic)
    want = _batches(Stream(bad, replace=replace, n=n), batch_size=size, **kw)
    loader = fastprep.Loader(Stream(bad, n=n), size, on_error="skip", seed=3, **kw)
    got = [tuple(x.clone() for x in b.expand()) for b in loader]
    _equal(got, want)
    assert loader.bad_samples.indices == sorted(bad) and loader.bad_samples.count == len(bad)


@pytest.mark.parametrize("n, size, tried, says", [
    (3, 1, [], "no other sample to try in its place (an iterable dataset's"),  # the pass's first item, alone
    (8, 4, [1, 2, 3], "every sample there was to try (an iterable dataset's"),  # the first batch all bad
])
def test_an_iterable_datasets_bad_item_with_nothing_left_to_try_says_so(n, size, tried, says):
    with pytest.raises(SubstitutesExhausted) as info:
        list(fastprep.Loader(Stream(range(n), n=n), size, transform=_fused(), on_error="skip", seed=0, threads=1))
    assert info.value.tried == tried and says in str(info.value)
    assert "too many consecutive" not in str(info.value)


def test_an_iterable_streams_own_error_ends_the_pass():
    with pytest.raises(OSError, match="the stream broke"):
        list(fastprep.Loader(Stream(fail_at=5), 4, transform=_fused(), on_error="skip", seed=0))


def test_warn_warns_once_per_index_in_the_loops_thread_and_counts_every_epoch(caplog):
    loader = fastprep.Loader(Flaky({3, 7}), 4, transform=_fused(), threads=2, on_error="warn", seed=0)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="fastprep"):
        warnings.simplefilter("always")
        for epoch in range(2):
            loader.set_epoch(epoch)
            for _ in loader:
                pass
    texts = [str(w.message) for w in caught if issubclass(w.category, BadSampleWarning)]
    assert len(texts) == 2 and "bad sample 3" in texts[0] and "sample 4 took its place" in texts[0]
    assert "bad sample 7" in texts[1] and "OSError: item 7 is unreadable" in texts[1]
    assert all(w.filename == __file__ for w in caught)  # pointed at the loop, not at a Loader thread
    assert loader.bad_samples.count == 4 and loader.bad_samples.indices == [3, 7]
    logged = [r.getMessage() for r in caplog.records if r.name == "fastprep"]
    assert len(logged) == 2 and "skipped 2 bad samples" in logged[0] and "skipped 4" in logged[1]
    assert "bad_samples=4" in repr(loader)


def test_skip_does_not_warn_and_a_warning_filter_set_to_error_stops_the_loop(caplog):
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="fastprep"):
        warnings.simplefilter("error")
        list(fastprep.Loader(Flaky({3}), 4, transform=_fused(), on_error="skip", seed=0))
        assert [(r.levelno, "skipped 1 bad sample" in r.getMessage()) for r in caplog.records] == [(logging.INFO, True)]
        with pytest.raises(BadSampleWarning, match="bad sample 3"):
            list(fastprep.Loader(Flaky({3}), 4, transform=_fused(), on_error="warn", seed=0))


def test_state_dict_carries_the_bad_samples_and_old_checkpoints_load():
    loader = fastprep.Loader(Flaky({3, 7}), 4, transform=_fused(), on_error="skip", seed=0)
    it = iter(loader)
    next(it), next(it)  # samples 0..7: both bad ones delivered
    state = loader.state_dict()
    assert state["bad_samples"]["count"] == 2 and state["bad_samples"]["indices"] == [3, 7]
    resumed = fastprep.Loader(Flaky({3, 7}), 4, transform=_fused(), on_error="skip", seed=0)
    resumed.load_state_dict(state)
    assert resumed.bad_samples.count == 2 and resumed.bad_samples.names() == loader.bad_samples.names()
    rest = [tuple(x.clone() for x in b.expand()) for b in resumed]
    _equal(rest, _batches(Flaky({3, 7}, replace={3: 4, 7: 8}), batch_size=4, transform=_fused(), seed=0)[2:])
    old = {k: v for k, v in state.items() if k != "bad_samples"}
    fresh = fastprep.Loader(Flaky({3, 7}), 4, transform=_fused(), on_error="skip", seed=0)
    fresh.load_state_dict(old)
    assert fresh.bad_samples.count == 0


def test_raise_is_the_default_and_names_the_sample():
    for kw in ({}, {"on_error": "raise"}):
        with pytest.raises(OSError, match="item 7 is unreadable") as info:
            list(fastprep.Loader(Flaky({7}), 4, transform=_fused(), seed=0, **kw))
        assert any("sample 7" in note for note in info.value.__notes__)


@pytest.mark.parametrize("value", ["ignore", None, True])
def test_a_bad_on_error_is_refused_by_name(value):
    with pytest.raises(ValueError, match=f"on_error.*{value!r}"):
        fastprep.Loader(Flaky(), 4, on_error=value)


def test_too_many_bad_samples_in_a_row_stop_the_epoch_naming_the_indices_tried():
    with pytest.raises(SubstitutesExhausted, match=r"sample 0 .* \[1, 2, 3,.* 16\]") as info:
        list(fastprep.Loader(Flaky(range(N)), 4, transform=_fused(), threads=1, on_error="skip", seed=0))
    assert info.value.tried == list(range(1, MAX_SUBSTITUTES + 1))


def test_errors_that_are_not_a_samples_are_never_skipped():
    with pytest.raises(MemoryError):
        list(fastprep.Loader(Flaky({5}, "memory"), 4, transform=_fused(), on_error="skip", seed=0))

    class Odd(Flaky):  # a sample of another shape: a batching error, the pipeline's, not a sample's
        def load_raw(self, i):
            return (_image(i) if i != 6 else _image(i)[:CROP]), i

        __getitem__ = load_raw

    with pytest.raises(ValueError, match="sample 6"):
        list(fastprep.Loader(Odd(), 4, on_error="skip", seed=0))


class Corrupt(torch.utils.data.Dataset):
    """A PackedDataset whose records in `bad` are zeros (no JPEG to cut or decode: kind "record") or
    raise in loading ("load"); `replace` as Flaky's."""

    def __init__(self, packed, bad, kind="record", replace=None):
        self.packed, self.bad, self.kind, self.replace = packed, set(bad), kind, replace or {}

    def __len__(self):
        return len(self.packed)

    def where(self, i):
        return self.packed.where(i)

    def load_raw(self, i):
        i = self.replace.get(i, i)
        if i in self.bad and self.kind == "load":
            raise OSError(f"record {i} unreadable")
        image, label = self.packed.load_raw(i)
        if i in self.bad:
            image.record = memoryview(bytes(len(image.record)))
        return image, label


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    from helpers.decode_split import FILES
    from helpers.jpeg_photos import needs_decoder, write_tree

    if needs_decoder.args[0]:
        pytest.skip(needs_decoder.kwargs["reason"])
    root = tmp_path_factory.mktemp("bad-split")
    write_tree(root, FILES)
    fastprep.io.pack(root, root / "pack", progress=False, threads=1)
    return fastprep.io.PackedDataset(root / "pack")


@pytest.mark.parametrize("kind", ["record", "load"])
def test_a_bad_cut_in_the_decode_splits_host_half_is_replaced_as_in_the_threads(packed, kind):
    from helpers.decode_split import batches, pipeline, resized

    bad, replace = {1, 4}, {1: 2, 4: 0}  # the last wraps around to the first
    for transform, threads in ((pipeline(), 2), (resized("rrc", "after"), 1)):
        kw = dict(batch_size=2, transform=transform, threads=threads, seed=5, shuffle=True)
        want = batches(Corrupt(packed, bad, kind, replace), **kw)
        for decode_on in (None, "cpu"):
            loader_kw = dict(kw, decode_on=decode_on, on_error="warn")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = batches(Corrupt(packed, bad, kind), **loader_kw)
            _equal(got, want)
            texts = sorted(str(w.message) for w in caught if w.category is BadSampleWarning)
            assert len(texts) == 2 and "bad sample 1 (" in texts[0] and "fpk record 1 (a/422p.jpg)" in texts[0]
