"""`python -m fastprep diagnose` when a sample's file is bad (a truncated JPEG, issue 43): the one
line names the file and the policy (fastprep's source says how to skip it; a dataset that names
its samples, as torchvision's ImageFolder does with ``samples``, is named by the failing item's
path), not a worker's traceback."""

import re

import numpy as np
import pytest

import fastprep.io as fio
from fastprep.core._failure_text import SKIP_HINT
from fastprep.tools.cli._commands import main
from fastprep.tools.photos import ImageFolder as PillowFolder

from helpers.jpeg_photos import folder_with_a_cut_jpeg

pytestmark = pytest.mark.one_backend


PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("fastprep._jpeg", reason="fastprep's ImageFolder needs its JPEG decoder")

BAD = 5  # reached only by level 5 (nothing cached), as in test_diagnose_failures
FAST = ["--repeats", "1", "--steps", "2", "--warmup", "1", "--time-limit", "0", "--progress", "off"]
ROOT = {}


@pytest.fixture(scope="module", autouse=True)
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagnose_bad")
    folder_with_a_cut_jpeg(root, {"cat": 8}, (40, 48), BAD)
    ROOT["path"] = root
    return root


def step(batch):
    return batch[0].float().sum()


def fastprep_folder():
    return fio.ImageFolder(ROOT["path"]), step, 2


def pillow_folder():  # torchvision's ImageFolder's layout, samples and Pillow loader
    return PillowFolder(ROOT["path"], transform=lambda im: np.asarray(im).copy()), step, 2


@pytest.mark.parametrize("factory", ["fastprep_folder", "pillow_folder"])
def test_a_bad_file_is_named_with_the_policy(factory, capsys):
    assert main(["diagnose", f"{__name__}:{factory}", *FAST]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    path = str(ROOT["path"] / "cat" / f"{BAD}.jpg")
    assert err.startswith(f"python -m fastprep diagnose: error: loading item {BAD}"), err
    assert path in err and SKIP_HINT in err, err
    if factory == "pillow_folder":  # Pillow's error names no file: the item's path does, and the policy
        assert re.search(rf"loading item {BAD} \({re.escape(path)}\) raised OSError: image file is truncated", err)
        assert "on_error='raise' stops at a bad sample" in err, err
