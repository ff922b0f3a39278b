// Argument checks the fastprep._jpeg bindings share (module.cpp, packed_module.cpp): contiguous
// input bytes, the mode, and a writable uint8 [C, H, W] output buffer of any strides.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "jpeg/decode.h"

namespace fastprep::jpeg {

namespace py = pybind11;

// The input as contiguous bytes: bytes, bytearray, a 1-D uint8 numpy array or memoryview.
inline py::buffer_info input_bytes(const py::buffer& data) {
  py::buffer_info in = data.request();
  if (in.itemsize != 1 || in.ndim != 1 || (in.size > 1 && in.strides[0] != 1)) {
    throw py::value_error("data: expected contiguous bytes (1-D, one byte per item), got a buffer of " +
                          std::to_string(in.ndim) + " dims and " + std::to_string(in.itemsize) + "-byte items");
  }
  return in;
}

inline Mode parse_mode(const std::string& mode) {
  if (mode == "RGB") return Mode::kRGB;
  if (mode == "YCbCr") return Mode::kYCbCr;
  if (mode == "GRAY") return Mode::kGray;
  throw py::value_error("mode: expected 'RGB', 'YCbCr' or 'GRAY', got '" + mode + "'");
}

struct OutputArg {
  py::buffer_info info;  // keeps the buffer alive
  Output out;
  int64_t height, width;
  int channels;
};

// `out` as a writable uint8 [channels, H, W] buffer with non-negative strides.
inline OutputArg output_arg(const py::buffer& out, int channels, const std::string& mode) {
  OutputArg a;
  a.info = out.request(true);
  const py::buffer_info& o = a.info;
  if (o.itemsize != 1 || o.ndim != 3 || o.shape[0] != channels) {
    throw py::value_error("out: expected a writable uint8 [channels, height, width] buffer with " +
                          std::to_string(channels) + " channels for mode " + mode);
  }
  for (py::ssize_t s : o.strides) {
    if (s < 0) throw py::value_error("out: negative strides are not supported");
  }
  a.out = Output{static_cast<uint8_t*>(o.ptr), o.strides[0], o.strides[1], o.strides[2]};
  a.height = o.shape[1];
  a.width = o.shape[2];
  a.channels = channels;
  return a;
}

}  // namespace fastprep::jpeg
