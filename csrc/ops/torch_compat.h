// The torch versions whose stable-ABI headers fastprep builds against: 2.10 to 2.15, every one
// compiled with TORCH_TARGET_VERSION 2.10 (CMakeLists.txt), so the binary uses only the 2.10
// shims and runs on any torch >= 2.10 whichever headers built it. What differs between those
// headers, and is filled in here (version checks on torch's own macros, not guesses):
//
// - STABLE_TORCH_ERROR_CODE_CHECK, the shim-call check the bindings use (ops/str_arg.h), first
//   appears in the 2.13 headers (torch/csrc/stable/macros.h). For a 2.10 target the 2.13 headers
//   define it as TORCH_ERROR_CODE_CHECK (headeronly/util/shim_utils.h, throws std::runtime_error);
//   2.14+ define it for every target (looking up the 2.13 message getters at run time only when
//   the running torch has them). The 2.10-2.12 headers lack it: they get the 2.13 definition.
//
// Nothing else the ops use differs: TORCH_BOX, ToImpl / FromImpl (signature
// call(StableIValue, uint64_t extension_build_version, bool is_internal) in all six) and
// torch::stable::detail::to / from are the same, and an exception thrown by a kernel or by a
// ToImpl propagates out of the boxed function into torch's dispatcher, which raises it in Python
// as RuntimeError, on every version (tests/test_build_compat.py, .ci/compat).
//
// CMakeLists.txt force-includes this header into every op source (-include), so it is seen before
// any binding header whichever way those are split.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/headeronly/version.h>

#if !defined(TORCH_VERSION_MAJOR) || !defined(TORCH_VERSION_MINOR) || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 10) || TORCH_VERSION_MAJOR < 2
#error "fastprep needs the headers of torch >= 2.10 (stable-ABI torch_library_impl, string and list arguments)"
#endif

#if !defined(TORCH_TARGET_VERSION) || TORCH_TARGET_VERSION != TORCH_VERSION_2_10_0
#error "fastprep's ops must be built with TORCH_TARGET_VERSION = 2.10 (CMakeLists.txt), the oldest torch they claim"
#endif

#ifndef STABLE_TORCH_ERROR_CODE_CHECK
#define STABLE_TORCH_ERROR_CODE_CHECK(call) TORCH_ERROR_CODE_CHECK(call)
#endif
