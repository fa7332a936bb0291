// collcomm::group on the host executor: a rank's send and recv calls made together run as
// send_recv calls, so patterns that deadlock as separate blocking calls complete (every rank sends
// first, more than the connections hold); several peers, messages to oneself, groups that nest;
// errors inside a group. Fresh random data, poisoned outputs, every element checked.
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using collcomm::index_t;
using comm_t = collcomm::communicator<collcomm::transport::host_shm>;
constexpr std::int32_t poison = -7;

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("COLLCOMM_TEST_SEED");
    const std::uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    MESSAGE("seed " << s << " (rerun with COLLCOMM_TEST_SEED=" << s << ")");
    return s;
  }();
  return seed;
}

std::vector<std::vector<std::int32_t>> random_rows(int n, index_t count, std::uint64_t salt) {
  std::mt19937_64 g(test_seed() ^ salt);
  std::vector<std::vector<std::int32_t>> x(static_cast<std::size_t>(n), std::vector<std::int32_t>(count));
  for (auto& row : x)
    for (auto& e : row) e = static_cast<std::int32_t>(g());
  return x;
}

// Options whose connections hold far less than the messages: a rank that sends before it receives
// blocks until its peer receives.
collcomm::host::options small_slots() {
  collcomm::host::options o;
  o.slot_bytes = 64;
  o.slots = 2;
  o.channels = 1;
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

std::size_t mismatches(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

}  // namespace

TEST_CASE("group: every rank sends to r+1 then receives from r-1, messages far larger than the slots") {
  for (int n : {2, 3, 5}) {
    const index_t count = 10007;
    const auto x = random_rows(n, count, 100 + static_cast<std::uint64_t>(n));
    std::vector<std::vector<std::int32_t>> out(static_cast<std::size_t>(n), std::vector<std::int32_t>(count, poison));
    collcomm::host::world w(n, small_slots());
    collcomm::host::run_ranks(w, [&](comm_t& comm) {
      const int r = comm.rank();
      collcomm::group([&] {
        collcomm::send(comm, x[r].data(), count, (r + 1) % n);
        collcomm::recv(comm, out[r].data(), count, (r + n - 1) % n);
      });
    });
    for (int r = 0; r < n; ++r) {
      CAPTURE(n);
      CAPTURE(r);
      CHECK(mismatches(out[r], x[(r + n - 1) % n]) == 0);
    }
  }
}

TEST_CASE("group: both directions of a ring, a message to oneself, nested groups, any order of calls") {
  const int n = 4;
  const index_t count = 3001;
  const auto x = random_rows(n, 3 * count, 200);  // per rank: to next, to prev, to itself
  using rows = std::vector<std::vector<std::int32_t>>;
  rows from_prev(n, std::vector<std::int32_t>(count, poison)), from_next(n, std::vector<std::int32_t>(count, poison)),
      from_self(n, std::vector<std::int32_t>(count, poison));
  collcomm::host::world w(n, small_slots());
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    const std::int32_t* mine = x[r].data();
    collcomm::group([&] {
      if (r % 2 == 0) {
        collcomm::recv(comm, from_next[r].data(), count, next);
        collcomm::send(comm, mine, count, next);
        collcomm::group([&] { collcomm::recv(comm, from_self[r].data(), count, r); });
        collcomm::send(comm, mine + count, count, prev);
        collcomm::send(comm, mine + 2 * count, count, r);
        collcomm::recv(comm, from_prev[r].data(), count, prev);
      } else {
        collcomm::send(comm, mine + 2 * count, count, r);
        collcomm::send(comm, mine + count, count, prev);
        collcomm::recv(comm, from_prev[r].data(), count, prev);
        collcomm::send(comm, mine, count, next);
        collcomm::recv(comm, from_self[r].data(), count, r);
        collcomm::recv(comm, from_next[r].data(), count, next);
      }
    });
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    CHECK(mismatches(from_prev[r], std::vector<std::int32_t>(x[prev].begin(), x[prev].begin() + count)) == 0);
    CHECK(mismatches(from_next[r], std::vector<std::int32_t>(x[next].begin() + count, x[next].begin() + 2 * count)) ==
          0);
    CHECK(mismatches(from_self[r], std::vector<std::int32_t>(x[r].begin() + 2 * count, x[r].end())) == 0);
  }
}

TEST_CASE("group: bad calls are refused when made, a lone message to oneself at the end, nothing moves") {
  const int n = 3;
  const index_t count = 100;
  collcomm::host::world w(n);
  std::vector<std::string> arg_errors(n), self_errors(n), thrown(n);
  std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count, poison));
  const auto x = random_rows(n, count, 300);
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    try {  // a peer out of range: refused at the call, naming the argument; the group's calls dropped
      collcomm::group([&] {
        collcomm::send(comm, x[r].data(), count, (r + 1) % n);
        collcomm::recv(comm, out[r].data(), count, n);
      });
    } catch (const collcomm::error& e) {
      arg_errors[r] = e.what();
    }
    try {  // a send to oneself with no receive from oneself
      collcomm::group([&] { collcomm::send(comm, x[r].data(), count, r); });
    } catch (const collcomm::error& e) {
      self_errors[r] = e.what();
    }
    try {  // the user's own exception: the calls are dropped, the exception passes through
      collcomm::group([&] {
        collcomm::send(comm, x[r].data(), count, (r + 1) % n);
        throw std::runtime_error("user");
      });
    } catch (const std::runtime_error& e) {
      thrown[r] = e.what();
    }
    // The world is in step and usable: nothing of the groups above was sent.
    collcomm::group([&] {
      collcomm::recv(comm, out[r].data(), count, (r + n - 1) % n);
      collcomm::send(comm, x[r].data(), count, (r + 1) % n);
    });
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CAPTURE(arg_errors[r]);
    CAPTURE(self_errors[r]);
    CHECK(arg_errors[r].find("'peer' = 3") != std::string::npos);
    CHECK(arg_errors[r].find("rank " + std::to_string(r)) != std::string::npos);
    CHECK(self_errors[r].find("1 send(s) to this rank and 0 recv(s) from this rank") != std::string::npos);
    CHECK(thrown[r] == "user");
    CHECK(mismatches(out[r], x[(r + n - 1) % n]) == 0);
  }
}
