// Abort and faults on the host executor with ranks as forked processes (labels mp, fault):
//   * a rank calls abort() while its peers wait in a collective for it: each peer's pending call
//     throws errc::aborted naming the aborting rank, well within the timeout, and every later call
//     on every rank (the aborting one too) throws errc::aborted at once;
//   * a rank is killed with SIGKILL while every rank loops over collectives (a FIFO algorithm, a
//     direct one; the segment's creator, rank 0, and another rank): every survivor's call throws an
//     error naming the dead rank within 2x the timeout of the kill;
//   * nothing is left in /dev/shm afterwards.
#include "test_host_fork.hpp"

#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <atomic>

using namespace collcomm_test::mp;
namespace cc = collcomm;

namespace {
std::string describe(const rank_report& r) {
  return "code " + std::to_string(r.code) + ", error code " + std::to_string(r.err_code - 1) + ": " + r.msg;
}
}  // namespace

TEST_CASE("fault: abort() ends the peers' pending and later calls with errc::aborted") {
  const auto shm_before = collcomm_segments();
  const int n = 4, aborter = 1;
  const auto timeout = 5s;
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = timeout;
        host_comm comm(boot, opt);
        const int r = comm.rank();
        std::vector<float> v(4096, 1.0f);
        cc::all_reduce(comm, v.data(), v.data(), v.size());  // everybody is in
        if (v[0] != float(n)) return child_fail(me, r, 60, "first all_reduce wrong");
        const auto t0 = std::chrono::steady_clock::now();
        if (r == aborter) {
          std::this_thread::sleep_for(300ms);  // the peers are waiting in the next all_reduce by now
          comm.abort("test");
        } else {
          try {
            cc::all_reduce(comm, v.data(), v.data(), v.size());
            return child_fail(me, r, 61, "all_reduce completed without rank %d", aborter);
          } catch (const cc::error& e) {
            record_error(me, e);
            const auto took = std::chrono::steady_clock::now() - t0;
            if (e.code() != cc::errc::aborted || std::string(e.what()).find("rank 1 aborted") == std::string::npos)
              return child_fail(me, r, 62, "pending call: wrong error: %s", e.what());
            if (took > timeout / 2)
              return child_fail(me, r, 63, "pending call ended after %lld ms",
                                (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
          }
        }
        // Later calls, every rank: aborted at once.
        for (int i = 0; i < 2; ++i) {
          const auto t1 = std::chrono::steady_clock::now();
          try {
            cc::broadcast(comm, v.data(), v.data(), v.size(), 0);
            return child_fail(me, r, 64, "a call after abort completed");
          } catch (const cc::error& e) {
            if (e.code() != cc::errc::aborted) return child_fail(me, r, 65, "later call: wrong error: %s", e.what());
            if (std::chrono::steady_clock::now() - t1 > 100ms)
              return child_fail(me, r, 66, "later call took long to fail");
          }
        }
        return 0;
      },
      rep, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << describe(rep[r]));
  MESSAGE("rank 0 saw: " << rep[0].msg);
  const auto leaked = leaked_segments(shm_before, &j.pids);
  CHECK_MESSAGE(leaked.empty(), "segments left in /dev/shm: " << (leaked.empty() ? "" : *leaked.begin()));
}

namespace {
// Every rank loops over collectives with algorithm A until one throws; the parent kills `victim`
// after `after`. Survivors must fail naming it within 2x timeout of the kill.
template <class A>
void kill_mid_collective(int n, int victim, std::chrono::milliseconds timeout, std::size_t count) {
  const auto shm_before = collcomm_segments();
  reports rep(n);
  std::int64_t kill_ns = 0;
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = timeout;
        opt.window_bytes = std::size_t{16} << 20;
        host_comm comm(boot, opt);
        const int r = comm.rank();
        std::vector<float> in(count, 1.0f), out(count);
        me.code = 100;  // in the loop
        long calls = 0;
        try {
          for (;;) {
            cc::all_reduce<A>(comm, in.data(), out.data(), count);
            if (out[count - 1] != float(n)) return child_fail(me, r, 70, "all_reduce wrong before the kill");
            ++calls;
          }
        } catch (const cc::error& e) {
          record_error(me, e);
          const std::string want = "rank " + std::to_string(victim) + " (pid";
          if (std::string(e.what()).find(want) == std::string::npos)
            return child_fail(me, r, 71, "after %ld calls: the error does not name rank %d: %s", calls, victim,
                              e.what());
        }
        return 0;
      },
      rep, 60s, 10s,
      [&](const std::vector<pid_t>& pids) {
        // Wait until every rank is in the loop (the world is made), then a little more.
        const auto limit = std::chrono::steady_clock::now() + 20s;
        for (int r = 0; r < n; ++r)
          while (rep[r].code != 100 && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(1ms);
        std::this_thread::sleep_for(200ms);
        kill_ns = now_ns();
        ::kill(pids[static_cast<std::size_t>(victim)], SIGKILL);
      });
  CHECK_MESSAGE(j.codes[static_cast<std::size_t>(victim)] == -SIGKILL,
                "the victim, rank " << victim << ", was not killed");
  const std::int64_t bound = 2 * std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << describe(rep[r]));
    const double after_ms = double(rep[r].err_ns - kill_ns) / 1e6;
    CHECK_MESSAGE(rep[r].err_ns - kill_ns <= bound,
                  "rank " << r << " failed " << after_ms << " ms after the kill: " << rep[r].msg);
    if (r == (victim + 1) % n)
      MESSAGE(std::string(A::name) << ", n " << n << ", rank " << r << " failed " << after_ms
                                   << " ms after the kill of rank " << victim << ": " << rep[r].msg);
  }
  const auto leaked = leaked_segments(shm_before, &j.pids);
  CHECK_MESSAGE(leaked.empty(), "segments left in /dev/shm: " << (leaked.empty() ? "" : *leaked.begin()));
}
}  // namespace

TEST_CASE("fault: a rank killed with SIGKILL mid-collective is named by every survivor within 2x the timeout") {
  SUBCASE("ring, 4 ranks, rank 2 killed") { kill_mid_collective<cc::algo::ring>(4, 2, 2000ms, 1 << 18); }
  SUBCASE("one_shot, 3 ranks, rank 0 (the segment's creator) killed") {
    kill_mid_collective<cc::algo::one_shot>(3, 0, 2000ms, 1 << 16);
  }
  SUBCASE("tree, 8 ranks, rank 5 killed") { kill_mid_collective<cc::algo::tree>(8, 5, 2000ms, 1 << 14); }
}

TEST_CASE("fault: a rank killed while communicators are split and destroyed in a loop leaves no segment behind") {
  // Rank 0 leads every dup (it creates each new segment); rank 1 is an ordinary member.
  for (int victim : {1, 0}) {
    const int n = 3;
    const auto shm_before = collcomm_segments();
    reports rep(n);
    std::int64_t kill_ns = 0;
    const auto timeout = 2000ms;
    auto j = run_job(
        n,
        [&](bs::tcp& boot, rank_report& me) {
          cc::host::options opt;
          opt.timeout = timeout;
          host_comm comm(boot, opt);
          const int r = comm.rank();
          me.code = 100;
          long made = 0;
          try {
            for (;;) {
              auto d = comm.split(r == 2 ? 1 : 0, r);  // {0, 1} and {2}: two segments per round
              std::vector<float> v(64, 1.0f);
              cc::all_reduce(*d, v.data(), v.data(), v.size());
              if (v[0] != float(d->size())) return child_fail(me, r, 80, "all_reduce on the split is wrong");
              ++made;
            }
          } catch (const cc::error& e) {
            record_error(me, e);
            const std::string want = "rank " + std::to_string(victim) + " (pid";
            // Rank 2's own split holds only itself: it learns of the death in the parent's barrier.
            if (std::string(e.what()).find(want) == std::string::npos)
              return child_fail(me, r, 81, "after %ld splits: the error does not name rank %d: %s", made, victim,
                                e.what());
          }
          return 0;
        },
        rep, 60s, 10s,
        [&](const std::vector<pid_t>& pids) {
          const auto limit = std::chrono::steady_clock::now() + 20s;
          for (int r = 0; r < n; ++r)
            while (rep[r].code != 100 && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(150ms);
          kill_ns = now_ns();
          ::kill(pids[static_cast<std::size_t>(victim)], SIGKILL);
        });
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(victim)] == -SIGKILL,
                  "the victim, rank " << victim << ", was not killed");
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0,
                    "victim " << victim << ", rank " << r << ": " << describe(rep[r]));
      CHECK_MESSAGE(
          rep[r].err_ns - kill_ns <= 2 * std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count(),
          "rank " << r << " failed " << double(rep[r].err_ns - kill_ns) / 1e6 << " ms after the kill");
    }
    // A creator killed before every rank mapped its segment can leave the name (README: the worst
    // case); the next world of any job removes it, which remove_stale_segments does here.
    cc::host::remove_stale_segments();
    const auto leaked = leaked_segments(shm_before, &j.pids);
    CHECK_MESSAGE(leaked.empty(), "victim " << victim << ": segments left in /dev/shm after the stale ones went: "
                                            << (leaked.empty() ? "" : *leaked.begin()) << "; the survivors said: "
                                            << rep[(victim + 1) % n].msg << " | " << rep[(victim + 2) % n].msg);
    for (const std::string& s : leaked) ::shm_unlink(("/" + s).c_str());  // do not leave it to the next run
  }
}

TEST_CASE("fault: abort() on a world of threads ends the pending calls of the other ranks") {
  cc::host::options opt;
  opt.timeout = 5s;
  cc::host::world w(3, opt);
  std::atomic<int> aborted_seen{0};
  cc::host::run_ranks(w, [&](host_comm& comm) {
    std::vector<int> v(100, 1);
    const auto t0 = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(100ms);
      comm.abort("from a thread");
      return;
    }
    try {
      cc::all_reduce(comm, v.data(), v.data(), v.size());
    } catch (const cc::error& e) {
      if (e.code() == cc::errc::aborted && std::string(e.what()).find("rank 0 aborted") != std::string::npos &&
          std::chrono::steady_clock::now() - t0 < 2s)
        ++aborted_seen;
    }
  });
  CHECK(aborted_seen == 2);
}
