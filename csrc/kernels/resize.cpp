#include "kernels/resize.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/color_pixel.h"
#include "kernels/isa.h"
#include "kernels/resize_simd.h"
#include "kernels/transpose.h"

namespace fastprep::kernels {
namespace {

using color_pixel::BF16;
using color_pixel::Half;
using color_pixel::store;

// The horizontal pass runs on blocks of kBlock source rows: each source column's kBlock values
// become one vector (a transposed tile), so every tap is a multiply-add across the block's rows,
// whatever the column the output starts at; the results are transposed back into rows.
constexpr int64_t kBlock = 16;

// One block of source rows [r0, r0 + n) through the horizontal pass into the ring of H rows (row r
// at ring + (r % cap) * c * out_w: its c planes of out_w outputs).
struct HorizontalBlock {
  template <Isa L>
  static FASTPREP_INLINE void run(ResizeSource s, const ResampleAxis* cols, int64_t r0, int64_t n, uint8_t* tile,
                                  uint8_t* tile_out, uint8_t* ring, int64_t cap) {
    const int64_t c = s.c, width = s.width, out_w = static_cast<int64_t>(cols->start.size());
    const uint8_t* rows[kBlock];
    for (int64_t r = 0; r < kBlock; ++r) rows[r] = s.data + (r0 + std::min(r, n - 1)) * s.sh;
    // The tile: tile[(col * pix + ch * chan) * kBlock + r] holds channel ch of column col of row r0 + r.
    const bool packed = s.sc == 1 && s.sw == c, planar = !packed && s.sw == 1;
    const int64_t pix = packed ? c : 1, chan = packed ? 1 : width;
    if (packed || planar) {
      const int64_t planes = packed ? 1 : c, bytes = packed ? width * c : width;
      const uint8_t* prow[kBlock];
      for (int64_t p = 0; p < planes; ++p) {
        for (int64_t r = 0; r < kBlock; ++r) prow[r] = rows[r] + p * s.sc;
        uint8_t* t = tile + p * bytes * kBlock;
        int64_t b = 0;
        for (; b + kBlock <= bytes; b += kBlock) transpose16(prow, b, t + b * kBlock);
        for (; b < bytes; ++b) {
          for (int64_t r = 0; r < kBlock; ++r) t[b * kBlock + r] = prow[r][b];
        }
      }
    } else {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t x = 0; x < width; ++x) {
          for (int64_t r = 0; r < kBlock; ++r) tile[(ch * width + x) * kBlock + r] = rows[r][x * s.sw + ch * s.sc];
        }
      }
    }
    // The taps of each channel's outputs (resize_simd.h).
    for (int64_t ch = 0; ch < c; ++ch) {
      const resize_simd::TapsArgs t{tile + ch * chan * kBlock, pix * kBlock,   cols->start.data(),
                                    cols->count.data(),        cols->w.data(), cols->taps,
                                    cols->precision,           out_w,          tile_out + ch * out_w * kBlock};
      resize_simd::taps<L>(t);
    }
    // Back into rows: tile_out's column m (a (channel, x) pair) is m of each H row.
    const int64_t m_total = c * out_w;
    uint8_t* dst[kBlock];
    for (int64_t r = 0; r < n; ++r) dst[r] = ring + ((r0 + r) % cap) * m_total;
    const uint8_t* srcs[kBlock];
    uint8_t block[kBlock * kBlock];
    int64_t m = 0;
    for (; m + kBlock <= m_total; m += kBlock) {
      for (int64_t i = 0; i < kBlock; ++i) srcs[i] = tile_out + (m + i) * kBlock;
      transpose16(srcs, 0, block);
      for (int64_t r = 0; r < n; ++r) std::memcpy(dst[r] + m, block + r * kBlock, kBlock);
    }
    for (; m < m_total; ++m) {
      for (int64_t r = 0; r < n; ++r) dst[r][m] = tile_out[m * kBlock + r];
    }
  }
};

// Output row y of every channel from H rows (written at out_h - 1 - y with out.vflip; as column y
// of a [c, out_w, out_h] output with out.transpose): the vertical taps (into `row`, or straight into
// a uint8 output's row; taps: room for the row pointers), then the output element.
template <typename T>
struct VerticalRow {
  template <Isa L>
  static FASTPREP_INLINE void run(const ResampleAxis* rows, int64_t y, const uint8_t* ring, int64_t cap, int64_t c,
                                  int64_t out_w, const uint8_t** taps, uint8_t* row, ResizeOutput out) {
    const int64_t out_h = static_cast<int64_t>(rows->start.size()), m_total = c * out_w;
    const int32_t count = rows->count[static_cast<size_t>(y)];
    const int64_t out_y = out.vflip ? out_h - 1 - y : y;
    for (int64_t ch = 0; ch < c; ++ch) {
      T* plane = static_cast<T*>(out.data) + ch * out_h * out_w;
      T* o = plane + out_y * out_w;
      resize_simd::RowTapsArgs a{taps, rows->w.data() + y * rows->taps, count, rows->precision, out_w, row};
      if constexpr (std::is_same_v<T, uint8_t>) {
        if (!out.transpose) a.out = o;
      }
      for (int32_t k = 0; k < count; ++k) {
        taps[k] = ring + ((rows->start[static_cast<size_t>(y)] + k) % cap) * m_total + ch * out_w;
      }
      resize_simd::row_taps<L>(a);
      if (out.transpose) {  // element x of the row is (x, out_y) of the transposed plane: a column
        T* t = plane + out_y;
        if constexpr (std::is_same_v<T, uint8_t>) {
          for (int64_t x = 0; x < out_w; ++x) t[x * out_h] = row[x];
        } else if (out.mean == nullptr) {
          for (int64_t x = 0; x < out_w; ++x) store(t + x * out_h, static_cast<float>(row[x]) * out.scale);
        } else {
          const float mean = out.mean[ch], sd = out.std[ch];
          for (int64_t x = 0; x < out_w; ++x) {
            store(t + x * out_h, (static_cast<float>(row[x]) * out.scale - mean) / sd);
          }
        }
        continue;
      }
      if constexpr (!std::is_same_v<T, uint8_t>) {
        if (out.mean == nullptr) {  // torchvision's ToDtype(scale=True): x.to(float32).mul_(scale)
          for (int64_t x = 0; x < out_w; ++x) store(o + x, static_cast<float>(row[x]) * out.scale);
        } else {  // then Normalize: x.sub(mean).div_(std), in float32
          const float mean = out.mean[ch], sd = out.std[ch];
          for (int64_t x = 0; x < out_w; ++x) store(o + x, (static_cast<float>(row[x]) * out.scale - mean) / sd);
        }
      }
    }
  }
};

template <typename T>
void run_rows(const ResizeSource& src, const ResampleAxis& rows, const ResampleAxis& cols, const ResizeOutput& out,
              ResizeScratch& s) {
  const int64_t out_h = static_cast<int64_t>(rows.start.size()), out_w = static_cast<int64_t>(cols.start.size());
  const int64_t max_count = *std::max_element(rows.count.begin(), rows.count.end());
  const int64_t cap = max_count + kBlock;  // the rows one output row reads, plus the block being made
  s.tile.resize(static_cast<size_t>(src.c * src.width * kBlock));
  s.tile_out.resize(static_cast<size_t>(src.c * out_w * kBlock));
  s.ring.resize(static_cast<size_t>(cap * src.c * out_w));
  s.row.resize(static_cast<size_t>(out_w));
  s.row_taps.resize(static_cast<size_t>(max_count));
  int64_t done = 0;  // H rows [0, done) made
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t need = rows.start[static_cast<size_t>(y)] + rows.count[static_cast<size_t>(y)];
    for (; done < need; done += kBlock) {
      dispatch<HorizontalBlock>(src, &cols, done, std::min(kBlock, src.height - done), s.tile.data(), s.tile_out.data(),
                                s.ring.data(), cap);
    }
    dispatch<VerticalRow<T>>(&rows, y, s.ring.data(), cap, src.c, out_w, s.row_taps.data(), s.row.data(), out);
  }
}

}  // namespace

void resized_crop(const ResizeSource& src, const ResampleAxis& rows, const ResampleAxis& cols, const ResizeOutput& out,
                  ResizeScratch& scratch) {
  switch (out.type) {
    case 0:
      return run_rows<uint8_t>(src, rows, cols, out, scratch);
    case 1:
      return run_rows<float>(src, rows, cols, out, scratch);
    case 2:
      return run_rows<Half>(src, rows, cols, out, scratch);
    default:
      return run_rows<BF16>(src, rows, cols, out, scratch);
  }
}

}  // namespace fastprep::kernels
