// Bit packing of binary maps, torch-free. Tensors are seen as contiguous [outer, n, inner] byte
// arrays, n being the packed dim: packing along the last dim has inner == 1, packing 8 maps into
// one plane has outer == 1. Nonzero bytes count as 1 (as numpy.packbits does).
// Mirror: pyext/fastprep/numba_kernels/_pack_bits.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

// x: [outer, n, inner] -> out: [outer, ceil(n / 8), inner]. little: bit k of a byte holds
// element 8j + k (numpy bitorder="little"); otherwise bit 7 - k does ("big").
void pack_bits(const uint8_t* x, uint8_t* out, int64_t outer, int64_t n, int64_t inner, bool little);

// packed: [outer, m, inner] -> out: [outer, count, inner] of 0/1 bytes, count <= 8 * m.
void unpack_bits(const uint8_t* packed, uint8_t* out, int64_t outer, int64_t m, int64_t inner, int64_t count,
                 bool little);

}  // namespace fastprep::kernels
