// collcomm/algo/pairwise.hpp — pairwise exchange all_to_all over FIFO connections.
//
// The own block is a local copy; then at step k = 1..n-1 rank r sends its block for rank r+k and
// receives rank r-k's block for it. Each step uses its own connections (r -> r+k), and within a
// step a rank alternates "send piece j, receive piece j", so every rank is at most one message
// ahead of the rank it sends to: one slot per connection suffices, for any n.
// Bytes each rank sends: (n-1) * count.
#pragma once

#include <collcomm/algo/primitives.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

struct pairwise {
  static constexpr const char* name = "pairwise";
  static constexpr bool needs_direct = false;

  // out[s * count + i] = rank s's input[r * count + i].
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  COLLCOMM_HD static void run(kind::all_to_all, P& p, const coll_args& a) {
    const int n = a.nranks, r = a.rank;
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    auto blk = [&](int s, index_t off) { return static_cast<index_t>(s) * a.count + off; };
    p.copy(in(blk(r, mine.begin)), out(blk(r, mine.begin)), mine.size);
    const index_t step = p.slot_elems(), end = mine.begin + mine.size;
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n), from = mod(r - k, n);
      for (index_t off = mine.begin; off < end; off += step) {
        const index_t len = min_of(step, end - off);
        p.send(to, in(blk(to, off)), len);
        p.recv(from, out(blk(from, off)), len);
      }
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
