// collcomm/gpu/process_resources.hpp — what a GPU world of processes shares beyond its device
// tables: the control page (POSIX shared memory registered with every process's GPU) with the
// world's abort word, who aborted and why, the stall records, a departure flag per rank and the
// mailbox that split() and dup() talk through; the liveness locks that name a dead rank; the
// peers' IPC mappings and this rank's exported memory; a staged world's shared connections.
// gpu/process_world.hpp makes them (world::join) and says where each lives.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/detail/shm_segment.hpp>
#include <collcomm/error.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {
namespace ipc_detail {

inline std::size_t align_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// The control page: (byte offset) what.
struct page_layout {
  static constexpr std::size_t abort_word = 0;   // uint32: 0, 1 (a wait timed out), 2 (abort())
  static constexpr std::size_t abort_claim = 4;  // uint32: the first abort() takes it
  static constexpr std::size_t abort_text = 8;   // up to 500 bytes, NUL-terminated
  static constexpr std::size_t text_bytes = 500;
  static constexpr std::size_t departed = 512;                 // (rank) uint32
  static constexpr std::size_t post_bytes = 512;               // a mailbox post's payload (split's exchanges)
  static constexpr std::size_t post_stride = 16 + post_bytes;  // (round: u64, size: u64, payload)
  std::size_t stall, mailbox, bytes;
  explicit page_layout(int n) {
    stall = align_up(departed + 4 * static_cast<std::size_t>(n), 64);
    mailbox = align_up(stall + sizeof(transport::stall_record) * static_cast<std::size_t>(n),
                       64);  // (rank, round parity) posts
    bytes = align_up(mailbox + 2 * post_stride * static_cast<std::size_t>(n), 4096);
  }
};

// What a world of processes owns beyond gpu::world's own tables (see the file comment).
class process_resources {
 public:
  process_resources(int rank, int nranks, int device, std::chrono::milliseconds timeout)
      : rank_(rank), n_(nranks), device_(device), timeout_(timeout), layout_(nranks) {}
  ~process_resources() { release(); }
  process_resources(const process_resources&) = delete;
  process_resources& operator=(const process_resources&) = delete;

  const page_layout& layout() const noexcept { return layout_; }
  std::byte* page() const noexcept { return page_.base(); }
  std::uint32_t* word(std::size_t offset) const noexcept {
    return reinterpret_cast<std::uint32_t*>(page_.base() + offset);
  }
  std::uint32_t* abort_word() const noexcept { return word(page_layout::abort_word); }  // 1 a wait timed out, 2 abort()
  const char* abort_text() const noexcept {
    return reinterpret_cast<const char*>(page_.base() + page_layout::abort_text);
  }
  const transport::stall_record* stall_records() const noexcept {
    return reinterpret_cast<const transport::stall_record*>(page_.base() + layout_.stall);
  }

  collcomm::detail::shm_segment page_;
  bool registered_ = false;
  // Staged worlds (options::connections = placement::host): every connection of the world in one
  // segment of POSIX shared memory, mapped and registered here (cudaHostRegister mapped |
  // portable); no device memory of a peer is opened.
  collcomm::detail::shm_segment conns_;
  bool conns_registered_ = false;
  bool joined_ = false;        // every rank mapped everything: destruction waits for the others
  void* mine_ = nullptr;       // this rank's exported allocation
  std::vector<void*> opened_;  // (rank) a peer's allocation opened here, or null

  // The ranks whose process is gone (their liveness lock released); with `unannounced`, only
  // those that had not said "departed" (killed or crashed before destroying their communicator).
  std::vector<int> dead_ranks(bool unannounced = false) const {
    std::vector<int> dead;
    if (!page_) return dead;
    for (int q = 0; q < n_; ++q)
      if (q != rank_ && !page_.rank_lock_held(q) &&
          !(unannounced && std::atomic_ref<std::uint32_t>(*word(page_layout::departed + 4 * static_cast<std::size_t>(q)))
                                   .load(std::memory_order_acquire) != 0))
        dead.push_back(q);
    return dead;
  }

  // One round of the mailbox, collective over EVERY rank of the world: this rank posts `mine`
  // (at most post_bytes) and gets each rank's post (its size may differ; empty for none).
  // Rounds alternate between two posts per rank: a rank writes round k + 2 only after every rank
  // wrote round k + 1, which each did after reading round k. Bounded by the timeout; a rank whose
  // process is gone is an error naming it.
  std::vector<std::vector<std::byte>> post_round(std::span<const std::byte> mine, const char* what) {
    if (mine.size() > page_layout::post_bytes)
      collcomm::detail::fail(errc::internal, what, rank_,
                             "a mailbox post of " + std::to_string(mine.size()) + " bytes is too large");
    const std::uint64_t round = ++rounds_;
    auto post = [&](int q) {
      return page_.base() + layout_.mailbox + page_layout::post_stride * (2 * static_cast<std::size_t>(q) + round % 2);
    };
    std::byte* p = post(rank_);
    const std::uint64_t size = mine.size();
    std::memcpy(p + 8, &size, 8);
    if (!mine.empty()) std::memcpy(p + 16, mine.data(), mine.size());
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p)).store(round, std::memory_order_release);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n_));
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int q = 0; q < n_; ++q) {
      std::byte* o = post(q);
      while (std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(o)).load(std::memory_order_acquire) !=
             round) {
        if (!page_.rank_lock_held(q))
          collcomm::detail::fail(errc::timeout, what, rank_,
                                 "the process of rank " + std::to_string(q) + " is gone (killed or exited)");
        if (std::chrono::steady_clock::now() > deadline)
          collcomm::detail::fail(errc::timeout, what, rank_,
                                 "timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank " +
                                     std::to_string(q) +
                                     " (every rank of the communicator must call split and dup, in the same order)");
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      std::uint64_t size = 0;
      std::memcpy(&size, o + 8, 8);
      all[static_cast<std::size_t>(q)].assign(o + 16, o + 16 + std::min<std::uint64_t>(size, page_layout::post_bytes));
    }
    return all;
  }

  void abort(int rank, const std::string& why) noexcept {
    try {
      raise("rank " + std::to_string(rank) + " called abort()" + (why.empty() ? "" : ": " + why));
    } catch (...) {}
  }
  // Whether raise() (or abort()) ran: the abort word may read 1 afterwards, when a kernel that
  // the raise cut short recorded a stall (its plain store), but the claim and the text stay.
  bool raised() const noexcept {
    return page_ && std::atomic_ref<std::uint32_t>(*word(page_layout::abort_claim)).load(std::memory_order_acquire) != 0;
  }
  // Ends every rank's kernels with `text` as the reason (the first one raised stays): the abort
  // word becomes 2, as by abort().
  void raise(const std::string& text) noexcept {
    if (!page_) return;
    std::uint32_t expected = 0;
    if (!std::atomic_ref<std::uint32_t>(*word(page_layout::abort_claim)).compare_exchange_strong(expected, 1)) return;
    const std::size_t k = std::min(text.size(), page_layout::text_bytes - 1);
    char* t = reinterpret_cast<char*>(page_.base() + page_layout::abort_text);
    std::memcpy(t, text.data(), k);
    t[k] = '\0';
    std::atomic_ref<std::uint32_t>(*word(page_layout::abort_word)).store(2, std::memory_order_release);
  }

 private:
  void release() noexcept {
    int saved = -1;
    cudaGetDevice(&saved);
    cudaSetDevice(device_);
    for (void* p : opened_)
      if (p) cudaIpcCloseMemHandle(p);
    opened_.clear();
    if (page_ && joined_) {
      std::atomic_ref<std::uint32_t>(*word(page_layout::departed + 4 * static_cast<std::size_t>(rank_)))
          .store(1, std::memory_order_release);
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      for (int q = 0; q < n_; ++q) {
        auto& flag = *word(page_layout::departed + 4 * static_cast<std::size_t>(q));
        while (std::atomic_ref<std::uint32_t>(flag).load(std::memory_order_acquire) == 0 && page_.rank_lock_held(q) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (conns_registered_) cudaHostUnregister(conns_.base());
    conns_registered_ = false;
    conns_ = collcomm::detail::shm_segment{};  // unmaps and closes; the memory goes with the last rank's mapping
    if (registered_) cudaHostUnregister(page_.base());
    registered_ = false;
    page_ = collcomm::detail::shm_segment{};  // unmaps, closes, drops the liveness lock
    if (mine_) cudaFree(mine_);
    mine_ = nullptr;
    if (saved >= 0) cudaSetDevice(saved);
  }

  int rank_, n_, device_;
  std::chrono::milliseconds timeout_;
  page_layout layout_;
  std::uint64_t rounds_ = 0;  // mailbox rounds so far: equal on every rank
};

}  // namespace ipc_detail
}  // namespace gpu
COLLCOMM_NAMESPACE_END
