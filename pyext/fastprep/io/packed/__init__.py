"""Packed datasets (`fastprep pack`): the writer, the shard format, identity and locks, the reader."""

_REPLACED_NAMES = frozenset([
    'ImageSource', 'LAYOUTS', 'MODES', 'PackedDataset', 'PackedImage', 'PackedJpeg', 'PackedRaw', 'RemotePack',
    'RemoteReadError', 'Retry', 'ShardMaps', 'WindowCut', 'check_bool', 'fmt', 'is_url', 'native', 'oriented',
])


def __getattr__(name: str):
    """fastprep.io.packed.NAME as before the re-filing (the module this package
    replaced is fastprep.io.packed.dataset)."""
    if name not in _REPLACED_NAMES:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module 'fastprep.io.packed' has no attribute {name!r}")
    from fastprep.io.packed import dataset  # noqa: PLC0415 (lazy: no cycle through the package)

    return getattr(dataset, name)
