"""fastprep's exceptions and warnings, all of them, in one module (``fastprep.errors``): what a caller
may catch or filter. The packages re-export the ones their pages show (``fastprep.io.ShardFormatError``
is this module's). Every message names the thing (the argument and value, the file, the shard and
record, the URL) and the cause; none shows a credential. Bottom of the layers: imports nothing of
fastprep."""

from __future__ import annotations

__all__ = [
    "BadSampleWarning",
    "CorruptJpegWarning",
    "CorruptTarError",
    "describe_error",
    "MAX_SUBSTITUTES",
    "NativeUnavailableWarning",
    "NumbaCacheWarning",
    "PackLockedError",
    "PackSourceError",
    "PackWarning",
    "PackWriteError",
    "RemoteAccessError",
    "RemoteReadError",
    "ResumePositionDropped",
    "ShardFormatError",
    "ShardMismatchError",
    "SubstitutesExhausted",
    "TorchVersionError",
]

# The package and its backends.


class TorchVersionError(ImportError):
    """The native library was built for a torch this process cannot run it with."""


class NativeUnavailableWarning(RuntimeWarning):
    """The native backend could not be loaded; fastprep runs on the Numba backend."""


class NumbaCacheWarning(RuntimeWarning):
    """No safe folder for Numba's disk cache: fastprep's Numba kernels compile in each process
    (fastprep/numba_kernels/_cache.py says which folders are safe)."""


# Packs (fastprep.io.pack, PackedDataset): one type per class of failure, each message naming the
# pack, shard, record or item and the cause. They subclass the built-in type a caller would already
# catch (ValueError for bad data, OSError for a destination that cannot be written), so existing
# ``except`` clauses hold.


class ShardFormatError(ValueError):
    """A shard or index that is not what it says: missing, truncated, corrupt, of another pack, or of
    a newer format. The message names the file (and the record, where one read failed)."""


class ShardMismatchError(ShardFormatError):
    """A whole, intact shard that is not the one asked for: another pack's, or another number of
    this pack's (replaced). No retry can mend it, so remote reads give up at once."""


class PackWriteError(OSError):
    """The destination could not be written (a full or read-only disk, ...): ``strerror`` says which
    file and why; the complete shards are kept and a later pack resumes from them."""


class PackSourceError(ValueError):
    """What :func:`fastprep.io.pack` was given cannot be packed as asked: an item of the dataset
    raised or is malformed (the message names the item, the original error is ``__cause__``), or the
    destination holds a pack of another source or options."""


class PackLockedError(RuntimeError):
    """Another live process is writing the same pack (its pid and host are named)."""


class PackWarning(UserWarning):
    """Inputs packed as libjpeg decodes them after recovering from corrupt data (a truncated JPEG).
    (Skipped inputs warn with :class:`fastprep.core._bad_samples.BadSampleWarning` under on_error="warn".)"""


# Packs behind a URL.


class RemoteReadError(OSError):
    """A pack in object storage (or behind any URL) could not be read after the last retry: the
    message names the URL, the shard or record, the tries and the last cause (``__cause__``).
    Credentials are never part of it."""


class RemoteAccessError(RemoteReadError, PermissionError):
    """The store refused access (HTTP 401 or 403, S3's AccessDenied, a bad key or signature): the
    message names the URL and says "access denied: check credentials". Not retried."""


# Files.


class CorruptJpegWarning(UserWarning):
    """libjpeg recovered from corrupt data (a truncated file, a bad Huffman code, ...): the image
    was decoded, but the damaged part holds libjpeg's fill (grey for a truncated file) or garbage.
    ``strict=True`` raises ValueError instead: the default of every source (ImageFolder, JpegFile,
    the dataset sources, pack), as Pillow raises; ``decode_jpeg``'s own default warns, as
    torchvision's ``decode_jpeg``."""


class CorruptTarError(ValueError):
    """A WebDataset tar shard that cannot be read: a header that fails its checksum, a member cut
    short. The message names the shard (and the member)."""


# Bad samples (on_error) and the Loader.
MAX_SUBSTITUTES = 16  # consecutive bad samples replaced before an epoch stops


def describe_error(exc: BaseException) -> str:
    """One line for a bad sample's cause: the exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class BadSampleWarning(UserWarning):
    """A sample that could not be loaded or transformed was skipped (``on_error="warn"``)."""


class SubstitutesExhausted(RuntimeError):
    """Bad sample `index` and every sample tried in its place (`tried`, in order) failed: past
    MAX_SUBSTITUTES consecutive failures (or once there is nothing left to try: `alone` says why
    nothing was) the epoch stops (a dataset failing sample after sample is a bug to see, not to
    skip). `cause`: the bad sample's own error (also ``__cause__``)."""

    def __init__(self, index: int, tried: list[int], cause: BaseException, index_kind: str = "dataset index",
                 alone: str = ""):
        self._args = (index, list(tried), cause, index_kind, alone)
        if not tried:
            what = f"and there was no other sample to try in its place{f' ({alone})' if alone else ''}"
        elif len(tried) < MAX_SUBSTITUTES:
            what = (f"and so did each of the {len(tried)} samples tried in its place, {tried}: every sample there "
                    f"was to try{f' ({alone})' if alone else ''}")
        else:
            what = (f"and so did each of the {len(tried)} samples tried in its place, {tried}: too many "
                    f"consecutive bad samples to skip")
        super().__init__(f"sample {index} ({index_kind}) failed ({describe_error(cause)}), {what}; look at the data "
                         f"(or at the transform) before skipping more")
        self.index, self.tried = index, list(tried)
        self.__cause__ = cause

    def __reduce__(self) -> tuple:  # rebuilt from its arguments (a DataLoader worker pickles it to the main process)
        return type(self), self._args


class ResumePositionDropped(UserWarning):
    """``set_epoch(e)`` after ``load_state_dict`` for an epoch other than the checkpoint's: the
    samples the checkpoint had left of its epoch are not delivered; epoch e starts from its start."""
