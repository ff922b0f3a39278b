// The packed-shard half of fastprep._jpeg: transcoding JPEGs into records, building raw records,
// and reading windows of either (record.h, cut.h). Long calls run without the GIL, so the packer's
// and the Loader's threads run them in parallel. fastprep/io/packed/_pack.py and _dataset.py are the Python
// side, with the checks and the shard / record names errors carry.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jpeg/crc32c.h"
#include "jpeg/cut.h"
#include "jpeg/exif.h"
#include "jpeg/module_args.h"
#include "jpeg/record.h"
#include "jpeg/transcode.h"

namespace py = pybind11;
namespace jp = fastprep::jpeg;

namespace {

// Runs f without the GIL, turning fastprep's C++ errors into ValueError once the GIL is back.
template <class F>
auto without_gil(F&& f) {
  try {
    py::gil_scoped_release no_gil;
    return f();
  } catch (const jp::RecordError& e) {
    throw py::value_error(e.what());
  } catch (const jp::JpegError& e) {
    throw py::value_error(e.what());
  } catch (const jp::ArgumentError& e) {
    throw py::value_error(e.what());
  }
}

py::bytes as_bytes(const std::vector<uint8_t>& v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

py::dict geometry_dict(const jp::ScanGeometry& L) {
  py::dict d;
  d["height"] = L.height;
  d["width"] = L.width;
  d["components"] = L.components;
  d["mcu"] = py::make_tuple(L.mcu_height, L.mcu_width);
  d["mcus_per_row"] = L.mcus_per_row;
  d["mcu_rows"] = L.mcu_rows;
  d["restart"] = L.restart;
  d["intervals"] = L.intervals();
  return d;
}

// Binds f(record's bytes, checksum, window, verify) as name(record, checksum, top, left, height,
// width, verify=True): the window functions' one signature.
template <class F>
void def_window(py::module_& m, const char* name, F f, const char* doc) {
  m.def(
      name,
      [f](const py::buffer& record, uint32_t checksum, int64_t top, int64_t left, int64_t height, int64_t width,
          bool verify) { return f(jp::input_bytes(record), checksum, jp::Window{top, left, height, width}, verify); },
      py::arg("record"), py::arg("checksum"), py::arg("top"), py::arg("left"), py::arg("height"), py::arg("width"),
      py::arg("verify") = true, doc);
}

}  // namespace

void bind_packed(py::module_& m) {
  m.def(
      "crc32c",
      [](const py::buffer& data) {
        py::buffer_info in = jp::input_bytes(data);
        return without_gil([&] { return jp::crc32c(static_cast<const uint8_t*>(in.ptr), in.size); });
      },
      py::arg("data"), "CRC-32C of contiguous bytes (the packed shards' checksum).");

  m.def(
      "transcode_record",
      [](const py::buffer& data, int64_t restart, bool strict) {
        py::buffer_info in = jp::input_bytes(data);
        jp::Transcoded t;
        jp::BuiltRecord r;
        without_gil([&] {
          t = jp::transcode_with_restarts(static_cast<const uint8_t*>(in.ptr), in.size, restart, strict);
          r = jp::build_jpeg_record(t);
          return 0;
        });
        py::dict info = geometry_dict(t.geometry);
        info["jpeg_bytes"] = t.jpeg.size();
        info["orientation"] = t.orientation;
        info["color_space"] = jp::color_space_name(t.color);
        return py::make_tuple(as_bytes(r.bytes), r.checksum, info, t.warnings);
      },
      py::arg("data"), py::arg("restart"), py::arg("strict"),
      "Losslessly transcodes a JPEG to baseline Huffman with a restart marker every K MCUs (K dividing the MCU row, "
      "near `restart`) and returns (record bytes, record checksum, geometry dict, libjpeg's warnings). The dict's "
      "'orientation' is the source's EXIF orientation (0: none), kept in the record's JPEG header when not 1.");

  m.def(
      "raw_record",
      [](const py::buffer& pixels) {
        py::buffer_info p = pixels.request();
        if (p.itemsize != 1 || p.ndim != 3 || (p.shape[2] != 1 && p.shape[2] != 3) || p.strides[2] != 1 ||
            p.strides[1] != p.shape[2] || p.strides[0] < p.shape[1] * p.shape[2]) {
          throw py::value_error("pixels: expected uint8 [height, width, 1 or 3] with contiguous rows");
        }
        jp::BuiltRecord r = without_gil([&] {
          return jp::build_raw_record(static_cast<const uint8_t*>(p.ptr), p.shape[0], p.shape[1],
                                      static_cast<int>(p.shape[2]), p.strides[0]);
        });
        return py::make_tuple(as_bytes(r.bytes), r.checksum);
      },
      py::arg("pixels"), "A raw record of HWC uint8 pixels: (record bytes, record checksum).");

  m.def(
      "verify_record",
      [](const py::buffer& record, uint32_t checksum) {
        py::buffer_info in = jp::input_bytes(record);
        without_gil([&] {
          jp::verify_record(static_cast<const uint8_t*>(in.ptr), in.size, checksum);
          return 0;
        });
      },
      py::arg("record"), py::arg("checksum"), "Checks every CRC of a record; ValueError says what is corrupt.");

  m.def(
      "decode_record_into",
      [](const py::buffer& record, uint32_t checksum, const py::buffer& out, int64_t top, int64_t left,
         const std::string& mode, bool strict, bool verify, int scale) {
        py::buffer_info in = jp::input_bytes(record);
        const jp::Mode md = jp::parse_mode(mode);
        jp::OutputArg o = jp::output_arg(out, jp::mode_channels(md), mode);
        const jp::Window w{top, left, o.height, o.width};
        return without_gil([&] {
          return jp::decode_record_window(static_cast<const uint8_t*>(in.ptr), in.size, checksum, w, md, o.out, strict,
                                          verify, scale);
        });
      },
      py::arg("record"), py::arg("checksum"), py::arg("out"), py::arg("top"), py::arg("left"), py::arg("mode"),
      py::arg("strict"), py::arg("verify") = true, py::arg("scale") = jp::kScaleDenom,
      "Decodes the window (top, left, out's height and width) of a JPEG record, at scale/8 of its size (8: full), "
      "into out from the restart intervals covering it; returns libjpeg's warnings.");

  m.def(
      "read_raw_into",
      [](const py::buffer& record, uint32_t checksum, const py::buffer& out, int64_t top, int64_t left, bool verify) {
        py::buffer_info in = jp::input_bytes(record);
        py::buffer_info o = out.request(true);
        if (o.itemsize != 1 || o.ndim != 3) throw py::value_error("out: expected a writable uint8 [C, H, W] buffer");
        jp::OutputArg a = jp::output_arg(out, static_cast<int>(o.shape[0]), "raw");
        const jp::Window w{top, left, a.height, a.width};
        without_gil([&] {
          jp::read_raw_window(static_cast<const uint8_t*>(in.ptr), in.size, checksum, w, a.out, a.channels, verify);
          return 0;
        });
      },
      py::arg("record"), py::arg("checksum"), py::arg("out"), py::arg("top"), py::arg("left"), py::arg("verify") = true,
      "Copies the window (top, left, out's height and width) of a raw record into out, its bands' CRCs checked.");

  def_window(
      m, "check_raw_window",
      [](const py::buffer_info& in, uint32_t checksum, const jp::Window& w, bool verify) {
        const jp::RawRecord r = without_gil(
            [&] { return jp::check_raw_window(static_cast<const uint8_t*>(in.ptr), in.size, checksum, w, verify); });
        const int64_t offset = r.pixels - static_cast<const uint8_t*>(in.ptr);
        return py::make_tuple(offset, r.width * r.channels, r.channels);
      },
      "Checks the CRCs of the bands a window of a raw record covers, for reading it in place: returns (offset of "
      "the pixels in the record, bytes per pixel row, channels).");

  def_window(
      m, "cut_record",
      [](const py::buffer_info& in, uint32_t checksum, const jp::Window& w, bool verify) {
        const auto* data = static_cast<const uint8_t*>(in.ptr);
        jp::JpegRecord rec;
        jp::Cut cut = without_gil([&] {
          rec = jp::open_jpeg_record(data, in.size, checksum);
          jp::Cut c = jp::plan_cut(rec, w);
          jp::verify_rows(rec, c.r0, c.r1, verify);
          return c;
        });
        py::bytes out(nullptr, cut.bytes);  // filled below, before anyone else can see it
        char* dst = PyBytes_AS_STRING(out.ptr());
        without_gil([&] {
          jp::write_cut(rec, cut, reinterpret_cast<uint8_t*>(dst));
          return 0;
        });
        return py::make_tuple(out, w.top - cut.top, w.left - cut.left);
      },
      "The JPEG of the restart intervals covering a window, and the window's (top, left) in it: "
      "(bytes, top, left). Decoding it and cropping gives the window's bits.");

  m.def(
      "record_info",
      [](const py::buffer& record, uint32_t checksum) {
        py::buffer_info in = jp::input_bytes(record);
        const auto* data = static_cast<const uint8_t*>(in.ptr);
        const int kind = without_gil([&] { return jp::record_kind(data, in.size); });
        py::dict d;
        if (kind == 1) {
          const jp::JpegRecord rec = without_gil([&] { return jp::open_jpeg_record(data, in.size, checksum); });
          d = geometry_dict(rec.geometry);
          d["kind"] = "jpeg";
          d["jpeg_bytes"] = rec.jpeg_size;
          d["header_bytes"] = rec.geometry.scan_offset;
          d["orientation"] = jp::header_orientation(rec.jpeg, rec.geometry.scan_offset);  // 0: none
        } else {
          const jp::RawRecord r = without_gil([&] { return jp::open_raw_record(data, in.size, checksum); });
          d["kind"] = "raw";
          d["height"] = r.height;
          d["width"] = r.width;
          d["components"] = r.channels;
        }
        return d;
      },
      py::arg("record"), py::arg("checksum"),
      "What a record holds, its header checked; a JPEG record's 'orientation' is the EXIF orientation its JPEG "
      "header keeps (1..8; 0: none).");
}
