// collcomm/transport/nvlink_device.hpp — the device handle of transport::nvlink: what a kernel
// needs to reach its peers. Trivially copyable; kernels take it by value. The host owner that
// allocates and wires this memory is transport/nvlink.hpp.
//
// Address spaces: every pointer here is memory that all ranks of the communicator can load and
// store. Device memory (one GPU, or peers with peer access enabled), except: `stall` is always
// host-mapped pinned memory; `abort` is host memory in a world of processes (abort_on_host);
// the FIFOs (and, across GPUs, the shared words) are host memory where connections are staged
// (gpu::placement::host, transport::pcie).
#pragma once

#include <collcomm/config.hpp>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// One FIFO connection (channel, src -> dst): a ring of slots in memory the receiver reads.
// The sender owns `tail` (messages published), the receiver owns `head` (messages consumed);
// both only grow, so a stale value is never mistaken for a fresh one.
struct fifo_view {
  char* data;            // slots * slot_bytes
  std::uint64_t* sizes;  // slots: element count of the message in each slot (checked by the receiver)
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
  std::uint32_t stalled;   // 0: none, 2: being written, 1: written
  std::int32_t rank;       // who waited
  std::int32_t peer;       // for whom (no_peer: a barrier)
  std::int32_t channel;
  std::uint64_t step;      // the message (or barrier) number awaited
  std::uint32_t what;      // stall_what
};
enum stall_what : std::uint32_t { stall_none = 0, stall_recv = 1, stall_send_slot = 2, stall_barrier = 3, stall_size = 4 };

struct nvlink_device_handle {
  fifo_view* fifos;           // (channel, src, dst)
  std::uint64_t* steps;       // (rank, channel, peer, {send, recv}): messages moved so far
  buffer_pair* buffers;       // (channel, rank)
  std::uint64_t* barrier;     // (channel * barrier_stride): arrivals, only grows
  std::uint32_t barrier_stride;
  std::uint32_t* abort;       // one word: set by the first wait that times out; every wait polls it
  bool abort_on_host;         // the abort word is host memory (a world of processes): a load costs a PCIe round trip
  stall_record* stall;        // (rank), host-mapped
  int nranks;
  int nchannels;
  std::uint32_t slots;        // a power of two
  std::uint32_t slot_bytes;
  bool system_scope;          // false: every rank on one GPU, so counters need only gpu scope
  // A world of processes only (else null / 0): this rank's count of calls, per channel, that
  // staged their input in the kernel (collective_kernel.cuh, stages_channel_range); its parity
  // picks which of the two staging halves of every rank's window the call uses.
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

}  // namespace transport
COLLCOMM_NAMESPACE_END
