"""Which backend runs the ops on the CPU (the native library or the Numba kernels in numba_kernels/),
and warming the Numba kernels before workers fork."""
