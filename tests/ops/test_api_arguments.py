"""The library's Python API takes exactly what it documents: seeds as the ops take them (one check),
bool options as bools, sizes as torchvision's, and a released batch refuses every use."""

import numpy as np
import pytest
import torch

import fastprep
from fastprep import CompactCollate, DevicePrefetcher, compact_collate
from fastprep import transforms as T
from fastprep.core._rng import item_seed, key_stream, seeded, thread_seeded

GOOD_SEEDS = [1, np.int64(1), np.int32(1), np.uint8(1), np.uint64(1), -2**63, 2**63 - 1, np.uint64(2**63 - 1)]
BAD_SEEDS = [(1.5, TypeError, r"got float \(1.5\)"), (1.0, TypeError, r"got float \(1.0\)"),
             (True, TypeError, r"got bool \(True\)"), (np.True_, TypeError, "got bool"),
             (np.uint64(2**64 - 1), ValueError, "to fit in int64, got 18446744073709551615"),
             (2**63, ValueError, "to fit in int64, got 9223372036854775808"),
             (-2**63 - 1, ValueError, "to fit in int64"), (torch.tensor(1), TypeError, "got Tensor"),
             ("1", TypeError, "got str"), (None, TypeError, "got NoneType")]


def _enter_and_leave(context):
    with context:
        pass


def _seed_users(seed):
    """Every place fastprep takes a seed from the user."""
    return {
        "derive_seed": lambda: fastprep.derive_seed(seed, 1),
        "derive_seed stream": lambda: fastprep.derive_seed(1, seed),
        "random_word": lambda: fastprep.random_word(seed, 0),
        "item_seed": lambda: item_seed(seed, 3),
        "item_seed epoch": lambda: item_seed(0, 3, seed),
        "key_stream": lambda: key_stream(seed),
        "seeded": lambda: _enter_and_leave(seeded(seed)),
        "thread_seeded": lambda: _enter_and_leave(thread_seeded(seed)),
        "SeedByIndex": lambda: T.SeedByIndex([], seed=seed).seed,
        "Loader": lambda: fastprep.Loader([], 1, seed=seed).seed,
    }


@pytest.mark.parametrize("seed", GOOD_SEEDS, ids=repr)
def test_every_seed_helper_takes_python_and_numpy_ints_in_int64(seed):
    with torch.random.fork_rng(devices=[]):
        for use in _seed_users(seed).values():
            use()  # no error
    assert fastprep.derive_seed(seed, 1) == fastprep.derive_seed(int(seed), 1)
    assert T.SeedByIndex([], seed=seed).seed == int(seed) and type(T.SeedByIndex([], seed=seed).seed) is int


@pytest.mark.parametrize("seed,exc,match", BAD_SEEDS, ids=lambda v: repr(v)[:20])
def test_every_seed_helper_rejects_what_the_ops_reject(seed, exc, match):
    for name, use in _seed_users(seed).items():
        if (name == "key_stream" and isinstance(seed, str)) or (name in ("SeedByIndex", "Loader") and seed is None):
            continue  # a str key is a path, hashed; seed=None draws a seed: both by design
        with pytest.raises(exc, match=match):
            use()


def test_owners_are_named_and_state_dicts_are_checked():
    with pytest.raises(TypeError, match=r"SeedByIndex: expected seed to be an int, got bool"):
        T.SeedByIndex([], seed=True)
    with pytest.raises(ValueError, match="Loader: expected seed to fit in int64"):
        fastprep.Loader([], 1, seed=np.uint64(2**64 - 1))
    ds = T.SeedByIndex([])
    ds.set_epoch(np.int64(2))
    assert ds.epoch == 2
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="SeedByIndex: expected epoch to be an int >= 0"):
            ds.set_epoch(bad)
    loader = fastprep.Loader([], 1, seed=0)
    loader.set_epoch(np.int64(1))
    with pytest.raises(ValueError, match="Loader: expected epoch to be an int >= 0, got 1.5"):
        loader.set_epoch(1.5)
    with pytest.raises(ValueError, match=r"expected a dict from Loader.state_dict\(\), missing \['position'\]"):
        loader.load_state_dict({"seed": 0, "epoch": 0})
    with pytest.raises(TypeError, match="Loader.load_state_dict: expected seed to be an int, got float"):
        loader.load_state_dict({"seed": 0.5, "epoch": 0, "position": 0})


@pytest.mark.parametrize("size,want", [(4, (4, 4)), ((4, 5), (4, 5)), ([5], (5, 5)), (np.int64(3), (3, 3)),
                                       ((np.int32(2), 7), (2, 7))])
def test_random_crop_sizes_as_torchvision(size, want):
    assert T.RandomCrop(size).size == want
    assert T.RandomCrop(size)(torch.zeros(3, 8, 8)).shape == (3, *want)


@pytest.mark.parametrize("make,match", [
    (lambda: T.RandomCrop((4, 5, 6)), r"RandomCrop: expected size to be an int >= 1 or a pair of them \(h, w\), "
                                      r"got \(4, 5, 6\)"),
    (lambda: T.RandomCrop(()), r"got \(\)"),
    (lambda: T.RandomCrop(0), "got 0"),
    (lambda: T.RandomCrop((4, -1)), r"got \(4, -1\)"),
    (lambda: T.RandomCrop(2.5), "got 2.5"),
    (lambda: T.RandomCrop(True), "got True"),
    (lambda: T.RandomCrop("4"), "got '4'"),
    (lambda: T.RandomCrop((4, 4.0)), r"got \(4, 4.0\)"),
    (lambda: T.RandomCrop(4, pad_if_needed="yes"), "RandomCrop: expected pad_if_needed to be a bool, got 'yes'"),
    (lambda: T.RandomCrop(4, pad_if_needed=1), "expected pad_if_needed to be a bool, got 1"),
    (lambda: T.RandomCrop(4, fill="0"), "RandomCrop: expected fill to be a number, got '0'"),
    (lambda: T.RandomCrop(4, layout="NCHW"), "RandomCrop: expected layout to be 'CHW' or 'HWC', got 'NCHW'"),
    (lambda: T.RandomCrop(4, generator=3), "RandomCrop: expected generator to be a torch.Generator or None"),
    (lambda: T.RandomDilatedMask(1.5), r"RandomDilatedMask: expected p to be in \[0, 1\], got 1.5"),
    (lambda: T.RandomDilatedMask(True), "RandomDilatedMask: expected p to be a number, got True"),
    (lambda: T.RandomDilatedMask(0.5, structure="disk"), "expected structure to be 'cross' or 'square', got 'disk'"),
    (lambda: T.RandomDilatedMask(0.5, iterations=-1), "expected iterations to be an int >= 0, got -1"),
    (lambda: T.RandomDilatedMask(0.5, iterations=1.0), "expected iterations to be an int >= 0, got 1.0"),
    (lambda: T.RandomDilatedMask(0.5, value=None), "expected value to be a number, got None"),
    (lambda: T.RandomDilatedMask(0.5, layout="hwc"), "expected layout to be 'CHW' or 'HWC', got 'hwc'"),
    (lambda: T.RGBToYCbCr(out_dtype="float32"), "RGBToYCbCr: expected out_dtype to be a torch.dtype or None"),
    (lambda: T.RGBToYCbCr(scale="1"), "RGBToYCbCr: expected scale to be a number, got '1'"),
    (lambda: T.ToDtype("float32"), "ToDtype: expected dtype to be a torch.dtype, got 'float32'"),
    (lambda: T.ToDtype(torch.float32, scale=1), "ToDtype: expected scale to be a bool, got 1"),
    (lambda: T.Compose([lambda x: x]), "Compose: expected transforms to be a list of nn.Modules"),
    (lambda: T.Compose(T.RandomCrop(4)), "Compose: expected transforms to be a list of nn.Modules"),
    (lambda: T.Compose([T.RandomCrop(4)], fuse="no"), "Compose: expected fuse to be a bool, got 'no'"),
    (lambda: CompactCollate(pack_masks="no"), "CompactCollate: expected pack_masks to be a bool, got 'no'"),
    (lambda: CompactCollate(reuse=1), "CompactCollate: expected reuse to be a bool, got 1"),
    (lambda: CompactCollate(float_dtype="bfloat16"), "expected float_dtype to be a floating dtype or None"),
    (lambda: fastprep.Loader([], 1, shuffle=1), "Loader: expected shuffle to be a bool, .*got 1"),
    (lambda: fastprep.Loader([], 1, drop_last="no"), "Loader: expected drop_last to be a bool, got 'no'"),
    (lambda: fastprep.Loader([], 1, expand=1), "Loader: expected expand to be a bool or a callable, got 1"),
    (lambda: fastprep.Loader([], 1.0), "Loader: expected batch_size to be an int >= 1, got 1.0"),
    (lambda: DevicePrefetcher([], "cpu", release=1), "expected release to be a bool, got 1"),
])
def test_bad_arguments_fail_when_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_numpy_bools_and_ints_are_bools_and_ints():
    assert T.RandomCrop(np.int64(4), pad_if_needed=np.True_).pad_if_needed is True
    assert fastprep.Loader([], np.int64(2), threads=np.int32(1), shuffle=np.False_).batch_size == 2


@pytest.mark.parametrize("kwargs,match", [
    (dict(dtype="float32"), "expand: expected a floating dtype, got float32"),
    (dict(dtype=torch.int32), "expand: expected a floating dtype, got torch.int32"),
    (dict(scale="1/255"), "expand: expected scale to be a number, got '1/255'"),
    (dict(channels_last=1), "expand: expected channels_last to be a bool, got 1"),
    (dict(num_classes=0), "expand: expected num_classes to be an int >= 1, got 0"),
    (dict(num_classes=True), "expand: expected num_classes to be an int >= 1, got True"),
])
def test_expand_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        compact_collate([(torch.zeros(1, 2, 2, dtype=torch.uint8), 1)]).expand(**kwargs)
    with pytest.raises(ValueError, match="CompactBatch.to: expected non_blocking to be a bool, got 1"):
        compact_collate([(torch.zeros(1),)]).to("cpu", non_blocking=1)


@pytest.mark.parametrize("use", [
    lambda b: b.expand(), lambda b: b.to("cpu"), lambda b: b.clone(), lambda b: b.pin_memory(),
    lambda b: b.tensors(), lambda b: b.nbytes, lambda b: b.nbytes_expanded, lambda b: b.data,
], ids=["expand", "to", "clone", "pin_memory", "tensors", "nbytes", "nbytes_expanded", "data"])
def test_a_released_batch_refuses_every_use(use):
    batch = compact_collate([(torch.zeros(1, 2, 2, dtype=torch.uint8), 1)] * 2)
    batch.release()
    with pytest.raises(RuntimeError, match=r"CompactBatch\.\w+: this batch was released .* batch.clone\(\)"):
        use(batch)
    assert repr(batch) == "CompactBatch(released)" and batch.released
    assert batch.roles == ("image", "label")  # what it was stays known


def test_releasing_twice_hands_the_buffers_back_once():
    collate = CompactCollate(reuse=True)
    batch = collate([(torch.zeros(1, 2, 2, dtype=torch.uint8), 1)] * 2)
    batch.release()
    batch.release()
    assert sum(len(v) for v in collate.pool._free.values()) == 2  # images and labels, once each
    a, b = collate([(torch.zeros(1, 2, 2, dtype=torch.uint8), 1)] * 2), collate([(torch.ones(1, 2, 2, dtype=torch.uint8), 2)] * 2)
    assert a.data[0].data_ptr() != b.data[0].data_ptr()


def test_the_loader_releases_a_batch_the_consumer_kept():
    loader = iter(fastprep.Loader([(torch.zeros(1, 2, 2, dtype=torch.uint8), 1)] * 4, 2, threads=1, seed=0))
    first = next(loader)
    next(loader)
    with pytest.raises(RuntimeError, match="was released"):
        first.expand()


@pytest.mark.parametrize("sampler,match", [([0, 1.5], "the sampler gave 1.5; expected int indices"),
                                           ([0, True], "the sampler gave True"),
                                           ([0, -1], r"index -1, outside the dataset's \[0, 4\)"),
                                           ([4], r"index 4, outside the dataset's \[0, 4\)")])
def test_loader_sampler_indices_are_ints_of_the_dataset(sampler, match):
    with pytest.raises(ValueError, match=match):
        list(fastprep.Loader([(torch.zeros(1), 1)] * 4, 2, sampler=sampler, seed=0))
    got = list(fastprep.Loader([(torch.zeros(1), k) for k in range(4)], 2, sampler=[np.int64(3), torch.tensor(1)],
                               seed=0, expand=True))
    assert got[0][1].tolist() == [3, 1]
