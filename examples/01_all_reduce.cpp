// 01_all_reduce — a real all_reduce(sum) of random f32 data among several ranks on the host
// executor (ranks are threads of this process; examples/02_all_reduce_gpu.cu is the GPU demo),
// once per algorithm (ring, tree, recursive_doubling over FIFO messages; one_shot, two_shot
// over direct loads), each result checked element by element against a float64 reference.
// Exits 1 if any element is wrong.
//
//   collcomm_example_01_all_reduce [--ranks N] [--count C] [--iters I] [--seed S]
//
// The algorithm is a compile-time choice (a template argument): the same call with
// algo::ring or algo::tree instantiates two different schedules, and nothing is
// chosen at run time.
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/host.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

struct settings {
  int ranks = 4;
  std::size_t count = std::size_t{1} << 20;
  int iters = 5;
  std::uint64_t seed = std::random_device{}();
};

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--ranks" && has_value)
      s.ranks = std::atoi(argv[++i]);
    else if (a == "--count" && has_value)
      s.count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && has_value)
      s.iters = std::atoi(argv[++i]);
    else if (a == "--seed" && has_value)
      s.seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: %s [--ranks N] [--count C] [--iters I] [--seed S]\n", argv[0]);
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  if (s.ranks < 1 || s.iters < 1) {
    std::printf("--ranks and --iters must be >= 1\n");
    std::exit(2);
  }
  return s;
}

// Runs all_reduce<Algo> 1 + s.iters times on every rank, then checks every rank's output. Returns the
// number of wrong elements.
template <class Algo>
std::size_t run(const settings& s, const std::vector<std::vector<float>>& send, const std::vector<double>& ref,
                const std::vector<double>& abs_sum) {
  std::vector<std::vector<float>> recv(s.ranks, std::vector<float>(s.count, std::numeric_limits<float>::quiet_NaN()));
  collcomm::host::world world(s.ranks);

  // Rank 0's clock, from the end of a warm-up call (which starts the threads and touches the
  // buffers) to the end of the last timed call; every call waits for every rank's data.
  double us = 0;
  collcomm::host::run_ranks(world, [&](collcomm::communicator<collcomm::transport::host_shm>& comm) {
    const int r = comm.rank();
    collcomm::all_reduce<Algo>(comm, send[r].data(), recv[r].data(), s.count, collcomm::op::sum{});
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < s.iters; ++it)
      collcomm::all_reduce<Algo>(comm, send[r].data(), recv[r].data(), s.count, collcomm::op::sum{});
    if (r == 0) us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / s.iters;
  });

  // A sum of n f32 values rounded to f32 after each of at most n-1 additions is off by at most
  // (n-1) * eps/2 * sum|x_i| from the exact sum; allow n * eps.
  const double eps = std::numeric_limits<float>::epsilon();
  std::size_t wrong = 0;
  double max_err = 0;
  for (int r = 0; r < s.ranks; ++r) {
    for (std::size_t i = 0; i < s.count; ++i) {
      const double err = std::fabs(static_cast<double>(recv[r][i]) - ref[i]);
      if (!(err <= s.ranks * eps * abs_sum[i] + 1e-30)) {  // NaN (never written) counts as wrong
        if (wrong < 5)
          std::printf("  WRONG: rank %d element %zu: got %.9g, float64 reference %.9g\n", r, i,
                      static_cast<double>(recv[r][i]), ref[i]);
        ++wrong;
      }
      if (err > max_err) max_err = err;
    }
  }
  const double bytes = static_cast<double>(s.count) * sizeof(float);
  const double algbw = us > 0 ? bytes / us * 1e-3 : 0.0;  // GB/s
  const double busbw = algbw * 2.0 * (s.ranks - 1) / s.ranks;
  std::printf("  %-20s %10.1f us/call  algbw %6.2f GB/s  busbw %6.2f GB/s  max |error| %.3g  %s\n", Algo::name, us,
              algbw, busbw, max_err, wrong ? "WRONG" : "ok");
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse(argc, argv);
  std::printf("collcomm all_reduce(sum) of f32 on the host executor\n");
  std::printf("  %d ranks (threads of this process), %zu elements (%.1f MiB) per rank, 1 + %d calls each, seed %llu\n",
              s.ranks, s.count, s.count * sizeof(float) / 1048576.0, s.iters, static_cast<unsigned long long>(s.seed));

  std::mt19937_64 gen(s.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> send(s.ranks, std::vector<float>(s.count));
  std::vector<double> ref(s.count, 0.0), abs_sum(s.count, 0.0);
  for (int r = 0; r < s.ranks; ++r)
    for (std::size_t i = 0; i < s.count; ++i) {
      send[r][i] = dist(gen);
      ref[i] += send[r][i];
      abs_sum[i] += std::fabs(send[r][i]);
    }

  std::size_t wrong = 0;
  wrong += run<collcomm::algo::ring>(s, send, ref, abs_sum);
  wrong += run<collcomm::algo::tree>(s, send, ref, abs_sum);
  wrong += run<collcomm::algo::recursive_doubling>(s, send, ref, abs_sum);
  wrong += run<collcomm::algo::one_shot>(s, send, ref, abs_sum);
  wrong += run<collcomm::algo::two_shot>(s, send, ref, abs_sum);
  if (wrong) {
    std::printf("FAILED: %zu wrong elements (seed %llu reproduces this run)\n", wrong,
                static_cast<unsigned long long>(s.seed));
    return 1;
  }
  std::printf("all results match the float64 reference\n");
  return 0;
}
