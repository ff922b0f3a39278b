"""fastprep.Loader's profile hooks (loader/_hooks.py, issue 44 item 4): named points of its work a
profiler wraps (``loader.hooks.add(stage, hook)``) instead of patching the Loader by name; called
with their stage, never called when not added, the batches the same either way."""

import pytest
import torch

import fastprep
from fastprep import transforms as T
from fastprep.loader._hooks import STAGES, LoaderHooks
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend


def _loader():
    return fastprep.Loader(SyntheticImages(8, None, pool=3, size=40), 4, transform=T.seed_workload(24, layout="HWC"),
                           threads=2, seed=1)


def _batches(loader, epochs=2):
    got = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        got += [(b.data[0].clone(), b.data[1].clone()) for b in loader]
    return got


def _recorder(calls):
    def hook(stage, call, *args):
        calls.append(stage)
        return call(*args)
    return hook


def test_every_stage_of_a_fused_loaders_passes_calls_its_hooks_and_the_batches_stay_the_same():
    want, loader, calls = _batches(_loader()), _loader(), []
    for stage in STAGES:
        loader.hooks.add(stage, _recorder(calls))
    got = _batches(loader)
    assert set(calls) == set(STAGES)
    assert calls.count("pool_start") == calls.count("pool_stop") == calls.count("take_ring") == 2
    assert calls.count("hand_off") == 4 and calls.count("keep_ring") == 2
    assert all(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1]) for g, w in zip(got, want, strict=True))


def test_only_the_stages_hooked_are_called_and_a_loader_without_hooks_hands_its_pass_none():
    loader, calls = _loader(), []
    assert iter(loader).inputs.hooks is None
    hook = _recorder(calls)
    loader.hooks.add("chunk", hook)
    _batches(loader, 1)
    assert calls and set(calls) == {"chunk"}
    loader.hooks.remove("chunk", hook)
    calls.clear()
    _batches(loader, 1)
    assert calls == [] and not loader.hooks and iter(loader).inputs.hooks is None


def test_a_hook_added_during_a_pass_counts_from_the_next():
    loader, calls = _loader(), []
    it = iter(loader)
    next(it)
    loader.hooks.add("hand_off", _recorder(calls))
    list(it)
    assert calls == []
    _batches(loader, 1)
    assert calls == ["hand_off", "hand_off"]


def test_hooks_of_a_stage_nest_the_first_added_outermost_and_may_replace_the_call():
    hooks, seen = LoaderHooks(), []

    def outer(stage, call, *args):
        seen.append(("outer", stage, args))
        return call(*args) + 1

    def inner(stage, call, *args):
        seen.append(("inner", stage, args))
        return 10  # the call left out, as a profile of the Python alone leaves out the op

    hooks.add("op", outer)
    hooks.add("op", inner)
    assert hooks.run("op", lambda x: x, 3) == 11
    assert seen == [("outer", "op", (3,)), ("inner", "op", (3,))]
    assert hooks.run("chunk", lambda x: x, 3) == 3


def test_a_bad_stage_or_hook_is_refused_by_name():
    hooks = LoaderHooks()
    with pytest.raises(ValueError, match=r"stage='collate' is not a hook point; expected one of \['chunk'"):
        hooks.add("collate", print)
    with pytest.raises(ValueError, match="expected hook to be callable, got 3"):
        hooks.add("op", 3)
    with pytest.raises(ValueError, match="is not a hook of stage 'op'"):
        hooks.remove("op", print)
