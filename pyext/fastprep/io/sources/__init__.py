"""Dataset sources over users' own files: folders, HDF5, LMDB, WebDataset tars (what every source
shares is io/_source.py)."""
