// collcomm/algo/ring.hpp — ring schedules: all_reduce, reduce_scatter, all_gather, broadcast
// (pipelined chain), reduce (pipelined chain).
//
// Ranks form the ring r -> r+1 (mod n). Each channel works on its own contiguous share of the data
// (channel_range) and walks it in slices of at most n * slot_elems elements, so that every
// message fits a slot and consecutive slices pipeline around the ring.
//
// Bytes each rank sends (the optimum for a ring, checked by the symbolic tests):
//   all_reduce 2(n-1)/n * count, reduce_scatter and all_gather (n-1) * count,
//   broadcast and reduce count (all but one rank).
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct ring {
  static constexpr const char* name = "ring";
  static constexpr bool needs_direct = false;

  // NCCL's ring as primitive calls, 2(n-1) steps per slice: send; (n-2) x recv_reduce_send;
  // recv_reduce_copy_send (the chunk is complete here: finalize); (n-2) x recv_copy_send; recv.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
    const index_t align = p.align_elems();
    const range mine = channel_range(a.count, a.channel, a.nchannels, align);
    if (n == 1) {
      p.copy(in(mine.begin), out(mine.begin), mine.size, true);
      return;
    }
    const index_t slice_max = p.slot_elems() * static_cast<index_t>(n);
    for (index_t off = 0; off < mine.size; off += slice_max) {
      const range slice{mine.begin + off, min_of(slice_max, mine.size - off)};
      auto chunk = [&](int j) { return piece(slice, static_cast<index_t>(n), static_cast<index_t>(mod(j, n)), align); };
      // Reduce phase: at step k, send chunk r-k and receive chunk r-k-1.
      range c = chunk(r);
      p.send(next, in(c.begin), c.size);
      for (int k = 1; k < n - 1; ++k) {
        c = chunk(r - k);
        p.recv_reduce_send(prev, in(c.begin), next, c.size);
      }
      c = chunk(r + 1);  // = r - (n-1): complete once our input is added
      p.recv_reduce_copy_send(prev, in(c.begin), out(c.begin), next, c.size, true);
      // Gather phase: complete chunks travel once more around the ring.
      for (int g = 1; g < n - 1; ++g) {
        c = chunk(r + 1 - g);
        p.recv_copy_send(prev, out(c.begin), next, c.size);
      }
      c = chunk(r + 2);
      p.recv(prev, out(c.begin), c.size);
    }
  }

  // Block b of the input (b * count ...) is reduced into rank b's output. At step k a rank sends
  // block r-1-k; the block it receives last is its own.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::reduce_scatter, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    const index_t cnt = a.count;
    auto blk = [&](int b, index_t off) { return static_cast<index_t>(mod(b, n)) * cnt + off; };
    if (n == 1) {
      p.copy(in(mine.begin), out(mine.begin), mine.size, true);
      return;
    }
    const index_t step = p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      p.send(next, in(blk(r - 1, off)), len);
      for (int k = 1; k < n - 1; ++k) p.recv_reduce_send(prev, in(blk(r - 1 - k, off)), next, len);
      p.recv_reduce_copy(prev, in(blk(r, off)), out(off), len, true);
    }
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_gather, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    const index_t cnt = a.count;
    auto blk = [&](int b, index_t off) { return static_cast<index_t>(mod(b, n)) * cnt + off; };
    if (n == 1) {
      p.copy(in(mine.begin), out(mine.begin), mine.size);
      return;
    }
    const index_t step = p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      p.copy_send(in(off), out(blk(r, off)), next, len);
      for (int k = 1; k < n - 1; ++k) p.recv_copy_send(prev, out(blk(r - k, off)), next, len);
      p.recv(prev, out(blk(r - (n - 1), off)), len);
    }
  }

  // A pipelined chain root -> root+1 -> ... -> root-1.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::broadcast, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
    const int pos = mod(r - a.root, n);  // 0 at the root
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    const index_t step = n == 1 ? (mine.size ? mine.size : 1) : p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      if (n == 1)
        p.copy(in(off), out(off), len);
      else if (pos == 0)
        p.copy_send(in(off), out(off), next, len);
      else if (pos < n - 1)
        p.recv_copy_send(prev, out(off), next, len);
      else
        p.recv(prev, out(off), len);
    }
  }

  // A pipelined chain root+1 -> root+2 -> ... -> root, reducing on the way.
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::reduce, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
    const int pos = mod(r - a.root, n);  // 0 at the root, 1 where the chain starts
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    const index_t step = n == 1 ? (mine.size ? mine.size : 1) : p.slot_elems();
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      if (n == 1)
        p.copy(in(off), out(off), len, true);
      else if (pos == 1)
        p.send(next, in(off), len);
      else if (pos != 0)
        p.recv_reduce_send(prev, in(off), next, len);
      else
        p.recv_reduce_copy(prev, in(off), out(off), len, true);
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
