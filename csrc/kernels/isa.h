// Runtime ISA dispatch: hot loops are compiled once per listed x86-64 level and the loader picks
// the best one for the running CPU (GCC/Clang function multiversioning via ifunc). The source is
// plain C++ that the compiler vectorises; integer kernels give the same bits in every clone, and
// float kernels do too because -ffp-contract=off forbids fusing into FMA.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(FASTPREP_NO_MULTIVERSION)
#define FASTPREP_MULTIVERSION __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#define FASTPREP_ISA_VARIANTS "x86-64,x86-64-v3,x86-64-v4"
#else
#define FASTPREP_MULTIVERSION
#define FASTPREP_ISA_VARIANTS "generic"
#endif

// For helpers called from multiversioned kernels: inlined, they are compiled for each clone's
// ISA; an out-of-line copy would be compiled once, for the baseline, and not vectorise.
#if defined(__GNUC__)
#define FASTPREP_INLINE inline __attribute__((always_inline))
#else
#define FASTPREP_INLINE inline
#endif

namespace fastprep::kernels {
// The variant the loader selects on this CPU, for build_info().
const char* selected_isa();
}  // namespace fastprep::kernels
