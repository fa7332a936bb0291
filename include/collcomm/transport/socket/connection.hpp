// collcomm/transport/socket/connection.hpp — the TCP backend of transport::net: one rank's
// listener (socket_endpoint) and its connection to one peer on one channel (socket_connection).
//
// A connection carries messages both ways through `slots` slots of `capacity` bytes at each end,
// in order, with credits, over `streams` TCP sockets: message m of either direction travels on
// stream m % streams, so several messages are in flight on several sockets (the kernel moves them
// in parallel). The data path, the same for every net backend (host/net_world.hpp drives it):
//   send_buffer(m)      where message m is written before post (this end's slot m % slots)
//   can_send(m)         the peer has freed the slot message m goes to (m - peer_released < slots)
//   post(m, bytes, tag) sends message m (and a 64-bit tag with it)
//   progress()          moves what can move without blocking; true when something moved
//   arrived(m), recv_buffer(m), recv_bytes(m), recv_tag(m)   message m, complete, in this end's slot
// The slots are the connection's own memory, or memory the caller gives (external_slots: the GPU
// proxy's FIFOs in pinned host memory, so that messages go from and to them without a copy).
//   release(m)          this end is done with message m: its slot is the peer's again (a credit)
// A failure — the peer closed the connection or died (EOF, reset), a frame that breaks the
// protocol — is recorded with a text naming the peer and the channel (failure()); so is an abort
// text the peer sent (peer_abort()). The world reports them.
//
// Frames on a stream: a 24-byte prefix {u32 kind, u32 bytes, u64 value, u64 tag} and, for data,
// `bytes` bytes. data: value = the message number (checked: the next one this stream carries,
// within the receiver's free slots, bytes <= capacity), tag = a word the sender gives with the
// message and the receiver reads beside it (recv_tag: the GPU proxy's FIFO size word). credit: value = messages the sender of the credit
// has released (only grows, never past what was sent). abort: `bytes` bytes of text, why the
// peer gave up. bye: the peer closes the connection on purpose (send_bye): its end of file that
// follows is no failure.
//
// Connecting. Every rank listens on one TCP port (socket_endpoint); the lower rank of a pair
// connects, lazily, when either end first needs the connection. The higher rank may ask for it
// (request: a hello for stream request_stream, answered by no ack, after which the lower rank
// connects): the GPU proxy, which cannot know when its peer will need a connection, does. A connection proves the job
// token (the bootstrap's, or a random key shared through it) both ways: the client's hello
// carries a SipHash MAC, keyed by the token, over the server's listener nonce (fresh per world,
// published through the bootstrap), a fresh client nonce, both ranks, the channel and the stream;
// the server answers with a MAC over the same fields under another key. A hello that fails any
// check (another job, another world, a bad MAC, a rank that is not lower, a stream already
// connected) is dropped without an answer. Handshakes in progress are capped (pending_max, the
// oldest dropped) and bounded (handshake_deadline); an idle connection costs nothing else.
// Sockets: TCP_NODELAY, keepalive, TCP_USER_TIMEOUT = the world's timeout (the kernel gives up
// on a peer that stops acknowledging), nonblocking after the handshake.
//
// This folder (transport/socket/): the socket backend. It includes the policy core, detail/ and
// bootstrap/ (sockets, the MAC), never an executor.
#pragma once

#include <collcomm/bootstrap/auth.hpp>
#include <collcomm/bootstrap/socket.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace transport::sockets {

using clock = std::chrono::steady_clock;
using bootstrap::detail::fd_owner;

// What one rank publishes through the bootstrap so that peers can connect to it.
struct endpoint_address {
  std::uint32_t ipv4 = 0;  // network byte order
  std::uint16_t port = 0;  // network byte order
  std::uint16_t unused = 0;
  std::array<std::byte, 16> nonce{};  // the listener's nonce, fresh per world
};

namespace detail {
inline constexpr std::uint64_t hello_magic = 0x314c4c4548544e43ull;  // "CNTHELL1"
inline constexpr std::uint64_t ack_magic = 0x314b434154544e43ull;    // "CNTTACK1"
inline constexpr std::uint64_t purpose_hello = 0x6f6c6c65684e4343ull, purpose_ack = 0x6b6361204e4343ull;

struct hello {
  std::uint64_t magic, job;
  std::array<std::byte, 16> server_nonce, client_nonce;
  std::uint32_t src, dst, channel, stream;
  std::uint64_t mac;
};
struct ack {
  std::uint64_t magic, mac;
};
static_assert(sizeof(hello) == 72 && sizeof(ack) == 16);

inline std::uint64_t hello_mac(std::uint64_t token, std::uint64_t purpose, const hello& h) noexcept {
  return bootstrap::auth::siphash24(
      token, purpose, std::span<const std::byte>(reinterpret_cast<const std::byte*>(&h), offsetof(hello, mac)));
}

inline std::string errno_text(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

inline void set_socket_options(int fd, std::chrono::milliseconds timeout) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 10, intvl = 5, cnt = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  unsigned user_timeout = static_cast<unsigned>(std::min<long long>(timeout.count(), 1u << 30));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

inline bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// The IPv4 address of interface `ifname` (0 if it has none).
inline std::uint32_t interface_address(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  std::uint32_t found = 0;
  for (ifaddrs* i = list; i != nullptr && found == 0; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && ifname == i->ifa_name)
      found = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
  ::freeifaddrs(list);
  return found;
}
}  // namespace detail

// The knobs of the socket backend (net_world's options carry them).
struct socket_options {
  // TCP streams per connection, in [1, 16]. COLLCOMM_SOCKET_STREAMS overrides.
  int streams = 2;
  // The interface to listen on (its IPv4 address); empty: COLLCOMM_SOCKET_IFNAME, else the
  // address the bootstrap reaches rank 0 from, else the loopback.
  std::string ifname;
};

// One TCP stream's state: what is being written and what is being read.
struct stream_state {
  fd_owner fd;
  // Writing: frames queued in order; `sent` bytes of the front one are out.
  struct out_frame {
    std::array<std::byte, 24> prefix;
    const std::byte* data;
    std::size_t bytes;
  };
  std::deque<out_frame> out;
  std::size_t sent = 0;
  // Reading: the prefix, then the data into a slot.
  std::array<std::byte, 24> prefix{};
  std::size_t got = 0;        // bytes of the current frame read (prefix included)
  std::uint64_t next_in = 0;  // the next message number this stream carries in
};

enum class frame_kind : std::uint32_t { data = 1, credit = 2, abort = 3, bye = 4 };

class socket_connection {
 public:
  // Slots of the caller's memory: `slots` slots of `capacity` bytes from `send` and from `recv`,
  // which outlive the connection.
  struct external_slots {
    std::byte* send;
    std::byte* recv;
  };

  socket_connection(int self, int peer, int channel, int slots, std::size_t capacity, int streams,
                    external_slots memory = {nullptr, nullptr})
      : self_(self),
        peer_(peer),
        channel_(channel),
        slots_(static_cast<std::uint64_t>(slots)),
        capacity_(memory.send ? capacity : (capacity + 63) / 64 * 64),
        streams_(static_cast<std::size_t>(streams)),
        owned_(memory.send == nullptr),
        send_slots_(owned_ ? new (std::align_val_t{64}) std::byte[capacity_ * slots_] : memory.send),
        recv_slots_(owned_ ? new (std::align_val_t{64}) std::byte[capacity_ * slots_] : memory.recv),
        recv_size_(slots_, 0),
        recv_tag_(slots_, 0) {
    for (std::size_t s = 0; s < streams_; ++s) streams_state_[s].next_in = s;
  }
  ~socket_connection() {
    if (!owned_) return;
    ::operator delete[](send_slots_, std::align_val_t{64});
    ::operator delete[](recv_slots_, std::align_val_t{64});
  }
  socket_connection(const socket_connection&) = delete;
  socket_connection& operator=(const socket_connection&) = delete;

  int peer() const noexcept { return peer_; }
  int channel() const noexcept { return channel_; }
  std::size_t capacity() const noexcept { return capacity_; }
  int streams() const noexcept { return static_cast<int>(streams_); }
  bool ready() const noexcept { return ready_streams_ == streams_; }

  // ---- the data path ---------------------------------------------------------------------------
  std::byte* send_buffer(std::uint64_t m) noexcept { return send_slots_ + (m % slots_) * capacity_; }
  bool can_send(std::uint64_t m) const noexcept { return ready() && m - peer_released_ < slots_; }
  void post(std::uint64_t m, std::size_t bytes, std::uint64_t tag = 0) {
    stream_state& s = streams_state_[m % streams_];
    s.out.push_back({prefix_of(frame_kind::data, static_cast<std::uint32_t>(bytes), m, tag), send_buffer(m), bytes});
    ++posted_;
    flush(s);
  }
  bool arrived(std::uint64_t m) const noexcept { return m < arrived_count(); }
  const std::byte* recv_buffer(std::uint64_t m) const noexcept { return recv_slots_ + (m % slots_) * capacity_; }
  std::size_t recv_bytes(std::uint64_t m) const noexcept { return recv_size_[m % slots_]; }
  std::uint64_t recv_tag(std::uint64_t m) const noexcept { return recv_tag_[m % slots_]; }
  // Messages that arrived (in order), and messages the peer released of those sent.
  std::uint64_t arrived_total() const noexcept { return arrived_count(); }
  std::uint64_t peer_released() const noexcept { return peer_released_; }
  void release(std::uint64_t m) {
    released_ = m + 1;
    credit_due_ = true;
    flush(streams_state_[0]);
  }

  // Moves what can move on every stream without blocking; true when anything moved. A failure is
  // recorded (failure(), peer_abort()), never thrown: the world decides whether it matters.
  bool progress() {
    bool moved = false;
    for (std::size_t i = 0; i < streams_; ++i) {
      stream_state& s = streams_state_[i];
      if (!s.fd) continue;
      moved |= flush(s);
      moved |= read(s);
    }
    return moved;
  }

  // For poll(2): each stream's fd and whether it has bytes to write.
  template <class F>
  void for_each_fd(F&& f) const {
    for (std::size_t i = 0; i < streams_; ++i)
      if (streams_state_[i].fd) f(streams_state_[i].fd.get(), !streams_state_[i].out.empty() || (i == 0 && credit_due_));
  }

  // Sends `why` as an abort frame on stream 0, best effort (never blocks, never throws).
  void send_abort(const std::string& why) noexcept {
    try {
      stream_state& s = streams_state_[0];
      if (!s.fd || !s.out.empty()) return;
      abort_text_ = why.substr(0, 1024);
      auto p = prefix_of(frame_kind::abort, static_cast<std::uint32_t>(abort_text_.size()), 0);
      iovec v[2] = {{p.data(), p.size()}, {abort_text_.data(), abort_text_.size()}};
      msghdr mh{};
      mh.msg_iov = v;
      mh.msg_iovlen = 2;
      (void)::sendmsg(s.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } catch (...) {}
  }

  // Stream `s` is connected and authenticated (socket_endpoint calls it).
  void attach(int s, fd_owner fd) {
    streams_state_[static_cast<std::size_t>(s)].fd = std::move(fd);
    ++ready_streams_;
  }
  bool has_stream(int s) const noexcept { return static_cast<bool>(streams_state_[static_cast<std::size_t>(s)].fd); }

  // Why the connection failed (empty: it works), and the abort text the peer sent (empty: none).
  const std::string& failure() const noexcept { return failure_; }
  const std::string& peer_abort() const noexcept { return peer_abort_; }
  // Every message posted has been released by the peer and every byte written.
  bool drained() const noexcept {
    if (!failure_.empty()) return true;
    for (std::size_t i = 0; i < streams_; ++i)
      if (!streams_state_[i].out.empty()) return false;
    return peer_released_ == posted_ && !credit_due_;
  }
  // Queues a bye on stream 0, after everything queued (see frame kinds above).
  void send_bye() {
    stream_state& s = streams_state_[0];
    if (!s.fd) return;
    s.out.push_back({prefix_of(frame_kind::bye, 0, 0), nullptr, 0});
    flush(s);
  }
  // Every byte queued on every stream is written.
  bool flushed() const noexcept {
    for (std::size_t i = 0; i < streams_; ++i)
      if (streams_state_[i].fd && !streams_state_[i].out.empty()) return false;
    return !credit_due_ || !streams_state_[0].fd;
  }
  bool peer_left() const noexcept { return peer_left_; }
  // No stream is open any more (the peer left and every stream ended, or the connection failed).
  bool closed() const noexcept {
    for (std::size_t i = 0; i < streams_; ++i)
      if (streams_state_[i].fd) return false;
    return ready_streams_ == streams_;
  }
  // Ends every stream's writing side (FIN after the queued bytes).
  void shutdown_writes() noexcept {
    for (std::size_t i = 0; i < streams_; ++i)
      if (streams_state_[i].fd) ::shutdown(streams_state_[i].fd.get(), SHUT_WR);
  }

  // What the connection knows, for a timeout's message.
  std::string state_text() const {
    return "messages sent " + std::to_string(posted_) + ", freed by rank " + std::to_string(peer_) + " " +
           std::to_string(peer_released_) + ", received " + std::to_string(arrived_count()) + ", released " +
           std::to_string(released_) + (ready() ? "" : ", not connected yet");
  }

 private:
  static constexpr std::size_t prefix_bytes = 24;
  static std::array<std::byte, prefix_bytes> prefix_of(frame_kind k, std::uint32_t bytes, std::uint64_t value,
                                                       std::uint64_t tag = 0) noexcept {
    std::array<std::byte, prefix_bytes> p;
    const auto kind = static_cast<std::uint32_t>(k);
    std::memcpy(p.data(), &kind, 4);
    std::memcpy(p.data() + 4, &bytes, 4);
    std::memcpy(p.data() + 8, &value, 8);
    std::memcpy(p.data() + 16, &tag, 8);
    return p;
  }

  // Messages complete in order: stream s carries s, s + S, ... and expects next_in next, so every
  // message below the least next_in has arrived, and that one has not.
  std::uint64_t arrived_count() const noexcept {
    std::uint64_t first_missing = ~std::uint64_t{0};
    for (std::size_t s = 0; s < streams_; ++s) first_missing = std::min(first_missing, streams_state_[s].next_in);
    return first_missing;
  }

  // Records the connection's failure (the first one) and stops using its sockets; the world
  // reports it when a wait needs this connection (a peer that finished and left is no failure
  // for a rank that needs nothing more from it).
  void broken(const std::string& why) {
    if (failure_.empty())
      failure_ = "the connection to rank " + std::to_string(peer_) + " on channel " + std::to_string(channel_) +
                 " failed: " + why;
    for (std::size_t i = 0; i < streams_; ++i) streams_state_[i].fd.reset();
  }

  // Writes queued frames until the socket would block. True when bytes went out.
  bool flush(stream_state& s) {
    if (!s.fd) return false;
    bool moved = false;
    for (;;) {
      if (credit_due_ && &s == &streams_state_[0] && (s.out.empty() || s.sent == 0)) {  // ahead of data not begun
        s.out.push_front({prefix_of(frame_kind::credit, 0, released_), nullptr, 0});
        credit_due_ = false;
      }
      if (s.out.empty()) return moved;
      stream_state::out_frame& f = s.out.front();
      iovec v[2];
      int n = 0;
      if (s.sent < prefix_bytes) v[n++] = {f.prefix.data() + s.sent, prefix_bytes - s.sent};
      const std::size_t data_done = s.sent > prefix_bytes ? s.sent - prefix_bytes : 0;
      if (f.bytes > data_done) v[n++] = {const_cast<std::byte*>(f.data) + data_done, f.bytes - data_done};
      msghdr mh{};
      mh.msg_iov = v;
      mh.msg_iovlen = static_cast<std::size_t>(n);
      const ssize_t k = ::sendmsg(s.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);  // EPIPE, never SIGPIPE
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
        broken(detail::errno_text("send", errno));
        return true;
      }
      moved = true;
      s.sent += static_cast<std::size_t>(k);
      if (s.sent == prefix_bytes + f.bytes) {
        s.out.pop_front();
        s.sent = 0;
      } else {
        return moved;
      }
    }
  }

  // Reads what the socket holds (a bounded amount). True when bytes came in.
  bool read(stream_state& s) {
    bool moved = false;
    for (int rounds = 0; rounds < 64; ++rounds) {
      std::byte* dst;
      std::size_t want;
      if (s.got < prefix_bytes) {
        dst = s.prefix.data() + s.got;
        want = prefix_bytes - s.got;
      } else {
        std::uint32_t bytes;
        std::memcpy(&bytes, s.prefix.data() + 4, 4);
        const std::uint64_t m = s.next_in;
        dst = recv_slots_ + (m % slots_) * capacity_ + (s.got - prefix_bytes);
        want = prefix_bytes + bytes - s.got;
        if (want == 0) {
          finish_frame(s);
          continue;
        }
        if (kind_of(s) == frame_kind::abort) {
          abort_in_.resize(bytes);
          dst = reinterpret_cast<std::byte*>(abort_in_.data()) + (s.got - prefix_bytes);
        }
      }
      const ssize_t k = ::recv(s.fd.get(), dst, want, MSG_DONTWAIT);
      if (k == 0) {
        if (peer_left_) {
          for (std::size_t i = 0; i < streams_; ++i) streams_state_[i].fd.reset();
          return true;
        }
        broken("rank " + std::to_string(peer_) + " closed it (its process ended or left the communicator)");
        return true;
      }
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
        broken(detail::errno_text("recv", errno));
        return true;
      }
      moved = true;
      s.got += static_cast<std::size_t>(k);
      if (s.got == prefix_bytes && !start_frame(s)) return true;
      if (s.got >= prefix_bytes) {
        std::uint32_t bytes;
        std::memcpy(&bytes, s.prefix.data() + 4, 4);
        if (s.got == prefix_bytes + bytes) finish_frame(s);
      }
    }
    return moved;
  }

  static frame_kind kind_of(const stream_state& s) noexcept {
    std::uint32_t k;
    std::memcpy(&k, s.prefix.data(), 4);
    return static_cast<frame_kind>(k);
  }

  // The prefix is in: check it before any byte of the frame's body lands. False: broken.
  bool start_frame(stream_state& s) {
    std::uint32_t bytes;
    std::uint64_t value;
    std::memcpy(&bytes, s.prefix.data() + 4, 4);
    std::memcpy(&value, s.prefix.data() + 8, 8);
    switch (kind_of(s)) {
      case frame_kind::data:
        if (value != s.next_in)
          return broken("rank " + std::to_string(peer_) + " sent message #" + std::to_string(value) + " where #" +
                 std::to_string(s.next_in) + " was due (a protocol error)"), false;
        if (bytes > capacity_)
          return broken("rank " + std::to_string(peer_) + " sent a message of " + std::to_string(bytes) +
                 " bytes into slots of " + std::to_string(capacity_)), false;
        if (value - released_ >= slots_)
          return broken("rank " + std::to_string(peer_) + " sent message #" + std::to_string(value) + " with only " +
                 std::to_string(released_) + " released: it overran the " + std::to_string(slots_) + " slots"), false;
        return true;
      case frame_kind::credit:
        if (bytes != 0 || value < peer_released_ || value > posted_)
          return broken("rank " + std::to_string(peer_) + " sent a credit of " + std::to_string(value) + " (sent " +
                 std::to_string(posted_) + ", freed before " + std::to_string(peer_released_) + ")"), false;
        peer_released_ = value;
        return true;
      case frame_kind::bye:
        if (bytes != 0) return broken("rank " + std::to_string(peer_) + " sent a bye with a body"), false;
        return true;
      case frame_kind::abort:
        if (bytes > 4096)
          return broken("rank " + std::to_string(peer_) + " sent an abort text of " + std::to_string(bytes) + " bytes"),
                 false;
        return true;
    }
    return broken("rank " + std::to_string(peer_) + " sent a frame of unknown kind " +
           std::to_string(static_cast<std::uint32_t>(kind_of(s)))),
           false;
  }

  void finish_frame(stream_state& s) {
    if (kind_of(s) == frame_kind::data) {
      std::uint32_t bytes;
      std::memcpy(&bytes, s.prefix.data() + 4, 4);
      recv_size_[s.next_in % slots_] = bytes;
      std::memcpy(&recv_tag_[s.next_in % slots_], s.prefix.data() + 16, 8);
      s.next_in += streams_;
    } else if (kind_of(s) == frame_kind::abort) {
      if (peer_abort_.empty()) peer_abort_ = abort_in_.empty() ? std::string("(no reason given)") : abort_in_;
    } else if (kind_of(s) == frame_kind::bye) {
      peer_left_ = true;
    }
    s.got = 0;
  }

  int self_, peer_, channel_;
  std::uint64_t slots_;
  std::size_t capacity_;
  std::size_t streams_;
  bool owned_;
  std::byte* send_slots_;
  std::byte* recv_slots_;
  std::vector<std::size_t> recv_size_;
  std::vector<std::uint64_t> recv_tag_;
  std::array<stream_state, 16> streams_state_{};
  std::size_t ready_streams_ = 0;
  std::uint64_t posted_ = 0;         // messages posted
  std::uint64_t peer_released_ = 0;  // of those, freed by the peer
  std::uint64_t released_ = 0;       // messages received and released here
  bool credit_due_ = false;
  std::string abort_text_, abort_in_;
  std::string failure_;     // why the connection failed (empty: it works)
  std::string peer_abort_;  // the peer's abort text, once it sent one
  bool peer_left_ = false;  // the peer sent a bye
};

// One rank's listener and the handshakes of its connections. `find(src, channel)` (given to
// progress) returns the connection a verified hello belongs to, made on first use.
class socket_endpoint {
 public:
  // Most handshakes in progress at once; a new one drops the oldest.
  static constexpr std::size_t pending_max = 64;

  socket_endpoint(int self, int nranks, int channels, int streams, std::uint64_t token, std::uint32_t ipv4,
                  std::chrono::milliseconds timeout)
      : self_(self),
        nranks_(nranks),
        channels_(channels),
        streams_(streams),
        token_(token),
        job_(bootstrap::auth::job_id(token)),
        timeout_(timeout) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ipv4;
    a.sin_port = 0;
    listener_ = fd_owner(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener_) fail_setup(detail::errno_text("socket", errno));
    if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
      fail_setup(detail::errno_text(("bind to " + bootstrap::detail::address_text(a)).c_str(), errno));
    if (::listen(listener_.get(), 128) != 0) fail_setup(detail::errno_text("listen", errno));
    if (!detail::set_nonblocking(listener_.get())) fail_setup(detail::errno_text("fcntl", errno));
    socklen_t len = sizeof a;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    address_.ipv4 = a.sin_addr.s_addr;
    address_.port = a.sin_port;
    bootstrap::auth::random_bytes(address_.nonce);
  }

  const endpoint_address& address() const noexcept { return address_; }
  // The channels whose connections a hello may name (the world's, once it is made).
  void set_channels(int channels) noexcept { channels_ = channels; }
  void set_peers(std::vector<endpoint_address> peers) { peers_ = std::move(peers); }
  std::string peer_text(int r) const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = peers_[static_cast<std::size_t>(r)].ipv4;
    a.sin_port = peers_[static_cast<std::size_t>(r)].port;
    return bootstrap::detail::address_text(a);
  }

  // This rank is the lower of the pair: connects every stream of c to its peer, blocking, bounded
  // by the world's timeout.
  void connect(socket_connection& c) {
    const int peer = c.peer();
    const endpoint_address& to = peers_[static_cast<std::size_t>(peer)];
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = to.ipv4;
    a.sin_port = to.port;
    const auto deadline = clock::now() + timeout_;
    for (int s = 0; s < c.streams(); ++s) {
      if (c.has_stream(s)) continue;
      fd_owner fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (!fd) fail_peer(c, detail::errno_text("socket", errno));
      if (const int e = bootstrap::detail::connect_by(fd.get(), a, deadline))
        fail_peer(c, detail::errno_text(("connect to " + peer_text(peer)).c_str(), e));
      detail::set_socket_options(fd.get(), timeout_);
      const detail::hello h = make_hello(peer, c.channel(), static_cast<std::uint32_t>(s));
      using bootstrap::detail::io;
      if (bootstrap::detail::send_all(fd.get(), reinterpret_cast<const std::byte*>(&h), sizeof h, deadline) != io::ok)
        fail_peer(c, "sending the hello to " + peer_text(peer) + " failed");
      detail::ack k{};
      const io got = bootstrap::detail::recv_exact(fd.get(), reinterpret_cast<std::byte*>(&k), sizeof k, deadline);
      if (got == io::timeout)
        fail_peer(c, "rank " + std::to_string(peer) + " at " + peer_text(peer) + " did not answer the hello within " +
                         std::to_string(timeout_.count()) + " ms");
      if (got == io::closed)
        fail_peer(c, "rank " + std::to_string(peer) + " at " + peer_text(peer) +
                         " closed the connection instead of answering the hello (it refused it, or its process ended)");
      if (got != io::ok || k.magic != detail::ack_magic ||
          !bootstrap::auth::mac_equal(k.mac, detail::hello_mac(token_, detail::purpose_ack, h)))
        fail_peer(c, "the process at " + peer_text(peer) + " did not prove it holds the job token (not rank " +
                         std::to_string(peer) + " of this job)");
      if (!detail::set_nonblocking(fd.get())) fail_peer(c, detail::errno_text("fcntl", errno));
      c.attach(s, std::move(fd));
    }
  }

  // The hello of a request (see Connecting above) names this stream.
  static constexpr std::uint32_t request_stream = 0xffffffffu;

  // This rank is the higher of the pair: asks the peer to connect channel c.channel() (bounded by
  // a second; a lost request is repeated by the caller). False if the request could not be sent.
  bool request(const socket_connection& c) {
    const int peer = c.peer();
    const endpoint_address& to = peers_[static_cast<std::size_t>(peer)];
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = to.ipv4;
    a.sin_port = to.port;
    const auto deadline = clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(1));
    fd_owner fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd || bootstrap::detail::connect_by(fd.get(), a, deadline) != 0) return false;
    const detail::hello h = make_hello(peer, c.channel(), request_stream);
    return bootstrap::detail::send_all(fd.get(), reinterpret_cast<const std::byte*>(&h), sizeof h, deadline) ==
           bootstrap::detail::io::ok;
  }
  // The (peer, channel) connections peers asked this rank to make since the last call.
  std::vector<std::pair<int, int>> take_requests() { return std::exchange(requests_, {}); }

  // Accepts connections and advances handshakes without blocking. True when a stream was attached.
  template <class Find>
  bool progress(Find&& find) {
    bool attached = false;
    const auto now = clock::now();
    // accept4 on an empty queue still costs the kernel a socket's allocation: look at most every
    // 200 us while no handshake is in progress (waits call this in their spin).
    if (pending_.empty() && now - last_accept_ < std::chrono::microseconds(200)) return false;
    last_accept_ = now;
    for (int i = 0; i < 16; ++i) {
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (pending_.size() >= pending_max) pending_.pop_front();
      pending_.push_back({fd_owner(fd), {}, 0, now + std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(2))});
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      const ssize_t k = ::recv(it->fd.get(), reinterpret_cast<std::byte*>(&it->h) + it->got, sizeof it->h - it->got,
                               MSG_DONTWAIT);
      if (k > 0) it->got += static_cast<std::size_t>(k);
      const bool gone = k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      if (it->got == sizeof it->h && it->h.stream == request_stream) {
        if (verify_request(it->h)) {
          requests_.emplace_back(static_cast<int>(it->h.src), static_cast<int>(it->h.channel));
          attached = true;
        }
        it = pending_.erase(it);
      } else if (it->got == sizeof it->h) {
        if (socket_connection* c = verify(it->h, find)) {
          detail::ack a{detail::ack_magic, detail::hello_mac(token_, detail::purpose_ack, it->h)};
          if (::send(it->fd.get(), &a, sizeof a, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof a)) {
            detail::set_socket_options(it->fd.get(), timeout_);
            c->attach(static_cast<int>(it->h.stream), std::move(it->fd));
            attached = true;
          }
        }
        it = pending_.erase(it);
      } else if (gone || now >= it->deadline) {
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return attached;
  }

  template <class F>
  void for_each_fd(F&& f) const {
    f(listener_.get(), false);
    for (const pending& p : pending_) f(p.fd.get(), false);
  }

 private:
  struct pending {
    fd_owner fd;
    detail::hello h;
    std::size_t got;
    clock::time_point deadline;
  };

  template <class Find>
  socket_connection* verify(const detail::hello& h, Find&& find) const {
    if (h.magic != detail::hello_magic || h.job != job_ || h.server_nonce != address_.nonce) return nullptr;
    if (h.dst != static_cast<std::uint32_t>(self_) || h.src >= static_cast<std::uint32_t>(self_) ||
        h.channel >= static_cast<std::uint32_t>(channels_) || h.stream >= static_cast<std::uint32_t>(streams_))
      return nullptr;
    if (!bootstrap::auth::mac_equal(h.mac, detail::hello_mac(token_, detail::purpose_hello, h))) return nullptr;
    socket_connection* c = find(static_cast<int>(h.src), static_cast<int>(h.channel));
    if (c == nullptr || c->has_stream(static_cast<int>(h.stream))) return nullptr;
    return c;
  }

  // A hello to `peer` for (channel, stream), with a fresh nonce and its MAC.
  detail::hello make_hello(int peer, int channel, std::uint32_t stream) const {
    detail::hello h{};
    h.magic = detail::hello_magic;
    h.job = job_;
    h.server_nonce = peers_[static_cast<std::size_t>(peer)].nonce;
    bootstrap::auth::random_bytes(h.client_nonce);
    h.src = static_cast<std::uint32_t>(self_);
    h.dst = static_cast<std::uint32_t>(peer);
    h.channel = static_cast<std::uint32_t>(channel);
    h.stream = stream;
    h.mac = detail::hello_mac(token_, detail::purpose_hello, h);
    return h;
  }

  bool verify_request(const detail::hello& h) const {
    return h.magic == detail::hello_magic && h.job == job_ && h.server_nonce == address_.nonce &&
           h.dst == static_cast<std::uint32_t>(self_) && h.src > static_cast<std::uint32_t>(self_) &&
           h.src < static_cast<std::uint32_t>(nranks_) && h.channel < static_cast<std::uint32_t>(channels_) &&
           bootstrap::auth::mac_equal(h.mac, detail::hello_mac(token_, detail::purpose_hello, h));
  }

  [[noreturn]] void fail_setup(const std::string& why) const {
    collcomm::detail::fail(errc::system, "net<socket>", self_, "cannot listen: " + why);
  }
  [[noreturn]] void fail_peer(const socket_connection& c, const std::string& why) const {
    collcomm::detail::fail(errc::system, "net<socket>", self_,
                           "connecting to rank " + std::to_string(c.peer()) + " on channel " +
                               std::to_string(c.channel()) + ": " + why);
  }

  int self_, nranks_, channels_, streams_;
  std::uint64_t token_, job_;
  std::chrono::milliseconds timeout_;
  fd_owner listener_;
  endpoint_address address_;
  std::vector<endpoint_address> peers_;
  std::deque<pending> pending_;
  std::vector<std::pair<int, int>> requests_;
  clock::time_point last_accept_{};
};

}  // namespace transport::sockets
COLLCOMM_NAMESPACE_END
