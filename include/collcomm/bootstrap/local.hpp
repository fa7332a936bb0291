// collcomm/bootstrap/local.hpp — the bootstrap for ranks that are threads of one process.
//
//   collcomm::bootstrap::local_group group(nranks);        // once, before the threads start
//   // in thread r (each rank its own object):
//   collcomm::bootstrap::local boot(group, r);             // waits until every rank constructed one
//   boot.all_gather(mine, everyones);
//
// Same contract as every bootstrap (bootstrap.hpp) and the same errors as tcp, so code written and
// tested against `local` behaves alike over tcp or mpi:
//   - construction is the first collective (the handshake): a rank that never constructs its
//     bootstrap is named in a timeout on every rank that did;
//   - all_gather with differing sizes is errc::invalid_usage on every rank, naming the rank whose
//     size differs from rank 0's ("rank 2 gave 5 bytes, rank 0 gave 4");
//   - send is buffered (never waits); recv must match the message's size exactly;
//   - at most max_ranks ranks; messages and all_gather results are bounded by max_payload
//     (64 MiB), as over tcp (bootstrap.hpp);
//   - every wait ends by the group's timeout (default 30 s) with errc::timeout naming the ranks
//     that did not arrive, or earlier with errc::aborted naming a rank whose bootstrap was
//     destroyed (its thread returned or threw) before it arrived.
// A timeout, an abort or an all_gather size mismatch fails the whole group: every rank's pending
// and later calls throw the same error (the first one a rank sees keeps its code; calls after that
// are errc::invalid_usage, "already failed"), just as tcp's rank 0 tells every rank. A wrong recv
// size fails only that call, as over tcp.
//
// Threads and lifetime: each `local` is used by one thread at a time; the objects of one group may
// be used concurrently (one mutex and condition variable per group: the bootstrap is for set-up,
// not a data path). The group is a shared handle: the shared state lives until the group and
// every rank's bootstrap are gone.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

namespace detail {

// What the ranks of one local group share. Every field is guarded by `m`.
struct local_state {
  using bytes = std::vector<std::byte>;
  struct round {                // one collective, by sequence number
    std::vector<bytes> in;      // (rank) contribution
    std::vector<char> arrived;  // (rank)
    int n_arrived = 0;
    int n_read = 0;  // ranks done copying the result out; the last one erases it
  };

  local_state(int n, std::chrono::milliseconds t)
      : size(n),
        timeout(t),
        claimed(std::size_t(n), 0),
        departed(std::size_t(n), 0),
        channels(std::size_t(n) * std::size_t(n)) {}

  const int size;
  const std::chrono::milliseconds timeout;
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> claimed;                // (rank) a bootstrap was constructed for it
  std::vector<char> departed;               // (rank) its bootstrap was destroyed
  std::map<std::uint64_t, round> rounds;    // collectives some rank entered and not every rank left
  std::vector<std::deque<bytes>> channels;  // (from, to) messages sent and not yet received
  bool failed = false;
  errc fail_code = errc::internal;
  std::string fail_msg;

  std::deque<bytes>& channel(int from, int to) {
    return channels[std::size_t(from) * std::size_t(size) + std::size_t(to)];
  }
};

}  // namespace detail

// The shared state of `nranks` thread ranks. Copy it to each thread (it is a shared handle).
class local_group {
 public:
  explicit local_group(int nranks, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    detail::check_nranks("bootstrap::local_group", "argument 'nranks'", nranks);
    if (timeout.count() <= 0)
      collcomm::detail::fail(errc::invalid_argument, "bootstrap::local_group", no_rank, "timeout must be positive");
    state_ = std::make_shared<detail::local_state>(nranks, timeout);
  }
  int size() const noexcept { return state_->size; }
  std::chrono::milliseconds timeout() const noexcept { return state_->timeout; }

 private:
  friend class local;
  std::shared_ptr<detail::local_state> state_;
};

class local {
 public:
  // Joins `group` as `rank`; returns once every rank joined (bounded by the group's timeout).
  local(const local_group& group, int rank) : s_(group.state_), rank_(rank) {
    const int n = s_->size;
    if (rank < 0 || rank >= n)
      fail(errc::invalid_argument, "rank = " + std::to_string(rank) + " out of range [0, " + std::to_string(n) + ")");
    {
      std::lock_guard g(s_->m);
      if (s_->claimed[std::size_t(rank)])
        fail(errc::invalid_usage, "rank " + std::to_string(rank) + " already joined this group");
      s_->claimed[std::size_t(rank)] = 1;
    }
    try {
      collective({}, {}, "the bootstrap handshake");
    } catch (...) {
      depart();  // no destructor runs for a constructor that throws
      throw;
    }
    active_ = true;
  }

  local(local&& o) noexcept
      : s_(std::move(o.s_)),
        rank_(o.rank_),
        seq_(o.seq_),
        active_(std::exchange(o.active_, false)),
        seen_failure_(o.seen_failure_) {}
  local& operator=(local&&) = delete;
  local(const local&) = delete;

  ~local() {
    if (active_) depart();
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return s_->size; }
  std::chrono::milliseconds timeout() const noexcept { return s_->timeout; }

  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    const std::size_t n = in.size(), p = std::size_t(s_->size);
    if (out.size() != n * p)
      fail(errc::invalid_argument, "all_gather: out has " + std::to_string(out.size()) +
                                       " bytes, want size() * in.size() = " + std::to_string(n * p));
    if (n > max_payload / p) detail::check_payload("bootstrap::local", rank_, "all_gather: a result", out.size());
    collective(in, out, "all_gather");
  }

  void barrier() { collective({}, {}, "barrier"); }

  void send(int peer, std::span<const std::byte> bytes) {
    check_peer(peer, "send");
    detail::check_payload("bootstrap::local", rank_, "send: a message", bytes.size());
    std::lock_guard g(s_->m);
    check_usable();
    // The peer can never receive it: as loud as tcp's closed connection.
    if (s_->departed[std::size_t(peer)] && peer != rank_)
      fail(errc::aborted, "send to rank " + std::to_string(peer) + ": its bootstrap was already destroyed");
    s_->channel(rank_, peer).emplace_back(bytes.begin(), bytes.end());
    s_->cv.notify_all();
  }

  void recv(int peer, std::span<std::byte> bytes) {
    check_peer(peer, "recv");
    std::unique_lock lk(s_->m);
    check_usable();
    auto& ch = s_->channel(peer, rank_);
    if (peer == rank_ && ch.empty()) fail(errc::invalid_usage, "recv from self with no matching send");
    const auto deadline = clock::now() + s_->timeout;
    const std::string what = "recv from rank " + std::to_string(peer);
    while (ch.empty()) {
      check_usable();
      if (s_->departed[std::size_t(peer)])
        fail_group(errc::aborted,
                   what + ": rank " + std::to_string(peer) + "'s bootstrap was destroyed before it sent");
      if (s_->cv.wait_until(lk, deadline) == std::cv_status::timeout && ch.empty() && !s_->failed)
        fail_group(errc::timeout, what + ": rank " + std::to_string(peer) + " did not send within " +
                                      std::to_string(s_->timeout.count()) + " ms");
    }
    auto v = std::move(ch.front());
    ch.pop_front();
    if (v.size() != bytes.size())
      fail(errc::invalid_usage, what + ": message has " + std::to_string(v.size()) + " bytes, the receive buffer " +
                                    std::to_string(bytes.size()));
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size());
  }

 private:
  using clock = std::chrono::steady_clock;

  [[noreturn]] void fail(errc c, const std::string& msg) const {
    collcomm::detail::fail(c, "bootstrap::local", rank_, msg);
  }

  void depart() noexcept {
    std::lock_guard g(s_->m);
    s_->departed[std::size_t(rank_)] = 1;
    s_->cv.notify_all();
  }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= s_->size)
      fail(errc::invalid_argument, std::string(what) + ": peer = " + std::to_string(peer) + " out of range [0, " +
                                       std::to_string(s_->size) + ")");
  }

  // Throws if the group failed (under s_->m). The first time this rank learns of it, the error
  // keeps the failure's code; later calls are invalid_usage, as for a failed tcp bootstrap.
  void check_usable() {
    if (!s_->failed) return;
    if (seen_failure_)
      fail(errc::invalid_usage, "the bootstrap already failed; it cannot be used again (" + s_->fail_msg + ")");
    seen_failure_ = true;
    fail(s_->fail_code, s_->fail_msg);
  }

  // Fails the whole group (under s_->m): wakes every waiting rank, which then throws the same.
  [[noreturn]] void fail_group(errc c, const std::string& msg) {
    if (!s_->failed) {
      s_->failed = true;
      s_->fail_code = c;
      s_->fail_msg = msg + " (seen by rank " + std::to_string(rank_) + ")";
      s_->cv.notify_all();
    }
    check_usable();
    fail(errc::internal, "unreachable");
  }

  // Every collective: deposit a copy of `in`, wait (bounded) for every rank's, check that the
  // sizes agree, copy out in rank order.
  void collective(std::span<const std::byte> in, std::span<std::byte> out, const std::string& what) {
    std::unique_lock lk(s_->m);
    check_usable();
    const int n = s_->size;
    const std::uint64_t seq = seq_++;
    auto& rd = s_->rounds[seq];  // std::map: the reference survives other rounds' insertion
    if (rd.in.empty()) {
      rd.in.resize(std::size_t(n));
      rd.arrived.assign(std::size_t(n), 0);
    }
    rd.in[std::size_t(rank_)].assign(in.begin(), in.end());
    rd.arrived[std::size_t(rank_)] = 1;
    ++rd.n_arrived;
    s_->cv.notify_all();
    const auto deadline = clock::now() + s_->timeout;
    while (true) {
      // A round every rank reached completes, even if the group failed meanwhile (a rank that
      // left after it, say): the next call reports the failure.
      if (rd.n_arrived == n) break;
      check_usable();
      std::vector<int> missing, gone;
      for (int r = 0; r < n; ++r)
        if (!rd.arrived[std::size_t(r)]) (s_->departed[std::size_t(r)] ? gone : missing).push_back(r);
      if (!gone.empty())
        fail_group(errc::aborted, what + ": " + detail::ranks_text(gone) +
                                      (gone.size() == 1 ? "'s bootstrap was" : "' bootstraps were") +
                                      " destroyed (its thread left) before it arrived");
      if (clock::now() >= deadline)
        fail_group(errc::timeout, what + ": " + detail::ranks_text(missing) + " did not arrive within " +
                                      std::to_string(s_->timeout.count()) + " ms");
      s_->cv.wait_until(lk, deadline);
    }
    const std::size_t bytes = rd.in[0].size();
    for (int r = 1; r < n; ++r)
      if (rd.in[std::size_t(r)].size() != bytes)
        fail_group(errc::invalid_usage, what + ": rank " + std::to_string(r) + " gave " +
                                            std::to_string(rd.in[std::size_t(r)].size()) + " bytes, rank 0 gave " +
                                            std::to_string(bytes));
    // out.size() == n * in.size() was checked by the caller, and every rank gave `bytes`.
    for (int r = 0; r < n && bytes; ++r)
      std::memcpy(out.data() + std::size_t(r) * bytes, rd.in[std::size_t(r)].data(), bytes);
    if (++rd.n_read == n) s_->rounds.erase(seq);
  }

  std::shared_ptr<detail::local_state> s_;
  int rank_;
  std::uint64_t seq_ = 0;  // this rank's next collective
  bool active_ = false;
  bool seen_failure_ = false;
};

static_assert(bootstrap_like<local>);

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
