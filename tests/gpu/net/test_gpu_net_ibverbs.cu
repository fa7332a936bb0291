// GPU buffers over net<ibverbs> (labels gpu;net;fault): ranks as threads of this process on the one
// GPU, each its own communicator<net<ibverbs>>(boot, device, ...) over the verbs double
// (tests/verbs/verbs_double.hpp), which moves the RDMA writes between the ranks' registered memory
// in process. Every rank is its own pretend host, so every message goes kernel -> pinned outbox
// -> the proxy's tagged RDMA write -> the peer's pinned inbox -> its kernel: the GPU proxy and the
// queue pairs made on the GPU world's FIFOs run end to end. Every FIFO schedule of the six kinds
// and hierarchical over two pretend hosts, N = 2, 3, 4, several calls queued, fresh random inputs
// (the seed is printed), outputs poisoned, every element checked (tests/gpu/rank_case.hpp). Faults:
// a rank whose device vanishes mid-run, and a queue pair moved to the error state: every rank's
// check() ends with an error (naming the peer where it is one's network peer), none hangs.
#include <common/matrix.hpp>
#include <gpu/rank_case.hpp>
#include <verbs/verbs_double.hpp>

#include <collcomm/bootstrap/local.hpp>
#include <collcomm/gpu.hpp>
#include <collcomm/net_ibverbs.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;
using namespace collcomm_gpu_test;
using namespace std::chrono_literals;
namespace tr = collcomm::transport;
using vcomm = communicator<tr::net<tr::ibverbs>>;

namespace {

const tr::verbs_api& double_api() {
  static const tr::verbs_api api = verbs_double::fabric::instance().api();
  return api;
}

// Rank r's network options: the double's table, its device mockdev<r>, its own pretend host
// unless `hosts` > 0 (then rank r is on host r * hosts / n), every pair through the network.
host::net_options net_options_of(int r, int n, int hosts) {
  host::net_options o;
  o.ibverbs.verbs = &double_api();
  o.ibverbs.hca = "mockdev" + std::to_string(r);
  o.ibverbs.probe_interval = 100ms;
  o.host_id = 1 + static_cast<std::uint64_t>(hosts > 0 ? r * hosts / n : r);
  o.same_host = host::same_host_path::network;  // ranks as threads: no CUDA IPC within a process
  return o;
}

// Small slots, so that each call is many messages and credits.
gpu::options gpu_options_of() {
  gpu::options o;
  o.channels = 2;
  o.slots = 4;
  o.slot_bytes = 16 << 10;
  o.timeout = 20s;
  return o;
}

// Runs f(boot, rank) on n threads, each on GPU 0 with its own bootstrap::local of one group.
template <class F>
void run_ranks(int n, F&& f) {
  bootstrap::local_group group(n, 60s);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      bootstrap::local boot(group, r);
      f(boot, r);
    });
  for (auto& t : threads) t.join();
}

std::uint64_t fresh(const char* what) {
  const std::uint64_t s = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("%s: seed = %llu\n", what, static_cast<unsigned long long>(s));
  return s;
}

template <class K>
constexpr bool six_kinds = std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::reduce_scatter> ||
                           std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::broadcast> ||
                           std::is_same_v<K, kind::reduce> || std::is_same_v<K, kind::all_to_all>;

// Every schedule of Algos on the six kinds, f32, on n ranks: "" per rank or its failures.
template <class Algos>
std::vector<std::string> run_matrix(int n, int hosts, int queued, std::uint64_t seed0) {
  verbs_double::fabric::instance().reset(verbs_double::uniform_devices(n));
  std::vector<std::string> failures(static_cast<std::size_t>(n));
  std::vector<int> cases(static_cast<std::size_t>(n), 0);
  run_ranks(n, [&](bootstrap::local& boot, int r) {
    std::string& fail = failures[static_cast<std::size_t>(r)];
    try {
      vcomm comm(boot, 0, gpu_options_of(), net_options_of(r, n, hosts));
      if (comm.hosts().nhosts() != (hosts > 0 ? std::min(hosts, n) : n))
        fail += "rank " + std::to_string(r) + " sees " + std::to_string(comm.hosts().nhosts()) + " hosts\n";
      for (int p = 0; p < n; ++p)
        if (p != r && !comm.over_network(p)) fail += "rank " + std::to_string(p) + " is not over the network\n";
      cudaStream_t s;
      CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      std::uint64_t seed = seed0;
      collcomm_test::for_each_schedule<Algos>([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
        using Op = std::conditional_t<K::reduces, op::sum, op::none>;
        if constexpr (six_kinds<K> && !A::needs_direct && valid_composition<K, A, tr::net<tr::ibverbs>, Op, float>) {
          for (index_t count : {index_t{1}, static_cast<index_t>(n + 1), index_t{1031}, index_t{250007}})
            for (int place = 0; place < (has_in_place<K> && supports_in_place<A> ? 2 : 1); ++place) {
              const int root = K::rooted ? static_cast<int>(count % n) : 0;
              seed = next_seed(seed);
              const std::string e = run_case<K, A, float, Op>(comm, boot, s, count, place == 1, root, queued, seed);
              ++cases[static_cast<std::size_t>(r)];
              if (!e.empty())
                fail += std::string(K::name) + " " + A::name + " count=" + std::to_string(count) +
                        " in_place=" + std::to_string(place) + " root=" + std::to_string(root) + ": " + e + "\n";
            }
        }
      });
      cudaStreamDestroy(s);
    } catch (const std::exception& e) {
      fail += std::string("exception: ") + e.what() + "\n";
    }
  });
  std::printf("n = %d%s: %d cases of %d calls each on rank 0\n", n, hosts > 0 ? " (hierarchical, 2 hosts)" : "",
              cases[0], queued);
  return failures;
}

void expect_clean(const std::vector<std::string>& failures, std::uint64_t seed) {
  for (std::size_t r = 0; r < failures.size(); ++r)
    CHECK_MESSAGE(failures[r].empty(), "rank " << r << " (seed " << seed << "):\n" << failures[r]);
  auto& fab = verbs_double::fabric::instance();
  CHECK_MESSAGE(fab.rnr_events.load() == 0, "a sender wrote into a slot its receiver had not released");
  CHECK(fab.cq_overflows.load() == 0);
  CHECK_MESSAGE(fab.live_objects() == 0, "verbs objects left after every communicator was destroyed");
}

// How one rank's loop of all_reduce calls ended after a fault.
struct ended {
  std::string error;  // what check() (or a call) threw; empty: none
  double seconds = -1;  // after the fault
  std::string note;     // anything else that went wrong
};

enum class fault { vanish, qp_error };

// n ranks run all_reduce<ring> of 64 Ki floats (many 16 KiB messages per link) in a loop, each call
// checked; at call 10 rank `a`'s device vanishes (vanish: it stops calling as a dead process
// would) or every queue pair of rank `a`'s moves to the error state (qp_error).
std::vector<ended> run_fault(int n, fault kind, int a) {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(n));
  std::vector<ended> res(static_cast<std::size_t>(n));
  std::atomic<std::int64_t> fault_ns{0};
  std::latch others_done(kind == fault::vanish ? n - 1 : 0);
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  run_ranks(n, [&](bootstrap::local& boot, int r) {
    ended& me = res[static_cast<std::size_t>(r)];
    gpu::options go = gpu_options_of();
    go.timeout = 5s;
    std::unique_ptr<vcomm> comm;
    try {
      comm = std::make_unique<vcomm>(boot, 0, go, net_options_of(r, n, 0));
      cudaStream_t s;
      CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      constexpr index_t count = 64 << 10;
      float *in = nullptr, *out = nullptr;
      CK(cudaMalloc(&in, count * sizeof(float)));
      CK(cudaMalloc(&out, count * sizeof(float)));
      std::vector<float> ones(count, 1.0f), got(count);
      CK(cudaMemcpy(in, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice));
      for (int it = 0; it < 100000; ++it) {
        if (r == a && it == 10) {
          fault_ns = now_ns();
          if (kind == fault::vanish) {
            fab.kill_device(a);
            break;  // a dead process makes no more calls
          }
          fab.force_error_device(a);
        }
        if (fault_ns.load() != 0 && (now_ns() - fault_ns.load()) * 1e-9 > 30) {
          me.note = "no error 30 s after the fault (" + std::to_string(it) + " calls)";
          break;
        }
        try {
          all_reduce<algo::ring>(*comm, in, out, count, op::sum{}, s);
          CK(cudaStreamSynchronize(s));
          comm->check();
        } catch (const collcomm::error& e) {
          me.error = e.what();
          me.seconds = (now_ns() - fault_ns.load()) * 1e-9;
          break;
        }
        CK(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
        for (index_t i = 0; i < count; ++i)
          if (got[i] != static_cast<float>(n)) {
            me.note = "call " + std::to_string(it) + ": element " + std::to_string(i) + " = " + std::to_string(got[i]);
            it = 100000;
            break;
          }
      }
      cudaStreamSynchronize(s);
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(s);
    } catch (const std::exception& e) {
      me.note = std::string("unexpected exception: ") + e.what();
    }
    // A vanished rank is a dead process: it says no bye (its communicator goes) before the others ended.
    if (kind == fault::vanish) {
      if (r == a)
        others_done.wait();
      else
        others_done.count_down();
    }
    comm.reset();
  });
  return res;
}

}  // namespace

TEST_CASE("net<ibverbs> GPU buffers over the verbs double: every FIFO schedule, N = 2, 3, 4 ranks as threads") {
  for (int n : {2, 3, 4}) {
    const std::uint64_t seed = fresh("ibverbs gpu matrix");
    expect_clean(run_matrix<collcomm_test::all_algorithms>(n, 0, 3, seed), seed);
  }
}

TEST_CASE("net<ibverbs> GPU buffers over the verbs double: hierarchical over 2 pretend hosts, N = 3, 4") {
  using hier = collcomm_test::type_list<algo::hierarchical<algo::ring, algo::ring>,
                                        algo::hierarchical<algo::tree, algo::ring>>;
  for (int n : {3, 4}) {
    const std::uint64_t seed = fresh("ibverbs gpu hierarchical");
    expect_clean(run_matrix<hier>(n, 2, 3, seed), seed);
  }
}

TEST_CASE("net<ibverbs> GPU buffers fault: a rank's device vanishes mid-run") {
  const int n = 3, a = 1;
  const auto res = run_fault(n, fault::vanish, a);
  for (int r = 0; r < n; ++r) {
    const ended& e = res[static_cast<std::size_t>(r)];
    INFO("rank ", r);
    CHECK_MESSAGE(e.note.empty(), e.note);
    if (r == a) continue;  // it stopped calling
    REQUIRE_MESSAGE(!e.error.empty(), "rank " << r << " ended without an error");
    MESSAGE("rank " << r << " after " << e.seconds << " s: " << e.error);
    CHECK(e.seconds < 15);
    CHECK_MESSAGE(e.error.find("rank " + std::to_string(a)) != std::string::npos, "the error does not name rank " << a);
  }
}

TEST_CASE("net<ibverbs> GPU buffers fault: a rank's queue pairs move to the error state mid-run") {
  const int n = 3, a = 2;
  const auto res = run_fault(n, fault::qp_error, a);
  for (int r = 0; r < n; ++r) {
    const ended& e = res[static_cast<std::size_t>(r)];
    INFO("rank ", r);
    CHECK_MESSAGE(e.note.empty(), e.note);
    REQUIRE_MESSAGE(!e.error.empty(), "rank " << r << " ended without an error");
    MESSAGE("rank " << r << " after " << e.seconds << " s: " << e.error);
    CHECK(e.seconds < 15);
    if (r != a)
      CHECK_MESSAGE(e.error.find("rank " + std::to_string(a)) != std::string::npos,
                    "the error does not name rank " << a);
  }
}
