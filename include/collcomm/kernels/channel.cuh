// collcomm/kernels/channel.cuh — one channel's state on one rank: the thread block's view of the
// call (its buffers, op, rank, channel), of the transport (the device handle) and of its FIFO
// counts, with the helpers every primitive family shares: local and peer buffer addresses, the
// op's pre-step on loads, FIFO slot addresses, the bounded wait for a free send slot and the
// stall that ends the block's part of the call.
//
// Shapes: send_step, recv_step, head_seen are (peer) arrays in shared memory; peer_ptrs is
// (rank) scratch in shared memory; aborted is the block's flag in shared memory.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/kernels/scoped_wait.cuh>
#include <collcomm/ops.hpp>
#include <collcomm/transport/device_handle.hpp>
#include <collcomm/types.hpp>

#include <cstddef>
#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// One rank's part of a call: the kernel's parameters carry one per rank of the launch.
template <class T, class Op>
struct rank_params {
  coll_args args;  // channel and nchannels are filled in from the grid
  const T* in;
  T* out;
  Op op;
  std::uint32_t call = 0;  // the call's fingerprint (gpu/launch.hpp, fingerprint_of), carried by its FIFO messages
};

// Folds eight ranks' inputs into acc, in rank order: element e of v[u] (a line or vector with
// elements t[]) is rank q0 + u's, ranks from n on left out; each takes the op's pre-step, rank 0's
// starts the fold. The small calls' reductions (pushed_call.cuh, grouped_call.cuh).
template <int E, class Vec, class Op, class A>
__device__ __forceinline__ void fold_eight_ranks(A (&acc)[E], const Vec (&v)[8], int q0, int n, const Op& op) {
#pragma unroll
  for (int u = 0; u < 8; ++u)
    if (q0 + u < n)
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const A x = apply_pre(op, to_accum(v[u].t[e]));
        acc[e] = q0 + u == 0 ? x : static_cast<A>(op(acc[e], x));
      }
}

// A simple message's `sizes` word: its element count (< 2^32) and its call's 31-bit fingerprint,
// with bit 63 set, so that it never equals ll's slot mark (ll_fifo.cuh, ll_mark: bit 63 clear).
COLLCOMM_HD constexpr std::uint64_t size_word(std::uint32_t call, index_t n) {
  return (std::uint64_t{1} << 63) | (static_cast<std::uint64_t>(call & 0x7fffffffu) << 32) |
         static_cast<std::uint32_t>(n);
}

template <class Handle, class T, class Op>
struct channel_state {
  using handle_type = Handle;
  using value_type = T;
  using op_type = Op;
  using acc_t = accum_t<T>;
  using ops = scoped<typename Handle::scope>;

  const Handle& h;
  const T* in;
  T* out;
  Op op;
  int rank;
  int channel;
  std::uint64_t* send_step;                    // shared memory, (peer): messages sent so far
  std::uint64_t* recv_step;                    // shared memory, (peer): messages received so far
  std::uint64_t* head_seen;                    // shared memory, (peer): the last head value seen, zero at kernel start
  const void** peer_ptrs;                      // shared memory, (rank)
  int* aborted;                                // shared memory
  const rank_params<T, Op>* launch = nullptr;  // every rank's buffers, when one launch carries them all
  std::size_t peer_in_offset = 0;              // set by stage_input: peers' inputs sit this far into their windows
  std::uint32_t call = 0;                      // this rank's call's fingerprint (rank_params::call)

  __device__ acc_t load_acc(T x, bool pre) const {
    acc_t a = to_accum(x);
    return pre ? apply_pre(op, a) : a;
  }
  __device__ T* local(buf_ref b) const { return (b.which == buffer::input ? const_cast<T*>(in) : out) + b.offset; }
  __device__ const T* peer_ptr(int r, buf_ref b) const {
    if (launch) return (b.which == buffer::input ? launch[r].in : static_cast<const T*>(launch[r].out)) + b.offset;
    const transport::buffer_pair& bp = h.buffers[channel * h.nranks + r];
    if (b.which == buffer::input && peer_in_offset && r != rank)
      return reinterpret_cast<const T*>(static_cast<const char*>(bp.in) + peer_in_offset) + b.offset;
    return (b.which == buffer::input ? static_cast<const T*>(bp.in) : static_cast<const T*>(bp.out)) + b.offset;
  }
  // The slot of message `msg` on connection (src -> dst), as bytes.
  __device__ char* slot_bytes(int src, int dst, std::uint64_t msg) const {
    return h.fifo(channel, src, dst).data + (msg & (h.slots - 1)) * h.slot_bytes;
  }

  // Thread 0: waits (bounded) until the slot of this block's next message towards t is free (head
  // >= messages sent + 1 - slots: the receiver consumed the slot's previous message). head only
  // grows, so the last value seen answers most checks without a load: while the receiver keeps
  // up, one load of head serves up to `slots` messages. The acquire made when that value was seen
  // still orders the receiver's reads of the slot before our stores to it.
  __device__ wait_result wait_send_slot(int t) const {
    const std::uint64_t s = send_step[t];
    if (s + 1 <= h.slots) return wait_result::ok;
    const std::uint64_t need = s + 1 - h.slots;
    if (head_seen[t] >= need) return wait_result::ok;
    return wait_at_least(h.fifo(channel, rank, t).head, need, h, &head_seen[t]);
  }

  // A wait that did not succeed: this block stops (scoped_wait.cuh's record_stall says the rest).
  __device__ void stall(int peer, std::uint64_t step, std::uint32_t what, wait_result why) const {
    *aborted = 1;
    record_stall(h, rank, channel, peer, step, what, why);
  }
  // Message `step` from `peer` is not what this rank's call expects: it belongs to another call
  // (its fingerprint peer_call differs: stall_call), or it has another count (stall_size).
  __device__ void stall_message(int peer, std::uint64_t step, std::uint32_t peer_call) const {
    *aborted = 1;
    const std::uint32_t mine = call & 0x7fffffffu, theirs = peer_call & 0x7fffffffu;
    record_stall(h, rank, channel, peer, step, mine != theirs ? transport::stall_call : transport::stall_size,
                 wait_result::timeout, mine, theirs);
  }
  __device__ bool block_aborted() const { return *static_cast<volatile int*>(aborted) != 0; }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
