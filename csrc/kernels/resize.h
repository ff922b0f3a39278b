// Resized crop of one uint8 image (any strides, CHW or HWC), torch-free: the window's pixels
// resampled to out_h x out_w by torch's uint8 bilinear resampler, the separable fixed-point one
// derived from Pillow-SIMD that F.interpolate(mode="bilinear", antialias=...) runs on uint8 CPU
// tensors (so torchvision v2's resized_crop / RandomResizedCrop on decoded images): per axis,
// weights computed in double (aten/src/ATen/native/cpu/UpSampleKernel.cpp,
// HelperInterpBase::_compute_index_ranges_weights and _compute_index_ranges_int16_weights) and
// rounded to int16 at one precision per axis; the horizontal pass first, rounded to uint8, then
// the vertical one (UpSampleKernelAVXAntialias.h). Only the window is read; written as contiguous
// [C, out_h, out_w] uint8, or float x * scale (then (x - mean[c]) / std[c]) in float32, rounded
// once to float16 / bfloat16. hflip writes the output flipped left-right, vflip upside down,
// transpose its rows as columns (after the flips: a quarter turn is a flip and a transpose); an
// output may be a sub-rectangle of the resize (Resize then CenterCrop): each axis table is then a
// slice of the whole resize's table, at the whole table's precision.
// Mirror: pyext/fastprep/numba_kernels/_resize.py.
#pragma once
#include <cstdint>
#include <vector>

namespace fastprep::kernels {

// The fixed-point weights of one axis: output i reads inputs [start[i], start[i] + count[i]) with
// weights w[i * taps ...], in units of 2^-precision. With `reverse`, output i is what the forward
// table gives output out - 1 - i (a left-right flip of the result).
struct ResampleAxis {
  std::vector<int64_t> start;
  std::vector<int32_t> count;
  std::vector<int32_t> w;
  int64_t taps = 0;
  int precision = 0;
};

// Weights of outputs [first, first + count) of `in` inputs -> `full` outputs (all > 0, the slice
// inside [0, full)); the precision is the whole table's, as torch computes it for the whole resize.
// in == full is the identity (one tap of weight 2^14): torch skips such an axis, and the identity
// gives its bits. With `reverse`, the slice's outputs in reverse order.
ResampleAxis resample_axis(int64_t in, int64_t full, bool antialias, bool reverse, int64_t first, int64_t count);

// Narrows a source axis to the inputs the table reads: returns the first one read and shifts the
// table's starts by it; `extent` becomes the span read.
int64_t narrow_axis(ResampleAxis& a, int64_t& extent);

// One axis's table narrowed (narrow_axis): `first` is the first input it reads, `extent` the span.
struct NarrowedAxis {
  ResampleAxis table;
  int64_t first = 0, extent = 0;
};

// The last narrowed table of one axis, kept while the next image asks for the same one: a batch
// of equal windows and placements (Resize then CenterCrop on equal-size images, the images of a
// 4-D tensor) builds each table once; different windows (RandomResizedCrop) build theirs as before.
class AxisCache {
 public:
  // The table of resample_axis(in, full, antialias, reverse, first, count), narrowed over `in` inputs.
  const NarrowedAxis& get(int64_t in, int64_t full, bool antialias, bool reverse, int64_t first, int64_t count);

 private:
  bool valid_ = false;
  int64_t in_ = 0, full_ = 0, first_ = 0, count_ = 0;
  bool antialias_ = false, reverse_ = false;
  NarrowedAxis axis_;
};

struct ResizeSource {
  const uint8_t* data;  // element (0, 0, 0) of the window
  int64_t c, height, width;
  int64_t sc, sh, sw;  // element strides (any, e.g. HWC is sc=1, sw=c)
};

// What the output is: color.h's type codes (0 uint8, 1 float32, 2 float16, 3 bfloat16); for float
// outputs each value is float(v) * scale, and with mean (c values, then std too) (that - mean[c]) / std[c].
struct ResizeOutput {
  void* data;  // [c, out_h, out_w] contiguous
  int type;
  float scale;
  const float* mean;  // null: no normalisation
  const float* std;
  bool vflip;      // output row y written at out_h - 1 - y
  bool transpose;  // output (y, x) written at (x, y): data is [c, out_w, out_h] (a quarter turn's transpose)
};

// Buffers and tables a batch reuses from sample to sample.
struct ResizeScratch {
  std::vector<uint8_t> tile, tile_out, ring, row;
  std::vector<const uint8_t*> row_taps;
  AxisCache rows, cols;
};

void resized_crop(const ResizeSource& src, const ResampleAxis& rows, const ResampleAxis& cols, const ResizeOutput& out,
                  ResizeScratch& scratch);

}  // namespace fastprep::kernels
