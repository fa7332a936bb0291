// collcomm/kernels/simple_fifo.cuh — the FIFO primitives of protocol `simple`: bulk data in the
// connection's slots, then a fence and the tail counter.
//
// Every primitive call is block-collective: thread 0 waits for the connections (bounded), the
// block moves the data (reduce_copy), thread 0 publishes.
//   sender:   all threads store the slot; __syncthreads; thread 0: fence.acq_rel (cumulative over
//             the block's stores, which bar.sync ordered before it), then a relaxed store of tail.
//   receiver: thread 0 spins with relaxed loads of tail, then fence.acq_rel; __syncthreads; all
//             threads read the slot; __syncthreads; thread 0 fences and stores head, freeing it.
// The receiver checks the count and the call fingerprint each message carries in the slot's `sizes`
// word (size_word): counts that differ across ranks are a stall_size error, a message of another
// call (ranks that disagree on the call: gpu/launch.hpp, fingerprint_of) a stall_call error, not a wrong result.
#pragma once

#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/reduce_copy.cuh>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

template <class State>
struct simple_fifo {
  using T = typename State::value_type;
  using rc = reduce_copy<T, typename State::op_type>;

  COLLCOMM_HD static index_t align_elems() { return rc::vec; }
  COLLCOMM_HD static index_t slot_elems(const State& c) {
    const index_t e = c.h.slot_bytes / sizeof(T);
    return e - e % align_elems();
  }

  // The one body behind every FIFO primitive: value = (op over received) op load(src); post if
  // fin; store dst; send to each of `to`. Inlined into the schedule, specialized to the call's
  // peer counts; only thread 0's connection work around the data may be out of line (below).
  __device__ static void step(State& c, peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n,
                              bool fin) {
    if (n == 0) return;
    if (threadIdx.x == 0 && !*c.aborted) wait(c, from, to, n);
    __syncthreads();
    if (*c.aborted) return;

    const T* rsrc[peers::max_peers];
    T* sdst[peers::max_peers];
    for (int k = 0; k < from.size; ++k) rsrc[k] = slot(c, from.rank[k], c.rank, c.recv_step[from.rank[k]]);
    for (int k = 0; k < to.size; ++k) sdst[k] = slot(c, c.rank, to.rank[k], c.send_step[to.rank[k]]);
    const T* s = src ? c.local(*src) : nullptr;
    const bool pre = src && src->which == buffer::input;
    T* d = dst ? c.local(*dst) : nullptr;
    rc::run(c.op, c.h.nranks, rsrc, from.size, s, pre, d, sdst, to.size, n, fin);
    __syncthreads();

    if (threadIdx.x == 0) post(c, from, to, n);
  }

  // Thread 0's connection work (the waits before the data, the counters after it) is out of line
  // for elements narrower than 4 bytes, a call on one thread twice a step; the data path
  // (reduce_copy::run) stays inlined. Why: nvcc 13.0's device optimizer (cicc) segfaults on the tree
  // all_reduce kernel of 1- and 2-byte elements, either protocol, when every part of every step is
  // inlined into it (after its late GVN on that kernel, a pass reads a dangling value). The trigger
  // is the kernel's size: five step shapes, three copies of the schedule, 8 or 16 elements per
  // 16-byte vector (4-byte elements, 4 per vector, stay under it; so does every other schedule).
  // Taking the whole step out of line also avoids it, at the price of a call per step on every
  // thread and of steps no longer specialized to their peer counts (ring all_reduce of bf16 lost a
  // tenth of its bandwidth).
  static constexpr bool connection_work_out_of_line = sizeof(T) < 4;

 private:
  __device__ static void wait(const State& c, peers from, peers to, index_t n) {
    if constexpr (connection_work_out_of_line)
      wait_out_of_line(c, from, to, n);
    else
      wait_for_connections(c, from, to, n);
  }
  __device__ static void post(const State& c, peers from, peers to, index_t n) {
    if constexpr (connection_work_out_of_line)
      post_out_of_line(c, from, to, n);
    else
      publish(c, from, to, n);
  }
  __device__ __noinline__ static void wait_out_of_line(const State& c, peers from, peers to, index_t n) {
    wait_for_connections(c, from, to, n);
  }
  __device__ __noinline__ static void post_out_of_line(const State& c, peers from, peers to, index_t n) {
    publish(c, from, to, n);
  }

  __device__ static T* slot(const State& c, int src, int dst, std::uint64_t msg) {
    return reinterpret_cast<T*>(c.slot_bytes(src, dst, msg));
  }

  // Thread 0: every awaited message has arrived with the expected count, and every send slot is
  // free; else the block stalls.
  __device__ static void wait_for_connections(const State& c, peers from, peers to, index_t n) {
    for (int f : from) {
      transport::fifo_view& conn = c.h.fifo(c.channel, f, c.rank);
      const wait_result r = wait_at_least(conn.tail, c.recv_step[f] + 1, c.h);
      if (r != wait_result::ok) return c.stall(f, c.recv_step[f], transport::stall_recv, r);
      const std::uint64_t got = conn.sizes[c.recv_step[f] & (c.h.slots - 1)];
      if (got != size_word(c.call, n)) return c.stall_message(f, c.recv_step[f], static_cast<std::uint32_t>(got >> 32));
    }
    for (int t : to) {
      const wait_result r = c.wait_send_slot(t);
      if (r != wait_result::ok) return c.stall(t, c.send_step[t], transport::stall_send_slot, r);
    }
  }

  // Thread 0: the sizes, then (after a fence that orders the block's slot reads and data stores,
  // which __syncthreads ordered before it) the counters that free the received slots and publish
  // the sent ones, at the handle's scope.
  __device__ static void publish(const State& c, peers from, peers to, index_t n) {
    using ops = typename State::ops;
    for (int t : to) c.h.fifo(c.channel, c.rank, t).sizes[c.send_step[t] & (c.h.slots - 1)] = size_word(c.call, n);
    ops::fence();
    for (int f : from) ops::store(c.h.fifo(c.channel, f, c.rank).head, ++c.recv_step[f]);
    for (int t : to) ops::store(c.h.fifo(c.channel, c.rank, t).tail, ++c.send_step[t]);
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
