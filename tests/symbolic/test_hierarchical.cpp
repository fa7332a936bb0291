// hierarchical<Intra, Inter> through the symbolic executor: every H <= 8 hosts x L <= 8 ranks per
// host, hosts of unequal sizes, hosts whose ranks are not contiguous in rank order (host_of = r % H,
// shuffled layouts), counts 0, 1, N-1, N, N+1, 97 and a large one, channels 1 and 2, FIFO depth 1
// and 2 and both progress models, in place and out of place; and the elements each rank sends to
// other hosts against bytes_model.hpp, next to a flat ring's.
#include "bytes_model.hpp"

#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/compose.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace collcomm_symbolic;
namespace kind = collcomm::kind;
using collcomm::algo::hierarchical;
using collcomm::algo::ring;
using collcomm::algo::tree;

// A layout: per rank its host id.
struct layout {
  std::vector<std::uint64_t> ids;
  std::string name;
};

// Hosts of the given sizes; placement 0: each host's ranks contiguous; 1: dealt round robin
// (host_of = r % H when sizes are equal); 2: shuffled with `rng`.
layout make_layout(const std::vector<int>& sizes, int placement, std::mt19937& rng) {
  layout l;
  std::vector<std::uint64_t> ids;
  if (placement == 1) {
    std::vector<int> left = sizes;
    for (bool any = true; any;) {
      any = false;
      for (size_t h = 0; h < left.size(); ++h)
        if (left[h] > 0) {
          --left[h];
          ids.push_back(h + 100);
          any = true;
        }
    }
  } else {
    for (size_t h = 0; h < sizes.size(); ++h)
      for (int k = 0; k < sizes[h]; ++k) ids.push_back(h + 100);
    if (placement == 2) std::shuffle(ids.begin(), ids.end(), rng);
  }
  l.ids = ids;
  l.name = "sizes {";
  for (size_t h = 0; h < sizes.size(); ++h) l.name += (h ? "," : "") + std::to_string(sizes[h]);
  l.name += placement == 0 ? "} contiguous" : placement == 1 ? "} round robin" : "} shuffled";
  return l;
}

// The layouts of the sweep: every H x L in 1..8 with equal hosts (contiguous, round robin or
// shuffled, in turn), and hosts of unequal sizes, fixed and random.
std::vector<layout> sweep_layouts(std::mt19937& rng) {
  std::vector<layout> out;
  for (int H = 1; H <= 8; ++H)
    for (int L = 1; L <= 8; ++L)
      out.push_back(make_layout(std::vector<int>(static_cast<size_t>(H), L), (H + L) % 3, rng));
  const std::vector<std::vector<int>> fixed = {{3, 1}, {1, 3},    {1, 4, 2},   {2, 5, 1, 3},
                                               {8, 1}, {1, 8, 8}, {7, 8, 6, 5}};
  for (size_t k = 0; k < fixed.size(); ++k) out.push_back(make_layout(fixed[k], static_cast<int>(k % 3), rng));
  std::uniform_int_distribution<int> hosts(2, 8), size(1, 8);
  for (int k = 0; k < 12; ++k) {
    std::vector<int> sizes(static_cast<size_t>(hosts(rng)));
    for (int& s : sizes) s = size(rng);
    out.push_back(make_layout(sizes, k % 3, rng));
  }
  return out;
}

template <class K, class A>
void sweep_one(const std::vector<layout>& layouts, int& runs, int& failures) {
  int variant = 0;
  for (const layout& l : layouts) {
    const int n = static_cast<int>(l.ids.size());
    std::vector<index_t> counts = {0,
                                   1,
                                   static_cast<index_t>(n - 1),
                                   static_cast<index_t>(n),
                                   static_cast<index_t>(n + 1),
                                   97,
                                   n <= 16 ? index_t{1031} : index_t{263}};
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (index_t count : counts) {
      ++variant;
      config c;
      c.nranks = n;
      c.count = count;
      c.host_ids = l.ids;
      c.channels = 1 + variant % 2;
      c.slots = variant % 3 == 0 ? 1 : 2;
      c.atomic_ops = variant % 4 == 1 && c.slots >= 2;
      c.slot_elems = variant % 2 ? 8 : 5;
      if (variant % 5 == 0) {
        c.slot_elems = 8;
        c.align_elems = 4;
      }
      c.in_place = variant % 7 < 3;
      if constexpr (K::rooted) c.root = variant % n;
      ++runs;
      const report r = verify<K, A>(c);
      if (!r.ok) {
        ++failures;
        const std::string msg = l.name + ": " + r.message;
        if (failures <= 3) FAIL_CHECK(msg);
      }
    }
  }
}

template <class A, class... Ks>
void sweep_algorithm() {
  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  const std::vector<layout> layouts = sweep_layouts(rng);
  (
      [&] {
        if constexpr (collcomm::algorithm_for<A, Ks>) {
          int runs = 0, failures = 0;
          sweep_one<Ks, A>(layouts, runs, failures);
          const std::string summary = std::string(A::name) + " " + Ks::name + ": " + std::to_string(runs) +
                                      " configurations verified (layout seed " + std::to_string(seed) + "), " +
                                      std::to_string(failures) + " failed";
          MESSAGE(summary);
          CHECK(failures == 0);
        }
      }(),
      ...);
}

}  // namespace

TEST_CASE("symbolic hierarchical sweep ring-ring") {
  sweep_algorithm<hierarchical<ring, ring>, kind::all_reduce, kind::reduce_scatter, kind::all_gather,
                  kind::broadcast>();
}
TEST_CASE("symbolic hierarchical sweep tree-ring") {
  sweep_algorithm<hierarchical<tree, ring>, kind::all_reduce, kind::reduce_scatter, kind::all_gather,
                  kind::broadcast>();
}
TEST_CASE("symbolic hierarchical sweep ring-tree") {
  sweep_algorithm<hierarchical<ring, tree>, kind::all_reduce, kind::broadcast>();
}

TEST_CASE("symbolic hierarchical: which kinds each composition serves") {
  static_assert(collcomm::algorithm_for<hierarchical<ring, ring>, kind::all_reduce>);
  static_assert(collcomm::algorithm_for<hierarchical<ring, ring>, kind::reduce_scatter>);
  static_assert(collcomm::algorithm_for<hierarchical<ring, ring>, kind::all_gather>);
  static_assert(collcomm::algorithm_for<hierarchical<ring, ring>, kind::broadcast>);
  static_assert(!collcomm::algorithm_for<hierarchical<ring, ring>, kind::reduce>);
  static_assert(collcomm::algorithm_for<hierarchical<tree, ring>, kind::reduce_scatter>);
  static_assert(!collcomm::algorithm_for<hierarchical<ring, tree>, kind::reduce_scatter>);
  static_assert(!collcomm::algorithm_for<hierarchical<ring, tree>, kind::all_gather>);
  static_assert(!collcomm::valid_composition<kind::all_reduce, hierarchical<ring, ring>, collcomm::transport::host_shm,
                                             collcomm::op::bit_and, float>);
  static_assert(
      collcomm::valid_composition<kind::all_reduce, hierarchical<tree, ring>,
                                  collcomm::transport::net<collcomm::transport::socket>, collcomm::op::sum, float>);
  CHECK(std::string(hierarchical<ring, tree>::name) == "hierarchical<ring,tree>");
}

namespace {

// Cross-host elements of hierarchical<Intra, Inter> for kind K against bytes_model.hpp, over the
// layouts; returns the failures.
template <class K, class A>
int cross_host_kind(const std::vector<layout>& layouts) {
  int failures = 0, checked = 0;
  for (const layout& l : layouts)
    for (index_t count : {index_t{1}, index_t{97}, index_t{4099}, index_t{1} << 16})
      for (int ch : {1, 2})
        for (index_t align : {index_t{1}, index_t{4}}) {
          config c;
          c.nranks = static_cast<int>(l.ids.size());
          c.count = count;
          c.host_ids = l.ids;
          c.channels = ch;
          c.slot_elems = count > 4099 ? 4096 : 64;
          c.align_elems = align;
          c.root = c.nranks / 2;
          const bytes_expectation e = expected_cross_host_bytes(A::name, K::name, c);
          REQUIRE(e.known);
          const report r = measure<K, A>(c);
          ++checked;
          const std::string why = r.ok ? check_cross_host_bytes(e, r) : r.message;
          if (!why.empty() && ++failures <= 3) {
            const std::string msg = std::string(A::name) + " " + K::name + " " + l.name +
                                    " count=" + std::to_string(count) + " channels=" + std::to_string(ch) +
                                    " align=" + std::to_string(align) + ": " + why;
            FAIL_CHECK(msg);
          }
        }
  const std::string summary = std::string(A::name) + " " + K::name + ": " + std::to_string(checked) +
                              " cross-host counts checked, " + std::to_string(failures) + " off";
  MESSAGE(summary);
  return failures;
}

}  // namespace

TEST_CASE("symbolic hierarchical bytes across hosts") {
  std::mt19937 rng(12345);
  const std::vector<layout> layouts = sweep_layouts(rng);
  using rr = hierarchical<ring, ring>;
  CHECK(cross_host_kind<kind::all_reduce, rr>(layouts) == 0);
  CHECK(cross_host_kind<kind::reduce_scatter, rr>(layouts) == 0);
  CHECK(cross_host_kind<kind::all_gather, rr>(layouts) == 0);
  CHECK(cross_host_kind<kind::broadcast, rr>(layouts) == 0);
  CHECK(cross_host_kind<kind::all_reduce, hierarchical<ring, tree>>(layouts) == 0);
  CHECK(cross_host_kind<kind::broadcast, hierarchical<ring, tree>>(layouts) == 0);
  CHECK(cross_host_kind<kind::all_reduce, hierarchical<tree, ring>>(layouts) == 0);
}

// The figure the schedule is for: 4 hosts x 8 ranks, 1 Mi elements. Hierarchical all_reduce sends
// 2(H-1)/H * C/L per rank across hosts; a flat ring sends 2(N-1)/N * C per rank, all of it across
// hosts on the 4 ranks at a host's edge when hosts are contiguous, and on every rank when they are
// dealt round robin.
TEST_CASE("symbolic hierarchical bytes: all_reduce across hosts against a flat ring") {
  std::mt19937 rng(1);
  for (int placement : {0, 1}) {
    config c;
    c.host_ids = make_layout({8, 8, 8, 8}, placement, rng).ids;
    c.nranks = 32;
    c.count = index_t{1} << 20;
    c.channels = 2;
    c.slot_elems = index_t{1} << 12;
    c.align_elems = 16;
    const report h = measure<kind::all_reduce, hierarchical<ring, ring>>(c);
    const report f = measure<kind::all_reduce, ring>(c);
    const double C = static_cast<double>(c.count), ideal = 2.0 * 3 / 4 * C / 8, flat = 2.0 * 31 / 32 * C;
    const std::string figures = std::string(placement ? "round robin" : "contiguous") +
                                " hosts 4 x 8, all_reduce of 1 Mi elements, elements sent across hosts per rank: "
                                "hierarchical<ring,ring> max " +
                                std::to_string(h.max_cross_host()) + " (model " + std::to_string(ideal) +
                                "), flat ring max " + std::to_string(f.max_cross_host()) + " mean " +
                                std::to_string(f.mean_cross_host());
    MESSAGE(figures);
    CHECK(h.ok);
    CHECK(static_cast<double>(h.max_cross_host()) <= ideal * 1.001);
    CHECK(h.mean_cross_host() == doctest::Approx(2.0 * 3 * C / 32));
    CHECK(static_cast<double>(f.max_cross_host()) == doctest::Approx(flat).epsilon(0.001));
    CHECK(f.max_cross_host() > 10 * h.max_cross_host());
  }
}
