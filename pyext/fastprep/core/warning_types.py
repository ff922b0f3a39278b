"""fastprep's warning classes that modules on both sides of the backend choice raise."""


class NumbaCacheWarning(RuntimeWarning):
    """No safe folder for Numba's disk cache: fastprep's Numba kernels compile in each process
    (fastprep/numba_kernels/_cache.py says which folders are safe)."""
