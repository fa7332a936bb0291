// GPU executor across processes (labels gpu;mp and gpu;mp;fault): transport::nvlink over CUDA
// IPC, and transport::pcie_staged through POSIX shared memory registered with cudaHostRegister
// (test cases named "... pcie ..."), N = 2, 3, 4, 8 processes on one GPU.
//
// The test re-executes itself (posix_spawn of /proc/self/exe) as each rank, so no child inherits
// a CUDA-initialised process; ranks bootstrap torchrun-style (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, COLLCOMM_JOB_TOKEN: bootstrap::from_env) and report through their exit code and a
// file each. Modes (argv[1]):
//   (none)    matrix, leak: needs MPS running (else SKIPPED, exit 77): several processes'
//             kernels on one GPU time-slice without it
//   --no-mps [P]  a small correctness run without MPS: 2 processes, few small calls, long timeout
//             (P: only the no-MPS cases matching doctest pattern P, e.g. '*pcie*')
//   --fault   abort, a rank SIGKILLed mid-collective (needs MPS too)
//   --only P  the test cases whose names match doctest pattern P (under MPS), e.g. '*pcie*'
// The pcie cases: every FIFO schedule of all_reduce, reduce_scatter, all_gather, broadcast, reduce
// and all_to_all (N = 2, 3, 4, 8, in and out of place, 20 calls queued), 1000 communicators (and their dups) made and destroyed, a rank SIGKILLed mid-call, and
// a small run without MPS.
// Inputs are fresh random each run (the seed is printed), outputs poisoned, every element
// checked against tests/common/exact_reference.hpp (tests/gpu/check_outputs.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <collcomm/bootstrap/env.hpp>
#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>
#include <common/matrix.hpp>
#include <gpu/check_outputs.hpp>
#include <gpu/rank_case.hpp>

#include <cuda_runtime.h>

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <random>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace collcomm;
using namespace collcomm_test;
using namespace std::chrono_literals;
using collcomm_gpu_test::call;
using collcomm_gpu_test::call_buffers;
using collcomm_gpu_test::layout_of;
using collcomm_gpu_test::next_seed;
using collcomm_gpu_test::run_case;
using nvcomm = communicator<transport::nvlink>;
using pcomm = communicator<transport::pcie_staged>;
using ncomm = communicator<transport::net<transport::socket>>;

namespace {

// ---------------------------------------------------------------- parent side
std::string g_exe;

struct job_result {
  std::vector<int> codes;            // exit code, -signal, or -1000 when killed as hung
  std::vector<std::string> reports;  // what each rank wrote to its report file
};

// Whether `name` (in /dev/shm) is one of collcomm's segments, by its exact form.
bool is_segment_name(const std::string& name) {
  collcomm::detail::segment_name_parts parts;
  return collcomm::detail::parse_segment_name(name, parts);
}

std::set<std::string> collcomm_shm() {
  std::set<std::string> s;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (is_segment_name(e->d_name)) s.insert(e->d_name);
    ::closedir(d);
  }
  return s;
}

// Spawns n ranks running `scenario` (with extra environment), waits up to `limit`.
job_result run_ranks(int n, const std::string& scenario, std::uint64_t seed, std::chrono::seconds limit,
                     const std::vector<std::string>& extra_env = {}) {
  auto id = bootstrap::unique_id::create();
  bootstrap::release_listener(id);            // rank 0 (a child) binds the port again
  auto id2 = bootstrap::unique_id::create();  // a second job for survivors of a fault
  bootstrap::release_listener(id2);
  char tok[17], tok2[17];
  std::snprintf(tok, sizeof tok, "%016llx", static_cast<unsigned long long>(id.token()));
  std::snprintf(tok2, sizeof tok2, "%016llx", static_cast<unsigned long long>(id2.token()));
  const std::string report_base = "/tmp/collcomm_gpu_mp_" + std::to_string(::getpid()) + "_" + scenario;
  job_result j;
  std::vector<pid_t> pids(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string v(*e);
      if (v.rfind("RANK=", 0) == 0 || v.rfind("WORLD_SIZE=", 0) == 0 || v.rfind("MASTER_", 0) == 0 ||
          v.rfind("COLLCOMM_ROOT=", 0) == 0)
        continue;
      env.push_back(v);
    }
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(id.port()));
    env.push_back(std::string("COLLCOMM_JOB_TOKEN=") + tok);
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(n));
    env.push_back("COLLCOMM_TEST_ROOT2=127.0.0.1:" + std::to_string(id2.port()) + "/" + tok2);
    env.push_back("COLLCOMM_TEST_SEED=" + std::to_string(seed));
    env.push_back("COLLCOMM_TEST_REPORT=" + report_base + "." + std::to_string(r));
    for (const auto& e : extra_env) env.push_back(e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string a0 = g_exe, a1 = "--child", a2 = scenario;
    char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
    pid_t p = -1;
    if (::posix_spawn(&p, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0)
      throw std::runtime_error("posix_spawn failed");
    pids[static_cast<std::size_t>(r)] = p;
  }
  j.codes.assign(static_cast<std::size_t>(n), 0);
  std::vector<bool> done(static_cast<std::size_t>(n), false);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      int st = 0;
      if (done[static_cast<std::size_t>(r)] ||
          ::waitpid(pids[static_cast<std::size_t>(r)], &st, WNOHANG) != pids[static_cast<std::size_t>(r)])
        continue;
      done[static_cast<std::size_t>(r)] = true;
      --left;
      j.codes[static_cast<std::size_t>(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r)
        if (!done[static_cast<std::size_t>(r)]) {
          ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
          int st = 0;
          ::waitpid(pids[static_cast<std::size_t>(r)], &st, 0);
          j.codes[static_cast<std::size_t>(r)] = -1000;
          std::fprintf(stderr, "%s rank %d: killed after %lld s (hung)\n", scenario.c_str(), r,
                       static_cast<long long>(limit.count()));
        }
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  for (int r = 0; r < n; ++r) {
    const std::string path = report_base + "." + std::to_string(r);
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    j.reports.push_back(ss.str());
    ::unlink(path.c_str());
  }
  return j;
}

std::uint64_t fresh(const char* what) {
  const std::uint64_t s = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("%s: seed = %llu\n", what, static_cast<unsigned long long>(s));
  return s;
}

// ---------------------------------------------------------------- child side
std::FILE* g_report = nullptr;

void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void report(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_report) {
    std::fprintf(g_report, "%s\n", buf);
    std::fflush(g_report);
  }
  std::fprintf(stderr, "[rank %s] %s\n", std::getenv("RANK"), buf);
}

std::uint64_t env_u64(const char* name) { return std::strtoull(std::getenv(name), nullptr, 10); }

template <class K>
using kind_op = std::conditional_t<K::reduces, op::sum, op::none>;

// Every (kind, algorithm) of the list that composes; f32 sum (a few int32 max, f64 sum, u8 max too).
int scenario_matrix(bootstrap::tcp& boot, int queued, std::vector<index_t> counts, gpu::options o, int replays = 0) {
  const int me = boot.rank(), n = boot.size();
  nvcomm comm(boot, 0, o);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::uint64_t seed = env_u64("COLLCOMM_TEST_SEED");
  int failures = 0, cases = 0;
  auto each = [&]<class K, class A, class T, class Op>(std::type_identity<K>, std::type_identity<A>,
                                                       std::type_identity<T>, std::type_identity<Op>) {
    if constexpr (algorithm_for<A, K> && valid_composition<K, A, transport::nvlink, Op, T>) {
      gpu::preload_composition<K, A, T, Op, tuning<>, transport::nvlink>();
      for (index_t count : counts)
        for (int place = 0; place < (supports_in_place<A> ? 2 : 1); ++place) {
          const int root = K::rooted ? static_cast<int>(count % n) : 0;
          seed = next_seed(seed);
          const std::string e = run_case<K, A, T, Op>(comm, boot, s, count, place == 1, root, queued, seed, replays);
          ++cases;
          if (!e.empty()) {
            ++failures;
            report("FAIL %s %s %s n=%d count=%lld in_place=%d root=%d%s: %s", K::name, A::name, element_name<T>, n,
                   static_cast<long long>(count), place, root, replays ? " (graph)" : "", e.c_str());
          }
        }
    }
  };
  using f = std::type_identity<float>;
  using sum = std::type_identity<op::sum>;
  using none = std::type_identity<op::none>;
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::ring>{}, f{}, sum{});
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::tree>{}, f{}, sum{});
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::one_shot>{}, f{}, sum{});
  // Pushed calls of elements of 8 bytes (a line each) and of 1 (eight a line, the last line partial).
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::one_shot>{}, std::type_identity<double>{},
       sum{});
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::one_shot>{}, std::type_identity<std::uint8_t>{},
       std::type_identity<op::max>{});
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::two_shot>{}, f{}, sum{});
  each(std::type_identity<kind::all_reduce>{}, std::type_identity<algo::ring>{}, std::type_identity<std::int32_t>{},
       std::type_identity<op::max>{});
  each(std::type_identity<kind::reduce_scatter>{}, std::type_identity<algo::ring>{}, f{}, sum{});
  each(std::type_identity<kind::reduce_scatter>{}, std::type_identity<algo::two_shot>{}, f{}, sum{});
  each(std::type_identity<kind::all_gather>{}, std::type_identity<algo::ring>{}, f{}, none{});
  each(std::type_identity<kind::all_gather>{}, std::type_identity<algo::direct>{}, f{}, none{});
  each(std::type_identity<kind::broadcast>{}, std::type_identity<algo::ring>{}, f{}, none{});
  each(std::type_identity<kind::broadcast>{}, std::type_identity<algo::tree>{}, f{}, none{});
  report("rank %d of %d: %d cases (%d calls each%s), %d failed", me, n, cases, queued,
         replays ? ", captured in a graph, replayed 3 times" : "", failures);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// transport::pcie across processes, staged: small connections (4 channels of 4 slots of 16 KiB)
// so that the larger counts take many messages and reuse every slot, and the shared segment stays
// small (8 processes: 64 x 4 x 4 x 16 KiB = 16 MiB of /dev/shm).
gpu::options pcie_options() {
  gpu::options o;
  o.channels = 4;
  o.slots = 4;
  o.slot_bytes = 16 << 10;
  o.timeout = 20s;
  o.connections = gpu::placement::host;
  return o;
}

template <class K>
constexpr bool pcie_matrix_kind = std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::reduce_scatter> ||
                                  std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::broadcast> ||
                                  std::is_same_v<K, kind::reduce> || std::is_same_v<K, kind::all_to_all>;

// Every FIFO schedule (tests/common/matrix.hpp: ring, tree, recursive_doubling, pairwise, linear,
// ...) of the six kinds, f32 (sum for the reducing kinds), each count in and out of place.
// Comm: pcie_staged, or net<socket> (GPU buffers; pretend_hosts > 0: rank r counts as on host
// r % pretend_hosts, or with `blocks` on host r * pretend_hosts / n; ranks of one host reach one
// another through GPU memory, the others through the proxy, unless COLLCOMM_NET_SAME_HOST=network
// sends every message through the proxy). Algos: the algorithms run.
template <class Comm = pcomm, class Algos = collcomm_test::all_algorithms>
int scenario_pcie_matrix(bootstrap::tcp& boot, int queued, std::vector<index_t> counts, gpu::options o,
                         int pretend_hosts = 0, bool blocks = false) {
  const int me = boot.rank(), n = boot.size();
  Comm comm = [&] {
    if constexpr (std::is_same_v<Comm, ncomm>) {
      host::net_options no;
      if (pretend_hosts > 0)
        no.host_id = 1 + static_cast<std::uint64_t>(blocks ? me * pretend_hosts / n : me % pretend_hosts);
      return Comm(boot, 0, o, no);
    } else {
      return Comm(boot, 0, o);
    }
  }();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::uint64_t seed = env_u64("COLLCOMM_TEST_SEED");
  int failures = 0, cases = 0;
  if constexpr (std::is_same_v<Comm, pcomm>) {
    if (comm.gpu_world().opts().connections != gpu::placement::host) {
      report("communicator<pcie_staged>(boot, ...) is not staged");
      ++failures;
    }
  }
  const char* what = std::is_same_v<Comm, pcomm> ? "pcie" : "net";
  if constexpr (std::is_same_v<Comm, ncomm>) {
    if (pretend_hosts > 0 && comm.hosts().nhosts() != std::min(pretend_hosts, n)) {
      report("%d hosts seen, %d pretended", comm.hosts().nhosts(), std::min(pretend_hosts, n));
      ++failures;
    }
    const char* path = std::getenv("COLLCOMM_NET_SAME_HOST");
    const bool all_network = path != nullptr && std::string(path) == "network";
    int near = 0;
    for (int p = 0; p < n; ++p) {
      const bool same = comm.host_ids()[static_cast<std::size_t>(p)] == comm.host_ids()[static_cast<std::size_t>(me)];
      near += p != me && !comm.over_network(p);
      if (p != me && comm.over_network(p) != (all_network || !same)) {
        report("rank %d: the path to rank %d is %s (same host: %d, COLLCOMM_NET_SAME_HOST=%s)", me, p,
               comm.over_network(p) ? "the network" : "GPU memory", same, path ? path : "");
        ++failures;
      }
    }
    report("rank %d of %d: %d peers through GPU memory, %d through the network", me, n, near, n - 1 - near);
  }
  collcomm_test::for_each_schedule<Algos>([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    using Op = kind_op<K>;
    if constexpr (pcie_matrix_kind<K> && !A::needs_direct &&
                  valid_composition<K, A, typename Comm::transport_type, Op, float>) {
      gpu::preload_composition<K, A, float, Op, tuning<>, transport::pcie_staged>();
      for (index_t count : counts)
        for (int place = 0; place < (has_in_place<K> && supports_in_place<A> ? 2 : 1); ++place) {
          const int root = K::rooted ? static_cast<int>(count % n) : 0;
          seed = next_seed(seed);
          const std::string e = run_case<K, A, float, Op>(comm, boot, s, count, place == 1, root, queued, seed);
          ++cases;
          if (!e.empty()) {
            ++failures;
            report("FAIL %s %s %s f32 n=%d count=%lld in_place=%d root=%d: %s", what, K::name, A::name, n,
                   static_cast<long long>(count), place, root, e.c_str());
          }
        }
    }
  });
  // A direct algorithm over pcie_staged does not compile (tests/compile_fail).
  report("rank %d of %d: %s %d cases (%d calls each), %d failed", me, n, what, cases, queued, failures);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// Algorithms mixed in one queue: staged-in-kernel direct calls (one_shot, direct all_gather; no
// exit barrier, alternating window halves), copy-staged ones (two_shot) and FIFO ones (ring, tree),
// back to back on one stream with no host barrier, each call on its own buffers, every output
// checked: a rank that overwrote a window half a peer still read would show here.
int scenario_mixed(bootstrap::tcp& boot) {
  const int me = boot.rank(), n = boot.size();
  gpu::options o;
  o.timeout = 20s;
  nvcomm comm(boot, 0, o);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  gpu::preload_composition<kind::all_reduce, algo::one_shot, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::two_shot, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::tree, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_gather, algo::direct, float, op::none, tuning<>, transport::nvlink>();
  using one_channel = tuning<protocol::simple, 1>;
  gpu::preload_composition<kind::all_reduce, algo::one_shot, float, op::sum, one_channel, transport::nvlink>();
  gpu::preload_composition<kind::all_gather, algo::direct, float, op::none, one_channel, transport::nvlink>();
  // 0 one_shot, 1 two_shot, 2 ring, 3 tree, 4 direct all_gather (count elements per rank), 5 one_shot
  // on 1 channel, 6 direct all_gather on 1 channel, 7 algo::automatic (tables/nvlink.hpp: small calls
  // pushed on one channel or several).
  // Calls on fewer channels than the world's between calls on all of them: every channel must still
  // stage into the half its peers are not reading.
  const std::vector<int> plan = {0, 0, 4, 0, 1, 0, 2, 0, 4, 4, 0, 3, 0, 0, 1, 4, 0, 2, 4, 0, 0,
                                 4, 0, 5, 0, 5, 5, 0, 6, 4, 6, 0, 7, 0, 7, 7, 4, 5, 4, 6, 6, 0};
  int failures = 0;
  std::uint64_t seed = env_u64("COLLCOMM_TEST_SEED");
  for (index_t count : {static_cast<index_t>(n + 1), index_t{1031}, index_t{250007}}) {
    const int q = static_cast<int>(plan.size());
    const case_config cfg{n, count, 0, false};
    std::vector<std::optional<std::vector<float>>> expect(q);  // this rank's output of each call
    std::vector<call_buffers<float>> bufs;                     // freed at the end of this count, after the last barrier
    for (int c = 0; c < q; ++c) {
      seed = next_seed(seed);
      std::mt19937_64 g(seed);
      const bool ag = plan[c] == 4 || plan[c] == 6;
      std::vector<std::vector<float>> x(static_cast<std::size_t>(n), std::vector<float>(count));
      for (int r = 0; r < n; ++r)
        for (index_t i = 0; i < count; ++i)
          x[r][i] = ag ? static_cast<float>(g() % 2001) - 1000.0f : random_value<float, op::sum>(g, n, r, i);
      expect[c] =
          ag ? reference<kind::all_gather>(x, cfg, op::none{})[me] : reference<kind::all_reduce>(x, cfg, op::sum{})[me];
      bufs.emplace_back(ag ? layout_of<kind::all_gather>(cfg, me) : layout_of<kind::all_reduce>(cfg, me));
      bufs[c].prepare(x[me]);  // poisoned output, then the input
      if (!bufs[c].error().empty()) throw std::runtime_error("call " + std::to_string(c) + ": " + bufs[c].error());
    }
    gpu::preload(comm, [&] { all_reduce(comm, bufs[0].input(), bufs[0].output(), count, op::sum{}, s); });  // every arm
    CK(cudaDeviceSynchronize());
    boot.barrier();
    std::string err;
    try {
      for (int c = 0; c < q; ++c) {
        const float* in = bufs[c].input();
        float* out = bufs[c].output();
        switch (plan[c]) {
          case 0:
            all_reduce<algo::one_shot>(comm, in, out, count, op::sum{}, s);
            break;
          case 1:
            all_reduce<algo::two_shot>(comm, in, out, count, op::sum{}, s);
            break;
          case 2:
            all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);
            break;
          case 3:
            all_reduce<algo::tree>(comm, in, out, count, op::sum{}, s);
            break;
          case 4:
            all_gather<algo::direct>(comm, in, out, count, s);
            break;
          case 5:
            all_reduce<algo::one_shot, one_channel>(comm, in, out, count, op::sum{}, s);
            break;
          case 6:
            all_gather<algo::direct, one_channel>(comm, in, out, count, s);
            break;
          default:
            all_reduce(comm, in, out, count, op::sum{}, s);
            break;
        }
      }
      CK(cudaStreamSynchronize(s));
      comm.check();
    } catch (const std::exception& e) {
      err = e.what();
    }
    boot.barrier();
    for (int c = 0; c < q && err.empty(); ++c)
      err = bufs[c].check(expect[c], "call " + std::to_string(c) + " (plan " + std::to_string(plan[c]) + ")");
    if (!err.empty()) {
      ++failures;
      report("FAIL mixed n=%d count=%lld: %s", n, static_cast<long long>(count), err.c_str());
    }
  }
  report("rank %d of %d: mixed queue of %zu calls x 3 counts, %d failed", me, n, plan.size(), failures);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// Pushed calls (small one_shot all_reduce, transport::pushes, across
// processes: no barrier, flagged lines in each peer's push area) across the wrap of their 32-bit
// flags. Two calls leave lines flagged 1 and 2 in the two parts of every push area; every
// channel's staged-call count is then set to 2^32 - 1 on every rank: that call opens the next 2^32
// (its flag would be 0), so it is staged and cleans the push areas, and the two calls after it are
// flagged 1 and 2 again, in the same parts, over the same lines. Before each call rank 0 waits 300 ms: its peers poll
// their areas for its lines long before it stores them, and would take the lines the first two
// calls left (other inputs) if the wrap had not cleaned them. Every output is poisoned, checked
// element by element against the exact reference.
int scenario_pushed_wrap(bootstrap::tcp& boot) {
  const int me = boot.rank(), n = boot.size();
  gpu::options o;
  o.timeout = 20s;
  nvcomm comm(boot, 0, o);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  gpu::preload_composition<kind::all_reduce, algo::one_shot, float, op::sum, tuning<>, transport::nvlink>();
  const index_t count = 515;  // 2060 bytes: pushed among up to 8 processes
  if (!transport::pushes(count, sizeof(float), n, 1, 4)) throw std::runtime_error("the count is not a pushed call's");
  const case_config cfg{n, count, 0, false};
  std::uint64_t seed = env_u64("COLLCOMM_TEST_SEED");
  int failures = 0;
  auto call = [&](const char* what) {
    seed = next_seed(seed);
    std::mt19937_64 g(seed);
    std::vector<std::vector<float>> x(static_cast<std::size_t>(n), std::vector<float>(count));
    for (int r = 0; r < n; ++r)
      for (index_t i = 0; i < count; ++i) x[r][i] = random_value<float, op::sum>(g, n, r, i);
    const auto expect = reference<kind::all_reduce>(x, cfg, op::sum{})[me];
    call_buffers<float> b(layout_of<kind::all_reduce>(cfg, me));
    b.prepare(x[me]);
    CK(cudaDeviceSynchronize());
    boot.barrier();
    if (me == 0) std::this_thread::sleep_for(300ms);
    std::string err;
    try {
      all_reduce<algo::one_shot>(comm, b.input(), b.output(), count, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      comm.check();
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (err.empty()) err = b.check(expect, what);
    if (!err.empty()) {
      ++failures;
      report("FAIL pushed wrap n=%d: %s: %s", n, what, err.c_str());
    }
    boot.barrier();
  };
  call("flag 1");
  call("flag 2");
  const gpu::world& w = comm.gpu_world();
  const std::vector<std::uint64_t> near(static_cast<std::size_t>(w.opts().channels), (std::uint64_t{1} << 32) - 1);
  CK(cudaMemcpy(w.fields(me).staged_calls, near.data(), near.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  call("the call whose flag would be 0 (staged; cleans the push areas)");
  call("flag 1 after the wrap");
  call("flag 2 after the wrap");
  report("rank %d of %d: 5 one_shot calls across the wrap of the pushed calls' flags, %d failed", me, n, failures);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

__device__ void add_to_each_body(int* x, index_t count, int v) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    x[i] += v;
}

__global__ void add_to_each(int* x, index_t count, int v) { add_to_each_body(x, count, v); }

// The same, written for a programmatic launch: it waits for the kernel before it on the stream (a
// collcomm call) before its first load, as the library asks of a user's programmatic kernel.
__global__ void add_to_each_dependent(int* x, index_t count, int v) {
  cudaGridDependencySynchronize();
  add_to_each_body(x, count, v);
}

// The node that the last launch on `s` made, where `s` is capturing; else null.
cudaGraphNode_t last_captured(cudaStream_t s) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* last = nullptr;
  std::size_t nlast = 0;
#if CUDART_VERSION >= 13000
  CK(cudaStreamGetCaptureInfo(s, &capturing, nullptr, nullptr, &last, nullptr, &nlast));
#else
  CK(cudaStreamGetCaptureInfo(s, &capturing, nullptr, nullptr, &last, &nlast));
#endif
  return capturing == cudaStreamCaptureStatusActive && nlast == 1 ? last[0] : nullptr;
}

// The edges of `graph`, each with whether it is programmatic; false where this CUDA cannot tell
// (before 12.3).
bool edges_of(cudaGraph_t graph, std::vector<cudaGraphNode_t>& from, std::vector<cudaGraphNode_t>& to,
              std::vector<bool>& programmatic) {
#if CUDART_VERSION >= 12030
#if CUDART_VERSION >= 13000
  auto get = [&](cudaGraphNode_t* f, cudaGraphNode_t* t, cudaGraphEdgeData* d, std::size_t* n) {
    return cudaGraphGetEdges(graph, f, t, d, n);
  };
#else
  auto get = [&](cudaGraphNode_t* f, cudaGraphNode_t* t, cudaGraphEdgeData* d, std::size_t* n) {
    return cudaGraphGetEdges_v2(graph, f, t, d, n);
  };
#endif
  std::size_t n = 0;
  CK(get(nullptr, nullptr, nullptr, &n));
  from.resize(n);
  to.resize(n);
  std::vector<cudaGraphEdgeData> data(n);
  CK(get(from.data(), to.data(), data.data(), &n));
  programmatic.resize(n);
  for (std::size_t e = 0; e < n; ++e) programmatic[e] = data[e].type == cudaGraphDependencyTypeProgrammatic;
  return true;
#else
  (void)graph, (void)from, (void)to, (void)programmatic;
  return false;
#endif
}

// add_to_each_dependent launched as a programmatic dependent of the stream's previous kernel.
void launch_dependent_add(int* x, index_t count, int v, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(16);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, &add_to_each_dependent, x, count, v));
}

// Calls that depend on each other, queued back to back with no host wait, launched as
// programmatic dependents (options::programmatic_launch: each kernel may be placed while the one
// before it runs, and waits on the GPU for it to end, gpu/launch.hpp), or not: int32
// sum all_reduce a -> b, b -> a, then a kernel of the test adds rank + 1 to a, then a -> b, then a
// kernel of the test launched programmatically (it waits as the library asks) adds rank + 1 to b,
// then b -> a. Each call reads what the one before it wrote and overwrites what that one read; every
// rank checks a and b (poisoned first) element by element against the exact values, for
// algo::automatic, one_shot (pushed, and staged at the largest count) and ring, stream-launched
// and captured into a CUDA graph (replayed 3 times, a restored from the inputs at its start). In
// the graph, every edge from a kernel to a call is programmatic exactly when `programmatic`.
template <class A>
int chain_of_calls(nvcomm& comm, cudaStream_t s, int me, int n, bool programmatic, std::uint64_t& seed) {
  int failures = 0;
  long long kernel_to_call = 0;  // such edges seen, over the counts
  for (index_t count : {static_cast<index_t>(n + 1), index_t{1031}, index_t{250007}}) {
    seed = next_seed(seed);
    std::mt19937_64 g(seed);
    std::vector<std::vector<std::int64_t>> x(static_cast<std::size_t>(n), std::vector<std::int64_t>(count));
    for (auto& xr : x)
      for (auto& v : xr) v = static_cast<std::int64_t>(g() % 101) - 50;
    // The exact values: after a -> b every rank holds the sum; after a kernel rank r's a (or b) adds r + 1.
    std::vector<int> expect_a(count), expect_b(count), mine(count);
    for (index_t i = 0; i < count; ++i) {
      std::int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += x[r][i];
      const std::int64_t b3 = n * (n * sum) + n * (n + 1) / 2;  // b after the third call
      expect_b[i] = static_cast<int>(b3 + me + 1);
      expect_a[i] = static_cast<int>(n * b3 + n * (n + 1) / 2);
      mine[i] = static_cast<int>(x[me][i]);
    }
    int *a = nullptr, *b = nullptr, *x0 = nullptr;
    CK(cudaMalloc(&a, count * sizeof(int)));
    CK(cudaMalloc(&b, count * sizeof(int)));
    CK(cudaMalloc(&x0, count * sizeof(int)));
    CK(cudaMemcpy(x0, mine.data(), count * sizeof(int), cudaMemcpyHostToDevice));
    cudaGraphNode_t test_nodes[2] = {};  // captured: the test's kernels' nodes
    auto queue = [&] {
      CK(cudaMemcpyAsync(a, x0, count * sizeof(int), cudaMemcpyDeviceToDevice, s));
      all_reduce<A>(comm, a, b, count, op::sum{}, s);
      all_reduce<A>(comm, b, a, count, op::sum{}, s);
      add_to_each<<<16, 256, 0, s>>>(a, count, me + 1);
      test_nodes[0] = last_captured(s);
      all_reduce<A>(comm, a, b, count, op::sum{}, s);
      launch_dependent_add(b, count, me + 1, s);
      test_nodes[1] = last_captured(s);
      all_reduce<A>(comm, b, a, count, op::sum{}, s);
    };
    auto check = [&](const char* how) {
      std::vector<int> ha(count), hb(count);
      CK(cudaMemcpy(ha.data(), a, count * sizeof(int), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hb.data(), b, count * sizeof(int), cudaMemcpyDeviceToHost));
      for (index_t i = 0; i < count; ++i)
        if (ha[i] != expect_a[i] || hb[i] != expect_b[i]) {
          report("FAIL chain %s n=%d count=%lld %s: at %lld a = %d (expected %d), b = %d (expected %d)", A::name, n,
                 static_cast<long long>(count), how, static_cast<long long>(i), ha[i], expect_a[i], hb[i], expect_b[i]);
          ++failures;
          return;
        }
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    try {
      CK(cudaMemset(b, 0x7F, count * sizeof(int)));
      CK(cudaDeviceSynchronize());
      queue();
      CK(cudaStreamSynchronize(s));
      comm.check();
      check("stream-launched");
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      try {
        queue();
      } catch (...) {
        cudaStreamEndCapture(s, &graph);  // the capture ends with the call that failed
        throw;
      }
      CK(cudaStreamEndCapture(s, &graph));
      // The edges from a kernel to a call (a node that is none of the test's kernels).
      std::vector<cudaGraphNode_t> from, to;
      std::vector<bool> kind_of;                                     // programmatic
      if (!edges_of(graph, from, to, kind_of)) kernel_to_call = -1;  // not checked
      auto is_kernel = [](cudaGraphNode_t node) {
        cudaGraphNodeType type;
        CK(cudaGraphNodeGetType(node, &type));
        return type == cudaGraphNodeTypeKernel;
      };
      long long to_calls = 0, wrong = 0;
      for (std::size_t e = 0; e < from.size(); ++e) {
        if (to[e] == test_nodes[0] || to[e] == test_nodes[1] || !is_kernel(from[e]) || !is_kernel(to[e])) continue;
        ++to_calls;
        if (kind_of[e] != programmatic) ++wrong;
      }
      if (kernel_to_call >= 0) kernel_to_call += to_calls;
      if (!test_nodes[0] || !test_nodes[1] || wrong != 0) {
        report("FAIL chain %s n=%d count=%lld: %lld of %lld edges from a kernel to a call are %s", A::name, n,
               static_cast<long long>(count), wrong, to_calls, programmatic ? "not programmatic" : "programmatic");
        ++failures;
      }
      CK(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 3; ++replay) {
        CK(cudaMemset(b, 0x7F, count * sizeof(int)));
        CK(cudaMemset(a, 0x7F, count * sizeof(int)));
        CK(cudaDeviceSynchronize());
        CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        comm.check();
        check("from a graph");
      }
    } catch (const std::exception& e) {
      report("FAIL chain %s n=%d count=%lld: %s", A::name, n, static_cast<long long>(count), e.what());
      ++failures;
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CK(cudaDeviceSynchronize());
    cudaFree(a);
    cudaFree(b);
    cudaFree(x0);
    if (failures) break;
  }
  if (failures == 0 && kernel_to_call == 0) {  // an algorithm that would not check the launches
    report("FAIL chain %s n=%d: no call followed a kernel in the graphs", A::name, n);
    ++failures;
  }
  return failures;
}

int scenario_chain(bootstrap::tcp& boot, bool programmatic) {
  const int me = boot.rank(), n = boot.size();
  gpu::options o;
  o.timeout = 20s;
  o.programmatic_launch = programmatic;
  ::unsetenv("COLLCOMM_GPU_PROGRAMMATIC_LAUNCH");  // which would override it
  nvcomm comm(boot, 0, o);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::uint64_t seed = env_u64("COLLCOMM_TEST_SEED");
  int failures = chain_of_calls<algo::automatic<>>(comm, s, me, n, programmatic, seed);
  failures += chain_of_calls<algo::one_shot>(comm, s, me, n, programmatic, seed);
  failures += chain_of_calls<algo::ring>(comm, s, me, n, programmatic, seed);
  report("rank %d of %d: chains of dependent calls (automatic, one_shot, ring; 3 counts; launches %s), %d failed", me,
         n, programmatic ? "programmatic" : "plain", failures);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// A direct call larger than the window is refused, naming 'count' and the rank.
int scenario_window(bootstrap::tcp& boot) {
  gpu::options o;
  o.window_bytes = 4096;
  nvcomm comm(boot, 0, o);
  float* d = nullptr;
  CK(cudaMalloc(&d, 2 * 8192));
  int code = 1;
  try {
    all_reduce<algo::one_shot>(comm, d, d + 2048, 2048, op::sum{}, cudaStream_t{});
    report("a 8 KiB one_shot call through a 4 KiB window was not refused");
  } catch (const error& e) {
    const std::string m = e.what();
    code = e.code() == errc::invalid_argument && m.find("'count'") != std::string::npos &&
                   m.find("rank " + std::to_string(boot.rank())) != std::string::npos
               ? 0
               : 1;
    if (code) report("unexpected message: %s", e.what());
  }
  cudaFree(d);
  return code;
}

int fd_count() {
  int k = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) k += e->d_name[0] != '.';
    ::closedir(d);
  }
  return k;
}

// Mappings of collcomm's shared memory in this process (/proc/self/maps: the names stay there,
// '(deleted)', while mapped).
int shm_mappings() {
  std::ifstream maps("/proc/self/maps");
  int k = 0;
  for (std::string line; std::getline(maps, line);) {
    const std::size_t at = line.find(" /dev/shm/");
    if (at == std::string::npos) continue;
    std::string name = line.substr(at + 10);
    if (const std::size_t del = name.find(" (deleted)"); del != std::string::npos) name.resize(del);
    k += is_segment_name(name);
  }
  return k;
}

// Creates and destroys communicators until 1000 or 30 s (rank 0 decides; every rank follows),
// with a call on every 50th (and, where Comm has one, a call on its dup); afterwards no
// descriptor, no shared-memory mapping and no device memory may remain.
template <class Comm>
int scenario_leak(bootstrap::tcp& boot, gpu::options o) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* d = nullptr;
  CK(cudaMalloc(&d, 4096));
  CK(cudaMemset(d, 0, 4096));
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::pcie_staged>();
  { Comm warm(boot, 0, o); }  // first use initialises the driver's IPC state
  CK(cudaDeviceSynchronize());
  // Free device memory is device-wide: measure when every rank is between communicators.
  boot.barrier();
  std::size_t free0 = 0, total = 0, free1 = 0;
  CK(cudaMemGetInfo(&free0, &total));
  boot.barrier();
  const int fds0 = fd_count(), maps0 = shm_mappings();
  const auto t0 = std::chrono::steady_clock::now();
  int made = 0;
  for (; made < 1000; ++made) {
    char go = made < 1000 && std::chrono::steady_clock::now() - t0 < 30s ? 1 : 0;
    std::vector<char> all(static_cast<std::size_t>(boot.size()));
    boot.all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&go), 1),
                    std::as_writable_bytes(std::span<char>(all)));
    if (!all[0]) break;
    Comm comm(boot, 0, o);
    if (made % 50 == 0) {
      all_reduce<algo::ring>(comm, d, d, 1000, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      comm.check();
      if constexpr (std::is_same_v<Comm, pcomm>) {
        Comm twin = comm.dup();
        all_reduce<algo::ring>(twin, d, d, 1000, op::sum{}, s);
        CK(cudaStreamSynchronize(s));
        twin.check();
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CK(cudaDeviceSynchronize());
  boot.barrier();
  CK(cudaMemGetInfo(&free1, &total));
  boot.barrier();
  const int fds1 = fd_count(), maps1 = shm_mappings();
  report(
      "rank %d: %d communicators made and destroyed in %.1f s; fds %d -> %d; shm mappings %d -> %d; device free %zu -> "
      "%zu bytes",
      boot.rank(), made, secs, fds0, fds1, maps0, maps1, free0, free1);
  cudaFree(d);
  cudaStreamDestroy(s);
  return made >= 100 && fds1 == fds0 && maps1 == maps0 && free1 >= free0
             ? 0
             : 1;  // the peer may free late, never hold more
}

}  // namespace
template <class Comm = nvcomm>
int scenario_fresh_call(bootstrap::tcp& boot, cudaStream_t s, float* d, gpu::options o = {});
namespace {

// Rank 1 aborts while the others' kernels wait for it: they return errc::aborted, later calls
// on every rank throw it, and a new communicator over the same bootstrap works.
// Ranks that disagree about a call (`what`: "root", rank 1 broadcasts from root 1, the others
// from 0; "op", rank 1 reduces with max, the others with sum; "one_shot", rank 1 passes 8 fewer
// elements to a direct all_reduce), then make an agreeing all_reduce:
// each rank gets an error in the first or the second call (in comm.check()), an all_reduce that
// passes its check returns the right sums, and a third call is refused (errc::aborted). The rank's
// report holds its error (the test looks for "another call" in some rank's), and a reducing call
// that failed left its output untouched: one_shot's direct barrier checks the call before any rank
// arrives, and ring's simple messages are checked before a rank takes their data. (Protocols ll and
// ll128 check a message's header beside the warps that move its lines, and two_shot across
// processes copies its window into the output: those can still write before the error.)
int scenario_disagree(bootstrap::tcp& boot, const std::string& what) {
  const int me = boot.rank(), n = boot.size();
  gpu::options o;
  o.timeout = 3s;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const index_t count = 5003;
  float *in = nullptr, *out = nullptr;
  CK(cudaMalloc(&in, count * sizeof(float)));
  CK(cudaMalloc(&out, count * sizeof(float)));
  std::vector<float> h(count);
  for (index_t i = 0; i < count; ++i) h[i] = static_cast<float>(me + static_cast<int>(i % 7));
  CK(cudaMemcpy(in, h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemsetAsync(out, 0x7F, count * sizeof(float), s));  // s does not wait for the legacy stream
  CK(cudaStreamSynchronize(s));
  int code = 0;
  {
    nvcomm comm(boot, 0, o);
    boot.barrier();
    bool first = true;  // the error, if any, is the first call's
    try {
      if (what == "root")
        broadcast<algo::ring>(comm, in, out, count, me == 1 ? 1 : 0, s);
      else if (what == "one_shot")
        all_reduce<algo::one_shot>(comm, in, out, me == 1 ? count - 8 : count, op::sum{}, s);
      else if (what == "pushed")  // small calls (transport::pushes, 3 ranks): pushed, no barrier
        all_reduce<algo::one_shot>(comm, in, out, me == 1 ? 992 : 1000, op::sum{}, s);
      else if (what == "pushed_op" && me == 1)
        all_reduce<algo::one_shot>(comm, in, out, 1000, op::max{}, s);
      else if (what == "pushed_op")
        all_reduce<algo::one_shot>(comm, in, out, 1000, op::sum{}, s);
      else if (what == "pushed_staged")  // rank 1 pushes, its peers stage and wait at a barrier
        all_reduce<algo::one_shot>(comm, in, out, me == 1 ? 1000 : count, op::sum{}, s);
      else if (me == 1)
        all_reduce<algo::ring>(comm, in, out, count, op::max{}, s);
      else
        all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      comm.check();
      first = false;
      CK(cudaMemsetAsync(out, 0x7F, count * sizeof(float), s));
      all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      comm.check();
      CK(cudaMemcpy(h.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
      for (index_t i = 0; i < count; ++i)
        if (h[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7))) {
          report("rank %d: the agreeing all_reduce returned a wrong value at %lld", me, static_cast<long long>(i));
          code = 1;
          break;
        }
      report("rank %d: no error in either call", me);
      code = 1;
    } catch (const error& e) {
      report("rank %d: %s", me, e.what());
      // A failed reducing call leaves the output as it was: no rank passes a barrier or takes a
      // message of another call. (A broadcast's root copies its input before any peer is heard.)
      if (first && what != "root") {
        std::vector<std::uint32_t> bits(count);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(bits.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
        for (index_t i = 0; i < count; ++i)
          if (bits[i] != 0x7F7F7F7Fu) {
            report("rank %d: the failed call wrote its output at %lld", me, static_cast<long long>(i));
            code = 1;
            break;
          }
      }
    }
    try {
      all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      comm.check();
      report("rank %d: a call after the failure did not throw", me);
      code = 1;
    } catch (const error& e) {
      if (e.code() != errc::aborted) {
        report("rank %d: a call after the failure: %s", me, e.what());
        code = 1;
      }
    }
    CK(cudaStreamSynchronize(s));
  }
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(s);
  return code;
}

int scenario_abort(bootstrap::tcp& boot) {
  const int me = boot.rank();
  gpu::options o;
  o.timeout = 10s;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* d = nullptr;
  CK(cudaMalloc(&d, 1 << 20));
  CK(cudaMemset(d, 0, 1 << 20));
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::pcie_staged>();
  int code = 0;
  {
    nvcomm comm(boot, 0, o);
    boot.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (me == 1) {
      std::this_thread::sleep_for(500ms);
      comm.abort("the test says so");
    } else {
      all_reduce<algo::ring>(comm, d, d, 1 << 18, op::sum{}, s);
      CK(cudaStreamSynchronize(s));
      try {
        comm.check();
        report("rank %d: check() after the abort did not throw", me);
        code = 1;
      } catch (const error& e) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        report("rank %d: after %.0f ms: %s", me, ms, e.what());
        if (e.code() != errc::aborted || ms > 5000) code = 1;
      }
    }
    try {
      all_reduce<algo::ring>(comm, d, d, 1000, op::sum{}, s);
      report("rank %d: a call after abort did not throw", me);
      code = 1;
    } catch (const error& e) {
      if (e.code() != errc::aborted) {
        report("rank %d: a call after abort: %s", me, e.what());
        code = 1;
      }
    }
    CK(cudaStreamSynchronize(s));
  }
  code |= scenario_fresh_call(boot, s, d);
  cudaFree(d);
  cudaStreamDestroy(s);
  return code;
}

}  // namespace

// A new communicator after a fault: one all_reduce checked (the process stayed usable).
template <class Comm>
int scenario_fresh_call(bootstrap::tcp& boot, cudaStream_t s, float* d, gpu::options o) {
  Comm comm(boot, 0, o);
  std::vector<float> h(1000);
  for (int i = 0; i < 1000; ++i) h[i] = static_cast<float>(boot.rank() + i);
  CK(cudaMemcpy(d, h.data(), sizeof(float) * 1000, cudaMemcpyHostToDevice));
  boot.barrier();
  all_reduce<algo::ring>(comm, d, d, 1000, op::sum{}, s);
  CK(cudaStreamSynchronize(s));
  comm.check();
  CK(cudaMemcpy(h.data(), d, sizeof(float) * 1000, cudaMemcpyDeviceToHost));
  const int n = boot.size();
  for (int i = 0; i < 1000; ++i)
    if (h[i] != static_cast<float>(n * (n - 1) / 2 + n * i)) {
      report("rank %d: after the fault, a new communicator's all_reduce is wrong at %d", boot.rank(), i);
      return 1;
    }
  report("rank %d: a new communicator after the fault works", boot.rank());
  return 0;
}

namespace {
// One all_reduce (ring or one_shot) on `comm`, checked: rank r gives r + i.
template <class A>
int checked_all_reduce(nvcomm& comm, cudaStream_t s, float* d, const char* what) {
  const int n = comm.size();
  std::vector<float> h(1000);
  for (int i = 0; i < 1000; ++i) h[i] = static_cast<float>(comm.rank() + i);
  CK(cudaMemcpy(d + 1000, h.data(), sizeof(float) * 1000, cudaMemcpyHostToDevice));
  all_reduce<A>(comm, d + 1000, d, 1000, op::sum{}, s);
  CK(cudaStreamSynchronize(s));
  comm.check();
  CK(cudaMemcpy(h.data(), d, sizeof(float) * 1000, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1000; ++i)
    if (h[i] != static_cast<float>(n * (n - 1) / 2 + n * i)) {
      report("%s (%s, rank %d of %d): wrong at %d", what, A::name, comm.rank(), n, i);
      return 1;
    }
  return 0;
}

// split by parity, a split where the last rank joins nothing, dup, and the parent afterwards.
int scenario_split(bootstrap::tcp& boot) {
  const int me = boot.rank(), n = boot.size();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* d = nullptr;
  CK(cudaMalloc(&d, 2000 * sizeof(float)));
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::pcie_staged>();
  gpu::preload_composition<kind::all_reduce, algo::one_shot, float, op::sum, tuning<>, transport::nvlink>();
  nvcomm comm(boot, 0, gpu::options{});
  int code = 0;
  for (int round = 0; round < 3; ++round) {
    auto half = comm.split(me % 2, -me);  // keys reverse the order
    if (!half || half->size() != (n + 1 - me % 2) / 2) {
      report("split by parity: wrong group");
      return 1;
    }
    const int expect_rank = (half->size() - 1) - me / 2;
    if (half->rank() != expect_rank) {
      report("split by parity: rank %d, expected %d", half->rank(), expect_rank);
      code = 1;
    }
    code |= checked_all_reduce<algo::ring>(*half, s, d, "split by parity");
    code |= checked_all_reduce<algo::one_shot>(*half, s, d, "split by parity");
  }
  auto most = comm.split(me == n - 1 ? no_color : 7, me);
  if ((me == n - 1) != !most.has_value()) {
    report("split with no_color: wrong membership");
    code = 1;
  }
  if (most) code |= checked_all_reduce<algo::ring>(*most, s, d, "split without the last rank");
  nvcomm twin = comm.dup();
  if (twin.rank() != me || twin.size() != n) {
    report("dup: rank %d size %d", twin.rank(), twin.size());
    code = 1;
  }
  code |= checked_all_reduce<algo::ring>(twin, s, d, "dup");
  code |= checked_all_reduce<algo::two_shot>(comm, s, d, "the parent after splits");
  report("rank %d: split and dup %s", me, code ? "FAILED" : "ok");
  cudaFree(d);
  cudaStreamDestroy(s);
  return code;
}

// The last rank enqueues a large all_reduce and SIGKILLs itself; the survivors' calls end with an
// error naming it within 2x the timeout, and the survivors then make a new world of their own.
template <class Comm>
int scenario_kill(bootstrap::tcp& boot, gpu::options o) {
  const int me = boot.rank(), n = boot.size();
  o.timeout = 3s;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const index_t count = 64 << 20;
  float* d = nullptr;
  CK(cudaMalloc(&d, count * sizeof(float)));
  CK(cudaMemset(d, 0, count * sizeof(float)));
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::nvlink>();
  gpu::preload_composition<kind::all_reduce, algo::ring, float, op::sum, tuning<>, transport::pcie_staged>();
  int code = 0;
  {
    Comm comm(boot, 0, o);
    boot.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (me == n - 1) {  // one call's kernel starts, then the process dies under it
      all_reduce<algo::ring>(comm, d, d, count, op::sum{}, s);
      std::this_thread::sleep_for(1ms);
      ::raise(SIGKILL);
    }
    for (int i = 0; i < 8; ++i) all_reduce<algo::ring>(comm, d, d, count, op::sum{}, s);
    const cudaError_t se = cudaStreamSynchronize(s);  // a failed context (MPS, see below) is for check() to name
    try {
      comm.check();
      report("rank %d: no error although rank %d was killed (stream: %s)", me, n - 1, cudaGetErrorString(se));
      code = 1;
    } catch (const error& e) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const std::string m = e.what();
      report("rank %d: after %.0f ms: %s", me, ms, e.what());
      // The proxy of transport::net names the peer whose connection failed ("rank N"), or relays
      // the text of a peer that did.
      const bool named = m.find("rank(s) " + std::to_string(n - 1)) != std::string::npos ||
                         (std::is_same_v<Comm, ncomm> && m.find("rank " + std::to_string(n - 1)) != std::string::npos);
      if (!named || ms > 2 * 3000 + 500) code = 1;
      // Under MPS the killed client's fault can end every client's context (pcie: its kernel
      // reads registered host memory as the process's mappings go). Named, in time: the check
      // passed; no fresh communicator can follow in this process.
      if (se != cudaSuccess && e.code() == errc::system) {
        report("rank %d: this process's GPU context failed with the killed rank (MPS); no fresh communicator tried",
               me);
        return code;
      }
    }
  }  // destroy: the dead rank counts as departed
  // Under MPS the killed client's fault reaches the other clients' contexts a little later, so a
  // survivor that checked early may still lose its context: look again before a fresh job (the
  // others, whose context failed, do not come to it).
  std::this_thread::sleep_for(500ms);
  if (const cudaError_t late = cudaDeviceSynchronize(); late != cudaSuccess) {
    report(
        "rank %d: this process's GPU context failed with the killed rank (MPS, found late: %s); no fresh "
        "communicator tried",
        me, cudaGetErrorString(late));
    return code;
  }
  // net: whether MPS ends the other clients' contexts with the killed one varies from run to run
  // and rank to rank (their kernels read only their own memory), so a fresh job of survivors is
  // left to the nvlink and pcie cases, where every survivor sees the same.
  if constexpr (std::is_same_v<Comm, ncomm>) {
    cudaFree(d);
    cudaStreamDestroy(s);
    return code;
  }
  // The survivors' own job (ranks 0 .. n-2), from the second root the parent gave.
  const std::string root2 = std::getenv("COLLCOMM_TEST_ROOT2");
  bootstrap::tcp boot2(bootstrap::unique_id::from_string(root2), me, n - 1, 20s);
  o.timeout = gpu::options{}.timeout;
  code |= scenario_fresh_call<Comm>(boot2, s, d, o);
  cudaFree(d);
  cudaStreamDestroy(s);
  return code;
}

// A rank that crashes prints where (offsets into the executable: addr2line -e test_gpu_mp -f -C).
void print_backtrace(int sig) {
  void* frames[48];
  const int k = ::backtrace(frames, 48);
  ::backtrace_symbols_fd(frames, k, 2);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

int child_main(const std::string& scenario) {
  ::signal(SIGSEGV, print_backtrace);
  ::signal(SIGBUS, print_backtrace);
  g_report = std::fopen(std::getenv("COLLCOMM_TEST_REPORT"), "w");
  int code = 3;
  try {
    auto boot = bootstrap::from_env(60s);
    CK(cudaSetDevice(0));
    if (scenario == "matrix") {
      const int n = boot.size();
      gpu::options o;
      o.slot_bytes = 64 << 10;  // several slices per call at the larger counts
      o.timeout = 20s;
      code = scenario_matrix(boot, 20, {1, static_cast<index_t>(n + 1), 1031, 250007}, o);
    } else if (scenario == "no_mps") {
      gpu::options o;
      o.channels = 2;
      o.timeout = 120s;
      code = scenario_matrix(boot, 2, {1, 1031}, o);
    } else if (scenario == "graph") {
      gpu::options o;
      o.slot_bytes = 64 << 10;
      o.timeout = 20s;
      code = scenario_matrix(boot, 4, {static_cast<index_t>(boot.size() + 1), 250007}, o, 3);
    } else if (scenario == "mixed")
      code = scenario_mixed(boot);
    else if (scenario == "window")
      code = scenario_window(boot);
    else if (scenario == "leak") {
      gpu::options o;
      o.channels = 2;
      o.slots = 2;
      o.slot_bytes = 4096;
      o.window_bytes = 4096;
      o.timeout = 20s;
      code = scenario_leak<nvcomm>(boot, o);
    } else if (scenario == "abort")
      code = scenario_abort(boot);
    else if (scenario == "disagree_root")
      code = scenario_disagree(boot, "root");
    else if (scenario == "disagree_op")
      code = scenario_disagree(boot, "op");
    else if (scenario == "disagree_one_shot")
      code = scenario_disagree(boot, "one_shot");
    else if (scenario == "disagree_pushed")
      code = scenario_disagree(boot, "pushed");
    else if (scenario == "disagree_pushed_op")
      code = scenario_disagree(boot, "pushed_op");
    else if (scenario == "disagree_pushed_staged")
      code = scenario_disagree(boot, "pushed_staged");
    else if (scenario == "pushed_wrap")
      code = scenario_pushed_wrap(boot);
    else if (scenario == "chain")
      code = scenario_chain(boot, true);
    else if (scenario == "chain_plain")
      code = scenario_chain(boot, false);
    else if (scenario == "kill")
      code = scenario_kill<nvcomm>(boot, gpu::options{});
    else if (scenario == "split")
      code = scenario_split(boot);
    else if (scenario == "pcie_matrix")
      code = scenario_pcie_matrix(boot, 20, {1, static_cast<index_t>(boot.size() + 1), 1031, 250007}, pcie_options());
    else if (scenario == "pcie_no_mps") {
      gpu::options o = pcie_options();
      o.channels = 2;
      o.timeout = 120s;
      code = scenario_pcie_matrix(boot, 2, {1, 1031}, o);
    } else if (scenario == "pcie_leak") {
      gpu::options o = pcie_options();
      o.channels = 2;
      o.slots = 2;
      o.slot_bytes = 4096;
      code = scenario_leak<pcomm>(boot, o);
    } else if (scenario == "net_matrix") {
      setenv("COLLCOMM_NET_SAME_HOST", "network", 1);
      gpu::options o = pcie_options();
      code = scenario_pcie_matrix<ncomm>(boot, 20, {1, static_cast<index_t>(boot.size() + 1), 1031, 250007}, o);
    } else if (scenario == "net_mixed") {  // two pretend hosts of consecutive ranks: rings cross both paths
      gpu::options o = pcie_options();
      code =
          scenario_pcie_matrix<ncomm>(boot, 20, {1, static_cast<index_t>(boot.size() + 1), 1031, 250007}, o, 2, true);
    } else if (scenario == "net_hier" || scenario == "net_hier_network") {
      if (scenario == "net_hier_network") setenv("COLLCOMM_NET_SAME_HOST", "network", 1);
      using hier = collcomm_test::type_list<algo::hierarchical<algo::ring, algo::ring>,
                                            algo::hierarchical<algo::tree, algo::ring>>;
      const int n = boot.size();
      code = scenario_pcie_matrix<ncomm, hier>(boot, 8, {1, static_cast<index_t>(n + 1), 1031, 250007}, pcie_options(),
                                               n >= 4 ? 2 : n);
    } else if (scenario == "net_no_mps") {
      setenv("COLLCOMM_NET_SAME_HOST", "network", 1);
      gpu::options o = pcie_options();
      o.channels = 2;
      o.timeout = 120s;
      code = scenario_pcie_matrix<ncomm>(boot, 2, {1, 1031}, o);
    } else if (scenario == "net_kill" || scenario == "net_kill_mixed") {
      // net_kill: every message through the proxy; net_kill_mixed: ranks 0, 1 and 2, 3 pretend to
      // be two hosts, so the killed rank 3 is a GPU-memory peer of rank 2 and a network peer of 0, 1.
      if (scenario == "net_kill")
        setenv("COLLCOMM_NET_SAME_HOST", "network", 1);
      else
        setenv("COLLCOMM_HOST_ID", boot.rank() < 2 ? "pretend-0" : "pretend-1", 1);
      gpu::options o = pcie_options();
      o.slot_bytes = 64 << 10;
      code = scenario_kill<ncomm>(boot, o);
    } else if (scenario == "pcie_kill") {
      gpu::options o = pcie_options();
      o.slot_bytes = 64 << 10;
      code = scenario_kill<pcomm>(boot, o);
    } else
      report("unknown scenario %s", scenario.c_str());
  } catch (const std::exception& e) {
    report("exception: %s", e.what());
    code = 2;
  }
  if (g_report) std::fclose(g_report);
  return code;
}

void expect_all(const job_result& j, const char* what) {
  for (std::size_t r = 0; r < j.codes.size(); ++r) {
    INFO(what, " rank ", r, " report:\n", j.reports[r]);
    CHECK_EQ(j.codes[r], 0);
  }
  for (std::size_t r = 0; r < j.codes.size(); ++r) std::printf("%s rank %zu: %s", what, r, j.reports[r].c_str());
}

}  // namespace

TEST_CASE("mp: every kind and algorithm, N = 2, 3, 4, 8 processes on one GPU, 20 calls queued") {
  for (int n : {2, 3, 4, 8}) {
    const auto shm0 = collcomm_shm();
    const auto j = run_ranks(n, "matrix", fresh("matrix"), 300s);
    expect_all(j, ("matrix n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

TEST_CASE("mp: every kind and algorithm captured into a CUDA graph in each process and replayed, N = 2, 4 processes") {
  for (int n : {2, 4}) {
    const auto shm0 = collcomm_shm();
    const auto j = run_ranks(n, "graph", fresh("graph"), 300s);
    expect_all(j, ("graph n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

TEST_CASE("mp: every kind of staging mixed in one queue, N = 2, 3, 8 processes") {
  for (int n : {2, 3, 8}) {
    const auto shm0 = collcomm_shm();
    expect_all(run_ranks(n, "mixed", fresh("mixed"), 120s), ("mixed n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

TEST_CASE("mp: a direct call larger than the window is refused") {
  expect_all(run_ranks(2, "window", 1, 60s), "window");
}

TEST_CASE("mp: split and dup") {
  const auto shm0 = collcomm_shm();
  expect_all(run_ranks(5, "split", 1, 120s), "split");
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp: 1000 communicators made and destroyed leak nothing") {
  const auto shm0 = collcomm_shm();
  expect_all(run_ranks(2, "leak", 1, 120s), "leak");
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp fault: abort") {
  const auto shm0 = collcomm_shm();
  expect_all(run_ranks(3, "abort", 1, 90s), "abort");
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp fault: processes that disagree about a call get an error naming it, never another call's data") {
  for (const char* what :
       {"disagree_root", "disagree_op", "disagree_one_shot", "disagree_pushed", "disagree_pushed_op"}) {
    const auto shm0 = collcomm_shm();
    const auto j = run_ranks(3, what, 1, 90s);
    expect_all(j, what);
    bool named = false;
    for (const auto& r : j.reports) named = named || r.find("another call") != std::string::npos;
    CHECK(named);
    CHECK(collcomm_shm() == shm0);
  }
}

// A rank whose one_shot is small enough to push while its peers' is not: no rank hears the other's
// call (the peers wait at a barrier, it for their lines), so the error is the stall that the
// timeout ends, on every rank, with every output untouched.
TEST_CASE("mp fault: a pushed call among staged ones ends in an error, outputs untouched") {
  const auto shm0 = collcomm_shm();
  expect_all(run_ranks(3, "disagree_pushed_staged", 1, 90s), "disagree_pushed_staged");
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp: pushed calls across the wrap of their flags, a rank late, N = 2, 3, 8 processes") {
  for (int n : {2, 3, 8}) {
    const auto shm0 = collcomm_shm();
    expect_all(run_ranks(n, "pushed_wrap", fresh("pushed_wrap"), 120s), ("pushed_wrap n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

TEST_CASE("mp: calls that depend on each other, queued back to back, N = 2, 3, 8 processes") {
  for (int n : {2, 3, 8}) {
    const auto shm0 = collcomm_shm();
    expect_all(run_ranks(n, "chain", fresh("chain"), 120s), ("chain n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
  // Launched plainly (options::programmatic_launch = false), among 2 and 8.
  for (int n : {2, 8}) {
    const auto shm0 = collcomm_shm();
    expect_all(run_ranks(n, "chain_plain", fresh("chain_plain"), 120s), ("chain_plain n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

// 4 processes, the last SIGKILLs itself under its first call; the 3 survivors pass their checks
// (scenario_kill) and nothing stays in /dev/shm.
static void expect_kill(const char* scenario) {
  const auto shm0 = collcomm_shm();
  const auto j = run_ranks(4, scenario, 1, 90s);
  for (int r = 0; r < 3; ++r) {
    INFO(scenario, " rank ", r, " report:\n", j.reports[static_cast<std::size_t>(r)]);
    CHECK_EQ(j.codes[static_cast<std::size_t>(r)], 0);
  }
  CHECK_EQ(j.codes[3], -SIGKILL);
  for (int r = 0; r < 3; ++r)
    std::printf("%s rank %d: %s", scenario, r, j.reports[static_cast<std::size_t>(r)].c_str());
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp fault: a rank killed mid-collective") { expect_kill("kill"); }

TEST_CASE("no mps: 2 processes, few small calls, long timeout") {
  expect_all(run_ranks(2, "no_mps", fresh("no_mps"), 300s), "no_mps");
}

TEST_CASE("mp: pcie staged, every FIFO schedule, N = 2, 3, 4, 8 processes on one GPU, 20 calls queued") {
  for (int n : {2, 3, 4, 8}) {
    const auto shm0 = collcomm_shm();
    const auto j = run_ranks(n, "pcie_matrix", fresh("pcie matrix"), 70s);
    expect_all(j, ("pcie matrix n=" + std::to_string(n)).c_str());
    CHECK(collcomm_shm() == shm0);
  }
}

TEST_CASE("mp: pcie 1000 communicators made and destroyed leak nothing") {
  const auto shm0 = collcomm_shm();
  expect_all(run_ranks(2, "pcie_leak", 1, 120s), "pcie leak");
  CHECK(collcomm_shm() == shm0);
}

TEST_CASE("mp fault: pcie a rank killed mid-collective") { expect_kill("pcie_kill"); }

// Without MPS each process has its own GPU context, so the killed client's fault stays its own:
// the survivors time out naming it, and then make a fresh pcie world (slow: time slicing).
TEST_CASE("no mps: pcie a rank killed mid-collective") { expect_kill("pcie_kill"); }

TEST_CASE("no mps: pcie 2 processes, few small calls, long timeout") {
  expect_all(run_ranks(2, "pcie_no_mps", fresh("pcie no_mps"), 300s), "pcie no_mps");
}

// transport::net<socket> with GPU buffers: every process's kernels on the one GPU, their messages
// carried by each process's proxy thread over loopback TCP.
TEST_CASE(
    "mp: net<socket> GPU buffers through the proxy, every FIFO schedule, N = 2, 3, 4 processes, 20 calls queued") {
  for (int n : {2, 3, 4}) {
    const auto j = run_ranks(n, "net_matrix", fresh("net matrix"), 120s);
    expect_all(j, ("net matrix n=" + std::to_string(n)).c_str());
  }
}

// Two pretend hosts of consecutive ranks (3 ranks: {0, 1}, {2}; 4: {0, 1}, {2, 3}): ranks of one
// host reach each other through GPU memory (CUDA IPC), the others through the proxy; every FIFO
// schedule, so rings and trees cross both paths.
TEST_CASE("mp: net<socket> GPU buffers, pretend hosts: GPU memory within, the proxy between, N = 3, 4 processes") {
  for (int n : {3, 4}) {
    const auto j = run_ranks(n, "net_mixed", fresh("net mixed"), 120s);
    expect_all(j, ("net mixed n=" + std::to_string(n)).c_str());
  }
}

// hierarchical<ring, ring> and <tree, ring> with pretend hosts (rank r on host r % 2; 3 ranks:
// 3 hosts of one), every kind they serve: intra-host steps through GPU memory, inter-host steps
// through the proxy; and for 4 ranks also with every step through the proxy.
TEST_CASE("mp: net<socket> GPU buffers, hierarchical over pretend hosts, N = 3, 4, 5 processes") {
  for (int n : {3, 4, 5}) {
    const auto j = run_ranks(n, "net_hier", fresh("net hier"), 120s);
    expect_all(j, ("net hier n=" + std::to_string(n)).c_str());
  }
  const auto j = run_ranks(4, "net_hier_network", fresh("net hier network"), 120s);
  expect_all(j, "net hier network n=4");
}

TEST_CASE("mp fault: net<socket> GPU buffers, a rank killed mid-collective") { expect_kill("net_kill"); }

TEST_CASE("mp fault: net<socket> GPU buffers over pretend hosts, a rank killed mid-collective") {
  expect_kill("net_kill_mixed");
}

TEST_CASE("no mps: net<socket> GPU buffers, 2 processes, few small calls, long timeout") {
  expect_all(run_ranks(2, "net_no_mps", fresh("net no_mps"), 300s), "net no_mps");
}

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  g_exe = argv[0];
  if (argc >= 3 && std::string(argv[1]) == "--child") return child_main(argv[2]);
  std::string mode = argc >= 2 ? argv[1] : "";
  // Device presence without initialising CUDA here: the children do that.
  struct stat st {};
  if (::stat("/dev/nvidia0", &st) != 0 && ::stat("/dev/nvidiactl", &st) != 0) {
    std::printf("SKIPPED: no CUDA device here; GPU multi-process tests were built, not run\n");
    return 77;
  }
  const char* pipe = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(pipe ? pipe : "/tmp/nvidia-mps") + "/control";
  const bool mps = ::stat(control.c_str(), &st) == 0;
  doctest::Context ctx;
  if (mode == "--no-mps") {
    ctx.setOption("test-case", argc >= 3 ? argv[2] : "no mps*");  // e.g. --no-mps '*pcie*'
  } else {
    if (!mps) {
      std::printf(
          "SKIPPED: several processes on one GPU need MPS (nvidia-cuda-mps-control -d; %s not found); run with "
          "--no-mps for the slow check\n",
          control.c_str());
      return 77;
    }
    ctx.setOption("test-case", mode == "--fault" ? "mp fault*" : mode == "--only" && argc >= 3 ? argv[2] : "mp:*");
  }
  int dargc = 1;
  ctx.applyCommandLine(dargc, argv);
  return ctx.run();
}
