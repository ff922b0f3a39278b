"""fastprep.io's errors: one type per class of failure, each message naming the pack, shard, record
or item and the cause. They subclass the built-in type a caller would already catch (ValueError for
bad data, OSError for a destination that cannot be written), so existing ``except`` clauses hold.
"""

from __future__ import annotations


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


class RemoteReadError(OSError):
    """A pack in object storage (or behind any URL) could not be read after the last retry: the
    message names the URL, the shard or record, the tries and the last cause (``__cause__``).
    Credentials are never part of it."""


class RemoteAccessError(RemoteReadError, PermissionError):
    """The store refused access (HTTP 401 or 403, S3's AccessDenied, a bad key or signature): the
    message names the URL and says "access denied: check credentials". Not retried."""
