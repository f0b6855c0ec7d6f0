// What every synced-op spec shares: the execution mode, and reading the
// integer attributes a Python plan lowers to (jax.ffi.ffi_lowering, int64).
#pragma once

#include <cstdint>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace cusync_ffi {

enum class Mode : int {
  kSerial = 0,   // producer then consumer in stream order (StreamSync baseline)
  kStreams = 1,  // producer and consumer run concurrently (two streams / two thread groups)
  kFused = 2,    // one persistent worker set takes producer tiles, then consumer tiles
};

namespace internal {
template <class T>
inline xla::ffi::Error get_attr(const xla::ffi::Dictionary& d, const char* name, T* out) {
  auto v = d.get<int64_t>(name);
  if (!v.has_value()) {
    return xla::ffi::Error::InvalidArgument(std::string("cusync_jax: missing integer attribute '") +
                                            name + "'");
  }
  *out = static_cast<T>(*v);
  return xla::ffi::Error::Success();
}
}  // namespace internal

}  // namespace cusync_ffi
