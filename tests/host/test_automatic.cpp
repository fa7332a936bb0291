// algo::automatic: which arm a call takes (chosen_arm over made-up worlds: sizes at the bounds,
// ranks, processes and their windows, hosts, GPUs, in place, transports that refuse an arm), and
// the arms themselves run through the host correctness matrix (matrix_driver.hpp: random data,
// poisoned outputs and guard zones, every element checked) with a table that sends the counts of
// each kind to different algorithms and tunings, capped channels and slot bytes included, and with
// the host's own table (collcomm/tables/host_shm.hpp).
#include "matrix_driver.hpp"

#include <collcomm/host.hpp>
#include <collcomm/net.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>

namespace {

namespace cc = collcomm;
using cc::rule;
using cc::when;
namespace kind = cc::kind;
namespace algo = cc::algo;
using simple = cc::protocol::simple;

// A table with a rule on every axis of `when`.
using probe_table = cc::rule_table<
    rule<kind::all_reduce, when{.max_bytes = 64}, algo::recursive_doubling, cc::tuning<simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 1024, .min_ranks = 3}, algo::one_shot>,
    rule<kind::all_reduce, when{.max_bytes = 1 << 20, .world = cc::world_kind::processes}, algo::two_shot>,
    rule<kind::all_reduce, when{.min_hosts = 2}, algo::hierarchical<algo::ring, algo::ring>>,
    rule<kind::all_reduce, when{.min_ranks_per_gpu = 2, .max_gpus = 1}, algo::tree, cc::tuning<cc::protocol::ll, 4>>,
    rule<kind::reduce_scatter, when{}, algo::direct>,
    rule<kind::all_gather, when{.max_bytes = 128}, algo::ring, cc::tuning<simple, 2, 4096>>>;

template <class K, class Tr = cc::transport::host_shm, class T = float, class Op = cc::op::sum>
std::string arm(const cc::world_facts& f, std::uint64_t count, bool in_place = false) {
  return cc::chosen_arm<K, probe_table, Tr, Op, T>(f, count, in_place);
}

cc::world_facts threads(int n) {
  cc::world_facts f;
  f.ranks = n;
  f.channels = 2;
  f.slot_bytes = 4096;
  return f;
}

}  // namespace

TEST_CASE("automatic: the arm a call takes") {
  const cc::world_facts t4 = threads(4);
  SUBCASE("bytes: each bound is inclusive, rules are tried in order") {
    CHECK(arm<kind::all_reduce>(t4, 16) == "recursive_doubling (simple, channels 1)");
    CHECK(arm<kind::all_reduce>(t4, 17) == "one_shot (simple)");
    CHECK(arm<kind::all_reduce>(t4, 256) == "one_shot (simple)");
    CHECK(arm<kind::all_reduce>(t4, 257) == "ring (simple)");  // no rule: the classic algorithm
    CHECK(arm<kind::all_reduce, cc::transport::host_shm, double>(t4, 8) == "recursive_doubling (simple, channels 1)");
    CHECK(arm<kind::all_reduce, cc::transport::host_shm, double>(t4, 9) == "one_shot (simple)");
    CHECK(arm<kind::all_reduce, cc::transport::host_shm, std::int8_t, cc::op::bit_xor>(t4, 64) ==
          "recursive_doubling (simple, channels 1)");
  }
  SUBCASE("ranks") {
    CHECK(arm<kind::all_reduce>(threads(2), 100) == "ring (simple)");
    CHECK(arm<kind::all_reduce>(threads(3), 100) == "one_shot (simple)");
  }
  SUBCASE("in place: an arm that cannot run in place is passed over") {
    CHECK(arm<kind::all_reduce>(t4, 100, true) == "ring (simple)");
    CHECK(arm<kind::all_reduce>(t4, 100, false) == "one_shot (simple)");
  }
  SUBCASE("processes: a direct arm only where the call fits the window") {
    cc::world_facts p = t4;
    p.processes = true;
    p.window_bytes = 4096;
    p.window_sums = true;  // the host's: input (64-byte aligned) and output share the window
    CHECK(arm<kind::all_reduce>(p, 500) == "two_shot (simple)");  // 2048 + 2000 bytes
    CHECK(arm<kind::all_reduce>(p, 512) == "two_shot (simple)");  // 2048 + 2048: just fits
    CHECK(arm<kind::all_reduce>(p, 513) == "ring (simple)");      // 2112 + 2052 > 4096
    CHECK(arm<kind::all_reduce>(p, 100) == "one_shot (simple)");
    p.window_sums = false;  // the GPU's: a window each
    CHECK(arm<kind::all_reduce>(p, 1024) == "two_shot (simple)");
    CHECK(arm<kind::all_reduce>(p, 1025) == "ring (simple)");
    // reduce_scatter's input is n blocks: 4 x 300 x 4 bytes does not fit with its output.
    CHECK(arm<kind::reduce_scatter>(p, 200) == "direct (simple)");
    CHECK(arm<kind::reduce_scatter>(p, 300) == "ring (simple)");
    CHECK(arm<kind::reduce_scatter>(t4, 1 << 20) == "direct (simple)");  // threads: no window
  }
  SUBCASE("hosts and GPUs") {
    cc::world_facts h = t4;
    h.hosts = 2;
    CHECK(arm<kind::all_reduce>(h, 5000) == "hierarchical<ring,ring> (simple)");
    cc::world_facts g = threads(8);
    g.ranks_per_gpu = 8;
    g.gpus = 1;
    g.channels = 16;
    CHECK(arm<kind::all_reduce, cc::transport::nvlink>(g, 5000) == "tree (ll, channels 4)");
    g.channels = 2;  // the arm's 4 channels, capped to the world's
    CHECK(arm<kind::all_reduce, cc::transport::nvlink>(g, 5000) == "tree (ll, channels 2)");
    g.ranks_per_gpu = 1;
    g.gpus = 8;
    CHECK(arm<kind::all_reduce, cc::transport::nvlink>(g, 5000) == "ring (simple)");
  }
  SUBCASE("a transport that cannot run an arm: the rule is passed over") {
    // net carries messages only: no direct algorithm.
    CHECK(arm<kind::all_reduce, cc::transport::net<cc::transport::socket>>(t4, 100) == "ring (simple)");
    CHECK(arm<kind::reduce_scatter, cc::transport::net<cc::transport::socket>>(t4, 100) == "ring (simple)");
    CHECK(arm<kind::all_reduce, cc::transport::net<cc::transport::socket>>(t4, 16) ==
          "recursive_doubling (simple, channels 1)");
  }
  SUBCASE("kinds without a rule take their classic algorithm") {
    CHECK(arm<kind::all_gather>(t4, 32) == "ring (simple, channels 2, slot_bytes 4096)");
    CHECK(arm<kind::all_gather>(t4, 33) == "ring (simple)");
    CHECK(arm<kind::broadcast>(t4, 1) == "ring (simple)");
    CHECK(arm<kind::all_to_all>(t4, 1) == "pairwise (simple)");
    CHECK(arm<kind::gather>(t4, 1) == "linear (simple)");
    CHECK(arm<kind::send_recv>(t4, 1) == "p2p (simple)");
  }
  SUBCASE("the default tables") {
    // Their rules change when bench/tune.py rewrites them: what is fixed is which table a transport
    // takes (the host's runs through the matrix below).
    static_assert(std::is_same_v<cc::default_table_for<cc::transport::host_shm>::type, cc::tables::host_shm>);
    static_assert(std::is_same_v<cc::default_table_for<cc::transport::nvlink>::type, cc::tables::nvlink>);
    static_assert(std::is_same_v<cc::default_table_for<cc::transport::pcie_staged>::type, cc::tables::pcie_staged>);
    // tables.hpp asserts that every arm of a shipped table runs over its transport; the predicate:
    static_assert(cc::detail::every_arm_runs<cc::transport::host_shm>(probe_table{}));
    static_assert(!cc::detail::every_arm_runs<cc::transport::net<cc::transport::socket>>(probe_table{}));
    // pcie_staged's rules were swept with threads on one GPU sharing its link: processes, and
    // ranks on GPUs of their own, take the classic ring; the table's worlds take its arms (a small
    // message there never takes ring with simple).
    cc::world_facts one_gpu = t4;
    one_gpu.gpus = 1;
    one_gpu.ranks_per_gpu = 4;
    cc::world_facts procs = one_gpu;
    procs.processes = true;
    cc::world_facts four_gpus = t4;
    four_gpus.gpus = 4;
    four_gpus.ranks_per_gpu = 1;
    for (std::uint64_t count : {2ull, 5000ull, 1ull << 22}) {
      CAPTURE(count);
      CHECK(cc::chosen_arm<kind::all_reduce, void, cc::transport::pcie_staged, cc::op::sum, float>(procs, count) ==
            "ring (simple)");
      CHECK(cc::chosen_arm<kind::all_reduce, void, cc::transport::pcie_staged, cc::op::sum, float>(four_gpus, count) ==
            "ring (simple)");
    }
    CHECK(cc::chosen_arm<kind::all_reduce, void, cc::transport::pcie_staged, cc::op::sum, float>(one_gpu, 2) !=
          "ring (simple)");
    CHECK(cc::chosen_arm<kind::all_reduce, void, cc::transport::host_shm, cc::op::sum, float>(t4, 1000) ==
          cc::chosen_arm<kind::all_reduce, cc::tables::host_shm, cc::transport::host_shm, cc::op::sum, float>(t4, 1000));
  }
}

namespace {

using namespace collcomm_test;
using namespace collcomm_test::host_matrix;

// Every kind's counts of the matrix (0, 1, N-1, N+1, 97 and a large one; N = 1 to 16) spread over
// several arms. The tree arm asks for 8 channels and 1 MiB slots, more than any matrix world
// has: automatic runs it with the world's.
using mixed_table = cc::rule_table<
    rule<kind::all_reduce, when{.max_bytes = 8}, algo::recursive_doubling, cc::tuning<simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 256, .min_ranks = 3}, algo::one_shot>,
    rule<kind::all_reduce, when{.max_bytes = 512}, algo::tree, cc::tuning<simple, 8, 1 << 20>>,
    rule<kind::all_reduce, when{.min_ranks = 2, .max_ranks = 5}, algo::two_shot>,
    rule<kind::reduce_scatter, when{.max_bytes = 64}, algo::direct>,
    rule<kind::reduce_scatter, when{.min_ranks = 4}, algo::ring, cc::tuning<simple, 1, 64>>,
    rule<kind::all_gather, when{.max_bytes = 64}, algo::recursive_doubling>,
    rule<kind::all_gather, when{}, algo::direct, cc::tuning<simple, 2>>,
    rule<kind::broadcast, when{.max_bytes = 256}, algo::tree, cc::tuning<simple, 1, 64>>,
    rule<kind::reduce, when{.min_ranks = 3}, algo::tree>,
    rule<kind::all_to_all, when{.max_bytes = 32}, algo::direct>>;
template <class K, class Table, class T, class Op>
void run_mixed(totals& tot) {
  if constexpr (cc::reduction_op<Op, T> && (!cc::op_integer_only<Op> || cc::is_integer_element<T>)) {
    const composition comp{kind_id_of<K>(),     K::name,        "automatic",
                           make_type_desc<T>(), op_id_of<Op>(), true,
                           &run_batch<K, algo::automatic<Table>, T, Op>};
    run_composition(comp, tot);
  }
}

template <class K, class Table = mixed_table>
void run_kind_mixed() {
  totals tot;
  using elements = type_list<float, __nv_bfloat16, std::int32_t>;
  for_each_type(elements{}, [&]<class T>(std::type_identity<T>) {
    if constexpr (K::reduces) {
      for_each_type(type_list<cc::op::sum, cc::op::avg, cc::op::max, cc::op::bit_xor>{},
                    [&]<class Op>(std::type_identity<Op>) { run_mixed<K, Table, T, Op>(tot); });
    } else {
      run_mixed<K, Table, T, cc::op::none>(tot);
    }
  });
  MESSAGE(std::string(K::name), " / automatic: ", tot.compositions, " compositions, ", tot.calls, " calls (", tot.in_place_calls,
          " in place), ", tot.elements, " output elements checked, ", tot.failed_calls, " failed calls");
  CHECK(tot.failed_calls == 0);
  CHECK(tot.calls > 0);
}

}  // namespace

// The algorithms the matrix's f32 calls of kind K reach through mixed_table: its counts at its
// full plan's world sizes, in and out of place, on each world's option set.
template <class K>
std::set<std::string> reached() {
  std::set<std::string> algos;
  for (int n : {1, 2, 3, 5, 8})
    for (const config& cfg : configs) {
      cc::world_facts f;
      f.ranks = n;
      f.channels = cfg.channels;
      f.slot_bytes = cfg.slot_bytes;
      const cc::index_t nn = static_cast<cc::index_t>(n);
      for (cc::index_t count : {cc::index_t{0}, cc::index_t{1}, nn == 1 ? 2 : nn - 1, nn + 1, cc::index_t{97},
                                large_count(kind_id_of<K>(), n, cfg, sizeof(float))})
        for (bool in_place : {false, true}) {
          const std::string a = cc::chosen_arm<K, mixed_table, cc::transport::host_shm, cc::op::sum, float>(f, count, in_place);
          algos.insert(a.substr(0, a.find(' ')));
        }
    }
  return algos;
}

TEST_CASE("automatic: the arms of a mixed table, through the host matrix") {
  MESSAGE("seed ", base_seed(), " (set COLLCOMM_TEST_SEED to replay)");
  // The matrix's counts reach every arm of the table.
  CHECK(reached<kind::all_reduce>() == std::set<std::string>{"recursive_doubling", "one_shot", "tree", "two_shot", "ring"});
  CHECK(reached<kind::reduce_scatter>() == std::set<std::string>{"direct", "ring"});
  CHECK(reached<kind::all_gather>() == std::set<std::string>{"recursive_doubling", "direct"});
  CHECK(reached<kind::broadcast>() == std::set<std::string>{"tree", "ring"});
  CHECK(reached<kind::reduce>() == std::set<std::string>{"tree", "ring"});
  CHECK(reached<kind::all_to_all>() == std::set<std::string>{"direct", "pairwise"});
  run_kind_mixed<kind::all_reduce>();
  run_kind_mixed<kind::reduce_scatter>();
  run_kind_mixed<kind::all_gather>();
  run_kind_mixed<kind::broadcast>();
  run_kind_mixed<kind::reduce>();
  run_kind_mixed<kind::all_to_all>();
  run_kind_mixed<kind::gather>();
}

TEST_CASE("automatic: the host's own table, through the host matrix") {
  MESSAGE("seed ", base_seed(), " (set COLLCOMM_TEST_SEED to replay)");
  run_kind_mixed<kind::all_reduce, void>();
  run_kind_mixed<kind::reduce_scatter, void>();
  run_kind_mixed<kind::broadcast, void>();
}
