"""The tools tests' shared fixture: the user's transform module that `bench --data` measures."""

import pytest

from helpers.user_transform import user_module


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's transform module (a fresh name each test), importable, with torchvision faked
    in where it does not import."""
    yield from user_module(tmp_path, monkeypatch)
