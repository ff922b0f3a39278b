"""fastprep.io.LMDBDataset: an LMDB of encoded images as a map-style dataset (``pip install lmdb``).

The layouts in use, all read without configuration:

- Keys. A ``__keys__`` entry (a pickled list of the keys, as folder2lmdb-style writers store) gives
  the order. Otherwise every key but the ``__name__`` metadata ones (``__len__``, ...) is listed
  once when the dataset is made: keys that are all decimal numbers (``b"7"``, ``b"00000007"``) in
  their numeric order, any others in LMDB's (bytewise) order. `keys` overrides both.
- Values. The encoded image's bytes (JPEG, PNG, ...: the content decides the decoder); or a pickle
  of the bytes, of a tuple ``(bytes, label, ...)``, or of a dict holding the image under one of
  ``image img jpg jpeg png data`` and the label under one of ``label target cls class``. `labels`
  (a sequence) gives labels that are not in the values. Anything else: `decode_value`.

Pickles are loaded (``value="auto"``): open only LMDBs you trust; ``value="bytes"`` never unpickles.

Threads and processes: each process opens the environment once, read-only, on first use, shared
by every LMDBDataset of that path (LMDB allows one per file per process); a DataLoader worker
opens its own after the fork and never uses its parent's (an LMDB environment must not cross a
fork). Each read runs in its own read transaction, so any number of threads may read at once. It
is opened with ``lock=False`` (no reader table: fine for a database nobody writes while you
train; pass ``open_kwargs={"lock": True}`` otherwise; the first dataset of a path sets them).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastprep.core._args import check_bool
from fastprep.io._source import ImageSource, image_from_bytes, optional_module
from fastprep.io.jpeg import check_image_args

IMAGE_KEYS = ("image", "img", "jpg", "jpeg", "png", "data")
LABEL_KEYS = ("label", "target", "cls", "class")
PICKLE_PROTO = 0x80  # the first byte of every pickle of protocol 2 and later


# The environments open in this process, by (process id, real path): LMDB allows one environment
# per file per process, so every LMDBDataset of a path shares it.
_ENVS: dict[tuple[int, str], Any] = {}
_ENVS_LOCK = threading.Lock()


def process_env(path: str, kwargs: dict[str, Any]) -> Any:
    """This process's environment of `path`, opened read-only on first use. In a forked child
    (a DataLoader worker) the parent's environment, inherited, is closed first: lmdb refuses to
    open a file its process already has open, and closing the child's copy of the mapping leaves
    the parent's untouched (LMDB clears only the closing process's reader slots)."""
    me, real = os.getpid(), os.path.realpath(path)
    env = _ENVS.get((me, real))
    if env is None:
        with _ENVS_LOCK:
            env = _ENVS.get((me, real))
            if env is None:
                for key in [k for k in _ENVS if k[1] == real]:
                    _ENVS.pop(key).close()
                env = _ENVS[(me, real)] = open_env(path, kwargs)
    return env


def close_process_env(path: str) -> None:
    with _ENVS_LOCK:
        env = _ENVS.pop((os.getpid(), os.path.realpath(path)), None)
    if env is not None:
        env.close()


def open_env(path: str, kwargs: dict[str, Any]) -> Any:
    lmdb = optional_module("lmdb", "lmdb", "LMDBDataset")
    options = {"readonly": True, "lock": False, "readahead": False, "meminit": False,
               "subdir": os.path.isdir(path), "max_readers": 1024, **kwargs}
    try:
        return lmdb.open(path, **options)
    except lmdb.Error as exc:
        raise ValueError(f"LMDBDataset: cannot open {path!r} as an LMDB: {exc}") from exc


class NumberedKeys(Sequence):
    """Keys ``str(i)`` (width 0) or zero-padded to `width`, for i in range(n): the usual layout,
    kept as a formula instead of a list of n keys."""

    def __init__(self, n: int, width: int):
        self.n, self.width = n, width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> bytes:
        return f"{i:0{self.width}d}".encode("ascii")


def list_keys(env: Any, unpickle: bool) -> Sequence[bytes]:
    with env.begin() as txn:
        stored = txn.get(b"__keys__") if unpickle else None
        if stored is not None:
            return [k.encode() if isinstance(k, str) else bytes(k) for k in pickle.loads(stored)]
        keys = [bytes(k) for k in txn.cursor().iternext(keys=True, values=False)
                if not (k.startswith(b"__") and k.endswith(b"__"))]
    if not keys or not all(k.isdigit() for k in keys):
        return keys
    keys.sort(key=int)
    n = len(keys)
    if int(keys[0]) == 0 and int(keys[-1]) == n - 1 and len({int(k) for k in keys}) == n:
        if all(k == str(i).encode() for i, k in enumerate(keys)):
            return NumberedKeys(n, 0)
        if len({len(k) for k in keys}) == 1:
            return NumberedKeys(n, len(keys[0]))
    return keys


class LMDBDataset(ImageSource):
    """Images (and labels) in an LMDB, read by key (see the module's docstring for the layouts).

    ``load_raw(i)`` reads value i in its own read transaction and returns ``(image, label, ...)``
    (or the image alone when there is no label): a JpegFile with ``roi=True`` (decoded by window
    by fastprep's transforms), else decoded pixels. ``dataset[i]`` applies the transforms.
    Across ranks: ``DistributedSampler(dataset)`` (or the Loader's `sampler`) splits the indices.

    Args:
        path: the environment's directory (or its data file).
        transform, target_transform: as in :class:`fastprep.io.ImageFolder`.
        keys: the keys of items 0..n-1 (str or bytes); default: found as the module says.
        value: "auto" (image bytes or a pickle), "bytes" (image bytes, never unpickled) or "pickle".
        decode_value: ``callable(value bytes)`` returning image bytes, ``(image bytes, label, ...)``
            or a dict as above, for other layouts (protobuf Datums, msgpack, ...).
        labels: a label per item, for LMDBs whose values hold only the image.
        roi, mode, layout, strict, exif: as in ImageFolder (default roi=True; strict=True: a corrupt
            JPEG is a bad sample, False decodes it with a CorruptJpegWarning).
        on_error: a value that cannot be read or decoded: "raise" (default), "skip" or "warn", as in
            ImageFolder (recorded in ``bad_samples`` under ``path[key]``).
        open_kwargs: passed on to ``lmdb.open`` (over readonly=True, lock=False, readahead=False).

    Example:
        >>> ds = LMDBDataset("train.lmdb")
        >>> loader = fastprep.Loader(ds, 256, transform=train_tf, shuffle=True)
    """

    source_kind = "windowed"  # what it is, in fastprep.monitor's words: records read by window

    def __init__(self, path: str | os.PathLike, transform: Callable | None = None,
                 target_transform: Callable | None = None, *, keys: Sequence[str | bytes] | None = None,
                 value: str = "auto", decode_value: Callable[[bytes], Any] | None = None,
                 labels: Sequence[int] | None = None, roi: bool = True, mode: str = "RGB", layout: str = "CHW",
                 strict: bool = True, exif: bool = False, on_error: str = "raise",
                 open_kwargs: dict[str, Any] | None = None):
        check_image_args("LMDBDataset", mode, layout)
        self.exif = check_bool("LMDBDataset", "exif", exif)
        self.set_on_error("LMDBDataset", on_error)
        if value not in ("auto", "bytes", "pickle"):
            raise ValueError(f"LMDBDataset: expected value to be 'auto', 'bytes' or 'pickle', got {value!r}")
        self.path = os.fspath(path)
        self.transform, self.target_transform = transform, target_transform
        self.value, self.decode_value, self.labels = value, decode_value, labels
        self.roi, self.mode, self.layout = roi, mode, layout
        self.strict = check_bool("LMDBDataset", "strict", strict)
        self.open_kwargs = dict(open_kwargs or {})
        if keys is not None:
            self.keys = [k.encode() if isinstance(k, str) else bytes(k) for k in keys]
        else:
            self.keys = list_keys(process_env(self.path, self.open_kwargs), value != "bytes")
        if labels is not None and len(labels) != len(self.keys):
            raise ValueError(f"LMDBDataset: {len(labels)} labels for {len(self.keys)} items in {self.path!r}")

    def __len__(self) -> int:
        return len(self.keys)

    def key_name(self, i: int) -> str:
        return f"{self.path}[{self.keys[i].decode('utf-8', 'backslashreplace')}]"

    def sample_name(self, i: int) -> str:
        return self.key_name(i)

    def read_item(self, i: int) -> Any:
        """Item i before the transforms: ``(image, label, ...)`` or the image (``load_raw(i)`` is
        this under the `on_error` policy)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"LMDBDataset: index {i} is out of range for {len(self)} items in {self.path!r}")
        i %= len(self)
        key = self.keys[i]
        env = process_env(self.path, self.open_kwargs)
        with env.begin(buffers=False) as txn:  # one read transaction per call: any thread
            data = txn.get(key)
        name = self.key_name(i)
        if data is None:
            raise KeyError(f"LMDBDataset: {name}: key {key!r} (item {i}) is not in the database")
        item = self.unpack(data, name, i)
        if self.labels is not None and not isinstance(item, tuple):
            item = (item, self.labels[i])
        return item

    def unpack(self, data: bytes, name: str, i: int) -> Any:
        """A value as (image, label, ...) or the image, images decoded or made JpegFiles."""
        if self.decode_value is not None:
            obj = self.decode_value(data)
        elif self.value == "pickle" or (self.value == "auto" and data[:1] == bytes([PICKLE_PROTO])):
            try:
                obj = pickle.loads(data)
            except Exception as exc:  # a truncated or corrupt pickle raises any of several types
                raise ValueError(f"LMDBDataset: {name} (item {i}): cannot unpickle the value ({len(data)} bytes): "
                                 f"{type(exc).__name__}: {exc}") from exc
        else:
            obj = data
        if isinstance(obj, dict):
            image = next((obj[k] for k in IMAGE_KEYS if k in obj), None)
            label = next((obj[k] for k in LABEL_KEYS if k in obj), None)
            if image is None:
                raise ValueError(f"LMDBDataset: {name} (item {i}): the value is a dict without an image under "
                                 f"{IMAGE_KEYS} (it has {sorted(map(str, obj))}); pass decode_value")
            obj = (image,) if label is None else (image, label)
        if isinstance(obj, (tuple, list)) and obj:
            rest = [int(v) if isinstance(v, np.integer) else v for v in obj[1:]]
            return (self.image(obj[0], name, i), *rest) if rest else self.image(obj[0], name, i)
        return self.image(obj, name, i)

    def image(self, obj: Any, name: str, i: int) -> Any:
        if isinstance(obj, (bytes, bytearray, memoryview)) or (isinstance(obj, np.ndarray) and obj.dtype == np.uint8
                                                               and obj.ndim == 1):
            if len(obj) == 0:
                raise ValueError(f"LMDBDataset: {name} (item {i}): the image is empty (0 bytes)")
            return image_from_bytes("LMDBDataset", obj, name, roi=self.roi, mode=self.mode, layout=self.layout,
                                    strict=self.strict, exif=self.exif)
        if self.decode_value is not None:
            return obj  # already an image (decoded pixels, a PIL image, a WindowedImage)
        raise ValueError(f"LMDBDataset: {name} (item {i}): expected the image's bytes, got a "
                         f"{type(obj).__name__}; pass decode_value")

    def close(self) -> None:
        """Close this process's environment of the path, shared by every LMDBDataset of it here
        (the next read opens it again); not while another thread reads it."""
        close_process_env(self.path)

    def __repr__(self) -> str:
        return f"LMDBDataset({self.path!r}, {len(self)} items, roi={self.roi}, mode={self.mode!r})"
