"""Packed datasets (`fastprep pack`): the writer, the shard format, identity and locks, the reader."""

from fastprep.core.moved import module_names

# fastprep.io.packed was a module before the re-filing (now fastprep.io.packed.dataset): its names still read here.
__getattr__ = module_names(__name__, "dataset", frozenset([
    'ImageSource', 'LAYOUTS', 'MODES', 'PackedDataset', 'PackedImage', 'PackedJpeg', 'PackedRaw', 'RemotePack',
    'RemoteReadError', 'Retry', 'ShardMaps', 'WindowCut', 'check_bool', 'fmt', 'is_url', 'native', 'oriented',
]))
