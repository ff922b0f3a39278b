// The resampler's per-axis weights, in torch's double arithmetic and order (resize.h says where):
// every operation below is one of torch's, so that the int16 weights, and the outputs, are its.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/resize.h"

namespace fastprep::kernels {
namespace {

// The triangle filter (HelperInterpLinear::aa_filter).
double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Output i with antialias (_compute_indices_min_size_weights_aa): the filter stretched by the
// downscale factor, normalised to sum 1. Returns the largest weight.
double antialias_weights(int64_t i, int64_t in, double scale, double support, int64_t taps, double* w, int64_t& xmin,
                         int64_t& xsize) {
  const double center = scale * (static_cast<double>(i) + 0.5);
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
  xsize = std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin;
  xsize = std::clamp(xsize, int64_t{0}, taps);  // torch's guard for a size one past taps
  double total = 0.0;
  for (int64_t j = 0; j < xsize; ++j) {
    w[j] = triangle((static_cast<double>(j + xmin) - center + 0.5) * invscale);
    total += w[j];
  }
  double wt_max = 0.0;
  if (total != 0.0) {
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] /= total;
      wt_max = std::max(wt_max, w[j]);
    }
  }
  return wt_max;
}

// Output i without antialias (_compute_indices_min_size_weights with 2 taps): the two neighbours
// of the source position, the weight of one outside the image added to the edge pixel's. floorf:
// torch takes the floor of the double position converted to float.
double linear_weights(int64_t i, int64_t in, double scale, double* w, int64_t& xmin, int64_t& xsize) {
  double real = scale * (static_cast<double>(i) + 0.5) - 0.5;
  if (real < 0.0) real = 0.0;
  const int64_t index = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
  const double lambda = std::min(std::max(real - static_cast<double>(index), 0.0), 1.0);
  xmin = index;  // >= 0
  xsize = std::clamp(std::min(index + 2, in) - xmin, int64_t{0}, int64_t{2});
  double wt_max = 0.0;
  int64_t k = 0;
  for (int64_t j = 0; j < 2; ++j) {
    w[j] = 0.0;
    const double v = triangle(static_cast<double>(j) - lambda);
    if (index + j <= 0) {
      k = 0;
    } else if (index + j >= in - 1) {
      k = xsize - 1;
    }
    w[k] += v;
    wt_max = std::max(wt_max, w[k]);
    ++k;
  }
  return wt_max;
}

}  // namespace

ResampleAxis resample_axis(int64_t in, int64_t full, bool antialias, bool reverse, int64_t first, int64_t count) {
  ResampleAxis a;
  a.start.resize(static_cast<size_t>(count));
  a.count.resize(static_cast<size_t>(count));
  // Where output first + i of the whole table goes in the slice.
  const auto at = [&](int64_t i) { return static_cast<size_t>(reverse ? count - 1 - i : i); };
  if (in == full) {
    a.taps = 1;
    a.precision = 14;
    a.w.assign(static_cast<size_t>(count), 1 << 14);
    for (int64_t i = 0; i < count; ++i) a.start[at(i)] = first + i, a.count[at(i)] = 1;
    return a;
  }
  const double scale = static_cast<double>(in) / static_cast<double>(full);
  const double support = antialias && scale >= 1.0 ? scale : 1.0;
  a.taps = antialias ? static_cast<int64_t>(std::ceil(support)) * 2 + 1 : 2;
  // Every output's weights: the precision is the whole table's (its largest weight).
  std::vector<double> w(static_cast<size_t>(full * a.taps), 0.0);
  std::vector<int64_t> xmins(static_cast<size_t>(full)), xsizes(static_cast<size_t>(full));
  double wt_max = 0.0;
  for (int64_t i = 0; i < full; ++i) {
    double* wi = w.data() + i * a.taps;
    const size_t k = static_cast<size_t>(i);
    const double m = antialias ? antialias_weights(i, in, scale, support, a.taps, wi, xmins[k], xsizes[k])
                               : linear_weights(i, in, scale, wi, xmins[k], xsizes[k]);
    wt_max = std::max(wt_max, m);
  }
  // The largest precision whose largest weight, rounded, stays below 2^15.
  for (a.precision = 0; a.precision < 22; ++a.precision) {
    if (static_cast<int>(0.5 + wt_max * (1 << (a.precision + 1))) >= (1 << 15)) break;
  }
  a.w.assign(static_cast<size_t>(count * a.taps), 0);
  for (int64_t i = 0; i < count; ++i) {
    const size_t src = static_cast<size_t>(first + i);
    a.start[at(i)] = xmins[src];
    a.count[at(i)] = static_cast<int32_t>(xsizes[src]);
    for (int64_t k = 0; k < xsizes[src]; ++k) {
      const double v = w[src * static_cast<size_t>(a.taps) + static_cast<size_t>(k)] * (1 << a.precision);
      a.w[at(i) * static_cast<size_t>(a.taps) + static_cast<size_t>(k)] =
          static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
    }
  }
  return a;
}

int64_t narrow_axis(ResampleAxis& a, int64_t& extent) {
  int64_t lo = extent, hi = 0;
  for (size_t i = 0; i < a.start.size(); ++i) {
    lo = std::min(lo, a.start[i]);
    hi = std::max(hi, a.start[i] + a.count[i]);
  }
  if (lo >= hi) return 0;  // nothing read (no outputs)
  for (int64_t& s : a.start) s -= lo;
  extent = hi - lo;
  return lo;
}

const NarrowedAxis& AxisCache::get(int64_t in, int64_t full, bool antialias, bool reverse, int64_t first,
                                   int64_t count) {
  if (valid_ && in == in_ && full == full_ && antialias == antialias_ && reverse == reverse_ && first == first_ &&
      count == count_) {
    return axis_;
  }
  valid_ = false;  // until the new table is whole (resample_axis may throw bad_alloc)
  axis_.table = resample_axis(in, full, antialias, reverse, first, count);
  axis_.extent = in;
  axis_.first = narrow_axis(axis_.table, axis_.extent);
  in_ = in, full_ = full, first_ = first, count_ = count, antialias_ = antialias, reverse_ = reverse;
  valid_ = true;
  return axis_;
}

}  // namespace fastprep::kernels
