// collcomm/bootstrap/tcp.hpp — a TCP bootstrap through rank 0 (a star), like ncclUniqueId.
//
//   // rank 0, before starting (or forking) the other ranks:
//   auto id = collcomm::bootstrap::unique_id::create();          // 127.0.0.1, ephemeral port
//   std::string s = id.to_string();                               // pass to every rank
//   // every rank:
//   collcomm::bootstrap::tcp boot(collcomm::bootstrap::unique_id::from_string(s), rank, nranks);
//
// unique_id::create() binds and listens at once (so the port is known and cannot be taken by
// someone else); the listening socket is kept in this process and handed to the rank-0 tcp built
// from that id here or in a forked child. A process that created the id but does not run rank 0
// calls release_listener(id). Non-root ranks built in a process that holds the listener close
// their inherited copy.
//
// Protocol (wire.hpp): non-root ranks connect to rank 0 (retrying until the timeout) and send
// hello; rank 0 accepts until every rank arrived, drops any connection whose first message is
// not a valid hello of this job (stranger, wrong token, bad rank, duplicate rank, other nranks),
// then sends welcome to all. all_gather and barrier gather at rank 0 and scatter back; send/recv
// between non-root ranks are relayed by rank 0 while rank 0 is inside any bootstrap call or its
// destructor (which waits, bounded by the timeout, until every other rank said bye), so a job
// whose ranks all destroy their bootstrap always delivers.
//
// Timeouts: rank 0 waits `timeout` for the ranks (handshake, each collective) and then tells every
// connected rank which ranks did not arrive (errc::timeout) before throwing the same. Non-root
// ranks wait up to 2x timeout for rank 0 so that its report, which names the missing rank, comes
// first; a rank 0 that never listens gives errc::timeout "rank 0 ... did not arrive".
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/bootstrap/wire.hpp>
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

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// The listening sockets created by unique_id::create() in this process, by job token.
struct listener_registry {
  std::mutex m;
  std::vector<std::pair<std::uint64_t, int>> entries;
  static listener_registry& get() {
    static listener_registry r;
    return r;
  }
  void add(std::uint64_t token, int fd) {
    std::lock_guard g(m);
    entries.emplace_back(token, fd);
  }
  int take(std::uint64_t token) {
    std::lock_guard g(m);
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (it->first == token) {
        int fd = it->second;
        entries.erase(it);
        return fd;
      }
    return -1;
  }
};

inline std::string ranks_text(const std::vector<int>& r) {
  std::string s = r.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s;
}
}  // namespace detail

// Where rank 0 listens and the job's token. Fixed-size binary form (to_bytes, 128 bytes, like
// ncclUniqueId) or text form "host:port/token-hex" (to_string); both round-trip.
class unique_id {
 public:
  static constexpr std::size_t size_bytes = 128;
  static constexpr std::size_t max_host = 100;

  unique_id() = default;
  unique_id(std::string host, std::uint16_t port, std::uint64_t token)
      : host_(std::move(host)), port_(port), token_(token) {
    if (host_.empty() || host_.size() > max_host)
      collcomm::detail::fail(errc::invalid_argument, "bootstrap::unique_id", no_rank,
                             "host name empty or longer than 100 characters");
  }

  // Binds and listens on host:port (port 0: an ephemeral port) and draws a random token.
  static unique_id create(const std::string& host = "127.0.0.1", std::uint16_t port = 0) {
    std::uint16_t bound = 0;
    auto s = detail::listen_on(host, port, 0, bound);
    std::random_device rd;
    std::uint64_t token = (std::uint64_t(rd()) << 32) ^ rd() ^
                          std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                          (std::uint64_t(::getpid()) << 48);
    if (token == 0) token = 1;
    unique_id id(host, bound, token);
    detail::listener_registry::get().add(token, s.release());
    return id;
  }

  const std::string& host() const noexcept { return host_; }
  std::uint16_t port() const noexcept { return port_; }
  std::uint64_t token() const noexcept { return token_; }

  std::array<std::byte, size_bytes> to_bytes() const {
    std::array<std::byte, size_bytes> b{};
    wire::detail::put<std::uint64_t>(b.data(), id_magic);
    wire::detail::put<std::uint64_t>(b.data() + 8, token_);
    wire::detail::put<std::uint16_t>(b.data() + 16, port_);
    b[18] = std::byte(host_.size());
    std::memcpy(b.data() + 19, host_.data(), host_.size());
    return b;
  }
  static unique_id from_bytes(std::span<const std::byte> b) {
    auto bad = [](const char* why) {
      collcomm::detail::fail(errc::invalid_argument, "bootstrap::unique_id", no_rank, why);
    };
    if (b.size() != size_bytes) bad("binary id is not 128 bytes");
    if (wire::detail::get<std::uint64_t>(b.data()) != id_magic) bad("binary id has the wrong magic");
    const auto n = static_cast<std::size_t>(b[18]);
    if (n == 0 || n > max_host) bad("binary id has a bad host length");
    std::string host(reinterpret_cast<const char*>(b.data() + 19), n);
    return unique_id(host, wire::detail::get<std::uint16_t>(b.data() + 16),
                     wire::detail::get<std::uint64_t>(b.data() + 8));
  }

  std::string to_string() const {
    char tok[17];
    std::snprintf(tok, sizeof tok, "%016llx", static_cast<unsigned long long>(token_));
    return host_ + ":" + std::to_string(port_) + "/" + tok;
  }
  static unique_id from_string(const std::string& s) {
    auto bad = [&] {
      collcomm::detail::fail(errc::invalid_argument, "bootstrap::unique_id", no_rank,
                             "malformed id '" + s + "' (want host:port/16-hex-digit-token)");
    };
    auto slash = s.rfind('/');
    if (slash == std::string::npos) bad();
    auto colon = s.rfind(':', slash);
    if (colon == std::string::npos || colon == 0) bad();
    auto port_s = s.substr(colon + 1, slash - colon - 1), tok_s = s.substr(slash + 1);
    if (port_s.empty() || port_s.size() > 5 || tok_s.size() != 16) bad();
    unsigned long port = 0;
    for (char c : port_s) {
      if (c < '0' || c > '9') bad();
      port = port * 10 + unsigned(c - '0');
    }
    if (port > 65535) bad();
    std::uint64_t tok = 0;
    for (char c : tok_s) {
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) bad();
      tok = tok << 4 | std::uint64_t(d);
    }
    return unique_id(s.substr(0, colon), static_cast<std::uint16_t>(port), tok);
  }
  friend bool operator==(const unique_id&, const unique_id&) = default;

 private:
  static constexpr std::uint64_t id_magic = 0x3144495543434301ull;  // version 1 of this layout
  std::string host_ = "127.0.0.1";
  std::uint16_t port_ = 0;
  std::uint64_t token_ = 0;
};

// Closes the listening socket unique_id::create() left in this process (for a process that made
// the id but does not run rank 0). Harmless if there is none.
inline void release_listener(const unique_id& id) {
  detail::fd_owner(detail::listener_registry::get().take(id.token()));
}

class tcp {
 public:
  tcp(const unique_id& id, int rank, int nranks, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : rank_(rank),
        size_(nranks),
        timeout_(timeout),
        token_(id.token()),
        root_(id.host() + ":" + std::to_string(id.port())) {
    if (nranks < 1) fail(errc::invalid_argument, "nranks = " + std::to_string(nranks) + " must be >= 1");
    if (rank < 0 || rank >= nranks)
      fail(errc::invalid_argument,
           "rank = " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
    if (timeout.count() <= 0) fail(errc::invalid_argument, "timeout must be positive");
    p2p_q_.resize(static_cast<std::size_t>(nranks));
    detail::fd_owner inherited(detail::listener_registry::get().take(token_));
    if (rank == 0)
      start_root(id, std::move(inherited));
    else
      start_member(id);  // `inherited` (a forked copy of rank 0's listener) closes here
    active_ = true;
  }

  tcp(tcp&& o) noexcept
      : rank_(o.rank_),
        size_(o.size_),
        timeout_(o.timeout_),
        token_(o.token_),
        root_(std::move(o.root_)),
        active_(std::exchange(o.active_, false)),
        failed_(o.failed_),
        peers_(std::move(o.peers_)),
        bye_(std::move(o.bye_)),
        gather_q_(std::move(o.gather_q_)),
        p2p_q_(std::move(o.p2p_q_)),
        gathered_q_(std::move(o.gathered_q_)) {}
  tcp& operator=(tcp&&) = delete;
  tcp(const tcp&) = delete;

  ~tcp() {
    if (!active_) return;
    try {
      if (rank_ != 0) {
        if (!failed_) send_msg(peers_[0].get(), wire::msg::bye, -1, {}, detail::clock::now() + timeout_);
      } else if (!failed_) {
        // Keep relaying until every rank said bye or hung up (bounded).
        auto deadline = detail::clock::now() + timeout_;
        while (true) {
          bool all = true;
          for (int r = 1; r < size_; ++r) all = all && (bye_[r] || !peers_[r]);
          if (all || detail::clock::now() >= deadline) break;
          pump_root(deadline);
        }
      }
    } catch (...) {}
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    const std::size_t n = in.size();
    if (out.size() != n * std::size_t(size_))
      fail(errc::invalid_argument, "all_gather: out has " + std::to_string(out.size()) +
                                       " bytes, want size() * in.size() = " + std::to_string(n * std::size_t(size_)));
    if (n > wire::max_payload / std::size_t(size_))
      fail(errc::invalid_argument, "all_gather: result would exceed 64 MiB");
    check_usable();
    if (rank_ == 0) {
      auto deadline = detail::clock::now() + timeout_;
      wait_root(deadline, "all_gather", [&](int r) { return !gather_q_[r].empty(); });
      if (n) std::memcpy(out.data(), in.data(), n);
      for (int r = 1; r < size_; ++r) {
        auto v = std::move(gather_q_[r].front());
        gather_q_[r].pop_front();
        if (v.size() != n)
          abort_job(errc::invalid_usage, "all_gather: rank " + std::to_string(r) + " gave " + std::to_string(v.size()) +
                                             " bytes, rank 0 gave " + std::to_string(n));
        if (n) std::memcpy(out.data() + std::size_t(r) * n, v.data(), n);
      }
      for (int r = 1; r < size_; ++r)
        send_msg(peers_[r].get(), wire::msg::gathered, -1, {out.data(), out.size()}, deadline + timeout_, r);
    } else {
      auto deadline = detail::clock::now() + 2 * timeout_;
      send_msg(peers_[0].get(), wire::msg::gather, -1, in, deadline);
      while (gathered_q_.empty()) pump_member(deadline, "all_gather");
      auto v = std::move(gathered_q_.front());
      gathered_q_.pop_front();
      if (v.size() != out.size())
        fail(errc::invalid_usage,
             "all_gather: got " + std::to_string(v.size()) + " bytes from rank 0, want " + std::to_string(out.size()));
      if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
    }
  }

  void barrier() { all_gather({}, {}); }

  void send(int peer, std::span<const std::byte> bytes) {
    check_peer(peer, "send");
    check_usable();
    if (peer == rank_) {
      p2p_q_[peer].emplace_back(bytes.begin(), bytes.end());
      return;
    }
    auto deadline = detail::clock::now() + timeout_;
    int fd = rank_ == 0 ? peers_[peer].get() : peers_[0].get();
    send_msg(fd, wire::msg::p2p, peer, bytes, deadline, rank_ == 0 ? peer : 0);
  }

  void recv(int peer, std::span<std::byte> bytes) {
    check_peer(peer, "recv");
    check_usable();
    if (rank_ == 0) {
      auto deadline = detail::clock::now() + timeout_;
      wait_root(
          deadline, "recv from rank " + std::to_string(peer), [&](int r) { return r != peer || !p2p_q_[peer].empty(); },
          peer == 0);
    } else {
      auto deadline = detail::clock::now() + 2 * timeout_;
      while (p2p_q_[peer].empty()) {
        if (peer == rank_) fail(errc::invalid_usage, "recv from self with no matching send");
        pump_member(deadline, "recv from rank " + std::to_string(peer));
      }
    }
    if (p2p_q_[peer].empty()) fail(errc::invalid_usage, "recv from self with no matching send");
    auto v = std::move(p2p_q_[peer].front());
    p2p_q_[peer].pop_front();
    if (v.size() != bytes.size())
      fail(errc::invalid_usage, "recv from rank " + std::to_string(peer) + ": message has " + std::to_string(v.size()) +
                                    " bytes, the receive buffer " + std::to_string(bytes.size()));
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size());
  }

 private:
  using bytes_t = std::vector<std::byte>;

  [[noreturn]] void fail(errc c, const std::string& msg) const { detail::fail(c, "bootstrap::tcp", rank_, msg); }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_)
      fail(errc::invalid_argument,
           std::string(what) + ": peer = " + std::to_string(peer) + " out of range [0, " + std::to_string(size_) + ")");
  }
  void check_usable() const {
    if (failed_) fail(errc::invalid_usage, "the bootstrap already failed; it cannot be used again");
  }

  void send_msg(int fd, wire::msg type, int peer, std::span<const std::byte> payload,
                detail::clock::time_point deadline, int to = 0, int sender = -1) {
    wire::header h{type, token_, sender < 0 ? rank_ : sender, peer, payload.size()};
    std::array<std::byte, wire::header_bytes> hb;
    wire::encode_header(h, hb.data());
    auto r = detail::send_all(fd, hb.data(), hb.size(), deadline);
    if (r == detail::io::ok && !payload.empty()) r = detail::send_all(fd, payload.data(), payload.size(), deadline);
    if (r != detail::io::ok) io_fail(r, to, "send to");
  }

  [[noreturn]] void io_fail(detail::io r, int who, const char* what) {
    failed_ = true;
    if (r == detail::io::timeout)
      fail(errc::timeout, std::string(what) + " rank " + std::to_string(who) + " timed out after " +
                              std::to_string(timeout_.count()) + " ms");
    if (r == detail::io::closed)
      fail(errc::aborted,
           std::string(what) + " rank " + std::to_string(who) + ": connection closed (rank exited or failed)");
    fail(errc::system, detail::errno_text((std::string(what) + " rank " + std::to_string(who)).c_str()));
  }

  // Reads one whole message from fd, checking it against this job.
  wire::header read_msg(int fd, int from, detail::clock::time_point deadline, bytes_t& payload) {
    std::array<std::byte, wire::header_bytes> hb;
    if (auto r = detail::recv_exact(fd, hb.data(), hb.size(), deadline); r != detail::io::ok)
      io_fail(r, from, "receive from");
    wire::header h;
    if (auto s = wire::decode_header(hb, {token_, size_}, h); s != wire::status::ok) {
      failed_ = true;
      fail(errc::system, "bad message from rank " + std::to_string(from) + ": " + std::string(wire::to_string(s)));
    }
    payload.resize(static_cast<std::size_t>(h.length));
    if (h.length)
      if (auto r = detail::recv_exact(fd, payload.data(), payload.size(), deadline); r != detail::io::ok)
        io_fail(r, from, "receive from");
    return h;
  }

  [[noreturn]] void abort_job(errc c, const std::string& msg) {
    // Best effort: tell every connected rank why, then fail here too.
    std::string full = collcomm::detail::format_error("bootstrap::tcp", 0, msg);
    bytes_t p(1 + full.size());
    p[0] = std::byte(static_cast<unsigned char>(c));
    std::memcpy(p.data() + 1, full.data(), full.size());
    auto deadline = detail::clock::now() + std::chrono::milliseconds(std::min<long long>(timeout_.count(), 1000));
    for (int r = 1; r < size_; ++r)
      if (peers_[r]) {
        try {
          send_msg(peers_[r].get(), wire::msg::abort, -1, p, deadline, r);
        } catch (...) {}
      }
    failed_ = true;
    fail(c, msg);
  }

  // ---- rank 0 ----
  void start_root(const unique_id& id, detail::fd_owner listener) {
    if (!listener) {
      std::uint16_t bound = 0;
      listener = detail::listen_on(id.host(), id.port(), 0, bound);
    }
    peers_.resize(std::size_t(size_));
    bye_.assign(std::size_t(size_), false);
    gather_q_.resize(std::size_t(size_));
    if (size_ == 1) return;
    struct pending {
      detail::fd_owner fd;
      bytes_t buf;
    };
    std::vector<pending> pend;
    int arrived = 0;
    const auto deadline = detail::clock::now() + timeout_;
    while (arrived < size_ - 1) {
      if (detail::clock::now() >= deadline) {
        std::vector<int> missing;
        for (int r = 1; r < size_; ++r)
          if (!peers_[r]) missing.push_back(r);
        abort_job(errc::timeout, detail::ranks_text(missing) + " did not arrive at the bootstrap (root " + root_ +
                                     ") within " + std::to_string(timeout_.count()) + " ms");
      }
      std::vector<pollfd> pf{{listener.get(), POLLIN, 0}};
      for (auto& p : pend) pf.push_back({p.fd.get(), POLLIN, 0});
      int rc = ::poll(pf.data(), pf.size(), std::min(detail::ms_left(deadline), 100));
      if (rc < 0 && errno != EINTR) fail(errc::system, detail::errno_text("poll"));
      if (rc <= 0) continue;
      for (std::size_t i = pend.size(); i-- > 0;) {
        if (!pf[i + 1].revents) continue;
        auto& p = pend[i];
        // Read at most the hello (header + 4 bytes); anything else is a stranger.
        std::byte tmp[wire::header_bytes + 4];
        ssize_t k = ::recv(p.fd.get(), tmp, sizeof tmp - p.buf.size(), MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        bool drop = k <= 0;
        if (!drop) {
          p.buf.insert(p.buf.end(), tmp, tmp + k);
          if (p.buf.size() >= wire::header_bytes) {
            wire::header h;
            auto s = wire::decode_header(p.buf, {token_, size_}, h);
            drop = s != wire::status::ok || h.type != wire::msg::hello || h.length != 4 || h.sender == 0 ||
                   peers_[h.sender];
            if (!drop && p.buf.size() == wire::header_bytes + 4) {
              if (wire::detail::get<std::uint32_t>(p.buf.data() + wire::header_bytes) != std::uint32_t(size_)) {
                drop = true;
              } else {
                peers_[h.sender] = std::move(p.fd);
                ++arrived;
                pend.erase(pend.begin() + std::ptrdiff_t(i));
                continue;
              }
            }
          }
        }
        if (drop) pend.erase(pend.begin() + std::ptrdiff_t(i));  // closes the stranger's socket
      }
      if (pf[0].revents & POLLIN) {
        int c = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          pend.push_back({detail::fd_owner(c), {}});
        }
      }
    }
    for (int r = 1; r < size_; ++r) send_msg(peers_[r].get(), wire::msg::welcome, -1, {}, deadline + timeout_, r);
  }

  // Waits for one message from any rank (bounded by deadline) and files or relays it.
  void pump_root(detail::clock::time_point deadline) {
    std::vector<pollfd> pf;
    std::vector<int> who;
    for (int r = 1; r < size_; ++r)
      if (peers_[r]) {
        pf.push_back({peers_[r].get(), POLLIN, 0});
        who.push_back(r);
      }
    if (pf.empty()) return;
    int rc = ::poll(pf.data(), pf.size(), std::min(detail::ms_left(deadline), 100));
    if (rc < 0 && errno != EINTR) fail(errc::system, detail::errno_text("poll"));
    if (rc <= 0) return;
    for (std::size_t i = 0; i < pf.size(); ++i) {
      if (!pf[i].revents) continue;
      const int r = who[i];
      if (bye_[r]) {  // after bye only EOF is expected
        peers_[r].reset();
        continue;
      }
      bytes_t payload;
      wire::header h = read_msg(peers_[r].get(), r, deadline, payload);
      if (h.sender != r)
        abort_job(errc::system,
                  "rank " + std::to_string(r) + " sent a message claiming to be rank " + std::to_string(h.sender));
      switch (h.type) {
        case wire::msg::gather:
          gather_q_[r].push_back(std::move(payload));
          break;
        case wire::msg::bye:
          bye_[r] = true;
          break;
        case wire::msg::p2p:
          if (h.peer == 0)
            p2p_q_[r].push_back(std::move(payload));
          else if (h.peer > 0 && peers_[h.peer])
            send_msg(peers_[h.peer].get(), wire::msg::p2p, h.peer, payload, deadline + timeout_, h.peer, r);
          break;
        default:
          abort_job(errc::system,
                    "unexpected message type " + std::to_string(int(h.type)) + " from rank " + std::to_string(r));
      }
    }
  }

  template <class Ready>
  void wait_root(detail::clock::time_point deadline, const std::string& what, Ready ready, bool self_only = false) {
    while (true) {
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r)
        if (!ready(r)) missing.push_back(r);
      if (missing.empty() || self_only) return;
      if (detail::clock::now() >= deadline)
        abort_job(errc::timeout, what + ": " + detail::ranks_text(missing) + " did not arrive within " +
                                     std::to_string(timeout_.count()) + " ms");
      pump_root(deadline);
    }
  }

  // ---- ranks 1.. ----
  void start_member(const unique_id& id) {
    peers_.resize(1);
    const auto start = detail::clock::now();
    const auto deadline = start + timeout_;
    auto addr = detail::resolve(id.host(), id.port(), rank_);  // once, up front
    // Rank 0 may start later: refused attempts are retried until the deadline; each attempt is
    // bounded by it (detail::connect_by), so a silent host costs the timeout, not the SYN retries.
    while (true) {
      auto s = detail::new_socket(rank_);
      const int err = detail::connect_by(s.get(), addr, deadline);
      if (err == 0) {
        peers_[0] = std::move(s);
        break;
      }
      if (detail::clock::now() >= deadline)
        fail(errc::timeout, "rank 0 (root " + root_ + ") did not arrive within " + std::to_string(timeout_.count()) +
                                " ms: connect: " + std::strerror(err));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::array<std::byte, 4> n;
    wire::detail::put<std::uint32_t>(n.data(), std::uint32_t(size_));
    send_msg(peers_[0].get(), wire::msg::hello, -1, n, start + 2 * timeout_);
    bytes_t payload;
    auto h = read_msg_member(start + 2 * timeout_, "the bootstrap handshake", payload);
    if (h.type != wire::msg::welcome)
      fail(errc::system, "expected welcome from rank 0, got message type " + std::to_string(int(h.type)));
  }

  wire::header read_msg_member(detail::clock::time_point deadline, const std::string& what, bytes_t& payload) {
    std::array<std::byte, wire::header_bytes> hb;
    auto r = detail::recv_exact(peers_[0].get(), hb.data(), hb.size(), deadline);
    if (r == detail::io::timeout) {
      failed_ = true;
      fail(errc::timeout, what + ": rank 0 (root " + root_ + ") did not answer within " +
                              std::to_string(2 * timeout_.count()) + " ms");
    }
    if (r != detail::io::ok) io_fail(r, 0, "receive from");
    wire::header h;
    if (auto s = wire::decode_header(hb, {token_, size_}, h); s != wire::status::ok) {
      failed_ = true;
      fail(errc::system, "bad message from rank 0: " + std::string(wire::to_string(s)));
    }
    payload.resize(static_cast<std::size_t>(h.length));
    if (h.length)
      if (auto r2 = detail::recv_exact(peers_[0].get(), payload.data(), payload.size(), deadline); r2 != detail::io::ok)
        io_fail(r2, 0, "receive from");
    if (h.type == wire::msg::abort) {
      failed_ = true;
      errc c = payload.empty() ? errc::aborted : static_cast<errc>(static_cast<int>(payload[0]));
      if (c > errc::internal) c = errc::aborted;
      std::string text =
          payload.size() > 1 ? std::string(reinterpret_cast<const char*>(payload.data() + 1), payload.size() - 1) : "";
      throw error(c, rank_, collcomm::detail::format_error("bootstrap::tcp", rank_, "aborted by rank 0: " + text));
    }
    return h;
  }

  void pump_member(detail::clock::time_point deadline, const std::string& what) {
    bytes_t payload;
    auto h = read_msg_member(deadline, what, payload);
    switch (h.type) {
      case wire::msg::gathered:
        gathered_q_.push_back(std::move(payload));
        break;
      case wire::msg::p2p:
        p2p_q_[h.sender].push_back(std::move(payload));
        break;
      default:
        failed_ = true;
        fail(errc::system, "unexpected message type " + std::to_string(int(h.type)) + " from rank 0");
    }
  }

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::uint64_t token_;
  std::string root_;
  bool active_ = false;
  bool failed_ = false;
  std::vector<detail::fd_owner> peers_;  // rank 0: one per rank (peers_[0] unused); others: peers_[0] = root
  std::vector<bool> bye_;
  std::vector<std::deque<bytes_t>> gather_q_;  // rank 0: contributions received ahead, per rank
  std::vector<std::deque<bytes_t>> p2p_q_;     // messages received for this rank, per sender
  std::deque<bytes_t> gathered_q_;             // non-root: all_gather results
};

static_assert(bootstrap_like<tcp>);

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
