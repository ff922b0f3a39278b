"""fastprep.Loader's settings (issue 44 item 4): every argument but its live objects, checked and
resolved once into a frozen LoaderSettings that the parts of a pass are handed instead of the
Loader; the Loader's attributes read it."""

import dataclasses
import inspect

import pytest
import torch

import fastprep
from fastprep import transforms as T
from fastprep.loader._settings import LIVE, LoaderSettings
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend


def _images(n=8):
    return SyntheticImages(n, None, pool=3, size=40)


def _loader(**kwargs):
    return fastprep.Loader(_images(), 4, transform=T.seed_workload(24, layout="HWC"), threads=1, seed=1, **kwargs)


def test_every_loader_argument_but_its_live_objects_is_a_setting():
    arguments = set(inspect.signature(fastprep.Loader).parameters)
    assert {f.name for f in dataclasses.fields(LoaderSettings)} == arguments - set(LIVE)
    assert set(LIVE) <= arguments


def test_the_settings_are_frozen_and_so_are_the_loaders_views_of_them():
    loader = _loader()
    with pytest.raises(dataclasses.FrozenInstanceError):
        loader.settings.batch_size = 2
    with pytest.raises(AttributeError):
        loader.batch_size = 2
    with pytest.raises(TypeError):
        loader.settings.fields["x"] = "label"  # its mapping too
    assert loader.batch_size == loader.settings.batch_size == 4


def test_the_loaders_attributes_read_its_resolved_settings():
    loader = _loader(depth=3, drop_last=True, prestart=False)
    for field in dataclasses.fields(LoaderSettings):
        assert getattr(loader, field.name) == getattr(loader.settings, field.name), field.name
    settings = loader.settings
    assert (settings.threads, settings.depth, settings.drop_last, settings.prestart) == (1, 3, True, False)
    assert (settings.shuffle, settings.shard_window, settings.rank, settings.world_size) == (False, 1, 0, 1)
    assert (settings.device, settings.decode_on, settings.streams, settings.on_error) == (None, None, None, "raise")
    assert _loader(fields={1: "label"}).fields == {1: "label"}


def test_equal_arguments_make_equal_settings_and_another_value_another():
    assert _loader().settings == _loader().settings
    assert _loader(depth=3).settings != _loader().settings
    assert dataclasses.replace(_loader().settings, depth=3) == _loader(depth=3).settings


def test_setting_the_seed_replaces_the_settings_with_a_changed_copy():
    loader = _loader()
    before = loader.settings
    loader.seed = 7
    assert loader.settings == dataclasses.replace(before, seed=7) and before.seed == 1
    with pytest.raises(TypeError, match=r"Loader: expected seed to be an int, got str \('x'\)"):
        loader.seed = "x"
    assert loader.settings.seed == 7


def test_a_pass_runs_the_settings_it_began_with():
    loader = _loader()
    want = [b.data[0].clone() for b in _loader()]
    it = iter(loader)
    loader.seed = 99  # the next pass's
    assert all(torch.equal(b.data[0], w) for b, w in zip(it, want, strict=True))


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=0), "Loader: expected batch_size to be an int >= 1, got 0"),
    (dict(threads=0), "Loader: expected threads to be an int >= 1, got 0"),
    (dict(depth=True), "Loader: expected depth to be an int >= 1, got True"),
    (dict(drop_last="no"), "drop_last"),
    (dict(deterministic=2), "deterministic"),
    (dict(prestart=None), "prestart"),
    (dict(shuffle=True, sampler=[0, 1]), "shuffle=True and a sampler are exclusive"),
    (dict(shard_window=4), r"shard_window=4 is for shuffle='shards', got shuffle=False"),
    (dict(device="gpu"), "Loader: bad device 'gpu'"),
    (dict(expand="yes"), "expected expand to be a bool or a callable, got 'yes'"),
    (dict(transform=3), "expected transform to be callable or None, got 3"),
    (dict(on_error="ignore"), "on_error"),
    (dict(streams=2), r"streams=2 sets the device stage's threads; pass device= or decode_on="),
    (dict(jpeg_decoder="host"), r"jpeg_decoder='host' chooses the GPU decode split's JPEG decoder"),
    (dict(sampler=[0, 1], rank=0, world_size=2), r"rank=0, world_size=2 split a map-style dataset's order"),
    (dict(fields={"x": "nonsense"}), r"fields\['x'\] is 'nonsense'"),
])
def test_bad_arguments_raise_the_same_errors_from_the_loader_and_the_settings(kwargs, match):
    args = dict(batch_size=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fastprep.Loader(_images(), **args)
    live = {name: args.pop(name, None) for name in LIVE}
    with pytest.raises(ValueError, match=match):
        LoaderSettings.build(_images(), live["transform"], live["sampler"], **args)
