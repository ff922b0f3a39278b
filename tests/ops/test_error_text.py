"""Errors users read are the same text on both backends, for every op of the registry: dtypes
named as torch names them (torch.complex64, not ComplexFloat), None for a tensor argument named,
str values quoted with escapes (an embedded NUL cut the native message), and one int64 seed check
behind every op wrapper."""

import re
import warnings

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map_only

import fastprep
from fastprep.ops._checks import check_seed, quoted
from fastprep.ops._registry import OPS

from helpers.op_calls import OpCall

pytestmark = pytest.mark.op_layer


def _dtypes():
    """Every dtype torch can make a CPU tensor of (quantized ones dispatch elsewhere)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        for d in dict.fromkeys(v for v in vars(torch).values() if isinstance(v, torch.dtype)):
            try:
                if not torch.empty(2, dtype=d).is_quantized:  # quantized ones dispatch elsewhere
                    out.append(d)
            except (RuntimeError, TypeError):
                continue
    return out


def _schema(name):
    return getattr(torch.ops.fastprep, name).default._schema


def _first_tensor_arg(row):
    for i, arg in enumerate(_schema(row.name).arguments):
        if str(arg.real_type) == "Tensor":
            return i
    return None


class RawCall(OpCall):
    """An OpCall through torch.ops.fastprep (the schema's positional arguments), not the wrapper."""

    def __call__(self):
        return getattr(torch.ops.fastprep, self.op)(*self.args)

    def fake(self):
        mode = FakeTensorMode()
        args = tree_map_only(torch.Tensor, mode.from_tensor, self.args)
        with mode:
            return getattr(torch.ops.fastprep, self.op)(*args)


def _same_error(case: RawCall, match: str | None = None):
    """The op (active backend), its Numba kernel and its fake kernel raise one RuntimeError text."""
    texts = []
    for run in (case, case.numba, case.fake):
        with pytest.raises(RuntimeError) as info:
            run()
        texts.append(str(info.value))
    assert texts[0] == texts[1] == texts[2], texts
    if match is not None:
        assert match in texts[0], texts[0]
    return texts[0]


TENSOR_OPS = [row for row in OPS if _first_tensor_arg(row) is not None]


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.slow  # every dtype x every op, each taken dtype a Numba compile: .ci/slow
@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
@pytest.mark.parametrize("row", TENSOR_OPS, ids=lambda r: r.name)
def test_every_dtype_is_named_as_torch_names_it(row, dtype):
    args = list(row.sample())
    i = _first_tensor_arg(row)
    # A table of values (resized_crop_batch's int64 geometry) keeps its values in the dtype it takes:
    # the fake kernel cannot see them, the op refuses rows of uninitialised memory.
    table = _schema(row.name).arguments[i].name == "geometry" and dtype == args[i].dtype
    args[i] = args[i] if table else torch.empty(args[i].shape, dtype=dtype)
    case = RawCall(row.name, tuple(args), {})
    try:
        case.fake()
    except RuntimeError:
        text = _same_error(case)
        assert not re.search(r"got [A-Z]", text), text  # c10's names (ComplexFloat) never
        if f"expected {_schema(row.name).arguments[i].name} to be" in text:
            assert text.endswith(f"got {dtype}"), text
    else:  # a dtype the op takes: both backends take it
        case()
        case.numba()


# torch itself cannot hand a stable-ABI kernel a dtype argument of the quantized, bits and
# sub-byte kinds ("Not yet supported ScalarType"): for those only the wrappers name them.
OUT_DTYPES_BOTH = [torch.complex64, torch.complex32, torch.uint16, torch.uint64, torch.float8_e4m3fn,
                   torch.float8_e8m0fnu, torch.int64, torch.float64, torch.bool]
OUT_DTYPES_WRAPPER = OUT_DTYPES_BOTH + [torch.bits8, torch.quint8, torch.uint3, torch.int4]


@pytest.mark.parametrize("dtype", OUT_DTYPES_BOTH, ids=str)
@pytest.mark.parametrize("op", ["rgb_to_ycbcr", "ycbcr_to_rgb"])
def test_every_out_dtype_is_named_as_torch_names_it(op, dtype):
    img = torch.zeros(3, 4, 4)
    _same_error(RawCall(op, (img, "CHW", dtype, 1.0), {}), f"got {dtype}")
    _same_error(RawCall("crop_mask_ycbcr", (torch.zeros(8, 8, 3, dtype=torch.uint8), 4, 4, 0.5, 1, "HWC", "cross",
                                           dtype, 1.0, True, False, None), {}), f"got {dtype}")


@pytest.mark.parametrize("dtype", OUT_DTYPES_WRAPPER, ids=str)
def test_the_wrappers_name_every_out_dtype(dtype):
    img, hwc = torch.zeros(3, 4, 4), torch.zeros(8, 8, 3, dtype=torch.uint8)
    for name, call in [("rgb_to_ycbcr", lambda: fastprep.rgb_to_ycbcr(img, out_dtype=dtype)),
                       ("ycbcr_to_rgb", lambda: fastprep.ycbcr_to_rgb(img, out_dtype=dtype)),
                       ("crop_mask_ycbcr", lambda: fastprep.crop_mask_ycbcr(hwc, 4, 4, 0.5, 1, out_dtype=dtype))]:
        with pytest.raises(RuntimeError, match=rf"^{name}: expected out_dtype to be torch.uint8, torch.float32, "
                                               rf"torch.float16 or torch.bfloat16, got {dtype}$"):
            call()


def _tensor_args(row):
    """Indices of the (non-optional) tensor arguments, and of tensors inside tensor lists."""
    for i, arg in enumerate(_schema(row.name).arguments):
        kind = str(arg.real_type)
        if kind == "Tensor":
            yield i, None
        elif kind == "List[Tensor]":
            yield i, 1


@pytest.mark.parametrize("row,slot", [(row, slot) for row in OPS for slot in _tensor_args(row)],
                         ids=lambda v: v.name if hasattr(v, "name") else str(v))
def test_none_for_a_tensor_is_named(row, slot):
    i, k = slot
    args = list(row.sample())
    name = _schema(row.name).arguments[i].name
    if k is None:
        args[i] = None
        want = f"{row.name}: expected {name} to be a tensor, got None"
        _same_error(RawCall(row.name, tuple(args), {}), want)
    else:  # torch refuses None inside a Tensor[] itself, the same way on both backends
        args[i] = list(args[i])
        args[i][k] = None
        with pytest.raises(RuntimeError, match=name):
            getattr(torch.ops.fastprep, row.name)(*args)


def _str_args(row):
    return [i for i, arg in enumerate(_schema(row.name).arguments) if str(arg.real_type) == "str"]


WEIRD_STRINGS = ["CHW\x00HWC", "cross\x00", "\x00", "it's", "tab\there", "new\nline", "back\\slash", "é", "\x7f"]


@pytest.mark.parametrize("value", WEIRD_STRINGS, ids=repr)
@pytest.mark.parametrize("row,i", [(row, i) for row in OPS for i in _str_args(row)],
                         ids=lambda v: v.name if hasattr(v, "name") else str(v))
def test_str_values_are_quoted_whole(row, i, value):
    args = list(row.sample())
    args[i] = value
    name = _schema(row.name).arguments[i].name
    text = _same_error(RawCall(row.name, tuple(args), {}), f"expected {name} to be ")
    assert text.endswith(f", got {quoted(value)}") and "\x00" not in text


def test_quoted_is_repr_for_ascii_text():
    for s in ["CHW", "a\x00b", "tab\t", "x\\y", "\x01\x7f", ""]:
        assert quoted(s) == repr(s)
    assert quoted("it's") == "'it\\'s'" and quoted("é") == "'\\xc3\\xa9'"


# One seed check: what the seed helpers take (fastprep.core._rng) and the ops' wrappers take alike.
GOOD_SEEDS = [0, 1, -1, np.int64(5), np.int32(-3), np.uint8(7), np.uint64(2**63 - 1), 2**63 - 1, -2**63]
BAD_SEEDS = [(True, TypeError, r"got bool \(True\)"), (np.True_, TypeError, "got bool"),
             (1.5, TypeError, r"got float \(1.5\)"), (1.0, TypeError, r"got float \(1.0\)"),
             (torch.tensor(1), TypeError, "got Tensor"), ("1", TypeError, "got str"),
             (None, TypeError, "got NoneType"), (np.uint64(2**63), ValueError, "fit in int64, got 9223372036854775808"),
             (2**63, ValueError, "fit in int64"), (-2**63 - 1, ValueError, "fit in int64")]


def _seed_takers(seed):
    img = torch.zeros(3, 8, 8, dtype=torch.uint8)
    hwc = torch.zeros(8, 8, 3, dtype=torch.uint8)
    out = torch.empty(1, 3, 4, 4, dtype=torch.uint8)
    return {
        "random_crop": lambda: fastprep.random_crop(img, 4, 4, seed),
        "random_crop_params": lambda: fastprep.random_crop_params(8, 8, 4, 4, seed),
        "random_mask": lambda: fastprep.random_mask([4, 4], 0.5, seed),
        "random_dilated_mask": lambda: fastprep.random_dilated_mask([4, 4], 0.5, seed),
        "crop_mask_ycbcr": lambda: fastprep.crop_mask_ycbcr(hwc, 4, 4, 0.5, seed),
        "crop_mask_ycbcr mask_seed": lambda: fastprep.crop_mask_ycbcr(hwc, 4, 4, 0.5, 0, mask_seed=seed),
        "crop_mask_ycbcr_batch mask_seeds": lambda: fastprep.crop_mask_ycbcr_batch([hwc], [0], [0], 4, 4, 0.5, [seed],
                                                                                     out),
    }


@pytest.mark.parametrize("seed", GOOD_SEEDS, ids=repr)
def test_op_wrappers_take_python_and_numpy_int64_seeds(seed):
    assert check_seed("seed", seed) == int(seed) and type(check_seed("seed", seed)) is int
    for use in _seed_takers(seed).values():
        use()
    assert torch.equal(fastprep.random_mask([9, 9], 0.5, seed), fastprep.random_mask([9, 9], 0.5, int(seed)))


@pytest.mark.parametrize("seed,exc,match", BAD_SEEDS, ids=lambda v: repr(v)[:24])
def test_op_wrappers_refuse_what_is_not_an_int64(seed, exc, match):
    with pytest.raises(exc, match=match):
        check_seed("seed", seed)
    for name, use in _seed_takers(seed).items():
        if seed is None and "mask_seed" in name:
            continue  # an absent mask seed: derived from the seed
        op = name.split()[0]
        with pytest.raises(exc, match=rf"^{op}: expected (mask_)?seeds?(\[0\])? to .*{match}"):
            use()


# Int arguments: torch's own parsing takes True and 0-d tensors as ints (for aten's ops too); the
# fastprep.* functions refuse them, naming the argument.
BAD_INTS = [(True, r"got bool \(True\)"), (np.True_, "got bool"), (1.0, r"got float \(1.0\)"),
            (torch.tensor(2), "got Tensor"), ("2", "got str"), (None, "got NoneType")]


def _int_takers(v):
    img, hwc = torch.zeros(3, 8, 8, dtype=torch.uint8), torch.zeros(8, 8, 3, dtype=torch.uint8)
    mask, packed = torch.zeros(8, 8, dtype=torch.bool), torch.zeros(8, 1, dtype=torch.uint8)
    out = torch.empty(1, 3, 2, 2, dtype=torch.uint8)
    return {
        "crop top": lambda: fastprep.crop(img, v, 0, 2, 2), "crop width": lambda: fastprep.crop(img, 0, 0, 2, v),
        "random_crop height": lambda: fastprep.random_crop(img, v, 2, 0),
        "random_mask shape": lambda: fastprep.random_mask([4, v], 0.5, 0),
        "random_dilated_mask iterations": lambda: fastprep.random_dilated_mask([4, 4], 0.5, 0, iterations=v),
        "dilate iterations": lambda: fastprep.dilate(mask, "cross", v),
        "dilate_packed width": lambda: fastprep.dilate_packed(packed, v),
        "pack_bits dim": lambda: fastprep.pack_bits(mask[None], v),
        "unpack_bits count": lambda: fastprep.unpack_bits(packed, v),
        "crop_mask_ycbcr height": lambda: fastprep.crop_mask_ycbcr(hwc, v, 2, 0.5, 0),
        "crop_mask_ycbcr_batch height": lambda: fastprep.crop_mask_ycbcr_batch([hwc], [0], [0], v, 2, 0.5, [0], out),
        "resized_crop out_width": lambda: fastprep.resized_crop(img, 0, 0, 4, 4, 2, v),
        "seeded_draws count": lambda: fastprep.seeded_draws(torch.tensor([1]), v),
    }


@pytest.mark.parametrize("value,match", BAD_INTS, ids=lambda v: repr(v)[:24])
def test_op_wrappers_refuse_what_is_not_an_int(value, match):
    for name, use in _int_takers(value).items():
        op, arg = name.split()
        with pytest.raises(TypeError, match=rf"^{op}: expected {arg} to be an int, {match}"):
            use()


def _equal(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return torch.equal(a, b)


def test_op_wrappers_take_numpy_ints():
    ints = _int_takers(2)  # 2: a valid value for every argument above
    for name, use in _int_takers(np.int64(2)).items():
        assert _equal(use(), ints[name]()), name  # the numpy int means what the int means


def test_every_op_with_int_arguments_has_its_wrapper_check_them():
    with_ints = {row.name for row in OPS if any(str(a.real_type) in ("int", "int[]") and "seed" not in a.name
                                                 for a in _schema(row.name).arguments)}
    assert with_ints <= {name.split()[0] for name in _int_takers(2)}


def test_every_random_op_has_its_wrapper_check_seeds():
    """Each op with an int seed argument appears in _seed_takers (so the table above covers them);
    a tensor of seeds (seeded_draws) is checked by dtype in its op's bad-input table."""
    seeded = {row.name for row in OPS
              if any("seed" in a.name and "Tensor" not in str(a.type) for a in _schema(row.name).arguments)}
    assert seeded <= {name.split()[0] for name in _seed_takers(0)}
    leaves, _ = tree_flatten([row.sample() for row in OPS])  # the registry builds its samples
    assert leaves
