// 06_between_hosts — ranks on several hosts: communicator<net<socket>> (TCP between processes,
// host buffers), launched by torchrun, mpirun, srun or a shell loop (the bootstrap reads the
// launcher's variables: include/collcomm/bootstrap/env.hpp). A real all_reduce of f32 with the
// ring and with hierarchical<ring, ring> (intra-host reduce_scatter, inter-host all_reduce among
// the ranks of one local index, intra-host all_gather), each result checked element by element
// on every rank against the exact sum. Exits 1 on any wrong element.
//
//   torchrun --nnodes 2 --nproc-per-node 4 --rdzv-endpoint host0:29500 ./collcomm_example_06_between_hosts
//   mpirun -np 8 -H host0:4,host1:4 -x COLLCOMM_SOCKET_IFNAME=eth0 ./collcomm_example_06_between_hosts
//   srun -N 2 --ntasks-per-node 4 ./collcomm_example_06_between_hosts   (MASTER_ADDR/PORT or COLLCOMM_ROOT set)
// On one machine, --pretend-hosts H counts rank r as on host r % H (examples/03_launch_env.sh
// starts the processes: examples/03_launch_env.sh <this program> 4 --pretend-hosts 2).
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/host.hpp>
#include <collcomm/net.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using comm_t = collcomm::communicator<collcomm::transport::net<collcomm::transport::socket>>;

// Rank r's element i: an integer in [-500, 500], so every sum is exact in f32 in any order.
float value(std::uint64_t seed, int r, std::size_t i) {
  std::uint64_t x = seed ^ (std::uint64_t(r) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return float(static_cast<int>(x % 1001) - 500);
}

template <class Algo>
std::size_t run(comm_t& comm, std::uint64_t seed, std::size_t count) {
  const int r = comm.rank(), n = comm.size();
  std::vector<float> send(count), recv(count, -1e30f);
  for (std::size_t i = 0; i < count; ++i) send[i] = value(seed, r, i);
  const auto t0 = std::chrono::steady_clock::now();
  collcomm::all_reduce<Algo>(comm, send.data(), recv.data(), count, collcomm::op::sum{});
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q) want += value(seed, q, i);
    if (double(recv[i]) != want && wrong++ < 3)
      std::printf("rank %d: %s element %zu: got %g, want %g\n", r, Algo::name, i, double(recv[i]), want);
  }
  std::printf("rank %d of %d (host %d of %d): all_reduce<%s> of %zu f32: %.0f us, %s\n", r, n,
              comm.hosts().view().host(r), comm.hosts().nhosts(), Algo::name, count, us, wrong ? "WRONG" : "ok");
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 1 << 18;
  int pretend_hosts = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--count" && i + 1 < argc) {
      count = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--pretend-hosts" && i + 1 < argc) {
      pretend_hosts = std::atoi(argv[++i]);
    } else {
      std::printf("usage: (launcher variables) %s [--count C] [--pretend-hosts H]\n", argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  try {
    auto boot = collcomm::bootstrap::from_env(std::chrono::seconds(30));
    collcomm::host::net_options opt;
    if (pretend_hosts > 0) opt.host_id = 1 + static_cast<std::uint64_t>(boot.rank() % pretend_hosts);
    comm_t comm(boot, opt);  // collective: every rank listens, then one exchange of addresses
    std::uint64_t seed = comm.rank() == 0 ? (std::uint64_t(std::random_device{}()) << 32 | std::random_device{}()) : 0;
    collcomm::broadcast(comm, &seed, &seed, 1, 0);
    std::size_t wrong = run<collcomm::algo::ring>(comm, seed, count);
    wrong += run<collcomm::algo::hierarchical<collcomm::algo::ring, collcomm::algo::ring>>(comm, seed + 1, count);
    std::uint64_t total = wrong;
    collcomm::all_reduce(comm, &total, &total, 1, collcomm::op::sum{});
    if (comm.rank() == 0) std::printf("%s\n", total ? "FAILED: wrong elements" : "all ranks match the exact sums");
    return total ? 1 : 0;
  } catch (const collcomm::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
