// collcomm/algo/primitives.hpp — the vocabulary every algorithm is written in.
//
// An algorithm is a pure schedule: a `COLLCOMM_HD` function that says, step by step, what moves
// where, by calling a *primitives* object `p`. It never touches memory, CUDA or sockets. Three
// executors implement the primitives: the symbolic one (tests/symbolic), the host one
// (include/collcomm/host) and the GPU one (include/collcomm/kernels). A schedule is called once
// per rank and channel with that rank's `coll_args`; it must derive every size from them, so that
// both ends of every message agree on it.
//
// Buffers. Each rank has an input and an output buffer of its own (sizes: kinds.hpp). A
// `buf_ref` names one of them and an element offset. Loads from `input` apply the op's `pre`
// (premul_sum's scale); loads from `output` do not, because output only ever holds values that
// already had it. The two may alias (in-place calls): schedules must read each input element
// before they overwrite it — the symbolic verifier checks this.
//
// FIFO family — one message per call, over the connection (channel, this rank -> peer), in order.
// Every call moves n <= p.slot_elems() elements; n == 0 is a no-op at both ends (both compute the
// same n from coll_args, so they agree). Sends block while the connection's slots are full;
// receives block until a message is there. "value" below is computed in the accumulation type:
//
//   send(to, src, n)                          value = load(src);            send value
//   recv(from, dst, n)                        value = recv;                 store dst
//   recv_reduce_send(from, src, to, n)        value = recv ⊕ load(src);     send value
//   recv_reduce_copy(from, src, dst, n, fin)  value = recv ⊕ load(src);     store dst
//   recv_reduce_copy_send(from, src, dst, to, n, fin)
//                                             value = recv ⊕ load(src);     store dst; send value
//   recv_copy_send(from, dst, to, n)          value = recv;                 store dst; send value
//   copy_send(src, dst, to, n, fin = false)   value = load(src);            store dst; send value
//   copy(src, dst, n, fin = false)            value = load(src);            store dst
//
// `from` and `to` are a `peers` list (an int converts to a list of one): a receive from several
// peers reduces all their messages; a send to several sends the same message to each. `fin`
// (finalize) marks a value that is complete — every rank's contribution is in it — and applies
// the op's `post` (avg's divide) before it is stored and sent; a value is finalized exactly once,
// and the ranks it is forwarded to store it as is. Messages carry elements in the element type T
// (a partial sum of bf16 is rounded to bf16 on every hop, as in NCCL).
//
// Direct family — load/store access to peers' buffers; only over load/store transports (nvlink,
// pcie with P2P, host shared memory). Peer buffers may be read only between barriers that order
// the peer's writes before the reads; the input of every rank counts as written before the call,
// so a schedule needs a barrier before its first peer read and one after its last (so no rank
// leaves, and reuses its buffers, while a peer still reads them):
//
//   barrier()                                 every rank of the communicator, this channel
//   entry_barrier(p), exit_barrier(p)         (free functions below) the barrier before a schedule's
//                                             first peer access and the one after its last
//   direct_reduce_copy(src, dst, n, fin)      value = ⊕ over ranks 0..nranks-1, in rank order, of
//                                             load(rank's src); store dst (this rank's)
//   direct_copy(from, src, dst, n)            value = load(peer from's src);  store dst
//
// Sizes: `slot_elems()` is the most elements one FIFO call that sends or receives moves (a
// multiple of `align_elems()`); `align_elems()` is the granularity schedules should round chunk
// sizes to (the GPU's 16-byte vectors; 1 in the symbolic executor). `copy` and the direct calls
// take any n.
//
// Progress: a call that receives and sends may wait for its messages and for free send slots at
// once (the GPU executor does). Schedules are written, and verified, so that they cannot deadlock
// with 2 slots per connection under that rule (ring all_reduce needs 2: with 1 slot every rank
// would hold its incoming message while waiting for the next rank to free its slot). Executors
// that free the received slot before waiting to send manage with 1.
//
// In place: a schedule that cannot run with aliased input and output (one_shot: every rank reads
// every peer's input while it writes its own output) says `static constexpr bool in_place_safe =
// false;` in its tag; the host API refuses in-place calls with it (supports_in_place<Algo>).
//
// This folder (algo/): one header per algorithm, pure schedules over the primitives. It includes
// the policy core (config, types, kinds, ops, protocol) only: no executor, transport or CUDA API.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>

COLLCOMM_NAMESPACE_BEGIN

enum class buffer : unsigned char { input, output };

struct buf_ref {
  buffer which;
  index_t offset;
};
COLLCOMM_HD constexpr buf_ref in(index_t offset) noexcept { return {buffer::input, offset}; }
COLLCOMM_HD constexpr buf_ref out(index_t offset) noexcept { return {buffer::output, offset}; }

// A short list of peers (a tree node's children). At most max_peers: trees are binary.
struct peers {
  static constexpr int max_peers = 3;
  int size = 0;
  int rank[max_peers] = {no_peer, no_peer, no_peer};

  constexpr peers() noexcept = default;
  COLLCOMM_HD constexpr peers(int r) noexcept
      : size(r == no_peer ? 0 : 1), rank{r, no_peer, no_peer} {}  // NOLINT: implicit by design
  COLLCOMM_HD constexpr peers(int a, int b) noexcept : peers(a) { add(b); }
  COLLCOMM_HD constexpr void add(int r) noexcept {
    if (r != no_peer && size < max_peers) rank[size++] = r;
  }
  COLLCOMM_HD constexpr bool empty() const noexcept { return size == 0; }
  COLLCOMM_HD constexpr const int* begin() const noexcept { return rank; }
  COLLCOMM_HD constexpr const int* end() const noexcept { return rank + size; }
};

// ---- helpers schedules share ---------------------------------------------------------------

COLLCOMM_HD constexpr index_t div_up(index_t a, index_t b) noexcept { return (a + b - 1) / b; }
COLLCOMM_HD constexpr index_t round_up(index_t a, index_t b) noexcept { return div_up(a, b) * b; }
COLLCOMM_HD constexpr index_t min_of(index_t a, index_t b) noexcept { return a < b ? a : b; }
COLLCOMM_HD constexpr int mod(int a, int n) noexcept { return ((a % n) + n) % n; }

// A half-open range of elements [begin, begin + size).
struct range {
  index_t begin = 0;
  index_t size = 0;
};

// The part of [0, total) that channel c of nc works on: contiguous, sizes differ by at most
// `align` elements (whole multiples of `align` except the last).
COLLCOMM_HD constexpr range channel_range(index_t total, int c, int nc, index_t align) noexcept {
  const index_t per = round_up(div_up(total, static_cast<index_t>(nc)), align);
  const index_t b = min_of(per * static_cast<index_t>(c), total);
  const index_t e = min_of(b + per, total);
  return {b, e - b};
}

// Piece j of `parts` equal pieces (rounded up to `align`) of r; trailing pieces may be short or
// empty. Every rank computes the same pieces from the same r.
COLLCOMM_HD constexpr range piece(range r, index_t parts, index_t j, index_t align) noexcept {
  const index_t per = round_up(div_up(r.size, parts), align);
  const index_t b = min_of(per * j, r.size);
  const index_t e = min_of(b + per, r.size);
  return {r.begin + b, e - b};
}

// The barriers that open and close a direct schedule's peer accesses. They are barrier() unless
// the primitives say they need less (P::entry_barrier / P::exit_barrier): the GPU executor, when
// one launch carries every rank of the call, starts it only after every rank's inputs are ready
// and lets no rank's stream go on before the whole launch ends — both orders these barriers give.
COLLCOMM_EXEC_CHECK_DISABLE
template <class P>
COLLCOMM_HD void entry_barrier(P& p) {
  if constexpr (requires { p.entry_barrier(); })
    p.entry_barrier();
  else
    p.barrier();
}
COLLCOMM_EXEC_CHECK_DISABLE
template <class P>
COLLCOMM_HD void exit_barrier(P& p) {
  if constexpr (requires { p.exit_barrier(); })
    p.exit_barrier();
  else
    p.barrier();
}

COLLCOMM_NAMESPACE_END
