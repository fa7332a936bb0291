// collcomm/bootstrap/env.hpp — a tcp bootstrap configured from the launcher's environment.
//
// Rank and size, first found wins:
//   torchrun:  RANK, WORLD_SIZE (LOCAL_RANK read too, if set)
//   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE (OMPI_COMM_WORLD_LOCAL_RANK)
//   Slurm:     SLURM_PROCID, SLURM_NTASKS (SLURM_LOCALID)
// Root (rank 0's listening address), first found wins:
//   COLLCOMM_ROOT=host:port, else MASTER_ADDR + MASTER_PORT (torchrun's).
// Job token: COLLCOMM_JOB_TOKEN (16 hex digits) if set, else derived (FNV-1a 64) from
// "host:port/world_size". The derived token only keeps other jobs on other ports or sizes out;
// set COLLCOMM_JOB_TOKEN when two jobs may reuse one address.
// A variable that is missing or malformed is an errc::invalid_argument error that names it.
#pragma once

#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/error.hpp>

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
  std::string launcher;  // "torchrun", "openmpi", "slurm" or "explicit"
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

inline long long parse_int(const char* name, const std::string& v, long long lo, long long hi) {
  if (v.empty() || v.size() > 18) env_fail(std::string(name) + "='" + v + "' is not an integer");
  long long x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') env_fail(std::string(name) + "='" + v + "' is not a non-negative integer");
    x = x * 10 + (c - '0');
  }
  if (x < lo || x > hi)
    env_fail(std::string(name) + "=" + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
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
  if (auto t = getenv_str("COLLCOMM_JOB_TOKEN")) {
    if (t->size() != 16) env_fail("COLLCOMM_JOB_TOKEN='" + *t + "' is not 16 hex digits");
    c.token = unique_id::from_string("h:1/" + *t).token();
  } else {
    c.token = fnv1a(c.host + ":" + std::to_string(c.port) + "/" + std::to_string(c.size));
    if (c.token == 0) c.token = 1;
  }
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
    c.size = static_cast<int>(detail::parse_int(s.size, *n, 1, 1 << 24));
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
  return tcp(unique_id(c.host, c.port, c.token), c.rank, c.size, timeout);
}

// A tcp bootstrap for a root given as COLLCOMM_ROOT=host:port, with rank and size from the caller.
inline tcp tcp_from_root_env(int rank, int nranks, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (!std::getenv("COLLCOMM_ROOT")) detail::env_fail("COLLCOMM_ROOT is not set (want host:port)");
  env_config c;
  c.size = nranks;
  detail::read_root(c);
  return tcp(unique_id(c.host, c.port, c.token), rank, nranks, timeout);
}

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
