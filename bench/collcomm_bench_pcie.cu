// collcomm_bench_pcie — transport::pcie's staged path timed in the nccl-tests mould, next to the
// pinned host<->device copy bandwidth measured in the same run.
//
//   collcomm_bench_pcie [-k all|all_reduce|all_gather|reduce_scatter|broadcast] [-r ranks]
//                       [-b min_bytes] [-e max_bytes] [-f factor] [-n iters] [-w warmup]
//                       [-R repetitions] [-C channels] [-s slot_bytes]
//
// All ranks are threads of this process on GPU 0, with their connections in pinned host memory
// (gpu::placement::host), so every message goes GPU -> host -> GPU. Ring algorithm, f32, sum.
// Per size (nccl-tests' convention: the larger buffer of a rank), out of place: bytes, count,
// type, op, time (µs per call: the median of -R repetitions of -n back-to-back calls), algbw,
// busbw (nccl-tests factors), then the PCIe traffic and #wrong (elements of every rank's output
// that differ from the exact reference after the timed calls).
//
// What is compared with the copy bandwidth. Every staged message crosses the GPU's PCIe link
// twice: the sender's kernel writes it into a host slot (device -> host direction) and the
// receiver's kernel reads it from there (host -> device direction). The link is full duplex, so
// each direction is its own limit. Counting, by running the schedule over a primitives object
// that only counts (bench/traffic_model.hpp's idea), the slot bytes written (up) and read (down)
// by all ranks in one call, up/time and down/time are the bytes that crossed the link each way
// per second; they are printed as a fraction of the pinned cudaMemcpyAsync device->host and
// host->device bandwidths measured at the start of the run (256 MiB, 3 warm-ups, median of 9).
// The ranks share one GPU here, so its one link carries every rank's traffic.
#include "pcie_link_model.hpp"

#include <collcomm/algo/ring.hpp>
#include <collcomm/collectives.hpp>
#include <collcomm/transport/pcie.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;

namespace {

#define CUDA_OK(x)                                                                                      \
  do {                                                                                                  \
    const cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)

struct settings {
  std::string kind = "all";
  int ranks = 4;
  std::size_t min_bytes = std::size_t{1} << 20, max_bytes = std::size_t{256} << 20;
  double factor = 4;
  int iters = 10, warmup = 3, reps = 5;
  int channels = 0;  // 0: the world's automatic choice
  std::size_t slot_bytes = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The pinned copy bandwidth and the link traffic model: bench/pcie_link_model.hpp.
using collcomm_bench::link_bytes;

template <class K>
double bus_factor(int n) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) return 2.0 * (n - 1) / n;
  else if constexpr (std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_gather>) return double(n - 1) / n;
  else return 1.0;
}

// Rank r's input element i, and the exact reference of output element i on rank r: small
// integers, exact in f32 in any order of summation.
float input_value(int r, index_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 5)); }
template <class K>
float expected(int r, int n, index_t count, index_t i) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>) {
    const index_t j = static_cast<index_t>(r) * count + i;
    return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(j % 5));
  } else if constexpr (std::is_same_v<K, kind::all_gather>) return input_value(static_cast<int>(i / count), i % count);
  else return input_value(0, i);  // broadcast from root 0
}

template <class K>
void call(communicator<transport::pcie>& comm, const float* in, float* out, index_t count, cudaStream_t s) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>) reduce_scatter<algo::ring>(comm, in, out, count, op::sum{}, s);
  else if constexpr (std::is_same_v<K, kind::all_gather>) all_gather<algo::ring>(comm, in, out, count, s);
  else broadcast<algo::ring>(comm, in, out, count, 0, s);
}

template <class K>
void run_kind(gpu::world& w, const settings& st, double h2d, double d2h) {
  using Op = std::conditional_t<K::reduces, op::sum, op::none>;
  const int n = st.ranks;
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(st.min_bytes); b <= static_cast<double>(st.max_bytes) * 1.0001; b *= st.factor) sizes.push_back(static_cast<std::size_t>(b));
  std::printf("# %s ring f32 staged pcie: ranks=%d (one GPU) channels=%d slot_bytes=%zu slots=%d iters=%d reps=%d; pinned copy h2d=%.1f GB/s d2h=%.1f GB/s\n",
              K::name, n, w.opts().channels, w.opts().slot_bytes, w.opts().slots, st.iters, st.reps, h2d / 1e9, d2h / 1e9);
  std::printf("# %12s %12s %5s %5s %10s %8s %8s %9s %6s %9s %6s %7s\n", "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw", "up(GB/s)",
              "%d2h", "dn(GB/s)", "%h2d", "#wrong");
  const std::size_t max_elems = sizes.back() / sizeof(float);
  std::vector<long> wrong(n);
  std::vector<double> times;
  std::barrier sync_point(n);
  std::vector<std::thread> threads;
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        CUDA_OK(cudaSetDevice(w.device_of(r)));
        cudaStream_t s;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float *in = nullptr, *out = nullptr;
        CUDA_OK(cudaMalloc(&in, max_elems * sizeof(float) + 64));
        CUDA_OK(cudaMalloc(&out, max_elems * sizeof(float) + 64));
        std::vector<float> host(max_elems);
        for (std::size_t i = 0; i < max_elems; ++i) host[i] = input_value(r, static_cast<index_t>(i));
        CUDA_OK(cudaMemcpy(in, host.data(), max_elems * sizeof(float), cudaMemcpyHostToDevice));
        gpu::preload<K, algo::ring, float, Op>();
        communicator<transport::pcie> comm(w, r);
        for (std::size_t bytes : sizes) {
          const index_t count = (std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::reduce_scatter>) ? bytes / sizeof(float) / n : bytes / sizeof(float);
          const index_t out_n = std::is_same_v<K, kind::all_gather> ? count * n : count;
          CUDA_OK(cudaMemset(out, 0xA5, max_elems * sizeof(float)));  // poison
          CUDA_OK(cudaDeviceSynchronize());
          sync_point.arrive_and_wait();
          const int iters = bytes >= (std::size_t{64} << 20) ? std::max(2, st.iters / 2) : st.iters;
          for (int i = 0; i < st.warmup; ++i) call<K>(comm, in, out, count, s);
          CUDA_OK(cudaStreamSynchronize(s));
          comm.check();
          std::vector<double> t;
          for (int rep = 0; rep < st.reps; ++rep) {
            sync_point.arrive_and_wait();
            if (r == 0) CUDA_OK(cudaEventRecord(start, s));
            for (int i = 0; i < iters; ++i) call<K>(comm, in, out, count, s);
            if (r == 0) CUDA_OK(cudaEventRecord(stop, s));
            CUDA_OK(cudaStreamSynchronize(s));
            comm.check();
            sync_point.arrive_and_wait();
            if (r == 0) {
              float ms = 0;
              CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
              t.push_back(ms * 1e3 / iters);
            }
          }
          // The output of the last call, every element against the reference.
          CUDA_OK(cudaMemcpy(host.data(), out, out_n * sizeof(float), cudaMemcpyDeviceToHost));
          long bad = 0;
          for (index_t i = 0; i < out_n; ++i) bad += host[i] != expected<K>(r, n, count, i);
          wrong[r] = bad;
          sync_point.arrive_and_wait();
          if (r == 0) {
            const double us = median(t);
            long wrong_all = 0;
            for (long x : wrong) wrong_all += x;
            coll_args base{};
            base.nranks = n;
            base.count = count;
            double up = 0, down = 0;
            const index_t align = 16 / sizeof(float);
            link_bytes<K, algo::ring>(base, w.opts().channels, static_cast<index_t>(w.opts().slot_bytes / sizeof(float)) / align * align, align, sizeof(float), up, down);
            const double sec = us * 1e-6, algbw = bytes / sec / 1e9;
            std::printf("  %12zu %12zu %5s %5s %10.1f %8.2f %8.2f %9.2f %5.0f%% %9.2f %5.0f%% %7ld\n", bytes, static_cast<std::size_t>(count), "float",
                        K::reduces ? "sum" : "none", us, algbw, algbw * bus_factor<K>(n), up / sec / 1e9, 100 * up / sec / d2h, down / sec / 1e9,
                        100 * down / sec / h2d, wrong_all);
            std::fflush(stdout);
          }
          sync_point.arrive_and_wait();
        }
        CUDA_OK(cudaStreamSynchronize(s));
        sync_point.arrive_and_wait();
        cudaFree(in);
        cudaFree(out);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {  // a stall (comm.check) or a refused call: no figure is right now
        std::fprintf(stderr, "error on rank %d: %s\n", r, e.what());
        std::fflush(stdout);
        std::_Exit(1);
      }
    });
  for (auto& t : threads) t.join();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

std::size_t parse_bytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<std::size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  settings st;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "-k") st.kind = v;
    else if (a == "-r") st.ranks = std::atoi(v);
    else if (a == "-b") st.min_bytes = parse_bytes(v);
    else if (a == "-e") st.max_bytes = parse_bytes(v);
    else if (a == "-f") st.factor = std::atof(v);
    else if (a == "-n") st.iters = std::atoi(v);
    else if (a == "-w") st.warmup = std::atoi(v);
    else if (a == "-R") st.reps = std::atoi(v);
    else if (a == "-C") st.channels = std::atoi(v);
    else if (a == "-s") st.slot_bytes = parse_bytes(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (st.ranks < 1 || st.factor <= 1 || st.iters < 1 || st.reps < 1 || st.min_bytes > st.max_bytes) {
    std::fprintf(stderr, "bad options\n");
    return 2;
  }
  const collcomm_bench::pinned_bandwidth pinned = collcomm_bench::measure_pinned_bandwidth();
  const double h2d = pinned.h2d, d2h = pinned.d2h, both = pinned.both;
  std::printf("# pinned copy bandwidth (cudaMemcpyAsync, 256 MiB, median of 9): host->device %.1f GB/s, device->host %.1f GB/s; "
              "both at once: %.1f GB/s each way (%%h2d and %%d2h below are of the one-way figures)\n",
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
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
