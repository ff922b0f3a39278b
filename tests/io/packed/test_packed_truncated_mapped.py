"""A shard truncated while it is memory-mapped (another process rewriting or truncating the file):
the next read of one of its records is a ShardFormatError naming the pack, the shard and the record,
never a SIGBUS that kills the process. Each case runs in a child process, as a SIGBUS would kill
pytest itself; the other shards' records read on."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import needs_decoder, photo_jpeg

# slow: each case runs in a child process (a SIGBUS there must fail the test, not kill pytest).
pytestmark = [needs_decoder, pytest.mark.one_backend, pytest.mark.slow]

CHILD = textwrap.dedent("""
    import os, sys
    import fastprep.io as fio
    ds = fio.PackedDataset(sys.argv[1])
    read = {read}
    kept = ds.load_raw(0)[0]                 # an item handed out before the truncation
    read(0)                                  # maps shard 0
    name = ds._shards[0][0]
    os.truncate(os.path.join(sys.argv[1], name), {size})
    for what in ("ds[0]", "kept.decode()", "ds.load_raw(0)[0].decode((0, 0, 8, 8))"):
        try:
            eval(what)
        except fio.ShardFormatError as exc:
            assert name in str(exc) and "record 0" in str(exc) and "truncated" in str(exc), str(exc)
            print("named", what)
        else:
            print("READ", what)
    read(len(ds) - 1)                        # another shard's record reads on
    print("done")
""")


def _pack(root, mode):
    g = torch.Generator().manual_seed(0)
    if mode == "raw":
        items = [(torch.randint(0, 256, (3, 64, 48), dtype=torch.uint8, generator=g), 0) for _ in range(4)]
        fio.pack(items, root, mode="raw", progress=False, shard_bytes=1 << 14)
    else:
        (root.parent / "src" / "a").mkdir(parents=True)
        for i in range(4):
            (root.parent / "src" / "a" / f"{i}.jpg").write_bytes(photo_jpeg("coffee", "4:2:0", False, (200, 230 + i)))
        fio.pack(root.parent / "src", root, progress=False, shard_bytes=1 << 14)
    ds = fio.PackedDataset(root)
    assert int(ds._entries["shard"][0]) != int(ds._entries["shard"][len(ds) - 1])
    return root


@pytest.mark.parametrize("mode", ["jpeg", "raw"])
@pytest.mark.parametrize("size", [0, 4096])  # emptied; cut inside its first record
def test_a_shard_truncated_while_mapped_is_an_error_not_a_crash(tmp_path, mode, size):
    pack = _pack(tmp_path / "pack", mode)
    code = CHILD.format(read="lambda i: ds[i][0].sum()", size=size)
    out = subprocess.run([sys.executable, "-c", code, str(pack)], capture_output=True, text=True, timeout=300)
    assert out.returncode != -signal.SIGBUS, "the child was killed by SIGBUS"
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["named", "ds[0]", "named", "kept.decode()", "named",
                                  "ds.load_raw(0)[0].decode((0,", "0,", "8,", "8))", "done"]
    assert os.path.getsize(pack / fio.PackedDataset(pack)._shards[0][0]) == size
