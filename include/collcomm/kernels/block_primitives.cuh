// collcomm/kernels/block_primitives.cuh — the GPU executor's primitives, `simple` protocol.
//
// One channel is one thread block; every thread of the block runs the schedule, and every
// primitive call is block-collective: thread 0 waits for the connections (bounded), the block
// moves the data, thread 0 publishes. Data moves through the FIFO slots of transport::nvlink
// (see transport/nvlink_device.hpp) or, for the direct family, straight between ranks' buffers.
//
// Memory ordering (the scope is written at each use):
//   sender:   all threads store the slot; __syncthreads; thread 0: fence.sc.sys, then release store
//             of tail (system scope: the receiver may be another GPU).
//   receiver: thread 0 acquire-loads tail until the message is there; __syncthreads; all threads
//             read the slot; __syncthreads; thread 0 release-stores head, freeing the slot.
// A wait that passes the handle's timeout records who waited for whom in the host-mapped stall
// record and sets `aborted`: every later call of this block returns at once, so the kernel ends
// and the host reports the stall (communicator::check) instead of hanging.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/transport/nvlink_device.hpp>
#include <collcomm/types.hpp>

#include <cuda/atomic>
#include <cuda/ptx>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

using sys_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>;

// Thread 0's bounded wait: true once *addr >= target, false after timeout_ns.
__device__ inline bool wait_at_least(std::uint64_t* addr, std::uint64_t target, std::uint64_t timeout_ns) {
  sys_atomic a(*addr);  // system scope: written by a peer rank, possibly on another GPU
  if (a.load(cuda::std::memory_order_acquire) >= target) return true;
  const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
  for (unsigned i = 1;; ++i) {
    if (a.load(cuda::std::memory_order_acquire) >= target) return true;
    if ((i & 1023u) == 0 && cuda::ptx::get_sreg_globaltimer() - start > timeout_ns) return false;
  }
}

template <class T, class Op>
class block_primitives {
 public:
  using acc_t = accum_t<T>;

  __device__ block_primitives(const transport::nvlink_device_handle& h, const T* in, T* out, const Op& op, int rank,
                              int channel, std::uint64_t* send_step, std::uint64_t* recv_step, int* aborted)
      : h_(h), in_(in), out_(out), op_(op), rank_(rank), channel_(channel), send_step_(send_step),
        recv_step_(recv_step), aborted_(aborted) {}

  COLLCOMM_HD index_t align_elems() const { return sizeof(T) >= 16 ? 1 : 16 / sizeof(T); }
  COLLCOMM_HD index_t slot_elems() const {
    const index_t e = h_.slot_bytes / sizeof(T);
    return e - e % align_elems();
  }

  __device__ void send(peers to, buf_ref src, index_t n) { step(peers{}, &src, nullptr, to, n, false); }
  __device__ void recv(peers from, buf_ref dst, index_t n) { step(from, nullptr, &dst, peers{}, n, false); }
  __device__ void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) { step(from, &src, nullptr, to, n, false); }
  __device__ void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    step(from, &src, &dst, peers{}, n, fin);
  }
  __device__ void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    step(from, &src, &dst, to, n, fin);
  }
  __device__ void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) { step(from, nullptr, &dst, to, n, false); }
  __device__ void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    step(peers{}, &src, &dst, to, n, fin);
  }
  __device__ void copy(buf_ref src, buf_ref dst, index_t n, bool fin = false) { step(peers{}, &src, &dst, peers{}, n, fin); }

  __device__ void barrier() {
    __syncthreads();
    if (threadIdx.x == 0 && !*aborted_) {
      // Publish our buffers before arriving: peers read them only after this barrier.
      std::uint64_t& gen = h_.barrier_gen[rank_ * h_.nchannels + channel_];
      ++gen;
      sys_atomic arrivals(h_.barrier[channel_]);  // system scope: every rank of the communicator
      arrivals.fetch_add(1, cuda::std::memory_order_acq_rel);
      if (!wait_at_least(&h_.barrier[channel_], gen * static_cast<std::uint64_t>(h_.nranks), h_.timeout_ns))
        stall(no_peer, gen, transport::stall_barrier);
    }
    __syncthreads();
  }

  __device__ void direct_reduce_copy(buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    __syncthreads();
    if (*aborted_) return;
    acc_t v{};
    T* d = local(dst);
    for (index_t i = threadIdx.x; i < n; i += blockDim.x) {
      for (int r = 0; r < h_.nranks; ++r) {
        const T* s = peer_ptr(r, src);
        acc_t x = load(s[i], src.which);
        v = r == 0 ? x : static_cast<acc_t>(op_(v, x));
      }
      if (fin) v = apply_post(op_, v, h_.nranks);
      d[i] = from_accum<T>(v);
    }
    __syncthreads();
  }

  __device__ void direct_copy(int from, buf_ref src, buf_ref dst, index_t n) {
    if (n == 0) return;
    __syncthreads();
    if (*aborted_) return;
    const T* s = peer_ptr(from, src);
    T* d = local(dst);
    for (index_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = from_accum<T>(load(s[i], src.which));
    __syncthreads();
  }

  // Called once before the schedule: makes this call's buffers reachable by direct peers.
  __device__ void publish_buffers() {
    if (threadIdx.x == 0) h_.buffers[channel_ * h_.nranks + rank_] = transport::buffer_pair{in_, out_};
  }

 private:
  __device__ acc_t load(T x, buffer which) const {
    acc_t a = to_accum(x);
    return which == buffer::input ? apply_pre(op_, a) : a;
  }
  __device__ T* local(buf_ref b) const {
    return (b.which == buffer::input ? const_cast<T*>(in_) : out_) + b.offset;
  }
  __device__ const T* peer_ptr(int r, buf_ref b) const {
    const transport::buffer_pair& bp = h_.buffers[channel_ * h_.nranks + r];
    return (b.which == buffer::input ? static_cast<const T*>(bp.in) : static_cast<const T*>(bp.out)) + b.offset;
  }
  __device__ T* slot(int src, int dst, std::uint64_t msg) const {
    return reinterpret_cast<T*>(h_.fifo(channel_, src, dst).data + (msg % h_.slots) * h_.slot_bytes);
  }

  __device__ void stall(int peer, std::uint64_t step, std::uint32_t what) {
    *aborted_ = 1;
    transport::stall_record& s = h_.stall[rank_];
    if (s.stalled == 0) {
      s.rank = rank_;
      s.peer = peer;
      s.channel = channel_;
      s.step = step;
      s.what = what;
      cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_system);
      s.stalled = 1;
    }
  }

  // The one body behind every FIFO primitive: value = (⊕ received) ⊕ load(src); post if fin;
  // store dst; send to each of `to`.
  __device__ void step(peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n, bool fin) {
    if (n == 0) return;
    if (threadIdx.x == 0 && !*aborted_) {
      for (int f : from) {
        transport::fifo_view& c = h_.fifo(channel_, f, rank_);
        if (!wait_at_least(c.tail, recv_step_[f] + 1, h_.timeout_ns)) { stall(f, recv_step_[f], transport::stall_recv); break; }
        if (c.sizes[recv_step_[f] % h_.slots] != n) { stall(f, recv_step_[f], transport::stall_size); break; }
      }
      if (!*aborted_)
        for (int t : to) {
          const std::uint64_t s = send_step_[t];
          if (s + 1 > h_.slots && !wait_at_least(h_.fifo(channel_, rank_, t).head, s + 1 - h_.slots, h_.timeout_ns)) {
            stall(t, s, transport::stall_send_slot);
            break;
          }
        }
    }
    __syncthreads();
    if (*aborted_) return;

    const T* rsrc[peers::max_peers];
    T* sdst[peers::max_peers];
    for (int k = 0; k < from.size; ++k) rsrc[k] = slot(from.rank[k], rank_, recv_step_[from.rank[k]]);
    for (int k = 0; k < to.size; ++k) sdst[k] = slot(rank_, to.rank[k], send_step_[to.rank[k]]);
    const T* s = src ? local(*src) : nullptr;
    const bool pre = src && src->which == buffer::input;
    T* d = dst ? local(*dst) : nullptr;
    move(rsrc, from.size, s, pre, d, sdst, to.size, n, fin);
    __syncthreads();

    if (threadIdx.x == 0) {
      // Order the block's data stores (made visible to thread 0 by __syncthreads) before the
      // counters, for readers anywhere in the system.
      cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_system);
      for (int f : from) {
        ++recv_step_[f];
        sys_atomic(*h_.fifo(channel_, f, rank_).head).store(recv_step_[f], cuda::std::memory_order_release);
      }
      for (int t : to) {
        transport::fifo_view& c = h_.fifo(channel_, rank_, t);
        c.sizes[send_step_[t] % h_.slots] = n;
        ++send_step_[t];
        sys_atomic(*c.tail).store(send_step_[t], cuda::std::memory_order_release);
      }
    }
  }

  // Elementwise: 16-byte vectors where every pointer allows, scalars for the rest.
  __device__ void move(const T* const* rsrc, int nr, const T* s, bool pre, T* d, T* const* sdst, int ns, index_t n,
                       bool fin) const {
    constexpr int vec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
    std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d);
    for (int k = 0; k < nr; ++k) bits |= reinterpret_cast<std::uintptr_t>(rsrc[k]);
    for (int k = 0; k < ns; ++k) bits |= reinterpret_cast<std::uintptr_t>(sdst[k]);
    index_t done = 0;
    if constexpr (vec > 1) {
      if ((bits & 15u) == 0) {
        const index_t nvec = n / vec;
        for (index_t v = threadIdx.x; v < nvec; v += blockDim.x) {
          pack_t tmp;
          acc_t acc[vec];
          for (int k = 0; k < nr; ++k) {
            tmp.u = reinterpret_cast<const uint4*>(rsrc[k])[v];
            for (int e = 0; e < vec; ++e) acc[e] = k == 0 ? to_accum(tmp.t[e]) : static_cast<acc_t>(op_(acc[e], to_accum(tmp.t[e])));
          }
          if (s) {
            tmp.u = reinterpret_cast<const uint4*>(s)[v];
            for (int e = 0; e < vec; ++e) {
              acc_t x = to_accum(tmp.t[e]);
              if (pre) x = apply_pre(op_, x);
              acc[e] = nr == 0 ? x : static_cast<acc_t>(op_(acc[e], x));
            }
          }
          for (int e = 0; e < vec; ++e) tmp.t[e] = from_accum<T>(fin ? apply_post(op_, acc[e], h_.nranks) : acc[e]);
          if (d) reinterpret_cast<uint4*>(d)[v] = tmp.u;
          for (int k = 0; k < ns; ++k) reinterpret_cast<uint4*>(sdst[k])[v] = tmp.u;
        }
        done = nvec * vec;
      }
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      acc_t acc{};
      for (int k = 0; k < nr; ++k) acc = k == 0 ? to_accum(rsrc[k][i]) : static_cast<acc_t>(op_(acc, to_accum(rsrc[k][i])));
      if (s) {
        acc_t x = to_accum(s[i]);
        if (pre) x = apply_pre(op_, x);
        acc = nr == 0 ? x : static_cast<acc_t>(op_(acc, x));
      }
      const T y = from_accum<T>(fin ? apply_post(op_, acc, h_.nranks) : acc);
      if (d) d[i] = y;
      for (int k = 0; k < ns; ++k) sdst[k][i] = y;
    }
  }

  union pack_t {
    uint4 u;
    T t[sizeof(T) >= 16 ? 1 : 16 / sizeof(T)];
    __device__ pack_t() {}
  };

  const transport::nvlink_device_handle& h_;
  const T* in_;
  T* out_;
  Op op_;
  int rank_;
  int channel_;
  std::uint64_t* send_step_;  // shared memory, (peer)
  std::uint64_t* recv_step_;  // shared memory, (peer)
  int* aborted_;              // shared memory
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
