// The CPU tile executor: runs the tiles of two dependent stages concurrently
// on threads, in the same modes as the CUDA backend.
//
//   serial  all producer tiles, a join, then all consumer tiles (StreamSync).
//   streams a producer thread group and a consumer thread group at once, each
//           taking tiles from its own stage counter (the two-stream mode).
//   fused   every thread is a unit of the placed schedule the Hopper fused
//           kernel takes (cusync/placed_schedule.h): its own positions, then
//           stolen ones; every producer tile is held by a thread that never
//           waits before any consumer tile is taken, so it cannot deadlock for
//           any thread count, nor with only some threads running at once
//           (ExecOptions::resident, like CTAs beyond what fits the SMs).
//
// Consumer tiles wait through a Waiter, which spins on the semaphore with an
// acquire load and turns a wait longer than the timeout into an error (a
// policy that waits on more than is ever posted fails instead of hanging).
#pragma once

#include <atomic>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cusync/placed_schedule.h"
#include "cusync/semaphore.h"

namespace cusync_cpu {

enum class ExecMode : int { kSerial = 0, kStreams = 1, kFused = 2 };

struct ExecOptions {
  ExecMode mode = ExecMode::kFused;
  int threads = 0;             // 0: one per hardware thread
  int delay_us = 0;            // testing: random sleep before each tile, in [0, delay_us)
  uint64_t seed = 0;           // seed of those delays
  int64_t wait_timeout_ms = 0; // 0: 60 s
  int resident = 0;            // fused: threads running at once, the others starting as they finish (0: all)
};

// Shared state of one call: the first failure stops every thread.
class CallState {
 public:
  explicit CallState(int64_t timeout_ms) : timeout_ms_(timeout_ms > 0 ? timeout_ms : 60000) {}

  bool failed() const { return failed_.load(std::memory_order_relaxed); }

  void fail(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.load(std::memory_order_relaxed)) error_ = std::move(message);
    failed_.store(true, std::memory_order_relaxed);
  }

  const std::string& error() const { return error_; }

  // Waits until *sem >= count. Returns false on timeout or when another thread
  // failed; the caller then abandons its tile.
  bool wait(const int* sem, int count, const char* who) {
    if (cusync::semaphore_load_acquire(sem) >= count) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    for (uint32_t spin = 0;; ++spin) {
      if (cusync::semaphore_load_acquire(sem) >= count) return true;
      if ((spin & 63u) == 63u) {
        if (failed()) return false;
        if (std::chrono::steady_clock::now() > deadline) {
          fail(std::string("cusync_jax: ") + who + " waited longer than " +
               std::to_string(timeout_ms_) + " ms for a semaphore to reach " + std::to_string(count) +
               " (it holds " + std::to_string(cusync::semaphore_load_acquire(sem)) +
               "): the policy waits for posts that never come");
          return false;
        }
        std::this_thread::yield();
      }
    }
  }

 private:
  int64_t timeout_ms_;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::string error_;
};

// The executor controls of a decoded op spec (MlpSpec, ConvPairSpec).
template <class Spec>
ExecOptions exec_options_of(const Spec& s) {
  ExecOptions o;
  o.mode = static_cast<ExecMode>(s.mode);
  o.threads = s.threads;
  o.delay_us = s.delay_us;
  o.seed = static_cast<uint64_t>(s.seed);
  o.wait_timeout_ms = s.wait_timeout_ms;
  o.resident = s.resident;
  return o;
}

inline void random_delay(const ExecOptions& o, int stage, int index) {
  if (o.delay_us <= 0) return;
  // splitmix64 of (seed, stage, index): a reproducible delay per tile.
  uint64_t z = o.seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(stage) * 1000003u + index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  std::this_thread::sleep_for(std::chrono::microseconds(z % static_cast<uint64_t>(o.delay_us)));
}

// Runs producer(i) for i < n1 and consumer(i) for i < n2 in `o.mode`.
// `producer`/`consumer` take the schedule position; consumer returns false if
// it abandoned its tile (a failed wait).
template <class P, class C>
void run_two_stages(const ExecOptions& o, CallState& state, int n1, int n2, P&& producer, C&& consumer) {
  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;

  auto run_pool = [&](int count, auto&& body) {
    std::vector<std::thread> pool;
    pool.reserve(count);
    for (int t = 0; t < count; ++t) pool.emplace_back(body);
    for (auto& th : pool) th.join();
  };

  std::atomic<int> next1{0}, next2{0};
  auto producer_loop = [&] {
    for (int i; !state.failed() && (i = next1.fetch_add(1)) < n1;) {
      random_delay(o, 0, i);
      producer(i);
    }
  };
  auto consumer_loop = [&] {
    for (int i; !state.failed() && (i = next2.fetch_add(1)) < n2;) {
      random_delay(o, 1, i);
      if (!consumer(i)) return;
    }
  };

  switch (o.mode) {
    case ExecMode::kSerial:
      run_pool(threads, producer_loop);
      run_pool(threads, consumer_loop);
      break;
    case ExecMode::kStreams: {
      // One group per stage, like two streams; at least one thread each so the
      // producers always progress.
      const int np = threads > 1 ? threads / 2 : 1;
      const int nc = threads > 1 ? threads - np : 1;
      std::vector<std::thread> pool;
      for (int t = 0; t < np; ++t) pool.emplace_back(producer_loop);
      for (int t = 0; t < nc; ++t) pool.emplace_back(consumer_loop);
      for (auto& th : pool) th.join();
      break;
    }
    case ExecMode::kFused:
    default: {
      std::vector<int> flags(static_cast<size_t>(n1) + n2, 0);
      int cursors[2] = {0, 0};
      const cusync::PlacedSchedule schedule{flags.data(), cursors, n1, n1 + n2, threads};
      // Residency slots: a unit runs once it holds one, and holds it to the end.
      const int resident = o.resident > 0 ? std::min(o.resident, threads) : threads;
      std::mutex slots_mu;
      std::condition_variable slots_cv;
      int free_slots = resident;
      std::vector<std::thread> pool;
      pool.reserve(threads);
      for (int unit = 0; unit < threads; ++unit)
        pool.emplace_back([&, unit] {
          {
            std::unique_lock<std::mutex> lock(slots_mu);
            slots_cv.wait(lock, [&] { return free_slots > 0; });
            --free_slots;
          }
          cusync::PlacedClaim claim = cusync::placed_start(schedule, unit);
          for (int i; !state.failed() && (i = cusync::placed_next(schedule, claim)) < n1 + n2;) {
            if (i < n1) {
              random_delay(o, 0, i);
              producer(i);
            } else {
              random_delay(o, 1, i - n1);
              if (!consumer(i - n1)) break;
            }
          }
          {
            std::lock_guard<std::mutex> lock(slots_mu);
            ++free_slots;
          }
          slots_cv.notify_one();
        });
      for (auto& th : pool) th.join();
      break;
    }
  }
}

}  // namespace cusync_cpu
