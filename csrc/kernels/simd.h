// The x86 intrinsics, for kernels' per-level code (isa.h). GCC 12's AVX-512 headers build some
// results from _mm512_undefined_*() (`__Y = __Y`), which -Wmaybe-uninitialized reports wherever
// they are inlined; every lane of those is written before use, so the warning is off from here on
// in the translation units that include this header (only kernel sources do).
#pragma once

#include "kernels/isa.h"

#if FASTPREP_X86_LEVELS
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif
