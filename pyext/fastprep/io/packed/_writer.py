"""Writing shard files whole, and finding the ones an interrupted :func:`fastprep.io.pack` completed.

A shard is written to ``shard-NNNNN.fpk.tmp``, closed by its table and footer, fsynced and renamed:
a file with a shard's name is complete (format.py has the format). Each records what it holds: the
source, the options and every item's digest (_identity.py checks them before a resume), and
what became of its inputs per kind (_pack_summary.py).
"""

from __future__ import annotations

import mmap
import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

import fastprep.io._pack_format as fmt
from fastprep.errors import PackSourceError
from fastprep.io.packed._pack_item import Packed
from fastprep.io.packed._pack_summary import KindStats, shard_kinds

_SHARD_FILE = re.compile(r"shard-(\d{5})\.fpk(\.tmp)?$")


class ShardWriter:
    """Appends records to shard k's temporary file; :meth:`close` seals and renames it."""

    def __init__(self, dest: str, k: int, pack_id: bytes, first: int, identity: dict):
        self.path = os.path.join(dest, fmt.shard_name(k))
        self.tmp = self.path + ".tmp"
        self.k, self.first, self.identity = k, first, identity  # identity: {"source": ..., "options": ...}
        self.entries: list[tuple] = []
        self.names: list[str] = []
        self.extras: list = []
        self.skipped: list[list] = []
        self.inputs: list[str] = []  # each source item's digest, skipped ones too
        self.kinds: dict[str, KindStats] = {}
        self.skipped_bytes = self.shrunk = 0
        self.file = open(self.tmp, "wb")  # noqa: SIM115 (closed by close() or abort())
        self.file.write(fmt.shard_header(k, pack_id))
        self.bytes = fmt.HEADER_BYTES

    def add(self, source: int, name: str, p: Packed, digest: str) -> None:
        pad = -self.bytes % fmt.ALIGN
        self.file.write(bytes(pad) + p.record)
        offset = self.bytes + pad
        self.bytes = offset + len(p.record)
        self.entries.append((self.k, p.kind, p.color, 0, offset, len(p.record), p.checksum, p.height, p.width, 0,
                             p.label, source))
        self.names.append(name)
        self.extras.append(p.extras)
        self.inputs.append(digest)
        self.kinds.setdefault(p.how, KindStats()).add(p.bytes_in, len(p.record))
        self.shrunk += p.shrunk

    def skip(self, source: int, name: str, why: str, digest: str, size: int = 0) -> None:
        self.skipped.append([source, name, why])
        self.inputs.append(digest)
        self.skipped_bytes += size

    def close(self, end: int) -> tuple[np.ndarray, dict]:
        """Seal the shard (table, footer, fsync, rename); returns its (entries, JSON + 'bytes')."""
        entries = np.array(self.entries, dtype=fmt.ENTRY) if self.entries else np.zeros(0, fmt.ENTRY)
        meta = {"first": self.first, "end": end, "skipped": self.skipped, "names": self.names,
                "extras": self.extras if any(x is not None for x in self.extras) else None, **self.identity,
                "inputs": "".join(self.inputs), "digest": fmt.records_digest(entries),
                **shard_kinds(self.kinds, self.skipped_bytes, self.shrunk)}
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


@dataclass
class Kept:
    """A complete shard found in DEST: its table, JSON (+ 'bytes'), header's pack id and format version."""

    entries: np.ndarray
    meta: dict
    pack_id: bytes
    version: int


@dataclass
class Scan:
    """What DEST holds: the complete shards 0, 1, ... in sequence, and the files a resume drops
    (interrupted writes; a damaged or out-of-sequence shard and those after it, `why` says)."""

    kept: list[Kept] = field(default_factory=list)
    temporary: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    why: str = ""

    def drop_stale(self) -> None:
        """Remove the interrupted writes and the damaged shards (a warning names them)."""
        for p in self.temporary:
            os.remove(p)
        if self.stale:
            warnings.warn(f"pack: {self.why}; rewriting it and the {len(self.stale) - 1} shards after it",
                          stacklevel=3)
        for p in self.stale:
            os.remove(p)


def overwritten_files(dest: str) -> list[str]:
    """The names of the files ``overwrite=True`` removes from DEST: only a pack's own, which are the
    index, the shards it names, and shards (or their temporaries) an interrupted pack wrote, known
    by their shard header. A file named like one that is not (someone's own) is refused by name
    (PackSourceError), never removed."""
    index = os.path.join(dest, fmt.INDEX_NAME)
    listed: set[str] = set()
    if os.path.lexists(index):
        try:
            listed = {str(name) for name, _, _ in fmt.read_index(index)[2]["shards"]}
        except (OSError, ValueError, KeyError, TypeError):
            if not _starts_with(index, fmt.INDEX_MAGIC):
                raise _not_ours(dest, fmt.INDEX_NAME) from None
    names = [fmt.INDEX_NAME] if os.path.lexists(index) else []
    for name in sorted(os.listdir(dest)):
        m = _SHARD_FILE.match(name)
        if name == fmt.INDEX_NAME + ".tmp" or (m and name in listed):
            names.append(name)
        elif m:  # no index names it: removed only if it is a shard pack wrote
            _check_ours(dest, name, bool(m.group(2)))
            names.append(name)
    return names


def _check_ours(dest: str, name: str, temporary: bool) -> None:
    """A file named like a shard (or its temporary) is one pack wrote: it starts with a shard's
    header (an interrupted write's temporary may be empty). PackSourceError names it otherwise."""
    path = os.path.join(dest, name)
    if os.path.islink(path) or not os.path.isfile(path) or not (
            _starts_with(path, fmt.SHARD_MAGIC) or (temporary and os.path.getsize(path) == 0)):
        raise _not_ours(dest, name)


def _starts_with(path: str, magic: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def _not_ours(dest: str, name: str) -> PackSourceError:
    return PackSourceError(f"pack: {os.path.join(dest, name)!r} is not a file fastprep's pack wrote (no index in "
                           f"{dest} names it, and it has no shard header): pack removes or replaces only its own "
                           f"files; move it away or choose another DEST")


def scan_shards(dest: str) -> Scan:
    """The complete shards in DEST, read (only their headers and tables: mapped), nothing removed.
    A file named like a shard that pack did not write is refused by name (PackSourceError)."""
    found: dict[int, str] = {}
    scan = Scan()
    for name in os.listdir(dest):
        m = _SHARD_FILE.match(name)
        if m is None:
            continue
        _check_ours(dest, name, bool(m.group(2)))  # a resume removes (or writes over) only pack's own files
        if m.group(2):  # an interrupted write
            scan.temporary.append(os.path.join(dest, name))
        else:
            found[int(m.group(1))] = os.path.join(dest, name)
    expected_first = 0
    for k in sorted(found):
        path = found[k]
        try:
            with open(path, "rb") as f:  # mapped: only the header and the table's pages are read, not the records
                size = os.fstat(f.fileno()).st_size
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            try:
                number, shard_id = fmt.read_shard_header(data[:fmt.HEADER_BYTES], path)
                version = fmt.header_version(data[:fmt.HEADER_BYTES])
                entries, meta = fmt.read_shard_trailer(data, path)
            finally:
                if size:
                    data.close()
            if number != k or k != len(scan.kept) or meta["first"] != expected_first:
                raise fmt.ShardFormatError(f"{path}: shard {number} is out of sequence")
        except fmt.ShardFormatError as exc:
            scan.stale = [found[j] for j in sorted(found) if j >= k]
            scan.why = str(exc)
            break
        scan.kept.append(Kept(entries, {**meta, "bytes": size}, shard_id, version))
        expected_first = meta["end"]
    return scan
