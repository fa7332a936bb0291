// The tcp bootstrap against a local attacker and against its own limits: a rank claimed twice
// and a replayed hello fail the job at once; the token never travels; idle connections are
// dropped and a flood under a low descriptor limit neither keeps the ranks out nor makes rank 0
// spin; ranks as threads of one process (built in either order, a forked child holding the
// listener); a send over the payload bound is refused on the sender; world sizes over the limit
// are refused up front and long rank lists are summarised; the token file and the wildcard
// warning of the environment reader.
//
// Processes are forked before any thread of this program exists; children report through their
// exit status and print what went wrong; the parent reaps every child within a bound.
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/bootstrap/local.hpp>
#include <collcomm/bootstrap/tcp.hpp>

#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace bs = collcomm::bootstrap;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

long long ms_since(steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
}

// Runs each function in a forked process (exit code = its result; 2 or 3 for an exception it
// did not catch); runs `parent_side` meanwhile; returns the exit codes (-1: killed or crashed).
std::vector<int> run_procs(const std::vector<std::function<int()>>& procs,
                           const std::function<void()>& parent_side = {}, std::chrono::seconds bound = 30s) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < procs.size(); ++i) {
    const pid_t p = ::fork();
    REQUIRE(p >= 0);
    if (p == 0) {
      int code = 1;
      try {
        code = procs[i]();
      } catch (const collcomm::error& e) {
        std::fprintf(stderr, "process %zu: unexpected collcomm::error: %s\n", i, e.what());
        code = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %zu: unexpected exception: %s\n", i, e.what());
        code = 3;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(p);
  }
  if (parent_side) parent_side();
  std::vector<int> codes(procs.size(), 0);
  const auto deadline = steady::now() + bound;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    int st = 0;
    while (::waitpid(pids[i], &st, WNOHANG) != pids[i]) {
      if (steady::now() > deadline) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], &st, 0);
        std::fprintf(stderr, "process %zu: killed after %lld s\n", i, (long long)bound.count());
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return codes;
}

// An all_gather of the ranks' numbers, a ring of send/recv and a barrier; 0 if all is well.
int small_exercise(bs::tcp& b) {
  const int n = b.size(), r = b.rank();
  std::array<std::byte, 4> mine;
  bs::wire::detail::put<std::uint32_t>(mine.data(), std::uint32_t(r * 7 + 1));
  std::vector<std::byte> all(4 * std::size_t(n));
  b.all_gather(mine, all);
  for (int q = 0; q < n; ++q)
    if (bs::wire::detail::get<std::uint32_t>(all.data() + 4 * q) != std::uint32_t(q * 7 + 1)) return 60;
  if (n > 1) {
    b.send((r + 1) % n, mine);
    std::array<std::byte, 4> got{};
    b.recv((r + n - 1) % n, got);
    if (bs::wire::detail::get<std::uint32_t>(got.data()) != std::uint32_t(((r + n - 1) % n) * 7 + 1)) return 61;
  }
  b.barrier();
  return 0;
}

int connect_to(std::uint16_t port, bool nonblocking = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && !(nonblocking && errno == EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::uint16_t free_port() {
  std::uint16_t port = 0;
  { auto s = bs::detail::listen_on("127.0.0.1", 0, 0, port); }
  return port;
}

std::string local_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("tcp bootstrap: a rank that joins twice fails the job at once, naming it and both addresses") {
  auto id = bs::unique_id::create();
  const auto timeout = 3s;
  // Two processes claim rank 2 (one of them an impostor that knows the token) before rank 1
  // comes. Rank 0 must not finish the handshake with either silently.
  auto member = [&](int r, std::chrono::milliseconds delay) {
    return [&, r, delay] {
      bs::release_listener(id);  // this process's inherited copy is not its to keep
      std::this_thread::sleep_for(delay);
      try {
        bs::tcp b(id, r, 3, timeout);
        std::fprintf(stderr, "rank %d: joined a job in which rank 2 joined twice\n", r);
        return 70;
      } catch (const collcomm::error& e) {
        return 0;
      }
    };
  };
  auto codes = run_procs({[&] {
                            const auto t0 = steady::now();
                            try {
                              bs::tcp b(id, 0, 3, timeout);
                              std::fprintf(stderr, "rank 0: the handshake completed with rank 2 claimed twice\n");
                              return 71;
                            } catch (const collcomm::error& e) {
                              const std::string what = e.what();
                              std::fprintf(stderr, "rank 0 saw: %s\n", e.what());
                              if (e.code() != collcomm::errc::aborted || what.find("rank 2") == std::string::npos ||
                                  count(what, "127.0.0.1:") < 2 || ms_since(t0) > 2000)
                                return 72;
                              return 0;
                            }
                          },
                          member(2, 0ms), member(2, 300ms), member(1, 800ms)},
                         [&] { bs::release_listener(id); });
  for (std::size_t i = 0; i < codes.size(); ++i) CHECK_MESSAGE(codes[i] == 0, "process " << i);
}

TEST_CASE("tcp bootstrap: a hello recorded in one run is refused in the next; the token never travels") {
  const std::uint64_t token = 0x5ec2e7c0ffee1234ull;
  const std::uint16_t port = free_port();
  const bs::unique_id id("127.0.0.1", port, token);
  // Run 1, rank 1 reaching rank 0 through a proxy that records what rank 1 sends.
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(lfd, 4) == 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::uint16_t proxy_port = ntohs(a.sin_port);
  std::vector<std::byte> recorded;
  std::thread proxy([&] {
    pollfd pl{lfd, POLLIN, 0};
    if (::poll(&pl, 1, 5000) != 1) return;
    const int down = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    int up = -1;
    for (auto t0 = steady::now(); up < 0 && steady::now() - t0 < 5s;)
      if ((up = connect_to(port)) < 0) std::this_thread::sleep_for(10ms);
    if (down < 0 || up < 0) return;
    std::byte buf[4096];
    for (auto t0 = steady::now(); steady::now() - t0 < 10s;) {
      pollfd pf[2] = {{down, POLLIN, 0}, {up, POLLIN, 0}};
      if (::poll(pf, 2, 100) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2; ++i)
        if (pf[i].revents) {
          const ssize_t k = ::recv(pf[i].fd, buf, sizeof buf, 0);
          if (k <= 0) {
            closed = true;
            continue;
          }
          if (i == 0) recorded.insert(recorded.end(), buf, buf + k);
          ::send(i == 0 ? up : down, buf, std::size_t(k), MSG_NOSIGNAL);
        }
      if (closed) break;
    }
    ::close(down);
    ::close(up);
  });
  int code0 = -1, code1 = -1;
  std::thread r0([&] {
    try {
      bs::tcp b(id, 0, 2, 3s);
      code0 = small_exercise(b);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "run 1, rank 0: %s\n", e.what());
    }
  });
  std::thread r1([&] {
    try {
      bs::tcp b(bs::unique_id("127.0.0.1", proxy_port, token), 1, 2, 3s);
      code1 = small_exercise(b);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "run 1, rank 1: %s\n", e.what());
    }
  });
  r0.join();
  r1.join();
  proxy.join();
  ::close(lfd);
  REQUIRE(code0 == 0);
  REQUIRE(code1 == 0);
  REQUIRE(recorded.size() >= 32);
  std::array<std::byte, 8> tok;
  bs::wire::detail::put<std::uint64_t>(tok.data(), token);
  CHECK_MESSAGE(std::search(recorded.begin(), recorded.end(), tok.begin(), tok.end()) == recorded.end(),
                "the job token was sent in clear");

  // Run 2 of the same job (same address and token): an attacker replays rank 1's bytes.
  std::string what;
  collcomm::errc code = collcomm::errc::internal;
  long long took = -1;
  std::thread root([&] {
    const auto t0 = steady::now();
    try {
      bs::tcp b(id, 0, 2, 3s);
      what = "the handshake completed with a replayed hello";
    } catch (const collcomm::error& e) {
      what = e.what();
      code = e.code();
    }
    took = ms_since(t0);
  });
  int fd = -1;
  for (auto t0 = steady::now(); fd < 0 && steady::now() - t0 < 2s;)
    if ((fd = connect_to(port)) < 0) std::this_thread::sleep_for(10ms);
  REQUIRE(fd >= 0);
  CHECK(::send(fd, recorded.data(), recorded.size(), MSG_NOSIGNAL) == ssize_t(recorded.size()));
  root.join();
  ::close(fd);
  CAPTURE(what);
  CHECK(code == collcomm::errc::aborted);
  CHECK(what.find("rank 1") != std::string::npos);
  CHECK(what.find("127.0.0.1:") != std::string::npos);
  CHECK(took < 2000);
}

TEST_CASE("tcp bootstrap: a connection that sends nothing is dropped after the handshake grace") {
  auto id = bs::unique_id::create();
  const auto timeout = 2000ms;  // grace: min(timeout / 4, 2 s) = 500 ms
  std::thread root([&] {
    try {
      bs::tcp b(id, 0, 2, timeout);  // rank 1 never comes
    } catch (const collcomm::error&) {}
  });
  const int fd = connect_to(id.port());
  REQUIRE(fd >= 0);
  const auto t0 = steady::now();
  bool closed = false;
  std::byte buf[256];
  while (!closed && steady::now() - t0 < 1500ms) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 50) == 1) closed = ::recv(fd, buf, sizeof buf, 0) <= 0;
  }
  const auto took = ms_since(t0);
  ::close(fd);
  root.join();
  CHECK_MESSAGE(closed, "rank 0 kept an idle connection for " << took << " ms");
  CHECK(took >= 300);
}

TEST_CASE("tcp bootstrap: a flood of idle connections under a low descriptor limit: ranks join, rank 0 does not spin") {
  auto id = bs::unique_id::create();
  const int n = 3;
  const auto timeout = 8s;
  auto member = [&](int r) {
    return [&, r] {
      bs::release_listener(id);
      std::this_thread::sleep_for(300ms);  // the flood has filled rank 0's descriptors by now
      const auto t0 = steady::now();
      bs::tcp b(id, r, n, timeout);
      const auto joined = ms_since(t0);
      if (const int c = small_exercise(b)) return c;
      if (joined > 1500) {  // the flood goes on until 2.5 s
        std::fprintf(stderr, "rank %d: joined after %lld ms\n", r, joined);
        return 80;
      }
      return 0;
    };
  };
  auto root = [&] {
    // Room for 10 more descriptors: the limit just past the 10th free descriptor number (those
    // open above it, the listener perhaps, stay usable).
    int limit = 0;
    for (int free_slots = 0; free_slots < 10; ++limit)
      if (::fcntl(limit, F_GETFD) == -1) ++free_slots;
    rlimit lim{rlim_t(limit), rlim_t(limit)};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 81;
    const auto t0 = steady::now();
    rusage u0{}, u1{};
    ::getrusage(RUSAGE_SELF, &u0);
    bs::tcp b(id, 0, n, timeout);
    ::getrusage(RUSAGE_SELF, &u1);
    const auto wall = ms_since(t0);
    auto ms = [](const timeval& t) { return t.tv_sec * 1000LL + t.tv_usec / 1000; };
    const long long cpu = ms(u1.ru_utime) + ms(u1.ru_stime) - ms(u0.ru_utime) - ms(u0.ru_stime);
    std::fprintf(stderr, "rank 0: handshake %lld ms wall, %lld ms cpu\n", wall, cpu);
    if (const int c = small_exercise(b)) return c;
    return cpu <= wall / 4 + 50 ? 0 : 82;  // a spin takes all of a core it gets
  };
  auto codes = run_procs({root, member(1), member(2)}, [&] {
    bs::release_listener(id);
    // Idle connections, one a millisecond, all kept open, for 2.5 s (at most 500).
    std::vector<int> idle;
    for (auto t0 = steady::now(); steady::now() - t0 < 2500ms;) {
      if (idle.size() < 500)
        if (const int fd = connect_to(id.port(), true); fd >= 0) idle.push_back(fd);
      std::this_thread::sleep_for(1ms);
    }
    for (int fd : idle) ::close(fd);
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE(
    "tcp bootstrap: ranks as threads of one process, built in either order, a forked child holding the listener") {
  const int n = 4;
  auto up = bs::unique_id::create(), down = bs::unique_id::create();
  // A child that holds inherited copies of both listeners (a helper the program forked) for 3 s.
  std::fflush(stderr);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    std::this_thread::sleep_for(3s);
    ::_exit(0);
  }
  for (bool ascending : {true, false}) {
    const auto& id = ascending ? up : down;
    std::vector<int> codes(std::size_t(n), -1);
    std::vector<std::thread> ranks;
    for (int i = 0; i < n; ++i) {
      const int r = ascending ? i : n - 1 - i;
      ranks.emplace_back([&, r] {
        try {
          bs::tcp b(id, r, n, 3s);
          int code = small_exercise(b);
          if (code == 0 && r == 0) {  // every socket of this process is close-on-exec
            if (DIR* d = ::opendir("/proc/self/fd")) {
              while (dirent* e = ::readdir(d)) {
                char link[64] = {};
                const std::string path = std::string("/proc/self/fd/") + e->d_name;
                if (::readlink(path.c_str(), link, sizeof link - 1) > 0 && std::string(link).rfind("socket:", 0) == 0 &&
                    !(::fcntl(std::atoi(e->d_name), F_GETFD) & FD_CLOEXEC))
                  code = 90;
              }
              ::closedir(d);
            }
          }
          codes[std::size_t(r)] = code;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s, rank %d: %s\n", ascending ? "ascending" : "descending", r, e.what());
        }
      });
      std::this_thread::sleep_for(100ms);
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r)
      CHECK_MESSAGE(codes[std::size_t(r)] == 0, (ascending ? "ascending" : "descending") << ", rank " << r);
  }
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
}

TEST_CASE("tcp bootstrap: a send over 64 MiB is refused on the sender, naming both sizes; the bootstrap goes on") {
  auto id = bs::unique_id::create();
  const std::size_t bound = std::size_t{64} << 20;
  auto codes =
      run_procs({[&] {
                   bs::tcp b(id, 0, 2, 5s);
                   std::array<std::byte, 5> got{};
                   b.recv(1, got);
                   if (got[4] != std::byte{5}) return 100;
                   b.barrier();
                   return 0;
                 },
                 [&] {
                   bs::release_listener(id);
                   bs::tcp b(id, 1, 2, 5s);
                   std::vector<std::byte> big(bound + 1);
                   for (int peer : {0, 1}) {
                     try {
                       b.send(peer, big);
                       return 101;
                     } catch (const collcomm::error& e) {
                       const std::string what = e.what();
                       if (e.code() != collcomm::errc::invalid_argument ||
                           what.find(std::to_string(bound + 1)) == std::string::npos ||
                           what.find(std::to_string(bound)) == std::string::npos) {
                         std::fprintf(stderr, "rank 1: wrong error: %s\n", e.what());
                         return 102;
                       }
                     }
                   }
                   std::array<std::byte, 5> small{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
                   b.send(0, small);
                   b.barrier();
                   return 0;
                 }},
                [&] { bs::release_listener(id); });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
}

namespace {
struct env_guard {
  std::vector<std::string> names{"RANK",        "WORLD_SIZE",    "LOCAL_RANK",         "MASTER_ADDR",
                                 "MASTER_PORT", "COLLCOMM_ROOT", "COLLCOMM_JOB_TOKEN", "COLLCOMM_JOB_TOKEN_FILE"};
  env_guard() {
    for (auto& n : names) ::unsetenv(n.c_str());
  }
  ~env_guard() {
    for (auto& n : names) ::unsetenv(n.c_str());
  }
  void set(const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); }
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

TEST_CASE("bootstrap: a world over 1024 ranks is refused up front, naming the argument and the limit") {
  auto refused = [](auto&& make, const char* name) {
    try {
      make();
    } catch (const collcomm::error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(e.code() == collcomm::errc::invalid_argument);
      CHECK(what.find(name) != std::string::npos);
      CHECK(what.find("1024") != std::string::npos);
      return;
    } catch (const std::exception& e) {
      FAIL("not a collcomm::error: " << e.what());
      return;
    }
    FAIL("accepted");
  };
  const bs::unique_id id("127.0.0.1", 1, 5);
  refused([&] { bs::tcp(id, 1, 1025, 100ms); }, "nranks");
  refused([&] { bs::tcp(id, 1, INT_MAX, 100ms); }, "nranks");
  refused([&] { bs::local_group(1025, 100ms); }, "nranks");
  env_guard g;
  g.set("MASTER_ADDR", "127.0.0.1"), g.set("MASTER_PORT", "1"), g.set("RANK", "1");
  for (const char* size : {"1025", "1048576", "16777216"}) {
    g.set("WORLD_SIZE", size);
    refused([&] { bs::read_env(); }, "WORLD_SIZE");
  }
  g.set("WORLD_SIZE", "1024");
  CHECK(bs::read_env().size == 1024);
}

TEST_CASE("bootstrap: long lists of missing ranks are summarised as ranges") {
  {
    bs::local_group group(1000, 200ms);
    try {
      bs::local b(group, 0);
      FAIL("joined alone");
    } catch (const collcomm::error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find("ranks 1-999 ") != std::string::npos);
      CHECK(what.size() < 300);
    }
  }
  auto id = bs::unique_id::create();
  try {
    bs::tcp b(id, 0, 1000, 300ms);
    FAIL("joined alone");
  } catch (const collcomm::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.code() == collcomm::errc::timeout);
    CHECK(what.find("ranks 1-999 ") != std::string::npos);
    CHECK(what.size() < 300);
  }
}

TEST_CASE("env: COLLCOMM_JOB_TOKEN_FILE is read only from a file its owner alone may read") {
  env_guard g;
  g.set("RANK", "0"), g.set("WORLD_SIZE", "2"), g.set("COLLCOMM_ROOT", "127.0.0.1:29400");
  char path[] = "/tmp/collcomm_token_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string text = "00c0ffee12345678\n";
  REQUIRE(::write(fd, text.data(), text.size()) == ssize_t(text.size()));
  ::close(fd);
  ::chmod(path, 0600);
  g.set("COLLCOMM_JOB_TOKEN_FILE", path);
  CHECK(env_error() == "");
  if (env_error().empty()) CHECK(bs::read_env().token == 0x00c0ffee12345678ull);
  ::chmod(path, 0644);
  std::string what = env_error();
  CHECK(what.find("COLLCOMM_JOB_TOKEN_FILE") != std::string::npos);
  CHECK(what.find("chmod 600") != std::string::npos);
  ::chmod(path, 0600);
  g.set("COLLCOMM_JOB_TOKEN", "0000000000000001");
  CHECK(env_error().find("both") != std::string::npos);
  ::unsetenv("COLLCOMM_JOB_TOKEN");
  std::ofstream(path) << "not a token";
  ::chmod(path, 0600);
  CHECK(env_error().find("16 hex digits") != std::string::npos);
  ::unlink(path);
  CHECK(env_error().find("COLLCOMM_JOB_TOKEN_FILE") != std::string::npos);
}

TEST_CASE("env: rank 0 with a derived token on a wildcard address warns once on stderr") {
  char path[] = "/tmp/collcomm_stderr_XXXXXX";
  const int out = ::mkstemp(path);
  REQUIRE(out >= 0);
  const std::string port = std::to_string(free_port());
  auto codes = run_procs({[&] {
    ::dup2(out, 2);
    env_guard g;
    g.set("RANK", "0"), g.set("WORLD_SIZE", "1"), g.set("MASTER_ADDR", "0.0.0.0"), g.set("MASTER_PORT", port);
    for (int i = 0; i < 2; ++i) {
      auto b = bs::from_env(1s);
    }
    g.set("MASTER_ADDR", "127.0.0.1");  // one interface: no warning
    { auto b = bs::from_env(1s); }
    return 0;
  }});
  CHECK(codes[0] == 0);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string err = ss.str();
  ::close(out);
  ::unlink(path);
  CAPTURE(err);
  CHECK(count(err, "warning") == 1);
  CHECK(err.find("0.0.0.0") != std::string::npos);
  CHECK(err.find("COLLCOMM_JOB_TOKEN") != std::string::npos);
}

TEST_CASE("tcp bootstrap: a rank that dies after joining is named in every other rank's error, not rank 0") {
  auto id = bs::unique_id::create();
  // Ranks 0 and 1 all_gather; rank 2 joins and is SIGKILLed. Rank 0 finds its connection closed
  // and must tell rank 1 which rank was lost (rank 1 would otherwise see rank 0's relay fail).
  auto gather = [&](int r) {
    return [&, r] {
      if (r != 0) bs::release_listener(id);
      bs::tcp b(id, r, 3, 3s);
      if (r == 2) ::kill(::getpid(), SIGKILL);
      std::this_thread::sleep_for(200ms);
      std::byte in[8]{}, out[24];
      try {
        b.all_gather(in, out);
        std::fprintf(stderr, "rank %d: all_gather succeeded without rank 2\n", r);
        return 70;
      } catch (const collcomm::error& e) {
        const std::string what = e.what();
        std::fprintf(stderr, "rank %d saw: %s\n", r, e.what());
        if (what.find("rank 2") == std::string::npos) return 71;
        if (r == 1 && what.find("aborted by rank 0") == std::string::npos) return 72;
        return 0;
      }
    };
  };
  auto codes = run_procs({gather(0), gather(1), gather(2)}, [&] { bs::release_listener(id); });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] == -1);  // killed
}
