// bench/collcomm_bench_mp.cu — collcomm_bench's figures with ranks as PROCESSES on one GPU
// (transport::nvlink over CUDA IPC, gpu::world::join; or, with -T pcie, transport::pcie staged
// through POSIX shared memory registered with cudaHostRegister). Run it plainly and it re-executes
// itself as -n ranks (torchrun-style variables, bootstrap::from_env); under torchrun or mpirun
// (RANK / WORLD_SIZE already set) it is one rank. Several processes on one GPU need MPS to be fast.
//
//   collcomm_bench_mp -n 4 -k all_reduce -a ring -b 8 -e 1G -f 4 [-w 5] [-i 20] [-c 0|1] [-C channels] [-S slot_bytes]
//                     [-T nvlink|pcie] [-G 0|1]
//
// Per size, as collcomm_bench: bytes, count, type, op, time (µs, the slowest rank's mean of -i
// calls queued back to back), algbw, busbw (nccl-tests factors), mem% (the modeled device-memory
// traffic of all ranks' kernels, bench/traffic_model.hpp, over the time, as a fraction of the
// copy bandwidth measured in the same run) and #wrong (a checked call after the timed ones:
// inputs are small integers, exact in any order, made and checked on the GPU), out of place,
// then in place. f32, sum. -G 1: each process captures its -i calls into a CUDA graph (one per
// size and placement, after the warm-up calls) and times one replay of it; the graph is replayed
// once untimed first.
//
// -T pcie: the staged path across processes (FIFO algorithms only: ring, tree). Rank 0 first
// measures the pinned host<->device copy bandwidth (bench/pcie_link_model.hpp: each way alone and
// both at once); instead of mem%, each line gives d2h% and h2d%: the slot bytes all ranks' kernels
// wrote to (up) and read from (down) host memory in one call, counted by running the schedule,
// over the time, as a fraction of the one-way pinned copy bandwidths (every message crosses the
// link twice: up into the host slot, down out of it). The connections take n^2 x channels x slots
// x slot_bytes of /dev/shm (8 processes, 8 channels, 8 x 256 KiB: 1 GiB).
// NOT YET RUN ON A GPU with -T pcie (2026-12-03).
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/collcomm.hpp>
#include <collcomm/collectives.hpp>
#include <collcomm/transport/nvlink.hpp>
#include <collcomm/transport/pcie.hpp>

#include "pcie_link_model.hpp"
#include "traffic_model.hpp"

#include <cuda_runtime.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

using namespace collcomm;
using nvcomm = communicator<transport::nvlink>;
using pcomm = communicator<transport::pcie>;

namespace {

#define CUDA_OK(x)                                                                               \
  do {                                                                                           \
    const cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "collcomm_bench_mp: %s: %s\n", #x, cudaGetErrorString(e_));           \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

struct settings {
  int ranks = 2;
  std::string kind = "all_reduce", algo = "ring", transport = "nvlink";
  std::size_t min_bytes = 8, max_bytes = std::size_t{1} << 30;
  double factor = 4;
  int warmup = 5, iters = 20, channels = 0;
  std::size_t slot_bytes = 0;
  bool check = true, graph = false;
};

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1 << 10; break;
    case 'M': case 'm': v *= 1 << 20; break;
    case 'G': case 'g': v *= 1 << 30; break;
    default: break;
  }
  return static_cast<std::size_t>(v);
}

// The input of rank r at element i: a small integer, so every sum of 8 ranks is exact.
__host__ __device__ inline float value(int r, index_t i) { return static_cast<float>(static_cast<int>((static_cast<index_t>(r) * 3 + i) % 5) - 2); }

template <class K>
__device__ float expected(int me, int n, index_t count, int root, index_t i) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i);
    return s;
  } else if constexpr (std::is_same_v<K, kind::reduce_scatter>) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += value(r, me * count + i);
    return s;
  } else if constexpr (std::is_same_v<K, kind::all_gather>) {
    return value(static_cast<int>(i / count), i % count);
  } else {
    return value(root, i);
  }
}

__global__ void fill(float* p, index_t n, int r) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<index_t>(gridDim.x) * blockDim.x) p[i] = value(r, i);
}
template <class K>
__global__ void count_wrong(const float* p, index_t n, int me, int nr, index_t count, int root, unsigned long long* wrong) {
  unsigned long long w = 0;
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<index_t>(gridDim.x) * blockDim.x)
    w += p[i] != expected<K>(me, nr, count, root, i);
  if (w) atomicAdd(wrong, w);
}

template <class K>
double bus_factor(int n) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) return 2.0 * (n - 1) / n;
  else if constexpr (std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_gather>) return double(n - 1) / n;
  else return 1.0;
}

template <class K, class A, class Comm>
void call(Comm& c, const float* in, float* out, index_t count, cudaStream_t s) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) all_reduce<A>(c, in, out, count, op::sum{}, s);
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>) reduce_scatter<A>(c, in, out, count, op::sum{}, s);
  else if constexpr (std::is_same_v<K, kind::all_gather>) all_gather<A>(c, in, out, count, s);
  else broadcast<A>(c, in, out, count, 0, s);
}

template <class T>
std::vector<T> gather(bootstrap::tcp& boot, T mine) {
  std::vector<T> all(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::as_bytes(std::span<const T>(&mine, 1)), std::as_writable_bytes(std::span<T>(all)));
  return all;
}

// Device copy bandwidth: (read + write bytes) / time of a 1 GiB device-to-device copy, median of 5.
double copy_bandwidth() {
  const std::size_t bytes = std::size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * bytes / (t[t.size() / 2] * 1e-3);
}

template <class K, class A, class Comm>
int run(const settings& st) {
  constexpr bool pcie = std::is_same_v<Comm, pcomm>;
  if constexpr (pcie && A::needs_direct) {
    std::fprintf(stderr, "collcomm_bench_mp: -T pcie runs FIFO algorithms only (ring, tree); %s loads peers' buffers\n", A::name);
    return 1;
  } else {
  auto boot = bootstrap::from_env(std::chrono::seconds(120));
  const int n = boot.size(), me = boot.rank();
  CUDA_OK(cudaSetDevice(0));
  gpu::options o;
  if (st.channels > 0) o.channels = st.channels;
  if (st.slot_bytes > 0) o.slot_bytes = st.slot_bytes;
  o.timeout = std::chrono::seconds(60);
  if (A::needs_direct) o.window_bytes = std::max<std::size_t>(o.window_bytes, (st.max_bytes + 255) / 256 * 256);
  if (pcie) o.window_bytes = 0;  // staged: no window (and the option is not used)
  gpu::preload<K, A, float, std::conditional_t<K::reduces, op::sum, op::none>>();
  double copy_bw = 0;
  collcomm_bench::pinned_bandwidth pinned{};
  if (me == 0) {
    if constexpr (pcie) pinned = collcomm_bench::measure_pinned_bandwidth();
    else copy_bw = copy_bandwidth();
  }
  boot.barrier();
  Comm comm(boot, 0, o);
  const gpu::options ro = comm.gpu_world().opts();
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(st.min_bytes); b <= static_cast<double>(st.max_bytes) * 1.0001; b *= st.factor) sizes.push_back(static_cast<std::size_t>(b));
  const std::size_t max_bytes = sizes.back();
  float *in = nullptr, *out = nullptr;
  unsigned long long* wrong = nullptr;
  CUDA_OK(cudaMalloc(&in, max_bytes + 256));
  CUDA_OK(cudaMalloc(&out, max_bytes + 256));
  CUDA_OK(cudaMalloc(&wrong, sizeof *wrong));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  if (me == 0 && !pcie) {
    std::printf("# %s %s f32 sum processes=%d (one GPU, nvlink IPC) channels=%d slot_bytes=%zu iters=%d graph=%d copy_bw=%.1f GB/s\n", K::name, A::name, n,
                ro.channels, ro.slot_bytes, st.iters, st.graph, copy_bw / 1e9);
    std::printf("# %12s %12s %5s %5s | %9s %9s %9s %6s %6s | %9s %9s %9s %6s %6s\n", "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw", "mem%",
                "#wrong", "time(us)", "algbw", "busbw", "mem%", "#wrong");
  } else if (me == 0) {
    std::printf("# %s %s f32 sum processes=%d (one GPU, pcie staged through POSIX shm + cudaHostRegister) channels=%d slot_bytes=%zu slots=%d iters=%d; "
                "pinned copy h2d=%.1f GB/s d2h=%.1f GB/s, both at once %.1f GB/s each way\n",
                K::name, A::name, n, ro.channels, ro.slot_bytes, ro.slots, st.iters, pinned.h2d / 1e9, pinned.d2h / 1e9, pinned.both / 1e9);
    std::printf("# %12s %12s %5s %5s | %9s %9s %9s %5s %5s %6s | %9s %9s %9s %5s %5s %6s\n", "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw",
                "d2h%", "h2d%", "#wrong", "time(us)", "algbw", "busbw", "d2h%", "h2d%", "#wrong");
  }
  const bool has_ip = supports_in_place<A>;
  for (std::size_t bytes : sizes) {
    const index_t total = bytes / sizeof(float);
    const bool per_rank = std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_gather>;
    const index_t count = per_rank ? total / n : total;
    if (count == 0) continue;
    coll_args base{};
    base.nranks = n;
    base.count = count;
    const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
    if (me == 0) std::printf("  %12zu %12zu %5s %5s |", bytes, static_cast<std::size_t>(count), "f32", K::reduces ? "sum" : "none");
    for (int place = 0; place < (has_ip ? 2 : 1); ++place) {
      // In place: all_reduce/broadcast in == out; all_gather in = out + rank*count; reduce_scatter out = in + rank*count.
      float* cin = in;
      float* cout = out;
      float* fill_at = in;
      if (place == 1) {
        if constexpr (std::is_same_v<K, kind::all_gather>) cin = out + me * count, fill_at = cin;
        else if constexpr (std::is_same_v<K, kind::reduce_scatter>) cin = in, cout = in + me * count;
        else cin = out, cout = out, fill_at = out;
      }
      const int iters = bytes >= (std::size_t{64} << 20) ? std::max(2, st.iters / 4) : st.iters;
      fill<<<264, 512, 0, s>>>(fill_at, in_n, me);
      CUDA_OK(cudaStreamSynchronize(s));
      boot.barrier();
      for (int i = 0; i < st.warmup; ++i) call<K, A>(comm, cin, cout, count, s);
      CUDA_OK(cudaStreamSynchronize(s));
      boot.barrier();
      cudaGraphExec_t exec = nullptr;
      if (st.graph) {
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < iters; ++i) call<K, A>(comm, cin, cout, count, s);
        cudaGraph_t graph = nullptr;
        CUDA_OK(cudaStreamEndCapture(s, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        cudaGraphDestroy(graph);
        CUDA_OK(cudaGraphUpload(exec, s));
        CUDA_OK(cudaGraphLaunch(exec, s));  // untimed replay
        CUDA_OK(cudaStreamSynchronize(s));
        comm.check();
        boot.barrier();
      }
      cudaEventRecord(e0, s);
      if (exec) CUDA_OK(cudaGraphLaunch(exec, s));
      else
        for (int i = 0; i < iters; ++i) call<K, A>(comm, cin, cout, count, s);
      cudaEventRecord(e1, s);
      CUDA_OK(cudaEventSynchronize(e1));
      if (exec) cudaGraphExecDestroy(exec);
      comm.check();
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      const auto times = gather(boot, static_cast<double>(ms) * 1e3 / iters);
      const double us = *std::max_element(times.begin(), times.end());
      long long w = -1;
      if (st.check) {
        fill<<<264, 512, 0, s>>>(fill_at, in_n, me);
        CUDA_OK(cudaMemsetAsync(wrong, 0, sizeof *wrong, s));
        if (place == 0) CUDA_OK(cudaMemsetAsync(out, 0xA5, out_n * sizeof(float), s));
        CUDA_OK(cudaStreamSynchronize(s));
        boot.barrier();
        call<K, A>(comm, cin, cout, count, s);
        count_wrong<K><<<264, 512, 0, s>>>(cout, out_n, me, n, count, 0, wrong);
        unsigned long long h = 0;
        CUDA_OK(cudaMemcpyAsync(&h, wrong, sizeof h, cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaStreamSynchronize(s));
        comm.check();
        long long sum = 0;
        for (auto x : gather(boot, static_cast<long long>(h))) sum += x;
        w = sum;
      }
      if (me == 0) {
        const double algbw = bytes / (us * 1e-6) / 1e9;
        const index_t align = 4;
        const index_t slot = static_cast<index_t>(ro.slot_bytes / sizeof(float)) / align * align;
        if constexpr (pcie) {
          double up = 0, down = 0;
          collcomm_bench::link_bytes<K, A>(base, ro.channels, slot, align, sizeof(float), up, down);
          const double sec = us * 1e-6;
          std::printf(" %9.2f %9.2f %9.2f %4.0f%% %4.0f%% %6lld %s", us, algbw, algbw * bus_factor<K>(n), 100 * up / sec / pinned.d2h,
                      100 * down / sec / pinned.h2d, w, place == 1 || !has_ip ? "\n" : "|");
        } else {
          const double mem = collcomm_bench::traffic_bytes<K, A>(base, ro.channels, slot, align, sizeof(float)) / (us * 1e-6) / copy_bw;
          std::printf(" %9.2f %9.2f %9.2f %5.0f%% %6lld %s", us, algbw, algbw * bus_factor<K>(n), mem * 100, w, place == 1 || !has_ip ? "\n" : "|");
        }
        std::fflush(stdout);
      }
    }
  }
  cudaFree(in);
  cudaFree(out);
  cudaFree(wrong);
  cudaStreamDestroy(s);
  return 0;
  }
}

template <class K, class Comm>
int run_algo(const settings& st) {
  if (st.algo == "ring") return run<K, algo::ring, Comm>(st);
  if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::broadcast>)
    if (st.algo == "tree") return run<K, algo::tree, Comm>(st);
  if constexpr (std::is_same_v<K, kind::all_reduce>) {
    if (st.algo == "one_shot") return run<K, algo::one_shot, Comm>(st);
    if (st.algo == "two_shot") return run<K, algo::two_shot, Comm>(st);
  }
  std::fprintf(stderr, "collcomm_bench_mp: algorithm '%s' is not built for %s (ring; tree for all_reduce and broadcast; one_shot, two_shot for all_reduce)\n",
               st.algo.c_str(), K::name);
  return 1;
}

// Re-executes this binary as n ranks on loopback and waits for them.
int launch(int n, char** argv) {
  auto id = bootstrap::unique_id::create();
  bootstrap::release_listener(id);
  char tok[17];
  std::snprintf(tok, sizeof tok, "%016llx", static_cast<unsigned long long>(id.token()));
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(id.port()));
    env.push_back(std::string("COLLCOMM_JOB_TOKEN=") + tok);
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(n));
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t p = -1;
    if (::posix_spawn(&p, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0) {
      std::fprintf(stderr, "collcomm_bench_mp: posix_spawn failed\n");
      return 1;
    }
    pids.push_back(p);
  }
  int worst = 0;
  for (pid_t p : pids) {
    int st = 0;
    ::waitpid(p, &st, 0);
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    worst = std::max(worst, code);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  settings st;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "-n") st.ranks = std::atoi(v);
    else if (k == "-k") st.kind = v;
    else if (k == "-a") st.algo = v;
    else if (k == "-b") st.min_bytes = parse_size(v);
    else if (k == "-e") st.max_bytes = parse_size(v);
    else if (k == "-f") st.factor = std::atof(v);
    else if (k == "-w") st.warmup = std::atoi(v);
    else if (k == "-i") st.iters = std::atoi(v);
    else if (k == "-c") st.check = std::atoi(v) != 0;
    else if (k == "-C") st.channels = std::atoi(v);
    else if (k == "-S") st.slot_bytes = parse_size(v);
    else if (k == "-T") st.transport = v;
    else if (k == "-G") st.graph = std::atoi(v) != 0;
    else {
      std::fprintf(stderr, "collcomm_bench_mp: unknown option %s\n", k.c_str());
      return 1;
    }
  }
  if (st.transport != "nvlink" && st.transport != "pcie") {
    std::fprintf(stderr, "collcomm_bench_mp: -T %s is not one of nvlink, pcie\n", st.transport.c_str());
    return 1;
  }
  if (!std::getenv("RANK")) return launch(st.ranks, argv);  // the launcher: make the ranks
  try {
    const bool pcie = st.transport == "pcie";
    if (st.kind == "all_reduce") return pcie ? run_algo<kind::all_reduce, pcomm>(st) : run_algo<kind::all_reduce, nvcomm>(st);
    if (st.kind == "reduce_scatter") return pcie ? run_algo<kind::reduce_scatter, pcomm>(st) : run_algo<kind::reduce_scatter, nvcomm>(st);
    if (st.kind == "all_gather") return pcie ? run_algo<kind::all_gather, pcomm>(st) : run_algo<kind::all_gather, nvcomm>(st);
    if (st.kind == "broadcast") return pcie ? run_algo<kind::broadcast, pcomm>(st) : run_algo<kind::broadcast, nvcomm>(st);
    std::fprintf(stderr, "collcomm_bench_mp: kind '%s' is not one of all_reduce, reduce_scatter, all_gather, broadcast\n", st.kind.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collcomm_bench_mp rank %s: %s\n", std::getenv("RANK"), e.what());
    return 2;
  }
}
