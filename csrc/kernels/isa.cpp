#include "kernels/isa.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fastprep::kernels {
namespace {

#if FASTPREP_X86_LEVELS
constexpr const char* kNames[] = {"x86-64", "x86-64-v3", "x86-64-v4", "x86-64-v4-icl"};
constexpr int kLevels = 4;
#else
constexpr const char* kNames[] = {"generic"};
constexpr int kLevels = 1;
#endif

Isa detect_best() {
#if FASTPREP_X86_LEVELS
  // libgcc's level checks include the OS enabling the AVX / AVX-512 register state (XGETBV).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) {
    const bool icl = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
                     __builtin_cpu_supports("avx512vnni");
    return icl ? Isa::kV4I : Isa::kV4;
  }
  if (__builtin_cpu_supports("x86-64-v3")) return Isa::kV3;
#endif
  return Isa::kBase;
}

std::string expected_values() {
  std::string s;
  for (int i = 0; i < kLevels; ++i) s += std::string(kNames[i]) + ", ";
  return s + "auto";
}

struct Choice {
  Isa isa = Isa::kBase;
  std::string error;  // set when FASTPREP_ISA is bad; active_isa() throws it
};

Choice resolve() {
  Choice c;
  const Isa best = detect_best();
  const char* env = std::getenv("FASTPREP_ISA");
  std::string v = env ? env : "";
  v.erase(0, v.find_first_not_of(" \t"));
  v.erase(v.find_last_not_of(" \t") + 1);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (v.empty() || v == "auto") {
    c.isa = best;
    return c;
  }
  for (int i = 0; i < kLevels; ++i) {
    if (v != kNames[i]) continue;
    if (i > static_cast<int>(best)) {
      c.error = std::string("FASTPREP_ISA=") + env + ": this CPU cannot run " + kNames[i] + "; the best it runs is " +
                kNames[static_cast<int>(best)] + " (unset FASTPREP_ISA or set it to auto to use that)";
    } else {
      c.isa = static_cast<Isa>(i);
    }
    return c;
  }
  c.error = "FASTPREP_ISA: expected one of " + expected_values() + ", got '" + std::string(env) + "'";
  return c;
}

const Choice& choice() {
  static const Choice c = resolve();
  return c;
}

// Chosen when the library loads, so a later change to the environment cannot make this library
// and the other one linking these kernels (the _C module, the op library) disagree.
[[maybe_unused]] const Choice& chosen_at_load = choice();

}  // namespace

Isa active_isa() {
  const Choice& c = choice();
  if (!c.error.empty()) throw std::invalid_argument(c.error);
  return c.isa;
}

Isa cpu_best_isa() {
  static const Isa best = detect_best();
  return best;
}

const char* isa_name(Isa isa) { return kNames[std::min(static_cast<int>(isa), kLevels - 1)]; }

const char* compiled_isas() {
#if FASTPREP_X86_LEVELS
  return "x86-64,x86-64-v3,x86-64-v4,x86-64-v4-icl";
#else
  return "generic";
#endif
}

}  // namespace fastprep::kernels
