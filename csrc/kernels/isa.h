// Runtime ISA dispatch that fastprep controls: each hot kernel is compiled once per x86-64 level
// (baseline, -v3 = AVX2/FMA/BMI2, -v4 = AVX-512 F/BW/CD/DQ/VL, and -v4-icl = -v4 plus the byte
// permutes, double shifts and dot products Ice Lake and Zen 4 added: AVX512-VBMI, VBMI2, VNNI;
// FFmpeg and dav1d call that level avx512icl) and one level is chosen once per process from CPUID
// and the FASTPREP_ISA environment variable (x86-64 | x86-64-v3 | x86-64-v4 | x86-64-v4-icl |
// auto, the default: the best this CPU runs). Forcing a lower level lets one machine run, and CI
// test, every path. Integer kernels give the same bits on every level, and float kernels do too:
// -ffp-contract=off forbids fusing into FMA and no level uses approximate instructions.
//
// A kernel is a struct with `template <Isa L> static FASTPREP_INLINE void run(...)`;
// `dispatch<K>(args...)` calls K::run<L> inlined into a function compiled for level L (GCC/Clang
// `target` attributes), so the loops in `run` and in every FASTPREP_INLINE helper it calls are
// vectorised for L. Helpers that are not inlined are compiled for the baseline: correct on any
// CPU, just not vectorised for L. Intrinsics go in functions with their own `target` attribute,
// called from `run` under `if constexpr (L == ...)` (isa_simd.h).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FASTPREP_NO_MULTIVERSION)
#define FASTPREP_X86_LEVELS 1
#define FASTPREP_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define FASTPREP_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define FASTPREP_TARGET_V4I __attribute__((target("arch=x86-64-v4,avx512vbmi,avx512vbmi2,avx512vnni")))
#else
#define FASTPREP_X86_LEVELS 0
#endif

// For kernel bodies and the helpers they call: inlined, they are compiled for the caller's level.
#if defined(__GNUC__)
#define FASTPREP_INLINE inline __attribute__((always_inline))
#else
#define FASTPREP_INLINE inline
#endif

namespace fastprep::kernels {

// kBase is x86-64 on x86 builds and the plain build elsewhere.
enum class Isa : int { kBase = 0, kV3 = 1, kV4 = 2, kV4I = 3 };

// Whether level L has AVX-512 (v4 and v4-icl): its code may call the helpers compiled for v4.
constexpr bool has_avx512(Isa L) { return L >= Isa::kV4; }

// The level every dispatched kernel runs at. Chosen once (when the library loads) from
// FASTPREP_ISA and CPUID; throws std::invalid_argument, naming the value, if FASTPREP_ISA is not
// a known level or names one this CPU cannot run (the message gives the CPU's best).
Isa active_isa();
// The best level this CPU runs, and names: "x86-64", "x86-64-v3", "x86-64-v4", "x86-64-v4-icl"
// ("generic" off x86).
Isa cpu_best_isa();
const char* isa_name(Isa isa);
// The levels compiled into this build, comma-separated, lowest first.
const char* compiled_isas();

// Not inlined into dispatch: as its own function the baseline body is optimised as the v3/v4 ones
// are (inlined beside their calls it measured up to 35% slower).
template <class K, class... A>
__attribute__((noinline)) void run_base(A... a) {
  K::template run<Isa::kBase>(a...);
}
#if FASTPREP_X86_LEVELS
template <class K, class... A>
FASTPREP_TARGET_V3 void run_v3(A... a) {
  K::template run<Isa::kV3>(a...);
}
template <class K, class... A>
FASTPREP_TARGET_V4 void run_v4(A... a) {
  K::template run<Isa::kV4>(a...);
}
template <class K, class... A>
FASTPREP_TARGET_V4I void run_v4i(A... a) {
  K::template run<Isa::kV4I>(a...);
}
#endif

// Runs kernel K at the active level. Arguments are taken by value (pointers, sizes, small views).
template <class K, class... A>
void dispatch(A... a) {
#if FASTPREP_X86_LEVELS
  switch (active_isa()) {
    case Isa::kV4I:
      return run_v4i<K>(a...);
    case Isa::kV4:
      return run_v4<K>(a...);
    case Isa::kV3:
      return run_v3<K>(a...);
    case Isa::kBase:
      break;
  }
#else
  (void)active_isa();  // a bad FASTPREP_ISA fails here too
#endif
  run_base<K>(a...);
}

}  // namespace fastprep::kernels
