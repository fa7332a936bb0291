// collcomm/detail/wait.hpp — bounded waits on the host, and the doorbell that wakes them: the host
// executor's ranks waiting for each other (host/), and the GPU executor's ranks of one GPU waiting
// for their grouped launch (gpu/launch.hpp).
//
// A host rank is a thread or a process, and tests run 16 ranks on 2 cores (under ThreadSanitizer
// too), so a waiting rank that shares its CPU must give it away quickly: it polls a little (spin_of:
// 200 µs, yielding every microsecond, where every rank has a CPU; 1 ms, yielding after every look,
// where they do not), yields a few times, then sleeps on its doorbell (a futex on Linux, growing
// sleeps elsewhere) until a peer rings it or a short slice runs out. Where ranks outnumber CPUs, a
// yield after every look hands the CPU to a rank that has work at once, and a peer's message is
// seen within a context switch instead of a futex wake-up: with a few pauses before the sleep, 4
// processes on 2 CPUs fell, for whole runs, into a state where ranks slept and woke each other
// every call (8 B all_reduce: 14–25 µs per call in 6 runs of 8, 4–7 µs in the others); polling 1
// ms with a yield after every look, 2.3–3.7 µs in every run (bench/RESULTS.md). Every wait is
// bounded by the world's timeout; the slice bound means that even a lost wake-up costs a slice,
// never a hang.
//
// Memory ordering. The state a rank waits for (a FIFO counter, a barrier counter) is published
// with a release store and read with acquire loads; the doorbell only decides when to look
// again. The doorbell protocol, for a waiter W and a notifier N:
//   W: sleepers.fetch_add(1, seq_cst); fence(seq_cst); key = seq.load(acquire); if ready(): leave;
//      futex_wait(seq, key)
//   N: publish state (release); fence(seq_cst); if sleepers.load(relaxed) != 0: seq.fetch_add(1,
//      release); futex_wake(seq)
// The two seq_cst fences are ordered one way or the other: if N's comes first, W's ready() (after
// W's fence) sees the state N published before its fence; if W's comes first, N's load (after N's
// fence) sees W's increment, and N bumps `seq`, so W's futex_wait either finds seq != key or is
// woken. N only reads `sleepers`: the line stays shared among the ranks that ring it while its
// owner polls, instead of moving to each ringer in turn (a read-modify-write would), and a ring
// costs a fence rather than a cache miss.
#pragma once

#include <collcomm/config.hpp>

#include <cuda/atomic>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

COLLCOMM_NAMESPACE_BEGIN
namespace detail {

// Every host atomic is a system-scope atomic_ref over plain memory: the same memory-model
// statement the GPU executor makes for host-mapped words (and, for processes, shared memory).
template <class U>
using sys_atomic = cuda::atomic_ref<U, cuda::thread_scope_system>;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Asks the CPU to move the cache line at p from its own caches to the shared one (x86 CLDEMOTE, a
// no-op where the CPU lacks it; nothing elsewhere), for a line a peer on another core is about to
// read: the peer's miss is then served by the shared cache, not by a snoop of this core's. After a
// small call's post (host/world.hpp, flat_post): 2 ranks as threads or processes, 8 B-512 B, 5-15 %
// less time per call on a 2-CPU Xeon VM (bench/RESULTS.md).
inline void demote_line(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("cldemote %0" ::"m"(*static_cast<const char*>(p)));
#else
  (void)p;
#endif
}

// What one rank sleeps on. Every rank has one; whoever publishes something a rank may wait for
// (a message into it, a slot it may send into, a barrier arrival) rings it.
struct doorbell {
  alignas(64) std::uint32_t seq = 0;       // futex word; only grows (wraps harmlessly)
  alignas(64) std::uint32_t sleepers = 0;  // ranks' threads between prepare and leave of a sleep
};

inline void ring(doorbell& d) noexcept {
  // The fence orders the state published before against the load of `sleepers` (the protocol in
  // the file comment; thread_scope_system: ranks may be processes).
  cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_system);
  if (sys_atomic<std::uint32_t>(d.sleepers).load(cuda::std::memory_order_relaxed) == 0) return;
  sys_atomic<std::uint32_t>(d.seq).fetch_add(1, cuda::std::memory_order_release);
#if defined(__linux__)
  // Not FUTEX_PRIVATE_FLAG: a doorbell may live in memory shared between processes.
  syscall(SYS_futex, &d.seq, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
}

// Sleeps until d is rung or `slice` passes, unless the word already moved past `key`.
inline void sleep_on(doorbell& d, std::uint32_t key, std::chrono::nanoseconds slice) noexcept {
#if defined(__linux__)
  timespec ts{static_cast<time_t>(slice.count() / 1000000000), static_cast<long>(slice.count() % 1000000000)};
  syscall(SYS_futex, &d.seq, FUTEX_WAIT, key, &ts, nullptr, 0);
#else
  (void)d;
  (void)key;
  std::this_thread::sleep_for(slice);
#endif
}

// Tuning: chosen so that 16 ranks on 2 cores (the CI machine) do not starve the rank that holds
// the work; a handful of polls still catches a peer that is about to publish.
inline constexpr int spin_polls = 64;
inline constexpr int yield_polls = 8;
inline constexpr std::chrono::nanoseconds spin_yield_every = std::chrono::microseconds(1);
#if defined(__linux__)
inline constexpr std::chrono::nanoseconds first_slice = std::chrono::milliseconds(1);
inline constexpr std::chrono::nanoseconds max_slice = std::chrono::milliseconds(20);
#else
inline constexpr std::chrono::nanoseconds first_slice = std::chrono::microseconds(2);
inline constexpr std::chrono::nanoseconds max_slice = std::chrono::milliseconds(1);
#endif

// The polling phase of a wait: how long, and how often it gives the CPU away.
struct spin_policy {
  std::chrono::nanoseconds poll{0};                         // 0: spin_polls pauses, no clock
  std::chrono::nanoseconds yield_every = spin_yield_every;  // 0: a yield after every look
};

// The CPUs this thread may run on, in order (empty where that cannot be known).
inline std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
#endif
  return cpus;
}

// The polling phase of a wait (host::options::spin, gpu::options::rendezvous_spin) for `ranks`
// ranks on `cpus` CPUs (0: those this process may run on). Its length: the environment variable
// `env` (microseconds) where it is set, else `option` where it is not negative, else 200 µs where
// the ranks have a CPU each and 1 ms where not. Its yields: every spin_yield_every where the ranks
// have a CPU each, after every look where not.
inline spin_policy spin_of(std::chrono::microseconds option, int ranks, const char* env = "COLLCOMM_HOST_SPIN_US",
                           int cpus = 0) {
  if (cpus <= 0) {
    const std::vector<int> mine = allowed_cpus();
    cpus = mine.empty() ? static_cast<int>(std::thread::hardware_concurrency()) : static_cast<int>(mine.size());
  }
  const bool crowded = ranks > cpus;
  spin_policy p;
  p.yield_every = crowded ? std::chrono::nanoseconds(0) : spin_yield_every;
  if (const char* e = env ? std::getenv(env) : nullptr; e != nullptr && *e != '\0')
    p.poll = std::chrono::microseconds(std::max(0L, std::strtol(e, nullptr, 10)));
  else if (option.count() >= 0)
    p.poll = option;
  else
    p.poll = std::chrono::microseconds(crowded ? 1000 : 200);
  return p;
}

// Waits until ready() (a callable doing acquire loads) is true: polls (for spin.poll, yielding
// every spin.yield_every, or spin_polls pauses where spin.poll is 0), yields a few times, then
// sleeps on d. If it is still false after `timeout`, calls on_timeout(), which must throw. ready() is always asked once more after the
// deadline passes, so a wait never fails on a condition that already holds. watch() is called
// after every sleep (every slice: at most max_slice apart) while the wait goes on; it may throw
// to end the wait early (an abort, a peer that died: world.hpp).
template <class Ready, class OnTimeout, class Watch>
void wait_until(doorbell& d, std::chrono::milliseconds timeout, spin_policy spin, Ready&& ready, OnTimeout&& on_timeout,
                Watch&& watch) {
  if (ready()) return;
  if (spin.poll.count() > 0) {
    // Yields every spin.yield_every while polling: a peer that the scheduler put on this CPU runs
    // at once instead of after the whole spin; where no other thread is runnable here, a yield
    // returns in well under a microsecond.
    auto now = std::chrono::steady_clock::now();
    const auto until = now + spin.poll;
    auto next_yield = now + spin.yield_every;
    do {
      if (spin.yield_every.count() > 0)
        for (int i = 0; i < 16; ++i) cpu_relax();
      if (ready()) return;
      now = std::chrono::steady_clock::now();
      if (now >= next_yield) {
        std::this_thread::yield();
        if (ready()) return;
        next_yield = now + spin.yield_every;
      }
    } while (now < until);
  } else {
    for (int i = 0; i < spin_polls; ++i) {
      cpu_relax();
      if (ready()) return;
    }
  }
  for (int i = 0; i < yield_polls; ++i) {
    std::this_thread::yield();
    if (ready()) return;
  }
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  std::chrono::nanoseconds slice = first_slice;
  sys_atomic<std::uint32_t> sleepers(d.sleepers);
  for (;;) {
    sleepers.fetch_add(1, cuda::std::memory_order_seq_cst);
    cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_system);
    const std::uint32_t key = sys_atomic<std::uint32_t>(d.seq).load(cuda::std::memory_order_acquire);
    if (ready()) {
      sleepers.fetch_sub(1, cuda::std::memory_order_relaxed);
      return;
    }
    const auto now = clock::now();
    if (now >= deadline) {
      sleepers.fetch_sub(1, cuda::std::memory_order_relaxed);
      on_timeout();
      return;  // on_timeout throws; reached only if it does not
    }
    sleep_on(d, key, std::min<std::chrono::nanoseconds>(slice, deadline - now));
    sleepers.fetch_sub(1, cuda::std::memory_order_relaxed);
    if (ready()) return;
    watch();
    slice = std::min(slice * 2, max_slice);
  }
}

template <class Ready, class OnTimeout>
void wait_until(doorbell& d, std::chrono::milliseconds timeout, spin_policy spin, Ready&& ready,
                OnTimeout&& on_timeout) {
  wait_until(d, timeout, spin, ready, on_timeout, [] {});
}

}  // namespace detail
COLLCOMM_NAMESPACE_END
