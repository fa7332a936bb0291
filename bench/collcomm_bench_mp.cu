// collcomm_bench_mp — collcomm_bench's figures with ranks as PROCESSES on one GPU
// (transport::nvlink over CUDA IPC, gpu::join_world; or, with -T pcie, transport::pcie_staged
// through POSIX shared memory registered with cudaHostRegister). Run it plainly and it re-executes
// itself as -n ranks (torchrun-style variables, bootstrap::from_env); under torchrun or mpirun
// (RANK / WORLD_SIZE already set) it is one rank. Several processes on one GPU need MPS to be fast.
//
//   collcomm_bench_mp -n 4 -k all_reduce -a ring -b 8 -e 1G -f 4 [-w 5] [-i 20] [-c 0|1] [-C channels]
//                     [-S slot_bytes] [-T nvlink|pcie] [-G 0|1]        (--help lists every flag)
//
// Per size, as collcomm_bench (bench/driver.hpp): bytes, count, type, op, time, algbw, busbw,
// mem% (the modeled device-memory traffic of all ranks' kernels, bench/traffic_model.hpp, over
// the time, as a fraction of the copy bandwidth measured in the same run) and #wrong (a checked
// call after the timed ones: inputs are small integers, exact in any order, made and checked on
// the GPU), out of place, then in place. f32, sum. Time: each process queues -i calls (a quarter
// of them, at least 2, from 64 MiB) on its stream between two CUDA events, once; the time is the
// slowest process's µs per call. -G 1: each process captures its calls into a CUDA graph (one per
// size and placement, after the warm-up calls), replays it once untimed, then times one replay.
// -a automatic (all_reduce over nvlink): algo::automatic with tables/nvlink.hpp, the arm it takes
// printed where it changes (`# automatic from BYTES B: ARM`), mem% that arm's.
//
// -T net: transport::net<socket> with GPU buffers (FIFO algorithms only): each rank's proxy thread
// carries its kernels' messages over loopback TCP; the columns are -T pcie's. -H HOSTS: the ranks
// pretend to be HOSTS hosts of consecutive ranks (rank r on host r * HOSTS / n): ranks of one host
// reach each other through GPU memory (CUDA IPC) and only the others through the proxy, unless
// COLLCOMM_NET_SAME_HOST=network; -a hierarchical runs hierarchical<ring, ring> over those hosts.
// Where some messages take GPU memory, the d2h% and h2d% columns are left out (-).
// -T pcie: the staged path across processes (FIFO algorithms only: ring, tree). Rank 0 first
// measures the pinned host<->device copy bandwidth (bench/pcie_link_model.hpp: each way alone and
// both at once); instead of mem%, each line gives d2h% and h2d%: the slot bytes all ranks' kernels
// wrote to (up) and read from (down) host memory in one call, counted by running the schedule,
// over the time, as a fraction of the one-way pinned copy bandwidths (every message crosses the
// link twice: up into the host slot, down out of it). The connections take n^2 x channels x slots
// x slot_bytes of /dev/shm (8 processes, 8 channels, 8 x 256 KiB: 1 GiB).
#include "driver.hpp"
#include "pcie_link_model.hpp"
#include "traffic_model.hpp"

#include <collcomm/bootstrap/env.hpp>
#include <collcomm/gpu.hpp>

#include <cuda_runtime.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <vector>

extern char** environ;

namespace {
using namespace collcomm;
namespace bench = collcomm_bench;
using nvcomm = communicator<transport::nvlink>;
using pcomm = communicator<transport::pcie_staged>;
using ncomm = communicator<transport::net<transport::socket>>;

// Whether A may load peers' buffers (a direct algorithm, or automatic, whose arms may be): the
// window then holds the largest call.
template <class A>
constexpr bool may_load_peers() {
  if constexpr (is_automatic<A>)
    return true;
  else
    return A::needs_direct;
}

struct mp_settings : bench::settings {
  std::string transport = "nvlink";
  int hosts = 0;  // -T net: pretend hosts (0: every rank its real host)
  int threads = 512;  // -t: threads per block: 512, or 1024 for one_shot
  mp_settings() {
    max_bytes = std::size_t{1} << 30;
    factor = 4;
  }
};

// The input of rank r at element i: a small integer, so every sum of 8 ranks is exact.
__host__ __device__ inline float value(int r, index_t i) {
  return static_cast<float>(static_cast<int>((static_cast<index_t>(r) * 3 + i) % 5) - 2);
}

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
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    p[i] = value(r, i);
}
template <class K>
__global__ void count_wrong(const float* p, index_t n, int me, int nr, index_t count, int root,
                            unsigned long long* wrong) {
  unsigned long long w = 0;
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    w += p[i] != expected<K>(me, nr, count, root, i);
  if (w) atomicAdd(wrong, w);
}

template <class T>
std::vector<T> gather(bootstrap::tcp& boot, T mine) {
  std::vector<T> all(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::as_bytes(std::span<const T>(&mine, 1)), std::as_writable_bytes(std::span<T>(all)));
  return all;
}

template <class K, class A, class Comm, class Tu = tuning<>>
int run(const mp_settings& st) {
  // net: the kernels' FIFOs in pinned host memory as pcie's, a proxy thread per rank moving them
  // over loopback TCP: the PCIe columns mean the same.
  constexpr bool net = std::is_same_v<Comm, ncomm>;
  constexpr bool pcie = std::is_same_v<Comm, pcomm> || net;
  using Op = bench::bench_op<K>;
  if constexpr (pcie && may_load_peers<A>()) {
    std::fprintf(stderr, "collcomm_bench_mp: -T pcie runs FIFO algorithms only (ring, tree); %s loads peers' buffers\n",
                 A::name);
    return 1;
  } else {
    auto boot = bootstrap::from_env(std::chrono::seconds(120));
    const int n = boot.size(), me = boot.rank();
    COLLCOMM_BENCH_CUDA(cudaSetDevice(0));
    gpu::options o;
    if (st.channels > 0) o.channels = st.channels;
    if (st.slot_bytes > 0) o.slot_bytes = st.slot_bytes;
    o.timeout = std::chrono::seconds(60);
    if (may_load_peers<A>()) o.window_bytes = std::max<std::size_t>(o.window_bytes, (st.max_bytes + 255) / 256 * 256);
    if (pcie) o.window_bytes = 0;  // staged: no window (and the option is not used)
    double copy_bw = 0;
    bench::pinned_bandwidth pinned{};
    if (me == 0) {
      if constexpr (pcie)
        pinned = bench::measure_pinned_bandwidth();
      else
        copy_bw = bench::copy_bandwidth(1, 5);
    }
    boot.barrier();
    Comm comm = [&] {
      if constexpr (net) {
        host::net_options no;
        if (st.hosts > 0) no.host_id = 1 + static_cast<std::uint64_t>(me * st.hosts / n);
        return Comm(boot, 0, o, no);
      } else {
        return Comm(boot, 0, o);
      }
    }();
    // Whether every message crosses the host link twice (the d2h% and h2d% columns' model).
    bool all_staged = true;
    if constexpr (net)
      for (int p = 0; p < n; ++p) all_staged = all_staged && (p == me || comm.over_network(p));
    for (int v : gather(boot, static_cast<int>(all_staged))) all_staged = all_staged && v != 0;
    const gpu::options ro = [&] {
      if constexpr (net) {
        gpu::options r = o;
        if (r.channels == 0) r.channels = 4;  // communicator<net>'s default
        return r;
      } else {
        return comm.gpu_world().opts();
      }
    }();
    const std::vector<std::size_t> sizes = bench::message_sizes(st);
    const std::size_t max_bytes = sizes.back();
    float* in = nullptr;
    float* out = nullptr;
    unsigned long long* wrong = nullptr;
    COLLCOMM_BENCH_CUDA(cudaMalloc(&in, max_bytes + 256));
    COLLCOMM_BENCH_CUDA(cudaMalloc(&out, max_bytes + 256));
    COLLCOMM_BENCH_CUDA(cudaMalloc(&wrong, sizeof *wrong));
    cudaStream_t s;
    COLLCOMM_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // Every rank loads its kernel before any rank launches one (gpu::preload says why).
    if constexpr (net)
      gpu::preload_composition<K, A, float, Op, Tu, transport::pcie_staged>();
    else
      gpu::preload(comm, [&] { bench::call_collective<K, A, Tu>(comm, in, out, index_t{0}, Op{}, s); });
    boot.barrier();
    bench::event_timer timer;
    if (me == 0 && !pcie) {
      std::printf(
          "# %s %s f32 sum processes=%d (one GPU, nvlink IPC) channels=%d slot_bytes=%zu threads=%d iters=%d "
          "graph=%d copy_bw=%.1f GB/s\n",
          K::name, A::name, n, ro.channels, ro.slot_bytes, Tu::threads, st.iters, st.graph, copy_bw / 1e9);
      bench::print_table_header(bench::text("%6s", "mem%"));
    } else if (me == 0) {
      std::printf(
          "# %s %s f32 sum processes=%d (one GPU, %s%s) "
          "channels=%d slot_bytes=%zu slots=%d iters=%d; "
          "pinned copy h2d=%.1f GB/s d2h=%.1f GB/s, both at once %.1f GB/s each way\n",
          K::name, A::name, n,
          net ? "net<socket>: FIFOs in pinned host memory, a proxy thread per rank over loopback TCP"
              : "pcie staged through POSIX shm + cudaHostRegister",
          !net || all_staged ? ""
                             : bench::text("; %d pretend hosts, ranks of one host through GPU memory", st.hosts).c_str(),
          ro.channels, ro.slot_bytes, ro.slots, st.iters, pinned.h2d / 1e9, pinned.d2h / 1e9,
          pinned.both / 1e9);
      bench::print_table_header(bench::text("%5s %5s", "d2h%", "h2d%"));
    }
    const bool has_ip = supports_in_place<A>;
    std::string last_arm;
    for (std::size_t bytes : sizes) {
      const index_t count = bench::count_for<K>(bytes, sizeof(float), n);
      if (count == 0) continue;
      coll_args base{};
      base.nranks = n;
      base.count = count;
      if constexpr (net) base.topo = &comm.hosts().view();
      const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
      if constexpr (is_automatic<A> && !pcie) {  // the arm automatic takes, where it changes
        const std::string arm = bench::arm_of<K, A, Tu, transport::nvlink, float, Op>(comm.facts(), count, false);
        if (me == 0 && arm != last_arm) std::printf("# automatic from %zu B: %s\n", bytes, arm.c_str());
        last_arm = arm;
      }
      if (me == 0) bench::print_row_start(bytes, count, "f32", K::reduces ? "sum" : "none");
      for (int place = 0; place < (has_ip ? 2 : 1); ++place) {
        // In place: one buffer holds input and output (reduce_scatter's is `in`, the others' `out`).
        float* cin = in;
        float* cout = out;
        if (place == 1) {
          float* buffer = std::is_same_v<K, kind::reduce_scatter> ? in : out;
          const bench::in_place_offsets at = bench::in_place_layout<K>(me, count);
          cin = buffer + at.input;
          cout = buffer + at.output;
        }
        const int iters = bench::calls_per_repetition(bytes, st.iters);
        fill<<<264, 512, 0, s>>>(cin, in_n, me);
        COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
        boot.barrier();
        for (int i = 0; i < st.warmup; ++i) bench::call_collective<K, A, Tu>(comm, cin, cout, count, Op{}, s);
        COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
        boot.barrier();
        cudaGraphExec_t exec = nullptr;
        if (st.graph) {
          COLLCOMM_BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < iters; ++i) bench::call_collective<K, A, Tu>(comm, cin, cout, count, Op{}, s);
          cudaGraph_t graph = nullptr;
          COLLCOMM_BENCH_CUDA(cudaStreamEndCapture(s, &graph));
          COLLCOMM_BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
          cudaGraphDestroy(graph);
          COLLCOMM_BENCH_CUDA(cudaGraphUpload(exec, s));
          COLLCOMM_BENCH_CUDA(cudaGraphLaunch(exec, s));  // untimed replay
          COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
          comm.check();
          boot.barrier();
        }
        timer.start(s);
        if (exec)
          COLLCOMM_BENCH_CUDA(cudaGraphLaunch(exec, s));
        else
          for (int i = 0; i < iters; ++i) bench::call_collective<K, A, Tu>(comm, cin, cout, count, Op{}, s);
        const double mine = timer.stop(s, iters);
        if (exec) cudaGraphExecDestroy(exec);
        comm.check();
        const auto times = gather(boot, mine);
        const double us = *std::max_element(times.begin(), times.end());
        long long w = -1;
        if (st.check) {
          fill<<<264, 512, 0, s>>>(cin, in_n, me);
          COLLCOMM_BENCH_CUDA(cudaMemsetAsync(wrong, 0, sizeof *wrong, s));
          if (place == 0) COLLCOMM_BENCH_CUDA(cudaMemsetAsync(out, 0xA5, out_n * sizeof(float), s));
          COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
          boot.barrier();
          bench::call_collective<K, A, Tu>(comm, cin, cout, count, Op{}, s);
          count_wrong<K><<<264, 512, 0, s>>>(cout, out_n, me, n, count, 0, wrong);
          unsigned long long h = 0;
          COLLCOMM_BENCH_CUDA(cudaMemcpyAsync(&h, wrong, sizeof h, cudaMemcpyDeviceToHost, s));
          COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
          comm.check();
          long long sum = 0;
          for (auto x : gather(boot, static_cast<long long>(h))) sum += x;
          w = sum;
        }
        if (me == 0) {
          const double algbw = bench::algbw(bytes, us);
          const double busbw = algbw * bench::bus_factor<K>(n);
          const index_t align = 4;
          const index_t slot = static_cast<index_t>(ro.slot_bytes / sizeof(float)) / align * align;
          const bool last = place == 1 || !has_ip;
          if constexpr (pcie) {
            if (!all_staged) {
              bench::print_placement(us, algbw, busbw, bench::text("%5s %5s", "-", "-"), w, last);
              std::fflush(stdout);
              continue;
            }
            double up = 0, down = 0;
            bench::link_bytes<K, A>(base, ro.channels, slot, align, sizeof(float), up, down);
            const double sec = us * 1e-6;
            const std::string own =
                bench::text("%4.0f%% %4.0f%%", 100 * up / sec / pinned.d2h, 100 * down / sec / pinned.h2d);
            bench::print_placement(us, algbw, busbw, own, w, last);
          } else {
            // automatic: the arm's (its algorithm, protocol and channels)
            const double traffic = bench::modeled_traffic<K, A, Tu, float, Op>(comm.facts(), base, ro, place == 1);
            const double mem = traffic / (us * 1e-6) / copy_bw;
            bench::print_placement(us, algbw, busbw, bench::text("%5.0f%%", mem * 100), w, last);
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
int run_algo(const mp_settings& st) {
  if (st.algo == "ring") return run<K, algo::ring, Comm>(st);
  if constexpr (std::is_same_v<Comm, ncomm>) {
    using hier = algo::hierarchical<algo::ring, algo::ring>;
    if constexpr (valid_composition<K, hier, typename Comm::transport_type, bench::bench_op<K>, float>)
      if (st.algo == "hierarchical") return run<K, hier, Comm>(st);
  }
  if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::broadcast>)
    if (st.algo == "tree") return run<K, algo::tree, Comm>(st);
  // Direct algorithms load peers' buffers: not over pcie_staged (they do not compile there).
  if constexpr (std::is_same_v<K, kind::all_reduce> && Comm::transport_type::load_store) {
    if (st.algo == "one_shot" && st.threads == 1024)
      return run<K, algo::one_shot, Comm, tuning<protocol::simple, 0, 0, 1024>>(st);
    if (st.algo == "one_shot") return run<K, algo::one_shot, Comm>(st);
    if (st.algo == "two_shot") return run<K, algo::two_shot, Comm>(st);
    if (st.algo == "automatic") return run<K, algo::automatic<>, Comm>(st);  // tables/nvlink.hpp's choice
  }
  std::fprintf(stderr,
               "collcomm_bench_mp: algorithm '%s' is not built for %s "
               "(ring; tree for all_reduce and broadcast; one_shot, two_shot, automatic for all_reduce; hierarchical "
               "over -T net)\n",
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
  bench::program_name = "collcomm_bench_mp";
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  mp_settings st;
  // -n is the number of processes here, so the calls per repetition are -i; one repetition (no -R).
  std::vector<bench::flag> flags =
      bench::shared_flags(st, {.ranks = "-n", .iters = "-i", .reps = nullptr, .slot_bytes = "-S"});
  flags.insert(flags.end(),
               {
                   {"-T", &st.transport,
                    "transport: nvlink (CUDA IPC), pcie (staged through POSIX shared memory) or net (net<socket>, "
                    "a proxy per rank over loopback TCP)"},
                   {"-G", &st.graph, "1: replay the -i calls from a CUDA graph in each process"},
                   {"-t", &st.threads, "threads per block: 512, or 1024 for -a one_shot (the kernels built)"},
                   {"-H", &st.hosts,
                    "-T net: the ranks pretend to be this many hosts of consecutive ranks (ranks of one host "
                    "through GPU memory)"},
               });
  bench::parse_flags(argc, argv, flags,
                     "collcomm_bench_mp -n PROCESSES -k KIND -a ALGO -b MIN -e MAX -f FACTOR [-w WARMUP] [-i CALLS] "
                     "[-c 0|1] [-C CHANNELS] [-S SLOT_BYTES] [-T nvlink|pcie|net] [-G 0|1] [-H HOSTS] [-t THREADS]");
  bench::check_settings(st);
  if (st.threads != 512 && (st.threads != 1024 || st.algo != "one_shot" || st.transport != "nvlink")) {
    std::fprintf(stderr, "collcomm_bench_mp: -t is 512, or 1024 for -a one_shot over nvlink, not %d\n", st.threads);
    return 1;
  }
  if (st.transport != "nvlink" && st.transport != "pcie" && st.transport != "net") {
    std::fprintf(stderr, "collcomm_bench_mp: -T %s is not one of nvlink, pcie, net\n", st.transport.c_str());
    return 1;
  }
  if (!std::getenv("RANK")) return launch(st.ranks, argv);  // the launcher: make the ranks
  try {
    const bool pcie = st.transport == "pcie";
    auto run_kind = [&]<class K>(std::type_identity<K>) {
      return st.transport == "net" ? run_algo<K, ncomm>(st) : pcie ? run_algo<K, pcomm>(st) : run_algo<K, nvcomm>(st);
    };
    if (st.kind == "all_reduce") return run_kind(std::type_identity<kind::all_reduce>{});
    if (st.kind == "reduce_scatter") return run_kind(std::type_identity<kind::reduce_scatter>{});
    if (st.kind == "all_gather") return run_kind(std::type_identity<kind::all_gather>{});
    if (st.kind == "broadcast") return run_kind(std::type_identity<kind::broadcast>{});
    std::fprintf(stderr,
                 "collcomm_bench_mp: kind '%s' is not one of all_reduce, reduce_scatter, all_gather, broadcast\n",
                 st.kind.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collcomm_bench_mp rank %s: %s\n", std::getenv("RANK"), e.what());
    return 2;
  }
}
