"""Field roles: CompactCollate and fastprep.Loader decide every field's role by one set of rules
(fastprep/core/_roles.py) or a `fields=` spec, never by dtype alone, record it, and expand by it."""

import sys
import types
from collections import namedtuple

import numpy as np
import pytest
import torch

import fastprep
from fastprep import CompactCollate, compact_collate

pytestmark = pytest.mark.one_backend

Item = namedtuple("Item", "image tokens label")


def _roles(value):
    return compact_collate([(value,), (value,)]).roles[0]


@pytest.mark.parametrize("value,role", [
    (torch.zeros(3, 4, 5, dtype=torch.uint8), "image"),
    (torch.zeros(1, 4, 5, dtype=torch.uint8), "image"),
    (torch.zeros(4, 4, 5, dtype=torch.uint8), "image"),
    (torch.zeros(2, 4, 5, dtype=torch.uint8), "tensor"),      # 2 channels: not an image by the rules
    (np.zeros((8, 8, 3), np.uint8), "tensor"),                # HWC: dim 0 is not a channel count
    (torch.tensor([1, 2, 255], dtype=torch.uint8), "tensor"),  # the token list
    (torch.zeros(4, 5, dtype=torch.uint8), "tensor"),
    (torch.zeros(4, 5, dtype=torch.bool), "mask"),
    (torch.zeros(1, 4, 5, dtype=torch.bool), "mask"),
    (torch.zeros(2, 4, 5, dtype=torch.bool), "tensor"),
    (torch.zeros(7, dtype=torch.bool), "tensor"),
    (torch.zeros(3, 4, 5), "tensor"),
    (torch.tensor(3), "label"), (np.int64(3), "label"), (3, "label"), (np.array(3, np.int16), "label"),
    (torch.tensor(True), "tensor"), (torch.tensor(0.5), "tensor"), (True, "other"), (0.5, "other"),
    ("cat", "other"),
])
def test_roles_follow_the_documented_rules(value, role):
    assert _roles(value) == role


def test_a_uint8_tensor_that_is_not_an_image_expands_bit_for_bit():
    batch = compact_collate([{"tok": torch.tensor([1, 2, 255], dtype=torch.uint8)}] * 2)
    expanded = batch.expand()["tok"]
    assert batch.roles == {"tok": "tensor"} and expanded.dtype == torch.uint8
    assert expanded.tolist() == [[1, 2, 255]] * 2
    assert batch.nbytes_expanded == batch.nbytes == 6


def test_tensor_fields_keep_their_dtype_unless_narrowed():
    samples = [(torch.rand(2, dtype=torch.float64),) for _ in range(2)]
    assert compact_collate(samples).expand()[0].dtype == torch.float64  # not cast to expand's dtype
    narrowed = CompactCollate(float_dtype=torch.bfloat16)(samples)
    assert narrowed.spec[0].dtype == torch.float64 and narrowed.expand()[0].dtype == torch.float32
    assert narrowed.nbytes_expanded == 2 * 2 * 8


def test_fields_spec_overrides_the_rules_by_name_or_position():
    img, tok = torch.full((3, 2, 2), 255, dtype=torch.uint8), torch.zeros(3, 2, 2, dtype=torch.uint8)
    dicts = CompactCollate(fields={"tok": "tensor", "m": "mask"})(
        [{"img": img, "tok": tok, "m": torch.ones(2, 3, 9, dtype=torch.bool)}] * 2)
    assert dicts.roles == {"img": "image", "tok": "tensor", "m": "mask"}
    assert dicts.data["m"].shape == (2, 2, 3, 2) and dicts.expand()["m"].all()
    assert dicts.expand()["tok"].dtype == torch.uint8 and dicts.expand()["img"].max() == 1.0
    named = CompactCollate(fields={"tokens": "tensor"})([Item(img, tok, 1)] * 2)
    assert named.roles == Item("image", "tensor", "label")
    by_position = CompactCollate(fields={0: "tensor", 2: "tensor"})([(img, 1, 7)] * 2)
    assert by_position.roles == ("tensor", "label", "tensor")
    assert by_position.data[2].dtype == torch.int64  # a 'tensor' int is not narrowed
    unpacked = CompactCollate(pack_masks=False)([(torch.ones(2, 9, dtype=torch.bool),)] * 2)
    assert unpacked.roles == ("mask",) and unpacked.data[0].dtype == torch.bool and unpacked.expand()[0].all()


@pytest.mark.parametrize("fields,samples,match", [
    ({"imgs": "image"}, [{"img": torch.zeros(1)}], r"fields names \['imgs'\], which the samples do not have "
                                                   r"\(their fields: \['img'\]\)"),
    ({5: "label"}, [(1, 2)], r"fields names \[5\], which the samples do not have"),
    ({"x": "image"}, [(1, 2)], r"fields names \['x'\], which the samples do not have"),
    ({"x": "label"}, [torch.zeros(2)], "a sample is a Tensor, which has no named fields"),
    ({"img": "image"}, [{"img": torch.zeros(3, 2, 2)}], r"fields gives sample\['img'\] of sample 0 the role "
                                                        r"'image', which needs a uint8 \[C, H, W\]"),
    ({"m": "mask"}, [{"m": torch.zeros(2, 2, dtype=torch.uint8)}], "role 'mask', which needs a bool"),
    ({"y": "label"}, [{"y": torch.zeros(2, dtype=torch.int64)}], "role 'label', which needs an int"),
    ({"s": "tensor"}, [{"s": "cat"}], "role 'tensor', which needs a tensor, an array or a number"),
    ({"pair": "tensor"}, [{"pair": (1, 2)}], r"role 'tensor', but it is a tuple of fields"),
])
def test_bad_fields_specs_name_the_field(fields, samples, match):
    with pytest.raises(ValueError, match=match):
        CompactCollate(fields=fields)(samples * 2)


@pytest.mark.parametrize("fields,match", [
    ({"img": "picture"}, r"fields\['img'\] is 'picture'; expected one of \['image', 'mask', 'label', 'tensor', 'boxes'\]"),
    ({"img": "other"}, r"fields\['img'\] is 'other'"),
    ({1.5: "image"}, "field names in fields to be str .* got 1.5"),
    ([("img", "image")], r"expected fields to be a dict \{name: role\} or None"),
])
def test_unknown_roles_fail_when_made(fields, match):
    with pytest.raises(ValueError, match=match):
        CompactCollate(fields=fields)
    with pytest.raises(ValueError, match=match):
        fastprep.Loader([], 1, fields=fields)


@pytest.mark.parametrize("samples,match", [
    ([{"image": 1, "label": 2}, {"image": 1, "lbl": 2}],
     r"CompactCollate: sample 1 lacks key\(s\) \['label'\] and has extra key\(s\) \['lbl'\] "
     r"\(sample 0's keys: \['image', 'label'\]\)"),
    ([{"a": 1}, {"a": 1}, {"a": 1, "b": 2}], r"sample 2 has extra key\(s\) \['b'\]"),
    ([{"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}], r"sample\['a'\] of sample 1 lacks key\(s\) \['y'\]"),
    ([[1, (2, 3)], [1, (2,)]], r"sample\[1\] of sample 1 has 1 fields, sample 0's has 2"),
])
def test_samples_with_other_keys_name_the_keys_and_the_sample(samples, match):
    with pytest.raises(ValueError, match=match):
        compact_collate(samples)


def test_keys_in_another_order_are_the_same_fields():
    a = [{"x": torch.zeros(2), "y": 1}, {"y": 2, "x": torch.ones(2)}]
    batch = compact_collate(a)
    assert batch.data["y"].tolist() == [1, 2] and batch.data["x"][1].eq(1).all()


class _Dicts(torch.utils.data.Dataset):
    """Dict samples; item `odd` has its keys in reverse order, or other keys."""

    def __init__(self, odd=None, keys=None):
        self.odd, self.keys = odd, keys

    def __len__(self):
        return 8

    def __getitem__(self, i):
        sample = {"tok": torch.full((3, 2, 2), i, dtype=torch.uint8), "vec": torch.full((3,), float(i)), "y": i}
        if i == self.odd:
            sample = dict(reversed(list(sample.items())))
            if self.keys is not None:
                sample = {k: v for k, v in zip(self.keys, sample.values(), strict=True)}
        return sample


def test_loader_uses_the_same_roles_and_fields_as_compact_collate():
    ds = _Dicts(odd=5)
    for fields in (None, {"tok": "tensor"}):
        got = [b.clone() for b in fastprep.Loader(ds, 4, threads=2, seed=0, fields=fields)]
        want = [CompactCollate(fields=fields)([ds[i] for i in range(k, k + 4)]) for k in (0, 4)]
        for g, w in zip(got, want, strict=True):
            assert g.roles == w.roles and repr(g.spec) == repr(w.spec)
            for name in ("tok", "vec", "y"):  # item 5's keys in reverse order land in their own fields
                assert torch.equal(g.data[name], w.data[name])
            assert torch.equal(g.expand()["tok"], w.expand()["tok"])
    assert got[0].roles["tok"] == "tensor" and got[0].expand()["tok"].dtype == torch.uint8


def test_loader_names_a_sample_with_other_keys():
    with pytest.raises(ValueError, match=r"Loader: sample 5 lacks key\(s\) \['tok'\] and has extra key\(s\) "
                                         r"\['img'\] \(sample 0's keys"):
        list(fastprep.Loader(_Dicts(odd=5, keys=["y", "vec", "img"]), 4, threads=1, seed=0))


def test_loader_names_a_label_that_is_not_an_int():
    class Labels(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.zeros(2), (i if i != 2 else "two")

    with pytest.raises(ValueError, match="field 1 of sample 2 is str 'two', but it is a label in sample 0"):
        list(fastprep.Loader(Labels(), 4, threads=1, seed=0))
    with pytest.raises(ValueError, match=r"Loader: sample 0: .*fields names \['z'\]"):
        list(fastprep.Loader(Labels(), 4, threads=1, seed=0, fields={"z": "image"}))


def _tv_tensors():
    """torchvision.tv_tensors, or a stand-in with its class names where torchvision cannot load (this
    machine's CPU torch has no torchvision ops): the roles code looks the classes up by name."""
    try:
        from torchvision import tv_tensors
        return tv_tensors, False
    except Exception:  # noqa: BLE001 (ImportError, or a torchvision built against another torch)
        tv = types.ModuleType("torchvision.tv_tensors")
        tv.TVTensor = type("TVTensor", (torch.Tensor,), {})
        tv.Image = type("Image", (tv.TVTensor,), {})
        tv.Mask = type("Mask", (tv.TVTensor,), {})
        tv.BoundingBoxes = type("BoundingBoxes", (tv.TVTensor,), {})
        return tv, True


def test_torchvision_tv_tensors_decide_the_role(monkeypatch):
    tv, fake = _tv_tensors()
    if fake:
        monkeypatch.setitem(sys.modules, "torchvision.tv_tensors", tv)
    image = torch.zeros(2, 4, 4, dtype=torch.uint8).as_subclass(tv.Image)  # 2 channels, but an Image
    float_image = torch.zeros(3, 4, 4).as_subclass(tv.Image)
    class_mask = torch.zeros(3, 4, 4, dtype=torch.uint8).as_subclass(tv.Mask)  # class ids, not bits
    bool_mask = torch.zeros(2, 4, 9, dtype=torch.bool).as_subclass(tv.Mask)
    boxes = torch.zeros(3, 4, 4, dtype=torch.uint8).as_subclass(tv.BoundingBoxes)
    boxes2 = torch.zeros(5, 4, dtype=torch.uint8).as_subclass(tv.BoundingBoxes)  # another count
    batch = compact_collate([(image, float_image, class_mask, bool_mask, boxes),
                             (image, float_image, class_mask, bool_mask, boxes2)])
    assert batch.roles == ("image", "tensor", "tensor", "mask", "boxes")
    assert batch.data[3].shape == (2, 2, 4, 2)
    assert batch.data[4][0] is boxes and batch.data[4][1] is boxes2  # a list: counts differ
    expanded = batch.expand()
    assert expanded[2].dtype == torch.uint8 and expanded[0].dtype == torch.float32
    assert expanded[4] == [boxes, boxes2] or all(a is b for a, b in zip(expanded[4], [boxes, boxes2]))
    # The tv_tensors types come back on the stacked fields (when torchvision imports: here, the stand-in).
    assert type(expanded[0]) is tv.Image and type(expanded[2]) is tv.Mask and type(expanded[3]) is tv.Mask
    assert type(expanded[1]) is tv.Image and type(batch.data[0]) is torch.Tensor
