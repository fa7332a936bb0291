// collcomm/kernels/collective_kernel.cuh — the one __global__ entry of the GPU executor.
//
// collective_kernel<K, Algo, T, Op, Tuning, Handle> runs schedule Algo::run(K{}, ...) for every
// rank of one GPU that takes part in the call: block (x, y) is channel x of the launch's y-th
// rank. One launch per GPU per call (gpu/launch.hpp says why). The transport enters as its device
// handle's type (transport/device_handle.hpp): memory scope and whether peers' buffers can be
// loaded are compile-time properties of it. Tuning is a kernel_tuning (tuning.hpp: protocol and
// threads only), so tunings that differ in launch parameters share one kernel. Kernels have hidden visibility and live in collcomm's versioned
// inline namespace.
//
// This folder (kernels/) is the device side of the GPU executor: it includes algo/, the policy
// core (types, ops, kinds, tuning) and transport/*_device.hpp, never gpu/ or host/.
#pragma once

#include <collcomm/kernels/block_primitives.cuh>
#include <collcomm/kernels/grouped_call.cuh>
#include <collcomm/kernels/pushed_call.cuh>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// The smallest FIFO slot a protocol can use: simple moves 16-byte vectors; ll and ll128 need a
// header line and one data line (gpu::launch refuses smaller slots).
template <class Protocol>
inline constexpr std::size_t min_slot_bytes =
    std::is_same_v<Protocol, protocol::ll> ? 32 : std::is_same_v<Protocol, protocol::ll128> ? 256 : 16;
// The granularity of a protocol's slot: ll128's lines are 128-byte aligned (gpu::launch refuses
// other slot sizes).
template <class Protocol>
inline constexpr std::size_t slot_granule = std::is_same_v<Protocol, protocol::ll128> ? 128 : 16;

// Most ranks one launch carries (ranks of a world that share one GPU).
inline constexpr int max_launch_ranks = 32;

// An algorithm whose channel c, for kind K, reads from its peers only their input range
// channel_range(count, c, ...) (one_shot; direct all_gather) can have each channel stage its own
// range of the input inside the kernel, before its entry barrier: across processes the input goes
// to this rank's IPC window, and staging it there in the kernel saves a copy before it.
template <class K, class Algo>
constexpr bool stages_channel_range() {
  if constexpr (requires { Algo::template peers_read_channel_range<K>; })
    return Algo::template peers_read_channel_range<K>;
  else
    return false;
}

// An algorithm whose call, for kind K, reduces every peer's channel range once, with nothing to
// order but the inputs' arrival (one_shot all_reduce): its small calls in a launch that carries
// every rank need no barrier (grouped_call.cuh), and across processes they can go as pushed lines
// instead of staging and a barrier (direct_primitives.cuh, "pushed calls"), in elements a line's 8
// bytes hold whole. Such calls (transport::pushes) run a kernel of their own,
// collective_kernel<..., true>: the staged kernel carries none of the pushed path's code.
template <class K, class Algo>
constexpr bool reduces_ranges_once() {
  if constexpr (requires { Algo::template pushable<K>; })
    return Algo::template pushable<K>;
  else
    return false;
}
template <class K, class Algo, class T>
constexpr bool pushes_small_calls() {
  return reduces_ranges_once<K, Algo>() && sizeof(T) <= 8 && 8 % sizeof(T) == 0;
}

// A launch's parameters: the handle, and the parameters of each rank it carries. Ranks: how many
// it can carry — max_launch_ranks, or 1 for a pushed kernel (a rank of a world of processes
// launches its own grid): 192 bytes for f32 sum where 32 ranks' take 2424.
template <class Handle, class T, class Op, int Ranks = max_launch_ranks>
struct kernel_params {
  Handle h;
  int nlocal;   // ranks in this launch (gridDim.y)
  void* stage;  // (nlocal == 1, processes only) the window, into a half of which each channel first copies its
                // range of the input: stages_channel_range
  rank_params<T, Op> rank[Ranks];
};
// The parameters of collective_kernel<..., Pushed>.
template <class Handle, class T, class Op, bool Pushed>
using launch_params = kernel_params<Handle, T, Op, Pushed ? 1 : max_launch_ranks>;

// Dynamic shared memory a launch needs: the send and receive counts of each peer, the last head
// seen of each peer's connection, and each rank's buffer pointer for the direct primitives.
constexpr std::size_t kernel_smem_bytes(int nranks) {
  return (3 * sizeof(std::uint64_t) + sizeof(void*)) * static_cast<std::size_t>(nranks);
}

// The first pushed call of an epoch (pushed_call, below), staged, out of line.
template <class K, class Algo, class Params, class Prims>
__device__ __noinline__ void pushed_epoch_call(const Params& p, Prims& prims, coll_args a, range r, std::uint64_t k,
                                               int channel) {
  char* window = static_cast<char*>(p.stage);
  if (p.nlocal == p.h.nranks) prims.use_launch_buffers(p.rank);  // this launch carries every rank
  prims.publish_buffers();  // this rank's own input, which its reduce reads (the entry barrier publishes it)
  prims.stage_input(window, static_cast<std::size_t>(2 + (k & 1)) * p.h.window_bytes, r);
  Algo::run(K{}, prims, a);
  if (channel == 0) prims.clean_push_area(window);
  if (threadIdx.x == 0) {
    const std::uint64_t epoch = (k + 1) >> 32;
    p.h.staged_calls[p.h.nchannels + channel] = epoch;
    if (channel == 0)  // and for the channels this call does not run (their counts advanced too)
      for (int c = static_cast<int>(gridDim.x); c < p.h.nchannels; ++c) p.h.staged_calls[p.h.nchannels + c] = epoch;
  }
}

// A pushed kernel's call that pushed_call_fast (pushed_call.cuh) left: the first pushed call of an
// epoch, staged. Its lines are flagged (k + 1) mod 2^32; the first pushed call of each 2^32 calls
// of a channel (epoch (k + 1) >> 32, counted from 1) is staged instead, and zeroes the push areas
// (clean_push_area), so that no line carries a flag of an earlier epoch. Each channel records the
// epoch in a word of its own (no block reads a word another block of the same kernel writes); the
// next call's kernel, which reads them, starts after the zeroing.
template <class K, class Algo, class Params, class Prims, class Rank>
__device__ void pushed_call(const Params& p, Prims& prims, const Rank& mine, int channel, int& aborted) {
  __shared__ std::uint64_t staged_k;
  coll_args a = mine.args;
  a.channel = channel;
  a.nchannels = static_cast<int>(gridDim.x);
  const range r = channel_range(a.count, channel, a.nchannels, prims.align_elems());
  if (threadIdx.x == 0) {
    staged_k = p.h.staged_calls[channel];
    aborted = world_aborted(p.h.entry_abort);
  }
  __syncthreads();
  const std::uint64_t k = staged_k;
  if (threadIdx.x == 0) advance_staged_calls(p.h, channel, k);
  pushed_epoch_call<K, Algo>(p, prims, a, r, k, channel);
}

// Hidden visibility on a kernel instantiated with a user's type of internal linkage (an epilogue
// functor in an anonymous namespace) draws nvcc's #1407; the kernel is then internal anyway.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1407
template <class K, class Algo, class T, class Op, class Tuning, class Handle, bool Pushed = false>
COLLCOMM_KERNEL void __launch_bounds__(Tuning::threads)
    collective_kernel(const __grid_constant__ launch_params<Handle, T, Op, Pushed> p) {
  constexpr bool direct = Algo::needs_direct;
  static_assert(!Pushed || pushes_small_calls<K, Algo, T>(), "collcomm: a pushed kernel of a composition that pushes");
  static_assert(!direct || Handle::load_store,
                "collcomm transport axis: this algorithm loads and stores peers' buffers, and this transport carries "
                "FIFO messages only: use ring, tree, recursive_doubling or pairwise");
  using prims_t = block_primitives<Handle, T, Op, typename Tuning::protocol>;
#if __CUDA_ARCH__ >= 900
  // A programmatic launch (gpu/launch.hpp) may be placed while the stream's previous kernel runs:
  // it waits for that kernel to complete, its writes visible, before any load or store (nothing
  // is waited for in a launch that is not programmatic). The stream's next kernel is placed when
  // this one ends, or earlier where a pushed call has met its peers (pushed_call.cuh).
  cudaGridDependencySynchronize();
#endif
  if constexpr (Pushed)  // its common path, all of it; false: the call is staged (pushed_call, below)
    if (pushed_call_fast<Handle, T, Op>(p, static_cast<std::uint32_t>(prims_t::align_elems()))) return;
  if constexpr (!Pushed && reduces_ranges_once<K, Algo>() && grouped_call_type<T>)  // a small call of every rank
    if (grouped_one_shot<T, Op>(p, static_cast<std::uint32_t>(prims_t::align_elems()))) return;
  extern __shared__ std::uint64_t smem_steps[];  // (send | recv | head seen, peer), then (rank) pointers
  __shared__ int aborted;
  const rank_params<T, Op>& mine = p.rank[Pushed ? 0 : blockIdx.y];
  const int channel = static_cast<int>(blockIdx.x);
  const int n = p.h.nranks;
  std::uint64_t* global_steps = p.h.rank_steps(mine.args.rank, channel);  // (peer, {send, recv})
  // Direct schedules move no FIFO message: their counts need not be loaded nor stored back.
  if constexpr (!direct)
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      smem_steps[i] = global_steps[2 * i];
      smem_steps[n + i] = global_steps[2 * i + 1];
      smem_steps[2 * n + i] = 0;  // no head value seen yet
    }
  // A world that failed stays failed: later kernels of this GPU return at once (entry_abort is
  // this GPU's own memory; a world whose abort word is host memory is refused by the host too).
  // A pushed kernel loads it beside its other loads (pushed_call).
  if constexpr (!Pushed)
    if (threadIdx.x == 0) aborted = world_aborted(p.h.entry_abort);

  prims_t prims(p.h, mine.in, mine.out, mine.op, mine.args.rank, channel, smem_steps, smem_steps + n,
                smem_steps + 2 * n, reinterpret_cast<const void**>(smem_steps + 3 * n), &aborted);
  prims.set_call(mine.call);
  if constexpr (Pushed) {
    pushed_call<K, Algo>(p, prims, mine, channel, aborted);
    return;
  }
  if constexpr (direct) {
    if (p.nlocal == n) prims.use_launch_buffers(p.rank);  // this launch carries every rank
    prims.publish_buffers();
  }
  __syncthreads();

  coll_args a = mine.args;
  a.channel = channel;
  a.nchannels = static_cast<int>(gridDim.x);
  if constexpr (stages_channel_range<K, Algo>()) {
    if (p.stage) {  // the schedule's entry barrier publishes these stores (bar.sync, then a fence)
      // Which half of the window's two staging halves: this channel's count of staged calls, the
      // same on every rank (every rank makes the same calls); p.stage is the window's start.
      __shared__ std::size_t half_at;
      if (threadIdx.x == 0) {
        const std::uint64_t k = p.h.staged_calls[channel];
        advance_staged_calls(p.h, channel, k);
        half_at = static_cast<std::size_t>(2 + (k & 1)) * p.h.window_bytes;
      }
      __syncthreads();
      prims.stage_input(static_cast<char*>(p.stage), half_at,
                        channel_range(a.count, channel, a.nchannels, prims.align_elems()));
    }
  }
  Algo::run(K{}, prims, a);

  if constexpr (!direct) {
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      global_steps[2 * i] = smem_steps[i];
      global_steps[2 * i + 1] = smem_steps[n + i];
    }
  }
}
#pragma nv_diagnostic pop

}  // namespace kernels
COLLCOMM_NAMESPACE_END
