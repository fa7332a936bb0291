// collcomm/transport/nvlink.hpp — transport::nvlink for ranks of one process: the host owner of
// the connections, and the launch of the GPU executor's kernel.
//
// gpu::world owns, for nranks ranks placed on any visible GPUs (several ranks may share one):
//   - per channel and ordered pair (src, dst) a FIFO of `slots` slots in dst's device memory,
//   - per rank its message counts, per channel a barrier counter and a table of buffers,
//   - a host-mapped stall record per rank, where a timed-out wait says who waited for whom.
// Counters only grow and persist across calls, so no reset is ever needed between collectives.
// Peer access is enabled between every pair of GPUs in use; a pair without it is an error (use
// transport::pcie there).
//
// Ranks that share a GPU spin-wait for each other inside their kernels, so every block of every
// rank on that GPU must be resident at once: launch() checks this with the occupancy API and
// refuses, with an error, what cannot co-reside (fewer channels make it fit).
#pragma once

#include <collcomm/communicator.hpp>
#include <collcomm/error.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/transport/nvlink_device.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN

namespace detail {
inline void cuda_check(cudaError_t e, const char* what, int rank = no_rank) {
  if (e != cudaSuccess) fail(errc::system, what, rank, std::string("CUDA error: ") + cudaGetErrorString(e));
}

// Makes `device` current for its lifetime, then restores the caller's device.
class device_guard {
 public:
  explicit device_guard(int device) {
    cuda_check(cudaGetDevice(&saved_), "cudaGetDevice");
    if (saved_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
    changed_ = saved_ != device;
  }
  ~device_guard() {
    if (changed_) cudaSetDevice(saved_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int saved_ = 0;
  bool changed_ = false;
};
}  // namespace detail

namespace gpu {

struct options {
  int channels = 2;                                // thread blocks per rank and call
  std::size_t slot_bytes = std::size_t{64} << 10;  // bytes per FIFO slot (a message's maximum)
  int slots = 8;                                   // slots per connection
  std::chrono::milliseconds timeout{10000};        // bound of every device wait
};

class world {
 public:
  // devices[r] is rank r's GPU; empty: every rank on the current device.
  world(int nranks, std::vector<int> devices = {}, options opts = {}) : nranks_(nranks), opts_(opts) {
    if (nranks < 1) detail::fail(errc::invalid_argument, "gpu::world", no_rank, "argument 'nranks' is " + std::to_string(nranks) + "; it must be at least 1");
    if (opts.channels < 1) detail::fail(errc::invalid_argument, "gpu::world", no_rank, "option 'channels' must be at least 1");
    // A block waits for its message and its free send slot together: 2 slots keep a ring moving.
    if (opts.slots < 2) detail::fail(errc::invalid_argument, "gpu::world", no_rank, "option 'slots' must be at least 2");
    if (opts.slot_bytes < 16 || opts.slot_bytes % 16 != 0)
      detail::fail(errc::invalid_argument, "gpu::world", no_rank, "option 'slot_bytes' must be a positive multiple of 16");
    if (devices.empty()) {
      int d = 0;
      detail::cuda_check(cudaGetDevice(&d), "gpu::world");
      devices.assign(static_cast<std::size_t>(nranks), d);
    }
    if (static_cast<int>(devices.size()) != nranks)
      detail::fail(errc::invalid_argument, "gpu::world", no_rank, "argument 'devices' has " + std::to_string(devices.size()) + " entries for " + std::to_string(nranks) + " ranks");
    int ndev = 0;
    detail::cuda_check(cudaGetDeviceCount(&ndev), "gpu::world");
    for (int r = 0; r < nranks; ++r)
      if (devices[r] < 0 || devices[r] >= ndev)
        detail::fail(errc::invalid_argument, "gpu::world", r, "device " + std::to_string(devices[r]) + " does not exist (" + std::to_string(ndev) + " visible)");
    devices_ = std::move(devices);
    // Each rank queues its kernels on its own stream, and CUDA multiplexes streams onto
    // CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set before CUDA starts, 32 at most).
    // Two ranks of one GPU in one queue can deadlock: a rank's next kernel waits in front of a
    // peer's current one. So a GPU takes at most that many ranks.
    const char* conn = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const int queues = conn ? std::atoi(conn) : 8;
    for (int d : devices_)
      if (ranks_on_device(d) > queues)
        detail::fail(errc::invalid_argument, "gpu::world", no_rank,
                     std::to_string(ranks_on_device(d)) + " ranks on GPU " + std::to_string(d) + " exceed CUDA_DEVICE_MAX_CONNECTIONS = " +
                         std::to_string(queues) + " hardware queues; set CUDA_DEVICE_MAX_CONNECTIONS=32 before the first CUDA call, or put fewer ranks on one GPU");
    try {
      setup();
    } catch (...) {
      release();
      throw;
    }
  }
  ~world() { release(); }
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  int nranks() const noexcept { return nranks_; }
  int device_of(int rank) const { return devices_[static_cast<std::size_t>(rank)]; }
  const options& opts() const noexcept { return opts_; }
  int ranks_on_device(int device) const {
    int k = 0;
    for (int d : devices_) k += d == device;
    return k;
  }

  // The handle rank `rank`'s kernels take: its pointers are valid on the rank's device.
  transport::nvlink_device_handle handle(int rank) const {
    transport::nvlink_device_handle h = base_;
    for (const auto& [dev, fifos] : fifo_tables_)
      if (dev == device_of(rank)) h.fifos = fifos;
    return h;
  }

  // Set once a rank reported a stall: the connections' counts no longer agree, so later launches
  // are refused (errc::aborted) rather than pairing the wrong messages.
  void mark_failed(std::string why) {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    if (failed_why_.empty()) failed_why_ = std::move(why);
    failed_.store(true);
  }
  void check_usable(const char* what, int rank) const {
    if (!failed_.load()) return;
    std::lock_guard<std::mutex> lock(failed_mutex_);
    detail::fail(errc::aborted, what, rank, "the GPU world failed earlier and cannot be used: " + failed_why_);
  }

  // The stall a rank's kernel recorded (stalled == 0: none). Call after the stream synchronized.
  transport::stall_record stall_of(int rank) const {
    transport::stall_record s;
    std::memcpy(&s, static_cast<const transport::stall_record*>(host_stall_) + rank, sizeof s);
    return s;
  }

 private:
  void* alloc(int device, std::size_t bytes) {
    detail::device_guard g(device);
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "gpu::world: cudaMalloc");
    allocations_.push_back({device, p});
    detail::cuda_check(cudaMemset(p, 0, bytes), "gpu::world: cudaMemset");
    return p;
  }

  void setup() {
    const int n = nranks_, nc = opts_.channels;
    // Peer access between every pair of GPUs in use.
    for (int a : devices_)
      for (int b : devices_) {
        if (a == b) continue;
        int can = 0;
        detail::cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
        if (!can)
          detail::fail(errc::invalid_usage, "gpu::world", no_rank, "GPUs " + std::to_string(a) + " and " + std::to_string(b) + " cannot access each other's memory; use transport::pcie between them");
        detail::device_guard g(a);
        const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else detail::cuda_check(e, "cudaDeviceEnablePeerAccess");
      }

    // Connections, in the receiver's memory: data | sizes | tail | head.
    const std::size_t per_conn = opts_.slot_bytes * opts_.slots + sizeof(std::uint64_t) * (opts_.slots + 2);
    std::vector<transport::fifo_view> table(static_cast<std::size_t>(nc) * n * n);
    for (int dst = 0; dst < n; ++dst) {
      char* mem = static_cast<char*>(alloc(device_of(dst), per_conn * nc * n));
      for (int c = 0; c < nc; ++c)
        for (int src = 0; src < n; ++src) {
          char* base = mem + per_conn * (static_cast<std::size_t>(c) * n + src);
          auto* sizes = reinterpret_cast<std::uint64_t*>(base + opts_.slot_bytes * opts_.slots);
          table[(static_cast<std::size_t>(c) * n + src) * n + dst] = {base, sizes, sizes + opts_.slots, sizes + opts_.slots + 1};
        }
    }
    for (int d : devices_) {
      bool have = false;
      for (auto& ft : fifo_tables_) have |= ft.first == d;
      if (have) continue;
      auto* t = static_cast<transport::fifo_view*>(alloc(d, sizeof(transport::fifo_view) * table.size()));
      detail::cuda_check(cudaMemcpy(t, table.data(), sizeof(transport::fifo_view) * table.size(), cudaMemcpyHostToDevice), "gpu::world: cudaMemcpy");
      fifo_tables_.push_back({d, t});
    }

    base_.nranks = n;
    base_.nchannels = nc;
    base_.slots = static_cast<std::uint32_t>(opts_.slots);
    base_.slot_bytes = static_cast<std::uint32_t>(opts_.slot_bytes);
    base_.timeout_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.timeout).count());
    const int d0 = devices_[0];
    base_.steps = static_cast<std::uint64_t*>(alloc(d0, sizeof(std::uint64_t) * n * nc * n * 2));
    base_.buffers = static_cast<transport::buffer_pair*>(alloc(d0, sizeof(transport::buffer_pair) * nc * n));
    base_.barrier = static_cast<std::uint64_t*>(alloc(d0, sizeof(std::uint64_t) * nc));
    base_.barrier_gen = static_cast<std::uint64_t*>(alloc(d0, sizeof(std::uint64_t) * nc * n));
    void* stall = nullptr;
    detail::cuda_check(cudaHostAlloc(&stall, sizeof(transport::stall_record) * n, cudaHostAllocMapped | cudaHostAllocPortable), "gpu::world: cudaHostAlloc");
    std::memset(stall, 0, sizeof(transport::stall_record) * n);
    host_stall_ = stall;
    void* dstall = nullptr;
    detail::cuda_check(cudaHostGetDevicePointer(&dstall, stall, 0), "cudaHostGetDevicePointer");
    base_.stall = static_cast<transport::stall_record*>(dstall);
  }

  void release() noexcept {
    for (auto& [dev, p] : allocations_) {
      cudaSetDevice(dev);
      cudaFree(p);
    }
    allocations_.clear();
    if (host_stall_) cudaFreeHost(host_stall_);
    host_stall_ = nullptr;
  }

  int nranks_;
  options opts_;
  std::vector<int> devices_;
  transport::nvlink_device_handle base_{};
  std::vector<std::pair<int, transport::fifo_view*>> fifo_tables_;  // (device, table on it)
  std::vector<std::pair<int, void*>> allocations_;
  void* host_stall_ = nullptr;
  std::atomic<bool> failed_{false};
  mutable std::mutex failed_mutex_;
  std::string failed_why_;
};

// Loads the kernel of a composition on the current device. With CUDA's lazy loading, the first
// launch of a kernel may wait for every kernel running on the device — and a peer rank's kernel
// spins until this rank's kernel runs: a deadlock until the timeout. Preload every composition a
// rank will use before its peers launch (or run with CUDA_MODULE_LOADING=EAGER).
template <class K, class Algo, class T, class Op, class Tuning = kernels::tuning<>>
void preload() {
  cudaFuncAttributes attr{};
  detail::cuda_check(cudaFuncGetAttributes(&attr, &kernels::collective_kernel<K, Algo, T, Op, Tuning>), "gpu::preload");
}

// Enqueues rank `rank`'s part of collective K on `stream`. Asynchronous; capturable into a CUDA
// graph (nothing here allocates, maps or synchronizes).
template <class K, class Algo, class Tuning = kernels::tuning<>, class T, class Op>
void launch(world& w, int rank, coll_args a, const T* in, T* out, Op op, cudaStream_t stream) {
  w.check_usable(K::name, rank);
  const int device = w.device_of(rank);
  detail::device_guard guard(device);
  auto* kernel = &kernels::collective_kernel<K, Algo, T, Op, Tuning>;
  const std::size_t smem = kernels::kernel_smem_bytes(w.nranks());
  const int channels = w.opts().channels;

  // Co-residency: every channel of every rank on this GPU must be resident at once.
  static thread_local int checked_device = -1, blocks_per_sm = 0, sms = 0;
  if (checked_device != device) {
    detail::cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, Tuning::threads, smem), "cudaOccupancyMaxActiveBlocksPerMultiprocessor", rank);
    detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute", rank);
    checked_device = device;
  }
  const long need = static_cast<long>(w.ranks_on_device(device)) * channels;
  if (need > static_cast<long>(blocks_per_sm) * sms)
    detail::fail(errc::invalid_usage, K::name, rank,
                 std::to_string(w.ranks_on_device(device)) + " ranks x " + std::to_string(channels) + " channels need " + std::to_string(need) +
                     " co-resident blocks on GPU " + std::to_string(device) + ", which holds " + std::to_string(blocks_per_sm * sms) +
                     " of this kernel; use fewer channels (gpu::options::channels) or fewer ranks per GPU");

  a.nchannels = channels;
  const kernels::kernel_params<T, Op> p{w.handle(rank), a, in, out, op};
  kernel<<<channels, Tuning::threads, smem, stream>>>(p);
  detail::cuda_check(cudaGetLastError(), K::name, rank);
}

// Throws the stall rank `rank` recorded, if any: who waited, for which peer, on which channel and
// message. Call after the rank's stream synchronized.
inline void check_stall(world& w, int rank) {
  const transport::stall_record s = w.stall_of(rank);
  if (!s.stalled) return;
  const char* what = s.what == transport::stall_recv ? "a message from"
                     : s.what == transport::stall_send_slot ? "a free slot towards"
                     : s.what == transport::stall_size ? "a message of the expected size (counts differ across ranks) from"
                     : "the barrier";
  std::string msg = std::string("timed out waiting for ") + what;
  if (s.peer != no_peer) msg += " rank " + std::to_string(s.peer);
  msg += " (channel " + std::to_string(s.channel) + ", step " + std::to_string(s.step) + ")";
  w.mark_failed("rank " + std::to_string(s.rank) + " " + msg);
  detail::fail(s.what == transport::stall_size ? errc::invalid_argument : errc::timeout, "gpu collective", s.rank, msg);
}

}  // namespace gpu

// The GPU executor's communicator: rank `rank` of a gpu::world of ranks in this process. Calls
// are asynchronous on the stream passed as the collective's last argument; after synchronizing
// that stream, check() reports a stalled peer (a rank that never joined) as an error.
template <>
class communicator<transport::nvlink> {
 public:
  using transport_type = transport::nvlink;

  communicator(gpu::world& w, int rank) : w_(&w), rank_(rank) {
    if (rank < 0 || rank >= w.nranks())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.nranks()) + ")");
  }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->nranks(); }
  gpu::world& gpu_world() const noexcept { return *w_; }

  // Throws the stall this rank's kernels recorded, if any (call after the stream synchronized).
  void check() const { gpu::check_stall(*w_, rank_); }

  template <class K, class Algo, class T, class Op>
  void run(coll_args a, const T* in, index_t, T* out, index_t, const Op& op, cudaStream_t stream) const {
    a.rank = rank_;
    a.nranks = w_->nranks();
    gpu::launch<K, Algo>(*w_, rank_, a, in, out, op, stream);
  }

 private:
  gpu::world* w_;
  int rank_;
};
COLLCOMM_NAMESPACE_END
