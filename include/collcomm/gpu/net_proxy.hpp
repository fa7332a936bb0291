// collcomm/gpu/net_proxy.hpp — GPU buffers over transport::net: a proxy thread per communicator
// that moves the kernel's FIFO messages to and from the network, and the GPU members of
// communicator<net<Backend>> (net.hpp declares them).
//
// Where the messages are. This rank's kernels see an ordinary FIFO table (transport/
// connections.hpp) of which only their own connections exist (gpu::world's net world), reached
// at system scope. Towards a rank of another host: in pinned host memory mapped into the GPU, per
// channel and peer an outbox (this rank -> peer) and an inbox (peer -> this rank), which the proxy
// below carries. Towards a rank of this host (net_options::same_host = gpu_memory, the default):
// the connections of the host group's world of processes (join_host_group: GPU memory through
// CUDA IPC, or shared pinned host memory where the GPUs lack peer access), which the kernels of
// both ranks write and read directly, as over nvlink; the proxy never sees them. The kernels take
// pcie_staged_handle: FIFO messages, the simple protocol (the proxy moves whole messages; ll's
// flags are not a message boundary it can see), no direct primitives.
//
// What the proxy does, per (channel, peer), in a loop on its own thread:
//   outbox  the kernel published message m (tail): the proxy sends it from the slot itself (the
//           backend connection's slots are the FIFO's), with its size word as the message's tag;
//           its byte count is the word's element count times the element size of the call the
//           word's fingerprint names (each launch tells the proxy, note_call), or the whole slot
//           for an unknown fingerprint. When the peer released message m, the proxy stores the
//           outbox's head, which frees the slot for the kernel.
//   inbox   message m arrived (into the inbox slot itself): the proxy writes its size word, then
//           the tail (release). When the kernel consumed it (head), the proxy releases it, which
//           gives the peer its credit.
// Connections are made when first needed: the lower rank connects when its outbox has a message
// or when the peer asks (a request: the higher rank with a message for a peer it has no
// connection to asks, every 100 ms, until the connection exists). A backend whose connections
// are all made with the endpoint (ibverbs) has each taken on the proxy's first pass, inbox or not.
//
// Failures. A connection that fails (a peer whose process died, a reset, a protocol error; a
// peer that left with a bye is none), a peer's abort text, or a connect that runs out of time is
// recorded with a text naming the peer and the channel; the proxy then raises the world's abort
// word (every wait of this rank's kernels ends; with a host group, the group's word, which ends
// the kernels of every rank of this host, whose proxies then fail with the same text), marks the
// world failed (later calls throw) and sends its text to every connected peer.
// communicator::check() throws it. The kernels' own waits stay bounded by the timeout.
//
// Latency: the proxy spins (with a pause) while there was work in the last 20 ms or a launch
// happened since; otherwise it sleeps in poll(2) on its sockets for at most 1 ms.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/detail/join.hpp>
#include <collcomm/gpu/launch.hpp>
#include <collcomm/gpu/process_world.hpp>
#include <collcomm/gpu/stall.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/net.hpp>
#include <collcomm/topology.hpp>
#include <collcomm/transport/pcie_device.hpp>
#include <collcomm/transport/socket/connection.hpp>

#include <cuda_runtime.h>
#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {
namespace net_detail {

// Whether this rank's GPU (`device`) reaches the GPU of uuid `peer` through its memory: the same
// GPU, or a visible one with peer access.
inline bool reaches(int device, const std::array<unsigned char, 16>& mine, const std::array<unsigned char, 16>& peer) {
  if (peer == mine) return true;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) return false;
  for (int d = 0; d < ndev; ++d) {
    cudaDeviceProp prop{};
    if (d == device || cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    if (std::memcmp(&prop.uuid, peer.data(), 16) != 0) continue;
    int can = 0;
    return cudaDeviceCanAccessPeer(&can, device, d) == cudaSuccess && can != 0;
  }
  return false;  // not visible here
}

// Collective over every rank of `boot`: the world of processes of this rank's host group — the
// ranks whose host id is this rank's, in `group` (ascending) — through which their GPU buffers
// move without the network (net_options::same_host = gpu_memory), or null (a group of one, or
// same_host = network). Its connections are GPU memory opened through CUDA IPC where every GPU of
// the group reaches every other (peer access), else pinned shared host memory (placement::host).
// Three exchanges over `boot` besides the groups' own joins, which run side by side
// (detail::subset_bootstrap): the options and reach of every rank, and every rank's status at the
// end, so that a group that cannot join fails every rank, naming it.
template <bootstrap::bootstrap_like B>
std::shared_ptr<world> join_host_group(B& boot, int rank, int device, const options& opts, host::same_host_path path,
                                       const std::vector<std::uint64_t>& host_ids,
                                       const std::vector<std::array<unsigned char, 16>>& gpus, std::vector<int>& group) {
  const int n = boot.size();
  const auto me = static_cast<std::size_t>(rank);
  group.clear();
  bool reach_all = true;
  for (int r = 0; r < n; ++r)
    if (host_ids[static_cast<std::size_t>(r)] == host_ids[me]) {
      group.push_back(r);
      if (r != rank) reach_all = reach_all && reaches(device, gpus[me], gpus[static_cast<std::size_t>(r)]);
    }
  struct reach_record {
    std::uint8_t path;
    std::uint8_t reach_all;
  };
  const auto recs = collcomm::detail::all_gather_records(
      boot, reach_record{static_cast<std::uint8_t>(path), static_cast<std::uint8_t>(reach_all)});
  for (int r = 0; r < n; ++r)
    if (recs[static_cast<std::size_t>(r)].path != recs[0].path)
      collcomm::detail::fail(errc::invalid_argument, "communicator<net>", rank,
                             "rank " + std::to_string(r) + " passes option 'same_host' = " +
                                 std::to_string(recs[static_cast<std::size_t>(r)].path) + ", rank 0 passes " +
                                 std::to_string(recs[0].path) + ": every rank must pass the same options");
  if (path == host::same_host_path::network) group.clear();
  if (group.size() < 2) group.clear();
  bool staged = false;
  for (int r : group) staged = staged || recs[static_cast<std::size_t>(r)].reach_all == 0;
  options sub = opts;
  sub.connections = staged ? placement::host : placement::device;
  sub.window_bytes = 0;  // FIFO schedules only
  const int local = group.empty() ? -1 : static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
  collcomm::detail::subset_bootstrap<B> sb(boot, group, local);
  std::shared_ptr<world> w;
  std::string err;
  try {
    if (!group.empty()) w = join_world(sb, device, sub);
  } catch (const std::exception& e) {
    err = e.what();
  }
  while (sb.rounds() < ipc_detail::join_rounds) sb.barrier();  // keep every rank's round count equal
  collcomm::detail::check_statuses(collcomm::detail::exchange_status(boot, err), "communicator<net>", rank,
                                   "their host's group (net_options::same_host = gpu_memory)");
  return w;
}

}  // namespace net_detail

template <class Backend>
class net_part {
 public:
  using backend_type = host::net_backend<Backend>;
  using connection_type = typename backend_type::connection;
  using endpoint_type = typename backend_type::endpoint;
  // As in host::net_world (host::net_backend_traits): connections made when first needed (socket)
  // or all with the endpoint (ibverbs); idle waits in poll(2) on the backend's file descriptors,
  // else a short sleep.
  static constexpr bool lazy = host::net_backend_traits<Backend>::lazy;
  static constexpr bool has_fds = host::net_backend_traits<Backend>::has_fds;

  net_part(std::shared_ptr<world> w, int rank, std::unique_ptr<endpoint_type> ep, int streams)
      : w_(std::move(w)),
        rank_(rank),
        n_(w_->size()),
        nc_(w_->opts().channels),
        slots_(static_cast<std::uint64_t>(w_->opts().slots)),
        slot_bytes_(w_->opts().slot_bytes),
        streams_(streams),
        timeout_(w_->opts().timeout),
        ep_(std::move(ep)),
        links_(static_cast<std::size_t>(nc_) * static_cast<std::size_t>(n_)) {
    thread_ = std::thread([this] { loop(); });
  }
  // Lets the proxy finish: every message sent and released by its receiver (bounded by the
  // timeout), then a bye on every connection.
  ~net_part() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (topology_block_) {
      detail::device_guard guard(w_->device_of(rank_));
      cudaFree(topology_block_);
    }
  }
  net_part(const net_part&) = delete;
  net_part& operator=(const net_part&) = delete;

  world& gpu_world() const noexcept { return *w_; }

  // The hosts as the kernels' hierarchical schedules see them (coll_args::topo): a copy of `t` in
  // this rank's GPU memory, the struct followed by its arrays.
  void set_topology(const topology_table& t) {
    const topology& v = t.view();
    const std::size_t n = static_cast<std::size_t>(v.nranks), nh = static_cast<std::size_t>(v.nhosts);
    const std::size_t ints = 3 * n + nh + 1, bytes = sizeof(topology) + ints * sizeof(int);
    std::vector<unsigned char> host(bytes);
    detail::device_guard guard(w_->device_of(rank_));
    detail::cuda_check(cudaMalloc(&topology_block_, bytes), "communicator<net>: cudaMalloc (topology)", rank_);
    auto* d = static_cast<unsigned char*>(topology_block_);
    topology dv = v;
    int* arrays = reinterpret_cast<int*>(d + sizeof(topology));
    dv.host_of = arrays;
    dv.local_index = arrays + n;
    dv.host_ranks = arrays + 2 * n;
    dv.host_first = arrays + 3 * n;
    std::memcpy(host.data(), &dv, sizeof dv);
    int* h = reinterpret_cast<int*>(host.data() + sizeof(topology));
    std::memcpy(h, v.host_of, n * sizeof(int));
    std::memcpy(h + n, v.local_index, n * sizeof(int));
    std::memcpy(h + 2 * n, v.host_ranks, n * sizeof(int));
    std::memcpy(h + 3 * n, v.host_first, (nh + 1) * sizeof(int));
    detail::cuda_check(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice), "communicator<net>: cudaMemcpy",
                       rank_);
    device_topology_ = reinterpret_cast<const topology*>(d);
  }
  const topology* device_topology() const noexcept { return device_topology_; }

  // A launch of a call whose messages carry fingerprint `fp` (31 bits) and elements of
  // `elem_bytes` bytes is about to be enqueued.
  void note_call(std::uint32_t fp, std::uint32_t elem_bytes) {
    {
      std::lock_guard<std::mutex> lock(calls_mutex_);
      calls_[next_call_++ % calls_.size()] = {fp & 0x7fffffffu, elem_bytes};
    }
    launched_.store(true, std::memory_order_release);
  }

  std::string failure() const {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    return failure_;
  }
  void abort(const std::string& text) { fail(text, false); }

  static void check_of(const net_part* p, int rank) {
    std::string f = p->failure();
    // The kernels ended early (an abort word, a failed context): the proxy may be a moment from
    // knowing why (a peer's text on its way, a liveness look); give it 250 ms.
    for (int i = 0; i < 50 && f.empty() && (context_failed(cudaPeekAtLastError()) || p->w_->shared_abort_word() != 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      f = p->failure();
    }
    if (!f.empty()) collcomm::detail::fail(errc::system, "gpu collective over net", rank, f);
    check_stall(*p->w_, rank);
  }
  static void abort_of(net_part* p, int rank, const std::string& why) {
    p->w_->abort(rank, why);
    p->abort("rank " + std::to_string(rank) + " aborted the communicator" + (why.empty() ? "" : ": " + why));
  }

 private:
  using clock = std::chrono::steady_clock;
  struct link {
    std::unique_ptr<connection_type> c;
    std::uint64_t sent = 0, credited = 0, delivered = 0, released = 0;
    clock::time_point last_request{};
    bool told = false;  // this rank's failure was sent on it
  };
  struct noted_call {
    std::uint32_t fp = ~0u;
    std::uint32_t elem_bytes = 0;
  };

  static std::uint64_t load(std::uint64_t* p) { return std::atomic_ref<std::uint64_t>(*p).load(std::memory_order_acquire); }
  static void store(std::uint64_t* p, std::uint64_t v) {
    std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_release);
  }

  link& slot(int channel, int peer) {
    return links_[static_cast<std::size_t>(channel) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(peer)];
  }
  link& make(int channel, int peer) {
    if (w_->is_near(peer))  // its messages never take the network; a connection from it is bogus
      collcomm::detail::fail(errc::system, "gpu collective over net", rank_,
                             "rank " + std::to_string(peer) +
                                 ", of this rank's host, made a network connection (its connections are GPU memory)");
    link& l = slot(channel, peer);
    if (!l.c) {
      const transport::fifo_view& out = w_->net_fifo(channel, rank_, peer);
      const transport::fifo_view& in = w_->net_fifo(channel, peer, rank_);
      l.c = backend_type::make_proxy_connection(*ep_, rank_, peer, channel, static_cast<int>(slots_), slot_bytes_,
                                                streams_, reinterpret_cast<std::byte*>(out.data),
                                                reinterpret_cast<std::byte*>(in.data));
    }
    return l;
  }

  // The bytes of an outbox message from its size word (see the file comment).
  std::size_t bytes_of(std::uint64_t word) {
    const std::uint32_t fp = static_cast<std::uint32_t>(word >> 32) & 0x7fffffffu;
    const std::uint64_t count = word & 0xffffffffu;
    std::lock_guard<std::mutex> lock(calls_mutex_);
    for (const noted_call& c : calls_)
      if (c.fp == fp) return static_cast<std::size_t>(std::min<std::uint64_t>(count * c.elem_bytes, slot_bytes_));
    return slot_bytes_;
  }

  void fail(const std::string& text, bool tell_world = true) {
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      if (!failure_.empty()) return;
      failure_ = text;
    }
    w_->raise_net_failure("rank " + std::to_string(rank_) + " gave up: " + text);
    if (tell_world) w_->mark_failed(text);
    failed_.store(true, std::memory_order_release);
  }

  // One pass over everything. True when something moved.
  bool step() {
    // Another rank of this host ended the group's kernels: this rank's calls are cut short too,
    // so its network peers must hear why (fail tells them) rather than meet stray messages.
    if (const std::string why = w_->group_failure(); !why.empty()) {
      fail("a rank of this host ended the communicator: " + why);
      return true;
    }
    // A rank of this host whose process is gone before it destroyed its communicator (its
    // liveness lock released, no "departed"): no network peer may see it go, so this proxy says
    // so; a look every 20 ms at most.
    if (w_->has_near() && clock::now() - last_liveness_ > std::chrono::milliseconds(20)) {
      last_liveness_ = clock::now();
      if (const std::vector<int> dead = w_->dead_ranks(true); !dead.empty()) {
        fail("the process of rank(s) " + collcomm::detail::rank_list(dead) + ", of this rank's host, is gone (killed or exited)");
        return true;
      }
    }
    bool moved = false;
    if constexpr (lazy) {
      moved = ep_->progress([&](int src, int channel) { return make(channel, src).c.get(); });
      for (auto [src, channel] : ep_->take_requests()) {
        link& l = make(channel, src);
        if (!l.c->ready()) ep_->connect(*l.c);
        moved = true;
      }
    }
    [[maybe_unused]] const auto now = clock::now();
    for (int ch = 0; ch < nc_; ++ch)
      for (int p = 0; p < n_; ++p) {
        if (p == rank_ || w_->is_near(p)) continue;
        const transport::fifo_view& out = w_->net_fifo(ch, rank_, p);
        const transport::fifo_view& in = w_->net_fifo(ch, p, rank_);
        const std::uint64_t tail = load(out.tail);
        link& l = slot(ch, p);
        if (!l.c) {
          // A lazy backend's connection waits for this side's first message (or the peer's, above).
          // An eager one's (ibverbs) exists from the endpoint on, and the peer's messages land in
          // the inbox whether or not this side sends any: only a link polls their completions and
          // publishes them (a rank that only receives from `p`, as from its ring predecessor).
          if (lazy && tail == 0) continue;
          make(ch, p);
        }
        connection_type& c = *l.c;
        if constexpr (lazy) {
          if (tail > l.sent && !c.ready()) {
            if (rank_ < p) {
              ep_->connect(c);
            } else if (now - l.last_request > std::chrono::milliseconds(100)) {
              l.last_request = now;
              ep_->request(c);
            }
          }
        }
        while (l.sent < tail && c.can_send(l.sent)) {
          const std::uint64_t word = load(&out.sizes[l.sent % slots_]);
          c.post(l.sent, bytes_of(word), word);
          ++l.sent;
          moved = true;
        }
        moved |= c.progress();
        if (const std::uint64_t r = c.peer_released(); r > l.credited) {
          store(out.head, r);
          l.credited = r;
          moved = true;
        }
        if (const std::uint64_t a = c.arrived_total(); a > l.delivered) {
          for (std::uint64_t m = l.delivered; m < a; ++m) store(&in.sizes[m % slots_], c.recv_tag(m));
          l.delivered = a;
          store(in.tail, a);
          moved = true;
        }
        for (const std::uint64_t h = load(in.head); l.released < h; ++l.released) {
          c.release(l.released);
          moved = true;
        }
        if (!c.peer_abort().empty())
          fail("rank " + std::to_string(p) + " gave up: " + c.peer_abort());
        else if (!c.failure().empty())
          fail(c.failure());
      }
    return moved;
  }

  // After a failure: peers still connecting (their proxy may be blocked in a handshake with
  // this one) are answered, and told why this rank gave up, so that their error names the cause
  // rather than a connection refused. Bounded by the communicator's life (and 200 ms after it).
  bool serve_failed() {
    bool moved = false;
    try {
      if constexpr (lazy) {
        moved = ep_->progress([&](int src, int channel) { return make(channel, src).c.get(); });
        (void)ep_->take_requests();
      }
      const std::string text = failure();
      for (link& l : links_)
        if (l.c) {
          if (!l.told && l.c->ready()) {
            l.c->send_abort(text);
            l.told = true;
            moved = true;
          }
          l.c->progress();
        }
    } catch (...) {}
    return moved;
  }

  bool drained() const {
    for (const link& l : links_)
      if (l.c && !l.c->drained()) return false;
    for (int ch = 0; ch < nc_; ++ch)
      for (int p = 0; p < n_; ++p)
        if (p != rank_ && !w_->is_near(p) &&
            load(w_->net_fifo(ch, rank_, p).tail) > links_[static_cast<std::size_t>(ch) * n_ + p].sent)
          return false;
    return true;
  }

  // Sleeps until a socket moves, for at most `ms` milliseconds; without file descriptors (the
  // completions of ibverbs are polled) for 50 microseconds.
  void poll_all(int ms) {
    if constexpr (has_fds) {
      host::net_backend_traits<Backend>::poll_fds(*ep_, links_, fds_, ms);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(ms > 0 ? 50 : 0));
    }
  }

  void loop() {
    auto active = clock::now();
    std::chrono::steady_clock::time_point stop_by{};
    bool stopping = false;
    for (;;) {
      if (!stopping && stop_.load(std::memory_order_acquire)) {
        stopping = true;
        stop_by = clock::now() + timeout_;
      }
      if (stopping) {  // failed: a short grace for peers still connecting (serve_failed); else drained
        const auto now = clock::now();
        if (failed_.load() ? now >= stop_by - timeout_ + std::chrono::milliseconds(200) : drained() || now >= stop_by)
          break;
      }
      bool moved = false;
      if (failed_.load(std::memory_order_acquire)) {
        moved = serve_failed();
      } else {
        try {
          moved = step();
        } catch (const error& e) {
          fail(e.what());
        } catch (const std::exception& e) {
          fail(std::string("the network proxy failed: ") + e.what());
        }
      }
      if (failed_.load(std::memory_order_acquire) && !told_) {
        told_ = true;
        const std::string text = failure();
        for (link& l : links_)
          if (l.c && l.c->ready()) {
            l.c->send_abort(text);
            l.told = true;
          }
      }
      const auto now = clock::now();
      if (moved || launched_.exchange(false, std::memory_order_acq_rel)) {
        active = now;
        continue;
      }
      if (now - active < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
        continue;
      }
      poll_all(1);
    }
    try {
      for (link& l : links_)
        if (l.c) l.c->send_bye();
      const auto until = clock::now() + std::chrono::milliseconds(200);
      for (;;) {
        bool flushed = true;
        for (link& l : links_)
          if (l.c) {
            l.c->progress();
            flushed = flushed && l.c->flushed();
          }
        if (flushed || clock::now() >= until) break;
        poll_all(5);
      }
      for (link& l : links_)
        if (l.c) l.c->shutdown_writes();
    } catch (...) {}
  }

  std::shared_ptr<world> w_;
  int rank_, n_, nc_;
  std::uint64_t slots_;
  std::size_t slot_bytes_;
  int streams_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<endpoint_type> ep_;
  std::vector<link> links_;  // (channel, peer)
  std::vector<pollfd> fds_;
  std::mutex calls_mutex_;
  std::array<noted_call, 64> calls_{};
  std::uint64_t next_call_ = 0;
  std::atomic<bool> launched_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  bool told_ = false;
  mutable std::mutex failure_mutex_;
  std::string failure_;
  clock::time_point last_liveness_{};
  void* topology_block_ = nullptr;
  const topology* device_topology_ = nullptr;
  std::thread thread_;  // last: started once everything above is made
};

}  // namespace gpu

template <class Backend>
template <bootstrap::bootstrap_like B>
communicator<transport::net<Backend>>::communicator(B& boot, int device, gpu::options gpu_opts, host::net_options opt)
    : rank_(boot.rank()), nranks_(boot.size()) {
  apply_env(opt);
  int ndev = 0;
  detail::cuda_check(cudaGetDeviceCount(&ndev), "communicator<net>", rank_);
  if (device < 0 || device >= ndev)
    detail::fail(errc::invalid_argument, "communicator<net>", rank_,
                 "argument 'device' = " + std::to_string(device) + " does not exist (" + std::to_string(ndev) +
                     " visible)");
  cudaDeviceProp prop{};
  detail::cuda_check(cudaGetDeviceProperties(&prop, device), "communicator<net>: cudaGetDeviceProperties", rank_);
  std::array<unsigned char, 16> gpu{};
  std::memcpy(gpu.data(), &prop.uuid, 16);
  using backend = host::net_backend<Backend>;
  // ibverbs: the queue pairs are made on the GPU world's FIFOs, so after it; its part of the
  // exchange comes then, the ranks' identities now.
  constexpr bool after_world = requires { backend::endpoint_after_gpu_world; };
  std::unique_ptr<typename backend::endpoint> ep;
  host::net_peer_info mine{};
  if constexpr (after_world)
    mine = exchange_identity(boot, opt, gpu);
  else
    ep = make_endpoint(boot, opt, gpu);
  int on_gpu = 0;
  for (int r = 0; r < nranks_; ++r)
    on_gpu += gpus_[static_cast<std::size_t>(r)] == gpu && host_ids_[static_cast<std::size_t>(r)] == host_ids_[rank_];
  gpu_opts.connections = gpu::placement::host;
  // Every rank must use the same channels; automatic channels would depend on each host's GPU.
  if (gpu_opts.channels == 0) gpu_opts.channels = 4;
  detail::device_guard guard(device);
  std::vector<int> group;  // this rank's host group, ascending (same_host = gpu_memory)
  auto near = gpu::net_detail::join_host_group(boot, rank_, device, gpu_opts, opt.same_host, host_ids_, gpus_, group);
  near_.assign(static_cast<std::size_t>(nranks_), 0);
  if (near)
    for (int r : group) near_[static_cast<std::size_t>(r)] = 1;
  std::shared_ptr<gpu::world> w;
  if constexpr (after_world) {
    std::string err;  // every rank learns of a world that could not be made, before the exchange
    try {
      w = std::make_shared<gpu::world>(gpu::world::net_tag{}, nranks_, rank_, device, on_gpu, gpu_opts,
                                       std::move(near), near ? std::move(group) : std::vector<int>{});
    } catch (const std::exception& e) {
      err = e.what();
    }
    detail::check_statuses(detail::exchange_status(boot, err), "communicator<net>", rank_, "their GPU world");
    ep = backend::make_gpu_endpoint(boot, rank_, nranks_, opt, w->opts().channels, w->opts().slots,
                                    w->opts().slot_bytes, mine,
                                    [&](int c, int p, std::byte*& send, std::byte*& recv) {
                                      if (w->is_near(p)) return false;
                                      send = reinterpret_cast<std::byte*>(w->net_fifo(c, rank_, p).data);
                                      recv = reinterpret_cast<std::byte*>(w->net_fifo(c, p, rank_).data);
                                      return true;
                                    });
  } else {
    w = std::make_shared<gpu::world>(gpu::world::net_tag{}, nranks_, rank_, device, on_gpu, gpu_opts, std::move(near),
                                     near ? std::move(group) : std::vector<int>{});
    ep->set_channels(w->opts().channels);  // the GPU world's channels, each its own connections
  }
  g_ = std::make_shared<gpu::net_part<Backend>>(std::move(w), rank_, std::move(ep), opt.socket.streams);
  topo_ = std::make_shared<const topology_table>(topology_table::from_host_ids(host_ids_));
  g_->set_topology(*topo_);
  set_facts(g_->gpu_world().opts().channels, g_->gpu_world().opts().slot_bytes,
            g_->gpu_world().process().ranks_on_gpu);
  check_ = &gpu::net_part<Backend>::check_of;
  abort_ = &gpu::net_part<Backend>::abort_of;
}

template <class Backend>
template <class K, class Algo, class Tuning, class T, class Op>
void communicator<transport::net<Backend>>::run(const coll_args& a0, const T* in, index_t, T* out, index_t,
                                                const Op& op, cudaStream_t stream) const {
  static_assert(std::is_same_v<typename Tuning::protocol, protocol::simple>,
                "collcomm transport axis: over transport::net a GPU's messages go through a proxy thread that "
                "moves whole messages: use protocol::simple (ll's flags are no message boundary it can see)");
  if constexpr (!Algo::needs_direct && std::is_same_v<typename Tuning::protocol, protocol::simple>) {
    if (!g_)
      detail::fail(errc::invalid_usage, K::name, rank_,
                   "this communicator was made for host buffers (without a device): make it with a device for GPU "
                   "buffers, or call without a stream");
    gpu::world& w = g_->gpu_world();
    coll_args a = a0;
    a.rank = rank_;
    a.nranks = nranks_;
    a.topo = g_->device_topology();
    const gpu::launch_detail::launch_shape shape = gpu::launch_detail::shape_of<Tuning>(w, K::name, rank_);
    if (shape.slot_bytes != w.opts().slot_bytes)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   "tuning's slot_bytes = " + std::to_string(shape.slot_bytes) +
                       " differs from option 'slot_bytes' = " + std::to_string(w.opts().slot_bytes) +
                       ": over transport::net every message fills slots of the world's size");
    coll_args fa = a;
    fa.nchannels = shape.channels;
    g_->note_call(gpu::launch_detail::fingerprint_of<K, Algo, Tuning, T, Op>(w.collectives_launched(rank_), fa, shape),
                  static_cast<std::uint32_t>(sizeof(T)));
    gpu::launch_on<K, Algo, Tuning, transport::pcie_staged_handle>(w, rank_, a, in, out, op, stream);
  }
}

COLLCOMM_NAMESPACE_END
