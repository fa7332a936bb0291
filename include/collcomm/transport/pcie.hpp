// collcomm/transport/pcie.hpp — transport::pcie: GPUs that reach each other over PCIe only, for
// ranks of one process (threads) and for ranks that are processes (torchrun, mpirun).
//
// Two paths, over the same gpu::world and the same kernels as transport::nvlink (nvlink.hpp):
//   - P2P: where cudaDeviceCanAccessPeer allows it between every pair of GPUs in use, the
//     connections sit in the receiver's GPU memory (gpu::placement::device) and peers' stores and
//     loads cross the link directly; the direct algorithms (one_shot, two_shot, direct) load
//     peers' buffers. CUDA does not say whether a peer link is PCIe or NVLink; over NVLink this
//     path is simply transport::nvlink's.
//   - staged: where some pair has no peer access, or where the user asks for it
//     (options::connections = gpu::placement::host, e.g. to test it on one GPU), every connection's
//     slots, sizes and counters sit in pinned host memory mapped into every GPU (cudaHostAlloc,
//     mapped | portable). The sender's kernel stores its message into host memory over PCIe, fences
//     at system scope and stores the tail counter; the receiver's kernel polls the tail with
//     system-scope loads and loads the message from host memory: every message crosses PCIe twice.
//     Counters are plain stores and loads, never a remote atomic read-modify-write (those do not
//     work over PCIe on most hosts). Only the FIFO algorithms run here (ring, tree,
//     recursive_doubling, pairwise, linear, p2p); a direct algorithm is refused with
//     errc::invalid_usage naming it, since a peer's buffer in another GPU's memory is out of reach
//     (and the direct algorithms' barrier is an atomic add).
//
// Cost. Every ordered pair of ranks gets a connection on every channel: n^2 x channels x slots x
// slot_bytes of pinned host memory (8 ranks, 16 channels, 8 x 256 KiB: 2 GiB), pinned at set-up.
// Measured on one H200 (PCIe gen5 x16, pinned copies 55 GB/s each way; 2, 4, 8 ranks forced
// staged on the one GPU, ring, f32, 16-256 MiB): the link carries 30-37 GB/s each way at once,
// 54-68 % of the one-way pinned copy bandwidth (bench/collcomm_bench_pcie.cu says what is counted).
//
// Across processes: communicator<transport::pcie>(boot, device, opts) is always the staged path
// (gpu::world::join with options::connections = placement::host, transport/nvlink_process.hpp):
// rank 0 makes ONE segment of POSIX shared memory holding every connection of the world (n^2 x
// channels x (slots x slot_bytes + counters)), every rank maps it and registers it with
// cudaHostRegister(mapped | portable), its kernels address it through cudaHostGetDevicePointer;
// the name is unlinked as soon as every rank mapped it, so nothing stays in /dev/shm, even after
// a SIGKILL. No peer's GPU memory is opened (no CUDA IPC, no peer access); the control page
// (abort word, stall records, liveness locks, split's mailbox) is nvlink's. /dev/shm must hold
// the segment (docker's default is 64 MiB: --shm-size), else join names the size it needs.
// Between processes whose GPUs have peer access, communicator<transport::nvlink>(boot, device)
// (CUDA IPC) is the P2P path. NOT YET RUN ON A GPU (compiled only; tests/gpu/mp: pcie cases).
//
// Limits, said plainly:
//   - A world is staged or P2P as a whole: a mix (some pairs with peer access) is staged throughout.
//   - A timed-out wait claims its host-mapped stall record with a compare-and-swap, as on nvlink;
//     with GPUs that lack host atomics two simultaneous stalls may both write it (the message may
//     then mix two stalls; the error itself is still raised).
//
// Example (four ranks on GPUs 0 and 1, which have no peer access):
//   auto w = collcomm::gpu::make_pcie_world(4, {0, 0, 1, 1});      // staged: no peer access
//   collcomm::communicator<collcomm::transport::pcie> comm(*w, rank);  // one per rank's thread
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::sum{}, stream);
//   cudaStreamSynchronize(stream); comm.check();
#pragma once

#include <collcomm/communicator.hpp>
#include <collcomm/error.hpp>
#include <collcomm/transport/nvlink.hpp>
#include <collcomm/transport/tags.hpp>

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

// Whether every pair of distinct GPUs among `devices` has peer access (cudaDeviceCanAccessPeer).
inline bool all_peers_reachable(const std::vector<int>& devices) {
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      detail::cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) return false;
    }
  return true;
}

// A world for transport::pcie: P2P (opts.connections as given, placement::device by default) where
// every pair of GPUs in use has peer access, else staged through host memory (placement::host).
// opts.connections = placement::host forces staging. devices as for gpu::world (empty: every rank
// on the current device).
inline std::unique_ptr<world> make_pcie_world(int nranks, std::vector<int> devices = {}, options opts = {}) {
  if (devices.empty() && nranks > 0) {
    int d = 0;
    detail::cuda_check(cudaGetDevice(&d), "gpu::make_pcie_world");
    devices.assign(static_cast<std::size_t>(nranks), d);
  }
  if (!all_peers_reachable(devices)) opts.connections = placement::host;
  return std::make_unique<world>(nranks, std::move(devices), opts);
}

}  // namespace gpu

// transport::pcie's communicator: rank `rank` of a gpu::world of ranks in this process
// (gpu::make_pcie_world), or this process's rank of a staged world of processes (made from a
// bootstrap). Calls are asynchronous on the stream passed as the collective's last argument;
// after synchronizing it, check() reports a stalled peer as an error.
template <>
class communicator<transport::pcie> {
 public:
  using transport_type = transport::pcie;

  // This process's rank boot.rank() of a new world of boot.size() processes, its rank on GPU
  // `device`, every connection staged through host memory (opts.connections is set to
  // placement::host whatever it was). Collective over the bootstrap's ranks, which must all pass
  // the same options (timeout aside). The communicator owns the world; its last copy unregisters
  // and unmaps the shared connections and the control page and frees this rank's device memory.
  template <bootstrap::bootstrap_like B>
  communicator(B& boot, int device, gpu::options opts = {}) : owner_(gpu::world::join(boot, device, staged_options(opts))), w_(owner_.get()), rank_(boot.rank()) {}
  // This process's rank of a staged world of processes (gpu::world::join or world::split), which it shares.
  explicit communicator(std::shared_ptr<gpu::world> w) : owner_(std::move(w)), w_(owner_.get()), rank_(w_ && w_->is_process() ? w_->process().rank : -1) {
    if (rank_ < 0) detail::fail(errc::invalid_argument, "communicator<pcie>", rank_, "argument 'w' is not a GPU world of processes");
    check_process_world(*w_, rank_);
  }

  communicator(gpu::world& w, int rank) : w_(&w), rank_(rank) {
    if (w.is_process()) {
      if (rank != w.process().rank)
        detail::fail(errc::invalid_argument, "communicator<pcie>", rank,
                     "argument 'rank' = " + std::to_string(rank) + " is not the rank this process drives (" + std::to_string(w.process().rank) + ")");
      check_process_world(w, rank);
    }
    if (rank < 0 || rank >= w.nranks())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.nranks()) + ")");
  }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->nranks(); }
  gpu::world& gpu_world() const noexcept { return *w_; }
  // True when the connections are staged through host memory (no direct algorithms).
  bool staged() const noexcept { return w_->opts().connections == gpu::placement::host; }

  // Throws the stall this rank's kernels recorded, if any (call after the stream synchronized).
  void check() const { gpu::check_stall(*w_, rank_); }

  // Worlds of processes only, as communicator<transport::nvlink>'s (transport/nvlink.hpp): the
  // ranks that pass the same color >= 0 form a new staged communicator ordered by (key, rank),
  // std::nullopt for a negative color; dup() is split(0, rank). Collective over every rank, in the
  // same order as their other split and dup calls. NOT YET RUN ON A GPU.
  std::optional<communicator> split(int color, int key) const {
    std::shared_ptr<gpu::world> w = w_->split(rank_, color, key);
    if (!w) return std::nullopt;
    return communicator(std::move(w));
  }
  communicator dup() const { return *split(0, rank_); }

  // Ends the communicator for every rank (gpu::world::abort). Never blocks.
  void abort(const std::string& reason = {}) const noexcept { w_->abort(rank_, reason); }

  template <class K, class Algo, class T, class Op>
  void run(coll_args a, const T* in, index_t, T* out, index_t, const Op& op, cudaStream_t stream) const {
    a.rank = rank_;
    a.nranks = w_->nranks();
    if constexpr (Algo::needs_direct) {
      if (staged())
        detail::fail(errc::invalid_usage, K::name, rank_,
                     std::string("algorithm ") + Algo::name +
                         " loads peers' buffers, which transport::pcie's staged path (connections in host memory: no peer access, or "
                         "option 'connections' = placement::host) cannot reach; use ring, tree, recursive_doubling or pairwise, or P2P "
                         "(a world with placement::device where cudaDeviceCanAccessPeer allows)");
    }
    gpu::launch<K, Algo>(*w_, rank_, a, in, out, op, stream);
  }

 private:
  static gpu::options staged_options(gpu::options o) {
    o.connections = gpu::placement::host;
    return o;
  }
  static void check_process_world(const gpu::world& w, int rank) {
    if (w.opts().connections != gpu::placement::host)
      detail::fail(errc::invalid_usage, "communicator<pcie>", rank,
                   "argument 'w' is a world of processes whose connections are in GPU memory (CUDA IPC): use "
                   "communicator<transport::nvlink> over it, or make a staged one with communicator<transport::pcie>(boot, device)");
  }

  std::shared_ptr<gpu::world> owner_;  // a world of processes; a world of threads is the caller's
  gpu::world* w_;
  int rank_;
};

COLLCOMM_NAMESPACE_END
