// fastprep._jpeg: the libjpeg-turbo decoder (decode.h) for Python, built only when CMake finds
// libjpeg-turbo. Torch-free: the caller allocates the output (a torch tensor's numpy view) and
// passes it as a writable buffer; decoding runs without the GIL, so loader threads decode in
// parallel. The Python API with its checks is fastprep/io/jpeg.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jpeg/decode.h"

namespace py = pybind11;
namespace jp = fastprep::jpeg;

namespace {

// The input as contiguous bytes: bytes, bytearray, a 1-D uint8 numpy array or memoryview.
py::buffer_info input_bytes(const py::buffer& data) {
  py::buffer_info in = data.request();
  if (in.itemsize != 1 || in.ndim != 1 || (in.size > 1 && in.strides[0] != 1)) {
    throw py::value_error("data: expected contiguous bytes (1-D, one byte per item), got a buffer of " +
                          std::to_string(in.ndim) + " dims and " + std::to_string(in.itemsize) + "-byte items");
  }
  return in;
}

jp::Mode parse_mode(const std::string& mode) {
  if (mode == "RGB") return jp::Mode::kRGB;
  if (mode == "YCbCr") return jp::Mode::kYCbCr;
  if (mode == "GRAY") return jp::Mode::kGray;
  throw py::value_error("mode: expected 'RGB', 'YCbCr' or 'GRAY', got '" + mode + "'");
}

py::dict header_dict(const jp::Header& h) {
  py::dict d;
  d["height"] = h.height;
  d["width"] = h.width;
  d["components"] = h.components;
  d["color_space"] = jp::color_space_name(h.color_space);
  d["progressive"] = h.progressive;
  py::list h_samp, v_samp;
  for (int c = 0; c < std::min(h.components, 4); ++c) {
    h_samp.append(h.h_samp[c]);
    v_samp.append(h.v_samp[c]);
  }
  d["h_samp"] = h_samp;
  d["v_samp"] = v_samp;
  d["imcu_width"] = h.imcu_width;
  d["imcu_height"] = h.imcu_height;
  return d;
}

}  // namespace

PYBIND11_MODULE(_jpeg, m) {
  m.doc() = "fastprep's libjpeg-turbo decoder (region-of-interest and YCbCr-direct); see fastprep.io";
  m.attr("libjpeg_turbo_version") = jp::libjpeg_turbo_version();

  m.def(
      "read_header",
      [](const py::buffer& data) {
        py::buffer_info in = input_bytes(data);
        jp::Header h;
        {
          py::gil_scoped_release no_gil;
          try {
            h = jp::read_header(static_cast<const uint8_t*>(in.ptr), static_cast<size_t>(in.size));
          } catch (const jp::JpegError& e) {
            throw py::value_error(e.what());  // pure C++ until translated, after the GIL is back
          }
        }
        return header_dict(h);
      },
      py::arg("data"), "The JPEG's size, colour space, sampling factors and iMCU size, from its header alone.");

  m.def(
      "decode_into",
      [](const py::buffer& data, const py::buffer& out, int64_t top, int64_t left, const std::string& mode,
         bool strict) {
        py::buffer_info in = input_bytes(data);
        const jp::Mode m = parse_mode(mode);
        py::buffer_info o = out.request(true);
        if (o.itemsize != 1 || o.ndim != 3 || o.shape[0] != jp::mode_channels(m)) {
          throw py::value_error("out: expected a writable uint8 [channels, height, width] buffer with " +
                                std::to_string(jp::mode_channels(m)) + " channels for mode " + mode);
        }
        for (py::ssize_t s : o.strides) {
          if (s < 0) throw py::value_error("out: negative strides are not supported");
        }
        const jp::Window window{top, left, o.shape[1], o.shape[2]};
        const jp::Output target{static_cast<uint8_t*>(o.ptr), o.strides[0], o.strides[1], o.strides[2]};
        std::vector<std::string> warnings;
        {
          py::gil_scoped_release no_gil;
          try {
            warnings = jp::decode(static_cast<const uint8_t*>(in.ptr), static_cast<size_t>(in.size), window, m, target,
                                  strict);
          } catch (const jp::JpegError& e) {
            throw py::value_error(e.what());
          } catch (const jp::ArgumentError& e) {
            throw py::value_error(e.what());
          }
        }
        return warnings;
      },
      py::arg("data"), py::arg("out"), py::arg("top"), py::arg("left"), py::arg("mode"), py::arg("strict"),
      "Decodes the window (top, left, out's height, out's width) into out ([C, H, W] strides, any order) without "
      "the GIL; returns libjpeg's warnings. Corrupt data and bad windows raise ValueError.");
}
