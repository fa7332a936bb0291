// collcomm_bench — nccl-tests-style timing of collcomm's GPU executor, ranks as threads of this
// process (several per GPU allowed).
//
//   collcomm_bench -k all_reduce -a ring -t f32 -o sum -r 8 -b 8 -e 1G -f 2 -n 20 -w 5 -R 5 -c 1 [-G] [--json]
//   (-a automatic: the default algorithm, its arm printed where it changes and in the JSON;
//    -g ranks per GPU, -C channels, -s slot bytes, -p simple|ll|ll128 protocol, -T threads per block,
//    --check-max bytes, --no-in-place,
//    --nccl: NCCL's same collective on the same ranks after ours, loaded at run time: bench/nccl_peer.hpp;
//    --help lists every flag with its default)
//
// Per size: bytes, count, type, op, then for out-of-place and in-place: time, algbw, busbw
// (bench/driver.hpp), mem% and #wrong. Time: in each of -R repetitions every rank queues -n calls
// on its stream between two CUDA events (a quarter of them, at least 2, and at most 3
// repetitions from 64 MiB); a repetition's time is the slowest rank's µs per call, the printed
// time the median of the repetitions. -G: the -n calls of every rank are captured into one CUDA
// graph, replayed once untimed, then once per repetition by rank 0's thread, timed on its stream.
// #wrong: with -c 1, one checked call of exact small-integer data (sizes up to --check-max).
// mem%: the device-memory bytes the kernels must move (bench/traffic_model.hpp) over the time, as
// a fraction of the copy bandwidth measured at start-up in the same run. --json adds host_us: the
// median over repetitions of the slowest rank thread's wall time per call spent in the calls
// themselves (stream launches; 0 with -G) — where it is close to the time, the host sets the rate.
#include "driver.hpp"
#include "nccl_peer.hpp"
#include "traffic_model.hpp"

#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>
#include <common/matrix.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {
using namespace collcomm;
namespace bench = collcomm_bench;
using collcomm_test::case_config;

struct bench_settings : bench::settings {
  std::string type = "f32";
  std::string op = "sum";
  std::string protocol = "simple";
  int threads = 512;      // threads per block: 512, or 1024 for algo::direct
  int ranks_per_gpu = 0;  // 0: every rank on GPU 0
  bool json = false;
  bool in_place = true;
  bool nccl = false;
  std::size_t check_max_bytes = std::size_t{4} << 20;  // the host reference is slow beyond
};

template <class K, class Algo, class T, class Op, class Tuning = tuning<>>
void run_bench(const bench_settings& st, double copy_bw) {
  constexpr bool simple = std::is_same_v<typename Tuning::protocol, protocol::simple>;
  const std::string algo_name = std::string(Algo::name) + (simple ? "" : std::string("/") + Tuning::protocol::name) +
                                (Tuning::threads == 512 ? "" : "/t" + std::to_string(Tuning::threads));
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
  const std::vector<std::size_t> sizes = bench::message_sizes(st);
  const std::size_t max_bytes = sizes.back();

  if (!st.json) {
    std::printf(
        "# %s %s %s %s ranks=%d ranks_per_gpu=%d channels=%d slot_bytes=%zu iters=%d graph=%d "
        "copy_bw=%.1f GB/s\n",
        K::name, algo_name.c_str(), element_name<T>, op_name<Op>(), n, per_gpu, o.channels, o.slot_bytes, st.iters,
        st.graph, copy_bw / 1e9);
    bench::print_table_header(bench::text("%6s", "mem%"));
  }

  std::barrier sync_point(n);
  std::string last_arm[2];  // the arm printed last, out of place and in place (rank 0's thread)
  std::vector<double> rank_time(n), rank_host(n);
  std::vector<long> rank_wrong(n);
  std::vector<double> host_times;  // per repetition: the slowest rank's host µs per call (rank 0's thread)
  // The slowest rank's time: every rank (thread) writes its own, then all read the largest. With
  // `host` (µs per call its thread spent enqueueing them), rank 0 keeps the largest of those too.
  auto slowest = [&](int r, double us, double host = 0) {
    rank_time[r] = us;
    rank_host[r] = host;
    sync_point.arrive_and_wait();
    const double worst = *std::max_element(rank_time.begin(), rank_time.end());
    if (r == 0) host_times.push_back(*std::max_element(rank_host.begin(), rank_host.end()));
    sync_point.arrive_and_wait();
    return worst;
  };
  // -G: every rank's -n calls are captured into one graph (the ranks' streams forked from one
  // capturing stream: ranks sharing a GPU launch together), replayed by rank 0's thread.
  cudaStream_t origin = nullptr;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins(n, nullptr);
  cudaGraphExec_t exec = nullptr;
#if COLLCOMM_BENCH_HAVE_NCCL
  // --nccl: NCCL's same collective on the same ranks, buffers and streams, right after ours
  // (out of place, stream-launched, timed as ours), printed as its own line (bench/nccl_peer.hpp).
  const bench::nccl::api* na = nullptr;
  std::vector<ncclComm_t> ncomms;
  if (st.nccl) {
    std::string why;
    na = bench::nccl::load(why);
    if (na) ncomms = bench::nccl::make_comms(*na, devices, why);
    if (ncomms.empty())
      std::printf("# nccl: not run: %s\n", why.c_str());
    else
      std::printf("# nccl %d: same sizes, out of place, stream-launched, on the lines marked 'nccl'\n", na->version);
  }
  auto time_nccl = [&](int r, std::size_t bytes, index_t count, T* in, T* out, cudaStream_t s,
                       bench::event_timer& timer) {
    constexpr ncclDataType_t t = bench::nccl::dtype<T>();
    auto ncall = [&] {
      ncclResult_t e = ncclSuccess;
      ncclComm_t c = ncomms[r];
      if constexpr (std::is_same_v<K, kind::all_reduce>)
        e = na->all_reduce(in, out, count, t, ncclSum, c, s);
      else if constexpr (std::is_same_v<K, kind::reduce_scatter>)
        e = na->reduce_scatter(in, out, count, t, ncclSum, c, s);
      else if constexpr (std::is_same_v<K, kind::all_gather>)
        e = na->all_gather(in, out, count, t, c, s);
      else if constexpr (std::is_same_v<K, kind::broadcast>)
        e = na->broadcast(in, out, count, t, 0, c, s);
      else if constexpr (std::is_same_v<K, kind::reduce>)
        e = na->reduce(in, out, count, t, ncclSum, 0, c, s);
      else if constexpr (std::is_same_v<K, kind::all_to_all>)
        e = na->all_to_all ? na->all_to_all(in, out, count, t, c, s) : ncclInvalidUsage;
      if (e != ncclSuccess) bench::die("rank " + std::to_string(r) + ": NCCL: " + na->error_string(e));
    };
    COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
    sync_point.arrive_and_wait();
    for (int i = 0; i < st.warmup; ++i) ncall();
    COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
    const int iters = bench::calls_per_repetition(bytes, st.iters);
    const double us = bench::median_of(bench::repetitions(bytes, st.reps), [&] {
      sync_point.arrive_and_wait();
      timer.start(s);
      for (int i = 0; i < iters; ++i) ncall();
      return slowest(r, timer.stop(s, iters));
    });
    if (r == 0) {
      const double algbw = bench::algbw(bytes, us);
      if (st.json)
        std::printf(
            "{\"impl\":\"nccl\",\"kind\":\"%s\",\"type\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"count\":%zu,"
            "\"time_us\":%.3f,\"algbw\":%.3f,\"busbw\":%.3f}\n",
            K::name, element_name<T>, n, bytes, static_cast<std::size_t>(count), us, algbw,
            algbw * bench::bus_factor<K>(n));
      else
        std::printf("  %12zu %12zu %5s %5s | %9.2f %9.2f %9.2f   nccl\n", bytes, static_cast<std::size_t>(count),
                    element_name<T>, op_name<Op>(), us, algbw, algbw * bench::bus_factor<K>(n));
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
        COLLCOMM_BENCH_CUDA(cudaSetDevice(devices[r]));
        communicator<transport::nvlink> comm(w, r);
        cudaStream_t s;
        COLLCOMM_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        T* in = nullptr;
        T* out = nullptr;
        COLLCOMM_BENCH_CUDA(cudaMalloc(&in, max_bytes + 64));
        COLLCOMM_BENCH_CUDA(cudaMalloc(&out, max_bytes + 64));
        gpu::preload(comm, [&] { bench::call_collective<K, Algo, Tuning>(comm, in, out, index_t{0}, Op{}, s); });
        bench::event_timer timer;
        COLLCOMM_BENCH_CUDA(cudaEventCreateWithFlags(&joins[r], cudaEventDisableTiming));
        if (r == 0 && st.graph) {
          COLLCOMM_BENCH_CUDA(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
          COLLCOMM_BENCH_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        }
        std::vector<T> host;
        for (std::size_t bytes : sizes) {
          const index_t count = bench::count_for<K>(bytes, sizeof(T), n);
          coll_args base{};
          base.nranks = n;
          base.count = count;
          const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
          std::mt19937_64 g(collcomm_test::fresh_seed() + r * 131 + bytes);
          host.resize(std::max(in_n, out_n));
          for (index_t i = 0; i < in_n; ++i) host[i] = collcomm_test::random_value<T, Op>(g, n, r, i);
          COLLCOMM_BENCH_CUDA(cudaMemcpy(in, host.data(), in_n * sizeof(T), cudaMemcpyHostToDevice));
          for (int place = 0; place < (in_place_ok ? 2 : 1); ++place) {
            // In place: the input sits where the kind wants it inside the output buffer.
            const bench::in_place_offsets at =
                place == 1 ? bench::in_place_layout<K>(r, count) : bench::in_place_offsets{};
            T* src = place == 1 ? out + at.input : in;
            T* dst = out + at.output;
            if (place == 1) COLLCOMM_BENCH_CUDA(cudaMemcpy(src, in, in_n * sizeof(T), cudaMemcpyDeviceToDevice));
            auto call = [&] { bench::call_collective<K, Algo, Tuning>(comm, src, dst, count, Op{}, s); };
            // Checked call first (the data of later calls drift in place).
            long wrong = -1;
            if (st.check && bytes <= st.check_max_bytes) {
              COLLCOMM_BENCH_CUDA(cudaMemset(out, 0xA5, out_n * sizeof(T)));
              if (place == 1)
                COLLCOMM_BENCH_CUDA(cudaMemcpy(out + at.input, host.data(), in_n * sizeof(T), cudaMemcpyHostToDevice));
              // cudaMemset and cudaMemcpy (pageable) may return before the data lands, and the
              // collective runs on other streams: wait for them (no kernel of ours runs now).
              COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
              sync_point.arrive_and_wait();
              call();
              COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
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
                const index_t got_n = std::is_same_v<K, kind::reduce_scatter> ? count : out_n;
                COLLCOMM_BENCH_CUDA(cudaMemcpy(got.data(), dst, got_n * sizeof(T), cudaMemcpyDeviceToHost));
                const auto& ex = *expect[r];
                for (index_t i = 0; i < ex.size(); ++i) wrong += !collcomm_test::same_bits(got[i], ex[i]);
              }
              if (place == 1) COLLCOMM_BENCH_CUDA(cudaMemcpy(src, in, in_n * sizeof(T), cudaMemcpyDeviceToDevice));
            }
            rank_wrong[r] = wrong;
            const int iters = bench::calls_per_repetition(bytes, st.iters);
            if (st.graph) {
              // No rank may allocate or synchronize the device while the capture is open: fence it
              // with barriers. The graph holds -n calls at every size.
              COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
              sync_point.arrive_and_wait();
              if (r == 0) {
                COLLCOMM_BENCH_CUDA(cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed));
                COLLCOMM_BENCH_CUDA(cudaEventRecord(fork, origin));
              }
              sync_point.arrive_and_wait();
              COLLCOMM_BENCH_CUDA(cudaStreamWaitEvent(s, fork, 0));
              for (int i = 0; i < st.iters; ++i) call();
              COLLCOMM_BENCH_CUDA(cudaEventRecord(joins[r], s));
              sync_point.arrive_and_wait();
              if (r == 0) {
                for (int q = 0; q < n; ++q) COLLCOMM_BENCH_CUDA(cudaStreamWaitEvent(origin, joins[q], 0));
                cudaGraph_t graph;
                COLLCOMM_BENCH_CUDA(cudaStreamEndCapture(origin, &graph));
                COLLCOMM_BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
                cudaGraphDestroy(graph);
                COLLCOMM_BENCH_CUDA(cudaGraphUpload(exec, origin));
                COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(origin));
              }
              sync_point.arrive_and_wait();
            }
            COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
            sync_point.arrive_and_wait();
            if (st.graph) {
              if (r == 0) {
                COLLCOMM_BENCH_CUDA(cudaGraphLaunch(exec, origin));  // warm-up: one replay
                COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(origin));
              }
            } else {
              for (int i = 0; i < st.warmup; ++i) call();
            }
            COLLCOMM_BENCH_CUDA(cudaStreamSynchronize(s));
            sync_point.arrive_and_wait();
            try {
              comm.check();
            } catch (const std::exception& e) {
              bench::die(std::string("after warm-up: ") + e.what());
            }
            if (r == 0) host_times.clear();
            const double us = bench::median_of(bench::repetitions(bytes, st.reps), [&] {
              sync_point.arrive_and_wait();
              double mine = 0, host_us = 0;
              if (!st.graph) {
                timer.start(s);
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < iters; ++i) call();
                host_us =
                    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
                mine = timer.stop(s, iters);
              } else if (r == 0) {
                timer.start(origin);
                COLLCOMM_BENCH_CUDA(cudaGraphLaunch(exec, origin));
                mine = timer.stop(origin, st.iters);
              }
              return slowest(r, mine, host_us);
            });
            comm.check();
            sync_point.arrive_and_wait();
            if (r == 0 && exec) {
              cudaGraphExecDestroy(exec);
              exec = nullptr;
            }
            COLLCOMM_BENCH_CUDA(cudaDeviceSynchronize());
            sync_point.arrive_and_wait();
            if (r == 0) {
              long wrong_all = 0;
              for (long x : rank_wrong) wrong_all = (x < 0 || wrong_all < 0) ? -1 : wrong_all + x;
              const double algbw = bench::algbw(bytes, us);
              const double busbw = algbw * bench::bus_factor<K>(n);
              const double mem =
                  bench::modeled_traffic<K, Algo, Tuning, T, Op>(comm.facts(), base, o, place == 1) / (us * 1e-6) / copy_bw;
              const std::string arm =
                  bench::arm_of<K, Algo, Tuning, transport::nvlink, T, Op>(comm.facts(), count, place == 1);
              if (st.json)
                std::printf(
                    "{\"kind\":\"%s\",\"algo\":\"%s\",\"arm\":\"%s\",\"type\":\"%s\",\"op\":\"%s\","
                    "\"ranks\":%d,\"ranks_per_gpu\":%d,\"channels\":%d,\"slot_bytes\":%zu,\"graph\":%d,"
                    "\"bytes\":%zu,\"count\":%zu,\"in_place\":%d,\"time_us\":%.3f,\"algbw\":%.3f,"
                    "\"busbw\":%.3f,\"mem_frac\":%.4f,\"wrong\":%ld,\"copy_bw\":%.1f,\"host_us\":%.3f}\n",
                    K::name, algo_name.c_str(), arm.c_str(), element_name<T>, op_name<Op>(), n, per_gpu, o.channels,
                    o.slot_bytes, st.graph, bytes, static_cast<std::size_t>(count), place, us, algbw, busbw, mem,
                    wrong_all, copy_bw / 1e9, bench::median(host_times));
              else {
                // algo::automatic: the arm, where it changes.
                if (is_automatic<Algo> && arm != last_arm[place]) {
                  std::printf("# from %zu bytes, %s: %s\n", bytes, place == 1 ? "in place" : "out of place",
                              arm.c_str());
                  last_arm[place] = arm;
                }
                if (place == 0) bench::print_row_start(bytes, count, element_name<T>, op_name<Op>());
                bench::print_placement(us, algbw, busbw, bench::text("%5.0f%%", mem * 100), wrong_all,
                                       place == 1 || !in_place_ok);
              }
              std::fflush(stdout);
            }
          }
          if (!ncomms.empty()) time_nccl(r, bytes, count, in, out, s, timer);
        }
        cudaFree(in);
        cudaFree(out);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {
        bench::die("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
#if COLLCOMM_BENCH_HAVE_NCCL
  if (na) bench::nccl::destroy(*na, ncomms);
#endif
}

// The compositions the bench can run: looked up by name once, at start-up.
// A narrow build for comparing kernel variants compiles in seconds, not minutes: e.g.
//   -DCOLLCOMM_BENCH_KINDS=kind::all_reduce -DCOLLCOMM_BENCH_ALGOS=algo::ring -DCOLLCOMM_BENCH_TYPES=float
#ifndef COLLCOMM_BENCH_KINDS
#define COLLCOMM_BENCH_KINDS \
  kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast, kind::reduce, kind::all_to_all
#endif
#ifndef COLLCOMM_BENCH_ALGOS
#define COLLCOMM_BENCH_ALGOS \
  algo::ring, algo::tree, algo::recursive_doubling, algo::one_shot, algo::two_shot, algo::direct, algo::pairwise
#endif
#ifndef COLLCOMM_BENCH_TYPES
#define COLLCOMM_BENCH_TYPES float, __nv_bfloat16
#endif
using bench_kinds = collcomm_test::type_list<COLLCOMM_BENCH_KINDS>;
using bench_algos = collcomm_test::type_list<COLLCOMM_BENCH_ALGOS>;
using bench_types = collcomm_test::type_list<COLLCOMM_BENCH_TYPES>;

}  // namespace

int main(int argc, char** argv) {
  bench::program_name = "collcomm_bench";
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  bench_settings st;
  std::vector<bench::flag> flags = bench::shared_flags(st);
  flags.insert(
      flags.end(),
      {
          {"-t", &st.type, "element type: f32 or bf16"},
          {"-o", &st.op, "op of the reducing kinds: sum"},
          {"-g", &st.ranks_per_gpu, "ranks per GPU (rank r on GPU r / g); 0: every rank on GPU 0"},
          {"-p", &st.protocol, "protocol of FIFO algorithms: simple, ll or ll128"},
          {"-T", &st.threads, "threads per block: 512, or 1024 (algo::direct, protocol simple)"},
          {"-G", bench::presence{&st.graph}, "replay the -n calls of every rank from one CUDA graph"},
          {"--check-max", &st.check_max_bytes, "check sizes up to this many bytes (the host reference is slow)"},
          {"--no-in-place", bench::presence{&st.in_place, false}, "out of place only"},
          {"--json", bench::presence{&st.json}, "one JSON object per measurement instead of the table"},
          {"--nccl", bench::presence{&st.nccl}, "NCCL's same collective on the same ranks after ours"},
      });
  bench::parse_flags(argc, argv, flags,
                     "collcomm_bench -k KIND -a ALGO -t f32|bf16 -r RANKS -b MIN -e MAX -f FACTOR -n CALLS "
                     "-w WARMUP -R REPS -c 0|1 [-G] [--json] [--nccl]");
  bench::check_settings(st);
  if (st.protocol != "simple" && st.protocol != "ll" && st.protocol != "ll128")
    bench::die("-p must be simple, ll or ll128, not " + st.protocol);
  if (st.threads != 512 && (st.threads != 1024 || st.algo != "direct"))
    bench::die("-T is 512, or 1024 for -a direct (the kernels built), not " + std::to_string(st.threads));
  int dev = 0;
  if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) bench::die("no CUDA device");
  COLLCOMM_BENCH_CUDA(cudaSetDevice(0));
  const double bw = bench::copy_bandwidth(2, 10);
  bool ran = false;
  try {
    if (st.algo == "automatic") {
      if (st.protocol != "simple") bench::die("-a automatic picks each arm's protocol: drop -p");
      collcomm_test::for_each_type(bench_kinds{}, [&]<class K>(std::type_identity<K>) {
        collcomm_test::for_each_type(bench_types{}, [&]<class T>(std::type_identity<T>) {
          if (st.kind == K::name && st.type == element_name<T> && (!K::reduces || st.op == "sum")) {
            run_bench<K, algo::automatic<>, T, bench::bench_op<K>>(st, bw);
            ran = true;
          }
        });
      });
    }
    collcomm_test::for_each_type(bench_kinds{}, [&]<class K>(std::type_identity<K>) {
      collcomm_test::for_each_type(bench_algos{}, [&]<class A>(std::type_identity<A>) {
        collcomm_test::for_each_type(bench_types{}, [&]<class T>(std::type_identity<T>) {
          using Op = bench::bench_op<K>;
          if constexpr (valid_composition<K, A, transport::nvlink, Op, T>) {
            if (st.kind == K::name && st.algo == A::name && st.type == element_name<T> &&
                (!K::reduces || st.op == "sum")) {
              if (st.protocol == "simple" && st.threads == 1024) {
                if constexpr (std::is_same_v<A, algo::direct>)
                  run_bench<K, A, T, Op, tuning<protocol::simple, 0, 0, 1024>>(st, bw);
              } else if (st.protocol == "simple") {
                run_bench<K, A, T, Op>(st, bw);
              }
              // direct schedules move no FIFO messages
              else if constexpr (!A::needs_direct) {
                if (st.protocol == "ll")
                  run_bench<K, A, T, Op, tuning<protocol::ll>>(st, bw);
                else
                  run_bench<K, A, T, Op, tuning<protocol::ll128>>(st, bw);
              } else {
                bench::die(std::string("algorithm ") + A::name + " moves no FIFO messages: protocol " + st.protocol +
                           " changes nothing for it");
              }
              ran = true;
            }
          }
        });
      });
    });
  } catch (const std::exception& e) {
    bench::die(e.what());
  }
  if (!ran)
    bench::die("no such composition: " + st.kind + " " + st.algo + " " + st.type + " " + st.op +
               " (op: sum; type: f32 or bf16)");
  return 0;
}
