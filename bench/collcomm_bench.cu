// collcomm_bench — nccl-tests-style timing of collcomm's GPU executor, ranks as threads of this
// process (several per GPU allowed).
//
//   collcomm_bench -k all_reduce -a ring -t f32 -o sum -r 8 -b 8 -e 1G -f 2 -n 20 -w 5 -c 1 [-G] [--json]
//   (-g ranks per GPU, -C channels, -s slot bytes, -p simple|ll protocol, -R repetitions, --check-max bytes, --no-in-place,
//    --nccl: NCCL's same collective on the same ranks after ours, loaded at run time: bench/nccl_peer.hpp)
//
// Per size: bytes, count, type, op, then for out-of-place and in-place: time (µs, the median of
// -R repetitions of -n calls, each the slowest rank's), algbw, busbw (nccl-tests factors) and
// #wrong (with -c: one checked call of exact small-integer data). `mem` is the device-memory
// bytes the kernels must move (bench/traffic_model.hpp) over the time, as a fraction of the copy
// bandwidth measured at start-up in the same run. -G replays the -n calls from a CUDA graph.
#include "nccl_peer.hpp"
#include "traffic_model.hpp"

#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/collectives.hpp>
#include <collcomm/transport/nvlink.hpp>
#include <common/exact_reference.hpp>
#include <common/matrix.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {
using namespace collcomm;
using collcomm_test::case_config;

struct settings {
  std::string kind = "all_reduce", algo = "ring", type = "f32", op = "sum", protocol = "simple";
  int ranks = 2, ranks_per_gpu = 0, channels = 0, threads_unused = 0;
  std::size_t min_bytes = 8, max_bytes = std::size_t{1} << 20;
  double factor = 2;
  int iters = 20, warmup = 5, reps = 5;
  bool check = true, graph = false, json = false, in_place = true, nccl = false;
  std::size_t slot_bytes = 0;
  std::size_t check_max_bytes = std::size_t{4} << 20;  // the host reference is slow beyond
};

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<std::size_t>(v);
}

// Exits at once: exit() would wait in CUDA's teardown for peers' kernels that still spin.
[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "collcomm_bench: %s\n", m.c_str());
  std::fflush(nullptr);
  std::_Exit(2);
}

#define CUDA_OK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die(std::string(#x) + ": " + cudaGetErrorString(e_)); } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device copy bandwidth, (read + write bytes) / time, of cudaMemcpyAsync device to device.
double copy_bandwidth(int device) {
  CUDA_OK(cudaSetDevice(device));
  const std::size_t bytes = std::size_t{1} << 30;
  void *a, *b;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 2) t.push_back(ms * 1e-3);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / median(t);
}

template <class K>
double bus_factor(int n) {
  if constexpr (std::is_same_v<K, kind::all_reduce>) return 2.0 * (n - 1) / n;
  else if constexpr (std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::all_to_all>) return double(n - 1) / n;
  else return 1.0;
}

// nccl-tests' size convention: the size is the larger buffer of a rank; count follows from it.
template <class K>
index_t count_for(std::size_t bytes, std::size_t elem, int n) {
  const index_t total = bytes / elem;
  if constexpr (std::is_same_v<K, kind::reduce_scatter> || std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::all_to_all>) return total / n;
  else return total;
}

template <class K, class Algo, class T, class Op>
void run_bench(const settings& st, double copy_bw) {
  const int n = st.ranks;
  const int per_gpu = st.ranks_per_gpu > 0 ? st.ranks_per_gpu : n;
  std::vector<int> devices(n);
  for (int r = 0; r < n; ++r) devices[r] = r / per_gpu;
  gpu::options o;
  if (st.channels > 0) o.channels = st.channels;
  if (st.slot_bytes > 0) o.slot_bytes = st.slot_bytes;
  gpu::world w(n, devices, o);
  o = w.opts();  // channels resolved
  const bool in_place_ok = collcomm_test::has_in_place<K> && supports_in_place<Algo> && st.in_place;

  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(st.min_bytes); b <= static_cast<double>(st.max_bytes) * 1.0001; b *= st.factor) sizes.push_back(static_cast<std::size_t>(b));
  const std::size_t max_bytes = sizes.back();

  if (!st.json)
    std::printf("# %s %s %s %s ranks=%d ranks_per_gpu=%d channels=%d slot_bytes=%zu iters=%d graph=%d copy_bw=%.1f GB/s\n"
                "# %12s %12s %5s %5s | %9s %9s %9s %6s %6s | %9s %9s %9s %6s %6s\n",
                K::name, Algo::name, element_name<T>, op_name<Op>(), n, per_gpu, o.channels, o.slot_bytes, st.iters, st.graph, copy_bw / 1e9,
                "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw", "mem%", "#wrong", "time(us)", "algbw", "busbw", "mem%", "#wrong");

  std::barrier sync_point(n);
  // -G: every rank's -n calls are captured into one graph (the ranks' streams forked from one
  // capturing stream: ranks sharing a GPU launch together), replayed by rank 0's thread.
  cudaStream_t origin = nullptr;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins(n, nullptr);
  cudaGraphExec_t exec = nullptr;
  std::vector<double> rank_time(n);
  std::vector<long> rank_wrong(n);
  std::vector<std::string> errors(n);
#if COLLCOMM_BENCH_HAVE_NCCL
  // --nccl: NCCL's same collective on the same ranks, buffers and streams, right after ours
  // (out of place, stream-launched), printed as its own line (bench/nccl_peer.hpp).
  const collcomm_bench::nccl::api* na = nullptr;
  std::vector<ncclComm_t> ncomms;
  if (st.nccl) {
    std::string why;
    na = collcomm_bench::nccl::load(why);
    if (na) ncomms = collcomm_bench::nccl::make_comms(*na, devices, why);
    if (ncomms.empty()) std::printf("# nccl: not run: %s\n", why.c_str());
    else std::printf("# nccl %d: same sizes, out of place, stream-launched, on the lines marked 'nccl'\n", na->version);
  }
  auto time_nccl = [&](int r, std::size_t bytes, index_t count, T* in, T* out, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
    constexpr ncclDataType_t t = collcomm_bench::nccl::dtype<T>();
    auto ncall = [&] {
      ncclResult_t e = ncclSuccess;
      ncclComm_t c = ncomms[r];
      if constexpr (std::is_same_v<K, kind::all_reduce>) e = na->all_reduce(in, out, count, t, ncclSum, c, s);
      else if constexpr (std::is_same_v<K, kind::reduce_scatter>) e = na->reduce_scatter(in, out, count, t, ncclSum, c, s);
      else if constexpr (std::is_same_v<K, kind::all_gather>) e = na->all_gather(in, out, count, t, c, s);
      else if constexpr (std::is_same_v<K, kind::broadcast>) e = na->broadcast(in, out, count, t, 0, c, s);
      else if constexpr (std::is_same_v<K, kind::reduce>) e = na->reduce(in, out, count, t, ncclSum, 0, c, s);
      else if constexpr (std::is_same_v<K, kind::all_to_all>) e = na->all_to_all ? na->all_to_all(in, out, count, t, c, s) : ncclInvalidUsage;
      if (e != ncclSuccess) die("rank " + std::to_string(r) + ": NCCL: " + na->error_string(e));
    };
    CUDA_OK(cudaDeviceSynchronize());
    sync_point.arrive_and_wait();
    for (int i = 0; i < st.warmup; ++i) ncall();
    CUDA_OK(cudaStreamSynchronize(s));
    const int iters = bytes >= (std::size_t{64} << 20) ? std::max(2, st.iters / 4) : st.iters;
    const int reps = bytes >= (std::size_t{64} << 20) ? std::min(st.reps, 3) : st.reps;
    std::vector<double> times;
    for (int rep = 0; rep < reps; ++rep) {
      sync_point.arrive_and_wait();
      CUDA_OK(cudaEventRecord(e0, s));
      for (int i = 0; i < iters; ++i) ncall();
      CUDA_OK(cudaEventRecord(e1, s));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      rank_time[r] = ms * 1e3 / iters;
      sync_point.arrive_and_wait();
      times.push_back(*std::max_element(rank_time.begin(), rank_time.end()));
      sync_point.arrive_and_wait();
    }
    if (r == 0) {
      const double us = median(times), algbw = bytes / (us * 1e-6) / 1e9;
      if (st.json)
        std::printf("{\"impl\":\"nccl\",\"kind\":\"%s\",\"type\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"count\":%zu,\"time_us\":%.3f,\"algbw\":%.3f,\"busbw\":%.3f}\n",
                    K::name, element_name<T>, n, bytes, static_cast<std::size_t>(count), us, algbw, algbw * bus_factor<K>(n));
      else
        std::printf("  %12zu %12zu %5s %5s | %9.2f %9.2f %9.2f   nccl\n", bytes, static_cast<std::size_t>(count), element_name<T>, op_name<Op>(), us, algbw,
                    algbw * bus_factor<K>(n));
      std::fflush(stdout);
    }
  };

#else
  struct no_nccl {
    bool empty() const { return true; }
  } ncomms;
  auto time_nccl = [](auto&&...) {};
  if (st.nccl) std::printf("# nccl: not run: this bench was built without nccl.h\n");
#endif
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
     try {
      CUDA_OK(cudaSetDevice(devices[r]));
      communicator<transport::nvlink> comm(w, r);
      gpu::preload<K, Algo, T, Op>();
      cudaStream_t s;
      CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      T *in = nullptr, *out = nullptr;
      CUDA_OK(cudaMalloc(&in, max_bytes + 64));
      CUDA_OK(cudaMalloc(&out, max_bytes + 64));
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      CUDA_OK(cudaEventCreateWithFlags(&joins[r], cudaEventDisableTiming));
      if (r == 0 && st.graph) {
        CUDA_OK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
        CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      }
      std::vector<T> host;
      for (std::size_t bytes : sizes) {
        const index_t count = count_for<K>(bytes, sizeof(T), n);
        coll_args base{};
        base.nranks = n;
        base.count = count;
        const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
        std::mt19937_64 g(collcomm_test::fresh_seed() + r * 131 + bytes);
        host.resize(std::max(in_n, out_n));
        for (index_t i = 0; i < in_n; ++i) host[i] = collcomm_test::random_value<T, Op>(g, n, r, i);
        CUDA_OK(cudaMemcpy(in, host.data(), in_n * sizeof(T), cudaMemcpyHostToDevice));
        for (int place = 0; place < (in_place_ok ? 2 : 1); ++place) {
          // In place: the input sits where the kind wants it inside the output buffer.
          T* src = in;
          if (place == 1) {
            index_t off = 0;
            if constexpr (std::is_same_v<K, kind::all_gather>) off = r * count;
            src = out + off;
            CUDA_OK(cudaMemcpy(src, in, in_n * sizeof(T), cudaMemcpyDeviceToDevice));
          }
          T* dst = out;
          if (place == 1 && std::is_same_v<K, kind::reduce_scatter>) dst = out + r * count;
          auto call = [&] {
            if constexpr (std::is_same_v<K, kind::all_reduce>) all_reduce<Algo>(comm, src, dst, count, Op{}, s);
            else if constexpr (std::is_same_v<K, kind::reduce_scatter>) reduce_scatter<Algo>(comm, src, dst, count, Op{}, s);
            else if constexpr (std::is_same_v<K, kind::all_gather>) all_gather<Algo>(comm, src, dst, count, s);
            else if constexpr (std::is_same_v<K, kind::broadcast>) broadcast<Algo>(comm, src, dst, count, 0, s);
            else if constexpr (std::is_same_v<K, kind::reduce>) reduce<Algo>(comm, src, dst, count, Op{}, 0, s);
            else if constexpr (std::is_same_v<K, kind::all_to_all>) all_to_all<Algo>(comm, src, dst, count, s);
          };
          // Checked call first (the data of later calls drift in place).
          long wrong = -1;
          if (st.check && bytes <= st.check_max_bytes) {
            CUDA_OK(cudaMemset(out, 0xA5, out_n * sizeof(T)));
            if (place == 1) {
              index_t off = 0;
              if constexpr (std::is_same_v<K, kind::all_gather>) off = r * count;
              CUDA_OK(cudaMemcpy(out + off, host.data(), in_n * sizeof(T), cudaMemcpyHostToDevice));
            }
            // cudaMemset and cudaMemcpy (pageable) may return before the data lands, and the
            // collective runs on other streams: wait for them (no kernel of ours runs now).
            CUDA_OK(cudaDeviceSynchronize());
            sync_point.arrive_and_wait();
            call();
            CUDA_OK(cudaStreamSynchronize(s));
            sync_point.arrive_and_wait();
            comm.check();
            // Every rank computes the reference from every rank's inputs (regenerated from seeds).
            std::vector<std::vector<T>> x(n, std::vector<T>(in_n));
            for (int q = 0; q < n; ++q) {
              std::mt19937_64 gq(collcomm_test::fresh_seed() + q * 131 + bytes);
              for (index_t i = 0; i < in_n; ++i) x[q][i] = collcomm_test::random_value<T, Op>(gq, n, q, i);
            }
            const auto expect = collcomm_test::reference<K>(x, case_config{n, count, 0, place == 1}, Op{});
            wrong = 0;
            if (expect[r]) {
              std::vector<T> got(out_n);
              CUDA_OK(cudaMemcpy(got.data(), dst, (std::is_same_v<K, kind::reduce_scatter> ? count : out_n) * sizeof(T), cudaMemcpyDeviceToHost));
              const auto& ex = *expect[r];
              for (index_t i = 0; i < ex.size(); ++i) wrong += !collcomm_test::same_bits(got[i], ex[i]);
            }
            if (place == 1) CUDA_OK(cudaMemcpy(src, in, in_n * sizeof(T), cudaMemcpyDeviceToDevice));
          }
          rank_wrong[r] = wrong;
          // Large messages: fewer calls per repetition (each already takes milliseconds).
          const int iters = bytes >= (std::size_t{64} << 20) ? std::max(2, st.iters / 4) : st.iters;
          if (st.graph) {
            // No rank may allocate or synchronize the device while the capture is open: fence it
            // with barriers.
            CUDA_OK(cudaDeviceSynchronize());
            sync_point.arrive_and_wait();
            if (r == 0) {
              CUDA_OK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed));
              CUDA_OK(cudaEventRecord(fork, origin));
            }
            sync_point.arrive_and_wait();
            CUDA_OK(cudaStreamWaitEvent(s, fork, 0));
            for (int i = 0; i < st.iters; ++i) call();
            CUDA_OK(cudaEventRecord(joins[r], s));
            sync_point.arrive_and_wait();
            if (r == 0) {
              for (int q = 0; q < n; ++q) CUDA_OK(cudaStreamWaitEvent(origin, joins[q], 0));
              cudaGraph_t graph;
              CUDA_OK(cudaStreamEndCapture(origin, &graph));
              CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
              cudaGraphDestroy(graph);
              CUDA_OK(cudaGraphUpload(exec, origin));
              CUDA_OK(cudaStreamSynchronize(origin));
            }
            sync_point.arrive_and_wait();
          }
          CUDA_OK(cudaDeviceSynchronize());
          sync_point.arrive_and_wait();
          if (st.graph) {
            if (r == 0) {
              CUDA_OK(cudaGraphLaunch(exec, origin));  // warm-up: one replay
              CUDA_OK(cudaStreamSynchronize(origin));
            }
          } else {
            for (int i = 0; i < st.warmup; ++i) call();
          }
          CUDA_OK(cudaStreamSynchronize(s));
          sync_point.arrive_and_wait();
          try {
            comm.check();
          } catch (const std::exception& e) {
            die(std::string("after warm-up: ") + e.what());
          }
          std::vector<double> times;
          const int reps = bytes >= (std::size_t{64} << 20) ? std::min(st.reps, 3) : st.reps;
          for (int rep = 0; rep < reps; ++rep) {
            sync_point.arrive_and_wait();
            if (st.graph) {
              if (r == 0) {
                cudaEventRecord(e0, origin);
                cudaGraphLaunch(exec, origin);
                cudaEventRecord(e1, origin);
                CUDA_OK(cudaEventSynchronize(e1));
                float ms = 0;
                cudaEventElapsedTime(&ms, e0, e1);
                rank_time[r] = ms * 1e3 / st.iters;
              } else {
                rank_time[r] = 0;
              }
            } else {
              cudaEventRecord(e0, s);
              for (int i = 0; i < iters; ++i) call();
              cudaEventRecord(e1, s);
              CUDA_OK(cudaEventSynchronize(e1));
              float ms = 0;
              cudaEventElapsedTime(&ms, e0, e1);
              rank_time[r] = ms * 1e3 / iters;
            }
            sync_point.arrive_and_wait();
            times.push_back(*std::max_element(rank_time.begin(), rank_time.end()));
            sync_point.arrive_and_wait();
          }
          comm.check();
          sync_point.arrive_and_wait();
          if (r == 0 && exec) {
            cudaGraphExecDestroy(exec);
            exec = nullptr;
          }
          CUDA_OK(cudaDeviceSynchronize());
          sync_point.arrive_and_wait();
          if (r == 0) {
            const double us = median(times);
            long wrong_all = 0;
            for (long x : rank_wrong) wrong_all = (x < 0 || wrong_all < 0) ? -1 : wrong_all + x;
            const double algbw = bytes / (us * 1e-6) / 1e9;
            const index_t align = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
            constexpr bool ll = std::is_same_v<protocol_of<Algo>, protocol::ll>;
            // The payload of a slot: all of it (simple); half of its 16-byte lines less the header line (ll).
            const index_t slot = ll ? static_cast<index_t>((o.slot_bytes / 16 - 1) * 8 / sizeof(T)) / align * align
                                    : static_cast<index_t>(o.slot_bytes / sizeof(T)) / align * align;
            const double mem = collcomm_bench::traffic_bytes<K, algorithm_of<Algo>>(base, o.channels, slot, align, sizeof(T), ll ? 2 : 1) / (us * 1e-6) / copy_bw;
            if (st.json)
              std::printf("{\"kind\":\"%s\",\"algo\":\"%s\",\"type\":\"%s\",\"op\":\"%s\",\"ranks\":%d,\"graph\":%d,\"bytes\":%zu,\"count\":%zu,\"in_place\":%d,\"time_us\":%.3f,\"algbw\":%.3f,\"busbw\":%.3f,\"mem_frac\":%.4f,\"wrong\":%ld,\"copy_bw\":%.1f}\n",
                          K::name, Algo::name, element_name<T>, op_name<Op>(), n, st.graph, bytes, static_cast<std::size_t>(count), place, us, algbw, algbw * bus_factor<K>(n), mem, wrong_all, copy_bw / 1e9);
            else {
              if (place == 0) std::printf("  %12zu %12zu %5s %5s |", bytes, static_cast<std::size_t>(count), element_name<T>, op_name<Op>());
              std::printf(" %9.2f %9.2f %9.2f %5.0f%% %6ld %s", us, algbw, algbw * bus_factor<K>(n), mem * 100, wrong_all, place == 1 || !in_place_ok ? "\n" : "|");
            }
            std::fflush(stdout);
          }
        }
        if (!ncomms.empty()) time_nccl(r, bytes, count, in, out, s, e0, e1);
      }
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(s);
     } catch (const std::exception& e) {
      die("rank " + std::to_string(r) + ": " + e.what());
     }
    });
  for (auto& t : threads) t.join();
#if COLLCOMM_BENCH_HAVE_NCCL
  if (na) collcomm_bench::nccl::destroy(*na, ncomms);
#endif
}

// The compositions the bench can run: looked up by name once, at start-up.
using bench_kinds = collcomm_test::type_list<kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast, kind::reduce, kind::all_to_all>;
using bench_algos = collcomm_test::type_list<algo::ring, algo::tree, algo::recursive_doubling, algo::one_shot, algo::two_shot, algo::direct, algo::pairwise>;
using bench_types = collcomm_test::type_list<float, __nv_bfloat16>;

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  settings st;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { if (i + 1 >= argc) die("missing value after " + a); return argv[++i]; };
    if (a == "-k") st.kind = next();
    else if (a == "-a") st.algo = next();
    else if (a == "-t") st.type = next();
    else if (a == "-o") st.op = next();
    else if (a == "-r") st.ranks = std::atoi(next());
    else if (a == "-g") st.ranks_per_gpu = std::atoi(next());
    else if (a == "-C") st.channels = std::atoi(next());
    else if (a == "-s") st.slot_bytes = parse_size(next());
    else if (a == "-b") st.min_bytes = parse_size(next());
    else if (a == "-e") st.max_bytes = parse_size(next());
    else if (a == "-f") st.factor = std::atof(next());
    else if (a == "-n") st.iters = std::atoi(next());
    else if (a == "-w") st.warmup = std::atoi(next());
    else if (a == "-R") st.reps = std::atoi(next());
    else if (a == "-c") st.check = std::atoi(next()) != 0;
    else if (a == "-G") st.graph = true;
    else if (a == "--check-max") st.check_max_bytes = parse_size(next());
    else if (a == "-p") st.protocol = next();
    else if (a == "--no-in-place") st.in_place = false;
    else if (a == "--json") st.json = true;
    else if (a == "--nccl") st.nccl = true;
    else die("unknown argument " + a + " (see the comment at the top of bench/collcomm_bench.cu)");
  }
  if (st.ranks < 1) die("-r must be at least 1");
  if (st.factor <= 1) die("-f must be above 1");
  if (st.protocol != "simple" && st.protocol != "ll") die("-p must be simple or ll, not " + st.protocol);
  int dev = 0;
  if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) die("no CUDA device");
  const double bw = copy_bandwidth(0);
  bool ran = false;
  try {
    collcomm_test::for_each_type(bench_kinds{}, [&]<class K>(std::type_identity<K>) {
      collcomm_test::for_each_type(bench_algos{}, [&]<class A>(std::type_identity<A>) {
        collcomm_test::for_each_type(bench_types{}, [&]<class T>(std::type_identity<T>) {
          using Op = std::conditional_t<K::reduces, op::sum, op::none>;
          if constexpr (valid_composition<K, A, transport::nvlink, Op, T>) {
            if (st.kind == K::name && st.algo == A::name && st.type == element_name<T> && (!K::reduces || st.op == "sum")) {
              if (st.protocol == "simple") run_bench<K, A, T, Op>(st, bw);
              else if constexpr (!A::needs_direct) run_bench<K, with_protocol<A, protocol::ll>, T, Op>(st, bw);  // direct schedules move no FIFO messages
              else die(std::string("algorithm ") + A::name + " moves no FIFO messages: protocol ll changes nothing for it");
              ran = true;
            }
          }
        });
      });
    });
  } catch (const std::exception& e) {
    die(e.what());
  }
  if (!ran) die("no such composition: " + st.kind + " " + st.algo + " " + st.type + " " + st.op + " (op: sum; type: f32 or bf16)");
  return 0;
}
