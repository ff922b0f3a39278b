// fastprep._jpeg: the libjpeg-turbo decoder (decode.h) for Python, built only when CMake finds
// libjpeg-turbo. Torch-free: the caller allocates the output (a torch tensor's numpy view) and
// passes it as a writable buffer; decoding runs without the GIL, so loader threads decode in
// parallel. The Python API with its checks is fastprep/io/jpeg/__init__.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jpeg/decode.h"
#include "jpeg/module_args.h"

namespace py = pybind11;
namespace jp = fastprep::jpeg;

namespace {

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

void bind_packed(py::module_& m);  // packed_module.cpp

PYBIND11_MODULE(_jpeg, m) {
  m.doc() = "fastprep's libjpeg-turbo decoder (region-of-interest and YCbCr-direct); see fastprep.io";
  m.attr("libjpeg_turbo_version") = jp::libjpeg_turbo_version();

  m.def(
      "read_header",
      [](const py::buffer& data) {
        py::buffer_info in = jp::input_bytes(data);
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
      [](const py::buffer& data, const py::buffer& out, int64_t top, int64_t left, const std::string& mode, bool strict,
         int scale) {
        py::buffer_info in = jp::input_bytes(data);
        const jp::Mode m = jp::parse_mode(mode);
        const jp::OutputArg o = jp::output_arg(out, jp::mode_channels(m), mode);
        const jp::Window window{top, left, o.height, o.width};
        const jp::Output target = o.out;
        std::vector<std::string> warnings;
        {
          py::gil_scoped_release no_gil;
          try {
            warnings = jp::decode(static_cast<const uint8_t*>(in.ptr), static_cast<size_t>(in.size), window, m, target,
                                  strict, scale);
          } catch (const jp::JpegError& e) {
            throw py::value_error(e.what());
          } catch (const jp::ArgumentError& e) {
            throw py::value_error(e.what());
          }
        }
        return warnings;
      },
      py::arg("data"), py::arg("out"), py::arg("top"), py::arg("left"), py::arg("mode"), py::arg("strict"),
      py::arg("scale") = jp::kScaleDenom,
      "Decodes the window (top, left, out's height, out's width) into out ([C, H, W] strides, any order) without "
      "the GIL, of the image at scale/8 of its size (8: full); returns libjpeg's warnings. Corrupt data and bad "
      "windows raise ValueError.");

  bind_packed(m);
}
