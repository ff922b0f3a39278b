"""Reading tar shards in the `webdataset` library's layout: shard names (brace ranges, ``pipe:``
commands), the members of one shard grouped into samples, and members decoded by extension.

A shard is a tar file whose members are named ``<key>.<ext>``: the key runs to the first dot of
the file name (``dir/0001.seg.png`` is key ``dir/0001``, extension ``seg.png``), consecutive
members with the same key make one sample, extensions are lower-cased, and members named
``__...__`` are metadata, skipped: webdataset's ``base_plus_ext`` and ``group_by_keys``.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from fastprep.errors import CorruptTarError
from fastprep.io._source import image_from_bytes

KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
META = re.compile(r"__[^/]*__($|/)")
# webdataset's default decoders (autodecode.basichandlers / imagehandler), by the last extension.
IMAGE_EXTS = frozenset("jpg jpeg png ppm pgm pbm bmp tif tiff webp img image".split())
INT_EXTS = frozenset("cls cls2 class count index inx id".split())
TEXT_EXTS = frozenset("txt text transcript".split())
JSON_EXTS = frozenset(("json", "jsn"))
BRACES = re.compile(r"\{([^{}]*)\}")


def expand_urls(urls: Any) -> list[str]:
    """Shard names: a list (of str or paths) as given, or a string with brace ranges and lists as
    webdataset (braceexpand) reads them: ``shard-{000..009}.tar``, ``{a,b}-{0..3}.tar``; ``::``
    between several such patterns, as in webdataset's url strings."""
    if isinstance(urls, (str, os.PathLike)):
        return [name for pattern in os.fspath(urls).split("::") for name in _braces(pattern)]
    if isinstance(urls, (list, tuple)) and all(isinstance(u, (str, os.PathLike)) for u in urls):
        return [os.fspath(u) for u in urls]
    raise ValueError(f"expected urls to be a string (brace ranges allowed) or a list of strings, got {urls!r}")


def _braces(word: str) -> list[str]:
    m = BRACES.search(word)
    if m is None:
        return [word]
    head, body, tail = word[:m.start()], m.group(1), word[m.end():]
    r = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if r:
        a, b = r.groups()
        width = max(len(a), len(b)) if any(s.startswith("0") and s != "0" for s in (a, b)) else 0  # braceexpand's
        step = 1 if int(b) >= int(a) else -1
        options = [f"{k:0{width}d}" for k in range(int(a), int(b) + step, step)]
    else:
        options = body.split(",")
    return [x for opt in options for x in _braces(head + opt + tail)]


class _Pipe(io.RawIOBase):
    """The output of ``pipe:<command>`` (webdataset's way to stream from S3, HTTP, ...): a
    command that fails is an error naming it, never a short shard read as complete."""

    def __init__(self, url: str):
        self.url, self.eof = url, False
        self.proc = subprocess.Popen(url[5:], shell=True, stdout=subprocess.PIPE)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.proc.stdout.readinto(b)
        self.eof = n == 0
        return n

    def close(self) -> None:
        if self.closed:
            return
        if not self.eof:
            self.proc.kill()  # the reader stopped early: the command's status says nothing
        self.proc.stdout.close()
        code = self.proc.wait()
        super().close()
        if self.eof and code != 0:
            raise OSError(f"{self.url}: the command exited with status {code}")


def open_url(url: str) -> Any:
    """A binary stream of shard `url`: a local path, or ``pipe:<shell command>``."""
    return _Pipe(url) if url.startswith("pipe:") else open(url, "rb")


class _CheckedTarInfo(tarfile.TarInfo):
    """tarfile stops quietly at a header it cannot read (a bad checksum, a file cut at a member's
    end) as if the archive ended there, dropping the samples after it. Only an all-zero block
    (the end-of-archive marker) ends a shard here; anything else is an error."""

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> tarfile.TarInfo:
        try:
            return super().fromtarfile(tar)
        except tarfile.EOFHeaderError:
            raise
        except tarfile.EmptyHeaderError:
            raise CorruptTarError(f"truncated: the file ends at byte {tar.offset} without the end-of-archive "
                                  "marker") from None
        except tarfile.HeaderError as exc:
            raise CorruptTarError(f"corrupt tar header at byte {tar.offset}: {exc}") from None


def shard_members(url: str, opener: Callable[[str], Any] = open_url) -> Iterator[tuple[str, str, bytes]]:
    """(key, extension, bytes) of each member of shard `url` in order, metadata skipped. A corrupt
    or truncated shard raises ValueError naming it and the last member read."""
    last = None
    try:
        # 64 KiB reads (tarfile's default of 10 KiB costs 0.15 ms a 300 KB sample, this 0.09)
        with opener(url) as f, tarfile.open(fileobj=f, mode="r|*", tarinfo=_CheckedTarInfo, bufsize=1 << 16) as tar:
            while (info := tar.next()) is not None:
                tar.members = []  # a stream: keep no index
                if not info.isreg() or META.match(info.name):
                    continue
                m = KEY_EXT.match(info.name)
                if m is None:
                    continue  # no extension: not a sample member (webdataset skips it too)
                data = tar.extractfile(info).read()
                last = info.name
                yield m.group(1), m.group(2).lower(), data
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        after = f" after member {last!r}" if last else " at its first member"
        raise ValueError(f"{url}: corrupt or truncated shard{after}: {exc}") from exc


def grouped(url: str, members: Iterator[tuple[str, str, bytes]]) -> Iterator[tuple[str, dict[str, bytes]]]:
    """(key, {extension: bytes}) per sample: consecutive members with the same key."""
    key, sample = None, {}
    for k, ext, data in members:
        if k != key:
            if sample:
                yield key, sample
            key, sample = k, {}
        if ext in sample:
            raise ValueError(f"{url}: sample {key!r} has two {ext!r} members")
        sample[ext] = data
    if sample:
        yield key, sample


class MemberDecoder:
    """Decodes a sample's members by extension (the last part: ``seg.png`` is a PNG): images as
    JpegFiles (`roi`) or decoded pixels, class numbers as ints, json, text, .npy arrays; other
    extensions stay bytes (pickles are never loaded unless `decoders` says so). `decoders`
    ({extension: callable(bytes)}) adds or replaces any of these."""

    def __init__(self, who: str, *, roi: bool, mode: str, layout: str, strict: bool,
                 decoders: dict[str, Callable[[bytes], Any]] | None, exif: bool = False):
        self.who, self.roi, self.mode, self.layout, self.strict, self.exif = who, roi, mode, layout, strict, exif
        self.decoders = dict(decoders or {})

    def __call__(self, url: str, key: str, ext: str, data: bytes) -> Any:
        name = f"{url}:{key}.{ext}"
        last = ext.rsplit(".", 1)[-1]
        custom = self.decoders.get(ext, self.decoders.get(last))
        try:
            if custom is not None:
                return custom(data)
            if last in IMAGE_EXTS:
                return image_from_bytes(self.who, data, name, roi=self.roi, mode=self.mode, layout=self.layout,
                                        strict=self.strict, exif=self.exif)
            if last in INT_EXTS:
                return int(data)
            if last in TEXT_EXTS:
                return data.decode("utf-8")
            if last in JSON_EXTS:
                return json.loads(data)
            if last == "npy":
                return np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            if name in str(exc):
                raise
            raise ValueError(f"{self.who}: {name}: cannot decode the member ({len(data)} bytes): {exc}") from exc
        return data
