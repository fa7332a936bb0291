// tests/net/netns.hpp — a test harness for the network transport: several "hosts" made of Linux
// network namespaces joined by a bridge, ranks as forked processes inside them, and links that
// can be cut while the ranks run.
//
//   netns_hosts hosts(2);                               // 2 hosts and a switch (needs root)
//   auto res = hosts.run_ranks({2, 2}, [](rank_context& ctx) {
//     auto boot = ctx.bootstrap();                      // collcomm's tcp bootstrap, root on host 0
//     ...                                               // throw on failure (require() helps)
//   }, 60s, [&](running& run) { run.wait_note(1, 5s); hosts.link_down(1); run.send(1, "go"); });
//   CHECK_MESSAGE(res.ok(), res.summary());
//
// Topology: a "switch" namespace holds a Linux bridge br0 and one veth end per host, p<h>, enslaved
// to it; host h's namespace holds the other end, eth0, with address 10.<a>.<b>.(h+1)/24 (a, b
// random per netns_hosts), and loopback up. Nothing is made in the caller's own namespace, so
// deleting the namespaces deletes every link. Namespace names are
// "cc-<pid>-<process start time>-<8 random hex>-<h index | sw>"; a netns_hosts deletes what it
// made in its destructor (and when its constructor fails), and every constructor first deletes the
// leftovers of earlier runs whose process is gone (cleanup_stale()).
//
// Commands (`ip`, `tc`) run by fork/exec with a bounded wait; a failure throws netns_error with
// the command line, its exit status and its stderr.
//
// Ranks: run_ranks forks one process per rank; each joins its host's namespace with setns(2) (no
// exec) and calls fn(rank_context&). A child talks to the parent over a socketpair: notes
// (rank_context::notify, read by running::wait_note in on_started), messages from the parent
// (running::send, read by rank_context::wait_message), and its result (fn returned, or the text
// of the exception it threw). The parent reaps every child; past the timeout it kills the
// children's process group with SIGKILL and names the ranks that had not finished. Children die
// with the parent (PR_SET_PDEATHSIG). Fork happens on the calling thread; call it before any
// other thread exists, as doctest's test cases do.
//
// Skipping: netns_hosts::unavailable() says why namespaces cannot be made here (or nullopt); a
// test file puts COLLCOMM_NET_SKIP_WITHOUT_NETNS(); at namespace scope, which prints
// "skipped: network namespaces unavailable: <why>" and exits 77 before main (ctest:
// SKIP_RETURN_CODE 77). COLLCOMM_TEST_NO_NETNS=1 makes unavailable() say so.
#pragma once

#include <collcomm/bootstrap/tcp.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace collcomm_test::net {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A failure of the harness itself: a command that failed, a namespace that could not be entered.
struct netns_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws netns_error(what) unless `cond`; for checks inside a rank's fn.
inline void require(bool cond, const std::string& what) {
  if (!cond) throw netns_error(what);
}

namespace detail {

inline int ms_left(steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

inline std::string errno_text(const std::string& what, int e = errno) { return what + ": " + std::strerror(e); }

inline std::uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// A process's start time (field 22 of /proc/<pid>/stat, clock ticks since boot); 0 if there is
// no such process, and 0 for a zombie (a dead process not reaped yet) when `zombie_is_dead`.
inline unsigned long long start_time(pid_t pid, bool zombie_is_dead = false) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return 0;
  std::istringstream in(s.substr(close + 2));  // field 3 (the state) onwards
  std::string field;
  for (int i = 3; i < 22 && (in >> field); ++i)
    if (i == 3 && zombie_is_dead && (field == "Z" || field == "X")) return 0;
  unsigned long long t = 0;
  in >> t;
  return t;
}

// Sets O_NONBLOCK on fd.
inline void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL, 0);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Writes all of `bytes` to a socket (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
inline bool send_all(int fd, const void* bytes, std::size_t n) {
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, 100);
      continue;
    }
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// Frames between parent and child: kind (1 byte), length (4 bytes, host order), payload.
enum frame_kind : char { note = 'N', message = 'M', result_ok = 'R', result_error = 'E' };
inline constexpr std::size_t max_frame = 1 << 20;

inline bool send_frame(int fd, char kind, std::string_view payload) {
  if (payload.size() > max_frame) payload = payload.substr(0, max_frame);
  char head[5];
  head[0] = kind;
  const std::uint32_t n = static_cast<std::uint32_t>(payload.size());
  std::memcpy(head + 1, &n, 4);
  std::string f(head, 5);
  f.append(payload);
  return send_all(fd, f.data(), f.size());
}

// Takes one complete frame off the front of `buf`, if there is one.
inline std::optional<std::pair<char, std::string>> pop_frame(std::string& buf) {
  if (buf.size() < 5) return std::nullopt;
  std::uint32_t n = 0;
  std::memcpy(&n, buf.data() + 1, 4);
  if (buf.size() < 5 + std::size_t(n)) return std::nullopt;
  std::pair<char, std::string> f{buf[0], buf.substr(5, n)};
  buf.erase(0, 5 + std::size_t(n));
  return f;
}

// Reads what is there on a nonblocking fd into buf. Returns false at end of file or on an error.
inline bool read_some(int fd, std::string& buf) {
  char tmp[4096];
  while (true) {
    const ssize_t k = ::read(fd, tmp, sizeof tmp);
    if (k > 0) {
      buf.append(tmp, static_cast<std::size_t>(k));
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

// The path of an executable (`ip`, `tc`): the usual sbin and bin folders, then PATH; "" if none.
inline std::string find_program(const std::string& name) {
  std::vector<std::string> dirs = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    std::size_t at = 0;
    while (at <= p.size()) {
      const auto colon = p.find(':', at);
      dirs.push_back(p.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
  }
  for (const auto& d : dirs) {
    if (d.empty()) continue;
    const std::string f = d + "/" + name;
    if (::access(f.c_str(), X_OK) == 0) return f;
  }
  return {};
}

}  // namespace detail

// What a command did.
struct command_result {
  int exit_code = -1;  // its exit status, -1 if it did not exit normally
  int signal = 0;      // the signal that ended it, 0 if none
  bool timed_out = false;
  std::string out, err;
  bool ok() const { return exit_code == 0 && !timed_out; }
  // "exit 2: RTNETLINK answers: File exists" and the like.
  std::string describe() const {
    std::string s = timed_out ? "timed out" : signal ? "killed by signal " + std::to_string(signal)
                                                     : "exit " + std::to_string(exit_code);
    std::string e = err;
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
    return e.empty() ? s : s + ": " + e;
  }
};

// Runs argv (argv[0] a path, or a name found by detail::find_program) with stdin from /dev/null,
// capturing stdout and stderr; kills it (SIGKILL) past `limit`. Never throws for the command's
// own failure (see command_result); throws netns_error when it cannot be started.
inline command_result run_command(std::vector<std::string> argv, std::chrono::milliseconds limit = 10s) {
  command_result res;
  if (argv.empty()) throw netns_error("run_command: empty command");
  if (argv[0].find('/') == std::string::npos) {
    const std::string path = detail::find_program(argv[0]);
    if (path.empty()) throw netns_error("run_command: no program '" + argv[0] + "' found");
    argv[0] = path;
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw netns_error(detail::errno_text("pipe2"));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw netns_error(detail::errno_text("pipe2"));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw netns_error(detail::errno_text("fork", e));
  }
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(cargv[0], cargv.data());
    const char* msg = "exec failed\n";
    [[maybe_unused]] auto k = ::write(2, msg, std::strlen(msg));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  detail::set_nonblocking(out[0]);
  detail::set_nonblocking(err[0]);
  const auto deadline = steady::now() + limit;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd pf[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    const int rc = ::poll(pf, 2, detail::ms_left(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0 || steady::now() >= deadline) {
      res.timed_out = true;
      break;
    }
    if (out_open && pf[0].revents) out_open = detail::read_some(out[0], res.out);
    if (err_open && pf[1].revents) err_open = detail::read_some(err[0], res.err);
  }
  if (res.timed_out) ::kill(pid, SIGKILL);
  ::close(out[0]);
  ::close(err[0]);
  // Reaping, bounded: a command stuck in the kernel past SIGKILL is left behind (and said).
  const auto reap_deadline = std::max(deadline, steady::now()) + 5s;
  int st = 0;
  pid_t w = 0;
  while ((w = ::waitpid(pid, &st, WNOHANG)) == 0 && steady::now() < reap_deadline) {
    if (res.timed_out) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(2ms);
  }
  if (w == pid) {
    if (WIFEXITED(st)) res.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) res.signal = WTERMSIG(st);
  } else {
    res.timed_out = true;
    std::fprintf(stderr, "run_command: %s (pid %d) did not end; left behind\n", argv[0].c_str(), int(pid));
  }
  return res;
}

// "ip -n x link set eth0 down" from an argv.
inline std::string command_text(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs argv and throws netns_error naming it, with its stderr, unless it succeeded.
inline command_result run_checked(const std::vector<std::string>& argv, std::chrono::milliseconds limit = 10s) {
  auto r = run_command(argv, limit);
  if (!r.ok()) throw netns_error("`" + command_text(argv) + "` failed (" + r.describe() + ")");
  return r;
}

// Which end of host h's veth pair link_down/link_up act on.
enum class link_end { host, switch_port, both };

// How ranks are placed on hosts: contiguous (host 0 gets ranks 0..n0-1, ...) or round_robin (rank
// r goes to the next host, in turn, that still has room). Rank 0 is on host 0 in both.
enum class placement { contiguous, round_robin };

// Ranks per host, and their placement. Implicit from {2, 2}.
struct rank_layout {
  std::vector<int> per_host;
  placement order = placement::contiguous;
  rank_layout(std::initializer_list<int> l) : per_host(l) {}
  rank_layout(std::vector<int> l, placement o = placement::contiguous) : per_host(std::move(l)), order(o) {}
  int nranks() const {
    int n = 0;
    for (int k : per_host) n += k;
    return n;
  }
  // host_of()[r] for every rank; local ranks count up in rank order on each host.
  std::vector<int> host_of() const {
    std::vector<int> h;
    std::vector<int> left = per_host;
    const int n = nranks(), nh = static_cast<int>(per_host.size());
    int next = 0;
    for (int r = 0; r < n; ++r) {
      if (order == placement::contiguous) {
        while (left[std::size_t(next)] == 0) ++next;
      } else {
        for (int tries = 0; tries < nh && left[std::size_t(next)] == 0; ++tries) next = (next + 1) % nh;
      }
      h.push_back(next);
      --left[std::size_t(next)];
      if (order == placement::round_robin) next = (next + 1) % nh;
    }
    return h;
  }
};

// What a rank's fn is given.
class rank_context {
 public:
  int rank = 0;
  int nranks = 0;
  int host = 0;        // host index
  int local_rank = 0;  // among the ranks of this host, in rank order
  int local_size = 0;  // ranks on this host
  std::string ns;            // this host's namespace name
  std::string address;       // this host's address
  std::string root_address;  // rank 0's host's address (host 0's unless it has no ranks): where rank 0 listens
  std::uint16_t port = 0;    // rank 0's bootstrap port (ports port+1 .. port+99 are free for tests too)
  std::uint64_t token = 0;   // this run's job token
  std::string output;        // given back to the parent in rank_result::output when fn returns

  // The bootstrap id of this run: root_address:port with this run's token.
  collcomm::bootstrap::unique_id id() const { return {root_address, port, token}; }
  // collcomm's tcp bootstrap for this rank (rank 0 listens on root_address:port).
  collcomm::bootstrap::tcp bootstrap(std::chrono::milliseconds timeout = 20s) const {
    return collcomm::bootstrap::tcp(id(), rank, nranks, timeout);
  }
  // Sends a note to the parent (running::wait_note).
  void notify(std::string_view text) const {
    if (!detail::send_frame(fd_, detail::note, text)) throw netns_error("rank " + std::to_string(rank) + ": notify: parent gone");
  }
  // The next message the parent sent (running::send), or nullopt past `timeout`.
  std::optional<std::string> wait_message(std::chrono::milliseconds timeout) {
    const auto deadline = steady::now() + timeout;
    while (true) {
      if (auto f = detail::pop_frame(in_)) return f->second;
      pollfd pf{fd_, POLLIN, 0};
      const int rc = ::poll(&pf, 1, detail::ms_left(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) return std::nullopt;
      if (!detail::read_some(fd_, in_)) {
        if (auto f = detail::pop_frame(in_)) return f->second;
        return std::nullopt;
      }
    }
  }
  // wait_message, and throws unless it is `want`.
  void expect_message(std::string_view want, std::chrono::milliseconds timeout) {
    auto m = wait_message(timeout);
    if (!m) throw netns_error("rank " + std::to_string(rank) + ": no message '" + std::string(want) + "' from the parent within " + std::to_string(timeout.count()) + " ms");
    if (*m != want) throw netns_error("rank " + std::to_string(rank) + ": got message '" + *m + "', want '" + std::string(want) + "'");
  }

 private:
  friend class netns_hosts;
  int fd_ = -1;
  std::string in_;
};

// How a rank ended.
enum class rank_status {
  ok,         // fn returned and the process exited 0
  error,      // fn threw; rank_result::error has the text
  exited,     // the process exited without a result (e.g. _exit in fn); rank_result::exit_code
  signaled,   // a signal ended it (kill_rank, raise, a crash); rank_result::signal
  timed_out,  // still running at the timeout; killed by the harness
};

inline const char* to_string(rank_status s) {
  switch (s) {
    case rank_status::ok: return "ok";
    case rank_status::error: return "error";
    case rank_status::exited: return "exited";
    case rank_status::signaled: return "signaled";
    case rank_status::timed_out: return "timed out";
  }
  return "?";
}

struct rank_result {
  int rank = 0, host = 0, local_rank = 0;
  pid_t pid = -1;
  rank_status status = rank_status::timed_out;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it (SIGKILL also for timed_out)
  std::string error;   // fn's exception text (status error)
  std::string output;  // rank_context::output (status ok)
  std::vector<std::string> notes;  // notes the parent did not take with wait_note
  // "rank 1 (host 0): error: ..." and the like.
  std::string describe() const {
    std::string s = "rank " + std::to_string(rank) + " (host " + std::to_string(host) + ", pid " + std::to_string(pid) +
                    "): " + to_string(status);
    if (status == rank_status::error) s += ": " + error;
    if (status == rank_status::exited) s += " with code " + std::to_string(exit_code);
    if (status == rank_status::signaled) s += " by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return s;
  }
};

struct run_result {
  std::vector<rank_result> ranks;
  std::vector<int> unfinished;  // ranks still running at the timeout (killed)
  std::chrono::milliseconds elapsed{0};
  bool ok() const {
    return std::all_of(ranks.begin(), ranks.end(), [](const rank_result& r) { return r.status == rank_status::ok; });
  }
  // One line per rank that is not ok ("" when all are).
  std::string summary() const {
    std::string s;
    for (const auto& r : ranks)
      if (r.status != rank_status::ok) s += r.describe() + "\n";
    if (!unfinished.empty()) s += "unfinished at the timeout: " + collcomm::bootstrap::detail::ranks_text(unfinished) + "\n";
    return s;
  }
};

// The parent's handle on running ranks, given to on_started.
class running {
 public:
  int nranks() const { return static_cast<int>(ch_.size()); }
  pid_t pid(int r) const { return ch_.at(std::size_t(r)).pid; }
  // Sends `sig` (SIGKILL by default) to rank r's process.
  void kill_rank(int r, int sig = SIGKILL) {
    auto& c = ch_.at(std::size_t(r));
    if (!c.reaped) ::kill(c.pid, sig);
  }
  // Sends a message to rank r (rank_context::wait_message); false if the rank is gone.
  bool send(int r, std::string_view text) {
    auto& c = ch_.at(std::size_t(r));
    return c.fd >= 0 && detail::send_frame(c.fd, detail::message, text);
  }
  // Sends a message to every rank.
  void send_all(std::string_view text) {
    for (int r = 0; r < nranks(); ++r) send(r, text);
  }
  // The next note of rank r (rank_context::notify), or nullopt past `timeout`, the run's
  // deadline, or when the rank hung up.
  std::optional<std::string> wait_note(int r, std::chrono::milliseconds timeout) {
    auto& c = ch_.at(std::size_t(r));
    const auto deadline = std::min(steady::now() + timeout, deadline_);
    while (true) {
      take_frames(c);
      if (!c.notes.empty()) {
        std::string n = std::move(c.notes.front());
        c.notes.pop_front();
        return n;
      }
      if (c.fd < 0 || steady::now() >= deadline) return std::nullopt;
      pollfd pf{c.fd, POLLIN, 0};
      const int rc = ::poll(&pf, 1, detail::ms_left(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0) return std::nullopt;
      read_child(c);
    }
  }
  // wait_note, and throws netns_error unless it is `want`.
  void expect_note(int r, std::string_view want, std::chrono::milliseconds timeout) {
    auto n = wait_note(r, timeout);
    if (!n) throw netns_error("no note '" + std::string(want) + "' from rank " + std::to_string(r) + " within " + std::to_string(timeout.count()) + " ms");
    if (*n != want) throw netns_error("rank " + std::to_string(r) + " noted '" + *n + "', want '" + std::string(want) + "'");
  }

 private:
  friend class netns_hosts;
  struct child {
    pid_t pid = -1;
    int fd = -1;  // the parent's end of the socketpair, -1 once closed
    bool reaped = false;
    int wait_status = 0;
    std::string buf;
    std::deque<std::string> notes;
    std::optional<std::pair<char, std::string>> result;
  };
  std::vector<child> ch_;
  steady::time_point deadline_;

  void take_frames(child& c) {
    while (auto f = detail::pop_frame(c.buf)) {
      if (f->first == detail::note)
        c.notes.push_back(std::move(f->second));
      else
        c.result = std::move(*f);
    }
  }
  void read_child(child& c) {
    if (c.fd < 0) return;
    if (!detail::read_some(c.fd, c.buf)) {
      ::close(c.fd);
      c.fd = -1;
    }
    take_frames(c);
  }
};

// H hosts (network namespaces) behind one switch. Not copyable or movable.
class netns_hosts {
 public:
  static constexpr const char* prefix = "cc-";
  static constexpr const char* netns_dir = "/var/run/netns";

  // Makes `hosts` hosts; mtu[h], if given and nonzero, is host h's link MTU (both veth ends).
  explicit netns_hosts(int hosts, std::vector<int> mtu = {}) : mtu_(std::move(mtu)) {
    if (hosts < 1 || hosts > 250) throw netns_error("netns_hosts: hosts = " + std::to_string(hosts) + " is out of range [1, 250]");
    cleanup_stale();
    const std::uint64_t rnd = detail::random_u64();
    char tag[64];
    std::snprintf(tag, sizeof tag, "%s%d-%llu-%08x-", prefix, int(::getpid()), detail::start_time(::getpid()),
                  unsigned(rnd & 0xffffffffu));
    base_ = tag;
    net_a_ = 1 + int((rnd >> 32) % 254);
    net_b_ = int((rnd >> 40) % 256);
    try {
      sw_ = base_ + "sw";
      add_ns(sw_);
      ip(sw_, {"link", "set", "lo", "up"});
      ip(sw_, {"link", "add", "br0", "type", "bridge"});
      ip(sw_, {"link", "set", "br0", "up"});
      for (int h = 0; h < hosts; ++h) {
        const std::string ns = base_ + std::to_string(h);
        add_ns(ns);
        names_.push_back(ns);
        const std::string port = "p" + std::to_string(h);
        ip(sw_, {"link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns});
        if (h < int(mtu_.size()) && mtu_[std::size_t(h)] > 0) {
          const std::string m = std::to_string(mtu_[std::size_t(h)]);
          ip(sw_, {"link", "set", port, "mtu", m});
          ip(ns, {"link", "set", "eth0", "mtu", m});
        }
        ip(sw_, {"link", "set", port, "master", "br0"});
        ip(sw_, {"link", "set", port, "up"});
        ip(ns, {"link", "set", "lo", "up"});
        ip(ns, {"addr", "add", address(h) + "/24", "dev", "eth0"});
        ip(ns, {"link", "set", "eth0", "up"});
      }
    } catch (...) {
      remove_all();
      throw;
    }
  }
  netns_hosts(const netns_hosts&) = delete;
  netns_hosts& operator=(const netns_hosts&) = delete;
  ~netns_hosts() { remove_all(); }

  int hosts() const { return static_cast<int>(names_.size()); }
  const std::string& ns_name(int h) const { return names_.at(std::size_t(h)); }
  const std::string& switch_name() const { return sw_; }
  // Host h's address, "10.a.b.(h+1)".
  std::string address(int h) const {
    check_host(h);
    return "10." + std::to_string(net_a_) + "." + std::to_string(net_b_) + "." + std::to_string(h + 1);
  }
  // The hosts' subnet, "10.a.b.0/24".
  std::string subnet() const { return "10." + std::to_string(net_a_) + "." + std::to_string(net_b_) + ".0/24"; }
  // The interface name of host h's link inside its namespace.
  static std::string interface() { return "eth0"; }

  // Sets host h's link down / up (`ip link set`), at the host's end (eth0), the switch's end
  // (p<h>) or both. Down at the host end also drops the host's route to the subnet (connects from
  // it fail at once); down at the switch end leaves the host's interface without carrier (packets
  // are lost, connects to and from it time out).
  void link_down(int h, link_end end = link_end::host) { set_link(h, end, "down"); }
  void link_up(int h, link_end end = link_end::host) { set_link(h, end, "up"); }

  // Delays every packet host h sends by `delay` (tc netem on eth0); 0 removes the delay. Throws
  // netns_error with tc's stderr where netem is missing (sch_netem not built).
  void set_delay(int h, std::chrono::milliseconds delay) {
    check_host(h);
    if (delay.count() <= 0) {
      auto r = run_command({"tc", "-n", ns_name(h), "qdisc", "del", "dev", "eth0", "root"});
      (void)r;  // no qdisc to delete is fine
      return;
    }
    run_checked({"tc", "-n", ns_name(h), "qdisc", "replace", "dev", "eth0", "root", "netem", "delay",
                 std::to_string(delay.count()) + "ms"});
  }

  // Runs `ip -n <ns> args...` in namespace ns, throwing netns_error with its stderr on failure.
  static command_result ip(const std::string& ns, std::vector<std::string> args) {
    std::vector<std::string> argv = {"ip", "-n", ns};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_checked(argv);
  }

  // Why network namespaces cannot be made here, or nullopt. COLLCOMM_TEST_NO_NETNS set to
  // anything but "" or "0" forces a reason. The probe (root, `ip`, unshare and setns in a child,
  // a one-host netns_hosts with its veth and bridge) runs once per process.
  static std::optional<std::string> unavailable() {
    if (const char* v = std::getenv("COLLCOMM_TEST_NO_NETNS"); v && *v && std::strcmp(v, "0") != 0)
      return std::string("COLLCOMM_TEST_NO_NETNS=") + v + " is set";
    static const std::optional<std::string> probed = probe();
    return probed;
  }

  // Deletes the namespaces (and so their links) of earlier runs whose process is gone: names
  // "cc-<pid>-<start>-..." where no process <pid> with that start time lives (a zombie counts as
  // gone). Returns their names.
  static std::vector<std::string> cleanup_stale() {
    std::vector<std::string> gone;
    for (const auto& name : list_ours()) {
      int pid = 0;
      unsigned long long start = 0;
      if (std::sscanf(name.c_str() + std::strlen(prefix), "%d-%llu-", &pid, &start) != 2) continue;
      const bool alive = pid > 0 && detail::start_time(pid, true) == start;
      if (alive) continue;
      delete_ns(name);
      gone.push_back(name);
    }
    return gone;
  }

  // Namespace names with the prefix "cc-" now present (of any run).
  static std::vector<std::string> list_ours() {
    std::vector<std::string> v;
    if (DIR* d = ::opendir(netns_dir)) {
      while (dirent* e = ::readdir(d))
        if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) v.push_back(e->d_name);
      ::closedir(d);
    }
    std::sort(v.begin(), v.end());
    return v;
  }
  // The prefix of the names this process makes: "cc-<pid>-<start>-".
  static std::string own_prefix() {
    return std::string(prefix) + std::to_string(::getpid()) + "-" + std::to_string(detail::start_time(::getpid())) + "-";
  }

  using rank_fn = std::function<void(rank_context&)>;
  using started_fn = std::function<void(running&)>;

  // Forks layout.nranks() ranks, each in its host's namespace, each calling fn (see the top of
  // this file); on_started, if given, runs in the parent once all are forked. Returns when every
  // rank ended, or at `timeout` after the start, when the rest are killed (SIGKILL to their
  // process group) and listed in run_result::unfinished. Throws netns_error for a bad layout or
  // when forking fails (after killing what it started); an exception from on_started is rethrown
  // after every child is killed and reaped.
  run_result run_ranks(const rank_layout& layout, const rank_fn& fn, std::chrono::milliseconds timeout,
                       const started_fn& on_started = {}) {
    const int n = layout.nranks();
    if (layout.per_host.size() > names_.size())
      throw netns_error("run_ranks: layout has " + std::to_string(layout.per_host.size()) + " hosts, there are " +
                        std::to_string(names_.size()));
    for (int k : layout.per_host)
      if (k < 0) throw netns_error("run_ranks: a negative rank count in the layout");
    if (n < 1 || n > collcomm::bootstrap::max_ranks) throw netns_error("run_ranks: " + std::to_string(n) + " ranks");
    const auto host_of = layout.host_of();
    std::vector<int> local(static_cast<std::size_t>(n)), seen(layout.per_host.size(), 0);
    for (int r = 0; r < n; ++r) local[std::size_t(r)] = seen[std::size_t(host_of[std::size_t(r)])]++;

    const std::uint64_t rnd = detail::random_u64();
    const auto port = static_cast<std::uint16_t>(10000 + rnd % 20000);  // below the ephemeral ports
    std::uint64_t token = 0;
    while (token == 0) token = detail::random_u64();

    const auto start = steady::now();
    running run;
    run.deadline_ = start + timeout;
    run.ch_.resize(std::size_t(n));
    pid_t pgid = 0;
    const pid_t parent = ::getpid();
    std::fflush(stdout);
    std::fflush(stderr);

    // Kills and reaps every child not reaped yet (bounded); used on every way out.
    auto kill_all = [&] {
      if (pgid > 0) ::kill(-pgid, SIGKILL);
      for (auto& c : run.ch_)
        if (c.pid > 0 && !c.reaped) ::kill(c.pid, SIGKILL);
      const auto reap_deadline = steady::now() + 10s;
      for (auto& c : run.ch_) {
        while (c.pid > 0 && !c.reaped && steady::now() < reap_deadline) {
          const pid_t w = ::waitpid(c.pid, &c.wait_status, WNOHANG);
          if (w == c.pid || (w < 0 && errno == ECHILD)) c.reaped = true;
          else std::this_thread::sleep_for(1ms);
        }
        if (c.pid > 0 && !c.reaped) std::fprintf(stderr, "run_ranks: pid %d did not end after SIGKILL\n", int(c.pid));
      }
      for (auto& c : run.ch_)
        if (c.fd >= 0) {
          ::close(c.fd);
          c.fd = -1;
        }
    };

    try {
      for (int r = 0; r < n; ++r) {
        auto& c = run.ch_[std::size_t(r)];
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw netns_error(detail::errno_text("socketpair"));
        std::fflush(stdout);
        std::fflush(stderr);
        const pid_t p = ::fork();
        if (p < 0) {
          const int e = errno;
          ::close(sv[0]);
          ::close(sv[1]);
          throw netns_error(detail::errno_text("fork", e));
        }
        if (p == 0) {
          ::close(sv[0]);
          for (int q = 0; q < r; ++q)  // the other children's parent ends
            if (run.ch_[std::size_t(q)].fd >= 0) ::close(run.ch_[std::size_t(q)].fd);
          ::setpgid(0, pgid);
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (::getppid() != parent) ::_exit(120);
          const int h = host_of[std::size_t(r)];
          rank_context ctx;
          ctx.rank = r;
          ctx.nranks = n;
          ctx.host = h;
          ctx.local_rank = local[std::size_t(r)];
          ctx.local_size = layout.per_host[std::size_t(h)];
          ctx.ns = names_[std::size_t(h)];
          ctx.address = address(h);
          ctx.root_address = address(host_of[0]);
          ctx.port = port;
          ctx.token = token;
          ctx.fd_ = sv[1];
          detail::set_nonblocking(sv[1]);
          int code = 0;
          std::string err;
          try {
            enter_ns(ctx.ns);
            fn(ctx);
          } catch (const std::exception& e) {
            err = e.what();
            code = 1;
          } catch (...) {
            err = "an exception not derived from std::exception";
            code = 1;
          }
          if (code) {
            std::fprintf(stderr, "rank %d (host %d): %s\n", r, h, err.c_str());
            detail::send_frame(sv[1], detail::result_error, err);
          } else {
            detail::send_frame(sv[1], detail::result_ok, ctx.output);
          }
          std::fflush(stdout);
          std::fflush(stderr);
          ::_exit(code);
        }
        ::close(sv[1]);
        if (pgid == 0) pgid = p;
        ::setpgid(p, pgid);  // as the child does: whichever runs first
        c.pid = p;
        c.fd = sv[0];
        detail::set_nonblocking(c.fd);
      }
      if (on_started) on_started(run);
    } catch (...) {
      kill_all();
      throw;
    }

    run_result res;
    // Collects until every child is reaped, or the deadline.
    while (true) {
      std::vector<pollfd> pf;
      for (auto& c : run.ch_)
        if (c.fd >= 0) pf.push_back({c.fd, POLLIN, 0});
      int left = 0;
      for (auto& c : run.ch_) {
        if (c.reaped) continue;
        const pid_t w = ::waitpid(c.pid, &c.wait_status, WNOHANG);
        if (w == c.pid || (w < 0 && errno == ECHILD)) {
          c.reaped = true;
          // What it wrote before it ended; a descendant that still holds the socket does not hold us.
          if (c.fd >= 0) {
            run.read_child(c);
            if (c.fd >= 0) {
              ::close(c.fd);
              c.fd = -1;
            }
          }
        } else {
          ++left;
        }
      }
      if (left == 0) break;
      if (steady::now() >= run.deadline_) {
        for (int r = 0; r < n; ++r)
          if (!run.ch_[std::size_t(r)].reaped) res.unfinished.push_back(r);
        std::fprintf(stderr, "run_ranks: %s had not finished after %lld ms: killed\n",
                     collcomm::bootstrap::detail::ranks_text(res.unfinished).c_str(), static_cast<long long>(timeout.count()));
        for (int r : res.unfinished) run.read_child(run.ch_[std::size_t(r)]);
        break;
      }
      const int wait_ms = std::min(detail::ms_left(run.deadline_), 5);
      if (!pf.empty() && ::poll(pf.data(), pf.size(), wait_ms) > 0) {
        for (auto& c : run.ch_)
          for (const auto& p : pf)
            if (p.fd == c.fd && p.revents) run.read_child(c);
      } else if (pf.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      }
    }
    kill_all();  // the unfinished ones, and whatever the children left in their group

    for (int r = 0; r < n; ++r) {
      auto& c = run.ch_[std::size_t(r)];
      rank_result rr;
      rr.rank = r;
      rr.host = host_of[std::size_t(r)];
      rr.local_rank = local[std::size_t(r)];
      rr.pid = c.pid;
      rr.notes.assign(c.notes.begin(), c.notes.end());
      const int st = c.wait_status;
      if (WIFEXITED(st)) rr.exit_code = WEXITSTATUS(st);
      if (WIFSIGNALED(st)) rr.signal = WTERMSIG(st);
      const bool late = std::find(res.unfinished.begin(), res.unfinished.end(), r) != res.unfinished.end();
      if (late)
        rr.status = rank_status::timed_out;
      else if (WIFSIGNALED(st))
        rr.status = rank_status::signaled;
      else if (c.result && c.result->first == detail::result_error)
        rr.status = rank_status::error, rr.error = c.result->second;
      else if (c.result && c.result->first == detail::result_ok && rr.exit_code == 0)
        rr.status = rank_status::ok, rr.output = c.result->second;
      else
        rr.status = rank_status::exited;
      res.ranks.push_back(std::move(rr));
    }
    res.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start);
    return res;
  }

  // Joins this process (thread) to namespace `name` (setns on /var/run/netns/<name>).
  static void enter_ns(const std::string& name) {
    const std::string path = std::string(netns_dir) + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw netns_error(detail::errno_text("open " + path));
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int e = errno;
    ::close(fd);
    if (rc != 0) throw netns_error(detail::errno_text("setns(" + path + ", CLONE_NEWNET)", e));
  }

 private:
  std::vector<int> mtu_;
  std::string base_, sw_;
  std::vector<std::string> names_;    // hosts' namespaces
  std::vector<std::string> created_;  // every namespace made, in order
  int net_a_ = 0, net_b_ = 0;

  void check_host(int h) const {
    if (h < 0 || h >= hosts()) throw netns_error("host " + std::to_string(h) + " out of range [0, " + std::to_string(hosts()) + ")");
  }

  void add_ns(const std::string& name) {
    created_.push_back(name);  // before: a half-made one is deleted too
    run_checked({"ip", "netns", "add", name});
  }

  void set_link(int h, link_end end, const char* state) {
    check_host(h);
    if (end != link_end::switch_port) ip(ns_name(h), {"link", "set", "eth0", state});
    if (end != link_end::host) ip(sw_, {"link", "set", "p" + std::to_string(h), state});
  }

  // Deletes a namespace by name: `ip netns del`, and where that fails, what it does (a lazy
  // unmount and unlink of /var/run/netns/<name>). Says on stderr what it could not do.
  static void delete_ns(const std::string& name) {
    const std::string path = std::string(netns_dir) + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    command_result r;
    try {
      r = run_command({"ip", "netns", "del", name});
    } catch (const std::exception& e) {
      r.err = e.what();
    }
    if (r.ok() && ::lstat(path.c_str(), &st) != 0) return;
    ::umount2(path.c_str(), MNT_DETACH);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      std::fprintf(stderr, "netns_hosts: cannot delete namespace %s (ip: %s; %s)\n", name.c_str(), r.describe().c_str(),
                   std::strerror(errno));
  }

  void remove_all() noexcept {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
      try {
        delete_ns(*it);
      } catch (...) {
      }
    }
    created_.clear();
  }

  // What unavailable() finds out once.
  static std::optional<std::string> probe() {
    if (::geteuid() != 0)
      return "not root (euid " + std::to_string(::geteuid()) + "); making namespaces and links needs CAP_SYS_ADMIN and CAP_NET_ADMIN";
    if (detail::find_program("ip").empty()) return std::string("no `ip` command (iproute2) in /usr/sbin, /sbin, /usr/bin, /bin or PATH");
    // unshare(CLONE_NEWNET) in a child (a seccomp filter or a user namespace may refuse it).
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t p = ::fork();
    if (p < 0) return detail::errno_text("fork");
    if (p == 0) ::_exit(::unshare(CLONE_NEWNET) == 0 ? 0 : (errno & 0xff));
    int st = 0;
    ::waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      return "unshare(CLONE_NEWNET) failed: " + std::string(WIFEXITED(st) ? std::strerror(WEXITSTATUS(st)) : "the probe died");
    try {
      netns_hosts one(1);
      const pid_t q = ::fork();
      if (q < 0) return detail::errno_text("fork");
      if (q == 0) {
        try {
          enter_ns(one.ns_name(0));
        } catch (...) {
          ::_exit(1);
        }
        ::_exit(0);
      }
      ::waitpid(q, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return "setns into a namespace made by `ip netns add` failed (" + one.ns_name(0) + ")";
    } catch (const std::exception& e) {
      return std::string("cannot make a namespace, veth pair and bridge: ") + e.what();
    }
    return std::nullopt;
  }
};

// Prints "skipped: network namespaces unavailable: <why>" and exits 77 when unavailable() says
// why; returns 0 otherwise. Run before main by COLLCOMM_NET_SKIP_WITHOUT_NETNS().
inline int skip_without_netns() {
  if (auto why = netns_hosts::unavailable()) {
    std::printf("skipped: network namespaces unavailable: %s\n", why->c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(77);
  }
  return 0;
}

// The namespace inode of this process ("net:[4026532001]" -> 4026532001), 0 if unreadable.
inline std::uint64_t net_ns_inode(pid_t pid = 0) {
  const std::string path = pid ? "/proc/" + std::to_string(pid) + "/ns/net" : "/proc/self/ns/net";
  char buf[128];
  const ssize_t k = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (k <= 0) return 0;
  buf[k] = 0;
  const char* open = std::strchr(buf, '[');
  return open ? std::strtoull(open + 1, nullptr, 10) : 0;
}

}  // namespace collcomm_test::net

// At namespace scope in a test file: skip (exit 77, before main) where namespaces are unavailable.
#define COLLCOMM_NET_SKIP_WITHOUT_NETNS() \
  [[maybe_unused]] static const int collcomm_net_skip_check_ = ::collcomm_test::net::skip_without_netns()
