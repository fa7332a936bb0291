// collcomm/algo/p2p.hpp — send_recv: this rank's input goes to a.send_peer while its output comes
// from a.recv_peer (either may be no_peer), over FIFO connections.
//
// The two directions are interleaved piece by piece (send piece j, then receive piece j), so ranks
// that send to each other — pairs, rings, any permutation — stay within one message of each other
// and one slot per connection suffices. A rank that sends to and receives from itself copies.
// Bytes each rank sends: count (0 with no send_peer).
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct p2p {
  static constexpr const char* name = "p2p";
  static constexpr bool needs_direct = false;

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::send_recv, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    if (a.send_peer == a.rank && a.recv_peer == a.rank) {
      p.copy(in(mine.begin), out(mine.begin), mine.size);
      return;
    }
    const index_t step = p.slot_elems(), end = mine.begin + mine.size;
    for (index_t off = mine.begin; off < end; off += step) {
      const index_t len = min_of(step, end - off);
      if (a.send_peer != no_peer) p.send(a.send_peer, in(off), len);
      if (a.recv_peer != no_peer) p.recv(a.recv_peer, out(off), len);
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
