"""Which bytes of a packed JPEG record a window's decode reads, so that a record in a shard that is
not cached can be read by HTTP range: its meta block, restart index and JPEG header, the MCU rows
the window's cut covers (with the rows libjpeg's upsampling reads around it: csrc/jpeg/cut.cpp
plan_cut). The record format is csrc/jpeg/record.h's.

The JPEG's last two bytes (its EOI marker) are not fetched unless the window's rows reach them:
opening a record checks they are FF D9, and nothing else reads them (a cut ends in its own EOI),
so :func:`sparse_record` writes FF D9 there; when the last MCU row is fetched, they arrive with it,
under its CRC.

Whole MCU rows are fetched, not only the window's restart intervals in them: each row's CRC covers
the whole row, and a read checks it, so every byte decoded is checked as on local disk.
"""

from __future__ import annotations

import struct

from fastprep.errors import ShardFormatError

META_BYTES = 64
FIRST_READ = 4096  # the first request's bytes: the meta block, restart index and JPEG header of most photos
GAP = 1024  # ranges closer than this are fetched as one


def header_bytes(meta: bytes, length: int, where: str) -> int:
    """How many bytes of the record hold its meta block, restart index and JPEG header (from the
    meta block; the rows' starts come later, from the index: see :func:`window_ranges`)."""
    if len(meta) < META_BYTES or meta[:4] != b"FPRJ":
        raise ShardFormatError(f"{where}: not a JPEG record (bad meta block)")
    jpeg_at, jpeg_size = struct.unpack_from("<II", meta, 8)
    rows, intervals = struct.unpack_from("<II", meta, 24)
    table = META_BYTES + 8 * rows + 2 * intervals
    if table > jpeg_at or jpeg_at + jpeg_size > length or jpeg_size < 4:
        raise ShardFormatError(f"{where}: record meta block is corrupt (JPEG at {jpeg_at}, {jpeg_size} bytes, "
                               f"{rows} MCU rows, in a {length}-byte record)")
    return jpeg_at  # + the JPEG header: known once row 0's start is read (window_ranges)


def _mcu(head: bytes, jpeg_at: int, where: str) -> tuple[int, int, int, int, int]:
    """(MCU height, MCU width, vertical margin, horizontal margin, header end) from the JPEG's SOF."""
    pos = jpeg_at + 2
    while pos + 4 <= len(head):
        marker, seg = head[pos + 1], struct.unpack_from(">H", head, pos + 2)[0]
        if marker in (0xC0, 0xC1):
            n = head[pos + 9]
            if pos + 10 + 3 * n > len(head):
                break
            hs = [head[pos + 11 + 3 * c] >> 4 for c in range(n)]
            vs = [head[pos + 11 + 3 * c] & 15 for c in range(n)]
            if n == 1:
                return 8, 8, 0, 0, pos
            return (8 * max(vs), 8 * max(hs), max(vs) // min(vs) if max(vs) != min(vs) else 0,
                    max(hs) // min(hs) if max(hs) != min(hs) else 0, pos)
        pos += 2 + seg
    raise ShardFormatError(f"{where}: record's JPEG header has no baseline SOF in its first {len(head) - jpeg_at} "
                           f"bytes")


def window_ranges(head: bytes, length: int, window: tuple[int, int, int, int], where: str) -> list[tuple[int, int]]:
    """The byte ranges [start, end) of the record (offsets in it) a decode of `window` = (top, left,
    height, width) reads, given `head`: the record's first bytes, through its JPEG header (see
    :func:`needed_head`). Coalesced, sorted; the whole record when the cut is the whole image."""
    jpeg_at = header_bytes(head, length, where)
    jpeg_size = struct.unpack_from("<I", head, 12)[0]
    height, width, rows, intervals = struct.unpack_from("<IIII", head, 16)
    starts = struct.unpack_from(f"<{rows}I", head, META_BYTES)
    mh, mw, vm, hm, _ = _mcu(head, jpeg_at, where)
    top, left, h, w = window
    r0 = max(0, top - vm) // mh
    r1 = min(rows, -(-min(height, top + h + vm) // mh))
    per_row = intervals // rows if rows else 0
    interval_width = (-(-width // mw) // per_row) * mw if per_row else width
    c0 = max(0, left - hm) // interval_width
    c1 = -(-min(width, left + w + hm) // interval_width)
    if r0 == 0 and r1 == rows and c0 == 0 and c1 >= per_row:
        return [(0, length)]
    row_end = starts[r1] if r1 < rows else jpeg_size
    ranges = [(0, jpeg_at + starts[0]), (jpeg_at + starts[r0], jpeg_at + row_end)]
    return [(min(a, length), min(b, length)) for a, b in coalesce(ranges)]


def needed_head(head: bytes, length: int, where: str) -> int:
    """Bytes of the record's start :func:`window_ranges` needs (its meta, index and JPEG header):
    more than len(head) means: read up to there first."""
    jpeg_at = header_bytes(head, length, where)
    if len(head) < jpeg_at + 4:
        return jpeg_at + 4
    rows = struct.unpack_from("<I", head, 24)[0]
    row0 = struct.unpack_from("<I", head, META_BYTES)[0] if rows else 0
    if jpeg_at + row0 > length:
        raise ShardFormatError(f"{where}: record's first MCU row starts at {jpeg_at + row0}, past its {length} "
                               f"bytes: the record is corrupt")
    return jpeg_at + row0


def coalesce(ranges: list[tuple[int, int]], gap: int = GAP) -> list[tuple[int, int]]:
    """Sorted ranges with those less than `gap` bytes apart (or overlapping) merged."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a - out[-1][1] < gap:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def sparse_record(length: int, parts: list[tuple[int, bytes]]) -> bytearray:
    """A record-sized buffer holding `parts` (offset, bytes) at their offsets (parts[0]: the head),
    the JPEG's EOI marker at its end, zeros elsewhere: the decoder reads only the bytes the window
    needs, each under its CRC."""
    buf = bytearray(length)
    jpeg_at, jpeg_size = struct.unpack_from("<II", parts[0][1], 8)
    buf[jpeg_at + jpeg_size - 2:jpeg_at + jpeg_size] = b"\xff\xd9"  # fetched bytes (rows) overwrite it
    for at, data in parts:
        buf[at:at + len(data)] = data
    return buf
