// collcomm/net_ibverbs.hpp — communicator<transport::net<transport::ibverbs>>: collectives between
// hosts over InfiniBand or RoCE, host buffers or GPU buffers.
//
//   (this header; it needs the libibverbs-dev headers; links ${CMAKE_DL_LIBS})
//   using net = collcomm::transport::net<collcomm::transport::ibverbs>;
//   collcomm::communicator<net> comm(boot);                 // collective over the bootstrap
//   collcomm::all_reduce(comm, send, recv, count);          // runs on this thread
//
// The connections are transport/ibverbs/connection.hpp's: one reliable-connected queue pair per
// (channel, peer), messages as RDMA WRITE WITH IMMEDIATE into the peer's slots, credits as RDMA
// WRITEs. host/net_world.hpp drives them as it drives sockets: progress only while a call waits,
// every wait bounded by options::timeout, a failure marks the communicator failed and is sent to
// every peer (an abort notice: the connection's notice block), a rank that leaves says bye.
//
// Set-up is eager: the constructor opens the device (options.ibverbs.hca, else COLLCOMM_IB_HCA,
// else the first device with an ACTIVE port), makes every queue pair of this rank — nranks − 1
// peers × options.channels — and exchanges them in one all_gather over the bootstrap, in which
// each rank contributes a header (host identity, status) and options.channels × nranks queue-pair
// infos of sizeof(transport::ibverbs_qp_info) = 88 bytes. The whole result, about nranks × nranks
// × channels × 88 bytes, must fit one bootstrap message (bootstrap::max_payload, 64 MiB: some 870
// ranks with one channel); a larger world is refused with errc::invalid_argument before anything is
// made. A rank that cannot open its device or make its queue pairs says so in the exchange, and
// every rank's constructor throws naming it. Every queue pair is connected when the constructor
// returns; a peer may write to this rank as soon as it returned on both sides.
//
// GPU buffers (include <collcomm/gpu.hpp> too; gpu/net_proxy.hpp): the queue pairs are made when the
// GPU world is, towards the ranks of other hosts only, with the world's FIFOs as their slots —
// the pinned host memory the kernels write and read, registered with ibv_reg_mr — and tagged
// messages (the FIFO's size word travels as the tag); the proxy thread posts and releases them.
//
// The verbs calls come from options.ibverbs.verbs where set (a test's double), else from
// transport::load_verbs() (libibverbs by dlopen: a program starts without rdma-core and gets
// errc::system when it makes this communicator).
//
// Each slot holds the world's 64-byte message header and then up to options.slot_bytes bytes
// (rounded up to 64), so options.slot_bytes is at most 2^24 − 129.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/connection.hpp>
#include <collcomm/host/net_world.hpp>
#include <collcomm/net.hpp>
#include <collcomm/transport/ibverbs/api.hpp>
#include <collcomm/transport/ibverbs/connection.hpp>
#include <collcomm/transport/tags.hpp>

#include <algorithm>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace host {
namespace ibverbs_net {

// One (channel, peer) of a net_world over ibverbs: the queue pair's connection, with the state the
// world reads. A failure of the connection is recorded (failure()), never thrown: the world
// decides whether it matters, as with sockets.
class link {
 public:
  explicit link(std::unique_ptr<transport::ibverbs_connection> c) : c_(std::move(c)) {}
  link(const link&) = delete;
  link& operator=(const link&) = delete;

  int peer() const noexcept { return c_->peer(); }
  int channel() const noexcept { return c_->channel(); }
  bool ready() const noexcept { return true; }  // connected when the communicator was made

  // ---- the data path ---------------------------------------------------------------------------
  std::byte* send_buffer(std::uint64_t m) noexcept { return c_->send_buffer(m); }
  bool can_send(std::uint64_t m) const noexcept { return failure_.empty() && !peer_left_ && c_->can_send(m); }
  void post(std::uint64_t m, std::size_t bytes, std::uint64_t tag = 0) {
    guarded([&] { c_->post(m, bytes, tag); });
  }
  // The GPU proxy's view (the socket connection's names): messages that arrived, the tag of one,
  // messages of this side's the peer released.
  std::uint64_t arrived_total() const noexcept { return c_->arrived_count(); }
  std::uint64_t recv_tag(std::uint64_t m) const noexcept { return c_->recv_tag(m); }
  std::uint64_t peer_released() const noexcept { return c_->peer_released(); }
  bool arrived(std::uint64_t m) const noexcept { return c_->arrived(m); }
  const std::byte* recv_buffer(std::uint64_t m) const noexcept { return c_->recv_buffer(m); }
  std::size_t recv_bytes(std::uint64_t m) const noexcept { return c_->recv_bytes(m); }
  void release(std::uint64_t m) {
    if (peer_left_) return;
    guarded([&] { c_->release(m); });
  }

  // Polls the completion queue, reads the peer's notice; true when anything changed. The notice
  // word is read before the poll: a bye read then means every message of the peer's is in this
  // poll's completions (transport/ibverbs/connection.hpp, notices).
  bool progress() {
    if (!failure_.empty() || peer_left_) return false;
    const transport::ibverbs_notice before = c_->peer_notice();
    bool moved = false;
    try {
      moved = c_->progress();
      if (bye_due_ && c_->post_notice(transport::ibverbs_notice::bye)) {
        bye_due_ = false;
        moved = true;
      }
    } catch (const error& e) {
      // Writes to a peer that left or gave up fail: that is its bye or abort, not a new failure.
      if (!note(before)) broken(e.what());
      return true;
    }
    return note(before) || moved;
  }

  // Why the connection failed (empty: it works), and the abort text the peer sent (empty: none).
  const std::string& failure() const noexcept { return failure_; }
  const std::string& peer_abort() const noexcept { return peer_abort_; }
  bool peer_left() const noexcept { return peer_left_; }
  // Nothing more can arrive: the peer left (its bye came after its last message), or the
  // connection failed.
  bool closed() const noexcept { return peer_left_ || !failure_.empty(); }
  // Every message posted was released by the peer and every release credited to it.
  bool drained() const noexcept {
    return !failure_.empty() || peer_left_ || (c_->peer_released() == c_->sent() && !c_->credit_pending());
  }
  // Writes a bye notice after everything posted (now, or from progress() once the send queue has room).
  void send_bye() {
    if (!failure_.empty() || peer_left_ || abort_sent_ || bye_sent_) return;
    bye_sent_ = true;
    guarded([&] { bye_due_ = !c_->post_notice(transport::ibverbs_notice::bye); });
  }
  // Every write posted has completed (the bye included).
  bool flushed() const noexcept {
    return !failure_.empty() || peer_left_ ||
           (!bye_due_ && !c_->notice_pending() && c_->send_queue_idle() && !c_->credit_pending());
  }
  void shutdown_writes() noexcept {}
  // Writes `why` as an abort notice, best effort (never blocks, never throws).
  void send_abort(const std::string& why) noexcept {
    if (!failure_.empty() || abort_sent_) return;
    try {
      if (!c_->post_notice(transport::ibverbs_notice::abort, why)) {
        c_->progress();  // retires completed send-queue entries
        if (!c_->post_notice(transport::ibverbs_notice::abort, why)) return;
      }
      abort_sent_ = true;
    } catch (...) {}
  }

  // What the connection knows, for a timeout's message.
  std::string state_text() const {
    return "messages sent " + std::to_string(c_->sent()) + ", freed by rank " + std::to_string(peer()) + " " +
           std::to_string(c_->peer_released()) + ", received " + std::to_string(c_->arrived_count()) + ", released " +
           std::to_string(c_->released_count()) + ", queue pair " + std::to_string(c_->qp_num());
  }

  transport::ibverbs_connection& connection() noexcept { return *c_; }

 private:
  template <class F>
  void guarded(F&& f) {
    if (!failure_.empty()) return;
    try {
      f();
    } catch (const error& e) {
      if (e.code() != errc::system) throw;
      broken(e.what());
    }
  }
  // Takes note of the peer's notice; true when it is new.
  bool note(transport::ibverbs_notice n) {
    if (n == transport::ibverbs_notice::abort && peer_abort_.empty()) {
      peer_abort_ = c_->peer_notice_text();
      if (peer_abort_.empty()) peer_abort_ = "(no reason given)";
      return true;
    }
    if (n == transport::ibverbs_notice::bye && !peer_left_) {
      peer_left_ = true;
      return true;
    }
    return false;
  }
  void broken(std::string_view what) {
    if (!failure_.empty()) return;
    // The connection's message without its "collcomm: net<ibverbs> on rank r: connection to
    // peer p, channel c: " prefix, which the text here says in the world's words.
    const std::string lead = "channel " + std::to_string(channel()) + ": ";
    if (auto at = what.find(lead); at != std::string_view::npos) what.remove_prefix(at + lead.size());
    failure_ = "the connection to rank " + std::to_string(peer()) + " on channel " + std::to_string(channel()) +
               " failed (net<ibverbs>): " + std::string(what);
  }

  std::unique_ptr<transport::ibverbs_connection> c_;
  std::string failure_;
  std::string peer_abort_;
  bool peer_left_ = false;
  bool bye_sent_ = false, bye_due_ = false;
  bool abort_sent_ = false;
};

// A connection's options for (channel, peer), or false where there is none (a GPU world's peer of
// this host). Null: `conn` for every peer.
using connection_plan = std::function<bool(int channel, int peer, transport::ibverbs_connection_options& conn)>;

// A rank's device and every one of its queue pairs, made and connected at once (see the file
// comment); the world takes each connection on its first use.
class endpoint {
 public:
  endpoint(const transport::verbs_api& api, int rank, int nranks, int channels,
           const transport::ibverbs_context_options& device, const transport::ibverbs_connection_options& conn,
           const connection_plan& plan = {})
      : rank_(rank),
        nranks_(nranks),
        channels_(channels),
        ctx_(api, rank, device),
        conns_(static_cast<std::size_t>(channels) * static_cast<std::size_t>(nranks)) {
    for (int c = 0; c < channels; ++c)
      for (int p = 0; p < nranks; ++p) {
        transport::ibverbs_connection_options o = conn;
        if (p != rank && (!plan || plan(c, p, o))) at(c, p) = std::make_unique<transport::ibverbs_connection>(ctx_, p, c, o);
      }
  }
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  // This rank's infos, channels × nranks, entry c · nranks + p for peer p on channel c (zero for itself).
  void local_infos(std::span<transport::ibverbs_qp_info> out) const {
    for (int c = 0; c < channels_; ++c)
      for (int p = 0; p < nranks_; ++p)
        out[static_cast<std::size_t>(c * nranks_ + p)] =
            conns_[index(c, p)] ? conns_[index(c, p)]->local_info() : transport::ibverbs_qp_info{};
  }
  // Connects (channel c, peer p) with `info(p, c)`, the info p made for this rank on channel c.
  template <class Info>
  void connect_all(Info&& info) {
    for (int c = 0; c < channels_; ++c)
      for (int p = 0; p < nranks_; ++p)
        if (at(c, p)) at(c, p)->connect(info(p, c));
  }
  // The connection (channel, peer), once.
  std::unique_ptr<transport::ibverbs_connection> take(int peer, int channel) {
    auto& c = at(channel, peer);
    if (!c)
      collcomm::detail::fail(errc::internal, "net<ibverbs>", rank_,
                             "the connection to rank " + std::to_string(peer) + " on channel " +
                                 std::to_string(channel) + " is taken twice or does not exist");
    return std::move(c);
  }
  const transport::ibverbs_context& context() const noexcept { return ctx_; }

 private:
  std::size_t index(int c, int p) const noexcept {
    return static_cast<std::size_t>(c) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(p);
  }
  std::unique_ptr<transport::ibverbs_connection>& at(int c, int p) { return conns_[index(c, p)]; }

  int rank_, nranks_, channels_;
  transport::ibverbs_context ctx_;                                     // outlives the connections (declared first)
  std::vector<std::unique_ptr<transport::ibverbs_connection>> conns_;  // (channel, peer)
};

// The head of a rank's part of the exchange.
struct exchange_head {
  net_peer_info info;
  std::uint32_t ok;  // 1: the infos that follow are valid; 0: `error` says why not
  std::uint32_t reserved;
  char error[240];
};
static_assert(std::is_trivially_copyable_v<exchange_head>);

}  // namespace ibverbs_net

template <>
struct net_backend<transport::ibverbs> {
  using connection = ibverbs_net::link;
  using endpoint = ibverbs_net::endpoint;
  // GPU buffers: the endpoint is made on the GPU world's FIFOs (make_gpu_endpoint).
  static constexpr bool endpoint_after_gpu_world = true;

  // The bytes of the exchange's result for `nranks` ranks of `channels` channels.
  static constexpr std::uint64_t exchange_bytes(int nranks, int channels) noexcept {
    return std::uint64_t(nranks) *
           (sizeof(ibverbs_net::exchange_head) +
            std::uint64_t(nranks) * std::uint64_t(channels) * sizeof(transport::ibverbs_qp_info));
  }

  // The connection's slot geometry: the world's header, then options.slot_bytes rounded up to 64.
  static transport::ibverbs_connection_options connection_options(const net_options& opt) {
    transport::ibverbs_connection_options c;
    c.slots = static_cast<std::uint32_t>(opt.slots);
    c.slot_bytes = host::connection::header_bytes + (opt.slot_bytes + 63) / 64 * 64;
    c.probe_interval = opt.ibverbs.probe_interval;
    return c;
  }

  // Collective (see the file comment): checks the exchange's size and the options, makes the
  // device and every queue pair, one all_gather of every rank's head and infos, connects.
  template <class B>
  static std::unique_ptr<endpoint> make_endpoint(B& boot, int rank, int nranks, const net_options& opt,
                                                 const net_peer_info& mine, std::vector<net_peer_info>& all) {
    return exchange(boot, rank, nranks, opt, mine, all, connection_options(opt), {});
  }

  // GPU buffers (gpu/net_proxy.hpp), collective: made once the GPU world is, over `channels`
  // channels of `slots` slots of `slot_bytes`, a tagged queue pair for each (channel, peer) that
  // `fifo` gives slots for (send: this rank's outbox to the peer, recv: its inbox from it; false:
  // a peer of this host, no queue pair).
  template <class B, class Fifo>
  static std::unique_ptr<endpoint> make_gpu_endpoint(B& boot, int rank, int nranks, net_options opt, int channels,
                                                     int slots, std::size_t slot_bytes, const net_peer_info& mine,
                                                     Fifo&& fifo) {
    opt.channels = channels;
    opt.slots = slots;
    opt.slot_bytes = slot_bytes;
    transport::ibverbs_connection_options conn;
    conn.slots = static_cast<std::uint32_t>(slots);
    conn.slot_bytes = slot_bytes;
    conn.probe_interval = opt.ibverbs.probe_interval;
    conn.tagged = true;
    std::vector<net_peer_info> all;
    return exchange(boot, rank, nranks, opt, mine, all, conn,
                    [&](int c, int p, transport::ibverbs_connection_options& o) {
                      return fifo(c, p, o.send_slots, o.recv_slots);
                    });
  }
  // The GPU proxy's connection (channel, peer): the one the endpoint made on its slots.
  static std::unique_ptr<connection> make_proxy_connection(endpoint& ep, int, int peer, int channel, int, std::size_t,
                                                           int, std::byte*, std::byte*) {
    return std::make_unique<connection>(ep.take(peer, channel));
  }

 private:
  template <class B>
  static std::unique_ptr<endpoint> exchange(B& boot, int rank, int nranks, const net_options& opt,
                                            const net_peer_info& mine, std::vector<net_peer_info>& all,
                                            const transport::ibverbs_connection_options& conn,
                                            const ibverbs_net::connection_plan& plan) {
    const char* where = "communicator<net<ibverbs>>";
    const std::uint64_t bytes = exchange_bytes(nranks, opt.channels);
    if (bytes > bootstrap::max_payload)
      collcomm::detail::fail(
          errc::invalid_argument, where, rank,
          "the queue-pair exchange of " + std::to_string(nranks) + " ranks × " + std::to_string(nranks) + " × " +
              std::to_string(opt.channels) + " channels × " + std::to_string(sizeof(transport::ibverbs_qp_info)) +
              " bytes (" + std::to_string(bytes) + " bytes with the ranks' heads) exceeds bootstrap::max_payload = " +
              std::to_string(bootstrap::max_payload) +
              " bytes, the most one bootstrap all_gather carries; use fewer channels");
    if (opt.channels < 1)
      collcomm::detail::fail(errc::invalid_argument, where, rank,
                             "option 'channels' = " + std::to_string(opt.channels) + ": net<ibverbs> needs at least 1");
    if (opt.slots < 1 || opt.slots > (1 << 16))
      collcomm::detail::fail(errc::invalid_argument, where, rank,
                             "option 'slots' = " + std::to_string(opt.slots) + " is out of range [1, 65536]");
    if (conn.slot_bytes > transport::ibverbs_connection::max_message_bytes)
      collcomm::detail::fail(
          errc::invalid_argument, where, rank,
          "option 'slot_bytes' = " + std::to_string(opt.slot_bytes) + " is more than " +
              std::to_string(transport::ibverbs_connection::max_message_bytes - host::connection::header_bytes - 63) +
              " (an RDMA write's immediate carries 24 bits of size, a 64-byte header included)");

    const std::size_t per_rank = static_cast<std::size_t>(opt.channels) * static_cast<std::size_t>(nranks);
    const std::size_t part = sizeof(ibverbs_net::exchange_head) + per_rank * sizeof(transport::ibverbs_qp_info);
    std::vector<std::byte> me(part);
    ibverbs_net::exchange_head head{};
    head.info = mine;
    std::unique_ptr<endpoint> ep;
    try {
      const transport::verbs_api& api = opt.ibverbs.verbs != nullptr ? *opt.ibverbs.verbs : transport::load_verbs();
      ep = std::make_unique<endpoint>(api, rank, nranks, opt.channels,
                                      transport::ibverbs_context_options{opt.ibverbs.hca, opt.ibverbs.gid_index}, conn,
                                      plan);
      std::vector<transport::ibverbs_qp_info> infos(per_rank);
      ep->local_infos(infos);
      std::memcpy(me.data() + sizeof head, infos.data(), per_rank * sizeof(transport::ibverbs_qp_info));
      head.ok = 1;
    } catch (const error& e) {
      ep.reset();
      head.ok = 0;
      const std::string_view text = e.what();
      std::memcpy(head.error, text.data(), std::min(text.size(), sizeof head.error - 1));
    }
    std::memcpy(me.data(), &head, sizeof head);
    std::vector<std::byte> every(part * static_cast<std::size_t>(nranks));
    boot.all_gather(std::span<const std::byte>(me), std::span<std::byte>(every));

    all.clear();
    std::string failed;
    for (int r = 0; r < nranks; ++r) {
      ibverbs_net::exchange_head h;
      std::memcpy(&h, every.data() + static_cast<std::size_t>(r) * part, sizeof h);
      all.push_back(h.info);
      if (h.ok != 1 && failed.empty()) {
        h.error[sizeof h.error - 1] = '\0';
        failed = "rank " + std::to_string(r) + " could not make its queue pairs: " + std::string(h.error);
      }
    }
    if (!failed.empty()) collcomm::detail::fail(errc::system, where, rank, failed);
    ep->connect_all([&](int p, int c) {
      transport::ibverbs_qp_info i;
      std::memcpy(
          &i,
          every.data() + static_cast<std::size_t>(p) * part + sizeof(ibverbs_net::exchange_head) +
              (static_cast<std::size_t>(c) * static_cast<std::size_t>(nranks) + static_cast<std::size_t>(rank)) *
                  sizeof(transport::ibverbs_qp_info),
          sizeof i);
      return i;
    });
    return ep;
  }

 public:
  static std::unique_ptr<connection> make_connection(endpoint& ep, int, int peer, int channel, const net_options&) {
    return std::make_unique<connection>(ep.take(peer, channel));
  }
};

}  // namespace host

static_assert(communicator_like<communicator<transport::net<transport::ibverbs>>>);

COLLCOMM_NAMESPACE_END
