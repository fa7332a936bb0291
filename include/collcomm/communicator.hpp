// collcomm/communicator.hpp — communicator<Transport>: one rank's handle on a group of ranks.
//
// Every transport specializes communicator<Transport> with the same few members, which the host
// API (collectives.hpp) relies on:
//   int rank() const, int size() const
//   template <class K, class Algo, class Tuning, class T, class Op>
//   void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op)
//       runs schedule Algo for kind K on this rank, with the call's tuning (tuning.hpp): a carries count, root and peers (rank, nranks,
//       channel and nchannels are filled in here); in_elems / out_elems are the elements of each
//       buffer that are significant on this rank (0 where a buffer is ignored, e.g. reduce's
//       output off the root). Arguments are already checked (collectives.hpp does it).
//
// This header defines the host executor's: communicator<transport::host_shm> over a host::world,
// ranks as threads of one process or as processes of one host (host/process_world.hpp). It runs
// a call's channels one after the other on the calling thread; every rank runs them in the same
// order, so the channels cannot deadlock each other.
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/host/primitives.hpp>
#include <collcomm/host/process_world.hpp>
#include <collcomm/host/world.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/topology.hpp>
#include <collcomm/transport/tags.hpp>

#include <concepts>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

template <class Transport>
class communicator;  // specialized per transport

// What the host API (collectives.hpp) needs of a communicator: its transport, its rank and size,
// and run<K, Algo>(...) (above). Satisfied by communicator<host_shm> (below) and by the GPU
// executor's communicator<Tr> (gpu/communicator.hpp), which adds a stream_type.
template <class C>
concept communicator_like = requires(const C& c) {
  typename C::transport_type;
  { c.rank() } -> std::convertible_to<int>;
  { c.size() } -> std::convertible_to<int>;
};

template <>
class communicator<transport::host_shm> {
 public:
  using transport_type = transport::host_shm;

  // Rank `rank` of world w. Throws errc::invalid_argument when rank is not in [0, w.size()).
  // w must outlive the communicator. One thread at a time drives a rank.
  communicator(host::world& w, int rank) : w_(&w), rank_(rank) {
    if (w.is_process() && rank != w.local_rank())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is not the rank this process drives (" +
                       std::to_string(w.local_rank()) + ") in a world of processes");
    if (rank < 0 || rank >= w.size())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.size()) +
                       ") for a host world of " + std::to_string(w.size()) + " ranks");
  }

  // This process's rank of a world of processes, which the communicator shares ownership of (its
  // last copy frees the world: the mapping, the descriptor, the liveness lock).
  explicit communicator(std::shared_ptr<host::world> w)
      : owner_(std::move(w)), w_(owner_.get()), rank_(w_ ? w_->local_rank() : -1) {
    if (!w_ || !w_->is_process())
      detail::fail(errc::invalid_argument, "communicator", rank_, "argument 'w' is not a world of processes");
  }
  // This process's rank of a new world of boot.size() processes: collective over the bootstrap's
  // ranks (host::make_process_world, process_world.hpp). The bootstrap is not used afterwards.
  template <bootstrap::bootstrap_like B>
  explicit communicator(B& boot, host::options opt = {}) : communicator(host::make_process_world(boot, opt)) {}

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->size(); }
  host::world& host_world() const noexcept { return *w_; }

  // Which host each rank sits on, for algo::hierarchical (coll_args::topo of every later call);
  // null (the default): one host. Real or pretend hosts: the host executor moves data the same
  // way. Every rank of the communicator sets an equal table before the calls that use it (the
  // call's fingerprint does not cover it). Throws errc::invalid_argument when the table is not for
  // size() ranks. split() and dup() start without one.
  void set_topology(std::shared_ptr<const topology_table> t) {
    if (t) t->check_size(size(), "communicator::set_topology", rank_, "t");
    topo_ = std::move(t);
  }
  const topology* topology_view() const noexcept { return topo_ ? &topo_->view() : nullptr; }

  // The ranks that pass the same color >= 0 form a new communicator, ordered by key and then by
  // rank here (NCCL's and MPI's rule); a negative color (collcomm::no_color) joins none and gets
  // std::nullopt. Collective: every rank of this communicator calls it, in the same order as its
  // other split and dup calls. Worlds of processes only (errc::invalid_usage for threads). Errors
  // (a segment that cannot be made, a rank that died, a timeout) are thrown on every rank.
  std::optional<communicator> split(int color, int key) const {
    std::shared_ptr<host::world> w = host::detail::split_world(*w_, rank_, color, key);
    if (!w) return std::nullopt;
    return communicator(std::move(w));
  }
  // A new communicator of the same ranks in the same order, with its own connections: split with
  // one color and key = rank.
  communicator dup() const { return *split(0, rank_); }

  // Marks the communicator aborted for every rank (see host/world.hpp): calls waiting anywhere
  // throw errc::aborted within a wait slice, and every later call throws it. Never blocks.
  void abort(const std::string& reason = {}) const noexcept { w_->abort(rank_, reason); }

  // What algo::automatic picks its arm by (algo/automatic.hpp).
  world_facts facts() const noexcept {
    world_facts f;
    f.ranks = size();
    f.hosts = topo_ ? topo_->view().nhosts : 1;
    f.processes = w_->is_process();
    f.channels = w_->opts().channels;
    f.slot_bytes = w_->opts().slot_bytes;
    f.window_bytes = w_->window_bytes();
    f.window_sums = true;
    return f;
  }

  // The host executor honors the tuning's channels and slot bytes (at most the world's); protocol
  // and threads are the GPU kernel's. A collective call takes this rank's next call number once its
  // checks passed (a call refused here has not happened); the call's messages and exposed buffers
  // carry its fingerprint (fingerprint.hpp), and a peer's of another call is an error on every rank
  // (host/world.hpp, Disagreement).
  template <class K, class Algo, class Tuning, class T, class Op>
  void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op) const {
    w_->check_usable(K::name, rank_);
    const int nc = tuned_channels<Tuning>(w_->opts().channels);
    const std::size_t slot_bytes = tuned_slot_bytes<Tuning>(w_->opts().slot_bytes);
    if (nc > w_->opts().channels)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   "tuning's channels = " + std::to_string(nc) +
                       " is more than the world's option 'channels' = " + std::to_string(w_->opts().channels));
    if (slot_bytes > w_->opts().slot_bytes)
      detail::fail(errc::invalid_argument, K::name, rank_,
                   "tuning's slot_bytes = " + std::to_string(slot_bytes) +
                       " is more than the world's option 'slot_bytes' = " + std::to_string(w_->opts().slot_bytes));
    if constexpr (Algo::needs_direct) {
      // one_shot of at most host::world::flat_bytes on one channel (the same on every rank: count,
      // kind and tuning agree) goes through the ranks' mailboxes, whatever the world: no staging,
      // no exposure, no barrier at the end.
      if constexpr (std::is_same_v<Algo, algo::one_shot>) {
        if (nc == 1 && in_elems != 0 && in_elems * sizeof(T) <= host::world::flat_bytes)
          return run_channels<K, Algo>(a, in, in_elems, out, out_elems, op, nc, slot_bytes, true);
      }
      if (w_->is_process()) {  // peers cannot read this process's memory: stage through the segment
        const host::detail::staged_call<T> s(*w_, rank_, K::name, Algo::name, in, in_elems, out, out_elems);
        run_channels<K, Algo>(a, s.in(), in_elems, s.out(), out_elems, op, nc, slot_bytes);
        s.copy_out();
        return;
      }
    }
    run_channels<K, Algo>(a, in, in_elems, out, out_elems, op, nc, slot_bytes);
  }

 private:
  template <class K, class Algo, class T, class Op>
  void run_channels(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op, int nc,
                    std::size_t slot_bytes, bool flat = false) const {
    // The call happens from here on: a collective takes its number, and first meets what an
    // earlier call whose ranks disagreed left unread.
    const call_fingerprint call =
        make_fingerprint<K, Algo, Op, T>(is_point_to_point<K> ? 0 : w_->next_call_seq(rank_), a);
    if constexpr (!is_point_to_point<K>) {
      w_->note_call(rank_, call);
      w_->check_stale(0, nc, rank_, call, K::name, true);
    }
    for (int c = 0; c < nc; ++c) {
      coll_args ca = a;
      ca.rank = rank_;
      ca.nranks = w_->size();
      ca.channel = c;
      ca.nchannels = nc;
      ca.topo = topology_view();
      host::primitives<T, Op> p(*w_, ca, K::name, Algo::name, call, Algo::needs_direct, in, in_elems, out, out_elems,
                                op, slot_bytes, flat ? w_->next_flat_call(rank_) : 0);
      Algo::run(K{}, p, static_cast<const coll_args&>(ca));
    }
    // A message of an earlier call still unread on a connection towards this rank, which this
    // call did not read (a peer's stale message that no later call might read): found now, when
    // every rank whose data reached this rank has finished its earlier calls.
    if constexpr (!is_point_to_point<K>) w_->check_stale(0, nc, rank_, call, K::name, false);
  }

  std::shared_ptr<host::world> owner_;  // worlds of processes; a world of threads is the caller's
  host::world* w_;
  int rank_;
  std::shared_ptr<const topology_table> topo_;  // null: one host
};

static_assert(communicator_like<communicator<transport::host_shm>>);

COLLCOMM_NAMESPACE_END
