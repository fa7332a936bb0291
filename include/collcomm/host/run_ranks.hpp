// collcomm/host/run_ranks.hpp — run one function on every rank of a host world, one thread each.
#pragma once

#include <collcomm/communicator.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/world.hpp>

#include <exception>
#include <string>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

// Starts one thread per rank of w, calls f(communicator<transport::host_shm>&) on each, joins them
// all, then rethrows the exception thrown first in time (if any). When one rank throws, the
// others find out through their bounded waits (errc::timeout after options.timeout), so
// run_ranks returns within about one timeout; it never hangs. A world serves one run_ranks at a
// time. Example: world.hpp.
template <class F>
void run_ranks(world& w, F&& f) {
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
      threads.emplace_back([&w, &f, &record, r] {
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
