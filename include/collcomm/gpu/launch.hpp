// collcomm/gpu/launch.hpp — enqueueing a rank's part of a collective: the grouped launch of the
// ranks that share a GPU, and preloading kernels.
//
// Ranks that share a GPU spin-wait for each other inside their kernels, so all of them must run
// at once. CUDA does not promise that for kernels launched separately on several streams (a
// rank's queued next kernel can hold a hardware queue or a driver lock that its peer's current
// kernel needs: seen as stalls with calls queued back to back). So, by default, the ranks of one
// GPU make ONE launch per call (launch_mode::grouped): each rank's launch() records an event on
// its stream and leaves its arguments; the last of them to arrive makes its stream wait for the
// others' events, launches one cooperative grid of (channels x local ranks) blocks — all resident
// at once or an error — and records an event that the others' streams wait for. The ranks of a GPU
// therefore meet on the host once per call (bounded by the timeout, naming who did not come).
// To capture such calls into a CUDA graph, put every rank's stream of a GPU into one capture (fork
// them from one capturing stream: gpu::capture_group in gpu/capture.hpp). launch_mode::per_rank
// launches each rank alone, for a world with one rank per GPU.
//
// With options::programmatic_launch (the default), a rank that launches alone (a world of
// processes, or one rank per GPU) launches as a programmatic dependent of its stream's previous
// kernel: the kernel waits on the GPU, before its first load or store, for the previous one to
// complete, so that its placement overlaps the previous kernel's end; a pushed call lets the next kernel be
// placed once it has met its peers (kernels/pushed_call.cuh). A kernel of the user's launched
// programmatically after a collcomm call must execute cudaGridDependencySynchronize before it ends,
// even one that reads nothing the call wrote (CUDA allows it to skip the wait; collcomm does not):
// the next call's wait orders it behind that kernel only, and so behind the call before it only
// through that kernel's own wait — without it two calls of one rank could run at once.
#pragma once

#include <collcomm/detail/cuda.hpp>
#include <collcomm/detail/join.hpp>
#include <collcomm/detail/wait.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/kinds.hpp>
#include <collcomm/types.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

namespace launch_detail {
// A call's launch parameters: its tuning's channels and slot bytes, or the world's where it names
// none. Throws errc::invalid_argument naming the tuning's value and the world's option when the
// tuning asks for more than the world allocated, or for slots too small for its protocol.
struct launch_shape {
  int channels;
  std::uint32_t slot_bytes;
};
template <class Tuning>
launch_shape shape_of(const world& w, const char* what, int rank) {
  using protocol_t = typename Tuning::protocol;
  const launch_shape s{tuned_channels<Tuning>(w.opts().channels),
                       static_cast<std::uint32_t>(tuned_slot_bytes<Tuning>(w.opts().slot_bytes))};
  if (s.channels > w.opts().channels)
    detail::fail(errc::invalid_argument, what, rank,
                 "tuning's channels = " + std::to_string(s.channels) +
                     " is more than the world's option 'channels' = " + std::to_string(w.opts().channels) +
                     " (connections exist for those only)");
  if (s.slot_bytes > w.opts().slot_bytes)
    detail::fail(errc::invalid_argument, what, rank,
                 "tuning's slot_bytes = " + std::to_string(s.slot_bytes) +
                     " is more than the world's option 'slot_bytes' = " + std::to_string(w.opts().slot_bytes));
  if (s.slot_bytes < kernels::min_slot_bytes<protocol_t>)
    detail::fail(errc::invalid_argument, what, rank,
                 (Tuning::slot_bytes ? "tuning's slot_bytes = " : "option 'slot_bytes' = ") +
                     std::to_string(s.slot_bytes) + " is too small for protocol " + protocol_t::name +
                     ": it needs at least " + std::to_string(kernels::min_slot_bytes<protocol_t>));
  if (s.slot_bytes % kernels::slot_granule<protocol_t>)
    detail::fail(errc::invalid_argument, what, rank,
                 (Tuning::slot_bytes ? "tuning's slot_bytes = " : "option 'slot_bytes' = ") +
                     std::to_string(s.slot_bytes) + " is not a multiple of " +
                     std::to_string(kernels::slot_granule<protocol_t>) + ", which protocol " + protocol_t::name +
                     " needs (its lines are that long)");
  return s;
}

// How a grid is launched: cooperative (a grouped launch: all blocks resident, or an error), or as
// a programmatic dependent of the stream's previous kernel (options::programmatic_launch).
enum class launch_as { plain, cooperative, programmatic };

// Enqueues one grid of (channels x p.nlocal) blocks of the composition's kernel (its pushed one:
// kernels::pushes_small_calls) on `stream`.
template <class K, class Algo, class Tuning, bool Pushed = false, class Handle, class T, class Op>
cudaError_t enqueue_kernel(const world& w, const kernels::launch_params<Handle, T, Op, Pushed>& p, int channels,
                           launch_as how, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(channels), static_cast<unsigned>(p.nlocal), 1);
  cfg.blockDim = dim3(Tuning::threads, 1, 1);
  cfg.dynamicSmemBytes = kernels::kernel_smem_bytes(w.size());
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (how == launch_as::cooperative) {
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
  } else {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
  }
  cfg.attrs = attr;
  cfg.numAttrs = how == launch_as::plain ? 0 : 1;
  return cudaLaunchKernelEx(&cfg, &kernels::collective_kernel<K, Algo, T, Op, Tuning, Handle, Pushed>, p);
}

// Co-residency: every channel of every rank sharing this GPU must be resident at once. Cached per
// thread, kernel and shared-memory size. The attribute is the kernel's maximum for the whole
// process: set to one world's exact size, a launch for a larger world (a split's parent after a
// smaller child, another thread's world) fails with "invalid argument" (seen on the H200). So it
// is never set below the 48 KiB every kernel may use without opting in.
//
// With `programmatic` (the launch asks for it), true where the kernel may be launched as a
// programmatic dependent: it was built for compute capability 9.0 or later (its PTX: code built
// for an older one, compiled at load, lacks the wait that orders it behind the previous kernel).
template <class K, bool Pushed = false>  // Pushed: a cache of its own for a composition's pushed kernel
bool check_resident(const void* kernel, int threads, std::size_t smem, int device, int sharing, int channels,
                    bool programmatic, int rank) {
  static thread_local int checked_device = -1, blocks_per_sm = 0, sms = 0, ptx = -1;  // ptx: -1 not read yet
  static thread_local const void* checked_kernel = nullptr;
  static thread_local std::size_t checked_smem = 0;
  if (checked_device != device || checked_kernel != kernel || checked_smem != smem) {
    detail::cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(std::max<std::size_t>(smem, 48 << 10))),
                       "cudaFuncSetAttribute", rank);
    detail::cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, threads, smem),
                       "cudaOccupancyMaxActiveBlocksPerMultiprocessor", rank);
    detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute",
                       rank);
    ptx = -1;
    checked_device = device;
    checked_kernel = kernel;
    checked_smem = smem;
  }
  const long need = static_cast<long>(sharing) * channels;
  if (need > static_cast<long>(blocks_per_sm) * sms)
    detail::fail(errc::invalid_usage, K::name, rank,
                 std::to_string(sharing) + " ranks x " + std::to_string(channels) + " channels need " +
                     std::to_string(need) + " co-resident blocks on GPU " + std::to_string(device) + ", which holds " +
                     std::to_string(blocks_per_sm * sms) +
                     " of this kernel; use fewer channels (gpu::options::channels) or fewer ranks per GPU");
  if (!programmatic) return false;
  if (ptx < 0) {
    cudaFuncAttributes fa{};
    detail::cuda_check(cudaFuncGetAttributes(&fa, kernel), "cudaFuncGetAttributes", rank);
    ptx = fa.ptxVersion;
  }
  return ptx >= 90;
}

// Ranks of one GPU launch their i-th calls together, so a send_recv call between two of them
// can only complete in the launch its peer's matching call is in, or later. Before a launch of
// send_recv calls (p: every local rank's part), per ordered pair (src, dst) of ranks of this GPU:
// a receive needs a message sent in this launch or in an earlier one (else it waits for a call
// its sender can only make after this launch ends: a deadlock until the timeout), and messages
// sent and not received in this launch wait in the connection's slots, which must hold them
// (else the sender waits for a receive that only a later launch can make). Either is refused at
// once, naming both ranks. Updates the pending counts when the launch goes ahead ("" returned).
template <class Handle, class T, class Op>
std::string check_p2p_launch(const world& w, world::launch_group& g, const kernels::kernel_params<Handle, T, Op>& p,
                             launch_shape shape) {
  const std::size_t nl = g.ranks.size();
  // Bytes one connection's slots hold for sure: the slots of every channel of the call (the
  // message is split over them), at most half a slot each (ll lines carry half their bytes).
  const std::uint64_t capacity = static_cast<std::uint64_t>(shape.channels) * w.opts().slots * (shape.slot_bytes / 2);
  std::vector<std::int64_t> pending = g.p2p_pending;
  std::vector<std::uint64_t> bytes = g.p2p_pending_bytes;
  for (std::size_t j = 0; j < nl; ++j) {  // sends first: a send and its receive in one launch match
    const coll_args& a = p.rank[j].args;
    const int to = a.send_peer == no_peer ? -1 : g.local_index(a.send_peer);
    if (to < 0 || static_cast<std::size_t>(to) == j) continue;
    pending[j * nl + to] += 1;
    bytes[j * nl + to] += a.count * sizeof(T);
  }
  for (std::size_t j = 0; j < nl; ++j) {
    const coll_args& a = p.rank[j].args;
    const int from = a.recv_peer == no_peer ? -1 : g.local_index(a.recv_peer);
    if (from < 0 || static_cast<std::size_t>(from) == j) continue;
    const std::size_t k = static_cast<std::size_t>(from) * nl + j;
    if (pending[k] <= 0)
      return "rank " + std::to_string(a.rank) + " receives from rank " + std::to_string(a.recv_peer) +
             ", which sends to it neither in this call nor before: ranks of one GPU launch their i-th calls together, "
             "so "
             "it waits for a call that cannot start until this one ends. Make the send and the receive of each pair "
             "one call: send_recv(comm, send, recv, count, send_peer, recv_peer, stream), or make them in a "
             "collcomm::group([&] { send(...); recv(...); })";
    pending[k] -= 1;
    bytes[k] -= std::min<std::uint64_t>(bytes[k], a.count * sizeof(T));
  }
  for (std::size_t k = 0; k < nl * nl; ++k)
    if (pending[k] > 0 && bytes[k] > capacity)
      return "rank " + std::to_string(g.ranks[k / nl]) + " sends " + std::to_string(bytes[k]) + " bytes to rank " +
             std::to_string(g.ranks[k % nl]) +
             " that it does not receive in this call, more than the connection holds (" + std::to_string(capacity) +
             " bytes): ranks of one GPU launch their i-th calls together, so the sender "
             "would wait for a receive that cannot start until this call ends. Make the send and the receive of each "
             "pair one call: send_recv(comm, send, recv, count, send_peer, recv_peer, stream), or make them in a "
             "collcomm::group([&] { send(...); recv(...); })";
  g.p2p_pending = std::move(pending);
  g.p2p_pending_bytes = std::move(bytes);
  return {};
}

// What a rank's call names, for the grouped launch's comparison (world::launch_call).
template <class K, class Algo, class Tuning, class T, class Op>
world::launch_call call_of(int rank, const coll_args& a, launch_shape shape) {
  world::launch_call c;
  c.rank = rank;
  c.kind = K::name;
  c.algo = Algo::name;
  c.protocol = Tuning::protocol::name;
  c.type = element_name<T>;
  c.op = op_name<Op>();
  c.rooted = K::rooted;
  c.p2p = std::is_same_v<K, kind::send_recv>;
  c.count = a.count;
  c.root = a.root;
  c.channels = shape.channels;
  c.slot_bytes = shape.slot_bytes;
  return c;
}

// A call's fingerprint as its FIFO messages carry it (kernels/channel.cuh, size_word) and its
// barriers compare it (kernels/direct_primitives.cuh): 31 bits of FNV-1a over the call's
// call_fingerprint (collcomm/fingerprint.hpp: the rank's count of collective calls before it,
// kind, algorithm, op, root, count, element type; the host executor carries the whole struct)
// and the GPU's launch parameters (protocol, channels, slot bytes). Ranks that disagree about a
// call, or about how many calls came before it, see another fingerprint (but for 1 in 2^31).
template <class K, class Algo, class Tuning, class T, class Op>
std::uint32_t fingerprint_of(std::uint64_t seq, const coll_args& a, launch_shape shape) {
  const call_fingerprint f = make_fingerprint<K, Algo, Op, T>(seq, a);
  std::uint32_t h = name_id(Tuning::protocol::name);
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ static_cast<unsigned char>(v >> (8 * i))) * 16777619u;
  };
  mix(f.seq);
  mix(f.count);
  mix(std::uint64_t{f.kind} << 32 | f.algo);
  mix(std::uint64_t{f.op} << 32 | static_cast<std::uint32_t>(f.root));
  mix(static_cast<std::uint64_t>(f.elem));
  mix(static_cast<std::uint64_t>(shape.channels) << 32 | shape.slot_bytes);
  return h & 0x7fffffffu;
}

// What differs between two ranks' calls of one launch ("" if they agree): everything a rank's
// call names must be the same on every rank, except a send_recv's count and peers.
inline std::string difference(const world::launch_call& first, const world::launch_call& c, int device) {
  auto differ = [](const char* x, const char* y) { return std::strcmp(x, y) != 0; };
  std::vector<std::string> what;
  if (differ(first.kind, c.kind)) what.emplace_back("collective");
  if (differ(first.algo, c.algo)) what.emplace_back("algorithm");
  if (differ(first.protocol, c.protocol)) what.emplace_back("protocol");
  if (differ(first.type, c.type)) what.emplace_back("element type");
  if (differ(first.op, c.op)) what.emplace_back("op");
  if (!first.p2p && !c.p2p && first.count != c.count) what.emplace_back("count");
  if (first.rooted && c.rooted && first.root != c.root) what.emplace_back("root");
  if (first.channels != c.channels || first.slot_bytes != c.slot_bytes)
    what.emplace_back("tuning (channels, slot bytes)");
  if (what.empty()) return {};
  std::string list;
  for (std::size_t i = 0; i < what.size(); ++i) list += (i ? (i + 1 == what.size() ? " and " : ", ") : "") + what[i];
  return world::describe(c) + " differs from " + world::describe(first) + ", which arrived before it on GPU " +
         std::to_string(device) + ": the ranks disagree on the " + list +
         " (every rank of a call must make the same call; the ranks of a GPU launch it together)";
}
}  // namespace launch_detail

// Loads the kernel of one composition over one device handle on the current device.
template <class K, class Algo, class T, class Op, class Tuning, transport::device_handle_like Handle>
void preload_kernel() {
  cudaFuncAttributes attr{};
  detail::cuda_check(
      cudaFuncGetAttributes(&attr, &kernels::collective_kernel<K, Algo, T, Op, kernel_tuning<Tuning>, Handle>),
      "gpu::preload");
  if constexpr (kernels::pushes_small_calls<K, Algo, T>())
    detail::cuda_check(
        cudaFuncGetAttributes(&attr, &kernels::collective_kernel<K, Algo, T, Op, kernel_tuning<Tuning>, Handle, true>),
        "gpu::preload");
}

// Enqueues rank `rank`'s part of collective K on `stream`, its kernels taking device handle
// `Handle` (gpu::launch in gpu/transport.hpp picks it from the transport and the world). Asynchronous; capturable into a CUDA graph (nothing here allocates, maps or
// synchronizes). With ranks sharing the GPU (grouped launch), it returns once every one of them
// has called it for this call, or throws errc::timeout naming those that did not within the
// world's timeout. `stage`: gpu/communicator.hpp's in-kernel staging (processes only).
template <class K, class Algo, tuning_like Tuning, transport::device_handle_like Handle, class T, class Op>
void launch_on(world& w, int rank, coll_args a, const T* in, T* out, Op op, cudaStream_t stream,
               void* stage = nullptr) {
  using params_t = kernels::kernel_params<Handle, T, Op>;
  using KT = kernel_tuning<Tuning>;
  static_assert(std::is_trivially_copyable_v<params_t>);
  w.check_usable(K::name, rank);
  const launch_detail::launch_shape shape = launch_detail::shape_of<Tuning>(w, K::name, rank);
  const int device = w.device_of(rank);
  detail::device_guard guard(device);
  const void* kernel = reinterpret_cast<const void*>(&kernels::collective_kernel<K, Algo, T, Op, KT, Handle>);
  const int channels = shape.channels;
  world::launch_group& g = w.group_of(device);
  const int nlocal = static_cast<int>(g.ranks.size());
  const bool grouped = w.opts().launch == launch_mode::grouped && nlocal > 1;
  // In a world of processes its other ranks on this GPU launch from their own processes (MPS).
  const int sharing = w.is_process() ? w.process().ranks_on_gpu : nlocal;
  // dependent: launched programmatically (options::programmatic_launch, where check_resident allows).
  const bool programmatic = !grouped && w.opts().programmatic_launch;
  bool dependent = false;
  // Small one_shot calls across processes go pushed, in a kernel of their own (kernels/
  // direct_primitives.cuh, "pushed calls"): every rank decides alike, from the call.
  bool pushed = false;
  if constexpr (kernels::pushes_small_calls<K, Algo, T>()) {
    using prims_t = kernels::block_primitives<Handle, T, Op, typename KT::protocol>;
    const auto align = static_cast<std::size_t>(prims_t::align_elems());  // the kernel's cut of channel ranges
    pushed = !grouped && stage && transport::pushes(static_cast<std::size_t>(a.count), sizeof(T), w.size(), channels, align);
    if (pushed)
      dependent = launch_detail::check_resident<K, true>(
          reinterpret_cast<const void*>(&kernels::collective_kernel<K, Algo, T, Op, KT, Handle, true>), KT::threads,
          kernels::kernel_smem_bytes(w.size()), device, sharing, channels, programmatic, rank);
  }
  if (!pushed)
    dependent = launch_detail::check_resident<K>(kernel, KT::threads, kernels::kernel_smem_bytes(w.size()), device,
                                                 sharing, channels, programmatic, rank);

  a.nchannels = channels;
  const world::launch_call call = launch_detail::call_of<K, Algo, Tuning, T, Op>(rank, a, shape);
  kernels::rank_params<T, Op> mine{a, in, out, op};
  mine.call = launch_detail::fingerprint_of<K, Algo, Tuning, T, Op>(w.collectives_launched(rank), a, shape);
  if (!grouped) {
    auto one_rank = [&]<class P>(P& p) {
      p.h = w.handle<Handle>(rank);
      p.h.slot_bytes = shape.slot_bytes;
      p.nlocal = 1;
      p.stage = stage;
      p.rank[0] = mine;
    };
    const auto how = dependent ? launch_detail::launch_as::programmatic : launch_detail::launch_as::plain;
    cudaError_t e = cudaSuccess;
    if constexpr (kernels::pushes_small_calls<K, Algo, T>()) {
      if (pushed) {  // the pushed kernel's parameters carry this rank's only
        kernels::launch_params<Handle, T, Op, true> p{};
        one_rank(p);
        e = launch_detail::enqueue_kernel<K, Algo, KT, true>(w, p, channels, how, stream);
      }
    }
    if (!pushed) {
      params_t p{};
      one_rank(p);
      e = launch_detail::enqueue_kernel<K, Algo, KT>(w, p, channels, how, stream);
    }
    detail::cuda_check(e, K::name, rank);
    w.record_launch(rank, mine.call, call);
    return;
  }

  // Grouped: arrive, and either wait for the last arrival's launch or be it.
  const int li = g.local_index(rank);
  detail::cuda_check(cudaEventRecord(g.ready[static_cast<std::size_t>(li)], stream), "cudaEventRecord", rank);
  std::unique_lock<std::mutex> lock(g.m);
  if (g.arrived == 0) {
    g.kernel = kernel;
    g.first = call;
    g.mismatch.clear();
    g.params.assign(sizeof(params_t), 0);
    std::fill(g.present.begin(), g.present.end(), 0);
  } else if (g.mismatch.empty()) {
    g.mismatch = launch_detail::difference(g.first, call, device);
    if (g.mismatch.empty() && (g.kernel != kernel || g.params.size() != sizeof(params_t)))
      g.mismatch = world::describe(call) + " while rank " + std::to_string(g.first.rank) + " on GPU " +
                   std::to_string(device) + " called " + world::describe(g.first) +
                   ": their kernels differ (an op or element type of the same name)";
  }
  if (g.mismatch.empty())
    std::memcpy(
        g.params.data() + offsetof(params_t, rank) + sizeof(kernels::rank_params<T, Op>) * static_cast<std::size_t>(li),
        &mine, sizeof mine);
  g.present[static_cast<std::size_t>(li)] = 1;
  const std::uint64_t gen = g.generation.load(std::memory_order_relaxed);
  if (++g.arrived < nlocal) {
    // The last rank usually arrives within microseconds: poll the generation (without the lock)
    // for g.spin, then sleep on the group's doorbell, which the launching rank rings. Every waiter
    // wakes on its own (no lock to take again in turn).
    lock.unlock();
    detail::wait_until(
        g.bell, w.opts().timeout, g.spin, [&] { return g.generation.load(std::memory_order_acquire) != gen; },
        [&] {
          lock.lock();
          std::vector<int> missing;
          for (int j = 0; j < nlocal; ++j)
            if (!g.present[static_cast<std::size_t>(j)]) missing.push_back(g.ranks[static_cast<std::size_t>(j)]);
          const std::string msg = "timed out after " + std::to_string(w.opts().timeout.count()) +
                                  " ms waiting for rank(s) " + detail::rank_list(missing) +
                                  " to make the same call (the ranks of GPU " + std::to_string(device) +
                                  " launch each call together)";
          lock.unlock();
          w.mark_failed("rank " + std::to_string(rank) + " " + msg);
          detail::fail(errc::timeout, K::name, rank, msg);
        });
    // The launching rank wrote result and recorded done before it moved the generation; neither
    // changes again before this rank arrives for its next call.
    const std::string result = g.result;
    if (!result.empty()) detail::fail(errc::invalid_usage, K::name, rank, result);
    w.record_launch(rank, mine.call, call);
    detail::cuda_check(cudaStreamWaitEvent(stream, g.done, 0), "cudaStreamWaitEvent", rank);
    return;
  }

  // The last arrival launches for everyone, on its own stream.
  std::string result = g.mismatch;
  if (result.empty()) {
    cudaError_t e = cudaSuccess;
    for (int j = 0; j < nlocal && e == cudaSuccess; ++j)
      if (j != li) e = cudaStreamWaitEvent(stream, g.ready[static_cast<std::size_t>(j)], 0);
    params_t p;
    std::memcpy(static_cast<void*>(&p), g.params.data(), sizeof p);
    if constexpr (std::is_same_v<K, kind::send_recv>) result = launch_detail::check_p2p_launch(w, g, p, shape);
    if (e == cudaSuccess && result.empty()) {
      p.h = w.handle<Handle>(rank);
      p.h.slot_bytes = shape.slot_bytes;
      p.nlocal = nlocal;
      e = launch_detail::enqueue_kernel<K, Algo, KT>(
          w, p, channels,
          w.opts().cooperative ? launch_detail::launch_as::cooperative : launch_detail::launch_as::plain, stream);
    }
    if (e == cudaSuccess && result.empty()) e = cudaEventRecord(g.done, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      result = std::string("the launch for the ranks of GPU ") + std::to_string(device) +
               " failed: " + cudaGetErrorString(e);
      if (e == cudaErrorStreamCaptureIsolation || e == cudaErrorStreamCaptureUnjoined ||
          e == cudaErrorStreamCaptureInvalidated || e == cudaErrorStreamCaptureUnmatched)
        result += " (ranks that share a GPU must be captured into one graph: gpu::capture_group)";
    }
  }
  g.result = result;
  g.arrived = 0;
  g.generation.store(gen + 1, std::memory_order_release);
  lock.unlock();
  detail::ring(g.bell);
  if (!result.empty()) detail::fail(errc::invalid_usage, K::name, rank, result);
  w.record_launch(rank, mine.call, call);
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
