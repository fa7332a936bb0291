// 03_launch_env — ranks as processes, launched the way torchrun launches them: each process finds
// its rank, the world size and rank 0's address in its environment (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK; or Open MPI's / Slurm's rank variables, or COLLCOMM_ROOT=host:port; see
// include/collcomm/bootstrap/env.hpp), bootstraps over TCP through rank 0, and builds a host
// communicator of processes over a shared-memory segment. Then a real all_reduce of f32 with the
// ring (FIFO messages) and two_shot (direct loads, staged through the segment), each result
// checked element by element on every rank. Exits 1 on any wrong element.
//
// From a plain shell loop (examples/03_launch_env.sh does this and waits for every rank):
//   for r in 0 1 2 3; do
//     MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r \
//       ./collcomm_example_03_launch_env --count 100000 &
//   done; wait
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/host.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using comm_t = collcomm::communicator<collcomm::transport::host_shm>;

// Rank r's element i: an integer in [-500, 500], so that any sum over up to 32768 ranks is exact
// in f32 whatever the order, and the check can demand exact equality.
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
    if (double(recv[i]) != want) {
      if (wrong < 3) std::printf("rank %d: %s element %zu: got %g, want %g\n", r, Algo::name, i, double(recv[i]), want);
      ++wrong;
    }
  }
  std::printf("rank %d of %d: all_reduce<%s> of %zu f32: %.0f us, %s\n", r, n, Algo::name, count, us,
              wrong ? "WRONG" : "ok");
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 1 << 18;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--count" && i + 1 < argc)
      count = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: RANK=r WORLD_SIZE=n MASTER_ADDR=host MASTER_PORT=port %s [--count C]\n", argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  try {
    const auto cfg = collcomm::bootstrap::read_env();  // for the message only: from_env reads it again
    auto boot = collcomm::bootstrap::from_env(std::chrono::seconds(30));
    comm_t comm(boot);  // collective: every rank makes it; the bootstrap is not needed afterwards
    // A fresh seed, drawn by rank 0 and broadcast: every rank can then compute every input.
    std::uint64_t seed = comm.rank() == 0 ? (std::uint64_t(std::random_device{}()) << 32 | std::random_device{}()) : 0;
    collcomm::broadcast(comm, &seed, &seed, 1, 0);
    if (comm.rank() == 0)
      std::printf("%d processes (launcher variables: %s, local rank %d), seed %llu\n", comm.size(),
                  cfg.launcher.c_str(), cfg.local_rank, static_cast<unsigned long long>(seed));
    std::size_t wrong = run<collcomm::algo::ring>(comm, seed, count);
    wrong += run<collcomm::algo::two_shot>(comm, seed + 1, count);
    // Every rank's verdict, so that each process exits with the job's.
    std::uint64_t total = wrong;
    collcomm::all_reduce(comm, &total, &total, 1, collcomm::op::sum{});
    if (comm.rank() == 0) std::printf("%s\n", total ? "FAILED: wrong elements" : "all ranks match the exact sums");
    return total ? 1 : 0;
  } catch (const collcomm::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
