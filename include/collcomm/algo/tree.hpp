// collcomm/algo/tree.hpp — tree schedules: all_reduce over a double binary tree; broadcast and
// reduce over one binary tree rooted at the caller's root.
//
// The binary tree (positions 0..n-1, position 0 the root). Write a position p > 0 as
// "prefix, 1, k zeros" and call L = 2^k its low bit:
//   children: p - L/2 (when L >= 2), and p + L/2 — or, when that is past n, the first of p + L/4,
//             p + L/8, ... that is not;
//   parent:   p - L if the bit above L is set, else p + L, else (that is past n) p - L.
// The root acts as if its low bit were the smallest power of two >= n, so its single child is the
// largest power of two below n. Odd positions are leaves; depth <= ceil(log2 n).
//
//   n = 14:  0 -> 8;  8 -> 4, 12;  4 -> 2, 6;  12 -> 10, 13;  2 -> 1, 3;  6 -> 5, 7;  10 -> 9, 11
//   (12's natural right child 14 is past n, so 13 takes its place).
//
// all_reduce uses two such trees at once (the double binary tree): tree 0 maps position p to rank
// p; tree 1 mirrors it (rank n-1-p) when n is even and shifts it (rank p+1) when n is odd, so a
// rank that is a leaf in one tree is interior in the other, and each rank's links carry about one
// tree's worth of traffic each way. Each tree carries half the data: with an even channel count,
// channel c uses tree c % 2; with an odd count the last channel runs half of its share on each
// tree, one after the other.
//
// Within a tree the data moves in pieces of at most slot_elems: reduced up to the root (which
// finalizes) and broadcast back down. A node at depth d interleaves up(k) with down(k - d), so
// that up and down traffic overlap and a piece never waits for a whole round trip; the lag grows
// by one per level, which keeps every link within one message of its consumer, so the schedule
// cannot deadlock with a single slot per connection, even when a primitive waits for its
// messages and its free send slots at once.
//
// Bytes each rank sends: all_reduce about 2 * count (leaves of one tree count / 2 up and nothing
// down in it; interior nodes count / 2 up and up to count down); broadcast count on interior
// ranks (2 count with two children), 0 on leaves; reduce count on every rank but the root.
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

// One node of the binary tree above, in positions: parent (no_peer at the root), up to two
// children (no_peer where absent), depth (0 at the root).
struct btree_node {
  int parent = no_peer;
  int child[2] = {no_peer, no_peer};
  int depth = 0;
};

COLLCOMM_HD constexpr int btree_parent(int p, int n) noexcept {
  if (p == 0) return no_peer;
  const int low = p & -p;
  if (p & (low << 1)) return p - low;
  return p + low < n ? p + low : p - low;
}

COLLCOMM_HD constexpr btree_node btree_at(int p, int n) noexcept {
  btree_node b;
  if (n <= 1) return b;
  int low = p & -p;
  if (p == 0) {
    low = 1;
    while (low < n) low <<= 1;
  } else if (low >= 2) {
    b.child[0] = p - low / 2;
  }
  for (int l = low / 2; l >= 1; l /= 2)
    if (p + l < n) {
      b.child[1] = p + l;
      break;
    }
  b.parent = btree_parent(p, n);
  for (int q = p; q != 0; q = btree_parent(q, n)) ++b.depth;
  return b;
}

struct tree {
  static constexpr const char* name = "tree";
  static constexpr bool needs_direct = false;

  // A node of a tree placed on ranks: `pos` maps a rank to its position, `rank_of` back.
  struct placement {
    int n, shift;
    bool mirror;
    COLLCOMM_HD constexpr int pos(int r) const noexcept { return mirror ? n - 1 - r : mod(r - shift, n); }
    COLLCOMM_HD constexpr int rank_of(int q) const noexcept { return mirror ? n - 1 - q : mod(q + shift, n); }
  };

  struct links {
    int parent = no_peer;
    peers children;
    int depth = 0;
  };

  COLLCOMM_HD static constexpr links links_of(int r, placement t) noexcept {
    const btree_node b = btree_at(t.pos(r), t.n);
    links l;
    l.parent = b.parent == no_peer ? no_peer : t.rank_of(b.parent);
    for (int c : b.child)
      if (c != no_peer) l.children.add(t.rank_of(c));
    l.depth = b.depth;
    return l;
  }

  // Tree 0 or 1 of the double binary tree on n ranks.
  COLLCOMM_HD static constexpr placement double_tree(int which, int n) noexcept {
    if (which == 0) return {n, 0, false};
    return n % 2 == 0 ? placement{n, 0, true} : placement{n, 1, false};
  }

  // Reduce `rg` up tree `t` and broadcast it back down, pipelined by pieces (see the top).
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void up_down(P& p, const coll_args& a, placement t, range rg) {
    if (rg.size == 0) return;
    if (a.nranks == 1) {
      p.copy(in(rg.begin), out(rg.begin), rg.size, true);
      return;
    }
    const links l = links_of(a.rank, t);
    const index_t step = p.slot_elems();
    const index_t pieces = div_up(rg.size, step);
    auto at = [&](index_t k) { return range{rg.begin + k * step, min_of(step, rg.size - k * step)}; };
    const bool root = l.parent == no_peer, leaf = l.children.empty();
    const index_t lag = static_cast<index_t>(l.depth);
    for (index_t it = 0; it < pieces + lag; ++it) {
      if (it < pieces) {
        const range c = at(it);
        if (root)
          p.recv_reduce_copy_send(l.children, in(c.begin), out(c.begin), l.children, c.size, true);
        else if (leaf)
          p.send(l.parent, in(c.begin), c.size);
        else
          p.recv_reduce_send(l.children, in(c.begin), l.parent, c.size);
      }
      if (!root && it >= lag) {
        const range c = at(it - lag);
        if (leaf)
          p.recv(l.parent, out(c.begin), c.size);
        else
          p.recv_copy_send(l.parent, out(c.begin), l.children, c.size);
      }
    }
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (a.nchannels % 2 == 0 || a.channel < a.nchannels - 1) {
      up_down(p, a, double_tree(a.channel % 2, a.nranks), mine);
    } else {
      up_down(p, a, double_tree(0, a.nranks), piece(mine, 2, 0, p.align_elems()));
      up_down(p, a, double_tree(1, a.nranks), piece(mine, 2, 1, p.align_elems()));
    }
  }

  // Root -> its one child -> ... pipelined by pieces; each interior node forwards to its children.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::broadcast, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (a.nranks == 1) {
      if (mine.size) p.copy(in(mine.begin), out(mine.begin), mine.size);
      return;
    }
    const links l = links_of(a.rank, placement{a.nranks, a.root, false});
    const index_t step = p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      if (l.parent == no_peer)
        p.copy_send(in(off), out(off), l.children, len);
      else if (l.children.empty())
        p.recv(l.parent, out(off), len);
      else
        p.recv_copy_send(l.parent, out(off), l.children, len);
    }
  }

  // Leaves -> ... -> root, each interior node adding its input to its children's partial sums.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::reduce, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (a.nranks == 1) {
      if (mine.size) p.copy(in(mine.begin), out(mine.begin), mine.size, true);
      return;
    }
    const links l = links_of(a.rank, placement{a.nranks, a.root, false});
    const index_t step = p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      if (l.parent == no_peer)
        p.recv_reduce_copy(l.children, in(off), out(off), len, true);
      else if (l.children.empty())
        p.send(l.parent, in(off), len);
      else
        p.recv_reduce_send(l.children, in(off), l.parent, len);
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
