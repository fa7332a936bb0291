// collcomm/host/world.hpp — the ranks of the host executor and what they share: N threads of one
// process, or N processes of one host over a shared-memory segment.
//
// A world owns, per channel: a FIFO connection for every ordered pair (src, dst), a barrier, and a
// table where each rank exposes its buffers to the direct primitives. Each rank has a doorbell
// (wait.hpp) and a scratch slot. Ranks reach it through communicator<transport::host_shm>
// (communicator.hpp).
//
// Where the memory lives — the one thing the two kinds of world differ in; the primitives
// (primitives.hpp) and the schedules see the same world either way:
//   threads    world(nranks, options): heap memory; connections allocated on first use, so a
//              world of 16 ranks costs only the pairs its algorithms talk over. Every rank is in
//              this process; host::run_ranks (run_ranks.hpp) runs a function on each.
//   processes  made by host::make_process_world(bootstrap) or communicator::split / dup
//              (process_world.hpp): everything the ranks share sits at fixed offsets of one
//              shared-memory segment (detail/shm_segment.hpp), which each process maps at its own address —
//              so the shared tables hold offsets, never pointers — and this process drives one
//              rank, local_rank(). Every page of the segment is allocated when it is made (a full
//              /dev/shm is an error then, never a SIGBUS later), so it holds every pair's
//              connections and every window from the start. Each rank also has a window in
//              the segment: the direct algorithms read peers' buffers, and a process cannot read
//              another's private memory, so a direct call stages its buffers through the window
//              (communicator.hpp).
//
// Example (threads):
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
// quoting the first failure (make a new world). Calls already waiting run into their own timeout,
// except after a disagreement (below), which also aborts the world.
//
// Disagreement. Every message and every exposure carries the fingerprint of its sender's call
// (fingerprint.hpp); each rank counts its collective calls (next_call_seq). A rank that meets a
// message or an exposure of another call than its own — ranks that disagree on the root, the
// algorithm, the kind, the op, the count, the element type, or which calls they make — throws
// errc::invalid_argument naming both ranks and both calls, and aborts the world with that text, so
// ranks waiting anywhere throw errc::aborted within a wait slice. A rank whose part of such a call
// needed no message may return from it; its next call meets the abort or the stale message, and
// then names the call it made before (the one the ranks disagree on). No call returns data of
// another.
//
// Abort. abort() (any rank, any time) marks the world aborted: calls waiting on any rank throw
// errc::aborted within a wait slice (max_slice, wait.hpp), and every later call throws it too. In
// a process world the waits also watch the peers' liveness locks (detail/shm_segment.hpp): a rank whose
// process died — SIGKILL, a crash, an exit without leaving the world — aborts the world with a
// message naming it (rank and pid), found within about liveness_interval of a wait starting on it.
//
// This folder (host/): the host executor (ranks as threads or processes over shared memory). It
// includes the policy core, algo/, bootstrap/, transport/tags.hpp and detail/, never gpu/ or
// kernels/.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/host/connection.hpp>
#include <collcomm/host/options.hpp>
#include <collcomm/detail/shm_segment.hpp>
#include <collcomm/host/wait.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/types.hpp>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

namespace detail {
// What a world records about its failures, in the segment of a process world (every rank sees it)
// or on the heap of a world of threads. Each text is written once, by whoever sets its flag first
// (a compare-exchange), then published with `*_ready` (release).
struct control_block {
  static constexpr std::uint64_t magic_value = 0x31444c524f57484full;  // "OHWORLD1"
  static constexpr std::size_t text_bytes = 1024;
  // Identity (process worlds): written by the creator before any other rank opens the segment.
  std::uint64_t magic;
  std::int32_t nranks, channels, slots;
  std::uint32_t mapped;  // ranks that mapped the segment (process_world.hpp: the last unlinks its name)
  std::uint64_t slot_bytes, window_bytes, token;
  alignas(64) std::uint32_t failed;  // a failure after data moved
  std::uint32_t failure_ready;
  char failure[text_bytes];
  alignas(64) std::uint32_t aborted;  // abort() or a dead peer
  std::uint32_t abort_ready;
  char abort_text[text_bytes];
};

// Per rank of a process world. Written by its owner; read by the others after a barrier (or, for
// pid and departed, at any time: they are written before the rank's first barrier, or atomically).
struct alignas(64) rank_info {
  static constexpr std::size_t text_bytes = 256;
  std::int64_t pid;
  std::uint32_t departed;  // left the world cleanly (its liveness lock then goes away too)
  std::uint32_t unused;
  // The exchange of communicator::split (process_world.hpp), one round per split.
  std::uint64_t split_seq;
  std::int32_t color, key;
  std::uint64_t status_seq;  // the split whose status this is
  std::int32_t status;       // 0 ok, else failed (status_text says why)
  char status_text[text_bytes];
  char segment_name[128];  // a split's leader: the name of the segment it created
};

// What a rank exposes for one call on one channel in a process world: offsets from the segment's
// base (-1: not in the segment, so not readable by peers).
struct alignas(64) shared_exposed {
  std::int64_t in_off;
  index_t in_elems;
  std::int64_t out_off;
  index_t out_elems;
  call_fingerprint call;
};

struct padded_counter {
  alignas(64) std::uint64_t value;
};

// A rank's mailbox for small direct calls (world::flat_bytes): two of them per rank, used in turn.
// Its first cache line holds `seq` (the owner's count of such calls), `check` (a hash of the call's
// fingerprint and element count) and the input's first flat_inline_bytes; the rest of the input
// follows, then the fingerprint and count themselves (flat_detail), read only to describe a
// disagreement. The owner writes input, detail and check, then `seq` (release); a peer waits for
// `seq` (acquire), compares `check` with its own call's and reads the input: a call of at most
// flat_inline_bytes moves one cache line per peer.
struct alignas(64) flat_header {
  std::uint64_t seq;
  std::uint64_t check;
};
struct flat_detail {
  index_t elems;
  call_fingerprint call;
};
inline constexpr std::size_t flat_data_bytes = 4096;
inline constexpr std::size_t flat_inline_bytes = 64 - 2 * sizeof(std::uint64_t);
inline constexpr std::size_t flat_detail_offset = (2 * sizeof(std::uint64_t) + flat_data_bytes + 63) / 64 * 64;
inline constexpr std::size_t flat_box_bytes = (flat_detail_offset + sizeof(flat_detail) + 63) / 64 * 64;
// The check word of a mailbox call: its fingerprint and element count, mixed.
inline std::uint64_t flat_check(index_t elems, const call_fingerprint& call) noexcept {
  std::uint64_t w[6];
  static_assert(sizeof(call_fingerprint) == 5 * sizeof(std::uint64_t));
  std::memcpy(w, &call, sizeof call);
  w[5] = static_cast<std::uint64_t>(elems);
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  for (std::uint64_t x : w) h = (h ^ x) * 0xBF58476D1CE4E5B9ull, h ^= h >> 31;
  return h;
}

// The collective call a rank is in (world::note_call), for a peer that timed out waiting for it:
// written by its owner at the start of every collective call, read by others only then. `version`
// is odd while the owner writes (a seqlock).
struct alignas(64) current_call {
  std::uint64_t version;
  call_fingerprint call;
};

// Words of a bitmap of ranks.
constexpr std::size_t sender_words(int nranks) noexcept { return (static_cast<std::size_t>(nranks) + 63) / 64; }

// Offsets of everything in a process world's segment, the same in every process for the same
// (nranks, options).
struct segment_layout {
  std::size_t control = 0, info = 0, doorbells = 0, arrivals = 0, exposed = 0, senders = 0, calls = 0, flat = 0;
  std::size_t control_end = 0;  // everything before the connections: allocated at creation
  std::size_t connections = 0, connection_bytes = 0, windows = 0, window_bytes = 0, total = 0;

  // Throws errc::invalid_argument on `rank` when a size does not fit in 64 bits.
  segment_layout(int nranks, const options& o, const char* where = "host::world", int rank = no_rank) {
    const collcomm::detail::option_sizes z(where, rank,
                                           "argument 'nranks' and options 'channels', 'slots', "
                                           "'slot_bytes', 'window_bytes'");
    const std::size_t n = static_cast<std::size_t>(nranks), nc = static_cast<std::size_t>(o.channels);
    std::size_t at = 0;
    control = at;
    at = z.align_up(at + sizeof(control_block), 64);
    info = at;
    at = z.align_up(z.add(at, z.mul(n, sizeof(rank_info))), 64);
    doorbells = at;
    at = z.align_up(z.add(at, z.mul(n, sizeof(doorbell))), 64);
    arrivals = at;  // (channel, rank), plus a control channel (index channels) for split and dup
    at = z.align_up(z.add(at, z.mul(z.mul(nc + 1, n), sizeof(padded_counter))), 64);
    exposed = at;
    at = z.align_up(z.add(at, z.mul(z.mul(nc, n), sizeof(shared_exposed))), 64);
    senders = at;
    at = z.align_up(z.add(at, z.mul(z.mul(z.mul(nc, n), sender_words(nranks)), sizeof(std::uint64_t))), 64);
    calls = at;
    at = z.align_up(z.add(at, z.mul(n, sizeof(current_call))), 64);
    flat = at;  // (rank, 2 mailboxes)
    at = z.align_up(z.add(at, z.mul(z.mul(n, 2), flat_box_bytes)), 64);
    control_end = z.align_up(at, 4096);
    connections = control_end;
    connection_bytes = z.align_up(
        z.add(connection::counter_bytes,
              z.mul(z.add(connection::header_bytes, z.align_up(o.slot_bytes, 64)), static_cast<std::size_t>(o.slots))),
        64);
    at = z.add(connections, z.mul(z.mul(z.mul(nc, n), n), connection_bytes));
    windows = z.align_up(at, 4096);
    window_bytes = z.align_up(o.window_bytes, 4096);
    total = z.add(windows, z.mul(n, window_bytes));
  }
};

struct process_tag {};
}  // namespace detail

class world {
 public:
  // Beyond this the per-channel tables stop being small.
  static constexpr int max_ranks = 1024;
  // How often a waiting rank of a process world tests its peers' liveness locks.
  static constexpr std::chrono::milliseconds liveness_interval{50};

  // Throws errc::invalid_argument, naming the field, when an option is out of its range.
  static void check_options(int nranks, const options& opt, const char* where = "host::world") {
    auto bad = [&](const std::string& msg) { collcomm::detail::fail(errc::invalid_argument, where, no_rank, msg); };
    if (nranks < 1 || nranks > max_ranks)
      bad("argument 'nranks' = " + std::to_string(nranks) + " is out of range [1, " + std::to_string(max_ranks) + "]");
    check_common_options(opt, where, no_rank);
    if (opt.channels < 1 || opt.channels > 64)
      bad("option 'channels' = " + std::to_string(opt.channels) + " is out of range [1, 64]");
    if (opt.window_bytes < 4096)
      bad("option 'window_bytes' = " + std::to_string(opt.window_bytes) + " is out of range [4096, 2^40]");
    if (opt.cpus < 0) bad("option 'cpus' = " + std::to_string(opt.cpus) + " is negative");
    // A connection's slots are one allocation (threads) or one stretch of the segment (processes).
    const std::size_t block = connection::block_bytes(opt.slots, opt.slot_bytes);
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && block / static_cast<std::size_t>(page) >= static_cast<std::size_t>(pages))
      bad("options 'slots' x 'slot_bytes' = " + std::to_string(opt.slots) + " x " + std::to_string(opt.slot_bytes) +
          " make each connection " + std::to_string(block) + " bytes, more than this host's memory (" +
          std::to_string(static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)) + " bytes)");
  }

  // A world of `nranks` threads of this process. Throws errc::invalid_argument, naming the
  // argument, when nranks is not in [1, max_ranks] or an option is out of its range (options.hpp).
  explicit world(int nranks, options opt = {})
      : nranks_(nranks), opt_(opt), spin_(detail::spin_of(opt.spin, nranks, "COLLCOMM_HOST_SPIN_US", opt.cpus)) {
    check_options(nranks, opt);
    const std::size_t nc = static_cast<std::size_t>(opt.channels), n = static_cast<std::size_t>(nranks);
    blocks_ = std::make_unique<std::byte*[]>(nc * n * n);  // value-initialized: all null
    own_control_ = std::make_unique<detail::control_block>();
    own_arrivals_ = std::make_unique<detail::padded_counter[]>((nc + 1) * n);
    own_exposed_ = std::make_unique<exposed_buffers[]>(nc * n);
    own_senders_ = std::make_unique<std::uint64_t[]>(nc * n * detail::sender_words(nranks));  // zeroed
    own_doorbells_ = std::make_unique<detail::doorbell[]>(n);
    control_ = own_control_.get();
    arrivals_ = own_arrivals_.get();
    senders_ = own_senders_.get();
    own_calls_ = std::make_unique<detail::current_call[]>(n);
    calls_ = own_calls_.get();
    doorbells_ = own_doorbells_.get();
    own_flat_ = std::make_unique<flat_box[]>(2 * n);
    flat_ = reinterpret_cast<std::byte*>(own_flat_.get());
    flat_calls_ = std::make_unique<std::uint64_t[]>(n);
    scratch_ = std::make_unique<scratch_slot[]>(n);
  }

  // A world of processes over `seg`, already mapped and checked (check_segment), where this
  // process is rank `rank`: records its pid and takes its liveness lock. Made by
  // process_world.hpp; use host::make_process_world or communicator::split / dup.
  world(detail::process_tag, collcomm::detail::shm_segment seg, int nranks, int rank, options opt)
      : nranks_(nranks),
        opt_(opt),
        spin_(detail::spin_of(opt.spin, nranks, "COLLCOMM_HOST_SPIN_US", opt.cpus)),
        rank_(rank),
        seg_(std::move(seg)),
        layout_(nranks, opt) {
    std::byte* b = seg_.base();
    control_ = reinterpret_cast<detail::control_block*>(b + layout_.control);
    info_ = reinterpret_cast<detail::rank_info*>(b + layout_.info);
    doorbells_ = reinterpret_cast<detail::doorbell*>(b + layout_.doorbells);
    arrivals_ = reinterpret_cast<detail::padded_counter*>(b + layout_.arrivals);
    shared_exposed_ = reinterpret_cast<detail::shared_exposed*>(b + layout_.exposed);
    senders_ = reinterpret_cast<std::uint64_t*>(b + layout_.senders);
    calls_ = reinterpret_cast<detail::current_call*>(b + layout_.calls);
    flat_ = b + layout_.flat;
    flat_calls_ = std::make_unique<std::uint64_t[]>(static_cast<std::size_t>(nranks));
    scratch_ = std::make_unique<scratch_slot[]>(static_cast<std::size_t>(nranks));
    info_[rank].pid = static_cast<std::int64_t>(::getpid());
    seg_.lock_rank(rank);
  }

  world(const world&) = delete;
  world& operator=(const world&) = delete;

  ~world() {
    if (seg_) {
      // Before the liveness lock goes (with the descriptor): peers must not take this for a death.
      detail::sys_atomic<std::uint32_t>(info_[rank_].departed).store(1, cuda::std::memory_order_release);
      return;  // seg_ unmaps and closes
    }
    const std::size_t total =
        static_cast<std::size_t>(opt_.channels) * static_cast<std::size_t>(nranks_) * static_cast<std::size_t>(nranks_);
    for (std::size_t i = 0; i < total; ++i)
      if (blocks_[i] != nullptr) ::operator delete[](blocks_[i], std::align_val_t{64});
  }

  int size() const noexcept { return nranks_; }
  const options& opts() const noexcept { return opt_; }
  // Whether the ranks are processes (each drives local_rank()) rather than threads of this one.
  bool is_process() const noexcept { return static_cast<bool>(seg_); }
  // The rank this process drives in a world of processes; no_rank in a world of threads.
  int local_rank() const noexcept { return rank_; }

  // The connection (channel, src -> dst), made on first use by either end.
  connection connect(int channel, int src, int dst) {
    const std::size_t i =
        (static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(src)) *
            static_cast<std::size_t>(nranks_) +
        static_cast<std::size_t>(dst);
    if (seg_)
      return connection(seg_.base() + layout_.connections + i * layout_.connection_bytes, opt_.slots, opt_.slot_bytes);
    detail::sys_atomic<std::byte*> ref(blocks_[i]);
    // Acquire: the block's zeroed counters happen before their use by the other end.
    std::byte* block = ref.load(cuda::std::memory_order_acquire);
    if (block == nullptr) {
      const std::size_t bytes = connection::block_bytes(opt_.slots, opt_.slot_bytes);
      // Only the counters are zeroed: pages are touched only by the slots that carry messages.
      std::byte* made = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64}));
      std::memset(made, 0, connection::counter_bytes);
      std::byte* expected = nullptr;
      if (ref.compare_exchange_strong(expected, made, cuda::std::memory_order_acq_rel,
                                      cuda::std::memory_order_acquire)) {
        block = made;
      } else {
        ::operator delete[](made, std::align_val_t{64});
        block = expected;  // the other end made it first
      }
    }
    return connection(block, opt_.slots, opt_.slot_bytes);
  }

  detail::doorbell& doorbell_of(int rank) noexcept { return doorbells_[static_cast<std::size_t>(rank)]; }

  // A rank's scratch, 64-byte aligned, used by that rank's thread only (a rank runs its channels
  // one after the other): room for one slot of accumulators (up to 4 bytes per byte of element:
  // fp8 accumulates in float) and one slot of elements. Private memory in both kinds of world.
  std::size_t scratch_bytes() const noexcept { return 5 * opt_.slot_bytes + 128; }
  std::byte* scratch(int rank) {
    scratch_slot& s = scratch_[static_cast<std::size_t>(rank)];
    if (!s.memory) s.memory.reset(new (std::align_val_t{64}) std::byte[scratch_bytes()]);
    return s.memory.get();
  }

  // The sequence number of rank `rank`'s next collective call on this world (from 0), counted:
  // every rank makes every collective call, in the same order (fingerprint.hpp).
  std::uint64_t next_call_seq(int rank) noexcept { return scratch_[static_cast<std::size_t>(rank)].calls++; }

  // Rank `rank` starts collective call `call` (note_call), and the call rank `peer` is in, if it
  // could be read (peer_call: a few tries of the seqlock).
  void note_call(int rank, const call_fingerprint& call) noexcept {
    scratch_slot& own = scratch_[static_cast<std::size_t>(rank)];
    own.previous = own.current;
    own.current = call;
    detail::current_call& c = calls_[rank];
    auto v = detail::sys_atomic<std::uint64_t>(c.version);
    const std::uint64_t was = v.load(cuda::std::memory_order_relaxed);
    v.store(was + 1, cuda::std::memory_order_relaxed);
    cuda::std::atomic_thread_fence(cuda::std::memory_order_release);
    std::memcpy(static_cast<void*>(&c.call), &call, sizeof call);
    v.store(was + 2, cuda::std::memory_order_release);
  }
  bool peer_call(int peer, call_fingerprint& out) const noexcept {
    detail::current_call& c = calls_[peer];
    auto v = detail::sys_atomic<std::uint64_t>(c.version);
    for (int tries = 0; tries < 100; ++tries) {
      const std::uint64_t a = v.load(cuda::std::memory_order_acquire);
      if (a == 0) return false;  // no collective call yet
      if (a & 1) continue;
      std::memcpy(static_cast<void*>(&out), &c.call, sizeof out);
      cuda::std::atomic_thread_fence(cuda::std::memory_order_acquire);
      if (v.load(cuda::std::memory_order_relaxed) == a) return true;
    }
    return false;
  }
  // While `rank` waits in collective call `call` (after each sleep): a rank in the same call number
  // making another call is a disagreement, reported at once — ranks meeting at different kinds of
  // wait (a barrier, a mailbox) exchange nothing that would show it sooner.
  void check_same_call(const char* what, int rank, const call_fingerprint& call) {
    if (call.seq == call_fingerprint::p2p_seq) return;
    for (int r = 0; r < nranks_; ++r) {
      call_fingerprint theirs;
      if (r == rank || !peer_call(r, theirs) || theirs.seq != call.seq) continue;
      if (const unsigned fields = differing_fields(call, theirs))
        disagree(what, rank, r, call, theirs, fields,
                 "the call rank " + std::to_string(r) + " is making while rank " + std::to_string(rank) + " waits");
    }
  }
  // Before a wait of `rank` in collective call `call` for rank `peer` reports a timeout: a rank in
  // the same call number making another call (the peer, or a rank the peer may wait for in turn),
  // or the peer already past this call (it sent everything it meant to in it, and not what `rank`
  // waits for), is a disagreement, reported as one.
  void check_waited_call(const char* what, int rank, int peer, const call_fingerprint& call) {
    if (call.seq == call_fingerprint::p2p_seq) return;
    for (int i = 0; i < nranks_; ++i) {
      const int r = (peer + i) % nranks_;  // the awaited peer first
      call_fingerprint theirs;
      if (r == rank || !peer_call(r, theirs) || theirs.seq < call.seq) continue;
      const unsigned fields = differing_fields(call, theirs);
      if (theirs.seq == call.seq && fields != 0)
        disagree(what, rank, r, call, theirs, fields,
                 "the call rank " + std::to_string(r) + " is making while rank " + std::to_string(rank) +
                     " waits (for rank " + std::to_string(peer) + ")");
      if (r == peer && theirs.seq > call.seq)
        disagree(what, rank, r, call, theirs, fields,
                 "the call rank " + std::to_string(r) + " went on to while rank " + std::to_string(rank) +
                     " waits for it in call #" + std::to_string(call.seq));
    }
    // A rank still in an earlier call may be about to find the disagreement (its wait began first):
    // give its report a moment to arrive before this one reports a plain timeout.
    const auto until = std::chrono::steady_clock::now() +
                       std::min<std::chrono::milliseconds>(opt_.timeout / 4, std::chrono::milliseconds(200));
    while (!is_aborted() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (is_aborted()) throw_aborted(what, rank);
  }

  // ---- failure -----------------------------------------------------------------------------------
  // Throws errc::internal/timeout/... after marking the world failed (see Failures above).
  [[noreturn]] void fail(errc code, const char* what, int rank, const std::string& msg) {
    const std::string text = collcomm::detail::format_error(what, rank, msg);
    record(control_->failed, control_->failure_ready, control_->failure, text);
    throw error(code, rank, text);
  }
  // Throws errc::invalid_argument on `rank`, which is in call `mine`, after it met `theirs` of rank
  // `peer` in `where` (a message, an exposure); marks the world failed and aborts it with the same
  // text (see Disagreement above). `fields`: differing_fields(mine, theirs), 0 when the calls agree
  // but the message's size does not.
  // `verb`: how `rank` relates to `mine` ("is in", "made" for its call before).
  [[noreturn]] void disagree(const char* what, int rank, int peer, const call_fingerprint& mine,
                             const call_fingerprint& theirs, unsigned fields, const std::string& where,
                             const char* verb = "is in") {
    const std::string text = collcomm::detail::format_error(
        what, rank,
        "rank " + std::to_string(rank) + " " + verb + " " + to_string(mine) + ", but " + where + " belongs to rank " +
            std::to_string(peer) + "'s " + to_string(theirs) + ": the ranks disagree on " +
            (fields != 0 ? disagreement_text(fields)
                         : std::string("how the call splits into messages (the peers of a send_recv, or the "
                                       "tuning's channels or slot bytes)")) +
            "; every rank must make the same collective calls, in the same order, with the same arguments");
    record(control_->failed, control_->failure_ready, control_->failure, text);
    abort(no_rank, text);
    throw error(errc::invalid_argument, rank, text);
  }
  // A message of `peer`'s call `theirs`, met by `rank` in call `call`, that carries the number of
  // `rank`'s previous call is left over from it: that call is where the ranks disagreed, and the
  // one the report names (whichever rank meets it first). Throws as disagree does when the two
  // differ; returns otherwise.
  void disagree_previous(const char* what, int rank, int peer, const call_fingerprint& call,
                         const call_fingerprint& theirs, const std::string& where) {
    const scratch_slot& own = scratch_[static_cast<std::size_t>(rank)];
    if (call.seq == 0 || call.seq == call_fingerprint::p2p_seq || own.current.seq != call.seq ||
        own.previous.seq != theirs.seq)
      return;
    if (const unsigned fields = differing_fields(own.previous, theirs))
      disagree(what, rank, peer, own.previous, theirs, fields,
               where + " (met in call #" + std::to_string(call.seq) + ")", "made");
  }
  // Throws errc::aborted when the world was aborted, or an earlier call failed after data moved.
  void check_usable(const char* what, int rank) {
    if (is_aborted()) throw_aborted(what, rank);
    if (detail::sys_atomic<std::uint32_t>(control_->failed).load(cuda::std::memory_order_acquire) == 0) return;
    collcomm::detail::fail(errc::aborted, what, rank,
                           "this host world is unusable after an earlier failure (" +
                               recorded(control_->failure_ready, control_->failure) + "); make a new world");
  }

  // Marks the world aborted (see Abort above) and wakes every waiting rank. `by`: the rank that
  // aborts (for the message; no_rank if none); `reason` says why. Never throws; the first abort's
  // reason is the one every rank reports.
  void abort(int by, const std::string& reason) noexcept {
    try {
      std::string text = by == no_rank ? reason : "rank " + std::to_string(by) + " aborted the communicator";
      if (by != no_rank && !reason.empty()) text += " (" + reason + ")";
      record(control_->aborted, control_->abort_ready, control_->abort_text, text);
    } catch (...) {
      detail::sys_atomic<std::uint32_t>(control_->aborted).store(1, cuda::std::memory_order_release);
    }
    for (int r = 0; r < nranks_; ++r) detail::ring(doorbell_of(r));
  }
  bool is_aborted() const noexcept {
    return detail::sys_atomic<std::uint32_t>(control_->aborted).load(cuda::std::memory_order_acquire) != 0;
  }

  // Called by every wait of `rank` after each sleep: throws errc::aborted when the world was
  // aborted, or (process worlds, every liveness_interval) when a peer's process died.
  void watch(int rank, const char* what) {
    if (is_aborted()) throw_aborted(what, rank);
    if (!seg_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_liveness_check_) return;
    next_liveness_check_ = now + liveness_interval;
    for (int r = 0; r < nranks_; ++r) {
      if (r == rank || seg_.rank_lock_held(r)) continue;
      if (detail::sys_atomic<std::uint32_t>(info_[r].departed).load(cuda::std::memory_order_acquire) != 0) continue;
      abort(no_rank, "rank " + std::to_string(r) + " (pid " + std::to_string(info_[r].pid) +
                         ") died: its process ended without leaving the communicator (found by rank " +
                         std::to_string(rank) + " in " + what + ")");
      throw_aborted(what, rank);
    }
  }

  // Whether process rank r's process is gone (no liveness lock, no clean departure).
  bool rank_died(int r) const noexcept {
    if (!seg_ || r == rank_) return false;
    return !seg_.rank_lock_held(r) &&
           detail::sys_atomic<std::uint32_t>(info_[r].departed).load(cuda::std::memory_order_acquire) == 0;
  }
  std::int64_t pid_of(int r) const noexcept { return seg_ ? info_[r].pid : static_cast<std::int64_t>(::getpid()); }

  // ---- barrier ---------------------------------------------------------------------------------
  // Every rank of the world, one channel (or channel opts().channels: the control channel that
  // split and dup use). Each rank counts the barriers it entered on the channel (a counter only it
  // writes, that only grows); barrier g is passed when every rank's count is >= g. Release store of
  // the own count, acquire loads of the others': everything a rank did before it entered happens
  // before everything any rank does after it leaves. `call`: the call that waits, if any; while it
  // waits, a message of another call sent to it (a peer that runs another schedule, with no
  // barrier to match this one) is found as check_stale finds it.
  void barrier(int channel, int rank, const char* what, const call_fingerprint* call = nullptr) {
    const std::size_t base = static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_);
    auto count = [&](int r) {
      return detail::sys_atomic<std::uint64_t>(arrivals_[base + static_cast<std::size_t>(r)].value);
    };
    const std::uint64_t gen = count(rank).load(cuda::std::memory_order_relaxed) + 1;
    count(rank).store(gen, cuda::std::memory_order_release);
    for (int r = 0; r < nranks_; ++r)
      if (r != rank) detail::ring(doorbell_of(r));
    auto all_arrived = [&] {
      for (int r = 0; r < nranks_; ++r)
        if (count(r).load(cuda::std::memory_order_acquire) < gen) return false;
      return true;
    };
    detail::wait_until(
        doorbell_of(rank), opt_.timeout, spin_, all_arrived,
        [&] {
          if (call != nullptr)
            for (int r = 0; r < nranks_; ++r)
              if (count(r).load(cuda::std::memory_order_acquire) < gen) check_waited_call(what, rank, r, *call);
          std::string missing;
          for (int r = 0; r < nranks_; ++r)
            if (count(r).load(cuda::std::memory_order_acquire) < gen)
              missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          timeout(what, rank,
                  "at barrier #" + std::to_string(gen) + " on channel " + std::to_string(channel) +
                      " waiting for rank(s) " + missing + " to arrive");
        },
        [&] {
          watch(rank, what);
          if (call != nullptr) {
            check_stale(channel, channel + 1, rank, *call, what, false);
            check_same_call(what, rank, *call);
          }
        });
  }

  // ---- direct access ---------------------------------------------------------------------------
  // What a rank exposes to its peers for one call of a direct schedule on one channel, with the
  // call's fingerprint (a peer compares it before it reads a buffer). Written by the owner before
  // the schedule's first barrier, read by peers only after it (the barrier orders them). In a
  // process world a peer sees the pointers translated into its own mapping of the segment, and
  // null for memory outside the segment (a buffer that was not staged: the call's algorithm reads
  // no peer's buffers).
  struct alignas(64) exposed_buffers {  // lines of its own: written by one rank, read by all
    const void* in = nullptr;
    index_t in_elems = 0;
    void* out = nullptr;
    index_t out_elems = 0;
    call_fingerprint call;  // the owner's call
  };
  void expose(int channel, int rank, const exposed_buffers& b) noexcept {
    if (!seg_) {
      own_exposed_[index(channel, rank)] = b;
      return;
    }
    // A buffer outside the segment is exposed as empty: a peer that reads it anyway (a schedule
    // bug) meets the primitives' bounds check, not a wild pointer.
    detail::shared_exposed& e = shared_exposed_[index(channel, rank)];
    e.in_off = offset_of(b.in);
    e.in_elems = e.in_off < 0 ? 0 : b.in_elems;
    e.out_off = offset_of(b.out);
    e.out_elems = e.out_off < 0 ? 0 : b.out_elems;
    e.call = b.call;
  }
  exposed_buffers exposed(int channel, int rank) const noexcept {
    if (!seg_) return own_exposed_[index(channel, rank)];
    const detail::shared_exposed& e = shared_exposed_[index(channel, rank)];
    exposed_buffers b;
    b.in = e.in_off < 0 ? nullptr : seg_.base() + e.in_off;
    b.in_elems = e.in_elems;
    b.out = e.out_off < 0 ? nullptr : seg_.base() + e.out_off;
    b.out_elems = e.out_elems;
    b.call = e.call;
    return b;
  }

  // ---- small direct calls through mailboxes ----------------------------------------------------
  // A direct call on one channel whose input is at most flat_bytes (one_shot of a few hundred
  // bytes: communicator.hpp decides, the same on every rank) does not expose buffers and meet at
  // two barriers: each rank copies its input into the next of its two mailboxes with the call's
  // fingerprint and posts its count of such calls there; a peer waits for that count and reads the
  // input from the mailbox. No rank waits at the end of the call: a rank rewrites a mailbox two
  // such calls later, and in the call between it waited for every peer's post, which a peer makes
  // only after it finished reading the call before.
  static constexpr std::size_t flat_bytes = detail::flat_data_bytes;

  // This rank's next mailbox call: its number (from 1) and the mailbox to fill (flat_data).
  std::uint64_t next_flat_call(int rank) noexcept { return ++flat_calls_[static_cast<std::size_t>(rank)]; }
  std::byte* flat_data(int rank, std::uint64_t seq) noexcept {
    return reinterpret_cast<std::byte*>(flat_header_of(rank, seq)) + sizeof(detail::flat_header::seq) +
           sizeof(detail::flat_header::check);
  }
  // Posts rank's mailbox of call `seq` (its input already in flat_data; `check` = flat_check(elems,
  // call)) and wakes the peers.
  void flat_post(int rank, std::uint64_t seq, index_t elems, const call_fingerprint& call,
                 std::uint64_t check) noexcept {
    detail::flat_header* h = flat_header_of(rank, seq);
    detail::flat_detail* d = flat_detail_of(h);
    d->elems = elems;
    d->call = call;
    h->check = check;
    detail::sys_atomic<std::uint64_t>(h->seq).store(seq, cuda::std::memory_order_release);
    for (int r = 0; r < nranks_; ++r)
      if (r != rank) detail::ring(doorbell_of(r));
    detail::demote_line(h);  // the line every peer polls: count, check, the first bytes of the input
  }
  // Waits until `peer` posted its mailbox of call `seq`, checks that it is of `call` with `elems`
  // elements, and returns its input.
  const std::byte* flat_wait(int rank, int peer, std::uint64_t seq, index_t elems, const call_fingerprint& call,
                             std::uint64_t check, const char* what) {
    detail::flat_header* h = flat_header_of(peer, seq);
    detail::sys_atomic<std::uint64_t> posted(h->seq);
    detail::wait_until(
        doorbell_of(rank), opt_.timeout, spin_, [&] { return posted.load(cuda::std::memory_order_acquire) >= seq; },
        [&] {
          check_waited_call(what, rank, peer, call);
          timeout(what, rank,
                  "waiting for rank " + std::to_string(peer) + "'s input to " + to_string(call) +
                      " (its small-call mailbox)");
        },
        [&] {
          watch(rank, what);
          check_stale(0, 1, rank, call, what, false);
          check_same_call(what, rank, call);
        });
    if (h->check != check || posted.load(cuda::std::memory_order_relaxed) != seq) {
      const detail::flat_detail* d = flat_detail_of(h);
      const std::string where = "the input posted for it from rank " + std::to_string(peer);
      if (const unsigned fields = differing_fields(call, d->call); fields != 0)
        disagree(what, rank, peer, call, d->call, fields, where);
      disagree(what, rank, peer, call, d->call, 0,
               where + ", of " + std::to_string(d->elems) + " elements where rank " + std::to_string(rank) +
                   " expects " + std::to_string(elems));
    }
    return flat_data(peer, seq);
  }

  // Process worlds: rank `rank`'s window (window_bytes() bytes, 4096-byte aligned) in the segment.
  std::byte* window(int rank) const noexcept {
    return seg_.base() + layout_.windows + static_cast<std::size_t>(rank) * layout_.window_bytes;
  }
  std::size_t window_bytes() const noexcept { return seg_ ? layout_.window_bytes : 0; }

  // ---- messages --------------------------------------------------------------------------------
  // Sender side of (channel, src -> dst): waits for a free slot and returns its data.
  std::byte* wait_slot(int channel, int src, int dst, const char* what, const call_fingerprint* call = nullptr) {
    connection c = connect(channel, src, dst);
    detail::wait_until(
        doorbell_of(src), opt_.timeout, spin_, [&] { return c.can_send(); },
        [&] {
          if (call != nullptr) check_waited_call(what, src, dst, *call);
          timeout(what, src,
                  "waiting for rank " + std::to_string(dst) + " to free a slot on channel " + std::to_string(channel) +
                      " (connection " + std::to_string(src) + " -> " + std::to_string(dst) + ": all " +
                      std::to_string(c.slots()) + " slots full, rank " + std::to_string(dst) + " consumed " +
                      std::to_string(c.peer_head()) + " of " + std::to_string(c.own_tail()) + " messages)");
        },
        [&] { watch(src, what); });
    return c.data(c.own_tail());
  }
  // Sender side, without waiting: the next slot's data when it is free now, else null (then
  // wait_slot). Either way the slot is the sender's until it publishes it.
  std::byte* try_slot(int channel, int src, int dst) {
    connection c = connect(channel, src, dst);
    return c.can_send() ? c.data(c.own_tail()) : nullptr;
  }
  // Sender side: the slot returned by wait_slot holds `elems` elements (`bytes` bytes) of call
  // `call`; send it.
  void publish(int channel, int src, int dst, index_t elems, std::size_t /*bytes*/, const call_fingerprint& call) {
    connection c = connect(channel, src, dst);
    slot_header& h = c.header(c.own_tail());
    h.call = call;
    h.elems = elems;
    // Once per connection: src is among dst's senders (check_stale reads it).
    detail::sys_atomic<std::uint64_t> word(senders_[sender_word(channel, dst) + static_cast<std::size_t>(src) / 64]);
    const std::uint64_t bit = std::uint64_t{1} << (src % 64);
    if ((word.load(cuda::std::memory_order_relaxed) & bit) == 0) word.fetch_or(bit, cuda::std::memory_order_release);
    c.publish();
    detail::ring(doorbell_of(dst));
  }
  // Receiver side of (channel, src -> dst): waits for the next message and returns its data.
  // Throws errc::invalid_argument when it belongs to another call than `call` (see Disagreement
  // above), or does not hold `elems` elements.
  const std::byte* wait_message(int channel, int src, int dst, index_t elems, const call_fingerprint& call,
                                const char* what) {
    connection c = connect(channel, src, dst);
    detail::wait_until(
        doorbell_of(dst), opt_.timeout, spin_, [&] { return c.can_recv(); },
        [&] {
          check_waited_call(what, dst, src, call);
          timeout(what, dst,
                  "waiting for message #" + std::to_string(c.own_head()) + " from rank " + std::to_string(src) +
                      " on channel " + std::to_string(channel) + " (connection " + std::to_string(src) + " -> " +
                      std::to_string(dst) + ": rank " + std::to_string(src) + " has sent " +
                      std::to_string(c.peer_tail()) + " messages)");
        },
        [&] { watch(dst, what); });
    const std::uint64_t m = c.own_head();
    const slot_header& h = c.header(m);
    const unsigned fields = differing_fields(call, h.call);
    if (fields != 0 || h.elems != elems) [[unlikely]] {
      const std::string where = "message #" + std::to_string(m) + " from rank " + std::to_string(src) + " on channel " +
                                std::to_string(channel);
      if (fields != 0) {
        disagree_previous(what, dst, src, call, h.call, where);
        disagree(what, dst, src, call, h.call, fields, where);
      }
      disagree(what, dst, src, call, h.call, 0,
               where + ", of " + std::to_string(h.elems) + " elements where rank " + std::to_string(dst) + " expects " +
                   std::to_string(elems));
    }
    if (call.seq != call_fingerprint::p2p_seq) c.last_read_call() = call.seq + 1;
    return c.data(m);
  }
  // Receiver side, in collective call `call` on channels [first, last): throws as wait_message does
  // when the next message of a connection to `dst` belongs to an earlier collective call, or to
  // another of the same number. Every rank consumes in each collective call all messages sent to
  // it in that call, so such a message is left over from a call whose ranks disagreed, where its
  // receiver needed no message (ranks that each took themselves for a broadcast's root) or received
  // from other peers: no later call may read it, and the connection it waits in may be one no
  // later call reads. Called at the start of each collective call (at_call_start), in barrier
  // waits, and at the end of each collective call. It skips the connections read in the call
  // before (at the start) or in this call (later): what waited there before the messages read was
  // read, and compared, first.
  void check_stale(int first, int last, int dst, const call_fingerprint& call, const char* what, bool at_call_start) {
    const std::size_t words = detail::sender_words(nranks_);
    for (int channel = first; channel < last; ++channel)
      for (std::size_t w = 0; w < words; ++w) {
        std::uint64_t bits = detail::sys_atomic<std::uint64_t>(senders_[sender_word(channel, dst) + w])
                                 .load(cuda::std::memory_order_acquire);
        for (; bits != 0; bits &= bits - 1) {
          const int src = static_cast<int>(w * 64) + __builtin_ctzll(bits);
          connection c = connect(channel, src, dst);
          // Read in the previous call (at its start) or in this one (later): what is left behind
          // the messages read there belongs to this call or a later one.
          if (c.last_read_call() == (at_call_start ? call.seq : call.seq + 1)) continue;
          if (!c.can_recv()) continue;
          const std::uint64_t m = c.own_head();
          const call_fingerprint& theirs = c.header(m).call;
          const unsigned fields = differing_fields(call, theirs);
          if (theirs.seq == call_fingerprint::p2p_seq || theirs.seq > call.seq || fields == 0) continue;
          const std::string where = "message #" + std::to_string(m) + " from rank " + std::to_string(src) +
                                    " on channel " + std::to_string(channel) + ", unread,";
          disagree_previous(what, dst, src, call, theirs, where);
          disagree(what, dst, src, call, theirs, fields, where);
        }
      }
  }
  // Receiver side: the message returned by wait_message is read; give its slot back.
  void consume(int channel, int src, int dst) {
    connect(channel, src, dst).consume();
    detail::ring(doorbell_of(src));
  }

  // ---- process worlds: the segment and the split exchange (process_world.hpp) ---------------------
  std::uint64_t token() const noexcept { return control_->token; }
  detail::rank_info& info(int rank) noexcept { return info_[rank]; }
  std::uint64_t next_split_seq() noexcept { return ++split_seq_; }

  // Writes the identity of a new segment (the creator, before any other rank opens it).
  static void init_segment(std::byte* base, int nranks, const options& o, std::uint64_t token) noexcept {
    auto* c = reinterpret_cast<detail::control_block*>(base + detail::segment_layout(nranks, o).control);
    c->nranks = nranks;
    c->channels = o.channels;
    c->slots = o.slots;
    c->slot_bytes = o.slot_bytes;
    c->window_bytes = o.window_bytes;
    c->token = token;
    c->mapped = 1;  // the creator
    detail::sys_atomic<std::uint64_t>(c->magic).store(detail::control_block::magic_value,
                                                      cuda::std::memory_order_release);
  }
  // Empty when the segment at `base` holds a world of these ranks and options, else what differs.
  static std::string check_segment(const std::byte* base, int nranks, const options& o) {
    const auto* c = reinterpret_cast<const detail::control_block*>(base + detail::segment_layout(nranks, o).control);
    if (c->magic != detail::control_block::magic_value) return "the segment holds no collcomm world (bad magic)";
    if (c->nranks != nranks || c->channels != o.channels || c->slots != o.slots || c->slot_bytes != o.slot_bytes ||
        c->window_bytes != o.window_bytes)
      return "the segment's world has other ranks or options than this rank's: nranks " + std::to_string(c->nranks) +
             ", channels " + std::to_string(c->channels) + ", slots " + std::to_string(c->slots) + ", slot_bytes " +
             std::to_string(c->slot_bytes) + ", window_bytes " + std::to_string(c->window_bytes);
    return {};
  }

 private:
  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct alignas(64) scratch_slot {  // a cache line each: ranks' threads write their own
    std::unique_ptr<std::byte[], aligned_delete> memory;
    std::uint64_t calls = 0;                 // collective calls made (next_call_seq)
    call_fingerprint current{}, previous{};  // the rank's last two collective calls (note_call)
  };

  std::size_t sender_word(int channel, int dst) const noexcept {
    return index(channel, dst) * detail::sender_words(nranks_);
  }

  std::size_t index(int channel, int rank) const noexcept {
    return static_cast<std::size_t>(channel) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(rank);
  }

  std::int64_t offset_of(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    if (b == nullptr || b < seg_.base() || b >= seg_.base() + seg_.size()) return -1;
    return static_cast<std::int64_t>(b - seg_.base());
  }

  // The first caller to set `flag` writes `text`, then publishes it with `ready`.
  static void record(std::uint32_t& flag, std::uint32_t& ready, char* dst, const std::string& text) noexcept {
    std::uint32_t expected = 0;
    if (!detail::sys_atomic<std::uint32_t>(flag).compare_exchange_strong(expected, 1, cuda::std::memory_order_acq_rel,
                                                                         cuda::std::memory_order_acquire))
      return;
    const std::size_t n = std::min(text.size(), detail::control_block::text_bytes - 1);
    std::memcpy(dst, text.data(), n);
    dst[n] = '\0';
    detail::sys_atomic<std::uint32_t>(ready).store(1, cuda::std::memory_order_release);
  }
  // The text of a set flag; waits a little for the writer to publish it.
  static std::string recorded(std::uint32_t& ready, const char* src) {
    for (int i = 0; i < 1000; ++i) {
      if (detail::sys_atomic<std::uint32_t>(ready).load(cuda::std::memory_order_acquire) != 0) return std::string(src);
      std::this_thread::yield();
    }
    return "its message was not recorded";
  }
  [[noreturn]] void throw_aborted(const char* what, int rank) {
    collcomm::detail::fail(errc::aborted, what, rank,
                           "the communicator was aborted: " + recorded(control_->abort_ready, control_->abort_text));
  }

  [[noreturn]] void timeout(const char* what, int rank, const std::string& awaited) {
    fail(errc::timeout, what, rank,
         "timed out after " + std::to_string(opt_.timeout.count()) + " ms " + awaited +
             "; does every rank call the same collectives with the same arguments?");
  }

  int nranks_;
  options opt_;
  detail::spin_policy spin_;  // the polling phase of this rank's waits (detail::spin_of)
  int rank_ = no_rank;        // process worlds: the rank this process drives
  // Shared state: on the heap (threads: the own_* members own it) or in the segment (processes).
  detail::control_block* control_ = nullptr;
  detail::padded_counter* arrivals_ = nullptr;  // (channel, rank): barriers entered; channels + 1 channels
  detail::current_call* calls_ = nullptr;       // (rank): the collective call each rank is in
  std::unique_ptr<detail::current_call[]> own_calls_;
  std::uint64_t* senders_ = nullptr;       // (channel, dst, word): bitmap of the ranks that ever sent to dst
  detail::doorbell* doorbells_ = nullptr;  // (rank)
  // Threads only.
  std::unique_ptr<std::byte*[]> blocks_;  // (channel, src, dst): connection blocks, made on first use
  std::unique_ptr<detail::control_block> own_control_;
  std::unique_ptr<detail::padded_counter[]> own_arrivals_;
  std::unique_ptr<std::uint64_t[]> own_senders_;
  std::unique_ptr<exposed_buffers[]> own_exposed_;  // (channel, rank)
  std::unique_ptr<detail::doorbell[]> own_doorbells_;
  // Processes only.
  collcomm::detail::shm_segment seg_;
  detail::segment_layout layout_{1, options{}};
  detail::rank_info* info_ = nullptr;                 // (rank)
  detail::shared_exposed* shared_exposed_ = nullptr;  // (channel, rank)
  std::chrono::steady_clock::time_point next_liveness_check_{};
  std::uint64_t split_seq_ = 0;
  // Both.
  std::unique_ptr<scratch_slot[]> scratch_;  // (rank): each used by that rank's thread only
  struct alignas(64) flat_box {
    std::byte bytes[detail::flat_box_bytes];
  };
  std::unique_ptr<flat_box[]> own_flat_;         // threads: the mailboxes
  std::byte* flat_ = nullptr;                    // (rank, 2): mailboxes of flat_box_bytes
  std::unique_ptr<std::uint64_t[]> flat_calls_;  // (rank): mailbox calls made; each by that rank only
  static detail::flat_detail* flat_detail_of(detail::flat_header* h) noexcept {
    return reinterpret_cast<detail::flat_detail*>(reinterpret_cast<std::byte*>(h) + detail::flat_detail_offset);
  }
  detail::flat_header* flat_header_of(int rank, std::uint64_t seq) noexcept {
    return reinterpret_cast<detail::flat_header*>(
        flat_ + (static_cast<std::size_t>(rank) * 2 + static_cast<std::size_t>(seq & 1)) * detail::flat_box_bytes);
  }
};

}  // namespace host
COLLCOMM_NAMESPACE_END
