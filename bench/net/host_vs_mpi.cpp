// bench/net/host_vs_mpi.cpp — the host executor beside MPI on the same processes: mpirun starts
// the ranks; collcomm's communicator<host_shm> (a world of processes over POSIX shared memory,
// made through bootstrap::mpi) and MPI_Allreduce (f32 sum, whatever transport mpirun picked:
// shared memory on one host) take turns at each size on the same buffers, each timed as
// bench_common.hpp times a call (per call the slowest rank's steady_clock time; median of reps
// after a warm-up), every output checked exactly.
//
//   mpirun -n 4 host_vs_mpi [--algo ring|tree|recursive_doubling|two_shot|one_shot|automatic]
//                           [--min-bytes 8] [--max-bytes 64M] [--step 4] [--budget 1G]
//                           [--min-reps 5] [--max-reps 200]
//                           [--slot-bytes B] [--slots S] [--channels C] (host::options; default: its defaults)
//                           [--ranks-as processes|threads]
//   (as root: --allow-run-as-root; more ranks than cores: --oversubscribe; threads: --bind-to none)
//
// --ranks-as threads: collcomm's ranks are instead as many threads of rank 0's process (a host::world
// of threads, heap memory), timed the same way, while the other processes sleep in a barrier; MPI
// still runs on the processes. Rank 0 prints, per size: reps, MPI's and collcomm's median and minimum (µs), and MPI's median
// over collcomm's (> 1: collcomm faster); with algo automatic (the default), the arm it takes, on a
// "# from N B:" line where it changes.
//
// The ceiling, measured first in the same run: every process copies 64 MiB with memcpy at once
// (after a barrier; 1 warm-up, the median of 5, each the slowest rank's time), printed as GB/s per
// rank (bytes copied per second). A byte of all_reduce's bus bandwidth (NCCL's busbw: size / time x
// 2(n-1)/n) is at least one copy through the shared segment — a rank writes it, a peer reads it —
// so that rate bounds busbw once a call's buffers no longer fit in the caches (smaller calls can
// pass it); the last two columns are collcomm's busbw and its ratio to it.
#include "bench_common.hpp"

#include <collcomm/bootstrap/mpi.hpp>
#include <collcomm/collcomm.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using host_comm = collcomm::communicator<collcomm::transport::host_shm>;
using all_reduce_fn = std::function<void(host_comm&, const float*, float*, std::size_t)>;

template <class Algo>
all_reduce_fn with() {
  return [](host_comm& c, const float* s, float* r, std::size_t n) {
    collcomm::all_reduce<Algo>(c, s, r, static_cast<collcomm::index_t>(n), collcomm::op::sum{});
  };
}

all_reduce_fn parse_algo(const std::string& s) {
  if (s == "automatic" || s == "default")
    return [](host_comm& c, const float* snd, float* r, std::size_t n) {
      collcomm::all_reduce(c, snd, r, static_cast<collcomm::index_t>(n), collcomm::op::sum{});
    };
  if (s == "ring") return with<collcomm::algo::ring>();
  if (s == "tree") return with<collcomm::algo::tree>();
  if (s == "recursive_doubling") return with<collcomm::algo::recursive_doubling>();
  if (s == "two_shot") return with<collcomm::algo::two_shot>();
  if (s == "one_shot") return with<collcomm::algo::one_shot>();
  std::fprintf(stderr, "unknown algorithm '%s'\n", s.c_str());
  std::exit(2);
}

struct timing {
  double median = 0, min = 0;
  std::size_t wrong = 0;
};

// The median and minimum of per-call times (each already the slowest rank's).
timing summary(std::vector<double> t, std::size_t wrong) {
  std::sort(t.begin(), t.end());
  const std::size_t k = t.size();
  timing r;
  r.median = k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]);
  r.min = t.front();
  r.wrong = wrong;
  return r;
}

// `reps` calls of f, after a warm-up, each the slowest rank's time; outputs checked.
timing time_calls(const std::function<void(float*)>& f, std::vector<float>& recv, std::size_t count, int rank, int n,
                  int reps) {
  const int warm = std::clamp(reps / 10, 1, 5);
  std::fill(recv.begin(), recv.end(), netbench::poison);
  for (int w = 0; w < warm; ++w) f(recv.data());
  std::size_t bad = netbench::wrong(netbench::coll::all_reduce, recv.data(), count, rank, n);
  std::fill(recv.begin(), recv.end(), netbench::poison);
  std::vector<double> t(static_cast<std::size_t>(reps));
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    f(recv.data());
    t[static_cast<std::size_t>(k)] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  bad += netbench::wrong(netbench::coll::all_reduce, recv.data(), count, rank, n);
  t.push_back(static_cast<double>(bad));
  MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const std::size_t wrong = static_cast<std::size_t>(t.back());
  t.pop_back();
  return summary(std::move(t), wrong);
}

// The same for the ranks of a world of threads (rank 0's process only): per call the slowest
// thread's time, every thread's output checked.
timing time_threads(collcomm::host::world& w, const all_reduce_fn& run, std::size_t count, int reps, std::string* arm) {
  const int n = w.size();
  const int warm = std::clamp(reps / 10, 1, 5);
  std::vector<std::vector<double>> t(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(reps)));
  std::vector<std::size_t> bad(static_cast<std::size_t>(n), 0);
  collcomm::host::run_ranks(w, [&](host_comm& c) {
    const int r = c.rank();
    std::vector<float> send(count), recv(count, netbench::poison);
    for (std::size_t i = 0; i < count; ++i) send[i] = netbench::value(i, r);
    for (int k = 0; k < warm; ++k) run(c, send.data(), recv.data(), count);
    std::size_t b = netbench::wrong(netbench::coll::all_reduce, recv.data(), count, r, n);
    std::fill(recv.begin(), recv.end(), netbench::poison);
    for (int k = 0; k < reps; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run(c, send.data(), recv.data(), count);
      t[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    bad[static_cast<std::size_t>(r)] = b + netbench::wrong(netbench::coll::all_reduce, recv.data(), count, r, n);
    if (r == 0 && arm)
      *arm = collcomm::chosen_arm<collcomm::kind::all_reduce, void, collcomm::transport::host_shm, collcomm::op::sum,
                                  float>(c.facts(), count);
  });
  std::vector<double> worst(static_cast<std::size_t>(reps), 0);
  std::size_t wrong = 0;
  for (int q = 0; q < n; ++q) {
    wrong += bad[static_cast<std::size_t>(q)];
    for (int k = 0; k < reps; ++k)
      worst[static_cast<std::size_t>(k)] =
          std::max(worst[static_cast<std::size_t>(k)], t[static_cast<std::size_t>(q)][static_cast<std::size_t>(k)]);
  }
  return summary(std::move(worst), wrong);
}

// The copy bandwidth per rank (GB/s, bytes copied per second) with every process copying 64 MiB at
// once: the median of 5 copies after a warm-up, each the slowest rank's time.
double copy_bandwidth() {
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::vector<double> t;
  for (int k = 0; k < 6; ++k) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (k > 0) t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  return static_cast<double>(bytes) / t[t.size() / 2] / 1e9;
}

// A barrier the waiting processes sleep in (an MPI barrier would poll and take the CPUs that rank
// 0's threads are timed on).
void sleeping_barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const netbench::args a{argc, argv};
  const std::string algo = a.str("algo", "automatic");
  const std::string ranks_as = a.str("ranks-as", "processes");
  if (ranks_as != "processes" && ranks_as != "threads") {
    std::fprintf(stderr, "--ranks-as is processes or threads, not '%s'\n", ranks_as.c_str());
    return 2;
  }
  const bool threads = ranks_as == "threads";
  netbench::sweep_options o = netbench::sweep_from_args(a);
  if (!a.get("max-bytes")) o.max_bytes = std::size_t{64} << 20;
  if (!a.get("step")) o.step = 4;
  if (!a.get("max-reps")) o.max_reps = 200;
  std::size_t total_wrong = 0;
  {
    collcomm::bootstrap::mpi boot(MPI_COMM_WORLD, std::chrono::seconds(60));
    collcomm::host::options ho;
    ho.slot_bytes = a.bytes("slot-bytes", ho.slot_bytes);
    ho.slots = static_cast<int>(a.integer("slots", ho.slots));
    ho.channels = static_cast<int>(a.integer("channels", ho.channels));
    host_comm comm(boot, ho);
    const int rank = comm.rank(), n = comm.size();
    const all_reduce_fn run = parse_algo(algo);
    std::unique_ptr<collcomm::host::world> thread_world;
    if (threads && rank == 0) thread_world = std::make_unique<collcomm::host::world>(n, ho);
    const double copy_gbs = copy_bandwidth();
    if (rank == 0) {
      char version[MPI_MAX_LIBRARY_VERSION_STRING];
      int len = 0;
      MPI_Get_library_version(version, &len);
      std::string v(version, static_cast<std::size_t>(len));
      if (auto nl = v.find(','); nl != std::string::npos) v.resize(nl);
      std::printf(
          "# all_reduce f32 sum, %d processes: collcomm host_shm (%s; algo %s, slot_bytes %zu, slots %d, "
          "channels %d) beside %s\n",
          n, threads ? "ranks as threads of rank 0's process" : "ranks as the processes", algo.c_str(), ho.slot_bytes,
          ho.slots, ho.channels, v.c_str());
      std::printf("# copy bandwidth: %.2f GB/s per rank (memcpy of 64 MiB, every process at once)\n", copy_gbs);
      std::printf(
          "# time: per call, max over ranks; median and min over reps (µs); ratio: MPI / collcomm medians; "
          "cc_busbw: collcomm's bus bandwidth (GB/s) at its median, of_copy: its share of the copy bandwidth\n");
      std::printf("#%11s %11s %5s %12s %12s %12s %12s %8s %7s %9s %7s\n", "size(B)", "count", "reps", "mpi_med",
                  "mpi_min", "cc_med", "cc_min", "ratio", "#wrong", "cc_busbw", "of_copy");
      std::fflush(stdout);
    }
    std::string last_arm;
    for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
      const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
      std::vector<float> send(count), recv(count);
      for (std::size_t i = 0; i < count; ++i) send[i] = netbench::value(i, rank);
      const int reps = static_cast<int>(std::clamp<std::size_t>(o.budget_bytes / (count * sizeof(float)),
                                                                static_cast<std::size_t>(o.min_reps),
                                                                static_cast<std::size_t>(o.max_reps)));
      const timing m = time_calls(
          [&](float* r) { MPI_Allreduce(send.data(), r, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
          recv, count, rank, n, reps);
      timing c;
      std::string arm;
      if (threads) {
        int refused = 0;
        if (rank == 0) {
          try {
            c = time_threads(*thread_world, run, count, reps, &arm);
          } catch (const collcomm::error& e) {
            std::printf("# %zu B: collcomm refused: %s\n", count * sizeof(float), e.what());
            refused = 1;
          }
        }
        sleeping_barrier();
        MPI_Bcast(&refused, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (refused) break;
      } else {
        try {
          c = time_calls([&](float* r) { run(comm, send.data(), r, count); }, recv, count, rank, n, reps);
        } catch (const collcomm::error& e) {  // e.g. a direct algorithm above its window: the sweep ends here
          if (rank == 0) std::printf("# %zu B: collcomm refused: %s\n", count * sizeof(float), e.what());
          break;
        }
        if (rank == 0)
          arm = collcomm::chosen_arm<collcomm::kind::all_reduce, void, collcomm::transport::host_shm, collcomm::op::sum,
                                     float>(comm.facts(), count);
      }
      total_wrong += m.wrong + c.wrong;
      if (rank == 0 && (algo == "automatic" || algo == "default")) {  // the arm, where it changes
        if (arm != last_arm) std::printf("# from %zu B: %s\n", count * sizeof(float), arm.c_str());
        last_arm = arm;
      }
      if (rank == 0) {
        const double busbw = static_cast<double>(count * sizeof(float)) / (c.median * 1e3) *
                             netbench::bus_factor(netbench::coll::all_reduce, n);
        std::printf("%12zu %11zu %5d %12.2f %12.2f %12.2f %12.2f %8.2f %7zu %9.2f %7.3f\n", count * sizeof(float),
                    count, reps, m.median, m.min, c.median, c.min, m.median / c.median, m.wrong + c.wrong, busbw,
                    busbw / copy_gbs);
        std::fflush(stdout);
      }
      if (bytes == o.max_bytes) break;
      bytes = std::min(bytes * static_cast<std::size_t>(o.step), o.max_bytes);
    }
  }
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
