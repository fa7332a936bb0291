// tests/mp/test_host_fork.hpp — ranks as forked processes for the host executor's multi-process
// tests: each child bootstraps over tcp on loopback (bootstrap/tcp.hpp) and runs one function;
// children report through their exit status and a shared page (a report per rank: code, the
// steady_clock time of its error, and its message), so the parent can check what each survivor
// said and when. Every child is reaped; any that outlives the limit is killed and reported.
//
// Fork happens before any thread exists (doctest runs test cases on the main thread).
#pragma once

#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/host.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace collcomm_test::mp {

namespace bs = collcomm::bootstrap;
using host_comm = collcomm::communicator<collcomm::transport::host_shm>;
using namespace std::chrono_literals;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct rank_report {
  int code;             // what the child returned (or exited with)
  int err_code;         // collcomm::errc + 1 of the error it recorded, 0 if none
  std::int64_t err_ns;  // steady_clock time of that error
  char msg[1024];       // that error's message, or a failure text
};

// A page shared with the children: one report per rank.
class reports {
 public:
  explicit reports(int n) : n_(n) {
    bytes_ = sizeof(rank_report) * static_cast<std::size_t>(n);
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the report page failed");
    r_ = static_cast<rank_report*>(p);
    std::memset(p, 0, bytes_);
  }
  ~reports() { ::munmap(r_, bytes_); }
  rank_report& operator[](int r) { return r_[r]; }

 private:
  int n_;
  std::size_t bytes_;
  rank_report* r_;
};

// In a child: record an error (its code, now, its message).
inline void record_error(rank_report& rep, const collcomm::error& e) {
  rep.err_code = static_cast<int>(e.code()) + 1;
  rep.err_ns = now_ns();
  std::snprintf(rep.msg, sizeof rep.msg, "%s", e.what());
}

// In a child: print a failure (to stderr, with the rank) and keep it in the report.
inline int child_fail(rank_report& rep, int rank, int code, const char* fmt, ...) {
  char buf[900];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "rank %d: %s\n", rank, buf);
  std::snprintf(rep.msg, sizeof rep.msg, "%s", buf);
  return code;
}

struct job {
  std::vector<int> codes;  // per rank: exit code, -SIG if killed by a signal, -1000 if it outlived the limit
  std::vector<pid_t> pids;
};

// Forks n ranks. Child r makes a tcp bootstrap (timeout boot_timeout) and returns f(boot, report)
// as its exit code (an escaping collcomm::error is code 2, another exception 3, both printed).
// parent_side(pids) runs in the parent once all are forked (e.g. to kill one). Waits up to limit.
inline job run_job(int n, const std::function<int(bs::tcp&, rank_report&)>& f, reports& rep,
                   std::chrono::milliseconds limit = 60s, std::chrono::milliseconds boot_timeout = 10s,
                   const std::function<void(const std::vector<pid_t>&)>& parent_side = {}) {
  auto id = bs::unique_id::create();
  std::fflush(stdout);
  std::fflush(stderr);
  job j;
  j.pids.assign(static_cast<std::size_t>(n), -1);
  j.codes.assign(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const pid_t p = ::fork();
    if (p < 0) throw std::runtime_error("fork failed");
    if (p == 0) {
      int code = 1;
      try {
        bs::tcp boot(id, r, n, boot_timeout);
        code = f(boot, rep[r]);
      } catch (const collcomm::error& e) {
        record_error(rep[r], e);
        std::fprintf(stderr, "rank %d: unexpected collcomm::error: %s\n", r, e.what());
        code = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: unexpected exception: %s\n", r, e.what());
        code = 3;
      }
      rep[r].code = code;
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    j.pids[static_cast<std::size_t>(r)] = p;
  }
  bs::release_listener(id);
  if (parent_side) parent_side(j.pids);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<bool> done(static_cast<std::size_t>(n), false);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (done[static_cast<std::size_t>(r)]) continue;
      int st = 0;
      const pid_t w = ::waitpid(j.pids[static_cast<std::size_t>(r)], &st, WNOHANG);
      if (w != j.pids[static_cast<std::size_t>(r)]) continue;
      done[static_cast<std::size_t>(r)] = true;
      --left;
      j.codes[static_cast<std::size_t>(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (done[static_cast<std::size_t>(r)]) continue;
        ::kill(j.pids[static_cast<std::size_t>(r)], SIGKILL);
        int st = 0;
        ::waitpid(j.pids[static_cast<std::size_t>(r)], &st, 0);
        std::fprintf(stderr, "rank %d: killed after %lld ms (hung)\n", r, static_cast<long long>(limit.count()));
        j.codes[static_cast<std::size_t>(r)] = -1000;
      }
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  return j;
}

// Whether `name` (a file name in /dev/shm) is one of collcomm's segments, exactly
// (detail/shm_segment.hpp: "collcomm-<pid>-<start>-<pid namespace>-<16 hex>-<kind>").
inline bool is_segment_name(const std::string& name) {
  static const std::regex pattern("collcomm-[0-9]+-[0-9]+-[0-9]+-[0-9a-f]{16}-(w|s|g|gc)");
  return std::regex_match(name, pattern);
}

// The segment a line of /proc/<pid>/maps maps ("" if none): its path is /dev/shm/<segment name>,
// with " (deleted)" once the name is unlinked.
inline std::string segment_of_maps_line(const std::string& line) {
  const std::size_t at = line.find(" /dev/shm/");
  if (at == std::string::npos) return {};
  std::string name = line.substr(at + 10);
  static constexpr char deleted[] = " (deleted)";
  if (name.size() > sizeof deleted - 1 &&
      name.compare(name.size() - (sizeof deleted - 1), std::string::npos, deleted) == 0)
    name.resize(name.size() - (sizeof deleted - 1));
  return is_segment_name(name) ? name : std::string();
}

// The names in /dev/shm that collcomm made.
inline std::set<std::string> collcomm_segments() {
  std::set<std::string> s;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (is_segment_name(e->d_name)) s.insert(e->d_name);
    ::closedir(d);
  }
  return s;
}

// Segments in /dev/shm now that were not in `before`, that stayed through a second of looking, and
// that this test's processes made: `makers` (the ranks of its jobs) when given, else any process
// that is gone, and this process. Jobs running beside this one (ctest -j) make segments too, which
// live while those jobs make their worlds — on a loaded machine for more than a second — and a job
// killed on purpose leaves its segment until the next world is made.
inline std::set<std::string> leaked_segments(const std::set<std::string>& before,
                                             const std::vector<pid_t>* makers = nullptr) {
  auto ours = [&](const std::string& name) {
    collcomm::detail::segment_name_parts parts;
    if (!collcomm::detail::parse_segment_name(name, parts)) return true;
    if (parts.pid == std::to_string(::getpid())) return true;
    if (makers != nullptr)
      return std::any_of(makers->begin(), makers->end(), [&](pid_t p) { return parts.pid == std::to_string(p); });
    return collcomm::detail::creator_gone(parts);
  };
  std::set<std::string> left;
  for (const std::string& s : collcomm_segments())
    if (!before.count(s) && ours(s)) left.insert(s);
  for (int attempt = 0; attempt < 10 && !left.empty(); ++attempt) {
    std::this_thread::sleep_for(100ms);
    const std::set<std::string> now = collcomm_segments();
    std::erase_if(left, [&](const std::string& s) { return !now.count(s); });
  }
  return left;
}

inline std::uint64_t fresh_seed(const char* what) {
  std::random_device rd;
  const std::uint64_t s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  std::printf("%s: seed = %llu\n", what, static_cast<unsigned long long>(s));
  return s;
}

// This process's open descriptors (by /proc/self/fd).
inline int count_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n - 1;  // the directory's own descriptor
}

// all_reduce(sum) of `value` over comm, with algorithm A, checked against `want` for every element.
template <class A>
bool sum_is(host_comm& comm, double value, double want, std::size_t count = 1000) {
  std::vector<double> v(count, value), out(count, -1.0);
  collcomm::all_reduce<A>(comm, v.data(), out.data(), count, collcomm::op::sum{});
  for (double x : out)
    if (x != want) return false;
  return true;
}

}  // namespace collcomm_test::mp
