"""fastprep.monitor when a batch fails on a bad file (a truncated JPEG, issue 43): before the summary
(and the exception, which still reaches the loop) one line names the file and how to skip it, a
DataLoader worker's error included, instead of "Caught ValueError in DataLoader worker process 0"."""

import io

import pytest
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep.core._failure_text import SKIP_HINT

from helpers.jpeg_photos import folder_with_a_cut_jpeg

pytestmark = pytest.mark.one_backend


PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("fastprep._jpeg", reason="fastprep's ImageFolder needs its JPEG decoder")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """cat/0-3.jpg, 2.jpg cut in half."""
    root = tmp_path_factory.mktemp("monitor_bad")
    folder_with_a_cut_jpeg(root, {"cat": 4}, (32, 40), 2)
    return root


@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_file_is_named_with_how_to_skip_it(folder, workers):
    out = io.StringIO()
    loader = DataLoader(fio.ImageFolder(folder), batch_size=1, num_workers=workers)
    with pytest.raises(ValueError, match="corrupt JPEG"):
        for _ in fastprep.monitor(loader, live=False, stream=out, device="cpu"):
            pass
    lines = out.getvalue().splitlines()
    failed = [ln for ln in lines if ln.startswith("fastprep.monitor: batch 2 failed: ValueError: ")]
    assert len(failed) == 1, lines
    assert str(folder / "cat" / "2.jpg") in failed[0] and SKIP_HINT in failed[0], failed
    assert "Traceback" not in failed[0] and ("(in DataLoader worker process 0)" in failed[0]) == (workers == 1)
    assert any(ln.startswith("fastprep.monitor: input-bound") for ln in lines)  # the summary still follows


def test_report_none_writes_nothing(folder):
    out = io.StringIO()
    with pytest.raises(ValueError):
        for _ in fastprep.monitor(DataLoader(fio.ImageFolder(folder), batch_size=1), live=False, stream=out,
                                  device="cpu", report=None):
            pass
    assert out.getvalue() == ""
