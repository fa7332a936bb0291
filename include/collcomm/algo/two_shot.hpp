// collcomm/algo/two_shot.hpp — two-shot all_reduce over load/store transports: a direct
// reduce-scatter followed by a direct all-gather. Each rank reads 2(n-1)/n * count elements from
// its peers, against one-shot's (n-1) * count: the better choice from ~256 KB to a few MB.
//
// Each channel's share is cut into n slices (rounded to align_elems; trailing ones may be empty).
//   barrier                  every input is ready
//   direct_reduce_copy       slice r of every rank's input, in rank order, into this rank's
//                            output slice r, finalized (rank r owns slice r)
//   barrier                  every owner's slice is complete
//   direct_copy              slice s from rank s's output, for every s != r
//   barrier                  no rank leaves while a peer reads its output
// In place, rank r writes only slice r during the first step, which no peer reads then (peers read
// their own slices of r's input); in the second step peers read only r's slice r, which r no
// longer writes. Each element is reduced once, by its owner, so all ranks hold identical bits.
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct two_shot {
  static constexpr const char* name = "two_shot";
  static constexpr bool needs_direct = true;
  static constexpr bool reads_peer_outputs = true;  // its all-gather half reads peers' outputs

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const index_t align = p.align_elems();
    const range mine = channel_range(a.count, a.channel, a.nchannels, align);
    if (mine.size == 0) return;  // the same on every rank
    auto slice = [&](int s) { return piece(mine, static_cast<index_t>(n), static_cast<index_t>(s), align); };
    entry_barrier(p);
    const range own = slice(r);
    p.direct_reduce_copy(in(own.begin), out(own.begin), own.size, true);
    p.barrier();
    for (int k = 1; k < n; ++k) {
      const int s = mod(r + k, n);  // start at different owners, to spread the reads
      const range c = slice(s);
      p.direct_copy(s, out(c.begin), out(c.begin), c.size);
    }
    exit_barrier(p);
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
