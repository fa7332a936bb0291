// collcomm/bootstrap/tcp.hpp — a TCP bootstrap through rank 0 (a star), like ncclUniqueId.
//
//   // rank 0, before starting (or forking) the other ranks:
//   auto id = collcomm::bootstrap::unique_id::create();          // 127.0.0.1, ephemeral port
//   std::string s = id.to_string();                               // pass to every rank
//   // every rank:
//   collcomm::bootstrap::tcp boot(collcomm::bootstrap::unique_id::from_string(s), rank, nranks);
//
// unique_id::create() binds and listens at once (so the port is known and cannot be taken by
// someone else) and draws the job token from getrandom(2). The listening socket stays in this
// process's registry until the rank-0 tcp built from that id takes it (here, in a thread, or in
// a forked child); only rank 0 ever takes or closes it. A process that created the id but does
// not run rank 0 calls release_listener(id). Ranks may be threads of one process, built in any
// order. Every descriptor is close-on-exec.
//
// Protocol (wire.hpp, auth.hpp): non-root ranks connect to rank 0 (retrying until the timeout).
// Rank 0 answers each connection with a challenge (a fresh random nonce); the rank proves that
// it holds the job token with a hello carrying a MAC over that nonce, its own nonce, its rank and
// nranks; once every rank arrived, rank 0 sends each a welcome with a MAC that proves rank 0
// holds the token too. The token never travels. Rank 0 drops, silently, a connection whose
// first message is not a hello of this job (a stranger, another job), and one that sends nothing
// within the handshake grace, min(timeout / 4, 2 s); at most max_pending connections wait for
// their hello at once (a new one drops the oldest), and when descriptors run out (EMFILE) the
// oldest waiting connection makes room (with none to drop, accepting pauses for 10 ms, so rank 0
// never spins on a listener it cannot accept from). A rank dropped before its hello reconnects
// (until its timeout), so real ranks join while a flood goes on. A hello of this job that
// fails the MAC (a replay of an earlier run, a peer without the token), claims a rank that
// already joined, or gives another nranks fails the job at once: rank 0 sends every connected
// rank an abort and throws, naming the rank and the peers' addresses.
//
// After the handshake, all_gather and barrier gather at rank 0 and scatter back; send/recv
// between non-root ranks are relayed by rank 0 while rank 0 is inside any bootstrap call or its
// destructor (which waits, bounded by the timeout, until every other rank said bye), so a job
// whose ranks all destroy their bootstrap always delivers. A send over max_payload is refused on
// the sender (errc::invalid_argument) and the bootstrap stays usable.
//
// Timeouts: rank 0 waits `timeout` for the ranks (handshake, each collective) and then tells every
// connected rank which ranks did not arrive (errc::timeout) before throwing the same. Non-root
// ranks wait up to 2x timeout for rank 0 so that its report, which names the missing rank, comes
// first; a rank 0 that never listens gives errc::timeout "rank 0 ... did not arrive".
#pragma once

#include <collcomm/bootstrap/auth.hpp>
#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/bootstrap/socket.hpp>
#include <collcomm/bootstrap/wire.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

namespace detail {
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
    std::uint64_t token = 0;
    while (token == 0) token = auth::random_u64();
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
// the id but does not run rank 0, or a forked child that runs another rank and wants its copy
// gone). Harmless if there is none.
inline void release_listener(const unique_id& id) {
  detail::fd_owner(detail::listener_registry::get().take(id.token()));
}

class tcp {
 public:
  // Connections that may wait for their hello at once on rank 0; a new one drops the oldest.
  static constexpr std::size_t max_pending = 64;

  tcp(const unique_id& id, int rank, int nranks, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : rank_(rank),
        size_(nranks),
        timeout_(timeout),
        token_(id.token()),
        job_(auth::job_id(id.token())),
        root_(id.host() + ":" + std::to_string(id.port())) {
    bootstrap::detail::check_nranks("bootstrap::tcp", "argument 'nranks'", nranks);
    if (rank < 0 || rank >= nranks)
      fail(errc::invalid_argument,
           "rank = " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
    if (timeout.count() <= 0) fail(errc::invalid_argument, "timeout must be positive");
    p2p_q_.resize(static_cast<std::size_t>(nranks));
    if (rank == 0)
      start_root(id, detail::fd_owner(detail::listener_registry::get().take(token_)));
    else
      start_member(id);  // the registry's listener, if any, is rank 0's to take
    active_ = true;
  }

  tcp(tcp&& o) noexcept
      : rank_(o.rank_),
        size_(o.size_),
        timeout_(o.timeout_),
        token_(o.token_),
        job_(o.job_),
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
  // The job token (the secret of the unique id): transports that authenticate their own
  // connections key their MACs with it.
  std::uint64_t token() const noexcept { return token_; }
  // The IPv4 address (network byte order) this process reaches the other ranks from: the local
  // end of its connection to rank 0 (rank 0: of its connection to rank 1). 0 when unknown.
  std::uint32_t local_ipv4() const noexcept {
    const std::size_t i = rank_ == 0 ? 1 : 0;
    if (i >= peers_.size() || !peers_[i]) return 0;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (::getsockname(peers_[i].get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) return 0;
    return a.sin_addr.s_addr;
  }

  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    const std::size_t n = in.size();
    if (out.size() != n * std::size_t(size_))
      fail(errc::invalid_argument, "all_gather: out has " + std::to_string(out.size()) +
                                       " bytes, want size() * in.size() = " + std::to_string(n * std::size_t(size_)));
    if (n > max_payload / std::size_t(size_))
      bootstrap::detail::check_payload("bootstrap::tcp", rank_, "all_gather: a result", out.size());
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
    bootstrap::detail::check_payload("bootstrap::tcp", rank_, "send: a message", bytes.size());
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
    wire::header h{type, job_, sender < 0 ? rank_ : sender, peer, payload.size()};
    std::array<std::byte, wire::header_bytes> hb;
    wire::encode_header(h, hb.data());
    auto r = detail::send_all(fd, hb.data(), hb.size(), deadline);
    if (r == detail::io::ok && !payload.empty()) r = detail::send_all(fd, payload.data(), payload.size(), deadline);
    if (r != detail::io::ok) io_fail(r, to, "send to");
  }

  // A connection that failed. On rank 0 (outside abort_job) the job fails with it: every other rank
  // is told which rank was lost, instead of finding rank 0's relay gone later and blaming rank 0.
  [[noreturn]] void io_fail(detail::io r, int who, const char* what) {
    failed_ = true;
    const std::string peer = std::string(what) + " rank " + std::to_string(who);
    const errc c = r == detail::io::timeout ? errc::timeout : r == detail::io::closed ? errc::aborted : errc::system;
    const std::string msg = r == detail::io::timeout
                                ? peer + " timed out after " + std::to_string(timeout_.count()) + " ms"
                            : r == detail::io::closed ? peer + ": connection closed (rank exited or failed)"
                                                      : detail::errno_text(peer.c_str());
    if (rank_ == 0 && !aborting_ && who > 0 && who < size_) {
      peers_[std::size_t(who)].reset();
      abort_job(c, msg);
    }
    if (rank_ != 0 && who == 0 && !aborting_) {
      // Rank 0 may have closed after telling why (abort_job): that reason, if it is there, is the error.
      aborting_ = true;
      try {
        bytes_t payload;
        read_msg_member(detail::clock::now() + std::chrono::milliseconds(200), what, payload);
      } catch (const error& e) {
        if (std::string_view(e.what()).find("aborted by rank 0") != std::string_view::npos) throw;
      }
    }
    fail(c, msg);
  }

  // Reads one whole message from fd, checking it against this job.
  wire::header read_msg(int fd, int from, detail::clock::time_point deadline, bytes_t& payload) {
    std::array<std::byte, wire::header_bytes> hb;
    if (auto r = detail::recv_exact(fd, hb.data(), hb.size(), deadline); r != detail::io::ok)
      io_fail(r, from, "receive from");
    wire::header h;
    if (auto s = wire::decode_header(hb, {job_, size_}, h); s != wire::status::ok) {
      failed_ = true;
      fail(errc::system, "bad message from rank " + std::to_string(from) + ": " + std::string(wire::to_string(s)));
    }
    payload.resize(static_cast<std::size_t>(h.length));
    if (h.length)
      if (auto r = detail::recv_exact(fd, payload.data(), payload.size(), deadline); r != detail::io::ok)
        io_fail(r, from, "receive from");
    return h;
  }

  // Tells every connected rank, and `also` (a connection that authenticated but did not join),
  // why the job failed, then throws the same here.
  [[noreturn]] void abort_job(errc c, const std::string& msg, int also = -1) {
    aborting_ = true;  // a send below that fails is not another job failure (io_fail)
    std::string full = collcomm::detail::format_error("bootstrap::tcp", 0, msg);
    bytes_t p(1 + full.size());
    p[0] = std::byte(static_cast<unsigned char>(c));
    std::memcpy(p.data() + 1, full.data(), full.size());
    auto deadline = detail::clock::now() + std::chrono::milliseconds(std::min<long long>(timeout_.count(), 1000));
    auto tell = [&](int fd, int r) {
      try {
        send_msg(fd, wire::msg::abort, -1, p, deadline, r);
      } catch (...) {}
    };
    for (int r = 1; r < size_; ++r)
      if (peers_[r]) tell(peers_[r].get(), r);
    if (also >= 0) tell(also, -1);
    failed_ = true;
    fail(c, msg);
  }

  // ---- rank 0 ----

  // A connection that has not yet given a valid hello.
  struct pending {
    detail::fd_owner fd;
    auth::nonce nonce;
    bytes_t buf;
    detail::clock::time_point deadline;  // dropped if no hello by then
    std::string addr;                    // the peer's ip:port
  };

  // How long a connection may take to give its hello: min(timeout / 4, 2 s).
  std::chrono::milliseconds handshake_grace() const {
    return std::max(std::chrono::milliseconds(1), std::min(timeout_ / 4, std::chrono::milliseconds(2000)));
  }

  void start_root(const unique_id& id, detail::fd_owner listener) {
    if (!listener) {
      std::uint16_t bound = 0;
      listener = detail::listen_on(id.host(), id.port(), 0, bound);
    }
    // Nonblocking: the accept loop below never waits in accept4 (a forked copy may take the
    // connection that poll announced).
    if (const int fl = ::fcntl(listener.get(), F_GETFL, 0); fl < 0 || ::fcntl(listener.get(), F_SETFL, fl | O_NONBLOCK))
      fail(errc::system, detail::errno_text("fcntl O_NONBLOCK on the listener"));
    peers_.resize(std::size_t(size_));
    bye_.assign(std::size_t(size_), false);
    gather_q_.resize(std::size_t(size_));
    if (size_ == 1) return;
    addr_.resize(std::size_t(size_));
    welcome_.resize(std::size_t(size_));
    std::deque<pending> pend;  // oldest first
    int arrived = 0;
    const auto deadline = detail::clock::now() + timeout_;
    auto accept_from = detail::clock::time_point{};  // accepting pauses until then (descriptors ran out)
    std::vector<pollfd> pf;
    while (arrived < size_ - 1) {
      auto now = detail::clock::now();
      if (now >= deadline) {
        std::vector<int> missing;
        for (int r = 1; r < size_; ++r)
          if (!peers_[r]) missing.push_back(r);
        abort_job(errc::timeout, bootstrap::detail::ranks_text(missing) + " did not arrive at the bootstrap (root " +
                                     root_ + ") within " + std::to_string(timeout_.count()) + " ms");
      }
      std::erase_if(pend, [&](const pending& p) { return p.deadline <= now; });  // silent for too long
      auto wake = std::min(deadline, now + std::chrono::milliseconds(100));
      const bool listening = now >= accept_from;
      if (!listening) wake = std::min(wake, accept_from);
      pf.clear();
      pf.push_back({listening ? listener.get() : -1, POLLIN, 0});  // fd -1: poll skips it
      for (auto& p : pend) {
        pf.push_back({p.fd.get(), POLLIN, 0});
        wake = std::min(wake, p.deadline);
      }
      const int rc = ::poll(pf.data(), pf.size(), detail::ms_left(wake));
      if (rc < 0 && errno != EINTR) fail(errc::system, detail::errno_text("poll"));
      if (rc <= 0) continue;
      // Hellos first (pf[i + 1] is pend[i]; joined or dropped entries are erased afterwards).
      std::vector<char> done(pend.size(), 0);
      for (std::size_t i = 0; i < pend.size(); ++i)
        if (pf[i + 1].revents) done[i] = read_hello(pend[i], arrived) != hello_state::waiting;
      for (std::size_t i = pend.size(); i-- > 0;)
        if (done[i]) pend.erase(pend.begin() + std::ptrdiff_t(i));
      if (listening && (pf[0].revents & POLLIN)) accept_some(listener.get(), pend, arrived, accept_from);
    }
    for (int r = 1; r < size_; ++r) {
      std::array<std::byte, wire::welcome_bytes> w;
      wire::detail::put<std::uint64_t>(w.data(), welcome_[std::size_t(r)]);
      send_msg(peers_[r].get(), wire::msg::welcome, -1, w, deadline + timeout_, r);
    }
    addr_ = {};
    welcome_ = {};
  }

  // Accepts the connections waiting on the listener (at most 16 per call), sends each its
  // challenge and reads a hello that is already there.
  void accept_some(int listener, std::deque<pending>& pend, int& arrived, detail::clock::time_point& accept_from) {
    for (int k = 0; k < 16 && arrived < size_ - 1; ++k) {
      sockaddr_in a{};
      socklen_t len = sizeof a;
      const int c = ::accept4(listener, reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        // Out of descriptors: the oldest waiting connection makes room. With none to drop (or
        // out of memory, or worse), accepting pauses briefly rather than spin on a listener that
        // stays readable.
        if ((errno == EMFILE || errno == ENFILE) && !pend.empty()) {
          pend.pop_front();
          continue;
        }
        accept_from = detail::clock::now() + std::chrono::milliseconds(10);
        return;
      }
      if (pend.size() >= max_pending) pend.pop_front();
      pending p{detail::fd_owner(c), {}, {}, detail::clock::now() + handshake_grace(), detail::address_text(a)};
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auth::random_bytes(p.nonce);
      auto m = wire::encode({wire::msg::challenge, job_, 0, -1, 0}, p.nonce);
      // A fresh socket's send buffer takes these 48 bytes at once; anything else is not a rank.
      if (::send(c, m.data(), m.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != ssize_t(m.size())) continue;
      if (read_hello(p, arrived) == hello_state::waiting) pend.push_back(std::move(p));
    }
  }

  enum class hello_state { waiting, joined, dropped };

  // Reads what `p` sent so far (without waiting) and, once its hello is whole, checks it: joins
  // the rank, drops a stranger, or fails the job (see the header comment).
  hello_state read_hello(pending& p, int& arrived) {
    constexpr std::size_t whole = wire::header_bytes + wire::hello_bytes;
    std::array<std::byte, whole> tmp;
    const ssize_t k = ::recv(p.fd.get(), tmp.data(), whole - p.buf.size(), MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return hello_state::waiting;
    if (k <= 0) return hello_state::dropped;
    p.buf.insert(p.buf.end(), tmp.begin(), tmp.begin() + k);
    if (p.buf.size() < wire::header_bytes) return hello_state::waiting;
    wire::header h;
    if (wire::decode_header(p.buf, {job_, size_}, h) != wire::status::ok || h.type != wire::msg::hello ||
        h.length != wire::hello_bytes || h.sender == 0)
      return hello_state::dropped;  // not a rank of this job
    if (p.buf.size() < whole) return hello_state::waiting;
    const std::byte* body = p.buf.data() + wire::header_bytes;
    const auto nranks = static_cast<int>(wire::detail::get<std::uint32_t>(body));
    auth::nonce theirs;
    std::memcpy(theirs.data(), body + 4, theirs.size());
    const auto mac = wire::detail::get<std::uint64_t>(body + 4 + wire::nonce_bytes);
    const int r = h.sender;
    const std::string who = "rank " + std::to_string(r);
    if (!auth::mac_equal(mac, auth::hello_mac(token_, p.nonce, theirs, r, nranks)))
      abort_job(errc::aborted, "the hello for " + who + " from " + p.addr +
                                   " failed authentication (a hello replayed from an earlier run, or a peer that "
                                   "does not hold the job token)");
    if (nranks != size_)
      abort_job(errc::invalid_usage,
                who + " at " + p.addr + " was started with nranks = " + std::to_string(nranks) + ", rank 0 with " +
                    std::to_string(size_),
                p.fd.get());
    if (peers_[r])
      abort_job(errc::aborted,
                who + " joined twice: first from " + addr_[std::size_t(r)] + ", again from " + p.addr +
                    " (a rank started twice, or a process that knows the job token took its place)",
                p.fd.get());
    peers_[r] = std::move(p.fd);
    addr_[std::size_t(r)] = p.addr;
    welcome_[std::size_t(r)] = auth::welcome_mac(token_, p.nonce, theirs, r, size_);
    ++arrived;
    return hello_state::joined;
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
        abort_job(errc::timeout, what + ": " + bootstrap::detail::ranks_text(missing) + " did not arrive within " +
                                     std::to_string(timeout_.count()) + " ms");
      pump_root(deadline);
    }
  }

  // ---- ranks 1.. ----

  // Connects to rank 0 and runs the handshake. Rank 0 may start later (refused connects are
  // retried) and may drop a connection before its hello (a flood of others): such a connection
  // is retried too, until `timeout` has passed; each attempt is bounded by it
  // (detail::connect_by), so a silent host costs the timeout, not the SYN retries.
  void start_member(const unique_id& id) {
    peers_.resize(1);
    const auto start = detail::clock::now();
    const auto deadline = start + timeout_;
    auto addr = detail::resolve(id.host(), id.port(), rank_);  // once, up front
    std::string last;
    while (true) {
      auto s = detail::new_socket(rank_);
      const int err = detail::connect_by(s.get(), addr, deadline);
      if (err == 0) {
        peers_[0] = std::move(s);
        if (handshake(start + 2 * timeout_)) return;
        last = "connection closed by rank 0 during the handshake";
        peers_[0].reset();
      } else {
        last = std::string("connect: ") + std::strerror(err);
      }
      if (detail::clock::now() >= deadline)
        fail(errc::timeout,
             "rank 0 (root " + root_ + ") did not arrive within " + std::to_string(timeout_.count()) + " ms: " + last);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Challenge, hello, welcome on peers_[0]. False if rank 0 closed the connection first.
  bool handshake(detail::clock::time_point deadline) {
    bytes_t payload;
    auto h = read_msg_member(deadline, "the bootstrap handshake", payload, true);
    if (!h) return false;
    if (h->type != wire::msg::challenge || payload.size() != wire::challenge_bytes)
      fail(errc::system,
           "expected a challenge from rank 0 (root " + root_ + "), got message type " + std::to_string(int(h->type)));
    auth::nonce root_nonce, mine;
    std::memcpy(root_nonce.data(), payload.data(), root_nonce.size());
    auth::random_bytes(mine);
    std::array<std::byte, wire::hello_bytes> hello;
    wire::detail::put<std::uint32_t>(hello.data(), std::uint32_t(size_));
    std::memcpy(hello.data() + 4, mine.data(), mine.size());
    wire::detail::put<std::uint64_t>(hello.data() + 4 + wire::nonce_bytes,
                                     auth::hello_mac(token_, root_nonce, mine, rank_, size_));
    wire::header hh{wire::msg::hello, job_, rank_, -1, 0};
    auto m = wire::encode(hh, hello);
    if (auto r = detail::send_all(peers_[0].get(), m.data(), m.size(), deadline); r == detail::io::closed)
      return false;
    else if (r != detail::io::ok)
      io_fail(r, 0, "send to");
    h = read_msg_member(deadline, "the bootstrap handshake", payload, true);
    if (!h) return false;
    if (h->type != wire::msg::welcome || payload.size() != wire::welcome_bytes)
      fail(errc::system, "expected welcome from rank 0, got message type " + std::to_string(int(h->type)));
    if (!auth::mac_equal(wire::detail::get<std::uint64_t>(payload.data()),
                         auth::welcome_mac(token_, root_nonce, mine, rank_, size_))) {
      failed_ = true;
      fail(errc::aborted, "the peer at the root's address " + root_ +
                              " failed authentication: it does not hold the job token (another process on rank 0's "
                              "port, or ranks started with different tokens)");
    }
    return true;
  }

  // Reads one message from rank 0; throws on an abort message. With `closed_ok`, a connection
  // that rank 0 closed gives nullopt instead of an error.
  std::optional<wire::header> read_msg_member(detail::clock::time_point deadline, const std::string& what,
                                              bytes_t& payload, bool closed_ok = false) {
    std::array<std::byte, wire::header_bytes> hb;
    auto r = detail::recv_exact(peers_[0].get(), hb.data(), hb.size(), deadline);
    if (r == detail::io::timeout) {
      failed_ = true;
      fail(errc::timeout, what + ": rank 0 (root " + root_ + ") did not answer within " +
                              std::to_string(2 * timeout_.count()) + " ms");
    }
    if (r == detail::io::closed && closed_ok) return std::nullopt;
    if (r != detail::io::ok) io_fail(r, 0, "receive from");
    wire::header h;
    if (auto s = wire::decode_header(hb, {job_, size_}, h); s != wire::status::ok) {
      failed_ = true;
      fail(errc::system, "bad message from rank 0 (root " + root_ + "): " + std::string(wire::to_string(s)));
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
    auto h = *read_msg_member(deadline, what, payload);
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
  std::uint64_t token_;  // the secret (or derived) key of the handshake's MACs; never sent
  std::uint64_t job_;    // auth::job_id(token_), in every header
  std::string root_;
  bool active_ = false;
  bool failed_ = false;
  bool aborting_ = false;
  std::vector<detail::fd_owner> peers_;  // rank 0: one per rank (peers_[0] unused); others: peers_[0] = root
  std::vector<bool> bye_;
  std::vector<std::deque<bytes_t>> gather_q_;  // rank 0: contributions received ahead, per rank
  std::vector<std::deque<bytes_t>> p2p_q_;     // messages received for this rank, per sender
  std::deque<bytes_t> gathered_q_;             // non-root: all_gather results
  std::vector<std::string> addr_;              // rank 0, during the handshake: each rank's ip:port
  std::vector<std::uint64_t> welcome_;         // rank 0, during the handshake: each rank's welcome MAC
};

static_assert(bootstrap_like<tcp>);

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
