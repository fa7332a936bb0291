// GPU faults (labels gpu;fault): a rank that never joins, and ranks that disagree on the count,
// for each protocol (simple, ll) and transport (nvlink, pcie on P2P, pcie_staged through pinned
// host memory), through the executor (gpu::launch) and the host API (communicator<Tr>). Every
// other rank gets an error naming the fault within the timeout, no hang, and a fresh world then
// works (tests/gpu/fault_cases.cuh).
#include "fault_cases.cuh"

#include <chrono>

using namespace collcomm;
using namespace collcomm_gpu_test;
using std::chrono::milliseconds;
constexpr bool launch = false, api = true;

TEST_CASE("nvlink, simple, gpu::launch: a rank that never joins: the others report it within the timeout [fault]") {
  rank_never_joins<transport::nvlink, protocol::simple, launch>(milliseconds(300), 1024, false);
}
TEST_CASE("nvlink, simple, communicator: after a stall (in place) the world refuses later calls [fault]") {
  rank_never_joins<transport::nvlink, protocol::simple, api>(milliseconds(200), 64, true);
}
TEST_CASE("nvlink, ll, gpu::launch: a rank that never joins is named within the timeout [fault]") {
  rank_never_joins<transport::nvlink, protocol::ll, launch>(milliseconds(300), 1024, false);
}
TEST_CASE("pcie, simple, communicator: a rank that never joins is named within the timeout [fault]") {
  rank_never_joins<transport::pcie, protocol::simple, api>(milliseconds(300), 1024, false);
}
TEST_CASE("pcie, ll, communicator: a rank that never joins is named within the timeout [fault]") {
  rank_never_joins<transport::pcie, protocol::ll, api>(milliseconds(300), 1024, false);
}
TEST_CASE("staged pcie, simple, communicator: a rank that never joins is named within the timeout [fault]") {
  rank_never_joins<transport::pcie_staged, protocol::simple, api>(milliseconds(300), 1024, false);
}
TEST_CASE("staged pcie, ll, communicator: a rank that never joins is named within the timeout [fault]") {
  rank_never_joins<transport::pcie_staged, protocol::ll, api>(milliseconds(300), 1024, false);
}

TEST_CASE(
    "nvlink, simple, gpu::launch: ranks that disagree on the count: an error on every rank within the timeout, no hang "
    "[fault]") {
  ranks_disagree_on_count<transport::nvlink, protocol::simple, launch>();
}
TEST_CASE(
    "nvlink, ll, gpu::launch: ranks that disagree on the count: an error on every rank within the timeout, no hang "
    "[fault]") {
  ranks_disagree_on_count<transport::nvlink, protocol::ll, launch>();
}
TEST_CASE("pcie, simple, communicator: ranks that disagree on the count: an error on every rank, no hang [fault]") {
  ranks_disagree_on_count<transport::pcie, protocol::simple, api>();
}
TEST_CASE("pcie, ll, communicator: ranks that disagree on the count: an error on every rank, no hang [fault]") {
  ranks_disagree_on_count<transport::pcie, protocol::ll, api>();
}
TEST_CASE(
    "staged pcie, simple, communicator: ranks that disagree on the count: an error on every rank, no hang [fault]") {
  ranks_disagree_on_count<transport::pcie_staged, protocol::simple, api>();
}
TEST_CASE("staged pcie, ll, communicator: ranks that disagree on the count: an error on every rank, no hang [fault]") {
  ranks_disagree_on_count<transport::pcie_staged, protocol::ll, api>();
}
