// collcomm/host/net_world.hpp — the host executor over a network: one rank per process (or per
// thread), its messages carried by a transport::net backend (socket: transport/socket/connection.hpp;
// ibverbs: net_ibverbs.hpp).
//
// A net_world is one rank of a world whose ranks may sit on different hosts. It gives
// host::primitives (primitives.hpp) the same message path a shared-memory world gives — wait_slot,
// publish, wait_message, consume — over one backend connection per (channel, peer), which the
// backend's endpoint makes (net_backend below): the socket endpoint when either end first needs it
// (the lower rank connects); the ibverbs endpoint hands over connections it made and connected when
// the communicator was made. Each message carries a header with the
// sender's call fingerprint and its element count (connection.hpp's slot_header), checked on
// arrival as host::world checks it: ranks that disagree about a call get errc::invalid_argument
// naming both calls. The direct primitives have no network form: direct algorithms do not compile
// over transport::net (compose.hpp).
//
// Progress. A rank moves its connections only while it waits inside a call (there is no thread):
// every wait drives every connection of the rank — writes still queued, credits, reads, new
// connections — then, idle, sleeps for at most a slice: in poll(2) on all its sockets where the
// backend has file descriptors, else (verbs: completions are polled) a yield or a sleep of some
// tens of microseconds. A peer that waits is therefore always moving what this rank needs from it.
//
// Failures. Every wait is bounded by options::timeout (errc::timeout naming the awaited peer and
// the connection's state). A connection that fails (the peer's process ended, a reset, a protocol
// error) throws naming the peer and the channel. A failure after data moved marks the world
// failed (every later call throws errc::aborted quoting it) and sends the text to every connected
// peer, best effort, so that their waits end with it rather than at their timeout. abort() does
// the same by request.
#pragma once

#include <collcomm/bootstrap/auth.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/host/connection.hpp>
#include <collcomm/host/wait.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/options.hpp>
#include <collcomm/transport/socket/connection.hpp>
#include <collcomm/transport/tags.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {
struct verbs_api;  // transport/ibverbs/api.hpp
}  // namespace transport
namespace host {

// The ibverbs backend's knobs (net_ibverbs.hpp).
struct ibverbs_net_options {
  // The verbs calls; null: transport::load_verbs() (libibverbs by dlopen). A test passes its own
  // table (an in-process double); it must outlive the communicator.
  const transport::verbs_api* verbs = nullptr;
  // The device and port, "mlx5_0" or "mlx5_0:1"; empty: COLLCOMM_IB_HCA, else the first device
  // with an ACTIVE port.
  std::string hca;
  // The RoCE GID index; negative: COLLCOMM_IB_GID_INDEX, else 0.
  int gid_index = -1;
  // After this long without a completion on a connection, a 0-byte write probes the peer, so a
  // peer that vanished is seen even by a rank that only waits for it (0: never).
  std::chrono::milliseconds probe_interval{1000};
};

// GPU buffers: how ranks of one host (equal host ids) reach each other (net_options::same_host).
enum class same_host_path : std::uint8_t {
  gpu_memory,  // through GPU memory, as communicator<nvlink> of processes: the network only between hosts
  network      // every pair through the proxy and the network
};

// The knobs of a net world. Checked when it is made (errc::invalid_argument naming the field).
struct net_options : common_options {
  net_options() {
    // Each channel has its own connections (and, for sockets, its own TCP streams); a rank runs
    // its channels one after the other.
    channels = 1;
    // The largest message. Network messages pay a fixed cost each and a credit's round trip bounds
    // what is in flight (slots x slot_bytes per direction), so they are larger than the
    // shared-memory world's: 2 MiB (bench/RESULTS.md, "Between hosts": 2 MiB slots moved 64 MiB
    // in half the time of 512 KiB ones). A connection holds 2 x slots x slot_bytes of memory
    // (16 MiB), made when a call first uses it.
    slot_bytes = std::size_t{2} << 20;
    slots = 4;
    timeout = std::chrono::milliseconds(30000);
  }
  // The socket backend's knobs (streams per connection, interface).
  transport::sockets::socket_options socket;
  // The ibverbs backend's knobs (verbs table, device).
  ibverbs_net_options ibverbs;
  // The host this rank counts as (hierarchical algorithms group ranks by it); 0: derived from the
  // hostname, the boot id and the network and IPC namespaces (COLLCOMM_HOST_ID overrides).
  std::uint64_t host_id = 0;
  // GPU buffers: ranks of one host reach each other through GPU memory (gpu_memory: CUDA IPC, as
  // communicator<nvlink> of processes; staged through shared host memory where one of the host's
  // GPUs lacks peer access to another) and only ranks of other hosts through the network; or
  // every pair through the network (COLLCOMM_NET_SAME_HOST=network). Host buffers always take the
  // network.
  same_host_path same_host = same_host_path::gpu_memory;
};

// What every rank publishes when a net communicator is made, besides its backend's part.
struct net_peer_info {
  std::uint64_t host_id;
  std::array<unsigned char, 16> gpu;  // the GPU's uuid (zero for host buffers)
};

// A backend of net_world. Each specialization names
//   connection   the data path of one (channel, peer): send_buffer, can_send, post, progress,
//                arrived, recv_buffer, recv_bytes, release, and the state the world reads
//                (failure, peer_abort, peer_left, closed, drained, flushed, state_text) and
//                writes (send_abort, send_bye, shutdown_writes);
//   endpoint     a rank's side of the world's connections;
//   make_endpoint(boot, rank, nranks, options, mine, all)
//                collective over the bootstrap: makes the endpoint and fills `all` with every
//                rank's net_peer_info (`mine` this rank's);
//   make_connection(endpoint, rank, peer, channel, options)
//                the connection (channel, peer), called once, on its first use;
//   make_proxy_connection(endpoint, rank, peer, channel, slots, slot_bytes, streams, send, recv)
//                GPU buffers: the connection (channel, peer) whose slots are the GPU world's FIFOs
//                (gpu/net_proxy.hpp), whose messages carry tags (post's tag, recv_tag); a backend
//                with make_gpu_endpoint makes its endpoint (and connections) after the GPU world,
//                over those FIFOs; else with make_endpoint, before it.
// An endpoint with connect(connection&) makes connections lazily: the world calls it from the
// lower rank of a pair whose connection is not ready(), and drives the endpoint's progress(find)
// (incoming connections). An endpoint with for_each_fd lets the world sleep in poll(2).
template <class Backend>
struct net_backend;

// TCP: each rank listens on one port, publishes its address, and connects lazily (the lower rank).
template <>
struct net_backend<transport::socket> {
  using connection = transport::sockets::socket_connection;
  using endpoint = transport::sockets::socket_endpoint;

  // Collective: the connections' key (the bootstrap's token, else a random key rank 0 draws), this
  // rank's listener, and one all_gather of every rank's address and net_peer_info.
  template <class B>
  static std::unique_ptr<endpoint> make_endpoint(B& boot, int rank, int nranks, const net_options& opt,
                                                 const net_peer_info& mine, std::vector<net_peer_info>& all) {
    if (opt.socket.streams < 1 || opt.socket.streams > 16)
      collcomm::detail::fail(errc::invalid_argument, "communicator<net>", rank,
                             "option 'socket.streams' = " + std::to_string(opt.socket.streams) +
                                 " is out of range [1, 16]");
    std::uint64_t token = 0;
    if constexpr (requires { boot.token(); }) {
      token = boot.token();
    } else {
      const std::uint64_t key = bootstrap::auth::random_u64();
      std::vector<std::uint64_t> keys(static_cast<std::size_t>(nranks));
      boot.all_gather(std::as_bytes(std::span<const std::uint64_t>(&key, 1)), std::as_writable_bytes(std::span(keys)));
      token = keys[0];
    }
    std::uint32_t ipv4 = 0;
    if (!opt.socket.ifname.empty()) {
      ipv4 = transport::sockets::detail::interface_address(opt.socket.ifname);
      if (ipv4 == 0)
        collcomm::detail::fail(errc::invalid_argument, "communicator<net>", rank,
                               "option 'socket.ifname' (or COLLCOMM_SOCKET_IFNAME) = '" + opt.socket.ifname +
                                   "' names no interface with an IPv4 address here");
    } else if constexpr (requires { boot.local_ipv4(); }) {
      ipv4 = boot.local_ipv4();
    }
    if (ipv4 == 0) ipv4 = htonl(INADDR_LOOPBACK);
    auto ep = std::make_unique<endpoint>(rank, nranks, opt.channels, opt.socket.streams, token, ipv4, opt.timeout);
    struct published {
      transport::sockets::endpoint_address address;
      net_peer_info info;
    };
    const published me{ep->address(), mine};
    std::vector<published> every(static_cast<std::size_t>(nranks));
    boot.all_gather(std::as_bytes(std::span<const published>(&me, 1)), std::as_writable_bytes(std::span(every)));
    std::vector<transport::sockets::endpoint_address> addresses;
    all.clear();
    for (const published& p : every) {
      addresses.push_back(p.address);
      all.push_back(p.info);
    }
    ep->set_peers(std::move(addresses));
    return ep;
  }
  // The connection's slots hold the world's header and then the message.
  static std::unique_ptr<connection> make_connection(endpoint&, int rank, int peer, int channel,
                                                     const net_options& opt) {
    return std::make_unique<connection>(rank, peer, channel, opt.slots, host::connection::header_bytes + opt.slot_bytes,
                                        opt.socket.streams);
  }
  // The GPU proxy's connection (channel, peer) (gpu/net_proxy.hpp): its slots are the GPU world's
  // FIFOs, `send` this rank's outbox to the peer, `recv` its inbox from it.
  static std::unique_ptr<connection> make_proxy_connection(endpoint&, int rank, int peer, int channel, int slots,
                                                           std::size_t slot_bytes, int streams, std::byte* send,
                                                           std::byte* recv) {
    return std::make_unique<connection>(rank, peer, channel, slots, slot_bytes, streams,
                                        typename connection::external_slots{send, recv});
  }
};

// What the users of a backend (net_world here, the GPU's proxy in gpu/net_proxy.hpp) ask of it.
template <class Backend>
struct net_backend_traits {
  using endpoint_type = typename net_backend<Backend>::endpoint;
  using connection_type = typename net_backend<Backend>::connection;
  // Connections made on first use, connected by the lower rank (socket), or all made with the
  // endpoint (ibverbs).
  static constexpr bool lazy = requires(endpoint_type& e, connection_type& c) { e.connect(c); };
  // Idle waits sleep in poll(2) on the backend's file descriptors, else briefly.
  static constexpr bool has_fds = requires(endpoint_type& e) { e.for_each_fd([](int, bool) {}); };

  // Sleeps in poll(2) for at most `ms` milliseconds on the endpoint's descriptors and those of the
  // connections of `links` (each with a pointer `c`, null where not made yet); `fds` is the
  // caller's scratch. Backends with file descriptors only.
  template <class Links>
  static void poll_fds(endpoint_type& ep, const Links& links, std::vector<pollfd>& fds, int ms) {
    fds.clear();
    auto add = [&](int fd, bool out) { fds.push_back({fd, static_cast<short>(POLLIN | (out ? POLLOUT : 0)), 0}); };
    ep.for_each_fd(add);
    for (const auto& l : links)
      if (l.c) l.c->for_each_fd(add);
    ::poll(fds.data(), fds.size(), ms);
  }
};

template <class Backend>
class net_world {
 public:
  using backend_type = net_backend<Backend>;
  using connection_type = typename backend_type::connection;
  using endpoint_type = typename backend_type::endpoint;
  static constexpr bool lazy = net_backend_traits<Backend>::lazy;
  static constexpr bool has_fds = net_backend_traits<Backend>::has_fds;

  // Rank `rank` of `nranks` over the endpoint `ep` (backend_type::make_endpoint made it).
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
  // The connection (channel, peer), null before its first use (tests, diagnostics).
  connection_type* connection_of(int channel, int peer) noexcept {
    if (channel < 0 || channel >= opt_.channels || peer < 0 || peer >= nranks_) return nullptr;
    return links_[static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(peer)]
        .c.get();
  }

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
  // Without waiting (no progress is made): the next slot when it is free now, else null.
  std::byte* try_slot(int channel, int, int dst) {
    link& l = link_of(channel, dst, "send");
    return l.c->ready() && l.c->can_send(l.sent) ? l.c->send_buffer(l.sent) + connection::header_bytes : nullptr;
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
    if constexpr (lazy) {
      if (!l.c->ready() && rank_ < peer) {
        try {
          ep_->connect(*l.c);
        } catch (const error& e) {
          mark_failed(e.what());
          throw;
        }
      }
    }
    return l;
  }
  link& make(int peer, int channel) {
    link& l = links_[static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(peer)];
    if (!l.c) l.c = backend_type::make_connection(*ep_, rank_, peer, channel, opt_);
    return l;
  }

  bool progress_all() {
    bool moved = false;
    if constexpr (lazy) moved = ep_->progress([&](int src, int channel) { return make(src, channel).c.get(); });
    for (link& l : links_)
      if (l.c) moved |= l.c->progress();
    return moved;
  }

  // Sleeps for at most `ms` milliseconds: in poll(2) on every socket of this rank (backends with
  // file descriptors); else a yield while the wait has been idle for fewer than 1024 rounds, then a
  // sleep of 50 microseconds.
  void poll_all(int ms, int idle = 1024) {
    if constexpr (has_fds) {
      net_backend_traits<Backend>::poll_fds(*ep_, links_, fds_, ms);
    } else {
      if (ms <= 0 || idle < 1024)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // A peer's abort or a failed connection that the awaited link depends on ends the wait: the
  // awaited peer's abort at once, another peer's after grace() (`foreign` holds since when this
  // wait has seen one) — that peer may be one that waits on this rank and timed out a moment
  // sooner, and this rank's own report, if its deadline comes meanwhile, names the cause better.
  void check_links(const char* what, const link& awaited, std::chrono::steady_clock::time_point& foreign) {
    const link* other = nullptr;
    for (const link& l : links_)
      if (l.c && !l.c->peer_abort().empty()) {
        if (l.c->peer() == awaited.c->peer())
          fail(errc::aborted, what, rank_, "rank " + std::to_string(l.c->peer()) + " gave up: " + l.c->peer_abort());
        if (other == nullptr) other = &l;
      }
    if (other != nullptr) {
      const auto now = std::chrono::steady_clock::now();
      if (foreign == std::chrono::steady_clock::time_point{}) foreign = now;
      if (now - foreign >= grace())
        fail(errc::aborted, what, rank_,
             "rank " + std::to_string(other->c->peer()) + " gave up: " + other->c->peer_abort());
    }
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
    auto idle_since = clock::now();
    clock::time_point foreign{};
    try {
      for (;;) {
        if (progress_all()) {
          idle = 0;
          idle_since = clock::now();
          if (ready()) return;
          continue;
        }
        if (ready()) return;
        check_links(what, on, foreign);
        if (!failure_.empty()) check_usable(what, rank_);
        if (clock::now() >= deadline) timed_out(what, on.c->peer(), awaited());
        // Spin a little (a message about to arrive is taken at once), then sleep until a socket
        // moves: ranks that share a core must not spin on the core the rank with the data needs.
        ++idle;
        if (clock::now() - idle_since < spin_time) {
          detail::cpu_relax();
          continue;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        poll_all(static_cast<int>(std::clamp<long long>(left, 0, 20)), idle);
      }
    } catch (const error& e) {
      mark_failed(e.what());
      throw;
    }
  }

  // A wait that timed out tells its peers at once, then listens a little longer: a stall spreads
  // from rank to rank within microseconds, so the rank it waits for (`peer`) has often timed out
  // too, for a cause further along (a cut link, a dead host). That peer's text names the cause;
  // this rank's own names only its neighbour. Only the awaited peer's text is taken: another
  // peer may be one that waits on this rank, whose text names this rank.
  [[noreturn]] void timed_out(const char* what, int peer, const std::string& awaited) {
    const std::string text = "timed out after " + std::to_string(opt_.timeout.count()) + " ms " + awaited +
                             "; does every rank call the same collectives with the same arguments, and is the "
                             "network up?";
    const std::string mine = collcomm::detail::format_error(what, rank_, text);
    mark_failed(mine);
    const auto until = std::chrono::steady_clock::now() + grace();
    while (std::chrono::steady_clock::now() < until) {
      for (const link& l : links_)
        if (l.c && l.c->peer() == peer && !l.c->peer_abort().empty() &&
            l.c->peer_abort().find(mine) == std::string::npos)  // not an echo
          throw error(errc::aborted, rank_,
                      collcomm::detail::format_error(
                          what, rank_, "rank " + std::to_string(l.c->peer()) + " gave up: " + l.c->peer_abort()));
      try {
        if (!progress_all()) poll_all(1);
      } catch (const error&) {
        break;  // a connection failed while listening: the timeout stays the report
      }
    }
    throw error(errc::timeout, rank_, mine);
  }

  // How long a wait that has news of a stall elsewhere listens for a better report (see timed_out).
  std::chrono::milliseconds grace() const {
    return std::clamp(opt_.timeout / 8, std::chrono::milliseconds{1}, std::chrono::milliseconds{250});
  }

  static constexpr std::chrono::microseconds spin_time{20};

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
