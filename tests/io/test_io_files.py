"""Image folders that are not what they seem (issue 28): FIFOs and devices named *.jpg, symlink
loops, broken links, a file swapped for a FIFO after the listing, files over the size limit; and
the first PNGs met by several loader threads at once (Pillow imported in each). Every case runs in
a child process with a timeout: a regression hangs or crashes the child, not the suite."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.jpeg_photos import encode, needs_decoder

pytestmark = [needs_decoder, pytest.mark.one_backend]

LIST_AND_READ = textwrap.dedent("""
    import os, sys, warnings
    import fastprep.io as fio
    root, case = sys.argv[1], sys.argv[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = fio.ImageFolder(root)
    print("listed", sorted(os.path.relpath(p, root) for p, _ in ds.samples))
    print("warned", [str(w.message) for w in caught])
    if case == "swapped":  # the listed file becomes a FIFO before it is read
        victim = ds.samples[0][0]
        os.remove(victim)
        os.mkfifo(victim)
    for i in range(len(ds)):
        try:
            image, label = ds.load_raw(i)
            print("read", tuple(image.shape))
        except ValueError as exc:
            print("refused", exc)
""")


def _jpeg():
    return encode(np.full((16, 24, 3), 100, np.uint8))


def _make(root, case):
    cls = root / "cls"
    cls.mkdir(parents=True)
    (cls / "good.jpg").write_bytes(_jpeg())
    if case == "fifo":
        os.mkfifo(cls / "pipe.jpg")
    elif case == "device":
        os.symlink("/dev/zero", cls / "zero.jpg")
    elif case == "loop":
        os.symlink("..", cls / "up")  # cls/up -> root: every folder again, forever
        os.symlink(".", cls / "self")
    elif case == "broken link":
        os.symlink(cls / "missing.jpg", cls / "dangling.jpg")
    elif case == "folder named .jpg":
        (cls / "dir.jpg").mkdir()
        (cls / "dir.jpg" / "inner.jpg").write_bytes(_jpeg())


CASES = {  # case: (files listed, what the warning names, reads refused)
    "fifo": (["cls/good.jpg"], "pipe.jpg", 0),
    "device": (["cls/good.jpg"], "zero.jpg", 0),
    "loop": (["cls/good.jpg"], None, 0),
    "broken link": (["cls/good.jpg"], "dangling.jpg", 0),
    "folder named .jpg": (["cls/dir.jpg/inner.jpg", "cls/good.jpg"], None, 0),
    "swapped": (["cls/good.jpg"], None, 1),
}


@pytest.mark.slow  # a fresh process per case (a FIFO read could block it); read_file's refusals are checked below
@pytest.mark.parametrize("case", list(CASES))
def test_only_regular_files_are_listed_and_read(tmp_path, case):
    _make(tmp_path, case)
    out = subprocess.run([sys.executable, "-c", LIST_AND_READ, str(tmp_path), case], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    listed, warned, refused = CASES[case]
    lines = out.stdout.splitlines()
    assert lines[0] == f"listed {listed}"
    if warned is None:
        assert lines[1] == "warned []"
    else:
        assert warned in lines[1] and "not regular files" in lines[1]
    assert sum(line.startswith("refused") for line in lines) == refused
    if refused:
        assert "is not a regular file (a FIFO)" in out.stdout


def test_read_file_refuses_what_is_not_a_bounded_regular_file(tmp_path, monkeypatch):
    import fastprep.io._files as files

    os.mkfifo(tmp_path / "p.jpg")
    big = tmp_path / "big.jpg"
    big.write_bytes(b"\xff" * 100)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 99)
    for path, match in [(tmp_path / "p.jpg", "not a regular file \\(a FIFO\\)"),
                        ("/dev/zero", "not a regular file \\(a character device\\)"),
                        (tmp_path, "not a regular file \\(a folder\\)"),
                        (big, "holds 100 bytes, over fastprep.io._files.MAX_FILE_BYTES \\(99\\)")]:
        with pytest.raises(ValueError, match=match):
            files.read_file("decode_jpeg", path)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", None)
    assert files.read_file("decode_jpeg", big) == b"\xff" * 100


PNGS_IN_THREADS = textwrap.dedent("""
    import sys
    import fastprep, fastprep.io as fio
    from fastprep import transforms as T
    assert "PIL.Image" not in sys.modules, "Pillow was imported before the loader threads"
    ds = fio.ImageFolder(sys.argv[1], roi=True)
    # The transform looks for PIL images in each sample while other threads import Pillow.
    loader = fastprep.Loader(ds, 8, threads=4, transform=T.Compose([T.RandomCrop(64), T.RGBToYCbCr()]))
    n = sum(len(batch.data[1]) for batch in loader)  # (images, labels)
    print(n)
""")


@pytest.mark.slow  # three fresh processes (the race is at Pillow's first import): .ci/slow
def test_one_png_among_jpegs_in_several_threads(tmp_path):
    """The thread that meets the PNG imports Pillow while the others look for PIL images in their
    samples (every transform does): they must never see the half-imported module."""
    from PIL import Image

    cls = tmp_path / "cls"
    cls.mkdir()
    jpeg = encode(np.random.default_rng(0).integers(0, 256, (96, 96, 3), dtype=np.uint8))
    for k in range(47):
        (cls / f"{k:02}.jpg").write_bytes(jpeg)
    Image.fromarray(np.full((96, 96, 3), 7, np.uint8)).save(cls / "20b.png")
    for _ in range(3):  # a fresh process each time: the race is at Pillow's first import
        out = subprocess.run([sys.executable, "-c", PNGS_IN_THREADS, str(tmp_path)], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[-1] == "48"
