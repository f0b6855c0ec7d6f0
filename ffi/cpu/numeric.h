// float <-> f16 / bf16 conversions for the CPU backend (round to nearest even),
// written out so the CPU build needs no compiler extension types.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace cusync_cpu {

inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;        // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;       // overflow (>= 65520) -> inf
  if (abs < 0x38800000u) {                             // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;                // < half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;                  // in [14, 24]
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t v = abs - (112u << 23);  // rebias exponent
  v += 0xfffu + ((v >> 13) & 1u);
  return sign | static_cast<uint16_t>(v >> 13);
}

// Element access by XLA dtype, for the dtypes the CPU backend accepts.
inline float load_as_float(xla::ffi::DataType t, const void* base, int64_t i) {
  switch (t) {
    case xla::ffi::DataType::F32: return static_cast<const float*>(base)[i];
    case xla::ffi::DataType::BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return f16_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

inline void store_from_float(xla::ffi::DataType t, void* base, int64_t i, float v) {
  switch (t) {
    case xla::ffi::DataType::F32: static_cast<float*>(base)[i] = v; break;
    case xla::ffi::DataType::BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[i] = float_to_f16(v); break;
  }
}

// A whole buffer widened to float (operands are read many times per call).
inline std::vector<float> to_float(const xla::ffi::AnyBuffer& b) {
  std::vector<float> out(b.element_count());
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_float(b.element_type(), b.untyped_data(), i);
  return out;
}

inline bool supported_dtype(xla::ffi::DataType t) {
  return t == xla::ffi::DataType::F32 || t == xla::ffi::DataType::BF16 ||
         t == xla::ffi::DataType::F16;
}

}  // namespace cusync_cpu
