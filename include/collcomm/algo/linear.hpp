// collcomm/algo/linear.hpp — gather and scatter over FIFO connections, root to each rank in turn.
//
// The root's own block is a local copy (in place at the root: the identity). The root takes the
// other ranks one after another, starting after itself; a non-root rank only sends (gather) or
// only receives (scatter), so nothing can wait in a cycle. The root's link carries everything:
// (n-1) * count elements in or out; other ranks move count.
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct linear {
  static constexpr const char* name = "linear";
  static constexpr bool needs_direct = false;

  // Root's out[s * count + i] = rank s's input[i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::gather, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    const index_t step = p.slot_elems(), end = mine.begin + mine.size;
    auto blk = [&](int s, index_t off) { return static_cast<index_t>(s) * a.count + off; };
    if (r != a.root) {
      for (index_t off = mine.begin; off < end; off += step) p.send(a.root, in(off), min_of(step, end - off));
      return;
    }
    p.copy(in(mine.begin), out(blk(r, mine.begin)), mine.size);
    for (int k = 1; k < n; ++k) {
      const int s = mod(r + k, n);
      for (index_t off = mine.begin; off < end; off += step) p.recv(s, out(blk(s, off)), min_of(step, end - off));
    }
  }

  // out[i] = root's input[r * count + i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::scatter, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    const index_t step = p.slot_elems(), end = mine.begin + mine.size;
    auto blk = [&](int s, index_t off) { return static_cast<index_t>(s) * a.count + off; };
    if (r != a.root) {
      for (index_t off = mine.begin; off < end; off += step) p.recv(a.root, out(off), min_of(step, end - off));
      return;
    }
    for (int k = 1; k < n; ++k) {
      const int s = mod(r + k, n);
      for (index_t off = mine.begin; off < end; off += step) p.send(s, in(blk(s, off)), min_of(step, end - off));
    }
    p.copy(in(blk(r, mine.begin)), out(mine.begin), mine.size);
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
