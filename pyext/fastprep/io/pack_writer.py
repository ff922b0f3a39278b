"""Writing shard files whole, and finding the ones an interrupted :func:`fastprep.io.pack` completed.

A shard is written to ``shard-NNNNN.fpk.tmp``, closed by its table and footer, fsynced and renamed:
a file with a shard's name is complete (shards.py has the format).
"""

from __future__ import annotations

import mmap
import os
import re
import warnings

import numpy as np

from fastprep.io import shards as fmt
from fastprep.io.pack_items import Packed

_SHARD_FILE = re.compile(r"shard-(\d{5})\.fpk(\.tmp)?$")


class ShardWriter:
    """Appends records to shard k's temporary file; :meth:`close` seals and renames it."""

    def __init__(self, dest: str, k: int, pack_id: bytes, first: int):
        self.path = os.path.join(dest, fmt.shard_name(k))
        self.tmp = self.path + ".tmp"
        self.k, self.first = k, first
        self.entries: list[tuple] = []
        self.names: list[str] = []
        self.extras: list = []
        self.skipped: list[list] = []
        self.file = open(self.tmp, "wb")  # noqa: SIM115 (closed by close() or abort())
        self.file.write(fmt.shard_header(k, pack_id))
        self.bytes = fmt.HEADER_BYTES

    def add(self, source: int, name: str, p: Packed) -> None:
        pad = -self.bytes % fmt.ALIGN
        self.file.write(bytes(pad) + p.record)
        offset = self.bytes + pad
        self.bytes = offset + len(p.record)
        self.entries.append((self.k, p.kind, p.color, 0, offset, len(p.record), p.checksum, p.height, p.width, 0,
                             p.label, source))
        self.names.append(name)
        self.extras.append(p.extras)

    def skip(self, source: int, name: str, why: str) -> None:
        self.skipped.append([source, name, why])

    def close(self, end: int) -> tuple[np.ndarray, dict]:
        """Seal the shard (table, footer, fsync, rename); returns its (entries, JSON + 'bytes')."""
        entries = np.array(self.entries, dtype=fmt.ENTRY) if self.entries else np.zeros(0, fmt.ENTRY)
        meta = {"first": self.first, "end": end, "skipped": self.skipped, "names": self.names,
                "extras": self.extras if any(x is not None for x in self.extras) else None}
        self.file.write(fmt.shard_trailer(entries, self.bytes, meta))
        fmt.seal(self.file, self.tmp, self.path)
        return entries, {**meta, "bytes": os.path.getsize(self.path)}

    def abort(self) -> None:
        """Drop the unfinished shard (a full disk, a read-only one): nothing half-written stays."""
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.remove(self.tmp)
        except OSError:
            pass


def completed_shards(dest: str, pack_id: bytes) -> list[tuple[np.ndarray, dict]]:
    """The (entries, JSON) of shards 0, 1, ... that a previous run of the same pack completed, in order.
    Temporary files are removed; a damaged shard is removed with the ones after it (a warning says
    so); shards of another pack are an error (nothing is deleted)."""
    found: dict[int, str] = {}
    for name in os.listdir(dest):
        m = _SHARD_FILE.match(name)
        if m is None:
            continue
        if m.group(2):  # an interrupted write
            os.remove(os.path.join(dest, name))
        else:
            found[int(m.group(1))] = os.path.join(dest, name)
    done: list[tuple[np.ndarray, dict]] = []
    expected_first = 0
    for k in sorted(found):
        path = found[k]
        try:
            with open(path, "rb") as f:  # mapped: only the header and the table's pages are read, not the records
                size = os.fstat(f.fileno()).st_size
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            try:
                number, shard_id = fmt.read_shard_header(data[:fmt.HEADER_BYTES], path)
                if shard_id != pack_id:
                    raise FileExistsError(f"pack: {dest} holds shards of another pack ({os.path.basename(path)}: "
                                          f"other sources or options); choose another folder or delete it")
                entries, meta = fmt.read_shard_trailer(data, path)
            finally:
                if size:
                    data.close()
            if number != k or k != len(done) or meta["first"] != expected_first:
                raise fmt.ShardFormatError(f"{path}: shard {number} is out of sequence")
        except fmt.ShardFormatError as exc:
            stale = [found[j] for j in sorted(found) if j >= k]
            warnings.warn(f"pack: {exc}; rewriting it and the {len(stale) - 1} shards after it", stacklevel=3)
            for p in stale:
                os.remove(p)
            break
        done.append((entries, {**meta, "bytes": size}))
        expected_first = meta["end"]
    return done
