// The host's bounded waits (collcomm/detail/wait.hpp): the polling policy spin_of picks, a wait
// that ends when its condition holds, one that times out, and a chain of more ranks than CPUs
// passing a token round by round (the crowded policy's yields must not starve the holder).
#include <collcomm/detail/wait.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace cd = collcomm::detail;

namespace {
struct timed_out : std::runtime_error {
  timed_out() : std::runtime_error("timed out") {}
};
std::mt19937_64 rng() { return std::mt19937_64(std::random_device{}()); }
}  // namespace

TEST_CASE("spin_of: yields after every look where ranks outnumber CPUs, every microsecond where not") {
  ::unsetenv("COLLCOMM_TEST_SPIN_US");
  const int many = 1 << 20;  // more ranks than any machine's CPUs
  const cd::spin_policy crowded = cd::spin_of(std::chrono::microseconds(-1), many, "COLLCOMM_TEST_SPIN_US");
  CHECK(crowded.yield_every.count() == 0);
  CHECK(crowded.poll == std::chrono::microseconds(1000));
  const cd::spin_policy roomy = cd::spin_of(std::chrono::microseconds(-1), 1, "COLLCOMM_TEST_SPIN_US");
  CHECK(roomy.yield_every == cd::spin_yield_every);
  CHECK(roomy.poll == std::chrono::microseconds(200));
  // An explicit option sets the length only; the yields follow the crowding.
  auto r = rng();
  const auto us = std::chrono::microseconds(static_cast<long>(r() % 1000));
  CHECK(cd::spin_of(us, many, "COLLCOMM_TEST_SPIN_US").poll == us);
  CHECK(cd::spin_of(us, many, "COLLCOMM_TEST_SPIN_US").yield_every.count() == 0);
  CHECK(cd::spin_of(us, 1, "COLLCOMM_TEST_SPIN_US").poll == us);
  // The CPUs given decide the crowding, not this process's mask.
  CHECK(cd::spin_of(std::chrono::microseconds(-1), 4, "COLLCOMM_TEST_SPIN_US", 4).yield_every == cd::spin_yield_every);
  CHECK(cd::spin_of(std::chrono::microseconds(-1), 4, "COLLCOMM_TEST_SPIN_US", 4).poll == std::chrono::microseconds(200));
  CHECK(cd::spin_of(std::chrono::microseconds(-1), 5, "COLLCOMM_TEST_SPIN_US", 4).yield_every.count() == 0);
  // The environment overrides both.
  const long env_us = static_cast<long>(r() % 1000);
  ::setenv("COLLCOMM_TEST_SPIN_US", std::to_string(env_us).c_str(), 1);
  CHECK(cd::spin_of(us, 1, "COLLCOMM_TEST_SPIN_US").poll == std::chrono::microseconds(env_us));
  CHECK(cd::spin_of(std::chrono::microseconds(-1), many, "COLLCOMM_TEST_SPIN_US").poll ==
        std::chrono::microseconds(env_us));
  ::unsetenv("COLLCOMM_TEST_SPIN_US");
}

TEST_CASE("wait_until: returns once the condition holds, under either policy, and times out when it never does") {
  auto r = rng();
  for (const cd::spin_policy p : {cd::spin_of(std::chrono::microseconds(-1), 1, nullptr),
                                  cd::spin_of(std::chrono::microseconds(-1), 1 << 20, nullptr),
                                  cd::spin_policy{}}) {
    for (int round = 0; round < 4; ++round) {
      cd::doorbell bell;
      std::atomic<int> flag{0};
      const auto delay = std::chrono::microseconds(static_cast<long>(r() % 3000));
      std::thread setter([&] {
        std::this_thread::sleep_for(delay);
        flag.store(1, std::memory_order_release);
        cd::ring(bell);
      });
      bool late = false;
      cd::wait_until(bell, 10000ms, p, [&] { return flag.load(std::memory_order_acquire) == 1; },
                     [&] { late = true; throw timed_out(); });
      CHECK_FALSE(late);
      CHECK(flag.load() == 1);
      setter.join();
    }
    cd::doorbell bell;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(cd::wait_until(bell, 30ms, p, [] { return false; }, [] { throw timed_out(); }), timed_out);
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= 30ms);
    CHECK(waited < 5s);
  }
}

TEST_CASE("wait_until: a token passed round a ring of more threads than CPUs, crowded policy") {
  const int n = 3 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 1;
  const int rounds = 200;
  const cd::spin_policy p = cd::spin_of(std::chrono::microseconds(-1), n, nullptr);
  std::vector<cd::doorbell> bells(static_cast<std::size_t>(n));
  std::atomic<std::uint64_t> token{0};  // the count of passes so far; thread t moves it when it is t's turn
  std::atomic<int> timeouts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < rounds; ++k) {
        const std::uint64_t mine = static_cast<std::uint64_t>(k) * n + t;
        try {
          cd::wait_until(bells[static_cast<std::size_t>(t)], 20000ms, p,
                         [&] { return token.load(std::memory_order_acquire) == mine; },
                         [&] { throw timed_out(); });
        } catch (const timed_out&) {
          timeouts.fetch_add(1);
          return;
        }
        token.store(mine + 1, std::memory_order_release);
        cd::ring(bells[static_cast<std::size_t>((t + 1) % n)]);
      }
    });
  for (auto& th : threads) th.join();
  CHECK(timeouts.load() == 0);
  CHECK(token.load() == static_cast<std::uint64_t>(rounds) * n);
}
