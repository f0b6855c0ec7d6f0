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

// How kernel family 1 runs whole 128x128 tiles (Python: planner.MMA_SCHEDULES).
enum class MmaSchedule : int {
  kAuto = 0,         // cooperative where a launch gives a CTA at most two tiles, else pingpong
  kPingpong = 1,     // each MMA warpgroup owns every other tile
  kCooperative = 2,  // both MMA warpgroups on every tile, 64 rows each
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
