"""`import fastprep.ray`: Ray Data reading packs and running the fused pipeline. The public names
of fastprep.integrations._ray, where the code lives in its layer (patch them there); this module
only gives them the short name the docs use. Needs `pip install 'fastprep[ray]'`."""

from fastprep.integrations._ray import (
    CompactCollateFn,
    CompactMap,
    PackedImages,
    iter_compact_batches,
    read_packed,
    to_compact_batch,
)

__all__ = ["CompactCollateFn", "CompactMap", "PackedImages", "iter_compact_batches", "read_packed", "to_compact_batch"]
