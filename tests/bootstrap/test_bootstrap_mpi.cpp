// The mpi bootstrap, run under mpirun (2 and 4 processes; ctest label mp): all_gather of fresh
// random bytes into poisoned buffers, barrier, send/recv rings (small, and 1 MiB messages that
// all ranks send before any receives), messages to self; then the failures, each checked on
// every rank for its code, the rank it names and how long it took: mismatched all_gather sizes,
// a wrong recv size, a rank that skips a barrier (the late rank is told too), rank 0 absent, a
// rank that never builds its bootstrap. Each case builds a fresh bootstrap on MPI_COMM_WORLD.
//
// Its own main (every rank runs every case); a rank exits non-zero if any check failed, so
// mpirun does too. alarm() ends a rank that hangs.
#include <collcomm/bootstrap/mpi.hpp>

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>

namespace bs = collcomm::bootstrap;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {
int g_rank = 0, g_size = 1, g_failures = 0;

#define EXPECT(cond, ...)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      ++g_failures;                                                                           \
      std::fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                      \
      std::fprintf(stderr, "\n");                                                             \
    }                                                                                         \
  } while (0)

std::vector<std::byte> rank_bytes(std::uint64_t seed, int rank, std::size_t n) {
  std::mt19937_64 g(seed * 1000003 + std::uint64_t(rank));
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(g());
  return v;
}

long long ms_since(clk::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
}

// `call` must throw collcomm::error with `code`, naming `want`, from this rank, within `bound`.
void expect_error(const char* what, collcomm::errc code, const std::string& want, std::chrono::milliseconds bound,
                  const std::function<void()>& call) {
  const auto t0 = clk::now();
  try {
    call();
  } catch (const collcomm::error& e) {
    const std::string text = e.what();
    EXPECT(
        e.code() == code && text.find(want) != std::string::npos && ms_since(t0) <= bound.count() && e.rank() == g_rank,
        "%s: wrong failure after %lld ms (want code %d naming '%s'): %s", what, ms_since(t0), int(code), want.c_str(),
        e.what());
    if (g_rank == 1) std::printf("rank %d, %s: %s\n", g_rank, what, e.what());
    return;
  }
  EXPECT(false, "%s: no error", what);
}

void case_exercise(std::uint64_t seed) {
  bs::mpi b(MPI_COMM_WORLD, 10s);
  const int n = b.size(), r = b.rank();
  EXPECT(r == g_rank && n == g_size, "rank %d size %d", r, n);
  for (std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(13), std::size_t(4096), std::size_t(1) << 20}) {
    auto mine = rank_bytes(seed + bytes, r, bytes);
    std::vector<std::byte> out(bytes * std::size_t(n), std::byte{0xAB});
    b.all_gather(mine, out);
    for (int q = 0; q < n; ++q) {
      auto want = rank_bytes(seed + bytes, q, bytes);
      EXPECT(std::equal(want.begin(), want.end(), out.begin() + std::ptrdiff_t(std::size_t(q) * bytes)),
             "all_gather(%zu bytes): rank %d's block", bytes, q);
    }
  }
  b.barrier();
  for (int round = 0; round < 4; ++round) {
    const int s = 1 + round % std::max(1, n - 1);
    const int next = (r + s) % n, prev = (r + n - s) % n;
    const std::size_t len = round == 3 ? std::size_t(1) << 20 : 100 + std::size_t(round) * 1000;
    auto msg = rank_bytes(seed + 77 + std::uint64_t(round), r, len);
    b.send(next, msg);
    b.send(next, msg);  // two in a row: they must arrive in order (and both sends return at once)
    for (int twice = 0; twice < 2; ++twice) {
      std::vector<std::byte> got(len, std::byte{0xCD});
      b.recv(prev, got);
      EXPECT(got == rank_bytes(seed + 77 + std::uint64_t(round), prev, len), "ring round %d: wrong bytes from rank %d",
             round, prev);
    }
  }
  auto self = rank_bytes(seed + 99, r, 33);
  b.send(r, self);
  std::vector<std::byte> got(33);
  b.recv(r, got);
  EXPECT(got == self, "message to self");
  expect_error("recv from self, nothing sent", collcomm::errc::invalid_usage, "recv from self", 100ms,
               [&] { b.recv(r, got); });
  expect_error("bad peer", collcomm::errc::invalid_argument, "peer = " + std::to_string(n), 100ms,
               [&] { b.send(n, self); });
  std::vector<std::byte> wrong(3);
  expect_error("bad out size", collcomm::errc::invalid_argument, "out has 3 bytes", 100ms,
               [&] { b.all_gather(self, wrong); });
  b.barrier();
}

void case_size_mismatch() {
  bs::mpi b(MPI_COMM_WORLD, 5s);
  const int last = g_size - 1;
  std::vector<std::byte> in(g_rank == last ? 5 : 4), out(in.size() * std::size_t(g_size));
  expect_error("all_gather sizes", collcomm::errc::invalid_usage,
               "rank " + std::to_string(last) + " gave 5 bytes, rank 0 gave 4", 4s, [&] { b.all_gather(in, out); });
  expect_error("after failure", collcomm::errc::invalid_usage, "already failed", 100ms, [&] { b.barrier(); });
}

void case_recv_size(std::uint64_t seed) {
  bs::mpi b(MPI_COMM_WORLD, 5s);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  auto six = rank_bytes(seed, g_rank, 6);
  b.send(next, six);
  b.send(next, six);
  std::vector<std::byte> five(5), got(6);
  expect_error("recv size", collcomm::errc::invalid_usage, "message has 6 bytes, the receive buffer 5", 4s,
               [&] { b.recv(prev, five); });
  b.recv(prev, got);  // the wrong-size call consumed one message; the next is intact
  EXPECT(got == rank_bytes(seed, prev, 6), "message after a wrong-size recv");
  b.barrier();
}

void case_late_rank() {
  const auto timeout = 500ms;
  const int late = g_size - 1;
  bs::mpi b(MPI_COMM_WORLD, timeout);
  b.barrier();
  const std::string want = "barrier: rank " + std::to_string(late) + " did not arrive";
  if (g_rank == late) {
    std::this_thread::sleep_for(3 * timeout);  // rank 0 gave up; its answer waits for this rank
    expect_error("late barrier", collcomm::errc::timeout, want, 500ms, [&] { b.barrier(); });
  } else {
    expect_error("barrier", collcomm::errc::timeout, want, 2 * timeout + 500ms, [&] { b.barrier(); });
  }
}

void case_rank0_absent() {
  const auto timeout = 300ms;
  bs::mpi b(MPI_COMM_WORLD, timeout);
  b.barrier();
  if (g_rank == 0) return;  // never calls the next barrier
  expect_error("barrier without rank 0", collcomm::errc::timeout, "rank 0 did not answer", 2 * timeout + 500ms,
               [&] { b.barrier(); });
}

void case_never_built() {
  const auto timeout = 500ms;
  const int late = g_size - 1;
  const std::string want = "the bootstrap handshake: rank " + std::to_string(late) + " did not arrive";
  if (g_rank == late) {
    std::this_thread::sleep_for(3 * timeout);
    expect_error("late handshake", collcomm::errc::timeout, want, 500ms, [&] { bs::mpi b(MPI_COMM_WORLD, timeout); });
  } else {
    expect_error("handshake", collcomm::errc::timeout, want, 2 * timeout + 500ms,
                 [&] { bs::mpi b(MPI_COMM_WORLD, timeout); });
  }
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::alarm(100);  // a hang is a failure, not a stuck CI job
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  std::uint64_t seed = 0;
  if (g_rank == 0) {
    std::random_device rd;
    seed = (std::uint64_t(rd()) << 32) ^ rd();
    std::printf("test_bootstrap_mpi: %d processes, seed = %llu\n", g_size, static_cast<unsigned long long>(seed));
  }
  MPI_Bcast(&seed, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
  std::fflush(stdout);
  try {
    // Between cases a plain MPI_Barrier, so that each case starts its timeouts together.
    case_exercise(seed);
    MPI_Barrier(MPI_COMM_WORLD);
    case_recv_size(seed);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_size > 1) {
      case_size_mismatch();
      MPI_Barrier(MPI_COMM_WORLD);
      case_late_rank();
      MPI_Barrier(MPI_COMM_WORLD);
      case_rank0_absent();
      MPI_Barrier(MPI_COMM_WORLD);
      // Last: the late rank's handshake arrival stays unmatched on MPI_COMM_WORLD's reserved tag.
      case_never_built();
    }
  } catch (const std::exception& e) {
    ++g_failures;
    std::fprintf(stderr, "rank %d: unexpected exception: %s\n", g_rank, e.what());
  }
  std::printf("rank %d: %s (%d failed checks)\n", g_rank, g_failures ? "FAILED" : "ok", g_failures);
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Finalize();
  return g_failures ? 1 : 0;
}
