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

ResampleAxis resample_axis(int64_t in, int64_t out, bool antialias, bool reverse) {
  ResampleAxis a;
  a.start.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  const auto at = [&](int64_t i) { return static_cast<size_t>(reverse ? out - 1 - i : i); };
  if (in == out) {
    a.taps = 1;
    a.precision = 14;
    a.w.assign(static_cast<size_t>(out), 1 << 14);
    for (int64_t i = 0; i < out; ++i) a.start[at(i)] = i, a.count[at(i)] = 1;
    return a;
  }
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = antialias && scale >= 1.0 ? scale : 1.0;
  a.taps = antialias ? static_cast<int64_t>(std::ceil(support)) * 2 + 1 : 2;
  std::vector<double> w(static_cast<size_t>(out * a.taps), 0.0);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out; ++i) {
    int64_t xmin = 0, xsize = 0;
    double* wi = w.data() + i * a.taps;
    const double m = antialias ? antialias_weights(i, in, scale, support, a.taps, wi, xmin, xsize)
                               : linear_weights(i, in, scale, wi, xmin, xsize);
    wt_max = std::max(wt_max, m);
    a.start[at(i)] = xmin;
    a.count[at(i)] = static_cast<int32_t>(xsize);
  }
  // The largest precision whose largest weight, rounded, stays below 2^15.
  for (a.precision = 0; a.precision < 22; ++a.precision) {
    if (static_cast<int>(0.5 + wt_max * (1 << (a.precision + 1))) >= (1 << 15)) break;
  }
  a.w.assign(w.size(), 0);
  for (int64_t i = 0; i < out; ++i) {
    for (int64_t k = 0; k < a.count[at(i)]; ++k) {
      const double v = w[static_cast<size_t>(i * a.taps + k)] * (1 << a.precision);
      a.w[at(i) * static_cast<size_t>(a.taps) + static_cast<size_t>(k)] =
          static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
    }
  }
  return a;
}

}  // namespace fastprep::kernels
