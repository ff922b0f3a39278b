"""`python -m fastprep pack SRC DEST`: fastprep.io.pack from the command line. Argument errors are
one line on stderr with exit status 2; a destination that cannot be written, holds a pack of
another source, or is being written by another pack: one line and 1."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, NoReturn

from fastprep.tools.cli._arg_types import at_least

PROG = "python -m fastprep pack"
HELP = """\
Pack an image folder (class subfolders, as torchvision's ImageFolder) into a few shard files and an
index, read by fastprep.io.PackedDataset: JPEGs losslessly transcoded with restart markers, so a
crop window decodes from the restart intervals covering it only; PNGs and other images as raw
pixels, losslessly (or encoded once as JPEG: --non-jpeg encode); or everything as raw pixels
(--mode raw). A file that cannot be packed stops it, named (--on-error skip leaves such files out,
listed in the summary).
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
    p.add_argument("--non-jpeg", choices=("raw", "encode"), default="raw",
                   help="what --mode jpeg does with PNG, BMP, ...: store raw pixels, lossless (default), or encode "
                        "once as JPEG at --quality (lossy, smaller)")
    p.add_argument("--on-error", choices=("raise", "skip", "warn"), default="raise",
                   help="a file that cannot be packed: raise stops (default), skip leaves it out (named in the "
                        "summary), warn also warns on stderr")
    p.add_argument("--no-strict", action="store_true",
                   help="pack a JPEG with corrupt data libjpeg recovers from (a truncated file) as it decodes, grey "
                        "fill and all (default: it cannot be packed, as Pillow raises on it; --on-error decides)")
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
    from fastprep.errors import (  # noqa: PLC0415
        BadSampleWarning,  # noqa: PLC0415
        PackLockedError,
        PackSourceError,
        PackWarning,  # noqa: PLC0415
        PackWriteError,
    )

    def one_line(message: Any, *_: Any, **__: Any) -> None:  # --on-error warn: each as it is met, no source line
        print(f"{PROG}: warning: {str(message).removeprefix('pack: ')}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line
            warnings.simplefilter("always", BadSampleWarning)  # shown, whatever the filters (pack names each once)
            warnings.simplefilter("ignore", PackWarning)  # the summary lists what libjpeg recovered
            summary = fio.pack(args.src, args.dest, mode=args.mode, max_side=args.max_side, threads=args.threads,
                               quality=args.quality, non_jpeg=args.non_jpeg, shard_bytes=args.shard_mb << 20,
                               restart=args.restart, progress=not args.no_progress, overwrite=args.overwrite,
                               on_error=args.on_error, strict=not args.no_strict)
    except PackWriteError as exc:
        print(f"{PROG}: error: {exc.strerror.removeprefix('pack: ')}", file=sys.stderr)
        return 1
    except (PackSourceError, PackLockedError) as exc:
        message = str(exc).removeprefix("pack: ").replace("on_error='skip'", "--on-error skip").replace(
            "pass overwrite=True", "pass --overwrite")
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError, RuntimeError) as exc:
        print(f"{PROG}: error: {str(exc).removeprefix('pack: ')}", file=sys.stderr)
        return 2
    print_summary(summary)
    return 0


def print_summary(s: Any, stream: Any = None) -> None:
    """The summary as `python -m fastprep pack` prints it: totals, then each kind of input with its
    count and bytes in -> out, then what was skipped and why."""
    out = stream or sys.stdout
    for line in s.describe():
        print(line, file=out)
