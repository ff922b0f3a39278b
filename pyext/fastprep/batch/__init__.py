"""Batches: the compact batch and its collate, the Loader's slots, the device prefetcher, the GPU
decode split's window batch."""

_REPLACED_NAMES = frozenset([
    'CompactBatch', 'Leaf', 'TensorHolder', 'check_bool', 'check_int', 'check_real', 'leaves', 'to_dtype_image',
    'tree_map', 'tv_module',
])


def __getattr__(name: str):
    """fastprep.batch.NAME as before the re-filing (the module this package
    replaced is fastprep.batch.compact)."""
    if name not in _REPLACED_NAMES:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module 'fastprep.batch' has no attribute {name!r}")
    from fastprep.batch import compact  # noqa: PLC0415 (lazy: no cycle through the package)

    return getattr(compact, name)
