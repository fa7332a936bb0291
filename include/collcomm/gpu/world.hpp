// collcomm/gpu/world.hpp — gpu::world: the host owner of a GPU world's memory and state.
//
// A world of nranks ranks placed on any visible GPUs (several ranks may share one) owns:
//   - per channel and ordered pair (src, dst) a FIFO of `slots` slots (transport/connections.hpp):
//     in dst's GPU memory (placement::device: transport::nvlink, transport::pcie), or in pinned
//     host memory mapped into every GPU (placement::host: transport::pcie_staged),
//   - per rank its message counts, per channel a barrier counter and a table of buffers,
//   - the abort words, and a host-mapped stall record per rank, where a timed-out wait says who
//     waited for whom,
//   - per GPU a launch group: the rendezvous that makes one launch of all its ranks per call
//     (gpu/launch.hpp).
// Counters only grow and persist across calls, so no reset is ever needed between collectives.
// Peer access is enabled between every pair of GPUs in use (placement::device); a pair without it
// is an error (use transport::pcie_staged there).
//
// Ranks as threads of this process: gpu::world(nranks, devices, options), then one
// communicator per rank (gpu/communicator.hpp). Ranks as processes: world::join (gpu/
// process_world.hpp) makes the same type, in which this process drives one rank and the memory is
// shared through CUDA IPC; what only such a world has is its process_view.
//
// The world decides at set-up which device handle its kernels take (transport/device_handle.hpp):
// scope_device when every rank sits on one GPU, scope_system otherwise — scope_is_device().
//
// This folder (gpu/) is the GPU executor's host side: it includes the policy core, algo/,
// kernels/, transport/, bootstrap/ and detail/, never host/.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/detail/cuda.hpp>
#include <collcomm/detail/wait.hpp>
#include <collcomm/error.hpp>
#include <collcomm/gpu/options.hpp>
#include <collcomm/gpu/process_resources.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/transport/connections.hpp>
#include <collcomm/transport/device_handle.hpp>
#include <collcomm/transport/nvlink.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

class world {
 public:
  // devices[r] is rank r's GPU; empty: every rank on the current device. The options are checked
  // (errc::invalid_argument naming the option) and the environment applied (gpu/options.hpp).
  world(int nranks, std::vector<int> devices = {}, options opts = {}) : nranks_(nranks), opts_(with_environment(opts)) {
    check_options(nranks, opts_, "gpu::world", no_rank);
    if (devices.empty()) {
      int d = 0;
      detail::cuda_check(cudaGetDevice(&d), "gpu::world");
      devices.assign(static_cast<std::size_t>(nranks), d);
    }
    if (static_cast<int>(devices.size()) != nranks)
      detail::fail(errc::invalid_argument, "gpu::world", no_rank,
                   "argument 'devices' has " + std::to_string(devices.size()) + " entries for " +
                       std::to_string(nranks) + " ranks");
    int ndev = 0;
    detail::cuda_check(cudaGetDeviceCount(&ndev), "gpu::world");
    for (int r = 0; r < nranks; ++r)
      if (devices[r] < 0 || devices[r] >= ndev)
        detail::fail(errc::invalid_argument, "gpu::world", r,
                     "device " + std::to_string(devices[r]) + " does not exist (" + std::to_string(ndev) + " visible)");
    devices_ = std::move(devices);
    for (int d : devices_) {
      if (ranks_on_device(d) > kernels::max_launch_ranks)
        detail::fail(errc::invalid_argument, "gpu::world", no_rank,
                     std::to_string(ranks_on_device(d)) + " ranks on GPU " + std::to_string(d) +
                         "; one GPU takes at most " + std::to_string(kernels::max_launch_ranks));
      if (opts_.launch == launch_mode::per_rank && ranks_on_device(d) > 1)
        detail::fail(
            errc::invalid_argument, "gpu::world", no_rank,
            "option 'launch' = per_rank with " + std::to_string(ranks_on_device(d)) + " ranks on GPU " +
                std::to_string(d) +
                ": ranks sharing a GPU must launch grouped (separate kernels of several streams need not run at once)");
    }
    if (opts_.channels == 0) {
      // One block per SM where few ranks share a GPU (2 ranks: 64 channels; direct all_gather moves
      // 86 % of copy bandwidth at 256 MiB with them, 78 % with 32: bench/RESULTS.md), within 32..64
      // and 128 / ranks, which bounds the connections' memory (ranks x channels x slots x slot_bytes).
      int most = std::clamp(128 / nranks, 32, 64);
      for (int d : devices_) {
        int sms = 0;
        detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d),
                           "gpu::world: cudaDeviceGetAttribute");
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
  world& operator=(const world&) = delete;

  // This process's rank `rank` of a world of `nranks` ranks whose messages a network proxy
  // carries (gpu/net_proxy.hpp): only this rank's connections exist here. Towards a peer of
  // another host, each is in pinned host memory mapped into `device` — per channel an outbox
  // (connection rank -> peer: the kernel writes it, the proxy sends it) and an inbox (peer ->
  // rank: the proxy fills it, the kernel reads it). Towards a peer of this rank's host group
  // (`near_ranks`, ascending, this rank among them; empty: none), the connection is the one of
  // `near`, that group's world of processes (join_world over the group), which the kernels write
  // and read directly and the proxy never touches. `ranks_on_gpu`: ranks of the world on this
  // GPU, all processes (for the residency check of gpu/launch.hpp). FIFO algorithms only; no window.
  struct net_tag {};
  world(net_tag, int nranks, int rank, int device, int ranks_on_gpu, options opts,
        std::shared_ptr<world> near = nullptr, std::vector<int> near_ranks = {})
      : nranks_(nranks), opts_(with_environment(opts)), near_(std::move(near)), near_ranks_(std::move(near_ranks)) {
    check_options(nranks, opts_, "communicator<net>", rank);
    if (opts_.channels == 0) {
      int sms = 0;
      detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                         "communicator<net>: cudaDeviceGetAttribute");
      opts_.channels = std::min(8, std::max(1, sms / std::max(1, ranks_on_gpu)));
    }
    devices_.assign(static_cast<std::size_t>(nranks), device);
    proc_.rank = rank;
    proc_.ranks_on_gpu = ranks_on_gpu;
    try {
      setup_net(rank, device);
    } catch (...) {
      release();
      throw;
    }
  }
  bool is_net() const noexcept { return !net_table_.empty(); }
  // A net world: whether `peer` is of this rank's host group (its connections are GPU memory).
  bool is_near(int peer) const noexcept {
    return static_cast<std::size_t>(peer) < near_mask_.size() && near_mask_[static_cast<std::size_t>(peer)] != 0;
  }
  // A net world: the host view of connection (channel, src, dst), one of this rank's with a peer
  // that is not near (a near one's pointers are GPU memory).
  const transport::fifo_view& net_fifo(int channel, int src, int dst) const {
    return net_table_[(static_cast<std::size_t>(channel) * nranks_ + src) * nranks_ + dst];
  }
  // A net world with a host group: the group's world (its ranks' kernels share one abort word).
  bool has_near() const noexcept { return static_cast<bool>(near_); }
  // A net world with a host group: why the group was ended (raise_net_failure, abort()), or "".
  std::string group_failure() const {
    if (!near_ || !near_->proc_.resources->raised()) return {};
    return near_->proc_.resources->abort_text();
  }
  // A net world: ends this rank's kernels (and its host group's) with `text` as the reason: the
  // proxy's failures. Never blocks.
  void raise_net_failure(const std::string& text) noexcept {
    if (near_ && near_->proc_.resources)
      near_->proc_.resources->raise(text);
    else
      std::atomic_ref<std::uint32_t>(*base_.abort).store(1, std::memory_order_release);
  }

  // What a world of processes adds (gpu/process_world.hpp sets it; rank < 0 in a world of threads).
  struct process_view {
    int rank = -1;                // the one rank this process drives
    int ranks_on_gpu = 1;         // ranks of the world on this rank's GPU, all processes
    std::byte* window = nullptr;  // this rank's staging window (gpu/communicator.hpp)
    std::size_t window_bytes = 0;
    std::shared_ptr<ipc_detail::process_resources> resources;  // control page, IPC mappings, this rank's memory
  };
  bool is_process() const noexcept { return proc_.rank >= 0; }
  const process_view& process() const noexcept { return proc_; }
  // The ranks whose process ended (a world of processes; empty otherwise).
  // A net world: those of its host group's world. `unannounced`: only those gone before they
  // destroyed their communicator (process_resources::dead_ranks).
  std::vector<int> dead_ranks(bool unannounced = false) const {
    if (proc_.resources) return proc_.resources->dead_ranks(unannounced);
    std::vector<int> dead;
    if (near_)
      for (int q : near_->dead_ranks(unannounced)) dead.push_back(near_ranks_[static_cast<std::size_t>(q)]);
    return dead;
  }
  // A world of processes: the shared abort word (0; 1 a wait timed out; 2 abort()). A net world:
  // its host group's (2: a proxy of the group failed, or abort()), else its rank's own word (1: a
  // wait timed out or the proxy failed).
  std::uint32_t shared_abort_word() const {
    if (near_) return near_->shared_abort_word();
    if (!proc_.resources)  // a net world: this rank's own word (host memory), which its proxy raises
      return is_net() ? std::atomic_ref<std::uint32_t>(*base_.abort).load(std::memory_order_acquire) : 0;
    return std::atomic_ref<std::uint32_t>(*proc_.resources->abort_word()).load(std::memory_order_acquire);
  }

  // Ends the world for every rank: in a world of processes, raises the shared abort word, so
  // every running kernel of every rank returns and every later call throws errc::aborted; in a
  // world of threads, later calls throw (running kernels end by their timeout). Never blocks.
  void abort(int rank, const std::string& why) noexcept {
    if (proc_.resources) proc_.resources->abort(rank, why);
    try {
      mark_failed("rank " + std::to_string(rank) + " aborted the communicator" + (why.empty() ? "" : ": " + why));
    } catch (...) {}
  }

  int size() const noexcept { return nranks_; }
  int device_of(int rank) const { return devices_[static_cast<std::size_t>(rank)]; }
  const options& opts() const noexcept { return opts_; }
  int ranks_on_device(int device) const {
    int k = 0;
    for (int d : devices_) k += d == device;
    return k;
  }
  // Every rank's counters meet in one GPU's memory: kernels use device scope (else system).
  bool scope_is_device() const noexcept { return scope_is_device_; }

  // The handle rank `rank`'s kernels take: its pointers are valid on the rank's device.
  template <transport::device_handle_like Handle>
  Handle handle(int rank) const {
    Handle h{};
    static_cast<transport::handle_fields&>(h) = fields(rank);
    return h;
  }
  transport::handle_fields fields(int rank) const {
    transport::handle_fields h = base_;
    for (const auto& [dev, fifos] : fifo_tables_)
      if (dev == device_of(rank)) h.fifos = fifos;
    for (const auto& [dev, word] : entry_aborts_)
      if (dev == device_of(rank)) h.entry_abort = word;
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
    if (const std::string why = group_failure(); !why.empty())  // a net world whose host group failed
      detail::fail(errc::aborted, what, rank, "a rank of this host ended the communicator: " + why);
    if (is_process() && proc_.resources) {
      const std::uint32_t word = shared_abort_word();
      if (word == 2 || proc_.resources->raised())
        detail::fail(errc::aborted, what, rank,
                     std::string("the communicator was aborted: ") + proc_.resources->abort_text());
      if (word != 0 && !failed_.load())
        detail::fail(errc::aborted, what, rank,
                     "the communicator failed earlier: a wait of some rank timed out (communicator::check() on each "
                     "rank says which)");
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

  // A rank's call as the grouped launch compares it: what it names (kind, algorithm, protocol,
  // element type, op: static strings), its count and root, and its launch shape.
  struct launch_call {
    int rank = -1;
    const char* kind = "";
    const char* algo = "";
    const char* protocol = "";
    const char* type = "";
    const char* op = "";
    bool rooted = false;
    bool p2p = false;  // send_recv: counts and peers differ legitimately between ranks
    index_t count = 0;
    int root = 0;
    int channels = 0;
    std::uint32_t slot_bytes = 0;
  };
  // "rank 3's broadcast<ring, simple>(1000 x float32, op none, root 2)".
  static std::string describe(const launch_call& c) {
    std::string s = "rank " + std::to_string(c.rank) + "'s " + c.kind + "<" + c.algo + ", " + c.protocol + ">(";
    if (!c.p2p) s += std::to_string(c.count) + " x ";
    s += std::string(c.type) + ", op " + c.op;
    if (c.rooted) s += ", root " + std::to_string(c.root);
    return s + ", " + std::to_string(c.channels) + " channels of " + std::to_string(c.slot_bytes) + "-byte slots)";
  }

  // The calls each rank launched (gpu/launch.hpp records them; gpu/stall.hpp names them when a
  // message of another call arrives): per rank, its collective calls so far, and the fingerprints
  // and descriptions of its last `remembered` calls.
  struct launched_call {
    std::uint32_t fingerprint = 0;
    std::uint64_t seq = 0;  // the collective calls the rank launched before this one
    launch_call call;
  };
  static constexpr std::size_t remembered = 64;
  std::uint64_t collectives_launched(int rank) const {
    const history& h = history_[static_cast<std::size_t>(rank)];
    std::lock_guard<std::mutex> lock(h.m);
    return h.collectives;
  }
  void record_launch(int rank, std::uint32_t fingerprint, const launch_call& c) {
    history& h = history_[static_cast<std::size_t>(rank)];
    std::lock_guard<std::mutex> lock(h.m);
    h.recent[h.recorded++ % remembered] = {fingerprint, h.collectives, c};
    if (!c.p2p) ++h.collectives;
  }
  // The most recent of rank's remembered calls with this fingerprint (31 bits), if any.
  bool find_launch(int rank, std::uint32_t fingerprint, launched_call& out) const {
    if (rank < 0 || rank >= nranks_) return false;
    const history& h = history_[static_cast<std::size_t>(rank)];
    std::lock_guard<std::mutex> lock(h.m);
    for (std::uint64_t i = h.recorded; i-- > 0 && h.recorded - i <= remembered;)
      if ((h.recent[i % remembered].fingerprint & 0x7fffffffu) == (fingerprint & 0x7fffffffu)) {
        out = h.recent[i % remembered];
        return true;
      }
    return false;
  }

  // The ranks of one GPU, meeting once per call to make one launch (launch_mode::grouped).
  struct launch_group {
    int device = 0;
    std::vector<int> ranks;  // world ranks on this GPU, ascending
    std::mutex m;
    // Calls launched so far (written under m; read without it): a cache line of its own, which the
    // waiting ranks poll while arrivals write the fields around it.
    alignas(64) std::atomic<std::uint64_t> generation{0};
    alignas(64) detail::doorbell bell;  // rung when `generation` moves (detail/wait.hpp)
    detail::spin_policy spin;           // how a waiting rank polls (options::rendezvous_spin)
    int arrived = 0;                    // ranks arrived for the next call
    std::vector<char> present;          // (local rank): arrived for the next call
    const void* kernel = nullptr;       // the composition the first arrival asked for
    launch_call first;                  // and the call it made (gpu/launch.hpp compares every arrival's)
    std::string mismatch;               // the first difference from it, naming both ranks
    std::vector<unsigned char> params;  // the next launch's kernel_params, filled by each arrival
    std::vector<cudaEvent_t> ready;     // (local rank): recorded on its stream when it arrived
    cudaEvent_t done = nullptr;         // recorded after the kernel, on the launching stream
    std::string result;                 // the last launch's error ("" if it was enqueued)
    // send_recv between ranks of this GPU: (src, dst) local indices, messages sent in earlier
    // launches and not yet received, and their bytes (gpu/launch.hpp, check_p2p_launch).
    std::vector<std::int64_t> p2p_pending;
    std::vector<std::uint64_t> p2p_pending_bytes;
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
  template <bootstrap::bootstrap_like B>
  friend std::shared_ptr<world> join_world(B& boot, int device, options opts);
  struct process_tag {};
  world(process_tag, int nranks, options opts) : nranks_(nranks), opts_(opts) {}  // join_world fills in the rest

  void* alloc(int device, std::size_t bytes) {
    detail::device_guard g(device);
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "gpu::world: cudaMalloc");
    allocations_.push_back({device, p});
    detail::cuda_check(cudaMemset(p, 0, bytes), "gpu::world: cudaMemset");
    return p;
  }
  // Pinned host memory mapped into every GPU, zeroed; its device address (the same on every GPU
  // under unified addressing).
  void* alloc_mapped_host(std::size_t bytes) {
    void* p = nullptr;
    detail::cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                       "gpu::world: cudaHostAlloc (connections in host memory)");
    host_allocations_.push_back(p);
    std::memset(p, 0, bytes);
    void* dp = nullptr;
    detail::cuda_check(cudaHostGetDevicePointer(&dp, p, 0),
                       "gpu::world: cudaHostGetDevicePointer (connections in host memory)");
    return dp;
  }
  // Connection memory as options::connections says.
  void* alloc_connections(int device, std::size_t bytes) {
    return opts_.connections == placement::device ? alloc(device, bytes) : alloc_mapped_host(bytes);
  }
  // The (channel, src, dst) FIFO table, copied to every GPU in use (and kept: host_table_).
  void install_fifo_table(const std::vector<transport::fifo_view>& table, const std::vector<int>& devices) {
    if (host_table_.empty()) host_table_ = table;
    for (int d : devices) {
      bool have = false;
      for (auto& ft : fifo_tables_) have |= ft.first == d;
      if (have) continue;
      auto* t = static_cast<transport::fifo_view*>(alloc(d, sizeof(transport::fifo_view) * table.size()));
      detail::cuda_check(
          cudaMemcpy(t, table.data(), sizeof(transport::fifo_view) * table.size(), cudaMemcpyHostToDevice),
          "gpu::world: cudaMemcpy");
      fifo_tables_.push_back({d, t});
    }
  }

  void setup() {
    const int n = nranks_, nc = opts_.channels;
    if (opts_.connections == placement::device) transport::enable_peer_access(devices_, "gpu::world");

    const transport::connection_layout layout{n, nc, opts_.slots, opts_.slot_bytes};
    std::vector<char*> receiver(static_cast<std::size_t>(n));
    for (int dst = 0; dst < n; ++dst)
      receiver[static_cast<std::size_t>(dst)] =
          static_cast<char*>(alloc_connections(device_of(dst), layout.per_receiver()));
    install_fifo_table(layout.table(receiver), devices_);

    base_.nranks = n;
    base_.nchannels = nc;
    base_.slots = static_cast<std::uint32_t>(opts_.slots);
    base_.slot_bytes = static_cast<std::uint32_t>(opts_.slot_bytes);
    base_.timeout_ns =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.timeout).count());
    const int d0 = devices_[0];
    scope_is_device_ = opts_.connections == placement::device && ranks_on_device(d0) == n;
    // Words every rank's kernel reaches: with staged connections across GPUs they cannot sit in
    // d0's memory (no peer access). Only the direct algorithms' barrier updates one with an atomic
    // read-modify-write, and they do not compile over transport::pcie_staged.
    const bool shared_on_host = opts_.connections == placement::host && ranks_on_device(d0) < n;  // several GPUs
    auto alloc_shared = [&](std::size_t bytes) { return shared_on_host ? alloc_mapped_host(bytes) : alloc(d0, bytes); };
    base_.steps = static_cast<std::uint64_t*>(alloc_shared(sizeof(std::uint64_t) * n * nc * n * 2));
    base_.buffers = static_cast<transport::buffer_pair*>(alloc_shared(sizeof(transport::buffer_pair) * nc * n));
    // One 128-byte line per channel's barrier counter: ranks hammer them concurrently.
    base_.barrier = static_cast<std::uint64_t*>(alloc_shared(128 * static_cast<std::size_t>(nc)));
    base_.barrier_stride = 128 / sizeof(std::uint64_t);
    base_.abort = static_cast<std::uint32_t*>(alloc_shared(sizeof(std::uint32_t)));
    base_.entry_abort = base_.abort;
    if (shared_on_host)  // the word read at kernel entry: each GPU's own
      for (int d : devices_) {
        bool have = false;
        for (auto& e : entry_aborts_) have |= e.first == d;
        if (!have) entry_aborts_.push_back({d, static_cast<std::uint32_t*>(alloc(d, sizeof(std::uint32_t)))});
      }
    alloc_stall_records(n);

    for (int d : devices_) {
      bool have = false;
      for (auto& g : groups_) have |= g->device == d;
      if (have) continue;
      std::vector<int> ranks;
      for (int r = 0; r < n; ++r)
        if (device_of(r) == d) ranks.push_back(r);
      add_group(d, std::move(ranks));
    }
  }

  // Host-mapped stall records, one per rank, zeroed.
  void alloc_stall_records(int n) {
    void* stall = nullptr;
    detail::cuda_check(
        cudaHostAlloc(&stall, sizeof(transport::stall_record) * n, cudaHostAllocMapped | cudaHostAllocPortable),
        "gpu::world: cudaHostAlloc");
    std::memset(stall, 0, sizeof(transport::stall_record) * n);
    host_stall_ = stall;
    stall_view_ = stall;
    void* dstall = nullptr;
    detail::cuda_check(cudaHostGetDevicePointer(&dstall, stall, 0), "cudaHostGetDevicePointer");
    base_.stall = static_cast<transport::stall_record*>(dstall);
  }
  // The launch group of GPU `device`: the world's ranks on it (ascending).
  void add_group(int device, std::vector<int> ranks) {
    auto g = std::make_unique<launch_group>();
    g->device = device;
    g->ranks = std::move(ranks);
    g->spin = detail::spin_of(opts_.rendezvous_spin, static_cast<int>(g->ranks.size()), nullptr);
    g->present.assign(g->ranks.size(), 0);
    g->p2p_pending.assign(g->ranks.size() * g->ranks.size(), 0);
    g->p2p_pending_bytes.assign(g->ranks.size() * g->ranks.size(), 0);
    detail::device_guard guard(device);
    g->ready.resize(g->ranks.size(), nullptr);
    for (auto& e : g->ready)
      detail::cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "gpu::world: cudaEventCreate");
    detail::cuda_check(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "gpu::world: cudaEventCreate");
    groups_.push_back(std::move(g));
  }

  void setup_net(int rank, int device) {
    const int n = nranks_, nc = opts_.channels;
    if (opts_.connections != placement::host)
      detail::fail(errc::invalid_argument, "communicator<net>", rank,
                   "a network world's connections are in host memory (options::connections = placement::host)");
    const transport::connection_layout layout{n, nc, opts_.slots, opts_.slot_bytes};
    const std::size_t per = layout.per_connection();
    net_table_.assign(static_cast<std::size_t>(nc) * n * n, transport::fifo_view{});
    const int m = static_cast<int>(near_ranks_.size());
    near_mask_.assign(static_cast<std::size_t>(n), 0);  // is_near, asked per connection in the proxy's loop
    for (int r : near_ranks_) near_mask_[static_cast<std::size_t>(r)] = 1;
    if (m > 0) {  // the host group's world: its connections are this rank's towards its members
      const options& no = near_->opts();
      if (near_->size() != m || !is_near(rank) || no.channels != nc || no.slots != opts_.slots ||
          no.slot_bytes != opts_.slot_bytes || near_->host_table_.size() != static_cast<std::size_t>(nc) * m * m)
        detail::fail(errc::internal, "communicator<net>", rank, "the host group's world does not match this world");
      auto local = [&](int r) {
        return static_cast<std::size_t>(std::find(near_ranks_.begin(), near_ranks_.end(), r) - near_ranks_.begin());
      };
      for (int c = 0; c < nc; ++c)
        for (int p : near_ranks_)
          if (p != rank) {
            const std::size_t base = static_cast<std::size_t>(c) * m;
            net_table_[(static_cast<std::size_t>(c) * n + rank) * n + p] =
                near_->host_table_[(base + local(rank)) * m + local(p)];
            net_table_[(static_cast<std::size_t>(c) * n + p) * n + rank] =
                near_->host_table_[(base + local(p)) * m + local(rank)];
          }
    }
    const int far = n - std::max(m, 1);
    if (far > 0) {
      const std::size_t bytes = per * 2 * static_cast<std::size_t>(nc) * static_cast<std::size_t>(far);
      auto* block = static_cast<char*>(alloc_mapped_host(bytes));
      if (block != host_allocations_.back())
        detail::fail(errc::system, "communicator<net>", rank,
                     "pinned host memory has another address on the GPU than on the host (no unified addressing)");
      std::size_t at = 0;
      auto place = [&](int c, int src, int dst) {
        char* b = block + at;
        at += per;
        auto* sizes = reinterpret_cast<std::uint64_t*>(b + opts_.slot_bytes * opts_.slots);
        net_table_[(static_cast<std::size_t>(c) * n + src) * n + dst] = {b, sizes, sizes + opts_.slots,
                                                                         sizes + opts_.slots + 1};
      };
      for (int c = 0; c < nc; ++c)
        for (int p = 0; p < n; ++p)
          if (p != rank && !is_near(p)) {
            place(c, rank, p);
            place(c, p, rank);
          }
    }
    install_fifo_table(net_table_, {device});
    base_.nranks = n;
    base_.nchannels = nc;
    base_.slots = static_cast<std::uint32_t>(opts_.slots);
    base_.slot_bytes = static_cast<std::uint32_t>(opts_.slot_bytes);
    base_.timeout_ns =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.timeout).count());
    scope_is_device_ = false;
    base_.steps = static_cast<std::uint64_t*>(alloc(device, sizeof(std::uint64_t) * n * nc * n * 2));
    base_.buffers = static_cast<transport::buffer_pair*>(alloc(device, sizeof(transport::buffer_pair) * nc * n));
    base_.barrier = static_cast<std::uint64_t*>(alloc(device, 128 * static_cast<std::size_t>(nc)));
    base_.barrier_stride = 128 / sizeof(std::uint64_t);
    // The word the kernels poll: the host group's (its control page: one rank's failure ends the
    // group's kernels), else this rank's own; the proxy raises it (raise_net_failure).
    base_.abort = near_ ? near_->base_.abort : static_cast<std::uint32_t*>(alloc_mapped_host(sizeof(std::uint32_t)));
    entry_aborts_.push_back({device, static_cast<std::uint32_t*>(alloc(device, sizeof(std::uint32_t)))});
    alloc_stall_records(n);
    add_group(device, {rank});
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
    near_.reset();  // after this world's kernels: its destructor waits until the group's ranks let go
  }

  process_view proc_;  // first: its resources go after release() ran
  int nranks_;
  options opts_;
  std::vector<int> devices_;
  bool scope_is_device_ = false;
  transport::handle_fields base_{};
  std::vector<std::pair<int, transport::fifo_view*>> fifo_tables_;  // (device, table on it)
  std::vector<transport::fifo_view> net_table_;   // a net world: (channel, src, dst), host views of this rank's FIFOs
  std::vector<transport::fifo_view> host_table_;  // the FIFO table as installed on the GPUs
  std::shared_ptr<world> near_;                   // a net world: its host group's world of processes
  std::vector<int> near_ranks_;                   // and that group's ranks (ascending), or none
  std::vector<char> near_mask_;                   // (rank) among near_ranks_
  std::vector<std::pair<int, std::uint32_t*>> entry_aborts_;  // (device, its entry word) where `abort` is host memory
  std::vector<std::pair<int, void*>> allocations_;
  std::vector<void*> host_allocations_;                // placement::host connections: pinned, mapped
  std::vector<std::unique_ptr<launch_group>> groups_;  // one per GPU in use
  void* host_stall_ = nullptr;                         // worlds of threads: pinned, mapped; ours to free
  const void* stall_view_ = nullptr;  // the records' host view (in a world of processes, the control page)
  std::atomic<bool> failed_{false};
  mutable std::mutex failed_mutex_;
  std::string failed_why_;
  // (rank): each written by its rank's thread at every launch, read by others only to name a
  // stalled call; a lock each, so ranks launching together do not queue on one.
  struct alignas(64) history {
    mutable std::mutex m;
    std::uint64_t collectives = 0;
    std::uint64_t recorded = 0;
    std::array<launched_call, remembered> recent{};
  };
  std::unique_ptr<history[]> history_ = std::make_unique<history[]>(static_cast<std::size_t>(nranks_));
};

}  // namespace gpu
COLLCOMM_NAMESPACE_END
