"""One writer per pack: two packs into one DEST at once (processes, threads) give one pack and one
PackLockedError naming the holder; the pack read back equals a clean one. A lock a killed process
held is taken over; the lock file goes with its pack's end."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch

import fastprep.io as fio
from fastprep.io.packed._lock import LOCK_NAME, pack_lock

from helpers.jpeg_photos import needs_decoder

pytestmark = [needs_decoder, pytest.mark.one_backend]

TRIALS = 3

# A slow dataset (30 items, 20 ms each: the holder takes 0.6 s), packed by this process and a child
# per trial: a file barrier starts both packs within milliseconds of each other.
WRITER = textwrap.dedent("""
    import os, time
    import numpy as np
    import fastprep.io as fio

    class Slow:
        def __len__(self):
            return 30
        def __getitem__(self, i):
            time.sleep(0.02)
            return np.full((16, 16, 3), i, np.uint8), i

    def write(work, me, trials):
        lines = []
        for t in range(trials):
            open(os.path.join(work, f"ready-{t}-{me}"), "w").close()
            deadline = time.monotonic() + 60
            while sum(n.startswith(f"ready-{t}-") for n in os.listdir(work)) < 2 and time.monotonic() < deadline:
                time.sleep(0.002)
            try:
                fio.pack(Slow(), os.path.join(work, f"p{t}"), mode="raw", progress=False, threads=1)
                lines.append(f"{t} packed")
            except fio.PackLockedError as exc:
                lines.append(f"{t} locked {exc}")
        return lines
""")


def slow_items():
    return [(np.full((16, 16, 3), i, np.uint8), i) for i in range(30)]


def same_as_clean(dest, clean):
    a, b = fio.PackedDataset(dest), fio.PackedDataset(clean)
    assert len(a) == len(b) == 30 and a.targets == b.targets
    assert all(torch.equal(a[i][0], b[i][0]) for i in range(30))


def test_two_processes_packing_one_dest_give_one_pack_and_one_refusal(tmp_path):
    fio.pack(slow_items(), tmp_path / "clean", mode="raw", progress=False)
    child = subprocess.Popen([sys.executable, "-c", WRITER + f"\nprint('\\n'.join(write({str(tmp_path)!r}, 1, "
                                                     f"{TRIALS})))"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    namespace = {}
    exec(WRITER, namespace)
    mine = namespace["write"](str(tmp_path), 0, TRIALS)
    out, err = child.communicate(timeout=240)
    assert child.returncode == 0, err[-2000:]
    lines = [line.split(" ", 2) for line in mine + out.splitlines()]
    for t in range(TRIALS):
        got = sorted(words[1:] for words in lines if words[0] == str(t))
        assert [g[0] for g in got] == ["locked", "packed"], got
        message = got[0][1]
        assert f"p{t} is being written by another pack (pid " in message and " on " in message, message
        assert "wait for it to finish" in message
        same_as_clean(tmp_path / f"p{t}", tmp_path / "clean")
        assert LOCK_NAME not in os.listdir(tmp_path / f"p{t}")


def test_two_threads_packing_one_dest_give_one_pack_and_one_refusal(tmp_path):
    fio.pack(slow_items(), tmp_path / "clean", mode="raw", progress=False)

    class Slow:
        def __len__(self):
            return 30

        def __getitem__(self, i):
            time.sleep(0.005)
            return slow_items()[i]

    for t in range(TRIALS):
        barrier, outcomes = threading.Barrier(2), []

        def write(dest=tmp_path / f"p{t}", barrier=barrier, outcomes=outcomes):
            barrier.wait()
            try:
                fio.pack(Slow(), dest, mode="raw", progress=False, threads=1)
                outcomes.append("packed")
            except fio.PackLockedError as exc:
                outcomes.append(str(exc))

        threads = [threading.Thread(target=write) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert sorted(outcomes)[1] == "packed" and f"(pid {os.getpid()} on {socket.gethostname()})" in \
            sorted(outcomes)[0], outcomes
        same_as_clean(tmp_path / f"p{t}", tmp_path / "clean")


def test_the_refusal_names_dest_and_the_holder_and_a_dead_holders_lock_is_taken_over(tmp_path):
    dest = tmp_path / "p"
    dest.mkdir()
    with pack_lock(str(dest)):
        assert (dest / LOCK_NAME).read_text() == f"pid {os.getpid()} on {socket.gethostname()}"
        with pytest.raises(fio.PackLockedError, match=rf"pack: {dest} is being written by another pack \(pid "
                                                      rf"{os.getpid()} on {socket.gethostname()}\); wait for it"):
            fio.pack(slow_items(), dest, mode="raw", progress=False)
    assert not (dest / LOCK_NAME).exists()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from fastprep.io.packed._lock import pack_lock
        with pack_lock({str(dest)!r}):
            print("held", flush=True)
            time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(fio.PackLockedError, match=rf"\(pid {holder.pid} on "):
            fio.pack(slow_items(), dest, mode="raw", progress=False)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        holder.stdout.close()
    assert (dest / LOCK_NAME).read_text().startswith(f"pid {holder.pid} ")  # left behind by the killed holder
    fio.pack(slow_items(), dest, mode="raw", progress=False)
    assert len(fio.PackedDataset(dest)) == 30 and not (dest / LOCK_NAME).exists()
