"""`python -m fastprep pack SRC DEST`: fastprep.io.pack from the command line. Argument errors are
one line on stderr with exit status 2; a destination that cannot be written, holds a pack of
another source, or is being written by another pack: one line and 1."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, NoReturn

from fastprep.tools.cli_types import at_least

PROG = "python -m fastprep pack"
HELP = """\
Pack an image folder (class subfolders, as torchvision's ImageFolder) into a few shard files and an
index, read by fastprep.io.PackedDataset: JPEGs losslessly transcoded with restart markers, so a
crop window decodes from the restart intervals covering it only; or raw pixels (--mode raw).
Resumable: run it again after an interruption and it goes on from the last complete shard (DEST
must hold a pack of the same SRC and options: anything else is refused, unless --overwrite).

example:
  python -m fastprep pack train/ train.packed
"""


def _one_line_error(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def add_parser(sub) -> None:
    p = sub.add_parser("pack", help="pack an image folder into shards read by window (fastprep.io.PackedDataset)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = _one_line_error  # one line, not argparse's usage block
    p.add_argument("src", metavar="SRC", help="the image folder (one subfolder per class)")
    p.add_argument("dest", metavar="DEST", help="the folder to write (an interrupted pack there is resumed)")
    p.add_argument("--mode", choices=("jpeg", "raw"), default="jpeg",
                   help="jpeg: transcode JPEGs losslessly with restart markers (default); raw: uint8 pixels")
    p.add_argument("--max-side", type=at_least(1),
                   help="shrink images with a longer side to this many pixels (lossy; default: keep every pixel)")
    p.add_argument("--threads", type=at_least(1), help="converting threads (default: every core)")
    p.add_argument("--quality", type=at_least(1), default=90,
                   help="JPEG quality for inputs that are encoded: non-JPEGs, and --max-side shrinks (default 90)")
    p.add_argument("--non-jpeg", choices=("encode", "raw"), default="encode",
                   help="what --mode jpeg does with PNG, BMP, ...: encode once as JPEG (default) or store raw")
    p.add_argument("--shard-mb", type=at_least(1), default=256, help="MiB per shard file (default 256)")
    p.add_argument("--restart", type=at_least(1), default=4,
                   help="target MCUs per restart interval (default 4; it must divide the MCU row, so it varies)")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the pack DEST holds and pack anew (default: resume a pack of the same SRC and "
                        "options, refuse any other)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import fastprep.io as fio  # noqa: PLC0415 (the CLI starts fast: each command imports what it runs)
    from fastprep.io.errors import PackLockedError, PackSourceError, PackWriteError  # noqa: PLC0415
    from fastprep.io.pack import PackWarning  # noqa: PLC0415

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PackWarning)  # the summary lists what was skipped
            summary = fio.pack(args.src, args.dest, mode=args.mode, max_side=args.max_side, threads=args.threads,
                               quality=args.quality, non_jpeg=args.non_jpeg, shard_bytes=args.shard_mb << 20,
                               restart=args.restart, progress=not args.no_progress, overwrite=args.overwrite)
    except PackWriteError as exc:
        print(f"{PROG}: error: {exc.strerror.removeprefix('pack: ')}", file=sys.stderr)
        return 1
    except (PackSourceError, PackLockedError) as exc:
        print(f"{PROG}: error: {str(exc).removeprefix('pack: ')}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError, RuntimeError) as exc:
        print(f"{PROG}: error: {str(exc).removeprefix('pack: ')}", file=sys.stderr)
        return 2
    print_summary(summary)
    return 0


def print_summary(s: Any, stream: Any = None) -> None:
    """The summary as `python -m fastprep pack` prints it."""
    from fastprep.io.pack_sources import shown  # noqa: PLC0415

    out = stream or sys.stdout
    ratio = f", {s.packed_bytes / s.input_bytes:.3f}x the input files" if s.input_bytes else ""
    print(f"packed {s.records} images into {s.shards} shards in {s.dest}: {s.packed_bytes:,} bytes{ratio}, "
          f"{s.seconds:.1f} s" + (f" ({s.resumed} found done)" if s.resumed else ""), file=out)
    for name, why in s.skipped:
        print(f"  skipped {shown(name)}: {why}", file=out)
