// collcomm/host/world.hpp — N ranks as threads of one process, and what they share.
//
// A world owns, per channel: a FIFO connection for every ordered pair (src, dst) (allocated on
// first use, so a world of 16 ranks costs only the pairs its algorithms talk over), a barrier,
// and a table where each rank exposes its buffers to the direct primitives. Each rank has a
// doorbell (wait.hpp) and a scratch slot. Ranks reach it through communicator<transport::host_shm>
// (communicator.hpp); host::run_ranks (run_ranks.hpp) runs a function on every rank.
//
// Example:
//   collcomm::host::world w(4);
//   collcomm::host::run_ranks(w, [&](auto& comm) {
//     collcomm::all_reduce(comm, send[comm.rank()], recv[comm.rank()], count);
//   });
//
// Threading: every rank is driven by one thread at a time, and each rank calls the collectives
// in the same order (as with NCCL). A world is not copyable or movable (ranks hold references).
//
// Failures. A call that fails its argument checks has not happened, on that rank: the rank must
// still make the call (with good arguments) for its peers to finish theirs. A failure after data
// moved — a wait that timed out, a message that does not match, a schedule bug — leaves stray
// messages behind, so it marks the world failed: every later call on it throws errc::aborted
// quoting the first failure (make a new world). Calls already waiting run into their own timeout.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/connection.hpp>
#include <collcomm/host/options.hpp>
#include <collcomm/host/wait.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

class world {
 public:
  // Threads of one process: beyond this the per-channel tables stop being small.
  static constexpr int max_ranks = 1024;

  // Throws errc::invalid_argument, naming the argument, when nranks is not in [1, max_ranks] or an
  // option is out of its range (options.hpp).
  explicit world(int nranks, options opt = {}) : nranks_(nranks), opt_(opt) {
    auto bad = [](const std::string& msg) { collcomm::detail::fail(errc::invalid_argument, "host::world", no_rank, msg); };
    if (nranks < 1 || nranks > max_ranks)
      bad("argument 'nranks' = " + std::to_string(nranks) + " is out of range [1, " + std::to_string(max_ranks) + "]");
    if (opt.channels < 1 || opt.channels > 64)
      bad("option 'channels' = " + std::to_string(opt.channels) + " is out of range [1, 64]");
    if (opt.slots < 1) bad("option 'slots' = " + std::to_string(opt.slots) + " must be >= 1");
    if (opt.slot_bytes < 16 || opt.slot_bytes > (std::size_t{1} << 30))
      bad("option 'slot_bytes' = " + std::to_string(opt.slot_bytes) + " is out of range [16, 2^30]");
    if (opt.timeout.count() <= 0) bad("option 'timeout' = " + std::to_string(opt.timeout.count()) + " ms must be > 0");
    const std::size_t nc = static_cast<std::size_t>(opt.channels), n = static_cast<std::size_t>(nranks);
    connections_ = std::make_unique<connection*[]>(nc * n * n);  // value-initialized: all null
    arrivals_ = std::make_unique<padded_counter[]>(nc * n);
    exposed_ = std::make_unique<exposed_buffers[]>(nc * n);
    doorbells_ = std::make_unique<detail::doorbell[]>(n);
    scratch_ = std::make_unique<scratch_slot[]>(n);
  }

  world(const world&) = delete;
  world& operator=(const world&) = delete;

  ~world() {
    const std::size_t total = static_cast<std::size_t>(opt_.channels) * static_cast<std::size_t>(nranks_) *
                              static_cast<std::size_t>(nranks_);
    for (std::size_t i = 0; i < total; ++i) delete connections_[i];
  }

  int size() const noexcept { return nranks_; }
  const options& opts() const noexcept { return opt_; }

  // The connection (channel, src -> dst), made on first use by either end.
  connection& connect(int channel, int src, int dst) {
    connection*& entry = connections_[(static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) +
                                       static_cast<std::size_t>(src)) *
                                          static_cast<std::size_t>(nranks_) +
                                      static_cast<std::size_t>(dst)];
    detail::sys_atomic<connection*> ref(entry);
    // Acquire: the connection's construction happens before its use by the other end.
    if (connection* c = ref.load(cuda::std::memory_order_acquire)) return *c;
    auto made = std::make_unique<connection>(opt_.slots, opt_.slot_bytes);
    connection* expected = nullptr;
    if (ref.compare_exchange_strong(expected, made.get(), cuda::std::memory_order_acq_rel,
                                    cuda::std::memory_order_acquire))
      return *made.release();
    return *expected;  // the other end made it first
  }

  detail::doorbell& doorbell_of(int rank) noexcept { return doorbells_[static_cast<std::size_t>(rank)]; }

  // A rank's scratch, 64-byte aligned, used by that rank's thread only (a rank runs its channels
  // one after the other): room for one slot of accumulators (up to 4 bytes per byte of element:
  // fp8 accumulates in float) and one slot of elements.
  std::size_t scratch_bytes() const noexcept { return 5 * opt_.slot_bytes + 128; }
  std::byte* scratch(int rank) {
    scratch_slot& s = scratch_[static_cast<std::size_t>(rank)];
    if (!s.memory) s.memory.reset(new (std::align_val_t{64}) std::byte[scratch_bytes()]);
    return s.memory.get();
  }

  // ---- failure -----------------------------------------------------------------------------------
  // Throws errc::internal/timeout/... after marking the world failed (see Failures above).
  [[noreturn]] void fail(errc code, const char* what, int rank, const std::string& msg) {
    const std::string text = collcomm::detail::format_error(what, rank, msg);
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      if (failure_.empty()) failure_ = text;
    }
    detail::sys_atomic<std::uint32_t>(failed_).store(1, cuda::std::memory_order_release);
    throw error(code, rank, text);
  }
  // Throws errc::aborted when an earlier call failed after data moved.
  void check_usable(const char* what, int rank) {
    if (detail::sys_atomic<std::uint32_t>(failed_).load(cuda::std::memory_order_acquire) == 0) return;
    std::string first;
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      first = failure_;
    }
    collcomm::detail::fail(errc::aborted, what, rank,
                           "this host world is unusable after an earlier failure (" + first + "); make a new world");
  }

  // ---- barrier ---------------------------------------------------------------------------------
  // Every rank of the world, one channel. Each rank counts the barriers it entered on the channel
  // (a counter only it writes, that only grows); barrier g is passed when every rank's count is
  // >= g. Release store of the own count, acquire loads of the others': everything a rank did
  // before it entered happens before everything any rank does after it leaves.
  void barrier(int channel, int rank, const char* what) {
    const std::size_t base = static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_);
    auto count = [&](int r) { return detail::sys_atomic<std::uint64_t>(arrivals_[base + static_cast<std::size_t>(r)].value); };
    const std::uint64_t gen = count(rank).load(cuda::std::memory_order_relaxed) + 1;
    count(rank).store(gen, cuda::std::memory_order_release);
    for (int r = 0; r < nranks_; ++r)
      if (r != rank) detail::ring(doorbell_of(r));
    auto all_arrived = [&] {
      for (int r = 0; r < nranks_; ++r)
        if (count(r).load(cuda::std::memory_order_acquire) < gen) return false;
      return true;
    };
    detail::wait_until(doorbell_of(rank), opt_.timeout, all_arrived, [&] {
      std::string missing;
      for (int r = 0; r < nranks_; ++r)
        if (count(r).load(cuda::std::memory_order_acquire) < gen) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      timeout(what, rank,
              "at barrier #" + std::to_string(gen) + " on channel " + std::to_string(channel) +
                  " waiting for rank(s) " + missing + " to arrive");
    });
  }

  // ---- direct access ---------------------------------------------------------------------------
  // What a rank exposes to its peers for one call on one channel. Written by the owner before the
  // schedule's first barrier, read by peers only after it (the barrier orders them).
  struct alignas(64) exposed_buffers {  // a cache line each: written by one rank, read by all
    const void* in = nullptr;
    index_t in_elems = 0;
    void* out = nullptr;
    index_t out_elems = 0;
    element_kind elem = element_kind::f32;
  };
  void expose(int channel, int rank, const exposed_buffers& b) noexcept { exposed_[index(channel, rank)] = b; }
  const exposed_buffers& exposed(int channel, int rank) const noexcept { return exposed_[index(channel, rank)]; }

  // ---- messages --------------------------------------------------------------------------------
  // Sender side of (channel, src -> dst): waits for a free slot and returns its data.
  std::byte* wait_slot(int channel, int src, int dst, const char* what) {
    connection& c = connect(channel, src, dst);
    detail::wait_until(doorbell_of(src), opt_.timeout, [&] { return c.can_send(); }, [&] {
      timeout(what, src,
              "waiting for rank " + std::to_string(dst) + " to free a slot on channel " + std::to_string(channel) +
                  " (connection " + std::to_string(src) + " -> " + std::to_string(dst) + ": all " +
                  std::to_string(c.slots()) + " slots full, rank " + std::to_string(dst) + " consumed " +
                  std::to_string(c.peer_head()) + " of " + std::to_string(c.own_tail()) + " messages)");
    });
    return c.data(c.own_tail());
  }
  // Sender side: the slot returned by wait_slot holds `elems` elements of type `elem`; send it.
  void publish(int channel, int src, int dst, index_t elems, element_kind elem) {
    connection& c = connect(channel, src, dst);
    slot_header& h = c.header(c.own_tail());
    h.elems = elems;
    h.elem = static_cast<std::uint32_t>(elem);
    c.publish();
    detail::ring(doorbell_of(dst));
  }
  // Receiver side of (channel, src -> dst): waits for the next message and returns its data.
  // Throws errc::invalid_argument when it does not hold `elems` elements of type `elem`.
  const std::byte* wait_message(int channel, int src, int dst, index_t elems, element_kind elem, const char* what) {
    connection& c = connect(channel, src, dst);
    detail::wait_until(doorbell_of(dst), opt_.timeout, [&] { return c.can_recv(); }, [&] {
      timeout(what, dst,
              "waiting for message #" + std::to_string(c.own_head()) + " from rank " + std::to_string(src) +
                  " on channel " + std::to_string(channel) + " (connection " + std::to_string(src) + " -> " +
                  std::to_string(dst) + ": rank " + std::to_string(src) + " has sent " +
                  std::to_string(c.peer_tail()) + " messages)");
    });
    const std::uint64_t m = c.own_head();
    const slot_header& h = c.header(m);
    if (h.elems != elems || h.elem != static_cast<std::uint32_t>(elem))
      fail(errc::invalid_argument, what, dst,
           "rank " + std::to_string(dst) + " expects " + std::to_string(elems) + " elements of " + kind_name(elem) +
               " in message #" + std::to_string(m) + " from rank " + std::to_string(src) + " on channel " +
               std::to_string(channel) + ", but rank " + std::to_string(src) + " sent " + std::to_string(h.elems) +
               " elements of " + kind_name(static_cast<element_kind>(h.elem)) +
               ": the ranks disagree on count, element type, root or peers");
    return c.data(m);
  }
  // Receiver side: the message returned by wait_message is read; give its slot back.
  void consume(int channel, int src, int dst) {
    connect(channel, src, dst).consume();
    detail::ring(doorbell_of(src));
  }

 private:
  struct padded_counter {
    alignas(64) std::uint64_t value = 0;
  };
  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct scratch_slot {
    std::unique_ptr<std::byte[], aligned_delete> memory;
  };

  std::size_t index(int channel, int rank) const noexcept {
    return static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(rank);
  }

  [[noreturn]] void timeout(const char* what, int rank, const std::string& awaited) {
    fail(errc::timeout, what, rank,
         "timed out after " + std::to_string(opt_.timeout.count()) + " ms " + awaited +
             "; does every rank call the same collectives with the same arguments?");
  }

  static const char* kind_name(element_kind k) noexcept {
    static constexpr const char* names[] = {"f32", "f64", "f16", "bf16", "e4m3", "e5m2",
                                            "i8",  "u8",  "i32", "u32",  "i64",  "u64"};
    const auto i = static_cast<std::size_t>(k);
    return i < sizeof(names) / sizeof(names[0]) ? names[i] : "an unknown type";
  }

  int nranks_;
  options opt_;
  std::uint32_t failed_ = 0;  // set once (release) by the first failure after data moved
  std::mutex failure_mutex_;
  std::string failure_;       // its message, under failure_mutex_
  std::unique_ptr<connection*[]> connections_;      // (channel, src, dst)
  std::unique_ptr<padded_counter[]> arrivals_;      // (channel, rank): barriers entered
  std::unique_ptr<exposed_buffers[]> exposed_;      // (channel, rank)
  std::unique_ptr<detail::doorbell[]> doorbells_;   // (rank)
  std::unique_ptr<scratch_slot[]> scratch_;         // (rank)
};

}  // namespace host
COLLCOMM_NAMESPACE_END
