// collcomm/transport/nvlink.hpp — transport::nvlink for ranks of one process: the host owner of
// the connections, and the launch of the GPU executor's kernel.
//
// gpu::world owns, for nranks ranks placed on any visible GPUs (several ranks may share one):
//   - per channel and ordered pair (src, dst) a FIFO of `slots` slots in dst's device memory,
//   - per rank its message counts, per channel a barrier counter and a table of buffers,
//   - one abort word, and a host-mapped stall record per rank, where a timed-out wait says who
//     waited for whom.
// Counters only grow and persist across calls, so no reset is ever needed between collectives.
// Peer access is enabled between every pair of GPUs in use; a pair without it is an error (use
// transport::pcie there).
// options::connections = placement::host puts the connections (and, for a world of several GPUs,
// the shared words: counts, buffer table, barrier, abort) in pinned host memory mapped into every
// GPU instead: transport::pcie's staged path (transport/pcie.hpp), for GPUs without peer access.
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
// them from one capturing stream); tests/gpu/gpu_harness.cuh shows how. launch_mode::per_rank
// launches each rank alone, for a world with one rank per GPU.
//
// Worlds of processes (one rank per process: torchrun, mpirun, a fork loop). world::join(boot,
// device, options), or communicator<transport::nvlink>(boot, device, options), is collective over
// a bootstrap's ranks and gives a world in which this process drives rank boot.rank() only; the
// memory is shared through legacy CUDA IPC, transport/nvlink_process.hpp says how and why. It is
// the same world type, so launch(), check_stall() and the collectives serve both kinds; what
// differs sits in world::process_view. Several processes on ONE GPU need MPS
// (nvidia-cuda-mps-control -d) to be fast: without it their kernels time-slice (~2 ms slices on
// an H200, bench/probes/ipc_pingpong.cu: 4.5 ms per round trip), so every call is correct but
// each wait may take a slice — set a longer timeout there.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/communicator.hpp>
#include <collcomm/error.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/transport/nvlink_device.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
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

// Where a world's connections live (options::connections).
enum class placement {
  device,  // in the receiver's GPU memory: one GPU, or peers with peer access (NVLink, P2P over PCIe)
  host,    // pinned host memory mapped into every GPU (cudaHostAlloc mapped | portable): every message
           // crosses PCIe twice (sender GPU -> host, host -> receiver GPU); no peer access needed;
           // ordering at system scope. transport::pcie's staged connections.
};

enum class launch_mode {
  grouped,   // one launch per GPU per call for all of its ranks (the default; see the top)
  per_rank,  // every rank launches alone: only for one rank per GPU
};

struct options {
  int channels = 0;                                // thread blocks per rank and call; 0: SMs / ranks per GPU, at most 32
  // Bytes per FIFO slot (a message's maximum). Connections take, in each rank's GPU memory,
  // nranks x channels x slots x slot_bytes (8 ranks, 16 channels, 8 x 256 KiB: 256 MiB per rank; with automatic channels
  // it stays at a few hundred MiB per rank);
  // 1 MiB slots reach ~80 % of copy bandwidth on one H200 (bench/RESULTS.md), 256 KiB ~75 %.
  std::size_t slot_bytes = std::size_t{256} << 10;
  int slots = 8;                                   // slots per connection, a power of two
  std::chrono::milliseconds timeout{10000};        // bound of every device wait and of the launch rendezvous
  launch_mode launch = launch_mode::grouped;
  bool cooperative = true;  // grouped launches are cooperative (all blocks resident, or an error); env COLLCOMM_GPU_COOPERATIVE=0 turns it off
  placement connections = placement::device;  // placement::host: staged through pinned host memory (transport/pcie.hpp)
  // Worlds of processes only (world::join): bytes of each rank's staging window for direct
  // algorithms (one_shot, two_shot, direct), four times over in its GPU memory (input and output
  // of calls staged by copies; two alternating halves for calls that stage in the kernel).
  // A direct call whose input or output is larger is refused; 0 refuses every direct call.
  std::size_t window_bytes = std::size_t{32} << 20;
};

class world {
 public:
  // devices[r] is rank r's GPU; empty: every rank on the current device.
  world(int nranks, std::vector<int> devices = {}, options opts = {}) : nranks_(nranks), opts_(opts) {
    check_options(nranks, opts_, "gpu::world", no_rank);
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
    for (int d : devices_) {
      if (ranks_on_device(d) > kernels::max_launch_ranks)
        detail::fail(errc::invalid_argument, "gpu::world", no_rank,
                     std::to_string(ranks_on_device(d)) + " ranks on GPU " + std::to_string(d) + "; one GPU takes at most " + std::to_string(kernels::max_launch_ranks));
      if (opts_.launch == launch_mode::per_rank && ranks_on_device(d) > 1)
        detail::fail(errc::invalid_argument, "gpu::world", no_rank,
                     "option 'launch' = per_rank with " + std::to_string(ranks_on_device(d)) + " ranks on GPU " + std::to_string(d) +
                         ": ranks sharing a GPU must launch grouped (separate kernels of several streams need not run at once)");
    }
    if (opts_.channels == 0) {
      int most = 32;  // as NCCL's ring; beyond, connection memory grows and a block's share shrinks
      for (int d : devices_) {
        int sms = 0;
        detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d), "gpu::world: cudaDeviceGetAttribute");
        most = std::min(most, std::max(1, sms / ranks_on_device(d)));
      }
      opts_.channels = most;
    }
    try {
      setup();
    } catch (...) {
      release();
      throw;
    }
  }
  ~world() { release(); }
  world(const world&) = delete;

  // Throws errc::invalid_argument naming the first bad option (applies COLLCOMM_GPU_COOPERATIVE).
  static void check_options(int nranks, options& opts, const char* where, int rank) {
    if (nranks < 1) detail::fail(errc::invalid_argument, where, rank, "argument 'nranks' is " + std::to_string(nranks) + "; it must be at least 1");
    if (opts.channels < 0) detail::fail(errc::invalid_argument, where, rank, "option 'channels' must be at least 1 (or 0: automatic)");
    // A block waits for its message and its free send slot together: 2 slots keep a ring moving.
    if (opts.slots < 2 || (opts.slots & (opts.slots - 1)) != 0)
      detail::fail(errc::invalid_argument, where, rank, "option 'slots' = " + std::to_string(opts.slots) + " must be a power of two, at least 2");
    if (const char* coop = std::getenv("COLLCOMM_GPU_COOPERATIVE")) opts.cooperative = std::atoi(coop) != 0;
    if (opts.slot_bytes < 16 || opts.slot_bytes % 16 != 0 || opts.slot_bytes > (std::size_t{1} << 31))
      detail::fail(errc::invalid_argument, where, rank, "option 'slot_bytes' must be a positive multiple of 16, at most 2 GiB");
    if (opts.window_bytes % 256 != 0)
      detail::fail(errc::invalid_argument, where, rank, "option 'window_bytes' = " + std::to_string(opts.window_bytes) + " must be a multiple of 256");
  }
  world& operator=(const world&) = delete;

  // A world of boot.size() processes on one host, of which this process drives rank boot.rank()
  // on its `device` (transport/nvlink_process.hpp). Collective over the bootstrap's ranks; every
  // rank passes the same options (timeout aside), else errc::invalid_argument on every rank.
  template <bootstrap::bootstrap_like B>
  static std::shared_ptr<world> join(B& boot, int device, options opts = {});

  // What a world of processes adds; set by join() alone.
  struct process_view {
    int rank = -1;                              // the one rank this process drives
    int ranks_on_gpu = 1;                       // ranks of the world on this rank's GPU, all processes
    std::uint32_t* abort_word = nullptr;        // host view of the world-wide abort word: 1 a wait timed out, 2 abort()
    const char* abort_text = nullptr;           // who called abort() and why, written before the word
    std::byte* window = nullptr;                // this rank's staging window: input at 0, output at window_bytes
    std::size_t window_bytes = 0;
    std::function<std::vector<int>()> dead_ranks;              // ranks whose process ended
    std::function<void(int, const std::string&)> abort;        // raises the abort word with a reason
    // split(): one round of the control page's mailbox over every rank, and the join of a group.
    std::function<std::vector<std::vector<std::byte>>(std::span<const std::byte>)> mailbox;
    std::function<std::shared_ptr<world>(std::vector<int>, int, int, options)> split_group;
    std::shared_ptr<void> resources;  // the IPC mappings, the control page, this rank's device memory
  };
  bool is_process() const noexcept { return proc_.rank >= 0; }

  // The world of the ranks that pass this color (>= 0), ordered by (key, rank); null for a
  // negative color. Collective over every rank of a world of processes, in the same order as
  // their other split calls (transport/nvlink_process.hpp: through the control page's mailbox).
  std::shared_ptr<world> split(int rank, int color, int key);
  const process_view& process() const noexcept { return proc_; }

  // Ends the world for every rank: in a world of processes, raises the shared abort word, so
  // every running kernel of every rank returns and every later call throws errc::aborted; in a
  // world of threads, later calls throw (running kernels end by their timeout). Never blocks.
  void abort(int rank, const std::string& why) noexcept {
    if (is_process() && proc_.abort) proc_.abort(rank, why);
    try {
      mark_failed("rank " + std::to_string(rank) + " aborted the communicator" + (why.empty() ? "" : ": " + why));
    } catch (...) {
    }
  }

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
    if (is_process()) {
      const std::uint32_t word = std::atomic_ref<std::uint32_t>(*proc_.abort_word).load(std::memory_order_acquire);
      if (word == 2) detail::fail(errc::aborted, what, rank, std::string("the communicator was aborted: ") + proc_.abort_text);
      if (word != 0 && !failed_.load())
        detail::fail(errc::aborted, what, rank, "the communicator failed earlier: a wait of some rank timed out (communicator::check() on each rank says which)");
    }
    if (!failed_.load()) return;
    std::lock_guard<std::mutex> lock(failed_mutex_);
    detail::fail(errc::aborted, what, rank, "the GPU world failed earlier and cannot be used: " + failed_why_);
  }

  // The stall a rank's kernel recorded (stalled == 0: none; 2: being written). Call after the
  // stream synchronized.
  transport::stall_record stall_of(int rank) const {
    const auto* rec = static_cast<const transport::stall_record*>(stall_view_) + rank;
    std::atomic_thread_fence(std::memory_order_acquire);
    transport::stall_record s;
    std::memcpy(&s, rec, sizeof s);
    return s;
  }

  // The ranks of one GPU, meeting once per call to make one launch (launch_mode::grouped).
  struct launch_group {
    int device = 0;
    std::vector<int> ranks;  // world ranks on this GPU, ascending
    std::mutex m;
    std::condition_variable cv;
    std::atomic<std::uint64_t> generation{0};  // calls launched so far (written under m; read spinning without it)
    int arrived = 0;               // ranks arrived for the next call
    std::vector<char> present;     // (local rank): arrived for the next call
    const void* kernel = nullptr;  // the composition the first arrival asked for
    std::string mismatch;          // ranks asked for different compositions
    std::vector<unsigned char> params;  // the next launch's kernel_params, filled by each arrival
    std::vector<cudaEvent_t> ready;     // (local rank): recorded on its stream when it arrived
    cudaEvent_t done = nullptr;         // recorded after the kernel, on the launching stream
    std::string result;                 // the last launch's error ("" if it was enqueued)
    int local_index(int rank) const {
      for (std::size_t i = 0; i < ranks.size(); ++i)
        if (ranks[i] == rank) return static_cast<int>(i);
      return -1;
    }
  };
  launch_group& group_of(int device) {
    for (auto& g : groups_)
      if (g->device == device) return *g;
    detail::fail(errc::internal, "gpu::world", no_rank, "no launch group for GPU " + std::to_string(device));
  }

 private:
  struct process_tag {};
  world(process_tag, int nranks, options opts) : nranks_(nranks), opts_(opts) {}  // join() fills in the rest

  void* alloc(int device, std::size_t bytes) {
    detail::device_guard g(device);
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "gpu::world: cudaMalloc");
    allocations_.push_back({device, p});
    detail::cuda_check(cudaMemset(p, 0, bytes), "gpu::world: cudaMemset");
    return p;
  }

  // Connection memory as options::connections says: the receiver's GPU memory, or pinned host memory
  // mapped into every GPU (its device address, the same on every GPU under unified addressing).
  void* alloc_connections(int device, std::size_t bytes) {
    if (opts_.connections == placement::device) return alloc(device, bytes);
    void* p = nullptr;
    detail::cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "gpu::world: cudaHostAlloc (connections in host memory)");
    host_allocations_.push_back(p);
    std::memset(p, 0, bytes);
    void* dp = nullptr;
    detail::cuda_check(cudaHostGetDevicePointer(&dp, p, 0), "gpu::world: cudaHostGetDevicePointer (connections in host memory)");
    return dp;
  }

  void setup() {
    const int n = nranks_, nc = opts_.channels;
    // Peer access between every pair of GPUs in use.
    for (int a : devices_)
      for (int b : devices_) {
        if (a == b) continue;
        int can = 0;
        detail::cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
        if (!can && opts_.connections == placement::host) continue;  // staged: no peer access needed
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
      char* mem = static_cast<char*>(alloc_connections(device_of(dst), per_conn * nc * n));
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
    base_.system_scope = opts_.connections == placement::host;  // the host and PCIe are in the way
    for (int d : devices_) base_.system_scope |= d != d0;
    // Words every rank's kernel reaches: with staged connections across GPUs they cannot sit in
    // d0's memory (no peer access). Only the direct algorithms' barrier updates one with an atomic
    // read-modify-write, and transport::pcie refuses those on staged connections.
    const bool shared_on_host = opts_.connections == placement::host && ranks_on_device(d0) < n;  // several GPUs
    auto alloc_shared = [&](std::size_t bytes) { return shared_on_host ? alloc_connections(d0, bytes) : alloc(d0, bytes); };
    base_.steps = static_cast<std::uint64_t*>(alloc_shared(sizeof(std::uint64_t) * n * nc * n * 2));
    base_.buffers = static_cast<transport::buffer_pair*>(alloc_shared(sizeof(transport::buffer_pair) * nc * n));
    // One 128-byte line per channel's barrier counter: ranks hammer them concurrently.
    base_.barrier = static_cast<std::uint64_t*>(alloc_shared(128 * static_cast<std::size_t>(nc)));
    base_.barrier_stride = 128 / sizeof(std::uint64_t);
    base_.abort = static_cast<std::uint32_t*>(alloc_shared(sizeof(std::uint32_t)));
    base_.abort_on_host = shared_on_host;
    void* stall = nullptr;
    detail::cuda_check(cudaHostAlloc(&stall, sizeof(transport::stall_record) * n, cudaHostAllocMapped | cudaHostAllocPortable), "gpu::world: cudaHostAlloc");
    std::memset(stall, 0, sizeof(transport::stall_record) * n);
    host_stall_ = stall;
    stall_view_ = stall;
    void* dstall = nullptr;
    detail::cuda_check(cudaHostGetDevicePointer(&dstall, stall, 0), "cudaHostGetDevicePointer");
    base_.stall = static_cast<transport::stall_record*>(dstall);

    for (int d : devices_) {
      bool have = false;
      for (auto& g : groups_) have |= g->device == d;
      if (have) continue;
      auto g = std::make_unique<launch_group>();
      g->device = d;
      for (int r = 0; r < n; ++r)
        if (device_of(r) == d) g->ranks.push_back(r);
      g->present.assign(g->ranks.size(), 0);
      detail::device_guard guard(d);
      g->ready.resize(g->ranks.size(), nullptr);
      for (auto& e : g->ready) detail::cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "gpu::world: cudaEventCreate");
      detail::cuda_check(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "gpu::world: cudaEventCreate");
      groups_.push_back(std::move(g));
    }
  }

  void release() noexcept {
    for (auto& g : groups_) {
      cudaSetDevice(g->device);
      for (cudaEvent_t e : g->ready)
        if (e) cudaEventDestroy(e);
      if (g->done) cudaEventDestroy(g->done);
    }
    groups_.clear();
    for (auto& [dev, p] : allocations_) {
      cudaSetDevice(dev);
      cudaFree(p);
    }
    allocations_.clear();
    for (void* p : host_allocations_) cudaFreeHost(p);
    host_allocations_.clear();
    if (host_stall_) cudaFreeHost(host_stall_);
    host_stall_ = nullptr;
  }

  process_view proc_;  // first: its resources go after release() ran
  int nranks_;
  options opts_;
  std::vector<int> devices_;
  transport::nvlink_device_handle base_{};
  std::vector<std::pair<int, transport::fifo_view*>> fifo_tables_;  // (device, table on it)
  std::vector<std::pair<int, void*>> allocations_;
  std::vector<void*> host_allocations_;  // placement::host connections: pinned, mapped
  std::vector<std::unique_ptr<launch_group>> groups_;  // one per GPU in use
  void* host_stall_ = nullptr;           // worlds of threads: pinned, mapped; ours to free
  const void* stall_view_ = nullptr;     // the records' host view (in a world of processes, the control page)
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

namespace launch_detail {
// Enqueues one grid of (channels x p.nlocal) blocks of the composition's kernel on `stream`.
template <class K, class Algo, class Tuning, class T, class Op>
cudaError_t enqueue_kernel(const world& w, const kernels::kernel_params<T, Op>& p, bool cooperative, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(w.opts().channels), static_cast<unsigned>(p.nlocal), 1);
  cfg.blockDim = dim3(Tuning::threads, 1, 1);
  cfg.dynamicSmemBytes = kernels::kernel_smem_bytes(w.nranks());
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cooperative ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, &kernels::collective_kernel<K, Algo, T, Op, Tuning>, p);
}

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}
}  // namespace launch_detail

// Enqueues rank `rank`'s part of collective K on `stream`. Asynchronous; capturable into a CUDA
// graph (nothing here allocates, maps or synchronizes). With ranks sharing the GPU (grouped
// launch), it returns once every one of them has called it for this call, or throws
// errc::timeout naming those that did not within the world's timeout.
template <class K, class Algo, class Tuning = kernels::tuning<>, class T, class Op>
void launch(world& w, int rank, coll_args a, const T* in, T* out, Op op, cudaStream_t stream, void* stage = nullptr) {
  using params_t = kernels::kernel_params<T, Op>;
  static_assert(std::is_trivially_copyable_v<params_t>);
  w.check_usable(K::name, rank);
  using protocol_t = kernels::kernel_protocol<Algo, Tuning>;
  if (w.opts().slot_bytes < kernels::min_slot_bytes<protocol_t>)
    detail::fail(errc::invalid_argument, K::name, rank, "option 'slot_bytes' = " + std::to_string(w.opts().slot_bytes) + " is too small for protocol " +
                                                           protocol_t::name + ": it needs at least " + std::to_string(kernels::min_slot_bytes<protocol_t>));
  const int device = w.device_of(rank);
  detail::device_guard guard(device);
  auto* kernel = &kernels::collective_kernel<K, Algo, T, Op, Tuning>;
  const std::size_t smem = kernels::kernel_smem_bytes(w.nranks());
  const int channels = w.opts().channels;
  world::launch_group& g = w.group_of(device);
  const int nlocal = static_cast<int>(g.ranks.size());
  const bool grouped = w.opts().launch == launch_mode::grouped && nlocal > 1;

  // Co-residency: every channel of every rank on this GPU must be resident at once.
  // Cached per thread, kernel and shared-memory size. The attribute is the kernel's maximum for
  // the whole process: set to one world's exact size, a launch for a larger world (a split's
  // parent after a smaller child, another thread's world) fails with "invalid argument" (seen on
  // the H200). So it is never set below the 48 KiB every kernel may use without opting in.
  static thread_local int checked_device = -1, blocks_per_sm = 0, sms = 0;
  static thread_local const void* checked_kernel = nullptr;
  static thread_local std::size_t checked_smem = 0;
  if (checked_device != device || checked_kernel != reinterpret_cast<const void*>(kernel) || checked_smem != smem) {
    detail::cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(std::max<std::size_t>(smem, 48 << 10))), "cudaFuncSetAttribute", rank);
    detail::cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, Tuning::threads, smem), "cudaOccupancyMaxActiveBlocksPerMultiprocessor", rank);
    detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute", rank);
    checked_device = device;
    checked_kernel = reinterpret_cast<const void*>(kernel);
    checked_smem = smem;
  }
  // In a world of processes its other ranks on this GPU launch from their own processes (MPS).
  const int sharing = w.is_process() ? w.process().ranks_on_gpu : nlocal;
  const long need = static_cast<long>(sharing) * channels;
  if (need > static_cast<long>(blocks_per_sm) * sms)
    detail::fail(errc::invalid_usage, K::name, rank,
                 std::to_string(sharing) + " ranks x " + std::to_string(channels) + " channels need " + std::to_string(need) +
                     " co-resident blocks on GPU " + std::to_string(device) + ", which holds " + std::to_string(blocks_per_sm * sms) +
                     " of this kernel; use fewer channels (gpu::options::channels) or fewer ranks per GPU");

  a.nchannels = channels;
  const kernels::rank_params<T, Op> mine{a, in, out, op};
  if (!grouped) {
    params_t p{};
    p.h = w.handle(rank);
    p.nlocal = 1;
    p.stage = stage;
    p.rank[0] = mine;
    detail::cuda_check(launch_detail::enqueue_kernel<K, Algo, Tuning>(w, p, false, stream), K::name, rank);
    return;
  }

  // Grouped: arrive, and either wait for the last arrival's launch or be it.
  const int li = g.local_index(rank);
  detail::cuda_check(cudaEventRecord(g.ready[static_cast<std::size_t>(li)], stream), "cudaEventRecord", rank);
  std::unique_lock<std::mutex> lock(g.m);
  if (g.arrived == 0) {
    g.kernel = reinterpret_cast<const void*>(kernel);
    g.mismatch.clear();
    g.params.assign(sizeof(params_t), 0);
    std::fill(g.present.begin(), g.present.end(), 0);
  } else if (g.kernel != reinterpret_cast<const void*>(kernel) || g.params.size() != sizeof(params_t)) {
    if (g.mismatch.empty())
      g.mismatch = "rank " + std::to_string(rank) + " calls " + K::name + " (" + Algo::name + ", " + element_name<T> +
                   ") while rank(s) that arrived before it on GPU " + std::to_string(device) + " called another collective, algorithm or type";
  }
  if (g.mismatch.empty())
    std::memcpy(g.params.data() + offsetof(params_t, rank) + sizeof(kernels::rank_params<T, Op>) * static_cast<std::size_t>(li), &mine, sizeof mine);
  g.present[static_cast<std::size_t>(li)] = 1;
  const std::uint64_t gen = g.generation.load(std::memory_order_relaxed);
  if (++g.arrived < nlocal) {
    // The last rank usually arrives within microseconds, and a sleeping waiter's wake-up costs
    // more than the launch: spin a little (without the lock) before sleeping on the condition.
    lock.unlock();
    const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (g.generation.load(std::memory_order_acquire) == gen && std::chrono::steady_clock::now() < spin_end) std::this_thread::yield();
    lock.lock();
    if (!g.cv.wait_for(lock, w.opts().timeout, [&] { return g.generation.load(std::memory_order_relaxed) != gen; })) {
      std::vector<int> missing;
      for (int j = 0; j < nlocal; ++j)
        if (!g.present[static_cast<std::size_t>(j)]) missing.push_back(g.ranks[static_cast<std::size_t>(j)]);
      const std::string msg = "timed out after " + std::to_string(w.opts().timeout.count()) + " ms waiting for rank(s) " + launch_detail::rank_list(missing) +
                              " to make the same call (the ranks of GPU " + std::to_string(device) + " launch each call together)";
      lock.unlock();
      w.mark_failed("rank " + std::to_string(rank) + " " + msg);
      detail::fail(errc::timeout, K::name, rank, msg);
    }
    const std::string result = g.result;
    lock.unlock();
    if (!result.empty()) detail::fail(errc::invalid_usage, K::name, rank, result);
    detail::cuda_check(cudaStreamWaitEvent(stream, g.done, 0), "cudaStreamWaitEvent", rank);
    return;
  }

  // The last arrival launches for everyone, on its own stream.
  std::string result = g.mismatch;
  if (result.empty()) {
    cudaError_t e = cudaSuccess;
    for (int j = 0; j < nlocal && e == cudaSuccess; ++j)
      if (j != li) e = cudaStreamWaitEvent(stream, g.ready[static_cast<std::size_t>(j)], 0);
    if (e == cudaSuccess) {
      params_t p;
      std::memcpy(static_cast<void*>(&p), g.params.data(), sizeof p);
      p.h = w.handle(rank);
      p.nlocal = nlocal;
      e = launch_detail::enqueue_kernel<K, Algo, Tuning>(w, p, w.opts().cooperative, stream);
    }
    if (e == cudaSuccess) e = cudaEventRecord(g.done, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      result = std::string("the launch for the ranks of GPU ") + std::to_string(device) + " failed: " + cudaGetErrorString(e);
      if (e == cudaErrorStreamCaptureIsolation || e == cudaErrorStreamCaptureUnjoined || e == cudaErrorStreamCaptureInvalidated || e == cudaErrorStreamCaptureUnmatched)
        result += " (ranks that share a GPU must be captured into one graph: fork every rank's stream from one capturing stream)";
    }
  }
  g.result = result;
  g.arrived = 0;
  g.generation.store(gen + 1, std::memory_order_release);
  lock.unlock();
  g.cv.notify_all();
  if (!result.empty()) detail::fail(errc::invalid_usage, K::name, rank, result);
}

// Throws the stall that any rank of the world recorded, if one did: a timed-out wait ends every
// rank's call (the world's abort word), so every rank reports the first stall — who waited, for
// which peer, on which channel and message. Call after the rank's stream synchronized.
inline void check_stall(world& w, int rank) {
  if (w.is_process()) {
    // A GPU context that failed (a sticky CUDA error, left by the stream synchronization before
    // this call). Under MPS, a fatal fault of any client is reported to every client of the GPU,
    // and a client SIGKILLed while its kernel reads host memory it registered (transport::pcie's
    // staged connections) faults as its mappings go: name the rank whose process is gone.
    const cudaError_t e = cudaPeekAtLastError();
    if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction ||
        e == cudaErrorHardwareStackError || e == cudaErrorInvalidPc || e == cudaErrorInvalidAddressSpace || e == cudaErrorMpsClientTerminated) {
      std::string msg = std::string("this process's GPU context failed (") + cudaGetErrorString(e) + ")";
      // The fault can arrive while the dead process is still being torn down (its liveness lock
      // not yet released: seen 180 ms after the kill): look again for up to the timeout (at most
      // 5 s: a context can also fail for reasons of its own, a user's kernel for one).
      std::vector<int> dead;
      const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::steady_clock::duration>(w.opts().timeout, std::chrono::seconds(5));
      while (w.process().dead_ranks && (dead = w.process().dead_ranks()).empty() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!dead.empty())
        msg += "; the process of rank(s) " + launch_detail::rank_list(dead) +
               " is gone (killed or exited): under MPS a client that dies during a call can fault every client of the GPU; this process must exit to use CUDA again";
      w.mark_failed(msg);
      detail::fail(errc::system, "gpu collective", rank, msg);
    }
  }
  transport::stall_record s{};
  auto scan = [&] {
    for (int r = 0; r < w.nranks() && !s.stalled; ++r) {
      s = w.stall_of((rank + r) % w.nranks());  // this rank's own record first
      if (s.stalled == 2) {                      // being written: it is a few stores from done
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        s = w.stall_of((rank + r) % w.nranks());
      }
    }
  };
  scan();
  if (!s.stalled && w.is_process()) {
    // A world of processes: abort() ends kernels without a stall record; a timed-out wait raises
    // the abort word just before it claims its record, so give that record a moment to appear.
    if (std::atomic_ref<std::uint32_t>(*w.process().abort_word).load() == 2) w.check_usable("gpu collective", rank);  // errc::aborted
    for (int i = 0; i < 100 && !s.stalled && std::atomic_ref<std::uint32_t>(*w.process().abort_word).load() != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      scan();
    }
    if (!s.stalled) w.check_usable("gpu collective", rank);
  }
  if (!s.stalled) return;
  const char* what = s.what == transport::stall_recv ? "a message from"
                     : s.what == transport::stall_send_slot ? "a free slot towards"
                     : s.what == transport::stall_size ? "a message of the expected size (counts differ across ranks) from"
                     : "the barrier";
  std::string msg = std::string("rank ") + std::to_string(s.rank) + " timed out waiting for " + what;
  if (s.peer != no_peer) msg += " rank " + std::to_string(s.peer);
  msg += " (channel " + std::to_string(s.channel) + ", step " + std::to_string(s.step) + ")";
  if (s.rank != rank) msg += "; this rank's call was abandoned with it";
  if (w.is_process() && w.process().dead_ranks) {
    // A peer's process that ended (killed, crashed) is the likely cause: name it.
    const std::vector<int> dead = w.process().dead_ranks();
    if (!dead.empty()) msg += "; the process of rank(s) " + launch_detail::rank_list(dead) + " is gone (killed or exited)";
  }
  w.mark_failed(msg);
  detail::fail(s.what == transport::stall_size ? errc::invalid_argument : errc::timeout, "gpu collective", rank, msg);
}

}  // namespace gpu

// The GPU executor's communicator: rank `rank` of a gpu::world of ranks in this process, or this
// process's rank of a world of processes (made from a bootstrap). Calls are asynchronous on the
// stream passed as the collective's last argument; after synchronizing that stream, check()
// reports a stalled peer (a rank that never joined, a process that died) as an error.
template <>
class communicator<transport::nvlink> {
 public:
  using transport_type = transport::nvlink;

  // This process's rank boot.rank() of a new world of boot.size() processes, on GPU `device`
  // (gpu::world::join: collective over the bootstrap's ranks; the bootstrap is not used
  // afterwards). The communicator owns the world; its last copy frees every IPC mapping, the
  // control page and the device memory.
  template <bootstrap::bootstrap_like B>
  communicator(B& boot, int device, gpu::options opts = {}) : owner_(gpu::world::join(boot, device, opts)), w_(owner_.get()), rank_(boot.rank()) {}
  // This process's rank of a world of processes (world::join or world::split), which it shares.
  explicit communicator(std::shared_ptr<gpu::world> w) : owner_(std::move(w)), w_(owner_.get()), rank_(w_ && w_->is_process() ? w_->process().rank : -1) {
    if (rank_ < 0) detail::fail(errc::invalid_argument, "communicator", rank_, "argument 'w' is not a GPU world of processes");
  }

  communicator(gpu::world& w, int rank) : w_(&w), rank_(rank) {
    if (w.is_process() && rank != w.process().rank)
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is not the rank this process drives (" + std::to_string(w.process().rank) + ")");
    if (rank < 0 || rank >= w.nranks())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.nranks()) + ")");
  }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->nranks(); }
  gpu::world& gpu_world() const noexcept { return *w_; }

  // Throws the stall this rank's kernels recorded, if any (call after the stream synchronized).
  void check() const { gpu::check_stall(*w_, rank_); }

  // The ranks that pass the same color >= 0 form a new communicator (own connections and
  // memory), ordered by key, then by rank; a negative color (collcomm::no_color) gets
  // std::nullopt. Collective over every rank, in the same order as their other split and dup
  // calls; worlds of processes only (errc::invalid_usage for threads). Errors (a rank that died,
  // a timeout) are thrown on every rank.
  std::optional<communicator> split(int color, int key) const {
    std::shared_ptr<gpu::world> w = w_->split(rank_, color, key);
    if (!w) return std::nullopt;
    return communicator(std::move(w));
  }
  // A new communicator of the same ranks in the same order: split with one color and key = rank.
  communicator dup() const { return *split(0, rank_); }

  // Ends the communicator for every rank (gpu::world::abort): running kernels of a world of
  // processes return, later calls throw errc::aborted. Never blocks.
  void abort(const std::string& reason = {}) const noexcept { w_->abort(rank_, reason); }

  template <class K, class Algo, class T, class Op>
  void run(coll_args a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op, cudaStream_t stream) const {
    a.rank = rank_;
    a.nranks = w_->nranks();
    if constexpr (Algo::needs_direct) {
      if (w_->is_process()) {
        run_staged<K, Algo>(a, in, in_elems, out, out_elems, op, stream);
        return;
      }
    }
    gpu::launch<K, Algo>(*w_, rank_, a, in, out, op, stream);
  }

 private:
  // A direct algorithm across processes: peers cannot read this process's buffers, so the call
  // goes through this rank's IPC-shared window (as host::detail::staged_call does through the
  // host segment): input copied in on the stream (or, where each channel's peers read only its
  // own range of it — one_shot, direct all_gather — by the kernel, channel by channel, before its
  // entry barrier), the schedule run out of place on the windows (peers read them there; an
  // in-place call gives the same result out of place), output copied back — or, where no peer
  // reads outputs (all but two_shot), written where the caller wants it by the kernel.
  // The schedule's last barrier keeps peers off a window that the next call overwrites.
  template <class Algo>
  static constexpr bool reads_peer_outputs = [] {
    if constexpr (requires { algorithm_of<Algo>::reads_peer_outputs; }) return algorithm_of<Algo>::reads_peer_outputs;
    else return false;
  }();
  template <class K, class Algo, class T, class Op>
  void run_staged(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op, cudaStream_t stream) const {
    w_->check_usable(K::name, rank_);
    if (w_->opts().connections == gpu::placement::host)
      detail::fail(errc::invalid_usage, K::name, rank_,
                   std::string("algorithm ") + Algo::name +
                       " reads peers' buffers; this world's connections are staged through host memory (option 'connections' = "
                       "placement::host), which carries FIFO algorithms only: use ring, tree, recursive_doubling or pairwise");
    const gpu::world::process_view& p = w_->process();
    const std::size_t in_bytes = in_elems * sizeof(T), out_bytes = out_elems * sizeof(T);
    if (p.window_bytes == 0 || in_bytes > p.window_bytes || out_bytes > p.window_bytes)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   std::string("algorithm ") + Algo::name + " reads peers' buffers, which across processes go through each rank's window: " +
                       "argument 'count' = " + std::to_string(a.count) + " makes " + std::to_string(std::max(in_bytes, out_bytes)) +
                       " bytes, more than option 'window_bytes' = " + std::to_string(p.window_bytes) +
                       "; raise it, or use ring or tree across processes");
    T* win_in = reinterpret_cast<T*>(p.window);
    T* win_out = reinterpret_cast<T*>(p.window + p.window_bytes);
    detail::device_guard guard(w_->device_of(rank_));
    const bool stage_out = out_bytes && reads_peer_outputs<Algo>;
    T* kernel_out = stage_out ? win_out : out_bytes ? out : nullptr;
    if constexpr (kernels::stages_channel_range<K, Algo>()) {
      // The kernel copies each channel's range of the input into the window itself (peers read
      // only that range on that channel), and reads its own input where it is.
      gpu::launch<K, Algo>(*w_, rank_, a, in_bytes ? in : nullptr, kernel_out, op, stream, in_bytes ? win_in : nullptr);
    } else {
      if (in_bytes) detail::cuda_check(cudaMemcpyAsync(win_in, in, in_bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync (staging in)", rank_);
      gpu::launch<K, Algo>(*w_, rank_, a, in_bytes ? win_in : nullptr, kernel_out, op, stream);
    }
    if (stage_out) detail::cuda_check(cudaMemcpyAsync(out, win_out, out_bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync (staging out)", rank_);
  }

  std::shared_ptr<gpu::world> owner_;  // a world of processes; a world of threads is the caller's
  gpu::world* w_;
  int rank_;
};
COLLCOMM_NAMESPACE_END

#include <collcomm/transport/nvlink_process.hpp>  // world::join
