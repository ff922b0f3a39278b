"""fastprep.io: image files to tensors where it is cheapest.

- :func:`decode_jpeg`: libjpeg-turbo in the calling thread without the GIL, a crop window only
  (same bits as decoding all and cropping), RGB, YCbCr straight from the JPEG, or GRAY.
- :class:`ImageFolder`: torchvision's folder layout, decoded in ``load_raw`` (fastprep.Loader's
  threads); ``roi=True`` hands out :class:`JpegFile` s that decode only a crop's window.
- :func:`decode_jpeg_batch`: batched nvJPEG decoding on a CUDA device through torchvision.
- Datasets users already have, their images read by window (docs/sources.md):
  :class:`WebDataset` (tar shards; an IterableDataset split across ranks and readers) and
  :func:`write_webdataset`, :class:`LMDBDataset` (``pip install lmdb``), :class:`HDF5Dataset`
  (``pip install h5py``; chunked uint8 arrays read only the chunks of a window: :class:`HDF5Image`).
- :func:`pack` / ``python -m fastprep pack``: a folder or dataset into a few shard files + an index;
  :class:`PackedDataset` reads them by window: a JPEG window from only the restart intervals
  covering it (:class:`PackedJpeg`), raw pixels from a memory map (:class:`PackedRaw`);
  :func:`decode_window_batch` decodes windows' cuts on a GPU (docs/real-files.md). A pack may live
  at a URL (s3://, gs://, az://, http(s)://: :mod:`fastprep.io.remote`, docs/remote.md).

The CPU decoder is the native module fastprep._jpeg, built when CMake finds libjpeg-turbo >= 1.5;
:func:`available` says whether it was, and without it every decode raises a RuntimeError saying
how to get it. The rest of fastprep does not need it. Headers claiming more pixels than
``fastprep.io.jpeg.MAX_IMAGE_PIXELS`` (Pillow's limit; None lifts it) are refused.

``exif=True`` (decode_jpeg, JpegFile, every source) turns photos upright by their EXIF orientation,
as torchvision's ``decode_jpeg(apply_exif_orientation=True)``; off by default, as torchvision's
ImageFolder (:func:`jpeg_orientation`, :class:`OrientedImage`). ``on_error`` on the map-style
sources skips bad samples (fastprep.core._bad_samples).
"""

from fastprep.errors import (
    CorruptJpegWarning,
    PackLockedError,
    PackSourceError,
    PackWarning,
    PackWriteError,
    RemoteReadError,
    ShardFormatError,
)
from fastprep.io._store import LocalStore, Store, known_schemes, open_store, register_store
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import JpegHeader, available, decode_jpeg, libjpeg_turbo_version, read_jpeg_header
from fastprep.io.jpeg._exif import jpeg_orientation
from fastprep.io.jpeg._file import JpegFile
from fastprep.io.jpeg._gpu import decode_jpeg_batch, decode_window_batch
from fastprep.io.jpeg._oriented import OrientedImage, oriented
from fastprep.io.jpeg._window_cut import WindowCut
from fastprep.io.packed._dataset import PackedDataset
from fastprep.io.packed._pack import PackSummary
from fastprep.io.packed._records import PackedImage, PackedJpeg, PackedRaw
from fastprep.io.packed._upload import pack, upload_pack  # pack: a local folder or a URL, the one pack
from fastprep.io.sources._folder import IMG_EXTENSIONS, ImageFolder, find_classes, make_dataset
from fastprep.io.sources._hdf5 import HDF5Dataset, HDF5Image
from fastprep.io.sources._lmdb import LMDBDataset
from fastprep.io.sources._webdataset import WebDataset
from fastprep.io.sources._webdataset_writer import write_webdataset

__all__ = [
    "HDF5Dataset", "HDF5Image", "IMG_EXTENSIONS", "CorruptJpegWarning", "ImageFolder", "JpegFile", "JpegHeader",
    "LocalStore", "Store",
    "LMDBDataset", "OrientedImage", "PackLockedError", "PackSourceError", "PackSummary", "PackWarning",
    "PackWriteError", "PackedDataset", "PackedImage", "PackedJpeg", "PackedRaw", "RemoteReadError",
    "ShardFormatError", "WebDataset", "WindowCut", "WindowedImage", "available", "decode_jpeg", "decode_jpeg_batch",
    "decode_window_batch", "find_classes", "jpeg_orientation", "known_schemes", "libjpeg_turbo_version", "make_dataset",
    "open_store", "oriented",
    "pack", "read_jpeg_header", "register_store", "upload_pack", "write_webdataset",
]
