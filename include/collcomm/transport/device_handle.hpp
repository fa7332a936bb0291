// collcomm/transport/device_handle.hpp — what a GPU kernel needs to reach its peers, for every
// GPU transport: the connections (FIFOs), the message counts, the direct primitives' buffer table
// and barrier, the abort words and the stall records. Trivially copyable; kernels take it by value.
//
// The data is one layout (handle_fields); what differs between transports is a compile-time
// property of the handle's type, never a run-time flag:
//   Scope      the memory scope of counters and fences: scope_device where every rank of the world
//              sits on one GPU (their stores meet in its L2), scope_system where a peer GPU or the
//              host reads them (several GPUs, connections in host memory);
//   LoadStore  whether peers' buffers can be loaded and stored (the direct primitives: one_shot,
//              two_shot, direct). False for connections staged through host memory.
// Each transport names its handles (transport/nvlink_device.hpp, transport/pcie_device.hpp).
//
// Address spaces: every pointer is memory that all ranks of the world can load and store — device
// memory (one GPU, or peers with peer access), or pinned host memory mapped into every GPU where
// connections are staged; `stall` is host-mapped always; `abort` is host memory in a world of
// processes. `entry_abort` is always this rank's GPU's own memory: the word a kernel reads at
// entry costs no PCIe round trip.
#pragma once

#include <collcomm/config.hpp>

#include <cstddef>
#include <concepts>
#include <cstdint>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// Memory scopes, as types (kernels map them to cuda::thread_scope).
struct scope_device {
  static constexpr const char* name = "device";
};
struct scope_system {
  static constexpr const char* name = "system";
};

// One FIFO connection (channel, src -> dst): a ring of slots in memory the receiver reads.
// The sender owns `tail` (messages published), the receiver owns `head` (messages consumed);
// both only grow, so a stale value is never mistaken for a fresh one.
struct fifo_view {
  char* data;            // slots * slot_bytes
  std::uint64_t* sizes;  // slots: the message's element count and its call's fingerprint (checked by the receiver)
  std::uint64_t* tail;   // written by the sender with a release store
  std::uint64_t* head;   // written by the receiver with a release store
};

// A rank's buffers for the current call, published so that direct primitives can reach them.
struct buffer_pair {
  const void* in;
  void* out;
};

// Written by the first wait of a rank that runs out of time; read by communicator::check().
struct stall_record {
  std::uint32_t stalled;  // 0: none, 2: being written, 1: written
  std::int32_t rank;      // who waited
  std::int32_t peer;      // for whom (no_peer: a barrier)
  std::int32_t channel;
  std::uint64_t step;  // the message (or barrier) number awaited
  std::uint32_t what;  // stall_what
  // stall_call: the fingerprint (31 bits) of the waiting rank's call and of the call the peer's
  // message belongs to.
  std::uint32_t call;
  std::uint32_t peer_call;
};
enum stall_what : std::uint32_t {
  stall_none = 0,
  stall_recv = 1,
  stall_send_slot = 2,
  stall_barrier = 3,
  stall_size = 4,
  stall_call = 5  // a message of another call: the ranks disagree on the call (gpu/launch.hpp, fingerprint_of)
};

struct handle_fields {
  fifo_view* fifos;        // (channel, src, dst)
  std::uint64_t* steps;    // (rank, channel, peer, {send, recv}): messages moved so far
  buffer_pair* buffers;    // (channel, rank)
  std::uint64_t* barrier;  // (channel * barrier_stride): arrivals, only grows
  std::uint32_t barrier_stride;
  std::uint32_t* abort;        // the world's: set by the first wait that times out (or abort()); long waits poll it
  std::uint32_t* entry_abort;  // this GPU's memory: read at kernel entry; the same word as `abort` where that is
                               // this GPU's, else one that this GPU's timed-out waits also set
  stall_record* stall;         // (rank), host-mapped
  int nranks;
  int nchannels;
  std::uint32_t slots;  // a power of two
  std::uint32_t slot_bytes;
  // A world of processes only (else null / 0): this rank's count of calls, per channel, that
  // staged their input in the kernel (collective_kernel.cuh, stages_channel_range) or pushed it;
  // its parity picks which of the two staging halves of every rank's window the call uses. Words
  // nchannels + c: channel c's last epoch of pushed calls this rank's push area was cleaned for.
  std::uint64_t* staged_calls;
  std::uint64_t window_bytes;
  std::uint64_t timeout_ns;

  COLLCOMM_HD fifo_view& fifo(int channel, int src, int dst) const {
    return fifos[(static_cast<std::size_t>(channel) * nranks + src) * nranks + dst];
  }
  COLLCOMM_HD std::uint64_t* rank_steps(int rank, int channel) const {
    return steps + (static_cast<std::size_t>(rank) * nchannels + channel) * nranks * 2;
  }
};

// Pushed calls (worlds of processes over IPC windows): a small one_shot all_reduce (pushes) skips
// the barriers — each rank stores its input, as ll lines flagged with the call
// (kernels/direct_primitives.cuh, "pushed calls"), into every peer's push area, and reduces what
// its peers stored into its own. A rank's push area follows its window's 4 x window_bytes: two
// parts (the staged call count's parity), each of nranks regions (by sender) of push_region_bytes:
// a 16-byte header line per channel of the world, then the lines, two bytes of line per byte of
// input.
// A pushed call's bytes of input per rank, in all: at most this many (the regions hold them).
inline constexpr std::size_t push_max_bytes = 8192;
// A pushed call's bytes of input per rank on one channel: at most this many.
inline constexpr std::size_t push_channel_bytes = 4096;
// Whether a call of `count` elements of `elem` bytes per rank among `nranks` on `nchannels`
// channels goes pushed, its channel ranges cut on `align` elements as the kernel cuts them
// (channel_range: the first channel's is the largest): at most push_max_bytes in all and, on each
// channel, at most push_channel_bytes and at most 16 KiB pushed to all peers together (2 x that in
// lines; kernels/pushed_call.cuh holds a channel's peers' lines in shared memory). Measured on one
// H100, 2, 4 and 8 processes (bench/RESULTS.md, "Pushed calls"): within these bounds on one channel
// pushed calls took 3-12 % less time than staged ones (but 8 B among 8 processes, 3 % more), past
// them more: the lines' doubled bytes and the waits of a thread's second line outweigh the
// barrier. A call spread over more channels pushes each channel's range alone, in a block of its
// own ("calls spread over channels").
COLLCOMM_HD constexpr bool pushes(std::size_t count, std::size_t elem, int nranks, int nchannels, std::size_t align) {
  const std::size_t nc = static_cast<std::size_t>(nchannels > 0 ? nchannels : 1), a = align > 0 ? align : 1;
  const std::size_t per = ((count + nc - 1) / nc + a - 1) / a * a;
  const std::size_t first = (per < count ? per : count) * elem;  // bytes of the largest range
  return count * elem <= push_max_bytes && first <= push_channel_bytes &&
         (first + 7) / 8 * 8 * static_cast<std::size_t>(nranks - 1) <= 16384;
}
COLLCOMM_HD constexpr std::size_t push_region_bytes(int nchannels) {
  return 16 * static_cast<std::size_t>(nchannels) + 2 * push_max_bytes;
}
COLLCOMM_HD constexpr std::size_t push_area_bytes(int nranks, int nchannels) {
  return 2 * static_cast<std::size_t>(nranks) * push_region_bytes(nchannels);
}

template <class Scope, bool LoadStore>
struct device_handle : handle_fields {
  using scope = Scope;
  static constexpr bool load_store = LoadStore;
};

template <class H>
concept device_handle_like = requires {
  typename H::scope;
  { H::load_store } -> std::convertible_to<bool>;
}
&&std::is_trivially_copyable_v<H>&& std::is_base_of_v<handle_fields, H>;

}  // namespace transport
COLLCOMM_NAMESPACE_END
