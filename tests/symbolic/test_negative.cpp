// Negative tests: broken schedules, each written here on purpose, that the verifier must reject
// with a message that says what is wrong. They prove the symbolic suite can fail.
#include "symbolic_executor.hpp"

#include <collcomm/algo/ring.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {

using namespace collcomm_symbolic;
namespace kind = collcomm::kind;
using collcomm::coll_args;
using collcomm::in;
using collcomm::mod;
using collcomm::out;

bool has(const report& r, const std::string& what) { return r.message.find(what) != std::string::npos; }

#define EXPECT_REPORTED(rep, what)                   \
  do {                                               \
    const report& r_ = (rep);                        \
    INFO("message: ", r_.message);                   \
    CHECK_FALSE(r_.ok);                              \
    CHECK(has(r_, what));                            \
    MESSAGE("reported as expected: " << r_.message); \
  } while (0)

config make(int n, index_t count, int slots = 2) {
  config c;
  c.nranks = n;
  c.count = count;
  c.slots = slots;
  return c;
}

// A ring all_gather whose last rank forgets its final receive.
struct forgets_recv {
  static constexpr const char* name = "forgets_recv";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::all_gather, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const index_t cnt = a.count;
    auto blk = [&](int b) { return static_cast<index_t>(mod(b, n)) * cnt; };
    p.copy_send(in(0), out(blk(r)), mod(r + 1, n), cnt);
    for (int k = 1; k < n - 1; ++k) p.recv_copy_send(mod(r - 1, n), out(blk(r - k)), mod(r + 1, n), cnt);
    if (r != n - 1) p.recv(mod(r - 1, n), out(blk(r + 1)), cnt);
  }
};

// Rank 0 of a chain broadcast never sends: everyone downstream waits forever.
struct forgets_send {
  static constexpr const char* name = "forgets_send";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::broadcast, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    if (r == 0)
      p.copy(in(0), out(0), a.count);
    else if (r < n - 1)
      p.recv_copy_send(r - 1, out(0), r + 1, a.count);
    else
      p.recv(r - 1, out(0), a.count);
  }
};

// Every rank sends its whole buffer to the next, in slot-sized messages, before it receives: with
// one slot per connection and more than one message, the cycle deadlocks.
struct send_all_then_recv {
  static constexpr const char* name = "send_all_then_recv";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::send_recv, P& p, const coll_args& a) {
    const index_t s = p.slot_elems();
    for (index_t off = 0; off < a.count; off += s) p.send(a.send_peer, in(off), collcomm::min_of(s, a.count - off));
    for (index_t off = 0; off < a.count; off += s) p.recv(a.recv_peer, out(off), collcomm::min_of(s, a.count - off));
  }
};

// Two ranks. Mode picks the bug: 0 double count, 1 wrong offset, 2 finalizes a partial value,
// 3 size mismatch, 4 correct (the control).
template <int Mode>
struct two_rank_all_reduce {
  static constexpr const char* name = "two_rank_all_reduce";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::all_reduce, P& p, const coll_args& a) {
    const index_t n = Mode == 1 ? a.count - 1 : a.count;  // one message: tests keep count <= slot_elems
    const int peer = 1 - a.rank;
    if (a.rank == 0) {
      p.send(peer, in(0), n);
      if (Mode == 0)
        p.recv_reduce_copy(peer, in(0), out(0), n, true);  // adds its own input again
      else
        p.recv(peer, out(0), n);
    } else {
      if (Mode == 0)
        p.recv_reduce_send(peer, in(0), peer, n);
      else if (Mode == 1)
        p.recv_reduce_copy_send(peer, in(1), out(0), peer, n, true);  // off by one
      else if (Mode == 2) {
        p.recv(peer, out(0), n);          // a partial value...
        p.copy(out(0), out(0), n, true);  // ...finalized
        p.send(peer, out(0), n);
      } else if (Mode == 3)
        p.recv_reduce_copy_send(peer, in(0), out(0), peer, n - 1, true);
      else
        p.recv_reduce_copy_send(peer, in(0), out(0), peer, n, true);
    }
  }
};

// Correct out of place; in place it sends its input after overwriting it.
struct overwrites_input {
  static constexpr const char* name = "overwrites_input";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::all_reduce, P& p, const coll_args& a) {
    const int peer = 1 - a.rank;
    p.copy(in(0), out(0), a.count);
    p.send(peer, in(0), a.count);
    p.recv_reduce_copy(peer, out(0), out(0), a.count, true);
  }
};

// A non-root rank of a reduce writes its output, which is not significant there.
struct writes_non_root_output {
  static constexpr const char* name = "writes_non_root_output";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::reduce, P& p, const coll_args& a) {
    if (a.rank == a.root)
      p.recv_reduce_copy(1 - a.rank, in(0), out(0), a.count, true);
    else
      p.copy_send(in(0), out(0), 1 - a.rank, a.count);
  }
};

// A broadcast that "reduces": non-reducing kinds must never combine values.
struct reducing_broadcast {
  static constexpr const char* name = "reducing_broadcast";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::broadcast, P& p, const coll_args& a) {
    if (a.rank == a.root)
      p.copy_send(in(0), out(0), 1 - a.rank, a.count);
    else
      p.recv_reduce_copy(1 - a.rank, out(0), out(0), a.count, false);
  }
};

// Direct-family mistakes. Mode: 0 no barrier before the peer reads, 1 no barrier after them,
// 2 reads peers' outputs written in the same epoch, 3 correct, 4 uses a barrier while claiming
// needs_direct = false.
template <int Mode>
struct direct_gather {
  static constexpr const char* name = "direct_gather";
  static constexpr bool needs_direct = Mode != 4;
  template <class P>
  static void run(kind::all_gather, P& p, const coll_args& a) {
    const index_t cnt = a.count;
    const auto me = static_cast<index_t>(a.rank);
    if (Mode != 0) p.barrier();
    p.copy(in(0), out(me * cnt), cnt);
    if (Mode != 2 && Mode != 0) p.barrier();
    for (int q = 0; q < a.nranks; ++q)
      if (q != a.rank) p.direct_copy(q, out(static_cast<index_t>(q) * cnt), out(static_cast<index_t>(q) * cnt), cnt);
    if (Mode != 1) p.barrier();
  }
};

// In place, one-shot style: every rank reduces all inputs straight into its output, which is its
// input, while the peers still read it.
struct in_place_one_shot {
  static constexpr const char* name = "in_place_one_shot";
  static constexpr bool needs_direct = true;
  template <class P>
  static void run(kind::all_reduce, P& p, const coll_args& a) {
    p.barrier();
    p.direct_reduce_copy(in(0), out(0), a.count, true);
    p.barrier();
  }
};

// A broadcast that never forwards past rank 1: it finishes cleanly and leaves rank 2 empty.
struct short_chain {
  static constexpr const char* name = "short_chain";
  static constexpr bool needs_direct = false;
  template <class P>
  static void run(kind::broadcast, P& p, const coll_args& a) {
    if (a.rank == 0)
      p.copy_send(in(0), out(0), 1, a.count);
    else if (a.rank == 1)
      p.recv(0, out(0), a.count);
  }
};

}  // namespace

TEST_CASE("symbolic negative: a send without its receive is reported") {
  EXPECT_REPORTED((verify<kind::all_gather, forgets_recv>(make(4, 3))), "send without matching receive");
}

TEST_CASE("symbolic negative: a receive without its send is a deadlock naming the blocked ranks") {
  const report r = verify<kind::broadcast, forgets_send>(make(4, 3));
  EXPECT_REPORTED(r, "deadlock");
  CHECK(has(r, "rank 1 op #0 recv_copy_send"));
  CHECK(has(r, "waits for a message from rank 0 (which has finished"));
}

TEST_CASE("symbolic negative: a cyclic send-before-receive deadlocks with one slot") {
  config c = make(4, 40, 1);  // 40 elements = 5 messages of 8
  const report r = verify<kind::send_recv, send_all_then_recv>(c);
  EXPECT_REPORTED(r, "deadlock");
  CHECK(has(r, "waits for a free slot to rank"));
  // The same schedule completes when every connection holds the whole buffer.
  c.slots = 5;
  const report ok = verify<kind::send_recv, send_all_then_recv>(c);
  INFO(ok.message);
  CHECK(ok.ok);
}

TEST_CASE("symbolic negative: double counting, wrong offsets, partial finalize, size mismatch") {
  EXPECT_REPORTED((verify<kind::all_reduce, two_rank_all_reduce<0>>(make(2, 5))), "double counts ranks {0}");
  EXPECT_REPORTED((verify<kind::all_reduce, two_rank_all_reduce<1>>(make(2, 5))), "wrong offset");
  EXPECT_REPORTED((verify<kind::all_reduce, two_rank_all_reduce<2>>(make(2, 5))), "finalizes a partial value");
  EXPECT_REPORTED((verify<kind::all_reduce, two_rank_all_reduce<3>>(make(2, 5))), "receives a message of 5 elements");
  const report ok = verify<kind::all_reduce, two_rank_all_reduce<4>>(make(2, 5));
  INFO(ok.message);
  CHECK(ok.ok);
}

TEST_CASE("symbolic negative: an in-place call that overwrites input it still needs") {
  config c = make(2, 6);
  const report oop = verify<kind::all_reduce, overwrites_input>(c);
  INFO(oop.message);
  CHECK(oop.ok);  // correct out of place
  c.in_place = true;
  EXPECT_REPORTED((verify<kind::all_reduce, overwrites_input>(c)), "after it was overwritten");
}

TEST_CASE("symbolic negative: buffers that are not significant, and reductions in non-reducing kinds") {
  EXPECT_REPORTED((verify<kind::reduce, writes_non_root_output>(make(2, 4))), "not significant on rank 1");
  EXPECT_REPORTED((verify<kind::broadcast, reducing_broadcast>(make(2, 4))), "broadcast does not reduce");
}

TEST_CASE("symbolic negative: direct reads need barriers around them and must not race") {
  EXPECT_REPORTED((verify<kind::all_gather, direct_gather<0>>(make(3, 4))), "before any barrier");
  EXPECT_REPORTED((verify<kind::all_gather, direct_gather<1>>(make(3, 4))), "after the last barrier");
  EXPECT_REPORTED((verify<kind::all_gather, direct_gather<2>>(make(3, 4))), "same barrier epoch");
  EXPECT_REPORTED((verify<kind::all_gather, direct_gather<4>>(make(3, 4))), "needs_direct = false");
  const report ok = verify<kind::all_gather, direct_gather<3>>(make(3, 4));
  INFO(ok.message);
  CHECK(ok.ok);
  CHECK(ok.peer_bytes_read[0] == 8);  // two peers' blocks of 4
  CHECK(ok.bytes_sent[0] == 0);
  config c = make(3, 4);
  CHECK(verify<kind::all_reduce, in_place_one_shot>(c).ok);
  c.in_place = true;
  EXPECT_REPORTED((verify<kind::all_reduce, in_place_one_shot>(c)), "race");
}

TEST_CASE("symbolic negative: a final value that is wrong is named by rank and element") {
  // A broadcast that never forwards past rank 1 finishes cleanly but leaves rank 2 empty.
  const report r = verify<kind::broadcast, short_chain>(make(3, 4));
  EXPECT_REPORTED(r, "rank 2 output[0] holds poison (never written), expected {ranks {0}, element 0");
}

TEST_CASE("symbolic negative: ring all_reduce needs two slots when an op waits for receives and sends at once") {
  // Not a broken schedule: a property of the ring that executors must respect. Every rank's first
  // send fills its one slot; each then waits for that slot and its incoming message together.
  config c = make(4, 64, 1);
  c.atomic_ops = true;
  EXPECT_REPORTED((verify<kind::all_reduce, collcomm::algo::ring>(c)), "deadlock");
  c.atomic_ops = false;  // taking the receive first frees the upstream slot
  CHECK(verify<kind::all_reduce, collcomm::algo::ring>(c).ok);
  c.atomic_ops = true;
  c.slots = 2;
  CHECK(verify<kind::all_reduce, collcomm::algo::ring>(c).ok);
}
