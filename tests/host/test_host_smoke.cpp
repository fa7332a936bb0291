// Quick real-data runs of the host executor (ring all_reduce) and its timeout, so the executor is
// tested on its own; the full kind x algorithm x op x element matrix is test_matrix_*.cpp.
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace {

using collcomm::index_t;
using comm_t = collcomm::communicator<collcomm::transport::host_shm>;

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("COLLCOMM_TEST_SEED");
    const std::uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    MESSAGE("seed " << s << " (rerun with COLLCOMM_TEST_SEED=" << s << ")");
    return s;
  }();
  return seed;
}

template <class T>
std::vector<std::vector<T>> random_inputs(int n, index_t count, std::mt19937_64& rng) {
  std::vector<std::vector<T>> in(static_cast<std::size_t>(n), std::vector<T>(count));
  for (auto& v : in)
    for (auto& x : v) {
      if constexpr (std::is_floating_point_v<T>)
        x = std::uniform_real_distribution<T>(-1, 1)(rng);
      else
        x = static_cast<T>(rng());
    }
  return in;
}

constexpr float poison_f32 = -12345.5f;

// Runs all_reduce(sum) on n ranks and checks every element of every rank against a float64
// (f32) or exact wrapping (i32) reference.
template <class T>
void check_all_reduce(int n, index_t count, const collcomm::host::options& opt, bool in_place, std::uint64_t salt) {
  CAPTURE(n);
  CAPTURE(count);
  CAPTURE(in_place);
  CAPTURE(opt.slot_bytes);
  CAPTURE(opt.slots);
  CAPTURE(opt.channels);
  std::mt19937_64 rng(test_seed() ^ salt);
  const auto in = random_inputs<T>(n, count, rng);
  std::vector<std::vector<T>> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) out[r] = in_place ? in[r] : std::vector<T>(count, static_cast<T>(poison_f32));
  collcomm::host::world w(n, opt);
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    const T* send = in_place ? out[r].data() : in[r].data();
    collcomm::all_reduce(comm, send, out[r].data(), count);
  });
  int wrong = 0;
  for (index_t i = 0; i < count; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      double ref = 0, mag = 0;
      for (int r = 0; r < n; ++r) ref += in[r][i], mag += std::fabs(static_cast<double>(in[r][i]));
      const double tol = (n + 2) * 1.2e-7 * mag + 1e-30;
      for (int r = 0; r < n; ++r)
        if (!(std::fabs(out[r][i] - ref) <= tol) && wrong++ < 5)
          FAIL_CHECK("rank " << r << " element " << i << ": got " << out[r][i] << ", want " << ref);
    } else {
      std::uint32_t ref = 0;
      for (int r = 0; r < n; ++r) ref += static_cast<std::uint32_t>(in[r][i]);
      for (int r = 0; r < n; ++r)
        if (static_cast<std::uint32_t>(out[r][i]) != ref && wrong++ < 5)
          FAIL_CHECK("rank " << r << " element " << i << ": got " << out[r][i] << ", want " << static_cast<T>(ref));
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("host smoke: ring all_reduce sum, f32 and i32, N = 1, 2, 3, 5, 8") {
  collcomm::host::options opt;
  std::uint64_t salt = 0;
  for (int n : {1, 2, 3, 5, 8})
    for (index_t count : {index_t{0}, index_t{1}, index_t{7}, index_t{1000}, index_t{9001}})
      for (bool in_place : {false, true}) {
        check_all_reduce<float>(n, count, opt, in_place, ++salt);
        check_all_reduce<std::int32_t>(n, count, opt, in_place, ++salt);
      }
}

TEST_CASE("host smoke: tiny slots, one slot per connection, three channels") {
  // One 16-byte slot: every message is a single vector, and a ring only moves if a receive gives
  // its slot back before the send of the same step waits for one.
  collcomm::host::options opt;
  opt.slot_bytes = 16;
  opt.slots = 1;
  opt.channels = 3;
  std::uint64_t salt = 1000;
  for (int n : {2, 3, 5})
    for (index_t count : {index_t{5}, index_t{100}, index_t{333}}) {
      check_all_reduce<float>(n, count, opt, false, ++salt);
      check_all_reduce<std::int32_t>(n, count, opt, true, ++salt);
    }
}

TEST_CASE("host smoke: 16 ranks") {
  collcomm::host::options opt;
  check_all_reduce<float>(16, 20000, opt, false, 2000);
  check_all_reduce<std::int32_t>(16, 777, opt, true, 2001);
}

TEST_CASE("host smoke: one world, many calls (counters keep growing across calls)") {
  const int n = 4;
  collcomm::host::world w(n);
  std::mt19937_64 rng(test_seed() ^ 3000);
  const index_t count = 300;
  const int calls = 50;
  std::vector<std::vector<std::vector<std::int32_t>>> in(calls);
  for (auto& c : in) c = random_inputs<std::int32_t>(n, count, rng);
  std::vector<std::vector<std::vector<std::int32_t>>> out(
      calls, std::vector<std::vector<std::int32_t>>(n, std::vector<std::int32_t>(count, -7)));
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    for (int c = 0; c < calls; ++c)
      collcomm::all_reduce(comm, in[c][comm.rank()].data(), out[c][comm.rank()].data(), count);
  });
  int wrong = 0;
  for (int c = 0; c < calls; ++c)
    for (index_t i = 0; i < count; ++i) {
      std::uint32_t ref = 0;
      for (int r = 0; r < n; ++r) ref += static_cast<std::uint32_t>(in[c][r][i]);
      for (int r = 0; r < n; ++r) wrong += static_cast<std::uint32_t>(out[c][r][i]) != ref;
    }
  CHECK(wrong == 0);
}

TEST_CASE("host smoke: a rank that never calls makes the others time out, naming it") {
  using clock = std::chrono::steady_clock;
  collcomm::host::options opt;
  opt.timeout = std::chrono::milliseconds(300);
  const int n = 3, missing = 2;
  collcomm::host::world w(n, opt);
  std::vector<float> in(n * 1000, 1.0f), out(n * 1000, poison_f32);
  std::vector<std::string> what(n);
  std::vector<int> code(n, -1);
  std::vector<double> elapsed_ms(n, 0);
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    if (r == missing) return;
    const auto t0 = clock::now();
    try {
      collcomm::all_reduce<collcomm::algo::ring>(comm, in.data() + r * 1000, out.data() + r * 1000, index_t{1000});
    } catch (const collcomm::error& e) {
      what[r] = e.what();
      code[r] = static_cast<int>(e.code());
      CHECK(e.rank() == r);
    }
    elapsed_ms[r] = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  });
  for (int r = 0; r < n; ++r) {
    if (r == missing) continue;
    CAPTURE(r);
    CAPTURE(what[r]);
    CHECK(code[r] == static_cast<int>(collcomm::errc::timeout));
    CHECK(what[r].find("on rank " + std::to_string(r)) != std::string::npos);
    CHECK(what[r].find("channel") != std::string::npos);
    CHECK(elapsed_ms[r] < 2.0 * static_cast<double>(opt.timeout.count()) + 400.0);  // slack: CI load
  }
  // Rank 0 receives from rank 2 in the ring: its message names the missing rank.
  CHECK(what[0].find("from rank " + std::to_string(missing)) != std::string::npos);
}

TEST_CASE("host smoke: a rank that never reaches a barrier is named by the others") {
  collcomm::host::options opt;
  opt.timeout = std::chrono::milliseconds(200);
  opt.channels = 1;
  const int n = 4, missing = 3;
  // 2048 elements meet at a barrier; 64 (at most host::world::flat_bytes) at the ranks' mailboxes.
  for (const index_t count : {index_t{2048}, index_t{64}}) {
    CAPTURE(count);
    collcomm::host::world w(n, opt);
    std::vector<std::vector<float>> in(n, std::vector<float>(count, 1.0f)),
        out(n, std::vector<float>(count, poison_f32));
    std::vector<std::string> what(n);
    collcomm::host::run_ranks(w, [&](comm_t& comm) {
      const int r = comm.rank();
      if (r == missing) return;
      try {
        collcomm::all_reduce<collcomm::algo::one_shot>(comm, in[r].data(), out[r].data(), count);
      } catch (const collcomm::error& e) {
        CHECK(e.code() == collcomm::errc::timeout);
        what[r] = e.what();
      }
    });
    for (int r = 0; r < n; ++r) {
      if (r == missing) continue;
      CAPTURE(what[r]);
      if (count * sizeof(float) > collcomm::host::world::flat_bytes) {
        CHECK(what[r].find("barrier #1 on channel 0") != std::string::npos);
        CHECK(what[r].find("rank(s) " + std::to_string(missing) + " to arrive") != std::string::npos);
      } else {
        CHECK(what[r].find("waiting for rank " + std::to_string(missing) + "'s input") != std::string::npos);
        CHECK(what[r].find("small-call mailbox") != std::string::npos);
      }
      for (float x : out[r]) CHECK(x == poison_f32);  // nothing read before every input was ready
    }
  }
}

TEST_CASE("host smoke: every kind with its default algorithm (i32, exact)") {
  std::mt19937_64 rng(test_seed() ^ 4000);
  for (int n : {1, 3, 4}) {
    CAPTURE(n);
    const index_t c = 37;
    const int root = n - 1;
    collcomm::host::world w(n);
    const auto in = random_inputs<std::int32_t>(n, n * c, rng);
    // Outputs: all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, gather,
    // scatter, send_recv, send/recv; each n * c elements, poisoned.
    constexpr int kinds = 10;
    std::vector<std::vector<std::vector<std::int32_t>>> out(
        kinds, std::vector<std::vector<std::int32_t>>(n, std::vector<std::int32_t>(n * c, -5)));
    collcomm::host::run_ranks(w, [&](comm_t& comm) {
      const int r = comm.rank();
      const std::int32_t* s = in[r].data();
      auto o = [&](int k) { return out[k][r].data(); };
      collcomm::all_reduce(comm, s, o(0), c);
      collcomm::reduce_scatter(comm, s, o(1), c);
      collcomm::all_gather(comm, s, o(2), c);
      collcomm::broadcast(comm, s, o(3), c, root);
      collcomm::reduce(comm, s, o(4), c, collcomm::op::max{}, root);
      collcomm::all_to_all(comm, s, o(5), c);
      collcomm::gather(comm, s, o(6), c, root);
      collcomm::scatter(comm, s, o(7), c, root);
      collcomm::send_recv(comm, s, o(8), c, (r + 1) % n, (r + n - 1) % n);
      if (n > 1) {  // ring of blocking sends: even ranks send first, odd ranks receive first
        if (r % 2 == 0) {
          collcomm::send(comm, s, c, (r + 1) % n);
          collcomm::recv(comm, o(9), c, (r + n - 1) % n);
        } else {
          collcomm::recv(comm, o(9), c, (r + n - 1) % n);
          collcomm::send(comm, s, c, (r + 1) % n);
        }
      }
    });
    auto u = [](std::int32_t x) { return static_cast<std::uint32_t>(x); };
    int wrong = 0;
    for (int r = 0; r < n; ++r)
      for (index_t i = 0; i < n * c; ++i) {
        auto expect = [&](int k, std::int32_t want) {
          if (out[k][r][i] != want && wrong++ < 10)
            FAIL_CHECK("kind #" << k << " rank " << r << " element " << i << ": got " << out[k][r][i] << ", want "
                                << want);
        };
        const index_t b = i / c, j = i % c;
        if (i < c) {
          std::uint32_t sum = 0, rs = 0;
          std::int32_t mx = in[0][i];
          for (int q = 0; q < n; ++q) {
            sum += u(in[q][i]);
            rs += u(in[q][r * c + i]);
            mx = std::max(mx, in[q][i]);
          }
          expect(0, static_cast<std::int32_t>(sum));
          expect(1, static_cast<std::int32_t>(rs));
          expect(3, in[root][i]);
          expect(4, r == root ? mx : -5);
          expect(7, in[root][r * c + i]);
          expect(8, in[(r + n - 1) % n][i]);
          if (n > 1) expect(9, in[(r + n - 1) % n][i]);
        } else {
          for (int k : {0, 1, 3, 4, 7, 8, 9}) expect(k, -5);
        }
        expect(2, in[b][j]);
        expect(5, in[b][r * c + j]);
        expect(6, r == root ? in[b][j] : -5);
      }
    CHECK(wrong == 0);
  }
}

// The call's tuning (collcomm/tuning.hpp): a call may use fewer channels and smaller slots than its
// world allocated, calls of different tunings share the world's connections one after the other,
// and a tuning above the world's is refused on every rank, naming the option and the rank, with
// the output untouched.
TEST_CASE("host smoke: the call's tuning, fewer channels and smaller slots than the world's; more refused") {
  using collcomm::tuning;
  using collcomm::protocol::simple;
  const int n = 5;
  const index_t count = 3001;
  collcomm::host::options opt;
  opt.channels = 3;
  opt.slot_bytes = 4096;
  collcomm::host::world w(n, opt);
  std::mt19937_64 rng(test_seed() ^ 4000);
  const int calls = 4;
  std::vector<std::vector<std::vector<std::int32_t>>> in(calls), out(calls);
  for (int c = 0; c < calls; ++c) {
    in[c] = random_inputs<std::int32_t>(n, count, rng);
    out[c].assign(n, std::vector<std::int32_t>(count, -7));
  }
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    collcomm::all_reduce<collcomm::algo::ring, tuning<simple, 1, 16>>(comm, in[0][r].data(), out[0][r].data(), count);
    collcomm::all_reduce<collcomm::algo::ring>(comm, in[1][r].data(), out[1][r].data(), count);
    collcomm::all_reduce<collcomm::algo::tree, tuning<simple, 2, 256>>(comm, in[2][r].data(), out[2][r].data(), count);
    collcomm::all_reduce<collcomm::algo::ring, tuning<simple, 3, 4096>>(comm, in[3][r].data(), out[3][r].data(), count);
  });
  int wrong = 0;
  for (int c = 0; c < calls; ++c)
    for (index_t i = 0; i < count; ++i) {
      std::uint32_t ref = 0;
      for (int r = 0; r < n; ++r) ref += static_cast<std::uint32_t>(in[c][r][i]);
      for (int r = 0; r < n; ++r)
        if (static_cast<std::uint32_t>(out[c][r][i]) != ref && wrong++ < 5)
          FAIL_CHECK("call " << c << " rank " << r << " element " << i << ": got " << out[c][r][i]);
    }
  CHECK(wrong == 0);

  std::vector<std::string> errors(n);
  std::vector<std::vector<std::int32_t>> untouched(n, std::vector<std::int32_t>(count, -7));
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    try {
      if (r % 2 == 0)
        collcomm::all_reduce<collcomm::algo::ring, tuning<simple, 4>>(comm, in[0][r].data(), untouched[r].data(),
                                                                      count);
      else
        collcomm::all_reduce<collcomm::algo::ring, tuning<simple, 0, 8192>>(comm, in[0][r].data(), untouched[r].data(),
                                                                            count);
    } catch (const collcomm::error& e) {
      errors[r] = e.what();
      CHECK(e.code() == collcomm::errc::invalid_argument);
      CHECK(e.rank() == r);
    }
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CAPTURE(errors[r]);
    CHECK(errors[r].find(r % 2 == 0 ? "'channels' = 3" : "'slot_bytes' = 4096") != std::string::npos);
    CHECK(errors[r].find("rank " + std::to_string(r)) != std::string::npos);
    CHECK(std::count(untouched[r].begin(), untouched[r].end(), -7) == count);
  }
}

#if defined(__linux__)
namespace {
// The CPUs the calling thread may run on.
std::vector<int> my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}
}  // namespace

TEST_CASE("host smoke: run_ranks binds each rank's thread to a CPU of its own where every rank has one, else none") {
  // This thread, and the rank threads it starts, on at most 2 of the process's CPUs (whatever the
  // machine), the last two; restored at the end.
  const std::vector<int> all = my_cpus();
  REQUIRE(!all.empty());
  const std::vector<int> process(all.end() - std::min<std::ptrdiff_t>(2, std::ssize(all)), all.end());
  auto set_mine = [](const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    REQUIRE_EQ(sched_setaffinity(0, sizeof set, &set), 0);
  };
  set_mine(process);
  // Ranks: every CPU a rank (bound), one more than the CPUs (crowded: unbound), and as many as the
  // CPUs with binding switched off.
  struct setting {
    int ranks;
    bool bind;
    bool bound;
  };
  const int cpus = static_cast<int>(process.size());
  for (const setting s : {setting{cpus, true, true}, setting{cpus + 1, true, false}, setting{cpus, false, false}}) {
    CAPTURE(s.ranks);
    CAPTURE(s.bind);
    collcomm::host::options o;
    o.bind_threads = s.bind;
    o.timeout = std::chrono::seconds(20);
    o.window_bytes = 4096;
    collcomm::host::world w(s.ranks, o);
    std::vector<std::vector<int>> seen(static_cast<std::size_t>(s.ranks));
    std::vector<int> got(static_cast<std::size_t>(s.ranks), -1);
    collcomm::host::run_ranks(w, [&](comm_t& c) {
      seen[static_cast<std::size_t>(c.rank())] = my_cpus();
      int one = 1;  // and the ranks still meet: an all_reduce of ones gives the rank count
      collcomm::all_reduce(c, &one, &got[static_cast<std::size_t>(c.rank())], 1, collcomm::op::sum{});
    });
    for (int r = 0; r < s.ranks; ++r) {
      CAPTURE(r);
      CHECK_EQ(got[static_cast<std::size_t>(r)], s.ranks);
      if (s.bound) {
        REQUIRE_EQ(seen[static_cast<std::size_t>(r)].size(), 1u);
        const int cpu = seen[static_cast<std::size_t>(r)][0];
        CHECK(std::find(process.begin(), process.end(), cpu) != process.end());
        for (int q = 0; q < r; ++q) CHECK_NE(seen[static_cast<std::size_t>(q)][0], cpu);  // a CPU each
      } else
        CHECK_EQ(seen[static_cast<std::size_t>(r)], process);
    }
  }
  set_mine(all);
}
#endif
