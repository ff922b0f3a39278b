"""Batches: the compact batch (compact) and its collate, label dtypes (labels), the Loader's slots
(slots, shared_slots), the device prefetcher (device_prefetcher), the GPU decode split's window
batch (window_batch)."""

from fastprep.core.moved import module_names

# fastprep.batch was a module before the re-filing (now fastprep.batch.compact): its names still read here.
__getattr__ = module_names(__name__, "compact", frozenset([
    'CompactBatch', 'Leaf', 'TensorHolder', 'check_bool', 'check_int', 'check_real', 'leaves', 'to_dtype_image',
    'tree_map', 'tv_module',
]))
