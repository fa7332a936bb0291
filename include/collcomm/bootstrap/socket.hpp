// collcomm/bootstrap/socket.hpp — the socket helpers of the tcp bootstrap: an owning descriptor,
// name resolution, listen, a connect and reads and writes bounded by a deadline.
//
// Every descriptor is created close-on-exec (SOCK_CLOEXEC), so a program the job execs does not
// inherit the bootstrap's sockets. Every wait takes a deadline; none retries past it.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

namespace detail {
using clock = std::chrono::steady_clock;
using collcomm::detail::fail;

// Owns one file descriptor; closes it on destruction.
class fd_owner {
 public:
  fd_owner() = default;
  explicit fd_owner(int fd) noexcept : fd_(fd) {}
  fd_owner(fd_owner&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  fd_owner& operator=(fd_owner&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~fd_owner() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

inline std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

inline int ms_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

inline sockaddr_in resolve(const std::string& host, std::uint16_t port, int rank) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || !res)
    fail(errc::invalid_argument, "bootstrap::tcp", rank, "cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  sockaddr_in a{};
  std::memcpy(&a, res->ai_addr, sizeof a);
  ::freeaddrinfo(res);
  a.sin_port = htons(port);
  return a;
}

inline fd_owner new_socket(int rank) {
  fd_owner s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) fail(errc::system, "bootstrap::tcp", rank, errno_text("socket"));
  int one = 1;
  ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

// A listening socket bound to host:port exactly (a wildcard only if `host` is one).
inline fd_owner listen_on(const std::string& host, std::uint16_t port, int rank, std::uint16_t& bound_port) {
  auto addr = resolve(host, port, rank);
  auto s = new_socket(rank);
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    fail(errc::system, "bootstrap::tcp", rank, errno_text(("bind " + host + ":" + std::to_string(port)).c_str()));
  if (::listen(s.get(), 512) != 0) fail(errc::system, "bootstrap::tcp", rank, errno_text("listen"));
  socklen_t len = sizeof addr;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port = ntohs(addr.sin_port);
  return s;
}

enum class io { ok, timeout, closed, failed };

// One connection attempt to `addr`, bounded by `deadline`: a nonblocking connect, then a poll for
// its outcome (a host that drops SYNs would otherwise hold a blocking connect for the kernel's
// SYN retries, ~2 minutes, whatever the timeout). Returns 0 when connected (the socket blocking
// again), else the errno of the failure (ETIMEDOUT when the deadline passed first).
inline int connect_by(int fd, const sockaddr_in& addr, clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno ? errno : EINVAL;
  int err = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return errno;
    while (true) {
      pollfd pf{fd, POLLOUT, 0};
      const int rc = ::poll(&pf, 1, ms_left(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return errno;
      if (rc == 0) return ETIMEDOUT;
      socklen_t len = sizeof err;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
      break;
    }
  }
  if (err == 0 && ::fcntl(fd, F_SETFL, flags) != 0) return errno;
  return err;
}

inline io send_all(int fd, const std::byte* p, std::size_t n, clock::time_point deadline) {
  while (n > 0) {
    pollfd pf{fd, POLLOUT, 0};
    int rc = ::poll(&pf, 1, ms_left(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return io::failed;
    if (rc == 0) return io::timeout;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k < 0) return (errno == EPIPE || errno == ECONNRESET) ? io::closed : io::failed;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io::ok;
}

inline io recv_exact(int fd, std::byte* p, std::size_t n, clock::time_point deadline) {
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    int rc = ::poll(&pf, 1, ms_left(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return io::failed;
    if (rc == 0) return io::timeout;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k < 0) return errno == ECONNRESET ? io::closed : io::failed;
    if (k == 0) return io::closed;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io::ok;
}

// "a.b.c.d:port" of a socket address.
inline std::string address_text(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

inline bool is_wildcard(const sockaddr_in& a) noexcept { return a.sin_addr.s_addr == htonl(INADDR_ANY); }
}  // namespace detail

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
