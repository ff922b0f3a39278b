// libjpeg's error handling as fastprep drives it, shared by the decoder (decode.cpp) and the
// transcoder (transcode.cpp): error_exit must not return, and exit() (its default) would kill the
// process, so fatal errors longjmp back to the caller's setjmp; warnings (corrupt data libjpeg
// recovered from) are kept as text, or become errors with stop_on_warning. Callers keep only
// trivially destructible state in the frames a longjmp crosses.
#pragma once
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t first

#include <jpeglib.h>

#include "jpeg/decode.h"  // kMaxWarnings

namespace fastprep::jpeg {

struct ErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg hands &pub back as cinfo->err
  std::jmp_buf jump;
  bool stop_on_warning;
  char message[JMSG_LENGTH_MAX];
  char warnings[kMaxWarnings][JMSG_LENGTH_MAX];
  long n_warnings;
};

inline void on_libjpeg_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// msg_level < 0: a warning (corrupt data libjpeg recovered from); >= 0: trace output, dropped.
inline void on_libjpeg_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (err->stop_on_warning) on_libjpeg_error(cinfo);
  if (err->n_warnings < kMaxWarnings) (*cinfo->err->format_message)(cinfo, err->warnings[err->n_warnings]);
  err->n_warnings++;
  cinfo->err->num_warnings++;
}

// Points a zeroed ErrorManager's libjpeg hooks at the handlers above; returns &err.pub for cinfo.err.
inline jpeg_error_mgr* install_error_manager(ErrorManager& err, bool stop_on_warning) {
  jpeg_error_mgr* pub = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_libjpeg_error;
  err.pub.emit_message = on_libjpeg_message;
  err.stop_on_warning = stop_on_warning;
  return pub;
}

}  // namespace fastprep::jpeg
