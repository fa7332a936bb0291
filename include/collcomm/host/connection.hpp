// collcomm/host/connection.hpp — one FIFO connection (channel, src -> dst) of the host executor.
//
// A ring of `slots` slots in memory both ranks can reach, with two counters that only grow (never
// reset: a reset flag is how ABA bugs give wrong results):
//   tail  messages the sender has published   (written by src only; release store)
//   head  messages the receiver has consumed  (written by dst only; release store)
// Message m (0-based) lives in slot m % slots. The sender waits for tail - head < slots (acquire
// load of head: the receiver is done reading the slot), writes the slot, then publishes tail + 1
// (release: the data is visible before the counter). The receiver waits for tail > head (acquire
// load of tail), reads the slot, then publishes head + 1. Each slot starts with a header: the
// fingerprint of the sender's call (fingerprint.hpp: call number, kind, algorithm, op, root, count,
// element type) and how many elements the message holds. The receiver compares both with its own
// before it reads the data (host::world::wait_message), so that ranks that disagree about a call
// get an error naming both calls instead of the wrong data, in this call or a later one.
//
// Where it lives. A connection is a view over one block of connection::block_bytes(slots,
// slot_bytes) bytes, 64-byte aligned, laid out as
//   [0, 64) tail   [64, 128) head, then last_read_call   [128, ...) the slots, each header_bytes + the data
// The counters (and last_read_call) must start at zero; the slots need no initialization. A world of threads allocates
// the block on the heap on first use; a world of processes places every block at a fixed offset of
// its shared-memory segment (world.hpp), where the pages are zero until first touched. The view
// holds no state of its own, so each process may make its own over its own mapping.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/fingerprint.hpp>
#include <collcomm/host/wait.hpp>

#include <cstddef>
#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

struct slot_header {
  call_fingerprint call;  // the sender's call
  std::uint64_t elems;    // elements in the message
};

class connection {
 public:
  // Layout of one slot: the header, then the data at a 64-byte boundary (16-byte vectors and no
  // false sharing between the header and the data of the next slot).
  static constexpr std::size_t header_bytes = 64;
  static_assert(sizeof(slot_header) <= header_bytes);
  // The two counters, a cache line each (written by different ranks).
  static constexpr std::size_t counter_bytes = 128;

  static constexpr std::size_t stride_of(std::size_t slot_bytes) noexcept {
    return header_bytes + (slot_bytes + 63) / 64 * 64;
  }
  static constexpr std::size_t block_bytes(int slots, std::size_t slot_bytes) noexcept {
    return counter_bytes + stride_of(slot_bytes) * static_cast<std::size_t>(slots);
  }

  // A view over `block` (see above), which outlives it.
  connection(std::byte* block, int slots, std::size_t slot_bytes) noexcept
      : block_(block), slots_(static_cast<std::uint64_t>(slots)), stride_(stride_of(slot_bytes)) {}

  std::uint64_t slots() const noexcept { return slots_; }

  // --- the counters, with the ordering each use needs -------------------------------------------
  // Sender's own tail / receiver's own head: only that rank writes it, so relaxed is enough.
  std::uint64_t own_tail() const noexcept { return tail().load(cuda::std::memory_order_relaxed); }
  std::uint64_t own_head() const noexcept { return head().load(cuda::std::memory_order_relaxed); }
  // The peer's counter: acquire, so the peer's slot accesses before its release are visible.
  std::uint64_t peer_tail() const noexcept { return tail().load(cuda::std::memory_order_acquire); }
  std::uint64_t peer_head() const noexcept { return head().load(cuda::std::memory_order_acquire); }

  // Sender: is there a free slot for message `own_tail()`?
  bool can_send() const noexcept { return own_tail() - peer_head() < slots_; }
  // Receiver: has message `own_head()` arrived?
  bool can_recv() const noexcept { return peer_tail() > own_head(); }

  slot_header& header(std::uint64_t m) noexcept { return *reinterpret_cast<slot_header*>(slot(m)); }
  std::byte* data(std::uint64_t m) noexcept { return slot(m) + header_bytes; }

  // Sender: message own_tail() is written; make it visible (release: data before counter).
  void publish() noexcept { tail().store(own_tail() + 1, cuda::std::memory_order_release); }
  // Receiver: message own_head() is read; give its slot back (release: reads before reuse).
  void consume() noexcept { head().store(own_head() + 1, cuda::std::memory_order_release); }

  // Receiver's note, beside its head (a line it writes anyway): 1 + the number of the last
  // collective call in which it read a message here, 0 if none. Only the receiver uses it.
  std::uint64_t& last_read_call() noexcept { return *reinterpret_cast<std::uint64_t*>(block_ + 64 + 8); }

 private:
  // System scope: the same statement the GPU executor makes for host-mapped counters, and what a
  // world of processes over shared memory needs.
  detail::sys_atomic<std::uint64_t> tail() const noexcept {
    return detail::sys_atomic<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(block_));
  }
  detail::sys_atomic<std::uint64_t> head() const noexcept {
    return detail::sys_atomic<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(block_ + 64));
  }

  std::byte* slot(std::uint64_t m) noexcept { return block_ + counter_bytes + (m % slots_) * stride_; }

  std::byte* block_;
  std::uint64_t slots_;
  std::size_t stride_;
};

}  // namespace host
COLLCOMM_NAMESPACE_END
