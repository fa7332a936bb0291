// collcomm/host/run_ranks.hpp — run one function on every rank of a host world, one thread each.
#pragma once

#include <collcomm/communicator.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/world.hpp>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <atomic>
#include <exception>
#include <string>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

namespace run_ranks_detail {
// Binds the calling thread to `cpu`; a refusal leaves it unbound (binding only helps speed).
inline void bind_this_thread(int cpu) noexcept {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#else
  (void)cpu;
#endif
}
// Where the next run_ranks of this process starts binding (an index into allowed_cpus()).
inline std::atomic<std::size_t>& next_cpu() noexcept {
  static std::atomic<std::size_t> n{0};
  return n;
}
}  // namespace run_ranks_detail

// Starts one thread per rank of w, calls f(communicator<transport::host_shm>&) on each, joins them
// all, then rethrows the exception thrown first in time (if any). Where every rank has a CPU of
// its own, each rank's thread is bound to a CPU of its own (options::bind_threads). When
// one rank throws, the others find out through their bounded waits (errc::timeout after
// options.timeout), so run_ranks returns within about one timeout; it never hangs. A world serves
// one run_ranks at a time. Example: world.hpp.
template <class F>
void run_ranks(world& w, F&& f) {
  std::vector<int> cpus;
  if (w.opts().bind_threads) cpus = collcomm::detail::allowed_cpus();
  if (static_cast<int>(cpus.size()) < w.size()) cpus.clear();  // crowded: no binding
  // Worlds run at once in one process take the CPUs in turn: each call starts where the last ended.
  const std::size_t first_cpu = cpus.empty() ? 0 : run_ranks_detail::next_cpu().fetch_add(w.size()) % cpus.size();
  std::mutex m;
  std::exception_ptr first;
  auto record = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(m);
    if (!first) first = std::move(e);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(w.size()));
  try {
    for (int r = 0; r < w.size(); ++r) {
      threads.emplace_back([&w, &f, &record, &cpus, first_cpu, r] {
        if (!cpus.empty())
          run_ranks_detail::bind_this_thread(cpus[(first_cpu + static_cast<std::size_t>(r)) % cpus.size()]);
        try {
          communicator<transport::host_shm> comm(w, r);
          f(comm);
        } catch (...) {
          record(std::current_exception());
        }
      });
    }
  } catch (const std::system_error& e) {
    // Could not start every rank: the ones started time out waiting for the rest.
    const std::string msg = std::string("cannot start a thread per rank: ") + e.what();
    record(std::make_exception_ptr(
        error(errc::system, no_rank, collcomm::detail::format_error("host::run_ranks", no_rank, msg))));
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace host
COLLCOMM_NAMESPACE_END
