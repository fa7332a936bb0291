// collcomm/host/primitives.hpp — the host executor: the primitives of algo/primitives.hpp on real
// data, for one rank and one channel of one call.
//
// Values. Loads convert T to accum_t<T>; loads from the input apply the op's pre; reductions run
// in the accumulation type in a fixed order (the messages of `from` in list order, then the local
// operand; the direct reduction in rank order); `fin` applies the op's post once; stores and
// messages convert back to T. A receive from several peers reduces each message into an
// accumulator as it arrives and gives its slot back at once, and a receive finishes (slots given
// back) before the send of the same call waits for a slot: with one slot per connection a ring
// still moves.
//
// Copies. A send loads its values straight into the slot. A step with one peer to receive from
// and one to send to whose send slot is free at once (try_slot: nothing is waited for while it is
// held, so the rule above stands) reduces the message and the local operand straight into that
// slot, or forwards the message into the output and the slot, in one pass; else it goes through
// the scratch values. The arithmetic, and so every result bit, is the same either way.
//
// Checks. What a schedule does wrong — a FIFO message longer than slot_elems(), an access outside
// a buffer (a buffer that is not significant on this rank, e.g. reduce's output off the root, has
// 0 elements here), a store into the input, a peer out of range — throws errc::internal naming the
// schedule. Every message sent and every buffer exposed carries the call's fingerprint
// (fingerprint.hpp); a peer's message or exposed buffer of another call (ranks that disagree about
// the call) throws errc::invalid_argument naming both ranks and both calls, and aborts the world
// (world.hpp, Disagreement). Waits time out (world.hpp).
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/host/world.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/types.hpp>

#include <cstddef>
#include <cstring>
#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

// World: host::world (shared memory) or host::net_world<Backend> (net_world.hpp): both give the
// message path (wait_slot, publish, wait_message, consume) and the failure reporting used here.
template <class T, class Op, class World = world>
class primitives {
 public:
  using value_type = T;
  using accum = accum_t<T>;

  // The granularity of chunk sizes: one 16-byte vector of T (1 element for T of 16 bytes or more).
  static constexpr index_t align = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);

  // Binds rank `rank`'s buffers for one call on channel a.channel, and, when `direct` (the schedule
  // reads peers' buffers: Algo::needs_direct), exposes them to the peers' direct primitives; a
  // FIFO schedule's call leaves the exposure of an earlier call, which a peer that reads it anyway
  // (ranks that disagree on the algorithm) finds to be of another call. in_elems / out_elems: the
  // elements of each buffer the schedule may touch on this rank (0 where the buffer is not
  // significant here). `what`, `algo`: for messages. `call`: the call's fingerprint, sent with
  // every message and exposed with the buffers. `slot_bytes`: the call's message bytes (at most the
  // world's options::slot_bytes).
  // `flat_call`: a small direct call through the ranks' mailboxes (world.hpp, "small direct calls"):
  // its number there (0: not one); the input is copied to this rank's mailbox now, posted at the
  // entry barrier, which waits for every peer's; the exit barrier is none.
  primitives(World& w, const coll_args& a, const char* what, const char* algo, const call_fingerprint& call,
             bool direct, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op,
             std::size_t slot_bytes, std::uint64_t flat_call = 0)
      : w_(w),
        rank_(a.rank),
        nranks_(a.nranks),
        channel_(a.channel),
        what_(what),
        algo_(algo),
        call_(call),
        in_(in),
        in_elems_(in_elems),
        out_(out),
        out_elems_(out_elems),
        op_(op),
        slot_elems_(static_cast<index_t>(slot_bytes / sizeof(T) / align * align)),
        scratch_(w.scratch(rank_)),
        flat_call_(flat_call) {
    if constexpr (requires { w.flat_post(0, 0, 0, call, 0); }) {
      if (flat_call_ != 0) {
        std::memcpy(w.flat_data(rank_, flat_call_), in, in_elems * sizeof(T));
        return;
      }
    }
    if (direct) w.expose(channel_, rank_, {in, in_elems, out, out_elems, call});
  }

  index_t slot_elems() const noexcept { return slot_elems_; }
  index_t align_elems() const noexcept { return align; }

  // ---- FIFO family ---------------------------------------------------------------------------
  void send(peers to, buf_ref src, index_t n) {
    if (n == 0) return;
    const T* s = source(src, n, "send");
    check_message(n, "send");
    if (to.size == 1) {
      check_peer(to.rank[0], "send");
      std::byte* slot = w_.wait_slot(channel_, rank_, to.rank[0], what_, &call_);
      load_values(s, src, n, reinterpret_cast<T*>(slot));
      w_.publish(channel_, rank_, to.rank[0], n, n * sizeof(T), call_);
      return;
    }
    T* v = values();
    load_values(s, src, n, v);
    send_values(to, v, n, "send");
  }

  void recv(peers from, buf_ref dst, index_t n) {
    if (n == 0) return;
    T* d = destination(dst, n, "recv");
    check_message(n, "recv");
    if (from.size == 1) {  // a plain copy: move the bits as they are
      check_peer(from.rank[0], "recv");
      const std::byte* m = w_.wait_message(channel_, from.rank[0], rank_, n, call_, what_);
      std::memcpy(static_cast<void*>(d), m, n * sizeof(T));
      w_.consume(channel_, from.rank[0], rank_);
      return;
    }
    accum* acc = accumulators();
    if (!receive(from, n, acc)) schedule_bug("recv from no peer");
    for (index_t i = 0; i < n; ++i) d[i] = from_accum<T>(acc[i]);
  }

  void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) {
    if (n == 0) return;
    const T* s = source(src, n, "recv_reduce_send");
    check_message(n, "recv_reduce_send");
    if (T* slot = free_slot(from, to, "recv_reduce_send")) {
      const T* m = message(from.rank[0], n);
      for (index_t i = 0; i < n; ++i) slot[i] = from_accum<T>(static_cast<accum>(op_(to_accum<T>(m[i]), load(s, src, i))));
      finish_step(from.rank[0], to.rank[0], n);
      return;
    }
    T* v = values();
    reduce_values(from, s, src, n, false, v);
    send_values(to, v, n, "recv_reduce_send");
  }

  void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    const T* s = source(src, n, "recv_reduce_copy");
    T* d = destination(dst, n, "recv_reduce_copy");
    check_message(n, "recv_reduce_copy");
    T* v = values();
    reduce_values(from, s, src, n, fin, v);
    std::memcpy(static_cast<void*>(d), v, n * sizeof(T));
  }

  void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    if (n == 0) return;
    const T* s = source(src, n, "recv_reduce_copy_send");
    T* d = destination(dst, n, "recv_reduce_copy_send");
    check_message(n, "recv_reduce_copy_send");
    if (T* slot = free_slot(from, to, "recv_reduce_copy_send")) {
      const T* m = message(from.rank[0], n);
      for (index_t i = 0; i < n; ++i) {
        accum x = static_cast<accum>(op_(to_accum<T>(m[i]), load(s, src, i)));
        if (fin) x = apply_post(op_, x, nranks_);
        d[i] = slot[i] = from_accum<T>(x);
      }
      finish_step(from.rank[0], to.rank[0], n);
      return;
    }
    T* v = values();
    reduce_values(from, s, src, n, fin, v);
    std::memcpy(static_cast<void*>(d), v, n * sizeof(T));
    send_values(to, v, n, "recv_reduce_copy_send");
  }

  void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) {
    if (n == 0) return;
    T* d = destination(dst, n, "recv_copy_send");
    check_message(n, "recv_copy_send");
    if (T* slot = free_slot(from, to, "recv_copy_send")) {
      const T* m = message(from.rank[0], n);
      std::memcpy(static_cast<void*>(d), m, n * sizeof(T));
      std::memcpy(static_cast<void*>(slot), m, n * sizeof(T));
      finish_step(from.rank[0], to.rank[0], n);
      return;
    }
    T* v = values();
    if (from.size == 1) {
      check_peer(from.rank[0], "recv_copy_send");
      const std::byte* m = w_.wait_message(channel_, from.rank[0], rank_, n, call_, what_);
      std::memcpy(static_cast<void*>(v), m, n * sizeof(T));
      w_.consume(channel_, from.rank[0], rank_);
    } else {
      accum* acc = accumulators();
      if (!receive(from, n, acc)) schedule_bug("recv_copy_send from no peer");
      for (index_t i = 0; i < n; ++i) v[i] = from_accum<T>(acc[i]);
    }
    std::memcpy(static_cast<void*>(d), v, n * sizeof(T));
    send_values(to, v, n, "recv_copy_send");
  }

  void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    if (n == 0) return;
    const T* s = source(src, n, "copy_send");
    T* d = destination(dst, n, "copy_send");
    check_message(n, "copy_send");
    T* v = values();
    if (fin) {
      for (index_t i = 0; i < n; ++i) v[i] = from_accum<T>(apply_post(op_, load(s, src, i), nranks_));
    } else {
      load_values(s, src, n, v);
    }
    std::memcpy(static_cast<void*>(d), v, n * sizeof(T));
    send_values(to, v, n, "copy_send");
  }

  // Any n (the single-rank paths copy a whole channel's share at once). src and dst may be the
  // same elements (in place); element i is read before it is written.
  void copy(buf_ref src, buf_ref dst, index_t n, bool fin = false) {
    if (n == 0) return;
    const T* s = source(src, n, "copy");
    T* d = destination(dst, n, "copy");
    if (!fin && !(src.which == buffer::input && op_has_pre<Op>)) {
      std::memmove(static_cast<void*>(d), s, n * sizeof(T));
      return;
    }
    for (index_t i = 0; i < n; ++i) {
      accum x = load(s, src, i);
      if (fin) x = apply_post(op_, x, nranks_);
      d[i] = from_accum<T>(x);
    }
  }

  // ---- direct family ---------------------------------------------------------------------------
  void barrier() { w_.barrier(channel_, rank_, what_, call_.seq == call_fingerprint::p2p_seq ? nullptr : &call_); }
  // The barriers around a direct schedule's peer accesses (algo/primitives.hpp): a small call's
  // post and wait at its mailboxes, and nothing after.
  void entry_barrier() {
    if constexpr (requires { w_.flat_post(0, 0, 0, call_, 0); }) {
      if (flat_call_ != 0) {
        const std::uint64_t check = detail::flat_check(in_elems_, call_);
        w_.flat_post(rank_, flat_call_, in_elems_, call_, check);
        for (int r = 0; r < nranks_; ++r)
          if (r != rank_) w_.flat_wait(rank_, r, flat_call_, in_elems_, call_, check, what_);
        return;
      }
    }
    barrier();
    // Every peer has published this call by now: compare it with each one's. A schedule reads only
    // some peers (broadcast: the root's buffers), and two ranks that each take themselves for the
    // root would otherwise never meet a fingerprint other than their own.
    if constexpr (requires { w_.check_same_call(what_, rank_, call_); })
      if (call_.seq != call_fingerprint::p2p_seq) w_.check_same_call(what_, rank_, call_);
  }
  void exit_barrier() {
    if (flat_call_ == 0) barrier();
  }

  void direct_reduce_copy(buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    for (int r = 0; r < nranks_; ++r) peer_source(r, src, n, "direct_reduce_copy");  // check all first
    T* d = destination(dst, n, "direct_reduce_copy");
    accum* acc = accumulators();
    // Blocks of slot_elems: rank-major inside a block (a stream per rank), rank order per element.
    for (index_t b = 0; b < n; b += slot_elems_) {
      const index_t len = min_of(slot_elems_, n - b);
      for (int r = 0; r < nranks_; ++r) {
        const T* s = peer_source(r, src, n, "direct_reduce_copy") + b;
        if (r == 0) {
          for (index_t i = 0; i < len; ++i) acc[i] = load(s, src, i);
        } else {
          for (index_t i = 0; i < len; ++i) acc[i] = static_cast<accum>(op_(acc[i], load(s, src, i)));
        }
      }
      if (fin)
        for (index_t i = 0; i < len; ++i) acc[i] = apply_post(op_, acc[i], nranks_);
      for (index_t i = 0; i < len; ++i) d[b + i] = from_accum<T>(acc[i]);
    }
  }

  void direct_copy(int from, buf_ref src, buf_ref dst, index_t n) {
    if (n == 0) return;
    const T* s = peer_source(from, src, n, "direct_copy");
    T* d = destination(dst, n, "direct_copy");
    if (!(src.which == buffer::input && op_has_pre<Op>)) {
      std::memmove(static_cast<void*>(d), s, n * sizeof(T));
      return;
    }
    for (index_t i = 0; i < n; ++i) d[i] = from_accum<T>(load(s, src, i));
  }

 private:
  // ---- values ------------------------------------------------------------------------------------
  accum load(const T* p, buf_ref from, index_t i) const noexcept {
    const accum x = to_accum<T>(p[i]);
    return from.which == buffer::input ? apply_pre(op_, x) : x;
  }

  // The scratch of this rank: slot_elems accumulators, then slot_elems values of T.
  accum* accumulators() noexcept { return reinterpret_cast<accum*>(scratch_); }
  T* values() noexcept {
    return reinterpret_cast<T*>(scratch_ + w_.opts().slot_bytes / sizeof(T) * sizeof(accum_t<T>) / 64 * 64 + 64);
  }

  void load_values(const T* s, buf_ref src, index_t n, T* v) const {
    if (!(src.which == buffer::input && op_has_pre<Op>)) {
      std::memcpy(static_cast<void*>(v), s, n * sizeof(T));
      return;
    }
    for (index_t i = 0; i < n; ++i) v[i] = from_accum<T>(load(s, src, i));
  }

  // A step from one peer to one peer: the send slot when it is free now (the fused path), else null.
  T* free_slot(peers from, peers to, const char* prim) {
    if (from.size != 1 || to.size != 1) return nullptr;
    check_peer(from.rank[0], prim);
    check_peer(to.rank[0], prim);
    return reinterpret_cast<T*>(w_.try_slot(channel_, rank_, to.rank[0]));
  }
  const T* message(int from, index_t n) {
    return reinterpret_cast<const T*>(w_.wait_message(channel_, from, rank_, n, call_, what_));
  }
  // The fused step's message is read: give its slot back, then send the one written.
  void finish_step(int from, int to, index_t n) {
    w_.consume(channel_, from, rank_);
    w_.publish(channel_, rank_, to, n, n * sizeof(T), call_);
  }

  // acc[i] = ⊕ of the messages from every peer of `from` (list order). Returns false when `from`
  // is empty (acc untouched).
  bool receive(peers from, index_t n, accum* acc) {
    bool first = true;
    for (int p : from) {
      check_peer(p, "a receive");
      const T* m = reinterpret_cast<const T*>(w_.wait_message(channel_, p, rank_, n, call_, what_));
      if (first) {
        for (index_t i = 0; i < n; ++i) acc[i] = to_accum<T>(m[i]);
      } else {
        for (index_t i = 0; i < n; ++i) acc[i] = static_cast<accum>(op_(acc[i], to_accum<T>(m[i])));
      }
      w_.consume(channel_, p, rank_);
      first = false;
    }
    return !first;
  }

  // v[i] = (⊕ messages) ⊕ load(src, i), finalized if fin.
  void reduce_values(peers from, const T* s, buf_ref src, index_t n, bool fin, T* v) {
    accum* acc = accumulators();
    if (receive(from, n, acc)) {
      for (index_t i = 0; i < n; ++i) acc[i] = static_cast<accum>(op_(acc[i], load(s, src, i)));
    } else {
      for (index_t i = 0; i < n; ++i) acc[i] = load(s, src, i);
    }
    if (fin)
      for (index_t i = 0; i < n; ++i) acc[i] = apply_post(op_, acc[i], nranks_);
    for (index_t i = 0; i < n; ++i) v[i] = from_accum<T>(acc[i]);
  }

  void send_values(peers to, const T* v, index_t n, const char* prim) {
    for (int p : to) {
      check_peer(p, prim);
      std::byte* slot = w_.wait_slot(channel_, rank_, p, what_, &call_);
      std::memcpy(slot, static_cast<const void*>(v), n * sizeof(T));
      w_.publish(channel_, rank_, p, n, n * sizeof(T), call_);
    }
  }

  // ---- checks (schedule bugs throw errc::internal) -------------------------------------------------
  [[noreturn]] void schedule_bug(const std::string& msg) const {
    w_.fail(errc::internal, what_, rank_,
            std::string("schedule '") + algo_ + "' on channel " + std::to_string(channel_) + ": " + msg);
  }

  static std::string span_text(buf_ref b, index_t n) {
    return std::string(b.which == buffer::input ? "input" : "output") + " [" + std::to_string(b.offset) + ", " +
           std::to_string(b.offset + n) + ")";
  }

  void check_message(index_t n, const char* prim) const {
    if (n > slot_elems_)
      schedule_bug(std::string(prim) + " of " + std::to_string(n) +
                   " elements exceeds slot_elems() = " + std::to_string(slot_elems_));
  }

  void check_peer(int p, const char* prim) const {
    if (p < 0 || p >= nranks_)
      schedule_bug(std::string(prim) + " names peer " + std::to_string(p) + ", out of range [0, " +
                   std::to_string(nranks_) + ")");
  }

  const T* source(buf_ref b, index_t n, const char* prim) const {
    const index_t size = b.which == buffer::input ? in_elems_ : out_elems_;
    if (b.offset > size || n > size - b.offset)
      schedule_bug(std::string(prim) + " reads " + span_text(b, n) + " but this rank's " +
                   (b.which == buffer::input ? "input" : "output") + " has " + std::to_string(size) + " elements here");
    return b.which == buffer::input ? in_ + b.offset : out_ + b.offset;
  }

  T* destination(buf_ref b, index_t n, const char* prim) const {
    if (b.which != buffer::output) schedule_bug(std::string(prim) + " stores into the input buffer");
    if (b.offset > out_elems_ || n > out_elems_ - b.offset)
      schedule_bug(std::string(prim) + " writes " + span_text(b, n) + " but this rank's output has " +
                   std::to_string(out_elems_) + " elements here");
    return out_ + b.offset;
  }

  // Rank r's buffer, as r exposed it for this call (read after a barrier: the schedule's duty).
  const T* peer_source(int r, buf_ref b, index_t n, const char* prim) const {
    check_peer(r, prim);
    if (r == rank_) return source(b, n, prim);
    if constexpr (requires { w_.flat_data(0, 0); }) {
      if (flat_call_ != 0) {  // the peer's input in its mailbox (its count checked by flat_wait)
        if (b.which != buffer::input || b.offset > in_elems_ || n > in_elems_ - b.offset)
          schedule_bug(std::string(prim) + " reads rank " + std::to_string(r) + "'s " + span_text(b, n) +
                       " of a small call, which holds its input only (" + std::to_string(in_elems_) + " elements)");
        return reinterpret_cast<const T*>(w_.flat_data(r, flat_call_)) + b.offset;
      }
    }
    const typename World::exposed_buffers& e = w_.exposed(channel_, r);
    if (const unsigned fields = differing_fields(call_, e.call))
      w_.disagree(what_, rank_, r, call_, e.call, fields,
                  "what rank " + std::to_string(r) + " exposes on channel " + std::to_string(channel_));
    const index_t size = b.which == buffer::input ? e.in_elems : e.out_elems;
    if (b.offset > size || n > size - b.offset)
      schedule_bug(std::string(prim) + " reads rank " + std::to_string(r) + "'s " + span_text(b, n) + " but it has " +
                   std::to_string(size) + " elements there (or the ranks disagree on count)");
    return static_cast<const T*>(b.which == buffer::input ? e.in : static_cast<const void*>(e.out)) + b.offset;
  }

  World& w_;
  int rank_;
  int nranks_;
  int channel_;
  const char* what_;
  const char* algo_;
  call_fingerprint call_;
  const T* in_;
  index_t in_elems_;
  T* out_;
  index_t out_elems_;
  Op op_;
  index_t slot_elems_;
  std::byte* scratch_;
  std::uint64_t flat_call_;  // a small direct call's number in the mailboxes; 0: none
};

}  // namespace host
COLLCOMM_NAMESPACE_END
