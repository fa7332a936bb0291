// collcomm/kernels/scoped_wait.cuh — scoped atomics, bounded waits and stall records: how a
// channel's block waits for its peers.
//
// Memory ordering. The scope is the device handle's type (transport/device_handle.hpp):
// `scope_device` when every rank of the world sits on one GPU, `scope_system` where a peer GPU or
// the host reads these words. Counters are relaxed loads and stores made morally strong at that
// scope, ordered by explicit acq_rel fences (simple_fifo.cuh and ll_fifo.cuh say where).
//
// Bounded waits. Every spin ends: at the handle's timeout, or when the world's abort word is set
// (polled every 256 spins). A wait that runs out of time records who waited for whom in the
// rank's host-mapped stall record (first claimant wins, so a record never mixes two stalls) and
// raises the abort words, so every wait of every rank ends within a poll and every later kernel
// of this GPU returns at entry: one missing peer costs one timeout, not one per queued call, and
// the host reports the stall (communicator::check) instead of hanging.
#pragma once

#include <collcomm/transport/device_handle.hpp>

#include <cuda/atomic>
#include <cuda/ptx>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

template <class Scope>
inline constexpr cuda::thread_scope thread_scope_of = cuda::thread_scope_system;
template <>
inline constexpr cuda::thread_scope thread_scope_of<transport::scope_device> = cuda::thread_scope_device;

// Relaxed loads, stores, adds and compare-exchanges, and acq_rel fences, at one scope.
template <class Scope>
struct scoped {
  static constexpr cuda::thread_scope scope = thread_scope_of<Scope>;
  __device__ static std::uint64_t load(std::uint64_t* p) {
    return cuda::atomic_ref<std::uint64_t, scope>(*p).load(cuda::std::memory_order_relaxed);
  }
  __device__ static void store(std::uint64_t* p, std::uint64_t v) {
    cuda::atomic_ref<std::uint64_t, scope>(*p).store(v, cuda::std::memory_order_relaxed);
  }
  __device__ static std::uint64_t fetch_add(std::uint64_t* p, std::uint64_t v) {
    return cuda::atomic_ref<std::uint64_t, scope>(*p).fetch_add(v, cuda::std::memory_order_relaxed);
  }
  // Relaxed; on failure `expected` holds the value found.
  __device__ static bool compare_exchange(std::uint64_t* p, std::uint64_t& expected, std::uint64_t v) {
    return cuda::atomic_ref<std::uint64_t, scope>(*p).compare_exchange_strong(expected, v,
                                                                              cuda::std::memory_order_relaxed);
  }
  __device__ static void fence() { cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, scope); }
};

// An abort word: written once, with system scope (ranks on other GPUs and the host poll it).
__device__ inline bool world_aborted(std::uint32_t* w) {
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*w).load(cuda::std::memory_order_relaxed) != 0;
}

enum class wait_result { ok, timeout, aborted };

// Thread 0's bounded wait until *addr >= target; on success the caller's later reads see what was
// published before the matching store (relaxed spin, then an acquire fence), and *seen (if given)
// holds the value that ended the wait (>= target).
template <class Handle>
__device__ wait_result wait_at_least(std::uint64_t* addr, std::uint64_t target, const Handle& h,
                                     std::uint64_t* seen = nullptr) {
  using ops = scoped<typename Handle::scope>;
  std::uint64_t v = ops::load(addr);
  if (v < target) {
    const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
    for (unsigned i = 1;; ++i) {
      v = ops::load(addr);
      if (v >= target) break;
      if ((i & 255u) == 0) {
        if (world_aborted(h.abort)) return wait_result::aborted;
        if (cuda::ptx::get_sreg_globaltimer() - start > h.timeout_ns) return wait_result::timeout;
      }
    }
  }
  ops::fence();
  if (seen) *seen = v;
  return wait_result::ok;
}

// A wait of rank `rank` that did not succeed. A genuine timeout (not a wait cut short by the
// world's abort word) raises the abort words and claims the rank's stall record; the first
// claimant writes it.
__device__ inline void record_stall(const transport::handle_fields& h, int rank, int channel, int peer,
                                    std::uint64_t step, std::uint32_t what, wait_result why, std::uint32_t call = 0,
                                    std::uint32_t peer_call = 0) {
  if (why == wait_result::aborted) return;
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*h.abort).store(1, cuda::std::memory_order_relaxed);
  if (h.entry_abort != h.abort)
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(*h.entry_abort)
        .store(1, cuda::std::memory_order_relaxed);
  transport::stall_record& s = h.stall[rank];
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> claim(s.stalled);
  std::uint32_t expected = 0;
  if (!claim.compare_exchange_strong(expected, 2, cuda::std::memory_order_relaxed)) return;  // 2: being written
  s.rank = rank;
  s.peer = peer;
  s.channel = channel;
  s.step = step;
  s.what = what;
  s.call = call;
  s.peer_call = peer_call;
  claim.store(1, cuda::std::memory_order_release);
}

}  // namespace kernels
COLLCOMM_NAMESPACE_END
