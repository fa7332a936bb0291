// transport::pcie on the GPU (label gpu): connections staged through pinned host memory
// (gpu::placement::host), forced on the one GPU of the test machine so that every message goes
// GPU -> host -> GPU over PCIe: where the connections lie, large slots and many channels, the ll
// protocol, the host API through communicator<transport::pcie_staged> for every kind and with
// algo::automatic over its table, and direct algorithms through communicator<transport::pcie> on
// the P2P path. Every FIFO schedule staged:
// test_gpu_pcie_reducing.cu, test_gpu_pcie_moving.cu, test_gpu_pcie_rooted.cu; faults over both
// transports: test_gpu_fault.cu. Fresh random inputs each run (the seed is printed with every
// failure), outputs poisoned, every element checked against an exact reference.
#include "schedule_cases.cuh"

#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/gpu.hpp>

#include <memory>
#include <set>
#include <string>

using namespace collcomm;
using namespace collcomm_gpu_test;

TEST_CASE("staged pcie: placement::host puts the connections in mapped host memory") {
  gpu::world w(2, {}, staged_options());
  const transport::handle_fields h = w.fields(0);
  CHECK_FALSE(w.scope_is_device());  // host memory is on the other side of PCIe: system scope
  transport::fifo_view f{};
  REQUIRE_EQ(cudaMemcpy(&f, h.fifos + 1, sizeof f, cudaMemcpyDeviceToHost), cudaSuccess);  // (channel 0, src 0, dst 1)
  cudaPointerAttributes attr{};
  REQUIRE_EQ(cudaPointerGetAttributes(&attr, f.data), cudaSuccess);
  CHECK_EQ(attr.type, cudaMemoryTypeHost);
  REQUIRE_EQ(cudaPointerGetAttributes(&attr, f.tail), cudaSuccess);
  CHECK_EQ(attr.type, cudaMemoryTypeHost);
  // One GPU reaches itself: P2P (transport::pcie) fits; staging is the user's explicit choice here.
  CHECK(transport::all_peers_reachable({0, 0}));
}

TEST_CASE("staged pcie: large slots, many channels, 4 ranks (the bench's shape)") {
  gpu::options o = staged_options(16);
  o.slot_bytes = std::size_t{256} << 10;
  gpu::world w(4, {}, o);
  for (index_t count : {index_t{1} << 20, (index_t{3} << 20) + 7}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{4, count, 0, false}, op::sum{}, false, 3)),
             "");
    CHECK_EQ((run_case<kind::all_gather, algo::ring, float>(w, case_config{4, count, 0, false}, op::none{}, false, 3)),
             "");
  }
}

TEST_CASE("staged pcie: the ll protocol through host memory") {
  using ll = tuning<protocol::ll>;
  using staged = transport::pcie_staged;
  for (int n : {2, 4}) {
    gpu::world w(n, {}, staged_options());
    for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
      INFO("n=", n, " count=", count, " seed=", fresh_seed());
      CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, staged, ll>(
                   w, case_config{n, count, 0, false}, op::sum{}, 20)),
               "");
      CHECK_EQ((run_api_case<kind::all_reduce, algo::tree, float, op::sum, staged, ll>(
                   w, case_config{n, count, 0, false}, op::sum{}, 20)),
               "");
      CHECK_EQ((run_api_case<kind::all_gather, algo::ring, float, op::none, staged, ll>(
                   w, case_config{n, count, 0, false}, op::none{}, 20)),
               "");
    }
  }
}

TEST_CASE("communicator<transport::pcie_staged>: the host API over staged connections, every kind") {
  for (int n : {1, 3, 4}) {
    gpu::world w(n, {}, staged_options());
    for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
      for (int place = 0; place < 2; ++place) {
        const bool ip = place == 1;
        INFO("n=", n, " count=", count, " in_place=", ip, " seed=", fresh_seed());
        CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)),
                 "");
        CHECK_EQ((run_api_case<kind::all_reduce, algo::tree, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)),
                 "");
        CHECK_EQ((run_api_case<kind::all_reduce, algo::recursive_doubling, float>(w, case_config{n, count, 0, ip},
                                                                                  op::max{}, 20)),
                 "");
        CHECK_EQ(
            (run_api_case<kind::reduce_scatter, algo::ring, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)),
            "");
        CHECK_EQ((run_api_case<kind::all_gather, algo::ring, float>(w, case_config{n, count, 0, ip}, op::none{}, 20)),
                 "");
        CHECK_EQ(
            (run_api_case<kind::broadcast, algo::ring, float>(w, case_config{n, count, n - 1, ip}, op::none{}, 20)),
            "");
        CHECK_EQ((run_api_case<kind::reduce, algo::ring, float>(w, case_config{n, count, n - 1, ip}, op::sum{}, 20)),
                 "");
        if (!ip) {
          CHECK_EQ((run_api_case<kind::all_to_all, algo::pairwise, float>(w, case_config{n, count, 0, false},
                                                                          op::none{}, 20)),
                   "");
          CHECK_EQ(
              (run_api_case<kind::send_recv, algo::p2p, float>(w, case_config{n, count, 0, false}, op::none{}, 20)),
              "");
        }
      }
    }
  }
}

// algo::automatic over pcie_staged takes its table's arms (collcomm/tables/pcie_staged.hpp: ll,
// tree and recursive doubling for small and mid sizes, ring above, slots capped to the world's):
// every kind with a table, counts across the table's bounds, in and out of place.
TEST_CASE("communicator<transport::pcie_staged>: algo::automatic, the table's arms, every kind") {
  using staged = transport::pcie_staged;
  for (int n : {2, 4, 8}) {
    gpu::world w(n, {}, staged_options(4));
    const world_facts f = communicator<staged>(w, 0).facts();  // what every rank's call chooses by
    std::set<std::string> arms;
    for (index_t count : {index_t{2}, index_t{1031}, index_t{5003}, index_t{40009}, index_t{300007}}) {
      for (int place = 0; place < 2; ++place) {
        const bool ip = place == 1;
        INFO("n=", n, " count=", count, " in_place=", ip, " seed=", fresh_seed());
        arms.insert(chosen_arm<kind::all_reduce, void, staged, op::sum, float>(f, count, ip));
        arms.insert(chosen_arm<kind::broadcast, void, staged, op::none, float>(f, count, ip));
        CHECK_EQ((run_api_case<kind::all_reduce, algo::automatic<>, float, op::sum, staged>(
                     w, case_config{n, count, 0, ip}, op::sum{}, 3)),
                 "");
        CHECK_EQ((run_api_case<kind::reduce_scatter, algo::automatic<>, float, op::sum, staged>(
                     w, case_config{n, count, 0, ip}, op::sum{}, 3)),
                 "");
        CHECK_EQ((run_api_case<kind::all_gather, algo::automatic<>, float, op::none, staged>(
                     w, case_config{n, count, 0, ip}, op::none{}, 3)),
                 "");
        CHECK_EQ((run_api_case<kind::broadcast, algo::automatic<>, float, op::none, staged>(
                     w, case_config{n, count, n - 1, ip}, op::none{}, 3)),
                 "");
        CHECK_EQ((run_api_case<kind::reduce, algo::automatic<>, float, op::sum, staged>(
                     w, case_config{n, count, n - 1, ip}, op::sum{}, 3)),
                 "");
      }
    }
    INFO("n=", n);
    CHECK_GE(arms.size(), 3u);  // the table, not ring alone
  }
}

// Over pcie_staged a direct algorithm does not compile (tests/compile_fail/transport_one_shot_over_pcie_staged.cu).
TEST_CASE("communicator<transport::pcie>: direct algorithms run on P2P") {
  // One GPU: P2P (device placement), where one_shot loads peers' buffers.
  auto w = std::make_unique<gpu::world>(4);
  REQUIRE_EQ(w->opts().connections, gpu::placement::device);
  for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_api_case<kind::all_reduce, algo::one_shot, float, op::sum, transport::pcie>(
                 *w, case_config{4, count, 0, false}, op::sum{}, 20)),
             "");
    CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, transport::pcie>(
                 *w, case_config{4, count, 0, true}, op::sum{}, 20)),
             "");
  }
}
