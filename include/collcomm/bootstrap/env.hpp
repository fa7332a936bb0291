// collcomm/bootstrap/env.hpp — a tcp bootstrap configured from the launcher's environment.
//
// Rank and size, first found wins:
//   torchrun:  RANK, WORLD_SIZE (LOCAL_RANK read too, if set)
//   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE (OMPI_COMM_WORLD_LOCAL_RANK)
//   Slurm:     SLURM_PROCID, SLURM_NTASKS (SLURM_LOCALID)
// Root (rank 0's listening address), first found wins:
//   COLLCOMM_ROOT=host:port, else MASTER_ADDR + MASTER_PORT (torchrun's).
// World size: at most bootstrap::max_ranks (1024), checked before anything is allocated.
// Job token (the key of the handshake's MACs, auth.hpp), first found wins:
//   COLLCOMM_JOB_TOKEN=16 hex digits (visible in /proc/<pid>/environ to the same user only), or
//   COLLCOMM_JOB_TOKEN_FILE=path of a file holding 16 hex digits (a trailing newline is fine)
//     that must be a regular file neither readable nor writable by group or others (chmod 600);
//     make one with `head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n' > f; chmod 600 f`;
//   else derived (FNV-1a 64) from "host:port/world_size": no secret, anyone who can see the port
//     can compute it. It keeps jobs on other ports or sizes apart, and a rank claimed twice still
//     fails the job, but a local user can take the place of a rank that has not joined yet. Rank
//     0 then warns once on stderr if the root address is a wildcard (0.0.0.0), which lets every
//     host that reaches the machine try.
// Setting both token variables is an error. A variable that is missing or malformed is an
// errc::invalid_argument error that names it.
#pragma once

#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

struct env_config {
  std::string host;
  std::uint16_t port = 0;
  int rank = 0;
  int size = 0;
  int local_rank = -1;  // -1 where the launcher does not say
  std::uint64_t token = 0;
  bool token_secret = false;  // from COLLCOMM_JOB_TOKEN or COLLCOMM_JOB_TOKEN_FILE, not derived
  std::string launcher;       // "torchrun", "openmpi", "slurm" or "explicit"
};

namespace detail {
[[noreturn]] inline void env_fail(const std::string& msg) {
  collcomm::detail::fail(errc::invalid_argument, "bootstrap::env", no_rank, msg);
}

inline std::optional<std::string> getenv_str(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

// `limit`, if given, names where `hi` comes from in the error.
inline long long parse_int(const char* name, const std::string& v, long long lo, long long hi,
                           const char* limit = nullptr) {
  if (v.empty() || v.size() > 18) env_fail(std::string(name) + "='" + v + "' is not an integer");
  long long x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') env_fail(std::string(name) + "='" + v + "' is not a non-negative integer");
    x = x * 10 + (c - '0');
  }
  if (x < lo || x > hi)
    env_fail(std::string(name) + "=" + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
             (limit ? std::string(" (") + limit + ")" : std::string()));
  return x;
}

inline std::uint64_t parse_token(const std::string& what, const std::string& t) {
  std::uint64_t x = 0;
  bool ok = t.size() == 16;
  for (char c : t) {
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
    ok = ok && d >= 0;
    x = x << 4 | std::uint64_t(d & 15);
  }
  if (!ok) env_fail(what + " is not 16 hex digits");
  return x;
}

// The token in COLLCOMM_JOB_TOKEN_FILE: a regular file that only its owner may read or write.
inline std::uint64_t read_token_file(const std::string& path) {
  const std::string what = "COLLCOMM_JOB_TOKEN_FILE='" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) env_fail(what + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  std::string text(64, '\0');
  ssize_t k = -1;
  int read_errno = 0;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && S_ISREG(st.st_mode) && !(st.st_mode & 077)) {
    k = ::read(fd, text.data(), text.size());
    read_errno = errno;
  }
  ::close(fd);
  if (!stat_ok || !S_ISREG(st.st_mode)) env_fail(what + " is not a regular file");
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    env_fail(what + " is readable or writable by group or others (mode " + mode + "): chmod 600 it");
  }
  if (k < 0) env_fail(what + ": cannot read: " + std::strerror(read_errno));
  text.resize(std::size_t(k));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return parse_token(what + " (its content)", text);
}

inline std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Root and token, for a known world size.
inline void read_root(env_config& c) {
  if (auto root = getenv_str("COLLCOMM_ROOT")) {
    auto colon = root->rfind(':');
    if (colon == std::string::npos || colon == 0) env_fail("COLLCOMM_ROOT='" + *root + "' is not host:port");
    c.host = root->substr(0, colon);
    c.port = static_cast<std::uint16_t>(parse_int("COLLCOMM_ROOT (port)", root->substr(colon + 1), 1, 65535));
  } else {
    auto addr = getenv_str("MASTER_ADDR");
    auto port = getenv_str("MASTER_PORT");
    if (!addr && !port) env_fail("no root address: set COLLCOMM_ROOT=host:port or MASTER_ADDR and MASTER_PORT");
    if (!addr || addr->empty()) env_fail("MASTER_PORT is set but MASTER_ADDR is missing or empty");
    if (!port) env_fail("MASTER_ADDR is set but MASTER_PORT is missing");
    c.host = *addr;
    c.port = static_cast<std::uint16_t>(parse_int("MASTER_PORT", *port, 1, 65535));
  }
  const auto t = getenv_str("COLLCOMM_JOB_TOKEN"), file = getenv_str("COLLCOMM_JOB_TOKEN_FILE");
  if (t && file) env_fail("both COLLCOMM_JOB_TOKEN and COLLCOMM_JOB_TOKEN_FILE are set: set one");
  c.token_secret = t || file;
  if (t) {
    c.token = parse_token("COLLCOMM_JOB_TOKEN", *t);  // its value is not repeated in errors
  } else if (file) {
    c.token = read_token_file(*file);
  } else {
    c.token = fnv1a(c.host + ":" + std::to_string(c.port) + "/" + std::to_string(c.size));
    if (c.token == 0) c.token = 1;
  }
}

// Rank 0 with a derived token on a wildcard address: said once per process, on stderr.
inline void warn_if_open(const env_config& c, int rank) {
  static std::atomic<bool> said{false};
  if (rank != 0 || c.token_secret || said.load()) return;
  if (!detail::is_wildcard(detail::resolve(c.host, c.port, rank)) || said.exchange(true)) return;
  std::fprintf(stderr,
               "collcomm: bootstrap::env: warning: rank 0 listens on %s:%u (every interface) with a job token derived "
               "from the address and world size, which anyone who reaches the port can compute and use to take a "
               "rank's place; set COLLCOMM_JOB_TOKEN or COLLCOMM_JOB_TOKEN_FILE, or give one interface's address\n",
               c.host.c_str(), unsigned(c.port));
}
}  // namespace detail

// Reads the launcher's variables (see above); throws naming the first bad or missing variable.
inline env_config read_env() {
  env_config c;
  struct scheme {
    const char *rank, *size, *local, *name;
  };
  const scheme schemes[] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi"},
                            {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"}};
  bool found = false;
  for (const auto& s : schemes) {
    auto r = detail::getenv_str(s.rank), n = detail::getenv_str(s.size);
    if (!r && !n) continue;
    if (!r) detail::env_fail(std::string(s.size) + " is set but " + s.rank + " is missing");
    if (!n) detail::env_fail(std::string(s.rank) + " is set but " + s.size + " is missing");
    c.size = static_cast<int>(detail::parse_int(s.size, *n, 1, max_ranks, "bootstrap::max_ranks"));
    c.rank = static_cast<int>(detail::parse_int(s.rank, *r, 0, c.size - 1));
    if (auto l = detail::getenv_str(s.local))
      c.local_rank = static_cast<int>(detail::parse_int(s.local, *l, 0, c.size - 1));
    c.launcher = s.name;
    found = true;
    break;
  }
  if (!found) detail::env_fail("no rank and size: set RANK and WORLD_SIZE (torchrun), or run under Open MPI or Slurm");
  detail::read_root(c);
  return c;
}

// A tcp bootstrap from the launcher's environment.
inline tcp from_env(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto c = read_env();
  detail::warn_if_open(c, c.rank);
  return tcp(unique_id(c.host, c.port, c.token), c.rank, c.size, timeout);
}

// A tcp bootstrap for a root given as COLLCOMM_ROOT=host:port, with rank and size from the caller.
inline tcp tcp_from_root_env(int rank, int nranks, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (!std::getenv("COLLCOMM_ROOT")) detail::env_fail("COLLCOMM_ROOT is not set (want host:port)");
  bootstrap::detail::check_nranks("bootstrap::env", "argument 'nranks'", nranks);
  env_config c;
  c.size = nranks;
  detail::read_root(c);
  detail::warn_if_open(c, rank);
  return tcp(unique_id(c.host, c.port, c.token), rank, nranks, timeout);
}

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
