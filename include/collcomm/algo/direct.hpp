// collcomm/algo/direct.hpp — reduce_scatter, all_gather, broadcast, reduce and all_to_all over load/store
// transports: each rank pulls what it needs straight from its peers' buffers, between a barrier
// that says every input is ready and one that keeps every rank in the call until its peers have
// finished reading it. No FIFO, no intermediate hops: each element crosses one link once.
//
// Reads per rank: reduce_scatter and all_gather (n-1) * count, all_to_all (n-1) * count; broadcast
// count per non-root; reduce n * count at the root (the non-roots only meet at the barriers).
// In place (kinds.hpp): reduce_scatter's output is the rank's own input block r, which only this
// rank reads; all_gather's input is the rank's own output block r, which peers read during the
// call — so that block's identity copy is made after the last barrier, when no peer reads it; so is
// broadcast's at the root. reduce's root reads each element of every input before it writes that
// element of its output, and only the root reads.
#pragma once

#include <collcomm/algo/primitives.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct direct {
  static constexpr const char* name = "direct";
  static constexpr bool needs_direct = true;
  // all_gather's channel c reads from each peer only the peer's input range of channel c (kernels
  // may stage it per channel: collective_kernel.cuh); reduce_scatter and all_to_all read every block.
  template <class K>
  static constexpr bool peers_read_channel_range = std::is_same_v<K, kind::all_gather>;

  // out[i] = ⊕ over ranks q, in rank order, of q's input[r * count + i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::reduce_scatter, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    const index_t base = static_cast<index_t>(a.rank) * a.count;
    entry_barrier(p);
    p.direct_reduce_copy(in(base + mine.begin), out(mine.begin), mine.size, true);
    exit_barrier(p);
  }

  // out[s * count + i] = rank s's input[i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_gather, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    auto blk = [&](int s) { return static_cast<index_t>(s) * a.count + mine.begin; };
    entry_barrier(p);
    for (int k = 1; k < n; ++k) {
      const int s = mod(r + k, n);
      p.direct_copy(s, in(mine.begin), out(blk(s)), mine.size);
    }
    exit_barrier(p);
    // The rank's own block through the direct copy loop: on an H100 it moved 2-rank all_gather 2-10 %
    // faster than the FIFO body's plain copy (bench/RESULTS.md).
    p.direct_copy(r, in(mine.begin), out(blk(r)), mine.size);
  }

  // out[i] = root's input[i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::broadcast, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    entry_barrier(p);
    if (a.rank != a.root) p.direct_copy(a.root, in(mine.begin), out(mine.begin), mine.size);
    exit_barrier(p);
    if (a.rank == a.root) p.copy(in(mine.begin), out(mine.begin), mine.size);
  }

  // At the root: out[i] = ⊕ over ranks q, in rank order, of q's input[i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::reduce, P& p, const coll_args& a) {
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    entry_barrier(p);
    if (a.rank == a.root) p.direct_reduce_copy(in(mine.begin), out(mine.begin), mine.size, true);
    exit_barrier(p);
  }

  // out[s * count + i] = rank s's input[r * count + i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_to_all, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    auto blk = [&](int s) { return static_cast<index_t>(s) * a.count + mine.begin; };
    p.copy(in(blk(r)), out(blk(r)), mine.size);
    entry_barrier(p);
    for (int k = 1; k < n; ++k) {
      const int s = mod(r + k, n);
      p.direct_copy(s, in(blk(r)), out(blk(s)), mine.size);
    }
    exit_barrier(p);
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
