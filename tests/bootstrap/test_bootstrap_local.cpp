// The local bootstrap (ranks as threads of one process): all_gather, barrier and send/recv checked
// byte for byte with fresh random data; then every failure the tcp bootstrap has, with the same
// codes and the same rank named on every rank: a rank that never joins, a rank that skips a
// collective, a rank whose thread leaves, mismatched all_gather sizes, a wrong recv size, bad
// arguments. Every wait is bounded; each failure case also checks how long it took. Last, the
// subset bootstrap that groups of ranks join their worlds over (detail/join.hpp).
#include <collcomm/bootstrap/local.hpp>
#include <collcomm/detail/join.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

namespace bs = collcomm::bootstrap;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {
std::uint64_t fresh_seed() {
  std::random_device rd;
  auto s = (std::uint64_t(rd()) << 32) ^ rd();
  std::printf("test_bootstrap_local seed = %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// Runs f(rank) on one thread per rank; returns the codes (an exception escaping f: 2 or 3, printed).
std::vector<int> run_threads(int nranks, const std::function<int(int)>& f) {
  std::vector<int> codes(std::size_t(nranks), -1);
  std::vector<std::thread> t;
  for (int r = 0; r < nranks; ++r)
    t.emplace_back([&, r] {
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
      codes[std::size_t(r)] = code;
    });
  for (auto& x : t) x.join();
  return codes;
}

std::vector<std::byte> rank_bytes(std::uint64_t seed, int rank, std::size_t n) {
  std::mt19937_64 g(seed * 1000003 + std::uint64_t(rank));
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(g());
  return v;
}

long long ms_since(clk::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
}

// Runs `call`, which must throw collcomm::error with `code` whose text contains `want`, within
// `bound`; returns 0 or a non-zero code after printing why.
int expect_error(int r, const char* what, collcomm::errc code, const std::string& want, std::chrono::milliseconds bound,
                 const std::function<void()>& call) {
  const auto t0 = clk::now();
  try {
    call();
  } catch (const collcomm::error& e) {
    const std::string text = e.what();
    if (e.code() != code || text.find(want) == std::string::npos || ms_since(t0) > bound.count() || e.rank() != r) {
      std::fprintf(stderr, "rank %d, %s: wrong failure after %lld ms (want code %d naming '%s'): %s\n", r, what,
                   ms_since(t0), int(code), want.c_str(), e.what());
      return 50;
    }
    if (r == 1) std::printf("rank %d, %s: %s\n", r, what, e.what());
    return 0;
  }
  std::fprintf(stderr, "rank %d, %s: no error\n", r, what);
  return 51;
}

// all_gather of random bytes (poisoned output), barrier, rings of send/recv; returns an exit code.
int exercise(bs::local& b, std::uint64_t seed) {
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
    const int next = (r + 1 + round) % n, prev = (r + 2 * n - 1 - round) % n;
    const std::size_t len = 100 + std::size_t(round) * 1000;
    auto msg = rank_bytes(seed + 77 + std::uint64_t(round), r, len);
    b.send(next, msg);
    b.send(next, msg);  // two in a row: they must arrive in order
    std::vector<std::byte> got(len, std::byte{0xCD});
    for (int twice = 0; twice < 2; ++twice) {
      std::fill(got.begin(), got.end(), std::byte{0xCD});
      b.recv(prev, got);
      if (got != rank_bytes(seed + 77 + std::uint64_t(round), prev, len)) {
        std::fprintf(stderr, "rank %d: ring round %d: wrong bytes from rank %d\n", r, round, prev);
        return 11;
      }
    }
  }
  b.barrier();
  return 0;
}
}  // namespace

TEST_CASE("local bootstrap: all_gather, barrier, send/recv rings for 1..8 thread ranks") {
  const auto seed = fresh_seed();
  for (int n = 1; n <= 8; ++n) {
    bs::local_group group(n, 5s);
    auto codes = run_threads(n, [&](int r) {
      bs::local b(group, r);
      if (b.rank() != r || b.size() != n || b.timeout() != 5s) return 12;
      return exercise(b, seed);
    });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "n = " << n << ", rank " << r);
  }
}

TEST_CASE("local bootstrap: ranks that race ahead by many collectives, random sizes and delays") {
  const auto seed = fresh_seed();
  const int n = 5, rounds = 200;
  bs::local_group group(n, 10s);
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    std::mt19937_64 delay(seed ^ std::uint64_t(r + 1));
    for (int k = 0; k < rounds; ++k) {
      if (delay() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(delay() % 500));
      std::mt19937_64 shared(seed + std::uint64_t(k));  // every rank draws the same size
      const std::size_t bytes = shared() % 64;
      auto mine = rank_bytes(seed + 1000 + std::uint64_t(k), r, bytes);
      std::vector<std::byte> out(bytes * n, std::byte{0xEE});
      b.all_gather(mine, out);
      for (int q = 0; q < n; ++q)
        if (!std::equal(out.begin() + std::ptrdiff_t(q * bytes), out.begin() + std::ptrdiff_t((q + 1) * bytes),
                        rank_bytes(seed + 1000 + std::uint64_t(k), q, bytes).begin())) {
          std::fprintf(stderr, "rank %d: round %d: rank %d's block is wrong\n", r, k, q);
          return 10;
        }
      // p2p to a shifting peer, not waited for until the next round: sends run ahead of receives.
      const int to = (r + 1 + k % (n - 1)) % n, from = (r + 2 * n - 1 - k % (n - 1)) % n;
      b.send(to, rank_bytes(seed + 5000 + std::uint64_t(k), r, bytes + 1));
      std::vector<std::byte> got(bytes + 1);
      b.recv(from, got);
      if (got != rank_bytes(seed + 5000 + std::uint64_t(k), from, bytes + 1)) {
        std::fprintf(stderr, "rank %d: round %d: wrong message from rank %d\n", r, k, from);
        return 11;
      }
    }
    return 0;
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("local bootstrap: a rank that never joins is named in a timeout on every other rank") {
  const auto timeout = 300ms;
  for (int absent : {2, 0}) {
    const int n = 4;
    bs::local_group group(n, timeout);
    auto codes = run_threads(n, [&](int r) {
      if (r == absent) return 0;
      return expect_error(r, "handshake", collcomm::errc::timeout, "rank " + std::to_string(absent) + " did not arrive",
                          timeout + 500ms, [&] { bs::local b(group, r); });
    });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "absent " << absent << ", rank " << r);
  }
}

TEST_CASE("local bootstrap: a rank that skips a collective is named on every rank, the late one too") {
  const auto timeout = 300ms;
  const int n = 4, skipper = 3;
  bs::local_group group(n, timeout);
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    b.barrier();
    if (r == skipper) {
      std::this_thread::sleep_for(2 * timeout);  // arrives after the others gave up
      int c = expect_error(r, "late all_gather", collcomm::errc::timeout, "rank 3 did not arrive", 100ms,
                           [&] { b.barrier(); });
      // Afterwards the bootstrap refuses every call.
      return c ? c : expect_error(r, "after failure", collcomm::errc::invalid_usage, "already failed", 100ms, [&] {
        b.barrier();
      });
    }
    std::array<std::byte, 8> in{}, out0{};
    std::vector<std::byte> out(8 * n);
    int c = expect_error(r, "all_gather", collcomm::errc::timeout, "all_gather: rank 3 did not arrive", timeout + 500ms,
                         [&] { b.all_gather(in, out); });
    if (c) return c;
    c = expect_error(r, "send after failure", collcomm::errc::invalid_usage, "already failed", 100ms,
                     [&] { b.send(0, in); });
    return c ? c : expect_error(r, "recv after failure", collcomm::errc::invalid_usage, "already failed", 100ms, [&] {
      b.recv(0, out0);
    });
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("local bootstrap: a rank whose thread leaves is named at once (no need to wait for the timeout)") {
  const int n = 3;
  bs::local_group group(n, 20s);
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    b.barrier();
    if (r == 1) return 0;  // leaves: its bootstrap is destroyed
    if (r == 2) {
      std::array<std::byte, 4> m{};
      return expect_error(r, "recv from a departed rank", collcomm::errc::aborted, "rank 1's bootstrap was destroyed",
                          2s, [&] { b.recv(1, m); });
    }
    return expect_error(r, "barrier with a departed rank", collcomm::errc::aborted, "rank 1's bootstrap was destroyed",
                        2s, [&] { b.barrier(); });
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("local bootstrap: mismatched all_gather sizes are an error on every rank") {
  const int n = 3;
  bs::local_group group(n, 2s);
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    std::vector<std::byte> in(r == 2 ? 5 : 4), out(in.size() * n);
    return expect_error(r, "all_gather", collcomm::errc::invalid_usage, "rank 2 gave 5 bytes, rank 0 gave 4", 1s,
                        [&] { b.all_gather(in, out); });
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("local bootstrap: a recv of the wrong size fails that call only; a recv that never matches times out") {
  const int n = 2;
  const auto timeout = 300ms;
  bs::local_group group(n, timeout);
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    std::array<std::byte, 6> six{};
    std::array<std::byte, 5> five{};
    if (r == 0) {
      b.send(1, six);
      b.send(1, six);
      b.barrier();
      std::this_thread::sleep_for(3 * timeout);  // stays (a leaving rank would be named at once, not by a timeout)
      return 0;
    }
    int c = expect_error(r, "recv size", collcomm::errc::invalid_usage, "message has 6 bytes, the receive buffer 5", 1s,
                         [&] { b.recv(0, five); });
    if (c) return c;
    b.recv(0, six);  // the next message is still there
    b.barrier();
    // Rank 0 sends nothing more: rank 1's recv times out naming it, and the group fails.
    return expect_error(r, "recv timeout", collcomm::errc::timeout, "recv from rank 0: rank 0 did not send",
                        timeout + 500ms, [&] { b.recv(0, six); });
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}

TEST_CASE("local bootstrap: bad arguments") {
  CHECK_THROWS_AS(bs::local_group(0), collcomm::error);
  CHECK_THROWS_AS(bs::local_group(2, 0ms), collcomm::error);
  bs::local_group two(2, 200ms);
  CHECK_THROWS_AS(bs::local(two, 2), collcomm::error);
  CHECK_THROWS_AS(bs::local(two, -1), collcomm::error);

  bs::local_group g(1, 1s);
  bs::local one(g, 0);                                // a group of one needs nobody
  CHECK_THROWS_AS(bs::local(g, 0), collcomm::error);  // rank 0 joined already
  std::array<std::byte, 3> in{std::byte{1}, std::byte{2}, std::byte{3}}, out{};
  one.all_gather(in, out);
  CHECK(out == in);
  CHECK_THROWS_AS(one.all_gather(in, std::span(out).first(2)), collcomm::error);
  CHECK_THROWS_AS(one.send(1, in), collcomm::error);
  CHECK_THROWS_AS(one.recv(-1, out), collcomm::error);
  one.send(0, in);
  std::array<std::byte, 3> got{};
  one.recv(0, got);
  CHECK(got == in);
  const auto t0 = clk::now();
  CHECK_THROWS_AS(one.recv(0, got), collcomm::error);  // nothing sent to self: at once, not after the timeout
  CHECK(ms_since(t0) < 100);
  bs::local moved(std::move(one));  // a moved bootstrap keeps working
  moved.barrier();
}

// detail::subset_bootstrap: groups of a parent's ranks all-gather side by side, each its own
// record size, with ranks of no group making barriers; every byte checked against each sender's
// random data. A group whose ranks are in different exchanges is an error naming the rank.
TEST_CASE("subset bootstrap: groups exchange records of their own sizes at once over one parent") {
  const auto seed = fresh_seed();
  const int n = 7;
  bs::local_group group(n, 5s);
  // Groups {0, 3, 5}, {6, 1} (group rank order differs from parent order), {4}; rank 2 in none.
  const std::vector<std::vector<int>> groups = {{0, 3, 5}, {6, 1}, {4}};
  auto codes = run_threads(n, [&](int r) {
    bs::local b(group, r);
    std::vector<int> members;
    int mine = -1, g = -1;
    for (std::size_t k = 0; k < groups.size(); ++k)
      for (std::size_t i = 0; i < groups[k].size(); ++i)
        if (groups[k][i] == r) {
          members = groups[k];
          mine = static_cast<int>(i);
          g = static_cast<int>(k);
        }
    collcomm::detail::subset_bootstrap<bs::local> sb(b, members, mine);
    if (sb.size() != static_cast<int>(members.size()) || sb.rank() != mine) return 11;
    const int rounds = 4;
    for (int round = 0; round < rounds; ++round) {
      if (g < 0) {
        sb.barrier();
        continue;
      }
      const std::size_t bytes = 1 + static_cast<std::size_t>(g) * 37 + static_cast<std::size_t>(round) * 100;
      const auto in = rank_bytes(seed + static_cast<std::uint64_t>(round), r, bytes);
      std::vector<std::byte> out(bytes * members.size(), std::byte{0x5a});
      sb.all_gather(in, out);
      for (std::size_t i = 0; i < members.size(); ++i) {
        const auto want = rank_bytes(seed + static_cast<std::uint64_t>(round), members[i], bytes);
        if (!std::equal(want.begin(), want.end(), out.begin() + static_cast<std::ptrdiff_t>(i * bytes))) return 12;
      }
    }
    if (sb.rounds() != rounds) return 13;
    // Rank 3 is one exchange behind its group: rank 0 and 5 get 4-byte records where it gives 8.
    std::vector<std::byte> in(g == 0 && r == 3 ? 8 : 4), out(in.size() * members.size());
    if (g != 0) {
      if (g > 0) sb.all_gather(in, out); else sb.barrier();
      return 0;
    }
    if (r == 3) {
      try {
        sb.all_gather(in, out);
      } catch (const collcomm::error&) {
        return 0;  // rank 0's 4 bytes: named below on the others
      }
      return 14;
    }
    return expect_error(r, "subset all_gather", collcomm::errc::invalid_usage, "rank 3 gave 8 bytes", 1s,
                        [&] { sb.all_gather(in, out); });
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(codes[std::size_t(r)] == 0, "rank " << r);
}
