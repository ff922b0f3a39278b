"""Packed datasets (`fastprep pack`): the writer (pack, pack_item, pack_sources, pack_summary,
writer), the shard format (format), identity and locks (identity, lock), the reader (dataset,
records, shard_maps). Its public names are fastprep.io's (pack, PackedDataset, ...)."""
