"""What :func:`fastprep.io.pack` did, per kind of input: :class:`PackSummary` and its printout.

Each record is counted under the one kind that says what became of its input (``KINDS``), with
the input's bytes and the record's; skipped items are counted and named. The counts of a resumed
pack cover its kept shards too (each shard records its own), except shards written by a fastprep
older than these counts (``unrecorded``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastprep.io._pack_format import shown

# kind -> how the printout names it. "jpeg_*": the input was a JPEG; "non_jpeg_*": PNG, BMP, pixels...
KINDS = {
    "jpeg_transcoded": "JPEGs transcoded losslessly (same DCT coefficients, restart markers added)",
    "jpeg_reencoded": "JPEGs shrunk to max_side and re-encoded (lossy)",
    "jpeg_raw": "JPEGs decoded and stored as raw pixels (mode='raw')",
    "non_jpeg_raw": "non-JPEGs stored as raw pixels (lossless)",
    "non_jpeg_encoded": "non-JPEGs encoded as JPEG (lossy, non_jpeg='encode')",
}


@dataclass
class KindStats:
    """How many inputs of one kind, their bytes (files or arrays as given) and their records' bytes."""

    count: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    def add(self, bytes_in: int, bytes_out: int) -> None:
        self.count += 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out


@dataclass
class PackSummary:
    """What :func:`pack` did.

    Attributes:
        kinds: per kind of input (``pack_summary.KINDS``: "jpeg_transcoded", "jpeg_reencoded",
            "jpeg_raw", "non_jpeg_raw", "non_jpeg_encoded"), a :class:`KindStats`; kinds not met are absent.
        skipped: (name, why) of each input left out (``on_error="skip"`` or ``"warn"``).
        skipped_bytes: the input bytes of those (a folder's files; 0 for a dataset's items).
        shrunk: how many records `max_side` shrank (counted in their kinds too).
        unrecorded: records of kept shards written by an older fastprep (their kinds are unknown).
        bad_samples: the skipped items as a :class:`fastprep.core._bad_samples.BadSamples` (indices, causes).
    """

    dest: str
    records: int
    shards: int
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (name, libjpeg's words)
    input_bytes: int = 0  # of the source files (a folder's), else 0
    packed_bytes: int = 0  # of the shards and the index
    resumed: int = 0  # records found done in shards of an interrupted run
    seconds: float = 0.0
    kinds: dict[str, KindStats] = field(default_factory=dict)
    skipped_bytes: int = 0
    shrunk: int = 0
    unrecorded: int = 0
    on_error: str = "raise"
    bad_samples: Any = None

    def describe(self) -> list[str]:
        """The summary as lines of text (what ``python -m fastprep pack`` prints; names escaped)."""
        ratio = f", {self.packed_bytes / self.input_bytes:.3f}x the input files" if self.input_bytes else ""
        lines = [f"packed {self.records} images into {self.shards} shards in {self.dest}: {self.packed_bytes:,} "
                 f"bytes{ratio}, {self.seconds:.1f} s" + (f" ({self.resumed} found done)" if self.resumed else "")]
        for kind, label in KINDS.items():
            if kind in self.kinds:
                k = self.kinds[kind]
                lines.append(f"  {label}: {k.count}, {k.bytes_in:,} -> {k.bytes_out:,} bytes")
        if self.shrunk:
            lines.append(f"  shrunk to max_side (Lanczos): {self.shrunk}")
        if self.unrecorded:
            lines.append(f"  in shards of an older fastprep (their kinds were not recorded): {self.unrecorded}")
        if self.skipped:
            size = f", {self.skipped_bytes:,} bytes" if self.skipped_bytes else ""
            lines.append(f"  skipped (on_error={self.on_error!r}): {len(self.skipped)}{size}")
            lines += [f"  skipped {shown(name)}: {why}" for name, why in self.skipped]
        lines += [f"  packed as libjpeg decodes it after recovering from corrupt data: {shown(name)}: {what}"
                  for name, what in self.warnings]
        return lines


def shard_kinds(stats: dict[str, KindStats], skipped_bytes: int, shrunk: int) -> dict:
    """What a shard's JSON records of its kinds: {"kinds": {kind: [count, in, out]}, ...}."""
    return {"kinds": {k: [s.count, s.bytes_in, s.bytes_out] for k, s in stats.items()},
            "skipped_bytes": skipped_bytes, "shrunk": shrunk}


def add_shard_kinds(summary: PackSummary, meta: dict, records: int) -> None:
    """Add one shard's recorded kinds to `summary` (a shard of an older fastprep: `unrecorded`)."""
    if "kinds" not in meta:
        summary.unrecorded += records
        return
    for kind, (count, bytes_in, bytes_out) in meta["kinds"].items():
        k = summary.kinds.setdefault(kind, KindStats())
        k.count, k.bytes_in, k.bytes_out = k.count + count, k.bytes_in + bytes_in, k.bytes_out + bytes_out
    summary.skipped_bytes += meta.get("skipped_bytes", 0)
    summary.shrunk += meta.get("shrunk", 0)
