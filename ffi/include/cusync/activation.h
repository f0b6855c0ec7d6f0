// Epilogue activations of the producer GEMM, host and device.
#pragma once

#include <math.h>

#include "defs.h"

namespace cusync {

enum class Activation : int {
  kIdentity = 0,
  kRelu = 1,
  kGelu = 2,      // exact: 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh = 3,  // tanh approximation (jax.nn.gelu's default)
  kSilu = 4,
  kSwiglu = 5,    // silu(gate) * up; w1 holds [gate | up]
};

// Column slices of the producer output the activation consumes together.
CUSYNC_HD int activation_slices(Activation a) { return a == Activation::kSwiglu ? 2 : 1; }

// Activation applied in the producer's epilogue to slice `slice` of its output.
// SwiGLU: the gate slice gets silu, the up slice is stored as is; the consumer
// multiplies them when it reads A.
CUSYNC_HD float activate(Activation a, int slice, float x) {
  switch (a) {
    case Activation::kRelu: return x > 0.f ? x : 0.f;
    case Activation::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh: {
      const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.f + tanhf(u));
    }
    case Activation::kSilu: return x / (1.f + expf(-x));
    case Activation::kSwiglu: return slice == 0 ? x / (1.f + expf(-x)) : x;
    case Activation::kIdentity:
    default: return x;
  }
}

}  // namespace cusync
