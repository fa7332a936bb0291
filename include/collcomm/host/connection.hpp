// collcomm/host/connection.hpp — one FIFO connection (channel, src -> dst) of the host executor.
//
// A ring of `slots` slots in memory both ranks can reach, with two counters that only grow (never
// reset: a reset flag is how ABA bugs give wrong results):
//   tail  messages the sender has published   (written by src only; release store)
//   head  messages the receiver has consumed  (written by dst only; release store)
// Message m (0-based) lives in slot m % slots. The sender waits for tail - head < slots (acquire
// load of head: the receiver is done reading the slot), writes the slot, then publishes tail + 1
// (release: the data is visible before the counter). The receiver waits for tail > head (acquire
// load of tail), reads the slot, then publishes head + 1. Each slot starts with a header saying
// how many elements of how many bytes the message holds, so that a receiver whose expected size
// differs — ranks that disagree on count, element type or root — reports it instead of reading
// the wrong data.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/host/wait.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

struct slot_header {
  std::uint64_t elems;  // elements in the message
  std::uint32_t elem;   // the sender's element type (element_kind)
  std::uint32_t unused;
};

class connection {
 public:
  // Layout of one slot: the header, then the data at a 64-byte boundary (16-byte vectors and no
  // false sharing between the header and the data of the next slot).
  static constexpr std::size_t header_bytes = 64;

  connection(int slots, std::size_t slot_bytes)
      : slots_(static_cast<std::uint64_t>(slots)),
        stride_(header_bytes + (slot_bytes + 63) / 64 * 64),
        // Not value-initialized: pages are touched only by the slots that carry messages.
        memory_(new (std::align_val_t{64}) std::byte[stride_ * static_cast<std::size_t>(slots)]) {}

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  std::uint64_t slots() const noexcept { return slots_; }

  // --- the counters, with the ordering each use needs -------------------------------------------
  // Sender's own tail / receiver's own head: only that rank writes it, so relaxed is enough.
  std::uint64_t own_tail() const noexcept { return counter(tail_).load(cuda::std::memory_order_relaxed); }
  std::uint64_t own_head() const noexcept { return counter(head_).load(cuda::std::memory_order_relaxed); }
  // The peer's counter: acquire, so the peer's slot accesses before its release are visible.
  std::uint64_t peer_tail() const noexcept { return counter(tail_).load(cuda::std::memory_order_acquire); }
  std::uint64_t peer_head() const noexcept { return counter(head_).load(cuda::std::memory_order_acquire); }

  // Sender: is there a free slot for message `own_tail()`?
  bool can_send() const noexcept { return own_tail() - peer_head() < slots_; }
  // Receiver: has message `own_head()` arrived?
  bool can_recv() const noexcept { return peer_tail() > own_head(); }

  slot_header& header(std::uint64_t m) noexcept { return *reinterpret_cast<slot_header*>(slot(m)); }
  std::byte* data(std::uint64_t m) noexcept { return slot(m) + header_bytes; }

  // Sender: message own_tail() is written; make it visible (release: data before counter).
  void publish() noexcept {
    counter(tail_).store(own_tail() + 1, cuda::std::memory_order_release);
  }
  // Receiver: message own_head() is read; give its slot back (release: reads before reuse).
  void consume() noexcept {
    counter(head_).store(own_head() + 1, cuda::std::memory_order_release);
  }

 private:
  // System scope: the same statement the GPU executor makes for host-mapped counters, and what a
  // world of processes over shared memory needs.
  static detail::sys_atomic<std::uint64_t> counter(std::uint64_t& c) noexcept { return detail::sys_atomic<std::uint64_t>(c); }

  std::byte* slot(std::uint64_t m) noexcept { return memory_.get() + (m % slots_) * stride_; }

  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };

  // mutable: atomic_ref needs a non-const reference even for loads.
  alignas(64) mutable std::uint64_t tail_ = 0;
  alignas(64) mutable std::uint64_t head_ = 0;
  alignas(64) std::uint64_t slots_;
  std::size_t stride_;
  std::unique_ptr<std::byte[], aligned_delete> memory_;
};

}  // namespace host
COLLCOMM_NAMESPACE_END
