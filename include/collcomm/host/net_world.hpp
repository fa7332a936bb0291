// collcomm/host/net_world.hpp — the host executor over a network: one rank per process, its
// messages carried by a transport::net backend (socket: transport/socket/connection.hpp).
//
// A net_world is this process's rank of a world whose ranks may sit on different hosts. It gives
// host::primitives (primitives.hpp) the same message path a shared-memory world gives — wait_slot,
// publish, wait_message, consume — over one backend connection per (channel, peer), made when
// either end first needs it (the lower rank connects). Each message carries a header with the
// sender's call fingerprint and its element count (connection.hpp's slot_header), checked on
// arrival as host::world checks it: ranks that disagree about a call get errc::invalid_argument
// naming both calls. The direct primitives have no network form: direct algorithms do not compile
// over transport::net (compose.hpp).
//
// Progress. A rank moves its connections only while it waits inside a call (there is no thread):
// every wait drives every connection of the rank — writes still queued, credits, reads, new
// connections — then sleeps in poll(2) on all its sockets for at most a slice. A peer that waits
// is therefore always moving what this rank needs from it.
//
// Failures. Every wait is bounded by options::timeout (errc::timeout naming the awaited peer and
// the connection's state). A connection that fails (the peer's process ended, a reset, a protocol
// error) throws naming the peer and the channel. A failure after data moved marks the world
// failed (every later call throws errc::aborted quoting it) and sends the text to every connected
// peer, best effort, so that their waits end with it rather than at their timeout. abort() does
// the same by request.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/host/connection.hpp>
#include <collcomm/host/wait.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/options.hpp>
#include <collcomm/transport/socket/connection.hpp>
#include <collcomm/transport/tags.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

// The knobs of a net world. Checked when it is made (errc::invalid_argument naming the field).
struct net_options : common_options {
  net_options() {
    // Each channel has its own connections (and, for sockets, its own TCP streams); a rank runs
    // its channels one after the other.
    channels = 1;
    // The largest message. Network messages pay a fixed cost each, so they are larger than the
    // shared-memory world's.
    slot_bytes = std::size_t{512} << 10;
    slots = 4;
    timeout = std::chrono::milliseconds(30000);
  }
  // The socket backend's knobs (streams per connection, interface).
  transport::sockets::socket_options socket;
  // The host this rank counts as (hierarchical algorithms group ranks by it); 0: derived from the
  // hostname, the boot id and the network and IPC namespaces (COLLCOMM_HOST_ID overrides).
  std::uint64_t host_id = 0;
};

template <class Backend>
struct net_backend;  // the connection and endpoint types of a backend

template <>
struct net_backend<transport::socket> {
  using connection = transport::sockets::socket_connection;
  using endpoint = transport::sockets::socket_endpoint;
};

template <class Backend>
class net_world {
 public:
  using connection_type = typename net_backend<Backend>::connection;
  using endpoint_type = typename net_backend<Backend>::endpoint;

  // Rank `rank` of `nranks`, listening on `ep` (whose peers' addresses are set).
  net_world(int rank, int nranks, const net_options& opt, std::unique_ptr<endpoint_type> ep)
      : rank_(rank),
        nranks_(nranks),
        opt_(opt),
        ep_(std::move(ep)),
        links_(static_cast<std::size_t>(opt.channels) * static_cast<std::size_t>(nranks)),
        scratch_(new (std::align_val_t{64}) std::byte[scratch_bytes()]) {}
  // Waits (bounded by the timeout) until every message this rank sent was released by its
  // receiver, so that closing cannot reset a connection whose last bytes are still in flight;
  // then says bye on every connection (a peer that reads the end of the connection next knows
  // this rank left, rather than died) and ends their writing side.
  ~net_world() {
    try {
      if (failure_.empty()) {
        const auto deadline = std::chrono::steady_clock::now() + opt_.timeout;
        auto drained = [&] {
          for (const link& l : links_)
            if (l.c && !l.c->drained()) return false;
          return true;
        };
        while (!drained() && std::chrono::steady_clock::now() < deadline)
          if (!progress_all()) poll_all(5);
      }
      for (link& l : links_)
        if (l.c) l.c->send_bye();
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      auto flushed = [&] {
        for (const link& l : links_)
          if (l.c && !l.c->flushed()) return false;
        return true;
      };
      while (!flushed() && std::chrono::steady_clock::now() < until)
        if (!progress_all()) poll_all(5);
      for (link& l : links_)
        if (l.c) l.c->shutdown_writes();
    } catch (...) {}
    ::operator delete[](scratch_, std::align_val_t{64});
  }
  net_world(const net_world&) = delete;
  net_world& operator=(const net_world&) = delete;

  int size() const noexcept { return nranks_; }
  int local_rank() const noexcept { return rank_; }
  const net_options& opts() const noexcept { return opt_; }
  bool is_process() const noexcept { return true; }

  std::size_t scratch_bytes() const noexcept { return 5 * opt_.slot_bytes + 128; }
  std::byte* scratch(int) noexcept { return scratch_; }
  std::uint64_t next_call_seq(int) noexcept { return calls_++; }

  // ---- messages --------------------------------------------------------------------------------
  std::byte* wait_slot(int channel, int src, int dst, const char* what, const call_fingerprint* = nullptr) {
    link& l = link_of(channel, dst, what);
    wait(what, l, [&] { return l.c->can_send(l.sent); },
         [&] {
           return "waiting for rank " + std::to_string(dst) + " to free a slot on channel " + std::to_string(channel) +
                  " (" + l.c->state_text() + ")";
         });
    (void)src;
    return l.c->send_buffer(l.sent) + connection::header_bytes;
  }
  void publish(int channel, int src, int dst, index_t elems, std::size_t bytes, const call_fingerprint& call) {
    link& l = link_of(channel, dst, "publish");
    auto* h = reinterpret_cast<slot_header*>(l.c->send_buffer(l.sent));
    h->call = call;
    h->elems = elems;
    (void)src;
    l.c->post(l.sent++, connection::header_bytes + bytes);
  }
  const std::byte* wait_message(int channel, int src, int dst, index_t elems, const call_fingerprint& call,
                                const char* what) {
    link& l = link_of(channel, src, what);
    wait(what, l, [&] { return l.c->arrived(l.received); },
         [&] {
           return "waiting for message #" + std::to_string(l.received) + " from rank " + std::to_string(src) +
                  " on channel " + std::to_string(channel) + " (" + l.c->state_text() + ")";
         });
    const std::uint64_t m = l.received;
    slot_header h;
    std::memcpy(static_cast<void*>(&h), l.c->recv_buffer(m), sizeof h);
    const unsigned fields = differing_fields(call, h.call);
    const std::size_t body = l.c->recv_bytes(m);
    if (fields != 0 || h.elems != elems) [[unlikely]] {
      const std::string where = "message #" + std::to_string(m) + " from rank " + std::to_string(src) + " on channel " +
                                std::to_string(channel);
      if (fields != 0) disagree(what, dst, src, call, h.call, fields, where);
      disagree(what, dst, src, call, h.call, 0,
               where + ", of " + std::to_string(h.elems) + " elements where rank " + std::to_string(dst) + " expects " +
                   std::to_string(elems));
    }
    if (body < connection::header_bytes) fail(errc::system, what, rank_, "a message without its header");
    return l.c->recv_buffer(m) + connection::header_bytes;
  }
  void consume(int channel, int src, int) {
    link& l = link_of(channel, src, "consume");
    l.c->release(l.received++);
  }

  // ---- no direct primitives over a network (never called: compose.hpp refuses them) -----------
  struct exposed_buffers {
    const void* in;
    index_t in_elems;
    void* out;
    index_t out_elems;
    call_fingerprint call;
  };
  void expose(int, int, const exposed_buffers&) { no_direct(); }
  exposed_buffers exposed(int, int) const { no_direct(); }
  void barrier(int, int, const char*, const call_fingerprint* = nullptr) { no_direct(); }

  // ---- failure ---------------------------------------------------------------------------------
  [[noreturn]] void fail(errc code, const char* what, int rank, const std::string& msg) {
    const std::string text = collcomm::detail::format_error(what, rank, msg);
    mark_failed(text);
    throw error(code, rank, text);
  }
  [[noreturn]] void disagree(const char* what, int rank, int peer, const call_fingerprint& mine,
                             const call_fingerprint& theirs, unsigned fields, const std::string& where) {
    fail(errc::invalid_argument, what, rank,
         "rank " + std::to_string(rank) + " is in " + to_string(mine) + ", but " + where + " belongs to rank " +
             std::to_string(peer) + "'s " + to_string(theirs) + ": the ranks disagree on " +
             (fields != 0 ? disagreement_text(fields)
                          : std::string("how the call splits into messages (the peers of a send_recv, or the "
                                        "tuning's channels or slot bytes)")) +
             "; every rank must make the same collective calls, in the same order, with the same arguments");
  }
  void check_usable(const char* what, int rank) const {
    if (!failure_.empty())
      collcomm::detail::fail(errc::aborted, what, rank,
                             "this communicator is unusable after an earlier failure (" + failure_ +
                                 "); make a new one");
  }
  // Marks the world aborted and tells every connected peer, best effort. Never throws.
  void abort(int by, const std::string& reason) noexcept {
    try {
      std::string text = "rank " + std::to_string(by) + " aborted the communicator";
      if (!reason.empty()) text += " (" + reason + ")";
      mark_failed(text);
    } catch (...) {}
  }

 private:
  struct link {
    std::unique_ptr<connection_type> c;
    std::uint64_t sent = 0, received = 0;
  };

  [[noreturn]] void no_direct() const {
    collcomm::detail::fail(errc::internal, "net_world", rank_, "a direct primitive over a network transport");
  }

  void mark_failed(const std::string& text) noexcept {
    if (!failure_.empty()) return;
    try {
      failure_ = text;
    } catch (...) {}
    for (link& l : links_)
      if (l.c) l.c->send_abort(text);
  }

  // The connection (channel, peer), made (and, from the lower rank, connected) on first use.
  link& link_of(int channel, int peer, const char* what) {
    if (peer == rank_ || peer < 0 || peer >= nranks_ || channel < 0 || channel >= opt_.channels)
      fail(errc::internal, what, rank_,
           "a message to or from rank " + std::to_string(peer) + " on channel " + std::to_string(channel) +
               " (this rank is " + std::to_string(rank_) + " of " + std::to_string(nranks_) + ")");
    link& l = make(peer, channel);
    if (!l.c->ready() && rank_ < peer) {
      try {
        ep_->connect(*l.c);
      } catch (const error& e) {
        mark_failed(e.what());
        throw;
      }
    }
    return l;
  }
  link& make(int peer, int channel) {
    link& l = links_[static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(peer)];
    if (!l.c)
      l.c = std::make_unique<connection_type>(rank_, peer, channel, opt_.slots,
                                              connection::header_bytes + opt_.slot_bytes, opt_.socket.streams);
    return l;
  }

  bool progress_all() {
    bool moved = ep_->progress([&](int src, int channel) { return make(src, channel).c.get(); });
    for (link& l : links_)
      if (l.c) moved |= l.c->progress();
    return moved;
  }

  // Sleeps in poll(2) on every socket of this rank for at most `ms` milliseconds.
  void poll_all(int ms) {
    fds_.clear();
    auto add = [&](int fd, bool out) { fds_.push_back({fd, static_cast<short>(POLLIN | (out ? POLLOUT : 0)), 0}); };
    ep_->for_each_fd(add);
    for (link& l : links_)
      if (l.c) l.c->for_each_fd(add);
    ::poll(fds_.data(), fds_.size(), ms);
  }

  // A peer's abort or a failed connection that the awaited link depends on ends the wait.
  void check_links(const char* what, const link& awaited) {
    for (const link& l : links_)
      if (l.c && !l.c->peer_abort().empty())
        fail(errc::aborted, what, rank_,
             "rank " + std::to_string(l.c->peer()) + " gave up: " + l.c->peer_abort());
    if (!awaited.c->failure().empty()) fail(errc::system, what, rank_, awaited.c->failure());
    if (awaited.c->peer_left() && awaited.c->closed())
      fail(errc::aborted, what, rank_,
           "rank " + std::to_string(awaited.c->peer()) + " left the communicator (destroyed it) while rank " +
               std::to_string(rank_) + " waits for it on channel " + std::to_string(awaited.c->channel()) +
               ": the ranks disagree on the calls they make");
  }

  // Drives every connection until ready(); past the timeout throws errc::timeout with awaited().
  template <class Ready, class Awaited>
  void wait(const char* what, const link& on, Ready&& ready, Awaited&& awaited) {
    if (ready()) return;
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + opt_.timeout;
    int idle = 0;
    try {
      for (;;) {
        if (progress_all()) {
          idle = 0;
          if (ready()) return;
          continue;
        }
        if (ready()) return;
        check_links(what, on);
        if (!failure_.empty()) check_usable(what, rank_);
        if (clock::now() >= deadline)
          fail(errc::timeout, what, rank_,
               "timed out after " + std::to_string(opt_.timeout.count()) + " ms " + awaited() +
                   "; does every rank call the same collectives with the same arguments, and is the network up?");
        if (++idle < 256) {
          detail::cpu_relax();
          continue;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        poll_all(static_cast<int>(std::clamp<long long>(left, 0, 20)));
      }
    } catch (const error& e) {
      mark_failed(e.what());
      throw;
    }
  }

  int rank_;
  int nranks_;
  net_options opt_;
  std::unique_ptr<endpoint_type> ep_;
  std::vector<link> links_;  // (channel, peer)
  std::byte* scratch_;
  std::uint64_t calls_ = 0;
  std::string failure_;
  std::vector<pollfd> fds_;
};

}  // namespace host
COLLCOMM_NAMESPACE_END
