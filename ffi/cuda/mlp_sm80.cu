// Kernel family 0: runs a synced MLP on the portable sm_80 GEMM kernels in
// one of three modes.
//   serial   producer kernel, then consumer kernel, on XLA's stream; no waits
//            or posts (the StreamSync baseline).
//   streams  producer on XLA's stream, consumer on a side stream behind the
//            wait kernel (two_streams.h); tiles from the stage counters.
//   fused    one persistent kernel (SMs x occupancy blocks) whose blocks take
//            positions from kFusedCounter: every producer tile is handed out
//            before any consumer tile, and producer tiles never wait, so the
//            schedule completes for any grid size.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/mlp_launch.h"
#include "cuda/mlp_sm80_kernels.cuh"
#include "cuda/two_streams.h"

namespace cusync_cuda {
namespace {

using sm80::KernelEntry;
using sm80::MlpKernelParams;
using xla::ffi::Error;

const std::vector<KernelEntry>& all_kernels() {
  static const std::vector<KernelEntry> kernels = [] {
    std::vector<KernelEntry> all;
    for (auto entries : {sm80::kernels_128x128(), sm80::kernels_128x256(), sm80::kernels_256x128()})
      all.insert(all.end(), entries.begin(), entries.end());
    return all;
  }();
  return kernels;
}

std::string available_tiles() {
  std::string s;
  for (const KernelEntry& e : all_kernels()) {
    if (e.bf16 || e.swiglu) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(e.tile_m) + "x" + std::to_string(e.tile_n) + "x" + std::to_string(e.tile_k);
  }
  return s;
}

Error find_kernel(bool bf16, bool swiglu, int m, int n, int k, const char* stage, const KernelEntry** out) {
  for (const KernelEntry& e : all_kernels()) {
    if (e.bf16 == bf16 && e.swiglu == swiglu && e.tile_m == m && e.tile_n == n && e.tile_k == k) {
      *out = &e;
      return Error::Success();
    }
  }
  return Error::InvalidArgument(std::string("cusync_jax: no sm80 kernel for the ") + stage + " tile " +
                                std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                "; compiled tiles: " + available_tiles() +
                                " (see cusync_jax.kernels.CUDA_CONFIGS)");
}

// Raises the kernel's dynamic shared-memory limit on this device (once) and
// returns how many of its blocks fit on one SM.
Error prepare_kernel(const KernelEntry& e, int device, const DeviceInfo& info, int* blocks_per_sm) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> occupancy;
  if (e.smem_bytes > info.max_smem_per_block) {
    return Error::InvalidArgument("cusync_jax: the " + std::to_string(e.tile_m) + "x" +
                                  std::to_string(e.tile_n) + " kernel needs " + std::to_string(e.smem_bytes) +
                                  " bytes of shared memory; this GPU allows " +
                                  std::to_string(info.max_smem_per_block) + ": choose a smaller tile");
  }
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(e.function, device);
  if (auto it = occupancy.find(key); it != occupancy.end()) {
    *blocks_per_sm = it->second;
    return Error::Success();
  }
  CUSYNC_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(e.function, cudaFuncAttributeMaxDynamicSharedMemorySize, e.smem_bytes),
      "raising the kernel's shared-memory limit");
  int blocks = 0;
  CUSYNC_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, e.function, e.threads, e.smem_bytes),
      "querying the kernel's occupancy");
  if (blocks < 1) {
    return Error::Internal("cusync_jax: the " + std::to_string(e.tile_m) + "x" + std::to_string(e.tile_n) +
                           " kernel does not fit on an SM of this GPU");
  }
  occupancy.emplace(key, blocks);
  *blocks_per_sm = blocks;
  return Error::Success();
}

Error launch(const KernelEntry& e, const MlpKernelParams& p, int grid, cudaStream_t stream, const char* what) {
  if (grid <= 0) return Error::Success();
  CUSYNC_CUDA_RETURN_IF_ERROR(e.launch(p, grid, stream), what);
  return Error::Success();
}

bool same_tile(const KernelEntry& a, const KernelEntry& b) {
  return a.tile_m == b.tile_m && a.tile_n == b.tile_n && a.tile_k == b.tile_k;
}

Error run_serial(const KernelEntry& producer, const KernelEntry& consumer, MlpKernelParams p, int P, int C,
                 cudaStream_t stream) {
  p.synced = false;
  p.counter = nullptr;
  p.persistent = false;
  p.first = 0;
  p.end = P;
  if (auto e = launch(producer, p, P, stream, "launching the producer kernel (serial)"); e.failure()) return e;
  p.first = P;
  p.end = P + C;
  return launch(consumer, p, C, stream, "launching the consumer kernel (serial)");
}

Error run_fused(const KernelEntry& kernel, MlpKernelParams p, int P, int C, int slots, cudaStream_t stream) {
  p.synced = true;
  p.counter = p.sync + cusync::kFusedCounter;
  p.persistent = true;
  p.first = 0;
  p.end = P + C;
  return launch(kernel, p, std::min(P + C, slots), stream, "launching the fused kernel");
}

Error run_streams(const KernelEntry& producer, const KernelEntry& consumer, MlpKernelParams p, int P, int C,
                  int producer_slots, int consumer_slots, int device, cudaStream_t stream) {
  const bool hardware_order = cusync::has(p.optimizations, cusync::kHardwareBlockOrder);
  // Both grids resident at once: P blocks take P / producer_slots of the SMs, C blocks C / consumer_slots.
  const bool one_wave = static_cast<int64_t>(P) * consumer_slots + static_cast<int64_t>(C) * producer_slots <=
                        static_cast<int64_t>(producer_slots) * consumer_slots;
  const bool wait_kernel = needs_wait_kernel(p.optimizations, one_wave);
  p.synced = true;
  p.persistent = false;

  MlpKernelParams pp = p;
  pp.counter = hardware_order ? nullptr : p.sync + cusync::kProducerCounter;
  pp.first = 0;
  pp.end = P;
  MlpKernelParams cp = p;
  cp.counter = hardware_order ? nullptr : p.sync + cusync::kConsumerCounter;
  cp.first = P;
  cp.end = P + C;
  return run_on_two_streams(
      device, stream, p.sync + cusync::kProducerStarted, wait_kernel,
      [&](cudaStream_t on) { return launch(producer, pp, P, on, "launching the producer kernel (streams)"); },
      [&](cudaStream_t on) { return launch(consumer, cp, C, on, "launching the consumer kernel (streams)"); });
}

}  // namespace

Error launch_mlp_sm80(const cusync_ffi::MlpSpec& s, const MlpBuffers& b, cudaStream_t stream,
                      const DeviceInfo& device) {
  if (s.hidden % 8 || s.ffn % 8 || s.out % 8) {
    return Error::InvalidArgument(
        "cusync_jax: the sm80 kernels copy 16-byte row chunks, so hidden, ffn and out must be multiples "
        "of 8; got hidden " + std::to_string(s.hidden) + ", ffn " + std::to_string(s.ffn) + ", out " +
        std::to_string(s.out) + " (pad the weights)");
  }
  if (s.producer.slices > 2) return Error::InvalidArgument("cusync_jax: the sm80 kernels handle at most 2 slices");
  const bool swiglu = s.producer.slices == 2;
  const KernelEntry* producer = nullptr;
  const KernelEntry* consumer = nullptr;
  if (auto e = find_kernel(b.bf16, false, s.producer.tile_rows, s.producer.tile_cols, s.tile_k1, "producer",
                           &producer);
      e.failure())
    return e;
  if (auto e = find_kernel(b.bf16, swiglu, s.consumer.tile_rows, s.consumer.tile_cols, s.tile_k2, "consumer",
                           &consumer);
      e.failure())
    return e;
  int dev = 0;
  if (auto e = stream_device(stream, &dev); e.failure()) return e;
  int producer_blocks = 0, consumer_blocks = 0;
  if (auto e = prepare_kernel(*producer, dev, device, &producer_blocks); e.failure()) return e;
  if (auto e = prepare_kernel(*consumer, dev, device, &consumer_blocks); e.failure()) return e;

  MlpKernelParams p{};
  p.x = b.x;
  p.w1 = b.w1;
  p.b1 = b.b1;
  p.w2 = b.w2;
  p.b2 = b.b2;
  p.y = b.y;
  p.h = b.h;
  p.sync = b.sync;
  p.producer = s.producer;
  p.consumer = s.consumer;
  p.policy = s.policy;
  p.activation = s.activation;
  p.hidden = static_cast<int>(s.hidden);
  p.ffn = static_cast<int>(s.ffn);
  p.out = static_cast<int>(s.out);
  p.optimizations = s.optimizations;
  const int P = s.producer.tile_count(), C = s.consumer.tile_count();

  cusync_ffi::Mode mode = s.mode;
  if (mode == cusync_ffi::Mode::kStreams) {
    // A captured graph may serialize the two branches with the wait kernel
    // first, which would spin forever. The handler does not declare itself
    // command-buffer compatible, so XLA runs it outside graphs; if a caller
    // captures the stream anyway, run the same tiles in the fused schedule
    // (deadlock-free in any order), or serially when the tiles differ.
    bool capturing = false;
    if (auto e = stream_is_capturing(stream, &capturing); e.failure()) return e;
    if (capturing) mode = same_tile(*producer, *consumer) ? cusync_ffi::Mode::kFused : cusync_ffi::Mode::kSerial;
  }
  switch (mode) {
    case cusync_ffi::Mode::kSerial:
      return run_serial(*producer, *consumer, p, P, C, stream);
    case cusync_ffi::Mode::kFused:
      if (!same_tile(*producer, *consumer)) {
        return Error::InvalidArgument(
            "cusync_jax: fused mode runs both GEMMs in one kernel, so both must use one tile shape; got " +
            std::to_string(producer->tile_m) + "x" + std::to_string(producer->tile_n) + " and " +
            std::to_string(consumer->tile_m) + "x" + std::to_string(consumer->tile_n) +
            " (use mode='streams' or 'serial' for different tiles)");
      }
      return run_fused(*consumer, p, P, C, device.sm_count * consumer_blocks, stream);
    case cusync_ffi::Mode::kStreams:
    default:
      return run_streams(*producer, *consumer, p, P, C, device.sm_count * producer_blocks,
                         device.sm_count * consumer_blocks, dev, stream);
  }
}

}  // namespace cusync_cuda
