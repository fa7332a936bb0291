// collcomm/gpu/communicator.hpp — communicator<Tr> for every GPU transport (gpu/transport.hpp:
// nvlink, pcie, pcie_staged): one rank's handle on a GPU world.
//
//   // ranks as threads of this process, any number per GPU:
//   collcomm::gpu::world w(8);                                         // 8 ranks on the current GPU
//   collcomm::communicator<collcomm::transport::nvlink> comm(w, rank);  // one per rank's thread
//   // ranks as processes (torchrun, mpirun, a spawn loop), one rank each:
//   collcomm::communicator<collcomm::transport::nvlink> comm(boot, device, opts);
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::sum{}, stream);
//   cudaStreamSynchronize(stream); comm.check();
//
// Calls are asynchronous on the stream passed as the collective's last argument; after
// synchronizing that stream, check() reports a stalled peer (a rank that never joined, a process
// that died) as an error. The transport must fit the world: nvlink and pcie need connections in
// GPU memory (placement::device), pcie_staged in host memory (placement::host); a communicator
// made from a bootstrap sets the placement itself.
//
// Direct algorithms across processes: peers cannot read this process's buffers, so the call goes
// through this rank's IPC-shared window (as the host executor's staged_call does through its
// segment): the input is copied in on the stream (or, where each channel's peers read only its
// own range of it — one_shot, direct all_gather — by the kernel, channel by channel, before its
// entry barrier), the schedule runs out of place on the windows (peers read them there; an
// in-place call gives the same result out of place), and the output is copied back — or, where no
// peer reads outputs (all but two_shot), written where the caller wants it by the kernel.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/communicator.hpp>
#include <collcomm/detail/cuda.hpp>
#include <collcomm/error.hpp>
#include <collcomm/gpu/launch.hpp>
#include <collcomm/gpu/process_world.hpp>
#include <collcomm/gpu/stall.hpp>
#include <collcomm/gpu/transport.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/kinds.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN

namespace gpu {
template <gpu_transport Tr, class Call>
void preload(communicator<Tr>& comm, Call&& call);  // below
}  // namespace gpu

template <gpu::gpu_transport Tr>
class communicator<Tr> {
 public:
  using transport_type = Tr;
  using stream_type = cudaStream_t;  // calls are ordered on a stream (collectives.hpp)

  // This process's rank boot.rank() of a new world of boot.size() processes, on GPU `device`
  // (gpu::join_world: collective over the bootstrap's ranks; the bootstrap is not used
  // afterwards). opts.connections is set to the transport's placement. The communicator owns the
  // world; its last copy frees every IPC mapping, the control page and the device memory.
  template <bootstrap::bootstrap_like B>
  communicator(B& boot, int device, gpu::options opts = {})
      : owner_(gpu::join_world(boot, device, placed(opts))), w_(owner_.get()), rank_(boot.rank()),
        facts_(facts_of(*w_)) {}
  // This process's rank of a world of processes (join_world or split_world), which it shares.
  explicit communicator(std::shared_ptr<gpu::world> w)
      : owner_(std::move(w)), w_(owner_.get()), rank_(w_ && w_->is_process() ? w_->process().rank : -1) {
    if (rank_ < 0)
      detail::fail(errc::invalid_argument, "communicator", rank_, "argument 'w' is not a GPU world of processes");
    check_placement(*w_, rank_);
    facts_ = facts_of(*w_);
  }
  // Rank `rank` of a world of ranks in this process (or the one rank this process drives). w must
  // outlive the communicator. One thread at a time drives a rank.
  communicator(gpu::world& w, int rank) : w_(&w), rank_(rank) {
    if (w.is_process() && rank != w.process().rank)
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is not the rank this process drives (" +
                       std::to_string(w.process().rank) + ")");
    if (rank < 0 || rank >= w.size())
      detail::fail(
          errc::invalid_argument, "communicator", rank,
          "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.size()) + ")");
    check_placement(w, rank);
    facts_ = facts_of(w);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->size(); }
  int device() const { return w_->device_of(rank_); }
  gpu::world& gpu_world() const noexcept { return *w_; }

  // What algo::automatic picks its arm by (algo/automatic.hpp), computed once: a world's shape
  // does not change. Ranks per GPU: a world of threads takes its fullest GPU's (every rank the
  // same); a world of processes this rank's GPU's (ranks of GPUs that hold different numbers may
  // then pick different arms: the call's fingerprint says so).
  const world_facts& facts() const noexcept { return facts_; }

  // Throws the stall this rank's kernels recorded, if any (call after the stream synchronized).
  void check() const { gpu::check_stall(*w_, rank_); }

  // The ranks that pass the same color >= 0 form a new communicator (own connections and
  // memory), ordered by key, then by rank; a negative color (collcomm::no_color) gets
  // std::nullopt. Collective over every rank, in the same order as their other split and dup
  // calls; worlds of processes only (errc::invalid_usage for threads). Errors (a rank that died,
  // a timeout) are thrown on every rank.
  std::optional<communicator> split(int color, int key) const {
    std::shared_ptr<gpu::world> w = gpu::split_world(*w_, rank_, color, key);
    if (!w) return std::nullopt;
    return communicator(std::move(w));
  }
  // A new communicator of the same ranks in the same order: split with one color and key = rank.
  communicator dup() const { return *split(0, rank_); }

  // Ends the communicator for every rank (gpu::world::abort): running kernels of a world of
  // processes return, later calls throw errc::aborted. Never blocks.
  void abort(const std::string& reason = {}) const noexcept { w_->abort(rank_, reason); }

  // Inside gpu::preload: calls load their kernels and launch nothing (algo::automatic loads every arm).
  bool preloading() const noexcept { return preloading_; }

  template <class K, class Algo, class Tuning, class T, class Op>
  void run(coll_args a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op,
           cudaStream_t stream) const {
    if constexpr (Algo::needs_direct && !Tr::load_store) {
      return;  // does not compile: check_composition (collectives.hpp) said why; nothing more is instantiated
    } else if (preloading_) {
      gpu::preload_composition<K, Algo, T, Op, Tuning, Tr>();
    } else {
      run_loadable<K, Algo, Tuning>(a, in, in_elems, out, out_elems, op, stream);
    }
  }

 private:
  template <gpu::gpu_transport U, class Call>
  friend void gpu::preload(communicator<U>&, Call&&);
  mutable bool preloading_ = false;  // inside gpu::preload: calls load their kernels and launch nothing

  template <class K, class Algo, class Tuning, class T, class Op>
  void run_loadable(coll_args a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op,
                    cudaStream_t stream) const {
    a.rank = rank_;
    a.nranks = w_->size();
    if constexpr (Algo::needs_direct) {
      if (w_->is_process()) {
        run_staged<K, Algo, Tuning>(a, in, in_elems, out, out_elems, op, stream);
        return;
      }
    }
    gpu::launch<K, Algo, Tuning, Tr>(*w_, rank_, a, in, out, op, stream);
  }

  static gpu::options placed(gpu::options o) {
    o.connections = gpu::transport_traits<Tr>::connections;
    return o;
  }
  static void check_placement(const gpu::world& w, int rank) {
    if (w.opts().connections != gpu::transport_traits<Tr>::connections)
      detail::fail(errc::invalid_argument, "communicator", rank,
                   std::string("argument 'w' has its connections in ") +
                       (w.opts().connections == gpu::placement::host ? "host memory (placement::host)"
                                                                     : "GPU memory (placement::device)") +
                       ", and transport::" + Tr::name + " needs them in " +
                       (gpu::transport_traits<Tr>::connections == gpu::placement::host
                            ? "host memory: make the world with "
                              "options::connections = placement::host"
                            : "GPU memory: use transport::pcie_staged over it"));
  }

  template <class Algo>
  static constexpr bool reads_peer_outputs = [] {
    if constexpr (requires { Algo::reads_peer_outputs; })
      return Algo::reads_peer_outputs;
    else
      return false;
  }();
  template <class K, class Algo, class Tuning, class T, class Op>
  void run_staged(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op,
                  cudaStream_t stream) const {
    w_->check_usable(K::name, rank_);
    const gpu::world::process_view& p = w_->process();
    const std::size_t in_bytes = in_elems * sizeof(T), out_bytes = out_elems * sizeof(T);
    if (p.window_bytes == 0 || in_bytes > p.window_bytes || out_bytes > p.window_bytes)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   std::string("algorithm ") + Algo::name +
                       " reads peers' buffers, which across processes go through each rank's window: " +
                       "argument 'count' = " + std::to_string(a.count) + " makes " +
                       std::to_string(std::max(in_bytes, out_bytes)) + " bytes, more than option 'window_bytes' = " +
                       std::to_string(p.window_bytes) + "; raise it, or use ring or tree across processes");
    T* win_in = reinterpret_cast<T*>(p.window);
    T* win_out = reinterpret_cast<T*>(p.window + p.window_bytes);
    detail::device_guard guard(w_->device_of(rank_));
    const bool stage_out = out_bytes && reads_peer_outputs<Algo>;
    T* kernel_out = stage_out ? win_out : out_bytes ? out : nullptr;
    if constexpr (kernels::stages_channel_range<K, Algo>()) {
      // The kernel copies each channel's range of the input into the window itself (peers read
      // only that range on that channel), and reads its own input where it is.
      gpu::launch<K, Algo, Tuning, Tr>(*w_, rank_, a, in_bytes ? in : nullptr, kernel_out, op, stream,
                                       in_bytes ? win_in : nullptr);
    } else {
      if (in_bytes)
        detail::cuda_check(cudaMemcpyAsync(win_in, in, in_bytes, cudaMemcpyDefault, stream),
                           "cudaMemcpyAsync (staging in)", rank_);
      gpu::launch<K, Algo, Tuning, Tr>(*w_, rank_, a, in_bytes ? win_in : nullptr, kernel_out, op, stream);
    }
    if (stage_out)
      detail::cuda_check(cudaMemcpyAsync(out, win_out, out_bytes, cudaMemcpyDefault, stream),
                         "cudaMemcpyAsync (staging out)", rank_);
  }

  std::shared_ptr<gpu::world> owner_;  // a world of processes; a world of threads is the caller's
  gpu::world* w_;
  int rank_;
  world_facts facts_;
  static world_facts facts_of(const gpu::world& w) {
    world_facts f;
    f.ranks = w.size();
    if (w.is_process()) {
      f.ranks_per_gpu = w.process().ranks_on_gpu;
      f.gpus = (w.size() + f.ranks_per_gpu - 1) / f.ranks_per_gpu;  // exact where every GPU holds as many
      f.processes = true;
      f.window_bytes = w.process().window_bytes;
    } else {
      std::vector<int> devices;
      for (int r = 0; r < w.size(); ++r) {
        f.ranks_per_gpu = std::max(f.ranks_per_gpu, w.ranks_on_device(w.device_of(r)));
        if (std::find(devices.begin(), devices.end(), w.device_of(r)) == devices.end())
          devices.push_back(w.device_of(r));
      }
      f.gpus = static_cast<int>(devices.size());
    }
    f.channels = w.opts().channels;
    f.slot_bytes = w.opts().slot_bytes;
    return f;
  }
};

static_assert(communicator_like<communicator<transport::nvlink>> &&
              communicator_like<communicator<transport::pcie_staged>>);

namespace gpu {

// Loads, on comm's GPU, the kernels of the collective calls that `call` makes on comm, and
// launches nothing: call runs once, with comm's calls checking their arguments as usual and
// loading their kernels instead of launching them; a call of algo::automatic (the default
// algorithm) loads the kernel of every arm its kind may take, whatever its count.
//   gpu::preload(comm, [&] { collcomm::all_reduce<algo::tree>(comm, send, recv, count, op::max{}, stream); });
// Why: with CUDA's lazy loading (the default), the first launch of a kernel may wait for every
// kernel running on the device, and a peer rank's kernel spins until this rank's kernel runs — a
// deadlock until the timeout. Preload what a rank will call before its peers launch (or run with
// CUDA_MODULE_LOADING=EAGER). One thread drives a rank: its communicator's other calls do not run
// meanwhile.
template <gpu_transport Tr, class Call>
void preload(communicator<Tr>& comm, Call&& call) {
  struct restore {
    const communicator<Tr>& c;
    ~restore() { c.preloading_ = false; }
  } guard{comm};
  detail::device_guard device(comm.device());
  comm.preloading_ = true;
  std::forward<Call>(call)();
}

}  // namespace gpu

COLLCOMM_NAMESPACE_END
