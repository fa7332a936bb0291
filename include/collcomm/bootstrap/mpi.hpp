// collcomm/bootstrap/mpi.hpp — the bootstrap over an MPI communicator, for codes that already run
// under mpirun. Include it only where <mpi.h> is available: collcomm itself never needs MPI.
//
//   MPI_Init(&argc, &argv);
//   {
//     collcomm::bootstrap::mpi boot(MPI_COMM_WORLD);   // collective over the communicator
//     boot.all_gather(mine, everyones);
//   }                                                   // destroy it before MPI_Finalize
//   MPI_Finalize();
//
// Rank and size are the communicator's. The constructor is collective over `comm` (call it on
// every rank, in the same order as your own collectives on `comm`); everything afterwards runs on
// a private duplicate of `comm` (MPI_Comm_idup) with MPI_ERRORS_RETURN, so collcomm's traffic never
// matches yours and an MPI error becomes a collcomm::error instead of an abort.
//
// Reserved tags: during construction collcomm sends point-to-point messages on `comm` itself with
// tags mpi_tag_first .. mpi_tag_last (32760..32767, inside the 32767 every MPI guarantees as
// MPI_TAG_UB); do not receive those tags with MPI_ANY_TAG on `comm` while a bootstrap is being
// built. On the duplicate the same tags carry the census and send/recv.
//
// How each call works, and what bounds its wait:
//   - every collective (the constructor, all_gather, barrier) starts with a census through rank
//     0: each rank sends rank 0 (collective number, byte count); rank 0 waits for all of them up
//     to the timeout, checks that every rank is at the same collective with the same size, and
//     answers every rank ok or an error text. So a rank that does not arrive is named on every
//     rank (on late ranks too: rank 0's answer waits for them), and an all_gather size mismatch
//     is errc::invalid_usage on every rank, without ever handing MPI mismatched collectives.
//     Ranks other than 0 wait 2x timeout for the answer, so rank 0's report comes first; a rank
//     0 that never answers is named as such. Same shape as the tcp bootstrap.
//   - all_gather's data then moves with MPI_Iallgather, polled with MPI_Test to a deadline.
//   - send: MPI_Isend of a private copy; it returns at once (buffered, as over tcp), and pending
//     sends are completed by later calls and by the destructor (bounded by the timeout).
//   - recv: MPI_Improbe polled to a deadline, then MPI_Imrecv polled to a deadline; the size must
//     match exactly (a wrong size consumes the message and fails that call, as over tcp).
// Not bounded, because MPI gives no way to: the posting calls themselves (MPI_Isend, MPI_Irecv,
// MPI_Iallgather, MPI_Comm_idup return at once in every MPI we know), MPI_Comm_free, and MPI's own
// progress engine if it hangs inside MPI_Test. A rank that dies after the census, inside the
// data exchange, gives a timeout that cannot name it (MPI does not say which rank is missing
// from a collective). An operation that timed out cannot be cancelled (MPI forbids cancelling
// collectives): its request and buffers are kept alive, never freed, so MPI never writes into
// freed memory; the bootstrap is then failed and refuses further calls. Under Open MPI's default
// settings a rank that dies usually makes mpirun kill the whole job.
// Two edges of the census: a rank 0 that arrives after the others gave up on it finds every
// arrival waiting and passes a barrier alone (the others already threw, naming rank 0); and a
// rank late to the constructor leaves its arrival, and rank 0 its answer, on `comm`'s reserved
// tags, where a later bootstrap built on the same `comm` would find them — after a failed
// construction, build the next bootstrap on a fresh communicator.
//
// Threads: each bootstrap is used by one thread at a time; MPI must be initialised at a thread
// level that allows that thread to call MPI (MPI_THREAD_MULTIPLE if other threads call MPI too).
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/bootstrap/wire.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

inline constexpr int mpi_tag_first = 32760, mpi_tag_last = 32767;

namespace detail {
inline constexpr int mpi_tag_arrive = mpi_tag_first + 0;   // rank -> 0: (collective number, bytes)
inline constexpr int mpi_tag_verdict = mpi_tag_first + 1;  // 0 -> rank: u64 status (0 ok, else 1 + errc), text
inline constexpr int mpi_tag_p2p = mpi_tag_first + 2;      // send/recv, on the duplicate only
inline constexpr std::size_t mpi_verdict_max = 1024;
// The census number of the constructor (on the user's communicator): not a small integer, so a
// stray message of another protocol on the reserved tags is not taken for an arrival.
inline constexpr std::uint64_t mpi_handshake_seq = 0x434342544d504900ull;

using mpi_bytes = std::shared_ptr<std::vector<std::byte>>;

// Requests that timed out and cannot be cancelled, with the buffers MPI may still write: kept
// for the life of the process (leaked on purpose; only failed jobs put anything here).
inline void mpi_bury(MPI_Request req, std::vector<mpi_bytes> buffers) {
  struct grave {
    MPI_Request req;
    std::vector<mpi_bytes> buffers;
  };
  static auto* m = new std::mutex;
  static auto* graves = new std::vector<grave>;
  std::lock_guard g(*m);
  graves->push_back({req, std::move(buffers)});
}

inline std::string mpi_error_text(int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(s, std::size_t(len));
}

// Polls: yields first (fast answers on one host), then sleeps up to 200 us (a rank waiting for a
// late peer should not burn a core that the peer may need).
struct mpi_backoff {
  int n = 0;
  void operator()() {
    if (++n < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, n - 190)));
  }
};
}  // namespace detail

class mpi {
 public:
  explicit mpi(MPI_Comm comm, std::chrono::milliseconds timeout = std::chrono::seconds(30)) : timeout_(timeout) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) fail(errc::invalid_usage, "MPI is not initialised (or already finalised): call MPI_Init first");
    if (comm == MPI_COMM_NULL) fail(errc::invalid_argument, "comm is MPI_COMM_NULL");
    if (timeout.count() <= 0) fail(errc::invalid_argument, "timeout must be positive");
    check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    detail::check_nranks("bootstrap::mpi", "the communicator's size", size_);
    try {
      // Every rank arrives (named if not) before the collective MPI_Comm_idup is posted.
      census(comm, detail::mpi_handshake_seq, 0, "the bootstrap handshake");
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Comm_idup(comm, &comm_, &req), "MPI_Comm_idup");
      if (!wait(req, clock::now() + timeout_)) {
        detail::mpi_bury(req, {});
        failed_ = true;
        fail(errc::timeout, "MPI_Comm_idup did not complete within " + std::to_string(timeout_.count()) +
                                " ms after every rank arrived");
      }
    } catch (...) {
      for (auto& p : pending_) detail::mpi_bury(p.req, {p.buf});  // no destructor runs: keep what MPI may still read
      throw;
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }

  mpi(mpi&& o) noexcept
      : timeout_(o.timeout_),
        rank_(o.rank_),
        size_(o.size_),
        comm_(std::exchange(o.comm_, MPI_COMM_NULL)),
        seq_(o.seq_),
        failed_(o.failed_),
        pending_(std::move(o.pending_)),
        self_q_(std::move(o.self_q_)) {}
  mpi& operator=(mpi&&) = delete;
  mpi(const mpi&) = delete;

  // Completes pending sends (bounded by the timeout; none after a failure), then frees the
  // duplicate. Destroy it before MPI_Finalize; after MPI_Finalize it only drops its memory.
  ~mpi() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin || comm_ == MPI_COMM_NULL) return;
    const auto deadline = clock::now() + (failed_ ? std::chrono::milliseconds(0) : timeout_);
    detail::mpi_backoff backoff;
    while (!pending_.empty() && clock::now() < deadline) {
      progress();
      if (!pending_.empty()) backoff();
    }
    for (auto& p : pending_) detail::mpi_bury(p.req, {p.buf});
    MPI_Comm_free(&comm_);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  // The private duplicate (for tests and tools; do not free it).
  MPI_Comm comm() const noexcept { return comm_; }

  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    const std::size_t n = in.size(), p = std::size_t(size_);
    if (out.size() != n * p)
      fail(errc::invalid_argument, "all_gather: out has " + std::to_string(out.size()) +
                                       " bytes, want size() * in.size() = " + std::to_string(n * p));
    if (n > max_payload / p) detail::check_payload("bootstrap::mpi", rank_, "all_gather: a result", out.size());
    check_usable();
    progress();
    census(comm_, seq_++, n, "all_gather");
    if (n == 0) return;
    // Private buffers: if the exchange times out, MPI may still write them after we return.
    auto send = std::make_shared<std::vector<std::byte>>(in.begin(), in.end());
    auto recv = std::make_shared<std::vector<std::byte>>(out.size());
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallgather(send->data(), int(n), MPI_BYTE, recv->data(), int(n), MPI_BYTE, comm_, &req),
          "MPI_Iallgather");
    if (!wait(req, clock::now() + timeout_)) {
      detail::mpi_bury(req, {send, recv});
      failed_ = true;
      fail(errc::timeout,
           "all_gather: the data exchange did not complete within " + std::to_string(timeout_.count()) +
               " ms although every rank had arrived (a rank failed or stalled inside it; MPI cannot say which)");
    }
    std::memcpy(out.data(), recv->data(), out.size());
  }

  void barrier() {
    check_usable();
    progress();
    census(comm_, seq_++, 0, "barrier");
  }

  void send(int peer, std::span<const std::byte> bytes) {
    check_peer(peer, "send");
    detail::check_payload("bootstrap::mpi", rank_, "send: a message", bytes.size());
    check_usable();
    if (peer == rank_) {
      self_q_.emplace_back(bytes.begin(), bytes.end());
      return;
    }
    auto buf = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Isend(buf->data(), int(buf->size()), MPI_BYTE, peer, detail::mpi_tag_p2p, comm_, &req), "MPI_Isend");
    pending_.push_back({req, std::move(buf)});
    progress();
  }

  void recv(int peer, std::span<std::byte> bytes) {
    check_peer(peer, "recv");
    check_usable();
    const std::string what = "recv from rank " + std::to_string(peer);
    if (peer == rank_) {
      if (self_q_.empty()) fail(errc::invalid_usage, "recv from self with no matching send");
      auto v = std::move(self_q_.front());
      self_q_.pop_front();
      deliver(v, bytes, what);
      return;
    }
    const auto deadline = clock::now() + timeout_;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st{};
    detail::mpi_backoff backoff;
    while (true) {
      int found = 0;
      check(MPI_Improbe(peer, detail::mpi_tag_p2p, comm_, &found, &msg, &st), "MPI_Improbe");
      if (found) break;
      progress();
      if (clock::now() >= deadline) {
        failed_ = true;
        fail(errc::timeout, what + ": rank " + std::to_string(peer) + " did not send within " +
                                std::to_string(timeout_.count()) + " ms");
      }
      backoff();
    }
    int count = 0;
    check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    auto buf = std::make_shared<std::vector<std::byte>>(std::size_t(std::max(count, 0)));
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Imrecv(buf->data(), count, MPI_BYTE, &msg, &req), "MPI_Imrecv");
    if (!wait(req, deadline)) {
      detail::mpi_bury(req, {buf});
      failed_ = true;
      fail(errc::timeout,
           what + ": the message's data did not arrive within " + std::to_string(timeout_.count()) + " ms");
    }
    deliver(*buf, bytes, what);
  }

 private:
  using clock = std::chrono::steady_clock;
  struct pending_send {
    MPI_Request req;
    detail::mpi_bytes buf;
  };

  [[noreturn]] void fail(errc c, const std::string& msg) const {
    collcomm::detail::fail(c, "bootstrap::mpi", rank_, msg);
  }

  void check(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    failed_ = true;
    fail(errc::system, std::string(call) + " failed: " + detail::mpi_error_text(rc));
  }
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_)
      fail(errc::invalid_argument,
           std::string(what) + ": peer = " + std::to_string(peer) + " out of range [0, " + std::to_string(size_) + ")");
  }
  void check_usable() const {
    if (failed_) fail(errc::invalid_usage, "the bootstrap already failed; it cannot be used again");
  }

  void deliver(const std::vector<std::byte>& v, std::span<std::byte> bytes, const std::string& what) const {
    if (v.size() != bytes.size())
      fail(errc::invalid_usage, what + ": message has " + std::to_string(v.size()) + " bytes, the receive buffer " +
                                    std::to_string(bytes.size()));
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size());
  }

  // Completes the sends that MPI has finished with.
  void progress() {
    for (std::size_t i = pending_.size(); i-- > 0;) {
      int done = 0;
      if (MPI_Test(&pending_[i].req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;  // its error shows at the peer
      if (done) pending_.erase(pending_.begin() + std::ptrdiff_t(i));
    }
  }

  // Polls `req` until it completes (true) or the deadline passes (false; `req` still pending).
  bool wait(MPI_Request& req, clock::time_point deadline) {
    detail::mpi_backoff backoff;
    while (true) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return true;
      if (clock::now() >= deadline) return false;
      backoff();
    }
  }

  // A small message sent without waiting: kept in pending_ until MPI is done with it. Returns
  // MPI_Isend's result (the caller decides whether a failure matters more than its own error).
  int post(MPI_Comm comm, int to, int tag, std::vector<std::byte> bytes) {
    auto buf = std::make_shared<std::vector<std::byte>>(std::move(bytes));
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Isend(buf->data(), int(buf->size()), MPI_BYTE, to, tag, comm, &req);
    if (rc == MPI_SUCCESS) pending_.push_back({req, std::move(buf)});
    return rc;
  }

  static std::vector<std::byte> verdict_bytes(int status, const std::string& text) {
    const std::size_t len = std::min(text.size(), detail::mpi_verdict_max - 8);
    std::vector<std::byte> v(8 + len);
    wire::detail::put<std::uint64_t>(v.data(), std::uint64_t(status));
    if (len) std::memcpy(v.data() + 8, text.data(), len);
    return v;
  }

  // Every collective's first step (see the header comment). Throws on every rank if any rank is
  // missing or disagrees.
  void census(MPI_Comm comm, std::uint64_t seq, std::uint64_t nbytes, const std::string& what) {
    if (size_ == 1) return;
    if (rank_ == 0)
      census_root(comm, seq, nbytes, what);
    else
      census_member(comm, seq, nbytes, what);
  }

  void census_root(MPI_Comm comm, std::uint64_t seq, std::uint64_t nbytes, const std::string& what) {
    const auto deadline = clock::now() + timeout_;
    std::vector<std::array<std::byte, 16>> got(static_cast<std::size_t>(size_));
    std::vector<MPI_Request> req(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 1; r < size_; ++r)
      check(MPI_Irecv(got[std::size_t(r)].data(), 16, MPI_BYTE, r, detail::mpi_tag_arrive, comm, &req[std::size_t(r)]),
            "MPI_Irecv");
    std::vector<int> missing;
    detail::mpi_backoff backoff;
    while (true) {
      missing.clear();
      for (int r = 1; r < size_; ++r) {
        auto& q = req[std::size_t(r)];
        if (q == MPI_REQUEST_NULL) continue;
        int done = 0;
        check(MPI_Test(&q, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) missing.push_back(r);
      }
      progress();
      if (missing.empty() || clock::now() >= deadline) break;
      backoff();
    }
    int status = 0;
    std::string text;
    if (!missing.empty()) {
      for (int r : missing) {
        // A receive can be cancelled; the late rank's arrival then stays unmatched, while the
        // verdict posted below waits for that rank and names it there too.
        MPI_Cancel(&req[std::size_t(r)]);
        MPI_Wait(&req[std::size_t(r)], MPI_STATUS_IGNORE);
      }
      const std::string ranks = detail::ranks_text(missing);
      status = 1 + int(errc::timeout);
      text =
          what + ": " + ranks + " did not arrive within " + std::to_string(timeout_.count()) + " ms (seen by rank 0)";
    } else {
      for (int r = 1; r < size_ && status == 0; ++r) {
        const auto* a = got[std::size_t(r)].data();
        const auto rseq = wire::detail::get<std::uint64_t>(a), rbytes = wire::detail::get<std::uint64_t>(a + 8);
        if (rseq != seq) {
          status = 1 + int(errc::invalid_usage);
          text = what + ": rank " + std::to_string(r) + " is at another bootstrap collective (number " +
                 std::to_string(rseq) + ", rank 0 at " + std::to_string(seq) +
                 "): the ranks called the bootstrap in different orders (seen by rank 0)";
        } else if (rbytes != nbytes) {
          status = 1 + int(errc::invalid_usage);
          text = what + ": rank " + std::to_string(r) + " gave " + std::to_string(rbytes) + " bytes, rank 0 gave " +
                 std::to_string(nbytes) + " (seen by rank 0)";
        }
      }
    }
    for (int r = 1; r < size_; ++r) {
      const int rc = post(comm, r, detail::mpi_tag_verdict, verdict_bytes(status, text));
      if (status == 0) check(rc, "MPI_Isend (the census answer)");  // else the error below says more
    }
    if (status != 0) {
      failed_ = true;
      fail(static_cast<errc>(status - 1), text);
    }
  }

  void census_member(MPI_Comm comm, std::uint64_t seq, std::uint64_t nbytes, const std::string& what) {
    const auto deadline = clock::now() + 2 * timeout_;
    std::vector<std::byte> arrival(16);
    wire::detail::put<std::uint64_t>(arrival.data(), seq);
    wire::detail::put<std::uint64_t>(arrival.data() + 8, nbytes);
    check(post(comm, 0, detail::mpi_tag_arrive, std::move(arrival)), "MPI_Isend (the census arrival)");
    auto verdict = std::make_shared<std::vector<std::byte>>(detail::mpi_verdict_max);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st{};
    check(MPI_Irecv(verdict->data(), int(verdict->size()), MPI_BYTE, 0, detail::mpi_tag_verdict, comm, &req),
          "MPI_Irecv");
    detail::mpi_backoff backoff;
    while (true) {
      int done = 0;
      check(MPI_Test(&req, &done, &st), "MPI_Test");
      if (done) break;
      progress();
      if (clock::now() >= deadline) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        failed_ = true;
        fail(errc::timeout, what + ": rank 0 did not answer within " + std::to_string(2 * timeout_.count()) +
                                " ms (rank 0 did not arrive, or failed)");
      }
      backoff();
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count < 8) {
      failed_ = true;
      fail(errc::system, what + ": malformed answer from rank 0 (" + std::to_string(count) + " bytes)");
    }
    const auto status = wire::detail::get<std::uint64_t>(verdict->data());
    if (status == 0) return;
    failed_ = true;
    const errc c = status - 1 <= std::uint64_t(errc::internal) ? static_cast<errc>(status - 1) : errc::aborted;
    fail(c, std::string(reinterpret_cast<const char*>(verdict->data() + 8), std::size_t(count) - 8));
  }

  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the private duplicate
  std::uint64_t seq_ = 0;          // this rank's next collective on comm_
  bool failed_ = false;
  std::vector<pending_send> pending_;
  std::deque<std::vector<std::byte>> self_q_;  // messages this rank sent itself
};

static_assert(bootstrap_like<mpi>);

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
