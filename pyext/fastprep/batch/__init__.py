"""Batches: the compact batch (compact) and its collate, label dtypes (labels), the Loader's slots
(slots, shared_slots), the device prefetcher (device_prefetcher), the GPU decode split's window
batch (window_batch)."""
