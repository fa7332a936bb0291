// collcomm_bench_pcie — transport::pcie_staged timed in the nccl-tests mould, next to the
// pinned host<->device copy bandwidth measured in the same run; every FIFO arm, so that
// bench/tune.py can write algo::automatic's table for the staged path (bench/scripts/tune_pcie.sh).
//
//   collcomm_bench_pcie [-k all|all_reduce|reduce_scatter|all_gather|broadcast|reduce]
//                       [-a ring|tree|recursive_doubling|automatic] [-p simple|ll] [-r ranks]
//                       [-b min_bytes] [-e max_bytes] [-f factor] [-n iters] [-w warmup]
//                       [-R repetitions] [-C channels] [-s slot_bytes] [-c 0|1] [--json]
//                                                                      (--help: the defaults)
//
// All ranks are threads of this process on GPU 0, with their connections in pinned host memory
// (gpu::placement::host), so every message goes GPU -> host -> GPU. f32, sum (reducing kinds),
// root 0 (rooted kinds), out of place. -k all: every kind the algorithm has a schedule for.
// Arms: the FIFO algorithms (ring: every kind; tree: all_reduce, broadcast, reduce;
// recursive_doubling: all_reduce, all_gather) with protocol simple or ll — the direct algorithms
// load and store peers' buffers, which staged connections cannot, and ll128 needs NVLink's whole
// 128-byte stores (both refused by name). -C and -s make the world's channels and slot bytes, and
// the calls take them all (tuning<protocol>: as collcomm_bench). -a automatic: the transport's
// table (collcomm/tables.hpp; none yet for pcie_staged: ring with the world's options), the arm
// each size takes printed where it changes and in the JSON.
//
// Per size (nccl-tests' convention: the larger buffer of a rank): bytes, count, type, op, time,
// algbw, busbw (bench/driver.hpp), then the PCIe traffic and #wrong (elements of the output that
// differ from the exact reference after the timed calls, every rank; reduce: the root's; -1 with
// -c 0). Time: in each of -R repetitions (at most 3 from 64 MiB) every rank queues -n calls (half
// of them, at least 2, from 64 MiB); rank 0's stream is timed with CUDA events (the ranks of the
// GPU make one grouped launch per call, which every rank's stream waits for); the median of the
// repetitions is printed.
//
// What is compared with the copy bandwidth. Every staged message crosses the GPU's PCIe link
// twice: the sender's kernel writes it into a host slot (device -> host direction) and the
// receiver's kernel reads it from there (host -> device direction). The link is full duplex, so
// each direction is its own limit. Counting, by running the schedule over a primitives object
// that only counts (bench/pcie_link_model.hpp), the slot bytes written (up) and read (down) by all
// ranks in one call (ll: twice the payload, its 16-byte lines carrying 8 bytes), up/time and
// down/time are the bytes that crossed the link each way per second; they are printed as a
// fraction of the pinned cudaMemcpyAsync device->host and host->device bandwidths measured at the
// start of the run (256 MiB, 3 warm-ups, median of 9). The ranks share one GPU here, so its one
// link carries every rank's traffic.
//
// --json: one object per size in collcomm_bench's schema (bench/tune.py reads both alike):
// kind, algo ("ring", "ring/ll"), arm (the arm the call took), type, op, ranks, ranks_per_gpu,
// channels, slot_bytes (the world's), graph (0), bytes, count, in_place (0), time_us, algbw,
// busbw, mem_frac (up/time over the pinned device->host copy: the %d2h column), wrong, copy_bw
// (that copy, GB/s), host_us (the median over repetitions of the slowest rank thread's wall time
// per call spent in the calls); and the pcie figures: up_gbs, down_gbs, d2h_gbs, h2d_gbs,
// both_gbs (the copy each way with both directions at once).
#include "driver.hpp"
#include "pcie_link_model.hpp"

#include <collcomm/gpu.hpp>
#include <common/matrix.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {
using namespace collcomm;
namespace bench = collcomm_bench;
using transport_t = transport::pcie_staged;

struct pcie_settings : bench::settings {
  std::string protocol = "simple";
  bool json = false;
  pcie_settings() {
    kind = "all";
    ranks = 4;
    min_bytes = std::size_t{1} << 20;
    max_bytes = std::size_t{256} << 20;
    factor = 4;
    iters = 10;
    warmup = 3;
  }
};

// Rank r's input element i, and the exact reference of output element i on rank r: small
// integers, exact in f32 in any order of summation.
float input_value(int r, index_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 5)); }
template <class K>
float expected(int r, int n, index_t count, index_t i) {
  if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::reduce>) {
    return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));  // reduce: at root 0
  } else if constexpr (std::is_same_v<K, kind::reduce_scatter>) {
    const index_t j = static_cast<index_t>(r) * count + i;
    return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(j % 5));
  } else if constexpr (std::is_same_v<K, kind::all_gather>) {
    return input_value(static_cast<int>(i / count), i % count);
  } else {
    return input_value(0, i);  // broadcast from root 0
  }
}

// The slot bytes written (up) and read (down) over PCIe by every rank in one call of Algo with
// Tuning (channels and slot bytes as the call runs them on a world of options o), or for
// algo::automatic by the arm the call takes.
template <class K, class Algo, class Tuning>
void link_traffic(const world_facts& f, const coll_args& base, const gpu::options& o, double& up, double& down) {
  if constexpr (is_automatic<Algo>) {
    detail::select_arm<K, typename Algo::table, transport_t, bench::bench_op<K>, float>(
        f, detail::call_bytes_of<K, float>(base.count, base.nranks, false),
        [&]<class A, class Tu>(std::type_identity<A>, std::type_identity<Tu>) {
          link_traffic<K, A, Tu>(f, base, o, up, down);
        });
  } else {
    constexpr bool ll = std::is_same_v<typename Tuning::protocol, protocol::ll>;
    const std::size_t slot_bytes = tuned_slot_bytes<Tuning>(o.slot_bytes);
    // Elements per slot and the unit schedules cut chunks on: ll's 16-byte lines carry 8 bytes
    // each, after a header line (kernels/ll_fifo.cuh); simple's slot is all payload, in 16-byte
    // vectors (kernels/simple_fifo.cuh).
    const index_t align = ll ? 8 / sizeof(float) : 16 / sizeof(float);
    const index_t slot = ll ? static_cast<index_t>((slot_bytes / 16 - 1) * align)
                            : static_cast<index_t>(slot_bytes / sizeof(float)) / align * align;
    bench::link_bytes<K, Algo>(base, tuned_channels<Tuning>(o.channels), slot, align, sizeof(float), up, down);
    const double line_factor = ll ? 2.0 : 1.0;
    up *= line_factor;
    down *= line_factor;
  }
}

template <class K, class Algo, class Tuning>
void run_kind(gpu::world& w, const pcie_settings& st, const bench::pinned_bandwidth& pinned) {
  using Op = bench::bench_op<K>;
  constexpr bool simple = std::is_same_v<typename Tuning::protocol, protocol::simple>;
  const std::string algo_name = std::string(Algo::name) + (simple ? "" : std::string("/") + Tuning::protocol::name);
  const double h2d = pinned.h2d, d2h = pinned.d2h;
  const int n = st.ranks;
  const std::vector<std::size_t> sizes = bench::message_sizes(st);
  if (!st.json) {
    std::printf(
        "# %s %s f32 staged pcie: ranks=%d (one GPU) channels=%d slot_bytes=%zu slots=%d iters=%d reps=%d; "
        "pinned copy h2d=%.1f GB/s d2h=%.1f GB/s\n",
        K::name, algo_name.c_str(), n, w.opts().channels, w.opts().slot_bytes, w.opts().slots, st.iters, st.reps,
        h2d / 1e9, d2h / 1e9);
    std::printf("# %12s %12s %5s %5s %10s %8s %8s %9s %6s %9s %6s %7s\n", "size(B)", "count", "type", "op", "time(us)",
                "algbw", "busbw", "up(GB/s)", "%d2h", "dn(GB/s)", "%h2d", "#wrong");
  }
  const std::size_t max_elems = sizes.back() / sizeof(float);
  std::vector<long> wrong(n);
  std::vector<double> rank_host(n);
  std::vector<double> host_times;  // per repetition: the slowest rank's host µs per call (rank 0's thread)
  std::string last_arm;            // the arm printed last (rank 0's thread)
  std::barrier sync_point(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        COLLCOMM_BENCH_CUDA(cudaSetDevice(w.device_of(r)));
        cudaStream_t s;
        COLLCOMM_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float* in = nullptr;
        float* out = nullptr;
        COLLCOMM_BENCH_CUDA(cudaMalloc(&in, max_elems * sizeof(float) + 64));
        COLLCOMM_BENCH_CUDA(cudaMalloc(&out, max_elems * sizeof(float) + 64));
        std::vector<float> host(max_elems);
        for (std::size_t i = 0; i < max_elems; ++i) host[i] = input_value(r, static_cast<index_t>(i));
        COLLCOMM_BENCH_CUDA(cudaMemcpy(in, host.data(), max_elems * sizeof(float), cudaMemcpyHostToDevice));
        communicator<transport_t> comm(w, r);
        gpu::preload(comm, [&] { bench::call_collective<K, Algo, Tuning>(comm, in, out, index_t{0}, Op{}, s); });
        bench::event_timer timer;  // rank 0's
        for (std::size_t bytes : sizes) {
          const index_t count = bench::count_for<K>(bytes, sizeof(float), n);
          coll_args base{};
          base.nranks = n;
          base.count = count;
          const index_t out_n = output_elems<K>(base);
          auto call = [&] { bench::call_collective<K, Algo, Tuning>(comm, in, out, count, Op{}, s); };
          COLLCOMM_BENCH_CUDA(cudaMemset(out, 0xA5, max_elems * sizeof(float)));  // poison
          COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
          sync_point.arrive_and_wait();
          const int iters = bench::calls_per_repetition(bytes, st.iters, 2);
          for (int i = 0; i < st.warmup; ++i) call();
          COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
          comm.check();
          if (r == 0) host_times.clear();
          const double us = bench::median_of(bench::repetitions(bytes, st.reps), [&] {
            sync_point.arrive_and_wait();
            if (r == 0) timer.start(s);
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) call();
            rank_host[r] =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
            const double rank0 = r == 0 ? timer.stop(s, iters) : 0;
            COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
            comm.check();
            sync_point.arrive_and_wait();
            if (r == 0) host_times.push_back(*std::max_element(rank_host.begin(), rank_host.end()));
            return rank0;
          });
          // The output of the last call, every element against the reference (reduce: the root's).
          long bad = st.check ? 0 : -1;
          if (st.check && (!std::is_same_v<K, kind::reduce> || r == 0)) {
            COLLCOMM_BENCH_CUDA(cudaMemcpy(host.data(), out, out_n * sizeof(float), cudaMemcpyDeviceToHost));
            for (index_t i = 0; i < out_n; ++i) bad += host[i] != expected<K>(r, n, count, i);
          }
          wrong[r] = bad;
          sync_point.arrive_and_wait();
          if (r == 0) {
            long wrong_all = 0;
            for (long x : wrong) wrong_all = (x < 0 || wrong_all < 0) ? -1 : wrong_all + x;
            double up = 0, down = 0;
            link_traffic<K, Algo, Tuning>(comm.facts(), base, w.opts(), up, down);
            const double sec = us * 1e-6, algbw = bench::algbw(bytes, us), busbw = algbw * bench::bus_factor<K>(n);
            const std::string arm = bench::arm_of<K, Algo, Tuning, transport_t, float, Op>(comm.facts(), count, false);
            if (st.json) {
              std::printf(
                  "{\"kind\":\"%s\",\"algo\":\"%s\",\"arm\":\"%s\",\"type\":\"f32\",\"op\":\"%s\","
                  "\"ranks\":%d,\"ranks_per_gpu\":%d,\"channels\":%d,\"slot_bytes\":%zu,\"graph\":0,"
                  "\"bytes\":%zu,\"count\":%zu,\"in_place\":0,\"time_us\":%.3f,\"algbw\":%.3f,"
                  "\"busbw\":%.3f,\"mem_frac\":%.4f,\"wrong\":%ld,\"copy_bw\":%.1f,\"host_us\":%.3f,"
                  "\"up_gbs\":%.3f,\"down_gbs\":%.3f,\"d2h_gbs\":%.1f,\"h2d_gbs\":%.1f,\"both_gbs\":%.1f}\n",
                  K::name, algo_name.c_str(), arm.c_str(), op_name<Op>(), n, n, w.opts().channels, w.opts().slot_bytes,
                  bytes, static_cast<std::size_t>(count), us, algbw, busbw, up / sec / d2h, wrong_all, d2h / 1e9,
                  bench::median(host_times), up / sec / 1e9, down / sec / 1e9, d2h / 1e9, h2d / 1e9, pinned.both / 1e9);
            } else {
              if (is_automatic<Algo> && arm != last_arm) {  // algo::automatic: the arm, where it changes
                std::printf("# from %zu bytes: %s\n", bytes, arm.c_str());
                last_arm = arm;
              }
              std::printf("  %12zu %12zu %5s %5s %10.1f %8.2f %8.2f %9.2f %5.0f%% %9.2f %5.0f%% %7ld\n", bytes,
                          static_cast<std::size_t>(count), "float", op_name<Op>(), us, algbw, busbw, up / sec / 1e9,
                          100 * up / sec / d2h, down / sec / 1e9, 100 * down / sec / h2d, wrong_all);
            }
            std::fflush(stdout);
          }
          sync_point.arrive_and_wait();
        }
        COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
        sync_point.arrive_and_wait();
        cudaFree(in);
        cudaFree(out);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {  // a stall (comm.check) or a refused call: no figure is right now
        bench::die("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
}

// The compositions the bench can run, looked up by name. Every FIFO algorithm of the kinds
// bench/tune.py tunes; valid_composition prunes the pairs without a schedule or that need direct
// primitives (a narrow build: -DCOLLCOMM_BENCH_ALGOS=algo::ring).
#ifndef COLLCOMM_BENCH_KINDS
#define COLLCOMM_BENCH_KINDS kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast, kind::reduce
#endif
#ifndef COLLCOMM_BENCH_ALGOS
#define COLLCOMM_BENCH_ALGOS algo::ring, algo::tree, algo::recursive_doubling
#endif
using bench_kinds = collcomm_test::type_list<COLLCOMM_BENCH_KINDS>;
using bench_algos = collcomm_test::type_list<COLLCOMM_BENCH_ALGOS>;

// Runs (or, with w null, only counts) the compositions the settings name: -k (or every kind with
// -k all) with -a and -p.
int dispatch(const pcie_settings& st, gpu::world* w, const bench::pinned_bandwidth& pinned) {
  int matched = 0;
  collcomm_test::for_each_type(bench_kinds{}, [&]<class K>(std::type_identity<K>) {
    if (st.kind != "all" && st.kind != K::name) return;
    if (st.algo == "automatic") {
      ++matched;
      if (w) run_kind<K, algo::automatic<>, tuning<>>(*w, st, pinned);
      return;
    }
    collcomm_test::for_each_type(bench_algos{}, [&]<class A>(std::type_identity<A>) {
      if constexpr (valid_composition<K, A, transport_t, bench::bench_op<K>, float>) {
        if (st.algo != A::name) return;
        ++matched;
        if (!w) return;
        if (st.protocol == "ll")
          run_kind<K, A, tuning<protocol::ll>>(*w, st, pinned);
        else
          run_kind<K, A, tuning<>>(*w, st, pinned);
      }
    });
  });
  return matched;
}

}  // namespace

int main(int argc, char** argv) {
  bench::program_name = "collcomm_bench_pcie";
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  pcie_settings st;
  std::vector<bench::flag> flags = bench::shared_flags(st);
  flags.insert(flags.end(), {
                                {"-p", &st.protocol, "protocol: simple or ll (ll128 is NVLink's only)"},
                                {"--json", bench::presence{&st.json}, "one JSON object per size instead of the table"},
                            });
  bench::parse_flags(argc, argv, flags,
                     "collcomm_bench_pcie [-k all|KIND] [-a ring|tree|recursive_doubling|automatic] [-p simple|ll] "
                     "[-r RANKS] [-b MIN] [-e MAX] [-f FACTOR] [-n CALLS] [-w WARMUP] [-R REPS] [-C CHANNELS] "
                     "[-s SLOT_BYTES] [-c 0|1] [--json]");
  bench::check_settings(st);
  if (st.protocol == "ll128")
    bench::die(
        "-p ll128 relies on a warp's 128-byte store reaching its reader whole, which PCIe does not give: "
        "use simple or ll");
  if (st.protocol != "simple" && st.protocol != "ll") bench::die("-p must be simple or ll, not " + st.protocol);
  if (st.algo == "automatic" && st.protocol != "simple") bench::die("-a automatic picks each arm's protocol: drop -p");
  if (dispatch(st, nullptr, {}) == 0)
    bench::die("no such composition over pcie_staged: " + st.kind + " " + st.algo +
               " (FIFO algorithms only: ring serves every kind, tree all_reduce, broadcast and reduce, "
               "recursive_doubling all_reduce and all_gather; automatic any)");
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const bench::pinned_bandwidth pinned = bench::measure_pinned_bandwidth();
  if (!st.json)
    std::printf(
        "# pinned copy bandwidth (cudaMemcpyAsync, 256 MiB, median of 9): host->device %.1f GB/s, "
        "device->host %.1f GB/s; both at once: %.1f GB/s each way (%%h2d and %%d2h below are of the one-way "
        "figures)\n",
        pinned.h2d / 1e9, pinned.d2h / 1e9, pinned.both / 1e9);
  try {
    gpu::options o;
    o.connections = gpu::placement::host;  // staged, though the one GPU could reach itself directly
    o.channels = st.channels;
    if (st.slot_bytes) o.slot_bytes = st.slot_bytes;
    o.timeout = std::chrono::milliseconds(30000);
    gpu::world w(st.ranks, {}, o);
    dispatch(st, &w, pinned);
  } catch (const std::exception& e) {
    bench::die(e.what());
  }
  return 0;
}
