"""`python -m fastprep bench --data DIR` on a folder holding one truncated JPEG (issue 43): one line
naming the file and the policy it was read under (exit 1), not "measuring raised ... DataLoader
worker process 0" naming no file; the same when the bad file is the first one read."""

import pytest

from fastprep.tools.bench._bad_files import BadFileError, bad_file_line
from fastprep.tools.cli._commands import main

from helpers.jpeg_photos import folder_with_a_cut_jpeg
from helpers.user_transform import QUICK_BENCH as FAST

pytestmark = pytest.mark.one_backend


PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("fastprep._jpeg", reason="fastprep's ImageFolder needs its JPEG decoder")


def _folder(root, bad):
    """cat/0-3.jpg, dog/4-5.jpg; file number `bad` cut in half (in its scan)."""
    return folder_with_a_cut_jpeg(root, {"cat": 4, "dog": 2}, (72, 96), bad)


@pytest.mark.parametrize("bad", [2, 0], ids=["later", "first"])
def test_bench_data_names_the_bad_file_and_the_policy(tmp_path, user, capsys, bad):
    path = _folder(tmp_path / "data", bad)
    code = main(["bench", "--data", str(tmp_path / "data"), "--transform", f"{user}:ported", *FAST])
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]  # the lines before it: the progress of the rounds
    assert code == (1 if bad else 2) and "Traceback" not in err, err
    assert line.startswith(f"python -m fastprep bench: {'' if bad else 'error: '}"), line
    assert f"{str(path)!r} is a bad file (" in line and "truncated" in line, line
    assert "on_error='raise'" in line and "ImageFolder(on_error='skip')" in line, line


def test_bad_file_line_needs_a_file_or_a_sources_advice():
    assert bad_file_line(RuntimeError("CUDA out of memory"), ["a/1.jpg"]) is None
    worker = BadFileError("Caught BadFileError in DataLoader worker process 0.\nOriginal Traceback (most recent "
                          "call last):\n  File \"x.py\", line 1, in f\nfastprep.tools.bench._bad_files.BadFileError: "
                          "a/1.jpg: OSError: image file is truncated\n")
    line = bad_file_line(worker, ["a/1.jpg", "a/11.jpg"])
    assert line.startswith("measuring stopped: 'a/1.jpg' is a bad file (OSError: image file is truncated (in "
                           "DataLoader worker process 0)); bench reads every file with on_error='raise'"), line
