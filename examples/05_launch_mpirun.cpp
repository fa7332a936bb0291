// examples/05_launch_mpirun.cpp — collcomm ranks started by mpirun (Debian's Open MPI), wired
// through the mpi bootstrap: one process per rank, rank and size from the MPI communicator.
//
//   mpirun -n 4 ./collcomm_example_05_launch_mpirun [--count N]
//   (as root: mpirun --allow-run-as-root; more ranks than cores: --oversubscribe)
//
// Every rank draws `count` random 64-bit integers from a seed that rank 0 picks and sends to the
// others, all_gathers them through the bootstrap, checks every rank's block against a
// regeneration of it, and reduces the gathered blocks to the elementwise sum (an all_reduce built
// on the bootstrap's all_gather), checked exactly against the sum of the regenerated blocks. Each
// rank prints a line; the exit code is 0 only if every check held on that rank (so mpirun's is 0
// only if they held on every rank). Built only where CMake finds MPI.
#include <collcomm/bootstrap/mpi.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {
std::vector<std::int64_t> rank_values(std::uint64_t seed, int rank, std::size_t count) {
  std::mt19937_64 g(seed ^ (0x9E3779B97F4A7C15ull * std::uint64_t(rank + 1)));
  std::vector<std::int64_t> v(count);
  for (auto& x : v) x = std::int64_t(g() >> 20) - (std::int64_t(1) << 43);  // sums of many ranks cannot overflow
  return v;
}

std::span<const std::byte> as_bytes(const std::vector<std::int64_t>& v) { return std::as_bytes(std::span(v)); }
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  std::size_t count = 4096;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--count") count = std::strtoull(argv[i + 1], nullptr, 10);
  int wrong = 0;
  try {
    collcomm::bootstrap::mpi boot(MPI_COMM_WORLD, std::chrono::seconds(30));
    const int rank = boot.rank(), size = boot.size();

    // Rank 0 picks a fresh seed and sends it to every other rank (point to point).
    std::uint64_t seed = 0;
    if (rank == 0) {
      std::random_device rd;
      seed = (std::uint64_t(rd()) << 32) ^ rd();
      for (int r = 1; r < size; ++r) boot.send(r, std::as_bytes(std::span(&seed, 1)));
    } else {
      boot.recv(0, std::as_writable_bytes(std::span(&seed, 1)));
    }

    // all_gather: (rank, element) after the call, poisoned before it.
    const auto mine = rank_values(seed, rank, count);
    std::vector<std::int64_t> all(count * std::size_t(size), std::int64_t(0x5A5A5A5A5A5A5A5A));
    boot.all_gather(as_bytes(mine), std::as_writable_bytes(std::span(all)));
    std::vector<std::int64_t> sum(count, 0), want(count, 0);
    for (int r = 0; r < size; ++r) {
      const auto ref = rank_values(seed, r, count);
      for (std::size_t i = 0; i < count; ++i) {
        const auto got = all[std::size_t(r) * count + i];
        if (got != ref[i] && wrong++ < 5)
          std::fprintf(stderr, "rank %d: all_gather: element %zu of rank %d is %lld, want %lld\n", rank, i, r,
                       (long long)got, (long long)ref[i]);
        sum[i] += got;
        want[i] += ref[i];
      }
    }
    for (std::size_t i = 0; i < count; ++i)
      if (sum[i] != want[i] && wrong++ < 5)
        std::fprintf(stderr, "rank %d: sum: element %zu is %lld, want %lld\n", rank, i, (long long)sum[i],
                     (long long)want[i]);

    // Every rank learns whether every rank was right (an all_gather of one int each).
    const std::int32_t mine_wrong = wrong;
    std::vector<std::int32_t> every(std::size_t(size), -1);
    boot.all_gather(std::as_bytes(std::span(&mine_wrong, 1)), std::as_writable_bytes(std::span(every)));
    int ranks_wrong = 0;
    for (auto w : every) ranks_wrong += w != 0;
    std::printf(
        "rank %d of %d: all_gather of %zu int64 per rank and their sum (seed %llu): %s; ranks with errors: %d\n", rank,
        size, count, static_cast<unsigned long long>(seed), wrong ? "WRONG" : "correct", ranks_wrong);
    boot.barrier();
  } catch (const collcomm::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    wrong = 1;
  }
  MPI_Finalize();
  return wrong ? 1 : 0;
}
