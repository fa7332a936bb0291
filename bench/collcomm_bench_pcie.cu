// collcomm_bench_pcie — transport::pcie_staged timed in the nccl-tests mould, next to the
// pinned host<->device copy bandwidth measured in the same run.
//
//   collcomm_bench_pcie [-k all|all_reduce|all_gather|reduce_scatter|broadcast] [-r ranks]
//                       [-b min_bytes] [-e max_bytes] [-f factor] [-n iters] [-w warmup]
//                       [-R repetitions] [-C channels] [-s slot_bytes]        (--help: the defaults)
//
// All ranks are threads of this process on GPU 0, with their connections in pinned host memory
// (gpu::placement::host), so every message goes GPU -> host -> GPU. Ring algorithm, f32, sum.
// Per size (nccl-tests' convention: the larger buffer of a rank), out of place: bytes, count,
// type, op, time, algbw, busbw (bench/driver.hpp), then the PCIe traffic and #wrong (elements of
// every rank's output that differ from the exact reference after the timed calls). Time: in each
// of -R repetitions every rank queues -n calls (half of them, at least 2, from 64 MiB); rank 0's
// stream is timed with CUDA events; the median of the repetitions is printed.
//
// What is compared with the copy bandwidth. Every staged message crosses the GPU's PCIe link
// twice: the sender's kernel writes it into a host slot (device -> host direction) and the
// receiver's kernel reads it from there (host -> device direction). The link is full duplex, so
// each direction is its own limit. Counting, by running the schedule over a primitives object
// that only counts (bench/pcie_link_model.hpp), the slot bytes written (up) and read (down) by all
// ranks in one call, up/time and down/time are the bytes that crossed the link each way per
// second; they are printed as a fraction of the pinned cudaMemcpyAsync device->host and
// host->device bandwidths measured at the start of the run (256 MiB, 3 warm-ups, median of 9).
// The ranks share one GPU here, so its one link carries every rank's traffic.
#include "driver.hpp"
#include "pcie_link_model.hpp"

#include <collcomm/gpu.hpp>

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

struct pcie_settings : bench::settings {
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
  if constexpr (std::is_same_v<K, kind::all_reduce>) {
    return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
  } else if constexpr (std::is_same_v<K, kind::reduce_scatter>) {
    const index_t j = static_cast<index_t>(r) * count + i;
    return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(j % 5));
  } else if constexpr (std::is_same_v<K, kind::all_gather>) {
    return input_value(static_cast<int>(i / count), i % count);
  } else {
    return input_value(0, i);  // broadcast from root 0
  }
}

template <class K>
void run_kind(gpu::world& w, const pcie_settings& st, double h2d, double d2h) {
  using Op = bench::bench_op<K>;
  const int n = st.ranks;
  const std::vector<std::size_t> sizes = bench::message_sizes(st);
  std::printf(
      "# %s ring f32 staged pcie: ranks=%d (one GPU) channels=%d slot_bytes=%zu slots=%d iters=%d reps=%d; "
      "pinned copy h2d=%.1f GB/s d2h=%.1f GB/s\n",
      K::name, n, w.opts().channels, w.opts().slot_bytes, w.opts().slots, st.iters, st.reps, h2d / 1e9, d2h / 1e9);
  std::printf("# %12s %12s %5s %5s %10s %8s %8s %9s %6s %9s %6s %7s\n", "size(B)", "count", "type", "op", "time(us)",
              "algbw", "busbw", "up(GB/s)", "%d2h", "dn(GB/s)", "%h2d", "#wrong");
  const std::size_t max_elems = sizes.back() / sizeof(float);
  std::vector<long> wrong(n);
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
        communicator<transport::pcie_staged> comm(w, r);
        gpu::preload(comm, [&] { bench::call_collective<K, algo::ring>(comm, in, out, index_t{0}, Op{}, s); });
        bench::event_timer timer;  // rank 0's
        for (std::size_t bytes : sizes) {
          const index_t count = bench::count_for<K>(bytes, sizeof(float), n);
          const index_t out_n = std::is_same_v<K, kind::all_gather> ? count * n : count;
          auto call = [&] { bench::call_collective<K, algo::ring>(comm, in, out, count, Op{}, s); };
          COLLCOMM_BENCH_CUDA(cudaMemset(out, 0xA5, max_elems * sizeof(float)));  // poison
          COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
          sync_point.arrive_and_wait();
          const int iters = bench::calls_per_repetition(bytes, st.iters, 2);
          for (int i = 0; i < st.warmup; ++i) call();
          COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
          comm.check();
          const double us = bench::median_of(st.reps, [&] {
            sync_point.arrive_and_wait();
            if (r == 0) timer.start(s);
            for (int i = 0; i < iters; ++i) call();
            const double rank0 = r == 0 ? timer.stop(s, iters) : 0;
            COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
            comm.check();
            sync_point.arrive_and_wait();
            return rank0;
          });
          // The output of the last call, every element against the reference.
          COLLCOMM_BENCH_CUDA(cudaMemcpy(host.data(), out, out_n * sizeof(float), cudaMemcpyDeviceToHost));
          long bad = 0;
          for (index_t i = 0; i < out_n; ++i) bad += host[i] != expected<K>(r, n, count, i);
          wrong[r] = bad;
          sync_point.arrive_and_wait();
          if (r == 0) {
            long wrong_all = 0;
            for (long x : wrong) wrong_all += x;
            coll_args base{};
            base.nranks = n;
            base.count = count;
            double up = 0, down = 0;
            const index_t align = 16 / sizeof(float);
            const index_t slot = static_cast<index_t>(w.opts().slot_bytes / sizeof(float)) / align * align;
            bench::link_bytes<K, algo::ring>(base, w.opts().channels, slot, align, sizeof(float), up, down);
            const double sec = us * 1e-6, algbw = bench::algbw(bytes, us);
            std::printf("  %12zu %12zu %5s %5s %10.1f %8.2f %8.2f %9.2f %5.0f%% %9.2f %5.0f%% %7ld\n", bytes,
                        static_cast<std::size_t>(count), "float", K::reduces ? "sum" : "none", us, algbw,
                        algbw * bench::bus_factor<K>(n), up / sec / 1e9, 100 * up / sec / d2h, down / sec / 1e9,
                        100 * down / sec / h2d, wrong_all);
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

}  // namespace

int main(int argc, char** argv) {
  bench::program_name = "collcomm_bench_pcie";
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  pcie_settings st;
  const std::vector<bench::flag> flags = bench::shared_flags(st, {.algo = nullptr, .check = nullptr});
  bench::parse_flags(argc, argv, flags,
                     "collcomm_bench_pcie [-k all|all_reduce|all_gather|reduce_scatter|broadcast] [-r RANKS] [-b MIN] "
                     "[-e MAX] [-f FACTOR] [-n CALLS] [-w WARMUP] [-R REPS] [-C CHANNELS] [-s SLOT_BYTES]");
  bench::check_settings(st);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const bench::pinned_bandwidth pinned = bench::measure_pinned_bandwidth();
  const double h2d = pinned.h2d, d2h = pinned.d2h, both = pinned.both;
  std::printf(
      "# pinned copy bandwidth (cudaMemcpyAsync, 256 MiB, median of 9): host->device %.1f GB/s, "
      "device->host %.1f GB/s; both at once: %.1f GB/s each way (%%h2d and %%d2h below are of the one-way "
      "figures)\n",
      h2d / 1e9, d2h / 1e9, both / 1e9);
  try {
    gpu::options o;
    o.connections = gpu::placement::host;  // staged, though the one GPU could reach itself directly
    o.channels = st.channels;
    if (st.slot_bytes) o.slot_bytes = st.slot_bytes;
    o.timeout = std::chrono::milliseconds(30000);
    gpu::world w(st.ranks, {}, o);
    if (st.kind == "all" || st.kind == "all_reduce") run_kind<kind::all_reduce>(w, st, h2d, d2h);
    if (st.kind == "all" || st.kind == "all_gather") run_kind<kind::all_gather>(w, st, h2d, d2h);
    if (st.kind == "all" || st.kind == "reduce_scatter") run_kind<kind::reduce_scatter>(w, st, h2d, d2h);
    if (st.kind == "all" || st.kind == "broadcast") run_kind<kind::broadcast>(w, st, h2d, d2h);
  } catch (const std::exception& e) {
    bench::die(e.what());
  }
  return 0;
}
