"""The files of a packed dataset (what :func:`fastprep.io.pack` writes, :class:`PackedDataset` reads).

A pack is a folder::

    DEST/shard-00000.fpk, shard-00001.fpk, ...   records, each shard closed by its own table
    DEST/index.fpi                               every record's place, label and checksum; written last

All integers are little-endian; every checksum is CRC-32C (``fastprep._jpeg.crc32c``).

Shard file::

    [0, 64)    header: b"FPSHARD\\0", u32 format version, u32 shard number, 16-byte pack id (what
               was packed with which options: a resume only adds to shards of the same id),
               28 zero bytes, u32 CRC of the first 60 bytes
    [64, T)    records, each at a 64-byte aligned offset: csrc/jpeg/record.h defines them (a JPEG
               with its restart index, or raw pixels), each with CRCs over all its bytes
    [T, J)     the shard's table: one ENTRY per record (below), then
    [J, F)     JSON: {"first": first source index, "end": source index after the last, "skipped":
               [[source, name, reason], ...], "names": [name per record], "extras": [...] or null,
               (version 2:) "source": {"type": "folder" or "dataset <module.Type>", "items": n},
               "options": {...}, "inputs": 16 hex digits per source item in [first, end) (the
               item's digest: _pack_sources.py), "digest": records_digest of the table, (since
               the per-kind counts; absent in older shards:) "kinds": {kind: [count, bytes in,
               bytes out]}, "skipped_bytes", "shrunk" (_pack_summary.py)}
    [F, F+64)  footer: b"FPSEND\\0\\0", u32 version, u32 records, u64 T, u64 J, u64 F, u32 CRC of
               [T, F), 16 zero bytes, u32 CRC of the footer's first 60 bytes

Index file::

    [0, 64)    header: b"FPINDEX\\0", u32 version, u32 records, 16-byte pack id, u64 table offset,
               u64 JSON offset, u64 JSON bytes, u32 CRC of [64, end of JSON), u32 CRC of the first 60 bytes
    table      one ENTRY per record, in source order
    JSON       {"classes": [...], "shards": [[name, bytes, records], ...], "skipped": [...],
                "options": {...}, "extras": [...] or null, (version 2:) "source": {...},
                "digests": [each shard's "digest"]}
    names      one line per record (its source file or dataset index), read only for error messages:
               version 2 writes each as a JSON string (any name round-trips: newlines, bytes that
               are not UTF-8 as Python's surrogateescape code points), version 1 as UTF-8 text

ENTRY (56 bytes): u32 shard, u8 kind (1 JPEG, 2 raw), u8 color (0 grey, 1 YCbCr, 2 RGB, 3 CMYK, 4 YCCK), u16 0,
u64 offset in the shard, u64 length, u32 record checksum, u32 height, u32 width, u32 0, i64 label,
u64 source index.

A shard is written under a temporary name, fsynced, and renamed: a file with a shard's name is
complete. The index is written the same way once every shard is, so a pack without its index was
interrupted, and ``pack`` resumes it from the shards it finds.

Version 2 added the source identity to the shard JSON, the JSON name lines and raw records whose
checksum covers their pixels (record.h). Version 3 (this fastprep) made the pack id a content id:
a shard is written with the id of its source and options (its classes and class_to_idx too, in
the shard JSON with "source_id"), and once every shard is, each header gets the finished pack's
id, which covers every item's digest and every shard's records (identity.content_id), before the
index is written; the index JSON adds "class_to_idx". Two packs with one id hold the same records
(a remote cache and an upload trust that). Version 1 and 2 packs still read; pack() refuses to
resume or return them (by name: their id covered only the first item), overwrite=True re-packs.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

import numpy as np

from fastprep.errors import ShardFormatError, ShardMismatchError

FORMAT_VERSION = 3  # 3: the pack id covers every item and record (below); 1 and 2 still read
SHARD_MAGIC, FOOTER_MAGIC, INDEX_MAGIC = b"FPSHARD\x00", b"FPSEND\x00\x00", b"FPINDEX\x00"
HEADER_BYTES = FOOTER_BYTES = 64
ALIGN = 64
INDEX_NAME = "index.fpi"
KIND_JPEG, KIND_RAW = 1, 2
COLORS = {"GRAY": 0, "YCbCr": 1, "RGB": 2, "CMYK": 3, "YCCK": 4}
ENTRY = np.dtype([("shard", "<u4"), ("kind", "u1"), ("color", "u1"), ("_pad0", "<u2"), ("offset", "<u8"),
                  ("length", "<u8"), ("checksum", "<u4"), ("height", "<u4"), ("width", "<u4"), ("_pad1", "<u4"),
                  ("label", "<i8"), ("source", "<u8")])
assert ENTRY.itemsize == 56


def crc32c(data: Any) -> int:
    from fastprep.io.jpeg import native  # noqa: PLC0415 (the native module, with its install hint)

    return native("pack").crc32c(data)


def shard_name(k: int) -> str:
    return f"shard-{k:05d}.fpk"


def _check_version(version: int, where: str) -> None:
    if version > FORMAT_VERSION:
        raise ShardFormatError(f"{where}: format version {version} is newer than this fastprep reads "
                               f"({FORMAT_VERSION}): upgrade fastprep")
    if version < 1:
        raise ShardFormatError(f"{where}: format version {version} is not one fastprep wrote")


def _sealed(head: bytes) -> bytes:
    """A 64-byte block: its first 60 bytes and their CRC."""
    assert len(head) == 60
    return head + struct.pack("<I", crc32c(head))


def _unseal(block: bytes, magic: bytes, where: str) -> bytes:
    if len(block) < 64:
        raise ShardFormatError(f"{where}: {len(block)} bytes, shorter than its 64-byte header: truncated")
    if block[:8] != magic:
        raise ShardFormatError(f"{where}: does not start with {magic!r}: not a fastprep pack file")
    if crc32c(block[:60]) != struct.unpack_from("<I", block, 60)[0]:
        raise ShardFormatError(f"{where}: header checksum mismatch: the file is corrupt")
    _check_version(struct.unpack_from("<I", block, 8)[0], where)
    return block


def shard_header(k: int, pack_id: bytes) -> bytes:
    return _sealed(SHARD_MAGIC + struct.pack("<II", FORMAT_VERSION, k) + pack_id + bytes(28))


def read_shard_header(block: bytes, where: str) -> tuple[int, bytes]:
    """(shard number, pack id) of a shard's first 64 bytes."""
    _unseal(block, SHARD_MAGIC, where)
    return struct.unpack_from("<I", block, 12)[0], bytes(block[16:32])


def check_shard_header(block: bytes, name: str, k: int, pack_id: bytes) -> None:
    """A shard file's first 64 bytes are shard k of pack `pack_id`: ShardFormatError if they are
    corrupt, ShardMismatchError if they are another shard's."""
    number, shard_id = read_shard_header(block, name)
    if shard_id != pack_id:
        raise ShardMismatchError(f"{name} is shard {number} of another pack (its pack id {shard_id.hex()}, this "
                                 f"pack's {pack_id.hex()}): replaced")
    if number != k:
        raise ShardMismatchError(f"{name} is shard {number} of this pack, not shard {k}: replaced")


def header_version(block: bytes) -> int:
    """The format version of a checked header block (a shard's or the index's)."""
    return struct.unpack_from("<I", block, 8)[0]


def records_digest(entries: np.ndarray) -> str:
    """A shard's content: its records' (source, checksum, label) chained through SHA-256. A record's
    checksum covers every pixel (record.h), so two shards of other images differ here."""
    chain = np.zeros(len(entries), dtype=[("source", "<u8"), ("checksum", "<u4"), ("label", "<i8")])
    for f in chain.dtype.names:
        chain[f] = entries[f]
    return hashlib.sha256(chain.tobytes()).hexdigest()[:32]


def shard_trailer(entries: np.ndarray, table_at: int, meta: dict) -> bytes:
    """The table, the JSON and the footer that close a shard whose records end at `table_at`."""
    table = entries.astype(ENTRY, copy=False).tobytes()
    text = json.dumps(meta, separators=(",", ":")).encode()
    json_at, footer_at = table_at + len(table), table_at + len(table) + len(text)
    head = FOOTER_MAGIC + struct.pack("<IIQQQI", FORMAT_VERSION, len(entries), table_at, json_at, footer_at,
                                      crc32c(table + text)) + bytes(16)
    return table + text + _sealed(head)


def read_shard_trailer(data: Any, where: str) -> tuple[np.ndarray, dict]:
    """(entries, JSON) of a whole shard file's bytes, its footer and table checked."""
    size = len(data)
    if size < HEADER_BYTES + FOOTER_BYTES:
        raise ShardFormatError(f"{where}: {size} bytes, too short for a shard: truncated")
    footer = _unseal(bytes(data[size - FOOTER_BYTES:]), FOOTER_MAGIC, f"{where} footer")
    count, table_at, json_at, footer_at, crc = struct.unpack_from("<IQQQI", footer, 12)
    if not (HEADER_BYTES <= table_at <= json_at <= footer_at == size - FOOTER_BYTES) \
            or json_at - table_at != count * ENTRY.itemsize:
        raise ShardFormatError(f"{where}: footer's table at [{table_at}, {footer_at}) does not fit the "
                               f"{size}-byte file ({count} records)")
    if crc32c(data[table_at:footer_at]) != crc:
        raise ShardFormatError(f"{where}: table checksum mismatch: the file is corrupt")
    entries = np.frombuffer(bytes(data[table_at:json_at]), ENTRY)
    try:
        meta = json.loads(bytes(data[json_at:footer_at]))
    except ValueError as exc:
        raise ShardFormatError(f"{where}: table JSON unreadable: {exc}") from None
    bad = (entries["offset"] < HEADER_BYTES) | (entries["length"] > table_at) \
        | (entries["offset"] > table_at - entries["length"])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ShardFormatError(f"{where}: record {i} at {entries['offset'][i]} ({entries['length'][i]} bytes) is "
                               f"not inside the records")
    return entries, meta


def write_durably(path: str, chunks: list[bytes]) -> None:
    """Write `chunks` to path's temporary name, fsync, rename over path, fsync the folder."""
    tmp = path + ".tmp"
    f = open(tmp, "wb")  # noqa: SIM115 (seal closes it)
    try:
        for c in chunks:
            f.write(c)
    except BaseException:
        f.close()
        raise
    seal(f, tmp, path)


def seal(f: Any, tmp: str, path: str) -> None:
    """A file written under a temporary name made durable under its own: flush, fsync, close,
    rename over `path`, fsync the folder. Nothing is ever read half-written under `path`."""
    f.flush()
    os.fsync(f.fileno())
    f.close()
    os.replace(tmp, path)
    sync_folder(os.path.dirname(path))


def sync_folder(folder: str) -> None:
    """fsync a folder, so a rename in it survives a crash (where the OS allows opening folders)."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def index_bytes(entries: np.ndarray, pack_id: bytes, meta: dict, names: list[str]) -> list[bytes]:
    table = entries.astype(ENTRY, copy=False).tobytes()
    text = json.dumps(meta, separators=(",", ":")).encode()
    listing = "\n".join(json.dumps(n) for n in names).encode()  # ASCII: newlines, undecodable bytes escaped
    table_at, json_at = HEADER_BYTES, HEADER_BYTES + len(table)
    head = INDEX_MAGIC + struct.pack("<II", FORMAT_VERSION, len(entries)) + pack_id + \
        struct.pack("<QQQI", table_at, json_at, len(text), crc32c(table + text))
    return [_sealed(head), table, text, listing]


def read_index_header(block: bytes, where: str) -> tuple[int, bytes]:
    """(record count, pack id) of an index's first 64 bytes, checked."""
    head = _unseal(block[:HEADER_BYTES], INDEX_MAGIC, where)
    return struct.unpack_from("<I", head, 12)[0], bytes(head[16:32])


def read_index(path: str) -> tuple[np.ndarray, bytes, dict, int]:
    """(entries, pack id, JSON, offset of the names) of an index file, checked."""
    with open(path, "rb") as f:
        data = f.read()
    count, pack_id = read_index_header(data[:HEADER_BYTES], path)
    head = data[:HEADER_BYTES]
    table_at, json_at, json_len, crc = struct.unpack_from("<QQQI", head, 32)
    end = json_at + json_len
    if table_at != HEADER_BYTES or json_at - table_at != count * ENTRY.itemsize or end > len(data):
        raise ShardFormatError(f"{path}: {count} records and {json_len} bytes of JSON do not fit the "
                               f"{len(data)}-byte file: truncated or corrupt")
    if crc32c(data[table_at:end]) != crc:
        raise ShardFormatError(f"{path}: checksum mismatch: the index is corrupt")
    try:
        meta = json.loads(data[json_at:end])
    except ValueError as exc:
        raise ShardFormatError(f"{path}: JSON unreadable: {exc}") from None
    return np.frombuffer(data[table_at:json_at], ENTRY), pack_id, meta, end


def shown(name: str) -> str:
    """A name as printed: bytes that are not UTF-8 as \\xNN, control characters escaped (a name
    read back with surrogateescape cannot be written to a UTF-8 stream as it is)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def read_name(path: str, names_at: int, i: int) -> str:
    """Record i's source name from the index's name list, as printed (:func:`shown`): for messages only."""
    try:
        with open(path, "rb") as f:
            version = header_version(f.read(HEADER_BYTES))
            f.seek(names_at)
            line = f.read().split(b"\n")[i]
        if version >= 2:
            name = json.loads(line)
            return shown(name) if isinstance(name, str) else f"record {i}"
        return line.decode(errors="replace")
    except (OSError, IndexError, ValueError, struct.error):
        return f"record {i}"
