// tests/host/matrix_driver.hpp — the host correctness matrix: real random data through every
// (kind, algorithm, element, op) of tests/common/matrix.hpp on the host executor, every output
// element checked against reference.hpp.
//
// Shape of a run. For each composition, for each world size N of the plan, one *batch*: a fresh
// host::world with one of three option sets (channels 1/2/3, slot_bytes 64/256/4096, slots
// 2/4/8, rotating over N so each composition meets all three), and one run_ranks in which every
// rank makes about a dozen calls back to back (so the world's counters also carry over from call
// to call): counts 0, 1, N-1 (2 at N = 1), N+1, 97 (prime), each out of place and in place (where
// kinds.hpp and the algorithm allow: one_shot refuses in-place calls), and a large count that
// spans several slots — several ring slices with the small slots — in one of the two places,
// alternating over N; the root and the send_recv peer pattern (shift +1, shift -1, chain with
// no_peer ends, random permutation, self) change from call to call. Then, for every call and rank:
//   * every output element against the reference (exact bits, or the tolerance of reference.hpp);
//   * every other element of every buffer the call was given — guard zones on both sides, root-only
//     outputs on other ranks, the rest of an in-place buffer, the input of an out-of-place call —
//     unchanged, bit for bit. Outputs start poisoned (NaN for floats, 0xA5 bytes for integers), and
//     root-only inputs on other ranks hold poison too, so reading one shows up in the results.
// Inputs are fresh random numbers each run: the seed comes from std::random_device (or
// COLLCOMM_TEST_SEED=<n> to replay a run) and every failure message carries it.
//
// The plan. The full matrix (every composition, in and out of place, all counts) runs at
// N = 1, 2, 3, 5, 8; N = 4, 6, 7, 9, 16 run a few elements and ops (sweep_elements, sweep_ops).
// COLLCOMM_TEST_QUICK=1 (the CI's ThreadSanitizer step) shrinks both: see plan().
// COLLCOMM_TEST_N=<n> runs one world size only (to reproduce a failure quickly).
//
// Only run_batch<K, A, T, Op> is a template per composition; the rest is compiled once per
// translation unit.
#pragma once

#include "reference.hpp"

#include <collcomm/host.hpp>

#include <common/matrix.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace collcomm_test::host_matrix {

// ---- settings ---------------------------------------------------------------------------------

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    if (const char* s = std::getenv("COLLCOMM_TEST_SEED"); s != nullptr && *s != '\0')
      return static_cast<std::uint64_t>(std::strtoull(s, nullptr, 0));
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline std::uint64_t hash_str(std::uint64_t h, std::string_view s) {
  for (char c : s) h = splitmix64(h ^ static_cast<unsigned char>(c));
  return h;
}

// One option set of the host executor.
struct config {
  int channels;
  std::size_t slot_bytes;
  int slots;
};
inline constexpr config configs[3] = {{2, 4096, 8}, {1, 64, 2}, {3, 256, 4}};

// What one composition runs: world sizes, each with the option set to use.
struct plan_entry {
  int nranks;
  int config;
};

// Elements and ops of the sweep over N = 4, 6, 7, 9, 16 (names as element_name / op_id).
inline bool in_sweep(const type_desc& t, op_id op) {
  const std::string_view n = t.name;
  const bool type_ok = n == "f32" || n == "bf16" || n == "e5m2" || n == "i8" || n == "u64";
  const bool op_ok = op == op_id::none || op == op_id::sum || op == op_id::avg || op == op_id::max_magnitude;
  return type_ok && op_ok;
}
inline bool in_quick(const type_desc& t, op_id op) {
  const std::string_view n = t.name;
  const bool type_ok = n == "f32" || n == "f16" || n == "e4m3" || n == "i8" || n == "u64";
  const bool op_ok = op == op_id::none || op == op_id::sum || op == op_id::avg || op == op_id::premul_sum ||
                     op == op_id::max_magnitude || op == op_id::bit_xor;
  return type_ok && op_ok;
}

inline std::vector<plan_entry> plan(const type_desc& t, op_id op, int salt) {
  std::vector<int> ns;
  const bool quick = env_flag("COLLCOMM_TEST_QUICK");
  if (quick) {
    // ThreadSanitizer runs 5-15x slower: a few world sizes, fewer elements and ops.
    if (in_quick(t, op)) ns = {1, 2, 3, 5};
    if (in_quick(t, op) && in_sweep(t, op))
      ns.push_back(16);
    else if (in_sweep(t, op))
      ns = {2, 7};
  } else {
    ns = {1, 2, 3, 5, 8};
    if (in_sweep(t, op)) ns.insert(ns.end(), {4, 6, 7, 9, 16});
  }
  if (const char* only = std::getenv("COLLCOMM_TEST_N"); only != nullptr && *only != '\0') {
    const int n = std::atoi(only);
    ns.erase(std::remove_if(ns.begin(), ns.end(), [&](int x) { return x != n; }), ns.end());
  }
  std::vector<plan_entry> p;
  for (std::size_t i = 0; i < ns.size(); ++i)
    p.push_back({ns[i], static_cast<int>((i + static_cast<std::size_t>(salt)) % 3)});
  return p;
}

// ---- one batch of calls -----------------------------------------------------------------------

// One rank's arguments in one call.
struct rank_args {
  const void* send = nullptr;
  void* recv = nullptr;
  int send_peer = collcomm::no_peer;
  int recv_peer = collcomm::no_peer;
};
struct call_args {
  collcomm::index_t count = 0;
  int root = 0;
  double scalar = 1;  // premul_sum
  std::vector<rank_args> ranks;
};

// Runs the calls of one batch on a fresh world; each rank records in progress[rank] the call it
// is in (calls before min(progress) finished everywhere). Throws what run_ranks throws.
using runner_fn = void (*)(int nranks, const config& cfg, const std::vector<call_args>& calls,
                           std::vector<int>& progress);

template <class Op>
Op make_op(double scalar) {
  if constexpr (std::is_same_v<Op, collcomm::op::premul_sum<double>>)
    return Op{scalar};
  else
    return Op{};
}

template <class K, class A, class T, class Op>
void run_batch(int nranks, const config& cfg, const std::vector<call_args>& calls, std::vector<int>& progress) {
  collcomm::host::options opts;
  opts.channels = cfg.channels;
  opts.slot_bytes = cfg.slot_bytes;
  opts.slots = cfg.slots;
  opts.timeout = std::chrono::milliseconds(20000);
  collcomm::host::world w(nranks, opts);
  collcomm::host::run_ranks(w, [&](auto& comm) {
    const int r = comm.rank();
    for (std::size_t i = 0; i < calls.size(); ++i) {
      progress[static_cast<std::size_t>(r)] = static_cast<int>(i);
      const call_args& c = calls[i];
      const rank_args& a = c.ranks[static_cast<std::size_t>(r)];
      const T* send = static_cast<const T*>(a.send);
      T* recv = static_cast<T*>(a.recv);
      if constexpr (std::is_same_v<K, collcomm::kind::all_reduce>)
        collcomm::all_reduce<A>(comm, send, recv, c.count, make_op<Op>(c.scalar));
      else if constexpr (std::is_same_v<K, collcomm::kind::reduce_scatter>)
        collcomm::reduce_scatter<A>(comm, send, recv, c.count, make_op<Op>(c.scalar));
      else if constexpr (std::is_same_v<K, collcomm::kind::all_gather>)
        collcomm::all_gather<A>(comm, send, recv, c.count);
      else if constexpr (std::is_same_v<K, collcomm::kind::broadcast>)
        collcomm::broadcast<A>(comm, send, recv, c.count, c.root);
      else if constexpr (std::is_same_v<K, collcomm::kind::reduce>)
        collcomm::reduce<A>(comm, send, recv, c.count, make_op<Op>(c.scalar), c.root);
      else if constexpr (std::is_same_v<K, collcomm::kind::all_to_all>)
        collcomm::all_to_all<A>(comm, send, recv, c.count);
      else if constexpr (std::is_same_v<K, collcomm::kind::gather>)
        collcomm::gather<A>(comm, send, recv, c.count, c.root);
      else if constexpr (std::is_same_v<K, collcomm::kind::scatter>)
        collcomm::scatter<A>(comm, send, recv, c.count, c.root);
      else
        collcomm::send_recv<A>(comm, send, recv, c.count, a.send_peer, a.recv_peer);
    }
    progress[static_cast<std::size_t>(r)] = static_cast<int>(calls.size());
  });
}

// ---- the composition under test, at run time --------------------------------------------------

struct composition {
  kind_id kind;
  const char* kind_name;
  const char* algo_name;
  type_desc type;
  op_id op;
  bool in_place_ok;  // collcomm::supports_in_place<A> (one_shot refuses in-place calls)
  runner_fn run;
};

struct totals {
  long compositions = 0;  // (kind, algorithm, element, op)
  long batches = 0;       // worlds
  long calls = 0;         // collective calls (each on every rank)
  long in_place_calls = 0;
  long elements = 0;     // output elements checked
  long exact_float = 0;  // floating-point reduced elements checked with tolerance 0
  long failed_calls = 0;
  long messages = 0;              // failure messages printed
  double run_s = 0, check_s = 0;  // seconds in the collectives (with world setup) and in the checks
};

inline constexpr int max_messages_per_call = 3;
inline constexpr long max_messages = 60;       // per test case; the counts still cover everything
inline constexpr collcomm::index_t guard = 8;  // elements of poison on both sides of every buffer

// One buffer of one rank in one call, with its guard zones.
struct region {
  std::vector<unsigned char> mem;     // (guard + size + guard) elements
  std::vector<unsigned char> before;  // mem as it was just before the call
  collcomm::index_t size = 0;         // elements between the guards
  // Where the call's output lies in this region (elements from the start of the inner part), if
  // it does; and how many of its elements are significant.
  bool has_output = false;
  collcomm::index_t out_off = 0, out_elems = 0;
  const char* what = "";  // "input", "output", "in-place buffer"
  unsigned char* at(collcomm::index_t i, std::size_t esz) { return mem.data() + (guard + i) * esz; }
};

struct rank_case {
  std::vector<region> regions;  // 1 (in place) or 2 (input, output)
  std::vector<value> input;     // the significant input, decoded, as the call sees it
};

struct call_case {
  call_args args;
  call_shape shape;
  bool in_place = false;
  std::vector<rank_case> ranks;
};

inline void poison(const type_desc& t, unsigned char* p, collcomm::index_t n) {
  std::memset(p, t.is_int ? 0xA5 : 0xFF, n * t.size);  // 0xFF..: NaN in all six float formats
}

// ---- inputs -----------------------------------------------------------------------------------

// A random finite element of type t, any bits (copies and min/max must reproduce any value).
inline void random_finite(const type_desc& t, std::mt19937_64& rng, unsigned char* dst) {
  for (;;) {
    const std::uint64_t b = rng();
    std::memcpy(dst, &b, t.size);  // little endian: the low bytes
    if (t.is_int || std::isfinite(t.decode(dst).f)) return;
  }
}

inline double pick(std::mt19937_64& rng, std::initializer_list<double> xs) { return xs.begin()[rng() % xs.size()]; }

// Element `index` of rank `rank`'s input of a reducing call (see reference.hpp's tolerances: most
// float elements are drawn so that the result is exact in any order).
inline void reduction_input(const type_desc& t, op_id op, int nranks, std::uint64_t call_seed, int rank,
                            collcomm::index_t index, std::mt19937_64& rng, unsigned char* dst) {
  if (t.is_int) {
    std::uint64_t b = rng();
    switch (op) {
      case op_id::prod:
        if (rng() % 16 != 0) b |= 1;  // mostly odd: a product of evens is soon 0 modulo 2^bits
        break;
      case op_id::bit_and:
        b = ~(b & rng() & rng() & rng());
        break;  // bits mostly set
      case op_id::bit_or:
        b = b & rng() & rng() & rng();
        break;  // bits mostly clear
      default:
        break;
    }
    t.encode(0, b, dst);
    return;
  }
  if (op == op_id::min || op == op_id::max || op == op_id::max_magnitude) {
    random_finite(t, rng, dst);
    return;
  }
  // Whether element `index` is drawn on the exact grid is decided per element, the same on every
  // rank (the elements of one index reduce together).
  const std::uint64_t h = splitmix64(call_seed ^ (index * 0x9e3779b97f4a7c15ull));
  const bool grid = h % 4 != 3;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double x;
  if (op == op_id::prod) {
    if (grid) {
      const double sign = rng() & 1 ? -1.0 : 1.0;
      x = sign * pick(rng, {0.5, 1.0, 1.0, 2.0});
      // At most one rank per element gets an odd factor 3: the product's odd part stays 3 < 2^p.
      if ((h >> 8) % 2 == 0 && static_cast<int>((h >> 16) % static_cast<std::uint64_t>(nranks)) == rank) x *= 1.5;
    } else {
      x = (rng() & 1 ? -1.0 : 1.0) * (0.8 + 0.45 * unit(rng));
    }
  } else if (grid) {
    // Integers k in [-m, m] times the unit g: N * m <= 2^p keeps every partial sum exact; g puts
    // the values within about +-4.
    const double m = std::max(1.0, std::floor(std::ldexp(1.0, t.digits) / nranks));
    const double g = std::ldexp(1.0, 2 - static_cast<int>(std::ceil(std::log2(std::max(m, 1.0)))));
    std::uniform_int_distribution<std::int64_t> k(-static_cast<std::int64_t>(m), static_cast<std::int64_t>(m));
    x = static_cast<double>(k(rng)) * g;
  } else {
    x = -4.0 + 8.0 * unit(rng);
  }
  t.encode(x, 0, dst);
}

// ---- building a call --------------------------------------------------------------------------

inline const char* pattern_name(int pattern) {
  static const char* const names[] = {"shift +1", "shift -1", "chain (no wrap)", "random permutation", "self"};
  return names[pattern % 5];
}

inline void make_peers(int pattern, int n, std::mt19937_64& rng, std::vector<int>& send_peer,
                       std::vector<int>& recv_peer) {
  send_peer.assign(static_cast<std::size_t>(n), collcomm::no_peer);
  recv_peer.assign(static_cast<std::size_t>(n), collcomm::no_peer);
  std::vector<int> to(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    switch (pattern % 5) {
      case 0:
        to[static_cast<std::size_t>(r)] = (r + 1) % n;
        break;
      case 1:
        to[static_cast<std::size_t>(r)] = (r + n - 1) % n;
        break;
      case 2:
        to[static_cast<std::size_t>(r)] = r + 1 < n ? r + 1 : collcomm::no_peer;
        break;
      case 3:
        to[static_cast<std::size_t>(r)] = r;
        break;  // shuffled below
      default:
        to[static_cast<std::size_t>(r)] = r;
        break;
    }
  }
  if (pattern % 5 == 3) std::shuffle(to.begin(), to.end(), rng);
  for (int r = 0; r < n; ++r) {
    const int d = to[static_cast<std::size_t>(r)];
    send_peer[static_cast<std::size_t>(r)] = d;
    if (d != collcomm::no_peer) recv_peer[static_cast<std::size_t>(d)] = r;
  }
}

// The count that spans several slots on every channel (and several slices of ring all_reduce,
// which moves nranks slots per slice), capped so that the largest buffer stays near 4096 elements
// (the checks, not the collectives, are what costs time at that size).
inline collcomm::index_t large_count(kind_id k, int n, const config& cfg, std::size_t esz) {
  const std::size_t align = std::max<std::size_t>(1, 16 / esz);
  const std::size_t slot_elems = std::max(align, cfg.slot_bytes / esz / align * align);
  const bool whole = k == kind_id::all_reduce || k == kind_id::broadcast || k == kind_id::reduce;
  std::size_t c =
      (5 * static_cast<std::size_t>(cfg.channels) * slot_elems * (whole ? static_cast<std::size_t>(n) : 1)) / 2;
  const std::size_t per_peer = whole || k == kind_id::send_recv ? 1 : static_cast<std::size_t>(n);
  c = std::min<std::size_t>(c, 4096 / per_peer);
  return c + 3;  // not a multiple of anything
}

inline call_case make_call(const composition& comp, int n, const config& cfg, collcomm::index_t count,
                           bool want_in_place, int call_index, std::uint64_t call_seed) {
  const type_desc& t = comp.type;
  std::mt19937_64 rng(call_seed);
  call_case cc;
  cc.in_place = want_in_place;
  cc.args.count = count;
  cc.args.root = call_index % n;
  cc.args.scalar = t.is_int ? pick(rng, {1, 2, 3, 5, 7, 13}) : pick(rng, {0.5, -2, 0.25, 1.5, -0.75, 3});
  cc.shape = call_shape{comp.kind, n, count, cc.args.root, {}, {}};
  if (comp.kind == kind_id::send_recv) make_peers(call_index, n, rng, cc.shape.send_peer, cc.shape.recv_peer);
  cc.args.ranks.resize(static_cast<std::size_t>(n));
  cc.ranks.resize(static_cast<std::size_t>(n));
  const bool reduces = kind_reduces(comp.kind);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    rank_case& rc = cc.ranks[ur];
    rank_args& ra = cc.args.ranks[ur];
    if (comp.kind == kind_id::send_recv) {
      ra.send_peer = cc.shape.send_peer[ur];
      ra.recv_peer = cc.shape.recv_peer[ur];
    }
    const in_place_layout ip = in_place(cc.shape, r);
    const bool this_in_place = want_in_place && ip.possible;
    const collcomm::index_t in_elems = significant_input(cc.shape, r);
    auto make_region = [&](collcomm::index_t size, const char* what) {
      region g;
      g.size = size;
      g.what = what;
      g.mem.resize((size + 2 * guard) * t.size);
      poison(t, g.mem.data(), size + 2 * guard);
      return g;
    };
    collcomm::index_t send_off = 0;
    if (this_in_place) {
      rc.regions.push_back(make_region(ip.size, "in-place buffer"));
      send_off = ip.send_off;
      region& g = rc.regions[0];
      g.has_output = true;
      g.out_off = ip.recv_off;
      g.out_elems = significant_output(cc.shape, r);
    } else {
      rc.regions.push_back(make_region(input_size(cc.shape), "input"));
      rc.regions.push_back(make_region(output_size(cc.shape), "output"));
      region& o = rc.regions[1];
      o.has_output = true;
      o.out_off = 0;
      o.out_elems = significant_output(cc.shape, r);
    }
    // Inputs (only the significant part: root-only inputs elsewhere keep their poison).
    region& g0 = rc.regions[0];
    rc.input.resize(in_elems);
    for (collcomm::index_t i = 0; i < in_elems; ++i) {
      unsigned char* p = g0.at(send_off + i, t.size);
      if (reduces)
        reduction_input(t, comp.op, n, call_seed, r, i, rng, p);
      else
        random_finite(t, rng, p);
      rc.input[i] = t.decode(p);
    }
    ra.send = g0.at(send_off, t.size);
    ra.recv = this_in_place ? g0.at(g0.out_off, t.size) : rc.regions[1].at(0, t.size);
    for (region& g : rc.regions) g.before = g.mem;
  }
  return cc;
}

// ---- checking ---------------------------------------------------------------------------------

inline std::string describe(const composition& comp, int n, const config& cfg, const call_case& cc) {
  std::ostringstream s;
  s << comp.kind_name << " algorithm=" << comp.algo_name << " op=" << op_id_name(comp.op) << " type=" << comp.type.name
    << " N=" << n << " count=" << cc.args.count << " channels=" << cfg.channels << " slot_bytes=" << cfg.slot_bytes
    << " slots=" << cfg.slots << (cc.in_place ? " in-place" : " out-of-place");
  if (comp.kind == kind_id::broadcast || comp.kind == kind_id::reduce || comp.kind == kind_id::gather ||
      comp.kind == kind_id::scatter)
    s << " root=" << cc.args.root;
  if (comp.op == op_id::premul_sum) s << " scalar=" << cc.args.scalar;
  if (comp.kind == kind_id::send_recv) {
    s << " peers=[";
    const std::vector<int>& to = cc.shape.send_peer;
    for (std::size_t r = 0; r < to.size(); ++r) s << (r ? " " : "") << r << "->" << to[r];
    s << "]";
  }
  s << " (seed " << base_seed() << ")";
  return s.str();
}

// Prints one failure (up to max_messages per test case; the totals count every one).
inline void report(totals& tot, const std::string& msg) {
  if (tot.messages >= max_messages) return;
  FAIL_CHECK(msg);
  ++tot.messages;
}

// Checks one finished call; returns whether it passed.
inline bool check_call(const composition& comp, int n, const config& cfg, call_case& cc, totals& tot) {
  const type_desc& t = comp.type;
  long wrong = 0;
  std::vector<source> srcs;
  std::vector<value> terms;
  std::string where;
  for (int r = 0; r < n; ++r) {
    rank_case& rc = cc.ranks[static_cast<std::size_t>(r)];
    for (region& g : rc.regions) {
      const collcomm::index_t total = g.size + 2 * guard;
      for (collcomm::index_t k = 0; k < total; ++k) {
        const value got = t.decode(g.mem.data() + k * t.size);
        expectation e;
        const bool inner = k >= guard && k < guard + g.size;
        const collcomm::index_t i = k - guard;  // meaningful when inner
        const bool is_out = inner && g.has_output && i >= g.out_off && i < g.out_off + g.out_elems;
        if (is_out) {
          const collcomm::index_t oi = i - g.out_off;
          sources_of(cc.shape, r, oi, srcs);
          terms.clear();
          for (const source& s : srcs) terms.push_back(cc.ranks[static_cast<std::size_t>(s.rank)].input[s.index]);
          if (kind_reduces(comp.kind)) {
            e = reduce_reference(t, comp.op, terms.data(), static_cast<int>(terms.size()), cc.args.scalar);
            if (!e.exact_bits && e.tol == 0) ++tot.exact_float;
          } else {
            e.exact_bits = true;
            e.bits = terms[0].bits;
          }
          ++tot.elements;
        } else {
          e.exact_bits = true;
          e.bits = t.decode(g.before.data() + k * t.size).bits;
        }
        if (satisfies(e, got)) continue;
        ++wrong;
        if (wrong > max_messages_per_call) continue;
        std::ostringstream s;
        s << describe(comp, n, cfg, cc) << ": rank " << r << ", ";
        if (is_out)
          s << "output element " << (i - g.out_off);
        else if (!inner)
          s << g.what << " guard element "
            << (k < guard ? -static_cast<long>(guard - k) : static_cast<long>(k - guard - g.size))
            << (k < guard ? " (before)" : " (after the end)");
        else
          s << g.what << " element " << i << " (not an output of this rank: must stay untouched)";
        s << ": got " << show(t, got) << ", expected " << show(t, e);
        report(tot, s.str());
      }
    }
  }
  if (wrong != 0) {
    ++tot.failed_calls;
    std::ostringstream s;
    s << describe(comp, n, cfg, cc) << ": " << wrong << " wrong elements in all";
    report(tot, s.str());
  }
  return wrong == 0;
}

// ---- one composition through its plan ---------------------------------------------------------

inline void run_composition(const composition& comp, totals& tot) {
  const bool may_in_place = comp.in_place_ok && comp.kind != kind_id::all_to_all && comp.kind != kind_id::send_recv;
  std::uint64_t comp_seed = hash_str(base_seed(), comp.kind_name);
  comp_seed = hash_str(comp_seed, comp.algo_name);
  comp_seed = hash_str(comp_seed, comp.type.name);
  comp_seed = hash_str(comp_seed, op_id_name(comp.op));
  const int salt = static_cast<int>(comp_seed % 3);
  const std::vector<plan_entry> entries = plan(comp.type, comp.op, salt);
  if (!entries.empty()) ++tot.compositions;
  for (std::size_t ei = 0; ei < entries.size(); ++ei) {
    const plan_entry& pe = entries[ei];
    const int n = pe.nranks;
    const config& cfg = configs[pe.config];
    const std::uint64_t batch_seed = splitmix64(comp_seed ^ static_cast<std::uint64_t>(n * 131 + pe.config));
    const collcomm::index_t nn = static_cast<collcomm::index_t>(n);
    const collcomm::index_t counts[] = {0,      1,  nn - 1 == 0 ? 2 : nn - 1,
                                        nn + 1, 97, large_count(comp.kind, n, cfg, comp.type.size)};
    std::vector<call_case> cases;
    for (collcomm::index_t count : counts) {
      for (int place = 0; place < (may_in_place ? 2 : 1); ++place) {
        // The large count runs in one place per world size, alternating: it is what the checks spend
        // their time on, and the small counts cover both places at every N.
        if (count == counts[5] && may_in_place && place != static_cast<int>(ei % 2)) continue;
        const int idx = static_cast<int>(cases.size());
        cases.push_back(
            make_call(comp, n, cfg, count, place == 1, idx, splitmix64(batch_seed + static_cast<std::uint64_t>(idx))));
      }
    }
    // send_recv has no in-place variant: give it more peer patterns instead.
    if (!may_in_place)
      for (collcomm::index_t count :
           {nn + 2, collcomm::index_t{61}, large_count(comp.kind, n, cfg, comp.type.size) / 2}) {
        const int idx = static_cast<int>(cases.size());
        cases.push_back(
            make_call(comp, n, cfg, count, false, idx, splitmix64(batch_seed + static_cast<std::uint64_t>(idx))));
      }
    std::vector<call_args> calls;
    calls.reserve(cases.size());
    for (const call_case& c : cases) calls.push_back(c.args);
    std::vector<int> progress(static_cast<std::size_t>(n), 0);
    std::size_t done = cases.size();
    ++tot.batches;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comp.run(n, cfg, calls, progress);
    } catch (const std::exception& ex) {
      int failing = 0;
      if (const auto* ce = dynamic_cast<const collcomm::error*>(&ex);
          ce != nullptr && ce->rank() >= 0 && ce->rank() < n)
        failing = progress[static_cast<std::size_t>(ce->rank())];
      else
        failing = *std::min_element(progress.begin(), progress.end());
      done = static_cast<std::size_t>(*std::min_element(progress.begin(), progress.end()));
      std::ostringstream s;
      const std::size_t fi = std::min(static_cast<std::size_t>(failing), cases.size() - 1);
      s << describe(comp, n, cfg, cases[fi]) << ": threw: " << ex.what() << " (call " << fi
        << " of the batch; calls before " << done << " are checked)";
      ++tot.failed_calls;
      report(tot, s.str());
    }
    const auto t1 = std::chrono::steady_clock::now();
    tot.run_s += std::chrono::duration<double>(t1 - t0).count();
    for (std::size_t i = 0; i < done; ++i) {
      ++tot.calls;
      if (cases[i].in_place) ++tot.in_place_calls;
      check_call(comp, n, cfg, cases[i], tot);
    }
    tot.check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }
}

// ---- the compile-time lists -------------------------------------------------------------------

template <class K, class A, class T, class Op>
void run_one(totals& tot) {
  if constexpr (collcomm::valid_composition<K, A, collcomm::transport::host_shm, Op, T>) {
    const composition comp{kind_id_of<K>(),        K::name,        A::name,
                           make_type_desc<T>(),    op_id_of<Op>(), collcomm::supports_in_place<A>,
                           &run_batch<K, A, T, Op>};
    run_composition(comp, tot);
  }
}

// Under ThreadSanitizer (CI's tsan phase, which also sets COLLCOMM_TEST_QUICK) only the quick plan's
// elements and ops are compiled: the instrumented build of ~900 compositions would cost the CI
// more than the data races it can find in them, which do not depend on the element or the op.
#if defined(__SANITIZE_THREAD__)
#define COLLCOMM_TEST_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLLCOMM_TEST_TSAN_BUILD 1
#endif
#endif

#if defined(COLLCOMM_TEST_TSAN_BUILD)
using matrix_elements = type_list<float, __half, __nv_fp8_e4m3, std::int8_t, std::uint64_t>;
using float_elements = type_list<float, __half, __nv_fp8_e4m3>;
using integer_elements = type_list<std::int8_t, std::uint64_t>;
using reduction_ops = type_list<collcomm::op::sum, collcomm::op::avg, collcomm::op::premul_sum<double>,
                                collcomm::op::bit_xor, max_magnitude>;
#else
using matrix_elements = all_elements;
using float_elements = type_list<float, double, __half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2>;
using integer_elements = type_list<std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;
using reduction_ops = type_list<collcomm::op::sum, collcomm::op::prod, collcomm::op::min, collcomm::op::max,
                                collcomm::op::avg, collcomm::op::premul_sum<double>, collcomm::op::bit_and,
                                collcomm::op::bit_or, collcomm::op::bit_xor, max_magnitude>;
#endif

// Every algorithm with a schedule for K, every element of Elements, every op (reducing kinds) —
// pruned by valid_composition, as the library's static_asserts are.
template <class K, class Elements = matrix_elements>
totals run_kind() {
  totals tot;
  const auto t0 = std::chrono::steady_clock::now();
  INFO("seed ", base_seed(), " (set COLLCOMM_TEST_SEED to replay)");
  const std::string kind_name = K::name;
  MESSAGE(kind_name, ": seed ", base_seed(),
          std::string(env_flag("COLLCOMM_TEST_QUICK") ? " (quick plan)" : " (full plan)"));
  for_each_schedule([&]<class K2, class A>(std::type_identity<K2>, std::type_identity<A>) {
    if constexpr (std::is_same_v<K2, K>) {
      const totals before = tot;
      for_each_type(Elements{}, [&]<class T>(std::type_identity<T>) {
        if constexpr (K::reduces)
          for_each_type(reduction_ops{}, [&]<class Op>(std::type_identity<Op>) { run_one<K, A, T, Op>(tot); });
        else
          run_one<K, A, T, collcomm::op::none>(tot);
      });
      MESSAGE(kind_name, " / ", std::string(A::name), ": ", tot.compositions - before.compositions, " compositions, ",
              tot.calls - before.calls, " calls (", tot.in_place_calls - before.in_place_calls, " in place), ",
              tot.elements - before.elements, " output elements checked, ", tot.failed_calls - before.failed_calls,
              " failed calls");
    }
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(kind_name, " total: ", tot.compositions, " compositions, ", tot.batches, " worlds, ", tot.calls, " calls, ",
          tot.elements, " elements (", tot.exact_float, " float results held exact), ", tot.failed_calls,
          " failed calls; ", secs, " s (collectives ", tot.run_s, " s, checks ", tot.check_s, " s)");
  CHECK(tot.failed_calls == 0);
  CHECK(tot.compositions > 0);
  return tot;
}

}  // namespace collcomm_test::host_matrix
