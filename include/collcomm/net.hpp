// collcomm/net.hpp — communicator<transport::net<Backend>>: collectives between hosts. One rank
// per process (or per thread); the FIFO algorithms (ring, tree, pairwise, ... and hierarchical),
// whose messages a backend carries (net<socket>: TCP, transport/socket/connection.hpp;
// net<ibverbs>: RDMA, include <collcomm/net_ibverbs.hpp>). Host buffers or GPU buffers:
//
//   auto boot = collcomm::bootstrap::from_env();  // or tcp / mpi
//   using net = collcomm::transport::net<collcomm::transport::socket>;
//   collcomm::communicator<net> comm(boot);                        // host buffers
//   collcomm::all_reduce(comm, send, recv, count);                 //   runs on this thread
//   collcomm::communicator<net> gcomm(boot, device, gpu_options);  // GPU buffers (CUDA code:
//   collcomm::all_reduce(gcomm, send, recv, count, op, stream);    //   gpu/net_proxy.hpp)
//   cudaStreamSynchronize(stream); gcomm.check();
//
// Host buffers: the host executor's primitives post to the backend directly (host/net_world.hpp).
// GPU buffers: between ranks of one host the kernels' FIFOs are GPU memory, as in a world of
// processes over nvlink (net_options::same_host); towards other hosts they live in pinned host
// memory and a proxy thread moves their messages to and from the network (gpu/net_proxy.hpp,
// which defines the GPU members declared here; include <collcomm/gpu.hpp> in the CUDA
// translation unit). So hierarchical<Intra, Inter> runs its intra-host steps over NVLink and only
// its inter-host steps over the network. A communicator is made for one kind of buffer: a call
// with the other kind throws errc::invalid_usage.
//
// Made collectively over a bootstrap: every rank publishes its host identity with its backend's
// part (host/net_world.hpp, net_backend). net<socket>: each rank listens on one TCP port (the
// interface: options.socket.ifname, else COLLCOMM_SOCKET_IFNAME, else the address it reaches the
// bootstrap's rank 0 from, else the loopback), publishes the address with a fresh nonce, and
// connects to a peer when a call first needs it. Connections prove the job token (the tcp
// bootstrap's; with another bootstrap, a random key rank 0 draws and shares through it).
// net<ibverbs>: each rank makes and connects every queue pair when the communicator is made (one
// all_gather; see net_ibverbs.hpp).
#pragma once

#include <collcomm/bootstrap/auth.hpp>
#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/options.hpp>
#include <collcomm/communicator.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/gpu/options.hpp>
#include <collcomm/host/net_world.hpp>
#include <collcomm/host/primitives.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/topology.hpp>
#include <collcomm/transport/socket/connection.hpp>
#include <collcomm/transport/tags.hpp>

#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN

namespace host::detail {
// This process's host identity: the hostname, the boot id, and the network and IPC namespaces
// (ranks in separate containers count as separate hosts), hashed; COLLCOMM_HOST_ID overrides.
inline std::uint64_t derive_host_id() {
  if (const char* e = std::getenv("COLLCOMM_HOST_ID"); e != nullptr && *e != '\0')
    return bootstrap::auth::siphash24(1, 2, std::as_bytes(std::span<const char>(e, std::strlen(e)))) | 1;
  std::string id;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  id += name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string b;
  std::getline(boot, b);
  id += "/" + b;
  for (const char* ns : {"/proc/self/ns/net", "/proc/self/ns/ipc"}) {
    struct stat st{};
    if (::stat(ns, &st) == 0) id += "/" + std::to_string(st.st_ino);
  }
  return bootstrap::auth::siphash24(1, 2, std::as_bytes(std::span<const char>(id.data(), id.size()))) | 1;
}
}  // namespace host::detail

namespace gpu {
template <class Backend>
class net_part;  // a GPU-buffer communicator's world and proxy (gpu/net_proxy.hpp)
}  // namespace gpu

template <class Backend>
class communicator<transport::net<Backend>> {
 public:
  using transport_type = transport::net<Backend>;
  using world_type = host::net_world<Backend>;
  using stream_type = cudaStream_t;  // GPU buffers: calls are ordered on a stream
  static constexpr bool host_buffers = true;  // calls without a stream take host buffers

  // This process's rank of a new communicator of boot.size() ranks: collective over the
  // bootstrap's ranks (socket: each makes its listener, then one all_gather; ibverbs: each makes
  // its queue pairs, then one all_gather). Throws errc::invalid_argument naming a bad option,
  // errc::system when it cannot listen or open its device.
  template <bootstrap::bootstrap_like B>
  explicit communicator(B& boot, host::net_options opt = {}) : rank_(boot.rank()), nranks_(boot.size()) {
    apply_env(opt);
    if (opt.channels < 1)  // automatic channels (0) are the GPU's; a host rank runs them in turn
      detail::fail(errc::invalid_argument, "communicator<net>", rank_,
                   "option 'channels' = " + std::to_string(opt.channels) + " must be at least 1 for host buffers");
    auto ep = make_endpoint(boot, opt, {});
    w_ = std::make_shared<world_type>(rank_, nranks_, opt, std::move(ep));
    topo_ = std::make_shared<const topology_table>(topology_table::from_host_ids(host_ids_));
    set_facts(opt.channels, opt.slot_bytes, 0);
  }
  // GPU buffers: this process's rank of a new communicator of boot.size() ranks, its kernels on
  // GPU `device` (gpu_opts: channels, slots, slot_bytes, timeout of the GPU side), a proxy thread
  // carrying their messages. Defined in gpu/net_proxy.hpp.
  template <bootstrap::bootstrap_like B>
  communicator(B& boot, int device, gpu::options gpu_opts, host::net_options opt = {});

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return nranks_; }
  // Host buffers: the world (null for a communicator of GPU buffers).
  world_type& net_world() const noexcept { return *w_; }
  bool gpu_buffers() const noexcept { return static_cast<bool>(g_); }
  // GPU buffers: throws what the proxy or the kernels recorded — a connection that failed (naming
  // the peer), a stalled wait (gpu/stall.hpp). Call after the stream synchronized. Host buffers:
  // nothing to check (calls throw).
  void check() const {
    if (check_) check_(g_.get(), rank_);
  }
  // Every rank's host identity, by rank (ranks with equal ids share a host), and the hosts as the
  // hierarchical algorithms see them (coll_args::topo of every call).
  const std::vector<std::uint64_t>& host_ids() const noexcept { return host_ids_; }
  // Whether this rank's messages to and from `peer` cross the network: for GPU buffers not for a
  // peer of this rank's host (net_options::same_host = gpu_memory), for host buffers always.
  bool over_network(int peer) const noexcept {
    return peer != rank_ && (near_.empty() || !near_[static_cast<std::size_t>(peer)]);
  }
  const topology_table& hosts() const noexcept { return *topo_; }
  // What algo::automatic picks its arm by (algo/automatic.hpp): for GPU buffers the GPU side's
  // channels and slots, set by the constructor in gpu/net_proxy.hpp.
  const world_facts& facts() const noexcept { return facts_; }

  // Marks the communicator failed and tells the connected peers (see net_world.hpp). Never blocks.
  void abort(const std::string& reason = {}) const noexcept {
    if (w_) w_->abort(rank_, reason);
    if (abort_) abort_(g_.get(), rank_, reason);
  }

  template <class K, class Algo, class Tuning, class T, class Op>
  void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op) const {
    static_assert(!Algo::needs_direct, "collcomm transport axis: direct algorithms need a load/store transport");
    if (!w_)
      detail::fail(errc::invalid_usage, K::name, rank_,
                   "this communicator was made for GPU buffers (with a device): pass the stream the call is "
                   "ordered on as the last argument");
    w_->check_usable(K::name, rank_);
    const int nc = tuned_channels<Tuning>(w_->opts().channels);
    const std::size_t slot_bytes = tuned_slot_bytes<Tuning>(w_->opts().slot_bytes);
    if (nc > w_->opts().channels)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   "tuning's channels = " + std::to_string(nc) +
                       " is more than the communicator's option 'channels' = " + std::to_string(w_->opts().channels));
    if (slot_bytes > w_->opts().slot_bytes)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   "tuning's slot_bytes = " + std::to_string(slot_bytes) +
                       " is more than the communicator's option 'slot_bytes' = " +
                       std::to_string(w_->opts().slot_bytes));
    const call_fingerprint call =
        make_fingerprint<K, Algo, Op, T>(is_point_to_point<K> ? 0 : w_->next_call_seq(rank_), a);
    for (int c = 0; c < nc; ++c) {
      coll_args ca = a;
      ca.rank = rank_;
      ca.nranks = w_->size();
      ca.channel = c;
      ca.nchannels = nc;
      ca.topo = &topo_->view();
      host::primitives<T, Op, world_type> p(*w_, ca, K::name, Algo::name, call, false, in, in_elems, out, out_elems,
                                            op, slot_bytes);
      Algo::run(K{}, p, static_cast<const coll_args&>(ca));
    }
  }
  // GPU buffers, ordered on `stream`. Defined in gpu/net_proxy.hpp.
  template <class K, class Algo, class Tuning, class T, class Op>
  void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op,
           cudaStream_t stream) const;

 private:
  // Collective: the backend's endpoint (host/net_world.hpp, net_backend) and every rank's host
  // and GPU (kept in host_ids_ and gpus_), exchanged with the backend's part.
  template <class B>
  std::unique_ptr<typename host::net_backend<Backend>::endpoint> make_endpoint(B& boot, const host::net_options& opt,
                                                                               std::array<unsigned char, 16> gpu) {
    check_common_options(opt, "communicator<net>", rank_);
    const host::net_peer_info mine{opt.host_id != 0 ? opt.host_id : host::detail::derive_host_id(), gpu};
    std::vector<host::net_peer_info> all;
    auto ep = host::net_backend<Backend>::make_endpoint(boot, rank_, nranks_, opt, mine, all);
    for (const host::net_peer_info& p : all) {
      host_ids_.push_back(p.host_id);
      gpus_.push_back(p.gpu);
    }
    return ep;
  }

  // Collective: every rank's host and GPU (kept in host_ids_ and gpus_) in one all_gather, for a
  // backend whose endpoint comes later (host::net_backend's make_gpu_endpoint). This rank's.
  template <class B>
  host::net_peer_info exchange_identity(B& boot, const host::net_options& opt, std::array<unsigned char, 16> gpu) {
    check_common_options(opt, "communicator<net>", rank_);
    const host::net_peer_info mine{opt.host_id != 0 ? opt.host_id : host::detail::derive_host_id(), gpu};
    std::vector<host::net_peer_info> all(static_cast<std::size_t>(nranks_));
    boot.all_gather(std::as_bytes(std::span<const host::net_peer_info>(&mine, 1)), std::as_writable_bytes(std::span(all)));
    for (const host::net_peer_info& p : all) {
      host_ids_.push_back(p.host_id);
      gpus_.push_back(p.gpu);
    }
    return mine;
  }

  void set_facts(int channels, std::size_t slot_bytes, int ranks_per_gpu) noexcept {
    facts_.ranks = nranks_;
    facts_.ranks_per_gpu = ranks_per_gpu;
    facts_.gpus = ranks_per_gpu > 0 ? (nranks_ + ranks_per_gpu - 1) / ranks_per_gpu : 0;
    facts_.hosts = topo_->view().nhosts;
    facts_.processes = true;
    facts_.channels = channels;
    facts_.slot_bytes = slot_bytes;
  }

  void apply_env(host::net_options& opt) const {
    if (const char* e = std::getenv("COLLCOMM_NET_SAME_HOST"); e != nullptr && *e != '\0') {
      const std::string v = e;
      if (v == "network")
        opt.same_host = host::same_host_path::network;
      else if (v == "gpu_memory")
        opt.same_host = host::same_host_path::gpu_memory;
      else
        detail::fail(errc::invalid_argument, "communicator<net>", rank_,
                     "environment variable COLLCOMM_NET_SAME_HOST = '" + v + "' is neither 'gpu_memory' nor 'network'");
    }
    if (opt.socket.ifname.empty())
      if (const char* e = std::getenv("COLLCOMM_SOCKET_IFNAME")) opt.socket.ifname = e;
    if (const char* e = std::getenv("COLLCOMM_SOCKET_STREAMS"); e != nullptr && *e != '\0')
      opt.socket.streams = std::atoi(e);
  }

  int rank_;
  int nranks_;
  std::shared_ptr<world_type> w_;                   // host buffers
  std::shared_ptr<gpu::net_part<Backend>> g_;       // GPU buffers
  void (*check_)(const gpu::net_part<Backend>*, int) = nullptr;
  void (*abort_)(gpu::net_part<Backend>*, int, const std::string&) = nullptr;
  std::vector<std::uint64_t> host_ids_;
  std::vector<std::array<unsigned char, 16>> gpus_;
  std::vector<char> near_;  // GPU buffers: (rank) of this rank's host group, reached through GPU memory
  std::shared_ptr<const topology_table> topo_;  // from host_ids_
  world_facts facts_;
};

static_assert(communicator_like<communicator<transport::net<transport::socket>>>);

COLLCOMM_NAMESPACE_END
