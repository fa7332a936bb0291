// tests/symbolic/sweep.hpp — the configurations the symbolic suite runs every (kind, algorithm)
// through: N = 1..64, counts 0, 1, N-1, N, N+1, 97 and a large one, channels 1..3, roots 0, N-1,
// N/2, out of place and in place, FIFO depth 1 and 2, both progress models, slot_elems 8 and 5,
// align 1 and 4. Not every combination for every N, but every N with each count.
#pragma once

#include "symbolic_executor.hpp"

#include <algorithm>
#include <functional>
#include <type_traits>
#include <vector>

namespace collcomm_symbolic {

// Kinds whose biggest buffer is N*count.
template <class K>
constexpr bool n_times_count_kind() {
  using namespace collcomm::kind;
  return std::is_same_v<K, reduce_scatter> || std::is_same_v<K, all_gather> || std::is_same_v<K, all_to_all> ||
         std::is_same_v<K, gather> || std::is_same_v<K, scatter>;
}

// The large count of the sweep: 4099, or 1031 or 263 where the schedule would move more than
// `budget` elements in all at 4099 (kinds with N*count buffers, one-shot reads of N inputs) — the
// work of a symbolic run grows with the elements moved, and the suite must stay quick. Every
// large count is still many slices per rank and channel (slot_elems <= 8).
template <class K, class A>
index_t large_count(int n) {
  constexpr double budget = 1e6;
  // Elements moved grow linearly with count: probe at a small count and scale.
  config probe;
  probe.nranks = n;
  probe.count = 263;
  probe.slot_elems = 8;
  const report r = measure<K, A>(probe);
  double moved = 0;
  for (size_t i = 0; i < r.bytes_sent.size(); ++i) moved += static_cast<double>(r.bytes_sent[i] + r.peer_bytes_read[i]);
  for (index_t c : {index_t{4099}, index_t{1031}})
    if (moved * static_cast<double>(c) / 263.0 <= budget) return c;
  return 263;
}

// send_recv patterns: ring (every rank sends and receives), pairs (even ranks only send, odd ranks
// only receive, a last odd rank out idle) and a ring of stride 3.
inline void send_recv_pattern(config& c, int pattern) {
  const int n = c.nranks;
  c.send_peer.assign(static_cast<size_t>(n), no_peer);
  c.recv_peer.assign(static_cast<size_t>(n), no_peer);
  for (int r = 0; r < n; ++r) {
    if (pattern == 0) {
      c.send_peer[static_cast<size_t>(r)] = (r + 1) % n;
      c.recv_peer[static_cast<size_t>(r)] = (r + n - 1) % n;
    } else if (pattern == 1) {
      if (r % 2 == 0 && r + 1 < n) c.send_peer[static_cast<size_t>(r)] = r + 1;
      if (r % 2 == 1) c.recv_peer[static_cast<size_t>(r)] = r - 1;
    } else {
      c.send_peer[static_cast<size_t>(r)] = (r + 3) % n;
      c.recv_peer[static_cast<size_t>(r)] = ((r - 3) % n + n) % n;
    }
  }
}

inline const char* pattern_name(int p) { return p == 0 ? "ring" : p == 1 ? "pairs" : "stride3"; }

// Calls f(config) for every configuration of the sweep for kind K and algorithm A.
template <class K, class A, class F>
void for_each_config(int n_lo, int n_hi, F&& f) {
  for (int n = n_lo; n <= n_hi; ++n) {
    const index_t large = large_count<K, A>(n);
    std::vector<index_t> counts = {
        0, 1, static_cast<index_t>(n - 1), static_cast<index_t>(n), static_cast<index_t>(n + 1), 97, large};
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    int ci = 0;
    for (index_t count : counts) {
      ++ci;
      std::vector<int> roots = {0};
      if constexpr (K::rooted) roots = {0, n - 1, n / 2};
      if constexpr (std::is_same_v<K, collcomm::kind::send_recv>) roots = {0, 1, 2};  // patterns
      std::sort(roots.begin(), roots.end());
      roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
      std::vector<int> chans = {1 + (n + ci) % 3};
      if (n <= 4 || count <= 1) chans = {1, 2, 3};
      const int variant = n + ci;
      const int places = detail::has_in_place<K>() && detail::in_place_safe<A>() ? 2 : 1;
      int combo = 0;
      for (int root : roots)
        for (int place = 0; place < places; ++place, ++combo)
          for (int ch : chans) {
            // The large count beyond N = 16 runs one (root, place) pair per N, a different one
            // from one N to the next, so that all pairs are covered across the sweep.
            const int combos = static_cast<int>(roots.size()) * places;
            if (count == large && n > 16 && combo != n % combos) continue;
            config c;
            c.nranks = n;
            c.count = count;
            c.channels = ch;
            c.in_place = place == 1;
            if constexpr (std::is_same_v<K, collcomm::kind::send_recv>)
              send_recv_pattern(c, root);
            else
              c.root = root;
            c.slots = variant % 3 == 0 ? 1 : 2;
            c.atomic_ops = variant % 4 == 1 && c.slots >= 2;
            c.slot_elems = variant % 2 ? 8 : 5;
            if (variant % 5 == 0) {
              c.slot_elems = 8;
              c.align_elems = 4;
            }
            f(c);
          }
    }
  }
}

}  // namespace collcomm_symbolic
