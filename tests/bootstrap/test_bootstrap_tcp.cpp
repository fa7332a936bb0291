// The tcp bootstrap with ranks as forked processes on loopback: all_gather, barrier and a
// send/recv ring checked byte for byte; a rank that never starts gives a timeout naming it; a
// stranger is turned away and the job still completes; the environment readers.
//
// Every process is forked before any thread exists; children report through their exit status
// and print what went wrong; the parent reaps every child (killing any that outlives a bound).
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/bootstrap/tcp.hpp>

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

namespace bs = collcomm::bootstrap;
using namespace std::chrono_literals;

namespace {
std::uint64_t fresh_seed() {
  std::random_device rd;
  auto s = (std::uint64_t(rd()) << 32) ^ rd();
  std::printf("test_bootstrap_tcp seed = %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// Forks one process per rank (skipping `absent`), each running f(rank) -> exit code; returns the
// exit codes (-1: killed or crashed; absent ranks 0).
std::vector<int> run_job(int nranks, const std::function<int(int)>& f, int absent = -1,
                         std::function<void()> parent_side = {}) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(std::size_t(nranks), -1);
  for (int r = 0; r < nranks; ++r) {
    if (r == absent) continue;
    pid_t p = ::fork();
    REQUIRE(p >= 0);
    if (p == 0) {
      int code = 1;
      try {
        code = f(r);
      } catch (const collcomm::error& e) {
        std::fprintf(stderr, "rank %d: unexpected collcomm::error: %s\n", r, e.what());
        code = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: unexpected exception: %s\n", r, e.what());
        code = 3;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids[std::size_t(r)] = p;
  }
  if (parent_side) parent_side();
  std::vector<int> codes(std::size_t(nranks), 0);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (int r = 0; r < nranks; ++r) {
    if (pids[std::size_t(r)] < 0) continue;
    int st = 0;
    while (true) {
      pid_t w = ::waitpid(pids[std::size_t(r)], &st, WNOHANG);
      if (w == pids[std::size_t(r)]) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[std::size_t(r)], SIGKILL);
        ::waitpid(pids[std::size_t(r)], &st, 0);
        std::fprintf(stderr, "rank %d: killed after 30 s\n", r);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    codes[std::size_t(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return codes;
}

std::vector<std::byte> rank_bytes(std::uint64_t seed, int rank, std::size_t n) {
  std::mt19937_64 g(seed * 1000003 + std::uint64_t(rank));
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(g());
  return v;
}

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd)
    if (::fcntl(fd, F_GETFD) != -1) ++n;
  return n;
}

// all_gather of random bytes, barrier, a ring of send/recv, all checked; returns an exit code.
int exercise(bs::tcp& b, std::uint64_t seed) {
  const int n = b.size(), r = b.rank();
  for (std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(13), std::size_t(4096)}) {
    auto mine = rank_bytes(seed + bytes, r, bytes);
    std::vector<std::byte> out(bytes * std::size_t(n), std::byte{0xAB});
    b.all_gather(mine, out);
    for (int q = 0; q < n; ++q) {
      auto want = rank_bytes(seed + bytes, q, bytes);
      if (!std::equal(want.begin(), want.end(), out.begin() + std::ptrdiff_t(std::size_t(q) * bytes))) {
        std::fprintf(stderr, "rank %d: all_gather(%zu bytes): rank %d's block is wrong\n", r, bytes, q);
        return 10;
      }
    }
  }
  b.barrier();
  for (int round = 0; round < 3; ++round) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    const std::size_t len = 100 + std::size_t(round) * 1000;
    auto msg = rank_bytes(seed + 77 + std::uint64_t(round), r, len);
    b.send(next, msg);
    std::vector<std::byte> got(len, std::byte{0xCD});
    b.recv(prev, got);
    if (got != rank_bytes(seed + 77 + std::uint64_t(round), prev, len)) {
      std::fprintf(stderr, "rank %d: ring round %d: wrong bytes from rank %d\n", r, round, prev);
      return 11;
    }
  }
  b.barrier();
  return 0;
}
}  // namespace

TEST_CASE("tcp bootstrap: all_gather, barrier, send/recv ring for 1..8 forked ranks") {
  const auto seed = fresh_seed();
  for (int n = 1; n <= 8; ++n) {
    auto id = bs::unique_id::create();
    const auto text = id.to_string();
    auto codes = run_job(
        n,
        [&](int r) {
          const int fds = open_fds();
          int code;
          {
            bs::tcp b(bs::unique_id::from_string(text), r, n, 5s);
            if (b.rank() != r || b.size() != n) return 12;
            code = exercise(b, seed);
          }
          // rank 0 took the listener from the registry (inherited) and closed it; other ranks
          // leave their inherited copy alone and open nothing that outlives the bootstrap.
          const int after = open_fds();
          if (code == 0 && (r == 0 ? after >= fds : after > fds)) {
            std::fprintf(stderr, "rank %d: %d fds open before, %d after the bootstrap\n", r, fds, after);
            return 13;
          }
          return code;
        },
        -1, [&] { bs::release_listener(id); });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "n = " << n << ", rank " << r);
  }
}

TEST_CASE("tcp bootstrap: unique_id round-trips as bytes and as text; bad ids are errors") {
  auto id = bs::unique_id("10.1.2.3", 29500, 0x0123456789abcdefull);
  CHECK(bs::unique_id::from_bytes(id.to_bytes()) == id);
  CHECK(bs::unique_id::from_string(id.to_string()) == id);
  CHECK(id.to_string() == "10.1.2.3:29500/0123456789abcdef");
  for (const char* s : {"", "host", "host:1", ":1/0123456789abcdef", "h:x/0123456789abcdef", "h:70000/0123456789abcdef",
                        "h:1/0123", "h:1/0123456789abcdeg"})
    CHECK_THROWS_AS(bs::unique_id::from_string(s), collcomm::error);
  auto b = id.to_bytes();
  b[0] ^= std::byte{1};
  CHECK_THROWS_AS(bs::unique_id::from_bytes(b), collcomm::error);
  CHECK_THROWS_AS(bs::unique_id::from_bytes(std::span(b).first(100)), collcomm::error);
}

TEST_CASE("tcp bootstrap: a rank that never starts is named in a timeout on every other rank") {
  const auto timeout = 500ms;
  for (int absent : {2, 0}) {
    const int n = 4;
    auto id = bs::unique_id::create();
    auto codes = run_job(
        n,
        [&](int r) {
          const auto t0 = std::chrono::steady_clock::now();
          try {
            bs::tcp b(id, r, n, timeout);
            std::fprintf(stderr, "rank %d: bootstrap completed without rank %d\n", r, absent);
            return 20;
          } catch (const collcomm::error& e) {
            const auto took = std::chrono::steady_clock::now() - t0;
            const std::string what = e.what();
            const std::string want = "rank " + std::to_string(absent);
            if (e.code() != collcomm::errc::timeout || what.find(want) == std::string::npos ||
                took > 2 * timeout + 300ms) {
              std::fprintf(stderr, "rank %d: wrong failure after %lld ms: %s\n", r,
                           (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), e.what());
              return 21;
            }
            if (r == 1) std::fprintf(stderr, "rank %d saw: %s\n", r, e.what());
            return 0;
          }
        },
        absent, [&] { bs::release_listener(id); });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "absent " << absent << ", rank " << r);
  }
}

// A root address that answers no SYN (a listener whose accept queue is full: Linux drops the SYNs
// it cannot queue, as a silent or firewalled host would): a member's connect is bounded by the
// bootstrap's timeout, not by the kernel's ~2 minutes of SYN retries, and the error names the root.
TEST_CASE("tcp bootstrap: a root that answers no SYN costs a member the timeout, naming the root") {
  auto listener = [] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 0) == 0);
    return fd;
  }();
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const std::uint16_t port = ntohs(a.sin_port);
  // Fill the accept queue (never accepted): nonblocking connects until one stays in progress.
  std::vector<int> fillers;
  for (int i = 0; i < 8; ++i) {
    const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    (void)::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(100ms);
  const auto timeout = 1500ms;
  const auto id = bs::unique_id("127.0.0.1", port, 0x0123456789abcdefull);
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    bs::tcp b(id, 1, 2, timeout);
  } catch (const collcomm::error& e) {
    CHECK(e.code() == collcomm::errc::timeout);
    what = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CAPTURE(what);
  CHECK(what.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(took >= timeout);
  CHECK(took < timeout + 1500ms);
  for (int f : fillers) ::close(f);
  ::close(listener);
}

TEST_CASE("tcp bootstrap: strangers (wrong token, garbage, silence) are turned away; the job completes") {
  const auto seed = fresh_seed();
  const int n = 3;
  auto id = bs::unique_id::create();
  auto codes = run_job(
      n,
      [&](int r) {
        if (r == 1) {
          // Before joining, rank 1's process plays three strangers.
          auto addr = bs::detail::resolve(id.host(), id.port(), r);
          std::vector<bs::detail::fd_owner> keep;
          for (int kind = 0; kind < 3; ++kind) {
            auto s = bs::detail::new_socket(r);
            if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 30;
            std::vector<std::byte> m;
            if (kind == 0) {  // a well-formed hello of another job claiming rank 2
              std::array<std::byte, 4> nn;
              collcomm::bootstrap::wire::detail::put<std::uint32_t>(nn.data(), n);
              m = collcomm::bootstrap::wire::encode({collcomm::bootstrap::wire::msg::hello, id.token() ^ 1, 2, -1, 0},
                                                    nn);
            } else if (kind == 1) {
              m = rank_bytes(seed, 99, 64);
            }
            if (!m.empty() && bs::detail::send_all(s.get(), m.data(), m.size(),
                                                   std::chrono::steady_clock::now() + 1s) != bs::detail::io::ok)
              return 31;
            keep.push_back(std::move(s));  // kind 2 stays connected and silent
          }
        }
        bs::tcp b(id, r, n, 3s);
        return exercise(b, seed);
      },
      -1, [&] { bs::release_listener(id); });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("tcp bootstrap: mismatched all_gather sizes are an error on every rank") {
  const int n = 3;
  auto id = bs::unique_id::create();
  auto codes = run_job(
      n,
      [&](int r) {
        bs::tcp b(id, r, n, 2s);
        std::vector<std::byte> in(r == 2 ? 5 : 4), out(in.size() * n);
        try {
          b.all_gather(in, out);
        } catch (const collcomm::error& e) {
          return std::string(e.what()).find("rank 2 gave 5 bytes") != std::string::npos ? 0 : 40;
        }
        return 41;
      },
      -1, [&] { bs::release_listener(id); });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("tcp bootstrap: bad arguments") {
  auto id = bs::unique_id("127.0.0.1", 1, 5);
  CHECK_THROWS_AS(bs::tcp(id, 0, 0, 1s), collcomm::error);
  CHECK_THROWS_AS(bs::tcp(id, 3, 3, 1s), collcomm::error);
  CHECK_THROWS_AS(bs::tcp(id, -1, 3, 1s), collcomm::error);
  bs::tcp one(bs::unique_id::create(), 0, 1, 1s);  // a job of one needs nobody
  std::array<std::byte, 3> in{std::byte{1}, std::byte{2}, std::byte{3}}, out{};
  one.all_gather(in, out);
  CHECK(out == in);
  CHECK_THROWS_AS(one.all_gather(in, std::span(out).first(2)), collcomm::error);
  CHECK_THROWS_AS(one.send(1, in), collcomm::error);
  one.send(0, in);
  std::array<std::byte, 3> got{};
  one.recv(0, got);
  CHECK(got == in);
}

namespace {
struct env_guard {
  std::vector<std::string> names{"RANK",
                                 "WORLD_SIZE",
                                 "LOCAL_RANK",
                                 "MASTER_ADDR",
                                 "MASTER_PORT",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "SLURM_PROCID",
                                 "SLURM_NTASKS",
                                 "SLURM_LOCALID",
                                 "COLLCOMM_ROOT",
                                 "COLLCOMM_JOB_TOKEN"};
  env_guard() {
    for (auto& n : names) ::unsetenv(n.c_str());
  }
  ~env_guard() {
    for (auto& n : names) ::unsetenv(n.c_str());
  }
  void set(const char* k, const char* v) { ::setenv(k, v, 1); }
};
std::string env_error() {
  try {
    bs::read_env();
  } catch (const collcomm::error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("env: torchrun, Open MPI, Slurm; missing and malformed variables are named") {
  {
    env_guard g;
    g.set("RANK", "3"), g.set("WORLD_SIZE", "8"), g.set("LOCAL_RANK", "1"), g.set("MASTER_ADDR", "node7"),
        g.set("MASTER_PORT", "29500");
    auto c = bs::read_env();
    CHECK(c.rank == 3);
    CHECK(c.size == 8);
    CHECK(c.local_rank == 1);
    CHECK(c.host == "node7");
    CHECK(c.port == 29500);
    CHECK(c.launcher == "torchrun");
    const auto derived = c.token;
    g.set("COLLCOMM_JOB_TOKEN", "00000000000000ff");
    CHECK(bs::read_env().token == 0xff);
    g.set("COLLCOMM_JOB_TOKEN", "xyz");
    CHECK(env_error().find("COLLCOMM_JOB_TOKEN") != std::string::npos);
    ::unsetenv("COLLCOMM_JOB_TOKEN");
    g.set("MASTER_PORT", "29501");
    CHECK(bs::read_env().token != derived);
    g.set("MASTER_PORT", "99999");
    CHECK(env_error().find("MASTER_PORT") != std::string::npos);
    ::unsetenv("MASTER_PORT");
    CHECK(env_error().find("MASTER_PORT") != std::string::npos);
    g.set("COLLCOMM_ROOT", "10.0.0.1:1234");  // wins over MASTER_*
    c = bs::read_env();
    CHECK(c.host == "10.0.0.1");
    CHECK(c.port == 1234);
    g.set("RANK", "8");
    CHECK(env_error().find("RANK") != std::string::npos);
    g.set("RANK", "-1");
    CHECK(env_error().find("RANK") != std::string::npos);
    ::unsetenv("WORLD_SIZE");
    CHECK(env_error().find("WORLD_SIZE") != std::string::npos);
  }
  {
    env_guard g;
    g.set("OMPI_COMM_WORLD_RANK", "2"), g.set("OMPI_COMM_WORLD_SIZE", "4"), g.set("COLLCOMM_ROOT", "h:5");
    auto c = bs::read_env();
    CHECK(c.launcher == "openmpi");
    CHECK(c.rank == 2);
    CHECK(c.size == 4);
  }
  {
    env_guard g;
    g.set("SLURM_PROCID", "0"), g.set("SLURM_NTASKS", "2");
    CHECK(env_error().find("COLLCOMM_ROOT") != std::string::npos);
    g.set("MASTER_ADDR", "a"), g.set("MASTER_PORT", "7");
    CHECK(bs::read_env().launcher == "slurm");
    g.set("COLLCOMM_ROOT", "nocolon");
    CHECK(env_error().find("COLLCOMM_ROOT") != std::string::npos);
  }
  {
    env_guard g;
    CHECK(env_error().find("RANK") != std::string::npos);
  }
}

TEST_CASE("env: tcp_from_root_env and from_env bootstrap forked ranks") {
  // Find a free port by binding one and letting it go (the tcp root then binds it itself).
  std::uint16_t port = 0;
  { auto s = bs::detail::listen_on("127.0.0.1", 0, 0, port); }
  const std::string root = "127.0.0.1:" + std::to_string(port);
  const auto seed = fresh_seed();
  const int n = 3;
  auto codes = run_job(n, [&](int r) {
    env_guard g;
    g.set("COLLCOMM_ROOT", root.c_str());
    if (r == 2) {  // one rank through the torchrun-style variables
      g.set("RANK", "2"), g.set("WORLD_SIZE", "3");
      auto b = bs::from_env(3s);
      return exercise(b, seed);
    }
    auto b = bs::tcp_from_root_env(r, n, 3s);
    return exercise(b, seed);
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}
