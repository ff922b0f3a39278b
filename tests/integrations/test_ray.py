"""fastprep on Ray Data: a local Ray instance (2 CPUs, loopback only) gives the samples the
in-process DataLoader gives for the same seeds, however Ray splits the blocks."""

import json

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
from fastprep import transforms as T
from fastprep.tools.bench._pipelines import SyntheticImages

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'fastprep[ray]')")
fray = pytest.importorskip("fastprep.ray")
from fastprep.tools.bench._ray_synthetic import SyntheticSource, synthetic_images  # noqa: E402 (needs ray)

N, SIZE, CROP, SEED = 40, 48, 24, 7

# Ray Data warns about its own deprecated settings when it builds its default context.
# slow: each module run starts a Ray cluster; .ci/slow runs it, the README's test command does not.
pytestmark = [pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning:ray"), pytest.mark.one_backend,
              pytest.mark.slow]


def _transform():
    return T.Compose([T.RandomCrop(CROP, layout="HWC"), T.RandomDilatedMask(0.25, layout="HWC"),
                      T.RGBToYCbCr(layout="HWC")])


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 2**20,
             runtime_env={"env_vars": {"FASTPREP_BACKEND": fastprep.backend()}})
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def _by_id(batches, image="image"):
    out = {}
    for batch in batches:
        images, ids, labels = batch.data[image], batch.data["id"], batch.data["label"]
        for j, i in enumerate(ids.tolist()):
            out[i] = (images[j].clone(), int(labels[j]))
    return out


def _in_process():
    dataset = T.SeedByIndex(SyntheticImages(N, _transform(), pool=4, size=SIZE), seed=SEED)
    loader = DataLoader(dataset, batch_size=16, collate_fn=fastprep.compact_collate)
    out = {}
    for start, batch in zip(range(0, N, 16), loader):
        images, labels = batch.data
        for j in range(len(labels)):
            out[start + j] = (images[j], int(labels[j]))
    return out


@pytest.mark.parametrize("blocks,map_batch,decoded", [(None, 7, True), (5, 3, False), (1, None, True)])
def test_ray_gives_the_in_process_samples_however_blocks_split(local_ray, blocks, map_batch, decoded):
    ds = synthetic_images(N, pool=4, size=SIZE, decoded=decoded)
    if blocks:
        ds = ds.repartition(blocks)
    load = None if decoded else SyntheticSource(pool=4, size=SIZE)
    ds = ds.map_batches(fray.CompactMap(_transform(), seed=SEED, num_classes=1000, load=load),
                        batch_format="numpy", batch_size=map_batch)
    got = _by_id(fray.iter_compact_batches(ds, batch_size=16))
    want = _in_process()
    assert sorted(got) == list(range(N))
    for i in range(N):
        assert torch.equal(got[i][0], want[i][0]), f"row {i}"
        assert got[i][1] == want[i][1]
    assert len({bytes(v[0].numpy()) for v in got.values()}) == N  # per-row seeds, not one


def test_compact_columns_and_device_expand(local_ray):
    def crop_and_mask(image):
        crop = T.RandomCrop(CROP, layout="HWC")(image)
        return {"image": crop, "mask": crop[0] > 127}

    ds = synthetic_images(12, pool=2, size=SIZE).map_batches(
        fray.CompactMap(crop_and_mask, seed=1, num_classes=1000), batch_format="numpy")
    batches = list(fastprep.DevicePrefetcher(fray.iter_compact_batches(ds, batch_size=4), "cpu"))
    assert len(batches) == 3
    batch = batches[0]
    assert batch.data["image"].dtype == torch.uint8 and batch.data["image"].shape == (4, 3, CROP, CROP)
    assert batch.data["mask"].shape == (4, CROP, CROP // 8)  # bits, 8x fewer bytes
    assert batch.data["label"].dtype == torch.int16  # 1000 classes
    expanded = batch.expand()
    assert torch.equal(expanded["mask"], batch.data["image"][:, 0] > 127)
    assert expanded["image"].dtype == torch.float32 and expanded["label"].dtype == torch.int64
    assert batch.nbytes < batch.nbytes_expanded / 3


def test_iter_torch_batches_with_the_collate_fn(local_ray):
    pytest.importorskip("ray.train", reason="iter_torch_batches needs Ray Train")
    ds = synthetic_images(8, pool=4, size=SIZE).map_batches(
        fray.CompactMap(_transform(), seed=SEED, num_classes=1000), batch_format="numpy")
    batches = list(ds.iter_torch_batches(batch_size=4, collate_fn=fray.CompactCollateFn()))
    assert [type(b) for b in batches] == [fastprep.CompactBatch] * 2
    got = _by_id(batches)
    want = _in_process()
    assert all(torch.equal(got[i][0], want[i][0]) for i in range(8))


# The batch function itself, without a cluster: what Ray would call in a worker.

def _batch(n=3, keys=None):
    return {"id": np.asarray(keys if keys is not None else np.arange(n)),
            "image": np.zeros((n, SIZE, SIZE, 3), np.uint8), "label": np.arange(n) * 400}


def test_string_keys_seed_by_a_stable_hash():
    keys = np.array(["a/1.jpg", "a/2.jpg", "b/1.jpg"])
    fn = fray.CompactMap(lambda im: torch.randint(0, 256, (4,), dtype=torch.uint8), seed=3)
    first, again = fn(_batch(keys=keys)), fn(_batch(keys=keys[::-1].copy()))
    assert np.array_equal(first["image"], again["image"][::-1])
    assert fastprep.core._rng.item_seed(3, "a/1.jpg") == fastprep.core._rng.item_seed(3, b"a/1.jpg")


@pytest.mark.parametrize("kwargs,batch,match", [
    ({}, {"image": np.zeros((1, 2, 2, 3), np.uint8)}, r"no column 'id' \(columns: \['image'\]\)"),
    ({"image_column": "img"}, None, "no column 'img'"),
    ({"label_dtype": torch.int8}, None, r"label 400 of row 1 does not fit label_dtype=torch.int8"),
    ({"num_classes": 2}, None, r"label 400 of row 1 is not a class index for num_classes=2 \(expected 0 <= label < 2\)"),
    ({"num_classes": 400}, None, r"label 400 of row 1 is not a class index for num_classes=400"),
    ({"num_classes": 10}, {"id": np.arange(2), "image": np.zeros((2, 2, 2, 3), np.uint8), "label": np.array([3, -1])},
     r"label -1 of row 1 is not a class index for num_classes=10 \(expected 0 <= label < 10\)"),
    ({"num_classes": 10}, {"id": np.arange(1), "image": np.zeros((1, 2, 2, 3), np.uint8), "label": np.array([10])},
     r"label 10 of row 0 is not a class index for num_classes=10"),
    ({}, {**_batch(), "__fastprep_roles__": np.array(["x"] * 3)}, "already has a column '__fastprep_roles__'"),
    ({"fields": {"imgs": "image"}}, None, r"fields names \['imgs'\], which neither the transform's outputs"),
])
def test_bad_batches_name_the_column_or_row(kwargs, batch, match):
    fn = fray.CompactMap(lambda im: torch.from_numpy(np.ascontiguousarray(im)), seed=0, **kwargs)
    with pytest.raises(ValueError, match=match):
        fn(_batch() if batch is None else batch)


def test_bad_transform_outputs_and_arguments():
    with pytest.raises(TypeError, match="transform must return a tensor or a dict of tensors, got list for row 0"):
        fray.CompactMap(lambda im: [1], seed=0)(_batch())
    sizes = iter([4, 4, 5])
    with pytest.raises(ValueError, match=r"output 'image' of row 2 is \(\(5,\), torch.uint8\)"):
        fray.CompactMap(lambda im: torch.zeros(next(sizes), dtype=torch.uint8), seed=0)(_batch())
    with pytest.raises(ValueError, match="num_classes to be an int >= 1, got 0"):
        fray.CompactMap(lambda im: im, num_classes=0)
    with pytest.raises(ValueError, match="label_dtype to be one of"):
        fray.CompactMap(lambda im: im, label_dtype=torch.float32)
    with pytest.raises(TypeError, match="expected transform to be callable"):
        fray.CompactMap("crop")
    with pytest.raises(TypeError, match="expected load to be callable or None, got 'decode'"):
        fray.CompactMap(lambda im: im, load="decode")
    with pytest.raises(ValueError, match="num_classes to be an int >= 1, got True"):
        fray.CompactMap(lambda im: im, num_classes=True)
    with pytest.raises(TypeError, match=r"CompactMap: expected seed to be an int, got float \(1.5\)"):
        fray.CompactMap(lambda im: im, seed=1.5)
    with pytest.raises(ValueError, match="CompactMap: expected epoch to be an int >= 0, got -1"):
        fray.CompactMap(lambda im: im, seed=0, epoch=-1)
    with pytest.raises(ValueError, match=r"fields\['mask'\] is 'bits'; expected one of"):
        fray.CompactMap(lambda im: im, seed=0, fields={"mask": "bits"})
    with pytest.raises(ValueError, match="expected key_column to be a column name"):
        fray.CompactMap(lambda im: im, seed=0, key_column="__fastprep_roles__")
    clash = fray.CompactMap(lambda im: {"label": torch.zeros(2)}, seed=0)
    with pytest.raises(ValueError, match="the transform's output 'label' would overwrite the input column 'label'"):
        clash(_batch())
    with pytest.raises(ValueError, match="output 'x' of row 0 the role 'mask', which needs a bool"):
        fray.CompactMap(lambda im: {"x": torch.zeros(2)}, seed=0, fields={"x": "mask"})(_batch())


def _roles_through_map(fn, batch, **kwargs):
    """What the trainer gets: CompactMap's output (as Ray would ship it) through to_compact_batch."""
    return fray.to_compact_batch(fray.CompactMap(fn, seed=0, **kwargs)(batch))


def test_user_columns_are_never_read_as_mask_metadata():
    """A column named like old metadata (image_width) is the user's: the image stays an image."""
    image = lambda im: torch.from_numpy(np.ascontiguousarray(im[:4, :4])).permute(2, 0, 1)  # noqa: E731
    batch = {**_batch(), "image_width": np.full(3, 4, np.int32), "mask_width": np.full(3, 9, np.int64)}
    got = _roles_through_map(image, batch)
    assert got.roles == {"id": "label", "label": "label", "image_width": "label", "mask_width": "label",
                         "image": "image"}
    assert got.data["image"].dtype == torch.uint8 and got.expand()["image"].dtype == torch.float32
    assert torch.equal(got.data["image_width"], torch.full((3,), 4, dtype=torch.int32))


def test_roles_travel_in_the_reserved_column_and_expand_by_role():
    def outputs(im):
        crop = torch.from_numpy(np.ascontiguousarray(im[:4, :6])).permute(2, 0, 1)
        return {"image": crop, "mask": crop[0] > 127, "tok": torch.tensor([1, 2, 255], dtype=torch.uint8),
                "grid": crop[:2] > 3}
    mapped = fray.CompactMap(outputs, seed=0, num_classes=1000, fields={"grid": "mask"})(_batch())
    assert set(mapped["__fastprep_roles__"].tolist()) == {mapped["__fastprep_roles__"][0]}  # one per row, equal
    batch = fray.to_compact_batch(mapped)
    assert batch.roles == {"id": "label", "label": "label", "image": "image", "mask": "mask", "tok": "tensor",
                           "grid": "mask"}
    expanded = batch.expand()
    assert expanded["tok"].dtype == torch.uint8 and expanded["tok"][0].tolist() == [1, 2, 255]  # never rescaled
    assert expanded["mask"].shape == (3, 4, 6) and expanded["grid"].shape == (3, 2, 4, 6)
    assert torch.equal(expanded["grid"], batch.data["image"][:, :2] > 3)


def test_to_compact_batch_without_records_uses_the_rules_or_fields():
    batch = {"tok": np.array([[1, 2, 255]] * 2, np.uint8), "img": np.zeros((2, 3, 4, 4), np.uint8),
             "path": np.array(["a", "b"]), "y": np.array([1, 2])}
    got = fray.to_compact_batch(batch)
    assert got.roles == {"tok": "tensor", "img": "image", "path": "other", "y": "label"}
    assert got.expand()["tok"].dtype == torch.uint8 and got.data["path"] == ["a", "b"]
    assert fray.to_compact_batch(batch, fields={"img": "tensor"}).roles["img"] == "tensor"
    with pytest.raises(ValueError, match=r"fields names \['image'\], which the batch does not have"):
        fray.to_compact_batch(batch, fields={"image": "image"})
    with pytest.raises(ValueError, match="fields gives column 'path' the role 'image', but it holds"):
        fray.to_compact_batch(batch, fields={"path": "image"})
    mixed = {"x": np.zeros((2, 3), np.uint8), "__fastprep_roles__": np.array(['{"x":["tensor",0,false]}',
                                                                              '{"x":["mask",3,true]}'])}
    with pytest.raises(ValueError, match="the rows of this batch record different roles"):
        fray.to_compact_batch(mixed)
    with pytest.raises(ValueError, match="is reserved for the roles CompactMap records"):
        fray.to_compact_batch({"x": np.zeros(2), "__fastprep_roles__": np.array(["not json"] * 2)})


def test_bench_ray_row(local_ray, tmp_path, capsys):
    from fastprep.tools.cli._commands import main
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--batch-size", "4", "--workers", "0", "--seconds", "0", "--ray", "--json",
                 str(path)]) == 0
    result = json.loads(path.read_text())
    ray_row = result["ray"]
    assert ray_row["samples_per_s"] > 0 and ray_row["variant"] == result["variants"][1]["name"]
    assert ray.is_initialized()  # it used the running instance and left it running
    assert "via Ray Data" in capsys.readouterr().out


class _Jpegs(torch.utils.data.Dataset):
    """N small photos-like JPEGs (random content is enough: the bits are compared, not judged)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        from helpers.jpeg_photos import encode
        rng = np.random.default_rng(i)
        return encode(rng.integers(0, 256, (SIZE + 8 * (i % 3), SIZE, 3), dtype=np.uint8)), i % 5


@pytest.mark.parametrize("mode", ["jpeg", "raw"])
def test_packed_shards_through_ray_give_the_in_process_samples(local_ray, tmp_path, mode):
    """read_packed + CompactMap(load=PackedImages): each data server reads its rows' windows from the
    shards; the samples equal SeedByIndex + DataLoader over the same PackedDataset, bit for bit."""
    import fastprep.io as fio

    path = tmp_path / "packed"
    fio.pack(_Jpegs(), path, mode=mode, progress=False)
    tf = T.seed_workload(CROP)
    ds = fray.read_packed(path, override_num_blocks=3).map_batches(
        fray.CompactMap(tf, seed=SEED, num_classes=5, load=fray.PackedImages(path)), batch_format="numpy",
        batch_size=5)
    got = _by_id(fray.iter_compact_batches(ds, batch_size=4))
    want = list(DataLoader(T.SeedByIndex(fio.PackedDataset(path, transform=tf), seed=SEED), batch_size=12,
                           collate_fn=fastprep.compact_collate))[0].data
    assert sorted(got) == list(range(12))
    for i in range(12):
        assert torch.equal(got[i][0], want[0][i]) and got[i][1] == int(want[1][i]), f"record {i}"
