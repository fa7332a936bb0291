// collcomm/algo/recursive_doubling.hpp — recursive doubling: all_reduce and all_gather in
// log2(n) exchange steps, for latency-bound sizes.
//
// Let m be the largest power of two <= n and e = n - m. Ranks m..n-1 ("extra" ranks) first fold
// into ranks 0..e-1 (rank m+i sends to rank i), the m ranks 0..m-1 run recursive doubling — at
// step s, rank v exchanges with v ^ 2^s — and at the end the result goes to rank m+i (from rank i
// for all_reduce; for all_gather each block from the rank that first held it).
// Every exchange is interleaved piece by piece (send piece j, then receive piece j), so partners
// move in lockstep and a single slot per connection suffices.
//
// all_reduce exchanges the whole vector at every step; at each step both partners compute
// "received ⊕ own" over the same two operands, so with a commutative op all ranks end with
// bitwise identical results (the same reduction tree up to commutation); the last step
// finalizes, and the extra ranks receive the finalized values as they are.
// Bytes each rank sends: all_reduce log2(m) * count (ranks 0..e-1 and the extra ranks: + count);
// all_gather (n-1) * count for a power of two; otherwise (m-1) * count plus the extra blocks its
// groups hold, plus its one or two blocks to each extra rank — at most (m-1 + n-m + n-1) * count.
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct recursive_doubling {
  static constexpr const char* name = "recursive_doubling";
  static constexpr bool needs_direct = false;

  COLLCOMM_HD static constexpr int pow2_floor(int n) noexcept {
    int m = 1;
    while (m * 2 <= n) m *= 2;
    return m;
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, m = pow2_floor(n), extra = n - m;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    if (n == 1) {
      p.copy(in(mine.begin), out(mine.begin), mine.size, true);
      return;
    }
    const index_t step = p.slot_elems();
    const index_t end = mine.begin + mine.size;
    if (r >= m) {  // an extra rank: hand the input to rank r - m, get the result back
      for (index_t off = mine.begin; off < end; off += step) p.send(r - m, in(off), min_of(step, end - off));
      for (index_t off = mine.begin; off < end; off += step) p.recv(r - m, out(off), min_of(step, end - off));
      return;
    }
    // `out` holds this rank's partial sum once it was first written; until then it is `in`.
    bool partial_in_out = false;
    if (r < extra) {
      for (index_t off = mine.begin; off < end; off += step)
        p.recv_reduce_copy(r + m, in(off), out(off), min_of(step, end - off), false);
      partial_in_out = true;
    }
    for (int mask = 1; mask < m; mask *= 2) {
      const int partner = r ^ mask;
      const bool last = mask * 2 == m;
      for (index_t off = mine.begin; off < end; off += step) {
        const index_t len = min_of(step, end - off);
        const buf_ref src = partial_in_out ? out(off) : in(off);
        p.send(partner, src, len);
        p.recv_reduce_copy(partner, src, out(off), len, last);
      }
      partial_in_out = true;
    }
    if (r < extra)
      for (index_t off = mine.begin; off < end; off += step) p.send(r + m, out(off), min_of(step, end - off));
  }

  // The blocks a group of virtual ranks [base, base + size) holds once the extra ranks have
  // folded in: first block v for each v of the group, then block v + m for each v < extra.
  struct group {
    int base, size, m, extra;
    COLLCOMM_HD constexpr int blocks() const noexcept {
      const int hi = base + size < extra ? base + size : extra;
      return size + (hi > base ? hi - base : 0);
    }
    COLLCOMM_HD constexpr int block(int i) const noexcept { return i < size ? base + i : base + (i - size) + m; }
  };

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_gather, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, m = pow2_floor(n), extra = n - m;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    const index_t cnt = a.count, step = p.slot_elems();
    const index_t pieces = div_up(mine.size, step);  // per block
    // Message i of a list of blocks: block list(i / pieces), piece i % pieces of this channel.
    auto msg = [&](int blk, index_t j) {
      const index_t off = mine.begin + j * step;
      return range{static_cast<index_t>(blk) * cnt + off, min_of(step, mine.begin + mine.size - off)};
    };
    const index_t end = mine.begin + mine.size;
    // Extra rank m+i folds its block into rank i; at the end it gets each block from the rank
    // that first held it (block b < m from rank b, block m+j from rank j), which spreads the
    // extra ranks' results over all m ranks: every rank sends at most (m-1 + n-m + n-1) blocks.
    auto first_holder = [&](int blk) { return blk < m ? blk : blk - m; };
    if (r >= m) {
      for (index_t off = mine.begin; off < end; off += step)
        p.copy_send(in(off), out(static_cast<index_t>(r) * cnt + off), r - m, min_of(step, end - off));
      for (int b = 0; b < n; ++b) {
        if (b == r) continue;
        for (index_t j = 0; j < pieces; ++j) {
          const range c = msg(b, j);
          p.recv(first_holder(b), out(c.begin), c.size);
        }
      }
      return;
    }
    // Copy our own block first (in place: the identity); from then on everything is sent from out.
    p.copy(in(mine.begin), out(static_cast<index_t>(r) * cnt + mine.begin), mine.size);
    if (r < extra)
      for (index_t j = 0; j < pieces; ++j) {
        const range c = msg(r + m, j);
        p.recv(r + m, out(c.begin), c.size);
      }
    for (int size = 1; size < m; size *= 2) {
      const int partner = r ^ size;
      const group g_me{r & ~(size - 1), size, m, extra}, g_peer{partner & ~(size - 1), size, m, extra};
      const index_t sends = static_cast<index_t>(g_me.blocks()) * pieces;
      const index_t recvs = static_cast<index_t>(g_peer.blocks()) * pieces;
      for (index_t i = 0; i < sends || i < recvs; ++i) {
        if (i < sends) {
          const range c = msg(g_me.block(static_cast<int>(i / pieces)), i % pieces);
          p.send(partner, out(c.begin), c.size);
        }
        if (i < recvs) {
          const range c = msg(g_peer.block(static_cast<int>(i / pieces)), i % pieces);
          p.recv(partner, out(c.begin), c.size);
        }
      }
    }
    for (int x = m; x < n; ++x) {       // our blocks (r, and r + m when we host it) to each extra rank
      for (int b = r; b < n; b += m) {  // b = r, then r + m (n < 2m)
        if (b == x) continue;
        for (index_t j = 0; j < pieces; ++j) {
          const range c = msg(b, j);
          p.send(x, out(c.begin), c.size);
        }
      }
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
