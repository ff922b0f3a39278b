#include "kernels/isa.h"

namespace fastprep::kernels {

const char* selected_isa() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(FASTPREP_NO_MULTIVERSION)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
#endif
  return "x86-64";
}

}  // namespace fastprep::kernels
