"""The op tests' table helpers: a call of an op with fixed arguments (OpCall: on the active backend,
on the Numba kernel, on fake tensors), the bad-input tests every op module runs over its table, and
the native backend's skip mark."""

from typing import NamedTuple

import pytest
import torch
from torch.utils._pytree import tree_map_only

import fastprep


def native_available() -> bool:
    try:
        from fastprep import _C  # noqa: F401
    except ImportError:
        return False
    return True


requires_native = pytest.mark.skipif(
    fastprep.backend() != "native", reason="needs the native backend (FASTPREP_BACKEND=native)")


class OpCall(NamedTuple):
    """A call of op `op` with fixed arguments, run through the public wrapper fastprep.<op>."""
    op: str
    args: tuple
    kwargs: dict

    def __call__(self):
        return getattr(fastprep, self.op)(*self.args, **self.kwargs)

    def numba(self):
        """The same call on the op's Numba kernel, whatever backend is active."""
        from fastprep import numba_kernels
        return numba_kernels.kernel(self.op)(*self.args, **self.kwargs)

    def fake(self):
        """The same call on fake tensors (the fake kernel: what torch.compile traces run)."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode()
        args, kwargs = tree_map_only(torch.Tensor, mode.from_tensor, (self.args, self.kwargs))
        with mode:
            return getattr(fastprep, self.op)(*args, **kwargs)

    def __repr__(self):  # the test id
        return f"{self.op}(...)"


def call(op: str, *args, **kwargs) -> OpCall:
    return OpCall(op, args, kwargs)


def bad_input_tests(cases, fake=True):
    """The tests every op module runs over its table of (call(op, *args), message regex): the op
    raises RuntimeError naming the argument and value on the active backend, the Numba kernel
    raises the same text (so both backends agree whichever runs the suite), and so does the fake
    kernel (so torch.compile traces report the same error). Use as
    ``test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)``.
    fake=False: the first two only, for errors only the values show (a table's rows: while tracing,
    the fake kernel sees shapes and dtypes, not values)."""
    ids = [f"{c.op}-{i}" for i, (c, _) in enumerate(cases)]

    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_raises_naming_argument_and_value(case, match):
        with pytest.raises(RuntimeError, match=match):
            case()

    @pytest.mark.one_backend  # calls the Numba kernel whatever the backend
    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_numba_kernel_gives_the_same_text(case, match):
        with pytest.raises(RuntimeError, match=match):
            case.numba()

    @pytest.mark.one_backend  # the fake kernel is the same whatever the backend
    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_in_fake_mode(case, match):
        with pytest.raises(RuntimeError, match=match):
            case.fake()

    if not fake:
        return test_bad_input_raises_naming_argument_and_value, test_bad_input_numba_kernel_gives_the_same_text
    return (test_bad_input_raises_naming_argument_and_value, test_bad_input_numba_kernel_gives_the_same_text,
            test_bad_input_in_fake_mode)
