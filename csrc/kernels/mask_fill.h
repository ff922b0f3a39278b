// Sets every channel of the masked pixels of an image (or batch) to one value, through strides
// (CHW, HWC, batched or any view). Fill needs no arithmetic, so the kernel moves the value's bit
// pattern and is generic over element size: uint8 (1), float16/bfloat16 (2), float32 (4).
// Mirror: numba_kernels/_mask_fill.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

// Element strides of an [N, C, H, W] image view.
struct FillView {
  int64_t n, c, h, w;
  int64_t sn, sc, sh, sw;
};

// dst = src with the masked pixels set: out of place it reads src and writes dst in one pass (no
// separate copy); in place (dst == src, same view) it writes only the masked pixels.
// mask: [mask_n, H, row_bytes] contiguous bytes, mask_n == 1 (shared by the batch) or N. Packed
// masks hold pixel x in bit x % 8 of byte x / 8 (pack_bits bitorder="little"); bool masks one
// byte per pixel (nonzero = true). value_bits: the value in the image dtype, as raw bits.
void mask_fill(const void* src, const FillView& sv, void* dst, const FillView& dv, int elem_size, const uint8_t* mask,
               int64_t mask_n, bool packed, uint32_t value_bits);

}  // namespace fastprep::kernels
