// fastprep._C: build facts and the torch-free pieces tests compare the Numba mirror against.
// The op kernels themselves are registered by libfastprep_ops (stable ABI), loaded from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "kernels/counter_rng.h"
#include "kernels/isa.h"

namespace py = pybind11;
namespace k = fastprep::kernels;

PYBIND11_MODULE(_C, m) {
  m.doc() = "fastprep native module: build information and counter-generator known answers";

  m.def(
      "build_info",
      [] {
        py::dict info;
        info["compiler"] = FASTPREP_COMPILER;
        info["cxx_flags"] = FASTPREP_CXX_FLAGS;
        info["torch_version"] = FASTPREP_TORCH_VERSION;
        info["abi"] = "stable";
        info["abi_target"] = "2.10";
        // The kernels' ISA level: every one compiled in, the one running (FASTPREP_ISA or, by
        // default, the CPU's best; a bad FASTPREP_ISA raises ValueError here, at import) and the
        // CPU's best.
        info["isa_variants"] = std::string(k::compiled_isas());
        info["isa_selected"] = std::string(k::isa_name(k::active_isa()));
        info["isa_cpu_best"] = std::string(k::isa_name(k::cpu_best_isa()));
        return info;
      },
      "Compiler, flags, the torch version built against, ABI and the ISA levels: compiled, selected, CPU's best.");

  // uint64 words go to Python as unsigned ints; seeds are int64 as in the op schemas.
  m.def(
      "random_word",
      [](int64_t seed, uint64_t counter) { return k::random_word(static_cast<uint64_t>(seed), counter); },
      py::arg("seed"), py::arg("counter"));
  m.def("derive_seed", &k::derive_seed, py::arg("seed"), py::arg("stream"));
  m.def("uniform_below", &k::uniform_below, py::arg("word"), py::arg("n"));
}
