// collcomm/kernels/block_primitives.cuh — the GPU executor's primitives, `simple` protocol.
//
// One channel is one thread block; every thread of the block runs the schedule, and every
// primitive call is block-collective: thread 0 waits for the connections (bounded), the block
// moves the data, thread 0 publishes. Data moves through the FIFO slots of transport::nvlink
// (see transport/nvlink_device.hpp) or, for the direct family, straight between ranks' buffers.
//
// Memory ordering. The scope is the handle's: `gpu` when every rank of the world sits on one GPU,
// `system` otherwise (a peer on another GPU reads and writes these words).
//   sender:   all threads store the slot; __syncthreads; thread 0: fence.acq_rel (cumulative over
//             the block's stores, which bar.sync ordered before it), then a relaxed store of tail.
//   receiver: thread 0 spins with relaxed loads of tail, then fence.acq_rel; __syncthreads; all
//             threads read the slot; __syncthreads; thread 0 fences and stores head, freeing it.
// A wait that passes the handle's timeout records who waited for whom in the host-mapped stall
// record (first claimant wins) and raises the world's abort word: every wait of every rank polls
// it and every later kernel reads it at entry (or, where the word is host memory, in its first
// long wait), so one missing peer costs one timeout, not one per queued call, and the host
// reports the stall (communicator::check) instead of hanging.
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

// Relaxed loads and stores, and fences, at the scope the handle names (see above).
__device__ inline std::uint64_t load_relaxed(std::uint64_t* p, bool sys) {
  return sys ? cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).load(cuda::std::memory_order_relaxed)
             : cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*p).load(cuda::std::memory_order_relaxed);
}
__device__ inline void store_relaxed(std::uint64_t* p, std::uint64_t v, bool sys) {
  if (sys) cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::std::memory_order_relaxed);
  else cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*p).store(v, cuda::std::memory_order_relaxed);
}
__device__ inline std::uint64_t fetch_add_relaxed(std::uint64_t* p, std::uint64_t v, bool sys) {
  return sys ? cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).fetch_add(v, cuda::std::memory_order_relaxed)
             : cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*p).fetch_add(v, cuda::std::memory_order_relaxed);
}
__device__ inline void fence_acq_rel(bool sys) {
  if (sys) cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_system);
  else cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_device);
}
// The world's abort word: written once, with system scope (ranks on other GPUs poll it).
__device__ inline bool world_aborted(std::uint32_t* w) {
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*w).load(cuda::std::memory_order_relaxed) != 0;
}

enum class wait_result { ok, timeout, aborted };

// One rank's part of a call: the kernel's parameters carry one per rank of the launch.
template <class T, class Op>
struct rank_params {
  coll_args args;  // channel and nchannels are filled in from the grid
  const T* in;
  T* out;
  Op op;
};

// Thread 0's bounded wait until *addr >= target; on success the caller's later reads see what was
// published before the matching store (relaxed spin, then an acquire fence), and *seen (if given)
// holds the value that ended the wait (>= target).
__device__ inline wait_result wait_at_least(std::uint64_t* addr, std::uint64_t target, const transport::nvlink_device_handle& h,
                                            std::uint64_t* seen = nullptr) {
  const bool sys = h.system_scope;
  std::uint64_t v = load_relaxed(addr, sys);
  if (v < target) {
    const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
    for (unsigned i = 1;; ++i) {
      v = load_relaxed(addr, sys);
      if (v >= target) break;
      if ((i & 255u) == 0) {
        if (world_aborted(h.abort)) return wait_result::aborted;
        if (cuda::ptx::get_sreg_globaltimer() - start > h.timeout_ns) return wait_result::timeout;
      }
    }
  }
  fence_acq_rel(sys);
  if (seen) *seen = v;
  return wait_result::ok;
}

template <class T, class Op>
class block_primitives {
 public:
  using acc_t = accum_t<T>;
  static constexpr int vec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);  // elements per 16-byte vector
  union pack_t {
    uint4 u;
    T t[vec];
    __device__ pack_t() {}
  };

  // send_step/recv_step: this block's message counts per peer; peer_ptrs: nranks pointers of
  // scratch; aborted: the block's abort flag. All in shared memory.
  // head_seen: (peer) the last head value this block saw on its connection towards the peer, zero
  // at kernel start (shared memory).
  __device__ block_primitives(const transport::nvlink_device_handle& h, const T* in, T* out, const Op& op, int rank,
                              int channel, std::uint64_t* send_step, std::uint64_t* recv_step, std::uint64_t* head_seen,
                              const void** peer_ptrs, int* aborted)
      : h_(h), in_(in), out_(out), op_(op), rank_(rank), channel_(channel), send_step_(send_step),
        recv_step_(recv_step), head_seen_(head_seen), peer_ptrs_(peer_ptrs), aborted_(aborted) {}

  COLLCOMM_HD index_t align_elems() const { return vec; }
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

  // Called by the kernel when its launch carries every rank of the world (all on this GPU): the
  // peers' buffers are then in the launch's parameters (`ranks`, indexed by rank: a GPU's ranks
  // launch in ascending order, transport/nvlink.hpp), not in the handle's published table, and the
  // barriers around a direct schedule are not needed: the launch starts after every rank's inputs
  // are ready (it waits for every rank's stream), and no rank's stream goes on before the whole
  // launch ends, so no peer can reuse a buffer another block still reads.
  __device__ void use_launch_buffers(const rank_params<T, Op>* ranks) { launch_ = ranks; }
  __device__ void entry_barrier() {
    if (launch_) __syncthreads();
    else barrier();
  }
  __device__ void exit_barrier() {
    if (launch_ || peer_in_offset_) __syncthreads();
    else barrier();
  }
  // Across processes (collective_kernel.cuh, stages_channel_range): copies this channel's range
  // of the input, unchanged, into the staging half `offset` bytes into this rank's window, at the
  // same place; peers read it there after the entry barrier (which publishes these stores), and
  // read every peer's input `offset` bytes into its window. The exit barrier is then not needed:
  // a rank overwrites a half only two staged calls later, after its entry barrier of the call
  // between, which every peer reaches only when done reading that half.
  __device__ void stage_input(char* window, std::size_t offset, range r) {
    peer_in_offset_ = offset;
    move(nullptr, 0, in_ + r.begin, false, reinterpret_cast<T*>(window + offset) + r.begin, nullptr, 0, r.size, false);
  }

  // Every rank's block of this channel arrives, then waits for all. The arrival counter only
  // grows; the value our fetch_add returns says which barrier we joined (no rank can be a whole
  // barrier ahead of another), so no per-rank generation is kept.
  __device__ void barrier() {
    __syncthreads();
    if (threadIdx.x == 0 && !*aborted_) {
      const std::uint64_t n = static_cast<std::uint64_t>(h_.nranks);
      fence_acq_rel(h_.system_scope);  // publish our buffers and stores before arriving
      const std::uint64_t old = fetch_add_relaxed(&h_.barrier[channel_ * h_.barrier_stride], 1, h_.system_scope);
      const std::uint64_t index = old / n + 1;
      const wait_result r = wait_at_least(&h_.barrier[channel_ * h_.barrier_stride], index * n, h_);
      if (r != wait_result::ok) stall(no_peer, index, transport::stall_barrier, r);
    }
    __syncthreads();
  }

  __device__ void direct_reduce_copy(buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    load_peer_ptrs(src);
    if (*aborted_) return;
    const int nr = h_.nranks;
    const T* const* ptrs = reinterpret_cast<const T* const*>(peer_ptrs_);
    T* d = local(dst);
    const bool pre = src.which == buffer::input;
    std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(d);
    for (int r = 0; r < nr; ++r) bits |= reinterpret_cast<std::uintptr_t>(ptrs[r]);
    index_t done = 0;
    if ((bits & 15u) == 0) {
      const index_t nvec = n / vec;
      for (index_t v = threadIdx.x; v < nvec; v += blockDim.x) {
        pack_t tmp;
        acc_t acc[vec];
        for (int r = 0; r < nr; ++r) {
          tmp.u = reinterpret_cast<const uint4*>(ptrs[r])[v];
          for (int e = 0; e < vec; ++e) {
            const acc_t x = load_acc(tmp.t[e], pre);
            acc[e] = r == 0 ? x : static_cast<acc_t>(op_(acc[e], x));
          }
        }
        for (int e = 0; e < vec; ++e) tmp.t[e] = from_accum<T>(fin ? apply_post(op_, acc[e], nr) : acc[e]);
        reinterpret_cast<uint4*>(d)[v] = tmp.u;
      }
      done = nvec * vec;
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      acc_t v{};
      for (int r = 0; r < nr; ++r) {
        const acc_t x = load_acc(ptrs[r][i], pre);
        v = r == 0 ? x : static_cast<acc_t>(op_(v, x));
      }
      d[i] = from_accum<T>(fin ? apply_post(op_, v, nr) : v);
    }
    __syncthreads();
  }

  __device__ void direct_copy(int from, buf_ref src, buf_ref dst, index_t n) {
    if (n == 0) return;
    __syncthreads();
    if (*aborted_) return;
    const T* s = peer_ptr(from, src);
    T* d = local(dst);
    const bool pre = src.which == buffer::input;
    index_t done = 0;
    if (((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 15u) == 0) {
      const index_t nvec = n / vec;
      for (index_t v = threadIdx.x; v < nvec; v += blockDim.x) {
        pack_t tmp;
        tmp.u = reinterpret_cast<const uint4*>(s)[v];
        if constexpr (op_has_pre<Op>)
          if (pre)
            for (int e = 0; e < vec; ++e) tmp.t[e] = from_accum<T>(load_acc(tmp.t[e], true));
        reinterpret_cast<uint4*>(d)[v] = tmp.u;
      }
      done = nvec * vec;
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) d[i] = from_accum<T>(load_acc(s[i], pre));
    __syncthreads();
  }

  // Called once before the schedule: makes this call's buffers reachable by direct peers. The
  // schedules' first barrier publishes it; their last barrier keeps it valid while peers read.
  __device__ void publish_buffers() {
    if (threadIdx.x == 0 && !launch_) h_.buffers[channel_ * h_.nranks + rank_] = transport::buffer_pair{in_, out_};
  }

 protected:  // ll_primitives (ll_primitives.cuh) reuses these helpers and the direct family
  __device__ acc_t load_acc(T x, bool pre) const {
    acc_t a = to_accum(x);
    return pre ? apply_pre(op_, a) : a;
  }
  __device__ T* local(buf_ref b) const {
    return (b.which == buffer::input ? const_cast<T*>(in_) : out_) + b.offset;
  }
  __device__ const T* peer_ptr(int r, buf_ref b) const {
    if (launch_) return (b.which == buffer::input ? launch_[r].in : static_cast<const T*>(launch_[r].out)) + b.offset;
    const transport::buffer_pair& bp = h_.buffers[channel_ * h_.nranks + r];
    if (b.which == buffer::input && peer_in_offset_ && r != rank_)
      return reinterpret_cast<const T*>(static_cast<const char*>(bp.in) + peer_in_offset_) + b.offset;
    return (b.which == buffer::input ? static_cast<const T*>(bp.in) : static_cast<const T*>(bp.out)) + b.offset;
  }
  // Every rank's buffer `b` for this channel, into shared memory: read once per call, not per element.
  __device__ void load_peer_ptrs(buf_ref b) {
    __syncthreads();
    for (int r = threadIdx.x; r < h_.nranks; r += blockDim.x) peer_ptrs_[r] = peer_ptr(r, b);
    __syncthreads();
  }
  // Thread 0: waits (bounded) until the slot of this block's next message towards t is free (head
  // >= messages sent + 1 - slots: the receiver consumed the slot's previous message). head only
  // grows, so the last value seen answers most checks without a load: while the receiver keeps
  // up, one load of head serves up to `slots` messages. The acquire made when that value was seen
  // still orders the receiver's reads of the slot before our stores to it.
  __device__ wait_result wait_send_slot(int t) {
    const std::uint64_t s = send_step_[t];
    if (s + 1 <= h_.slots) return wait_result::ok;
    const std::uint64_t need = s + 1 - h_.slots;
    if (head_seen_[t] >= need) return wait_result::ok;
    return wait_at_least(h_.fifo(channel_, rank_, t).head, need, h_, &head_seen_[t]);
  }
  __device__ T* slot(int src, int dst, std::uint64_t msg) const {
    return reinterpret_cast<T*>(h_.fifo(channel_, src, dst).data + (msg & (h_.slots - 1)) * h_.slot_bytes);
  }

  // A wait that did not succeed: this block stops. A genuine timeout (not a wait cut short by the
  // world's abort word) raises the abort word and claims the rank's stall record; the first
  // claimant writes it, so the record is never a mix of two channels' stalls.
  __device__ void stall(int peer, std::uint64_t step, std::uint32_t what, wait_result why) {
    *aborted_ = 1;
    if (why == wait_result::aborted) return;
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*h_.abort).store(1, cuda::std::memory_order_relaxed);
    transport::stall_record& s = h_.stall[rank_];
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> claim(s.stalled);
    std::uint32_t expected = 0;
    if (!claim.compare_exchange_strong(expected, 2, cuda::std::memory_order_relaxed)) return;  // 2: being written
    s.rank = rank_;
    s.peer = peer;
    s.channel = channel_;
    s.step = step;
    s.what = what;
    claim.store(1, cuda::std::memory_order_release);
  }

  // The one body behind every FIFO primitive: value = (⊕ received) ⊕ load(src); post if fin;
  // store dst; send to each of `to`.
  __device__ void step(peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n, bool fin) {
    if (n == 0) return;
    if (threadIdx.x == 0 && !*aborted_) {
      for (int f : from) {
        transport::fifo_view& c = h_.fifo(channel_, f, rank_);
        const wait_result r = wait_at_least(c.tail, recv_step_[f] + 1, h_);
        if (r != wait_result::ok) { stall(f, recv_step_[f], transport::stall_recv, r); break; }
        if (c.sizes[recv_step_[f] & (h_.slots - 1)] != n) { stall(f, recv_step_[f], transport::stall_size, wait_result::timeout); break; }
      }
      if (!*aborted_)
        for (int t : to) {
          const wait_result r = wait_send_slot(t);
          if (r != wait_result::ok) { stall(t, send_step_[t], transport::stall_send_slot, r); break; }
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
      for (int t : to) h_.fifo(channel_, rank_, t).sizes[send_step_[t] & (h_.slots - 1)] = n;
      // Orders the block's slot reads and data stores (before it through __syncthreads) and the
      // sizes before the counters, for readers at the handle's scope.
      fence_acq_rel(h_.system_scope);
      for (int f : from) store_relaxed(h_.fifo(channel_, f, rank_).head, ++recv_step_[f], h_.system_scope);
      for (int t : to) store_relaxed(h_.fifo(channel_, rank_, t).tail, ++send_step_[t], h_.system_scope);
    }
  }

  // One 16-byte vector: the received values, then the source, reduced in the accumulation type.
  __device__ void reduce_vec(const pack_t* rv, int nr, const pack_t* sv, bool pre, bool fin, pack_t& outv) const {
    acc_t acc[vec];
#pragma unroll
    for (int k = 0; k < peers::max_peers; ++k)
      if (k < nr)
        for (int e = 0; e < vec; ++e) acc[e] = k == 0 ? to_accum(rv[k].t[e]) : static_cast<acc_t>(op_(acc[e], to_accum(rv[k].t[e])));
    if (sv)
      for (int e = 0; e < vec; ++e) {
        const acc_t x = load_acc(sv->t[e], pre);
        acc[e] = nr == 0 ? x : static_cast<acc_t>(op_(acc[e], x));
      }
    for (int e = 0; e < vec; ++e) outv.t[e] = from_accum<T>(fin ? apply_post(op_, acc[e], h_.nranks) : acc[e]);
  }

  // Elementwise: 16-byte vectors where every pointer allows (each thread keeps `unroll` vectors
  // in flight, so that a block's loads cover the memory latency), scalars for the rest.
  __device__ void move(const T* const* rsrc, int nr, const T* s, bool pre, T* d, T* const* sdst, int ns, index_t n,
                       bool fin) const {
    constexpr int unroll = 4;
    std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d);
    for (int k = 0; k < nr; ++k) bits |= reinterpret_cast<std::uintptr_t>(rsrc[k]);
    for (int k = 0; k < ns; ++k) bits |= reinterpret_cast<std::uintptr_t>(sdst[k]);
    index_t done = 0;
    if ((bits & 15u) == 0) {
      const index_t nvec = n / vec;
      const index_t stride = blockDim.x;
      index_t v = threadIdx.x;
      for (; v + (unroll - 1) * stride < nvec; v += unroll * stride) {
        pack_t rv[unroll][peers::max_peers], sv[unroll], outv[unroll];
#pragma unroll
        for (int k = 0; k < peers::max_peers; ++k)
          if (k < nr)
#pragma unroll
            for (int u = 0; u < unroll; ++u) rv[u][k].u = reinterpret_cast<const uint4*>(rsrc[k])[v + u * stride];
        if (s)
#pragma unroll
          for (int u = 0; u < unroll; ++u) sv[u].u = reinterpret_cast<const uint4*>(s)[v + u * stride];
#pragma unroll
        for (int u = 0; u < unroll; ++u) reduce_vec(rv[u], nr, s ? &sv[u] : nullptr, pre, fin, outv[u]);
#pragma unroll
        for (int u = 0; u < unroll; ++u) {
          if (d) reinterpret_cast<uint4*>(d)[v + u * stride] = outv[u].u;
#pragma unroll
          for (int k = 0; k < peers::max_peers; ++k)
            if (k < ns) reinterpret_cast<uint4*>(sdst[k])[v + u * stride] = outv[u].u;
        }
      }
      for (; v < nvec; v += stride) {
        pack_t rv[peers::max_peers], sv, outv;
#pragma unroll
        for (int k = 0; k < peers::max_peers; ++k)
          if (k < nr) rv[k].u = reinterpret_cast<const uint4*>(rsrc[k])[v];
        if (s) sv.u = reinterpret_cast<const uint4*>(s)[v];
        reduce_vec(rv, nr, s ? &sv : nullptr, pre, fin, outv);
        if (d) reinterpret_cast<uint4*>(d)[v] = outv.u;
        for (int k = 0; k < ns; ++k) reinterpret_cast<uint4*>(sdst[k])[v] = outv.u;
      }
      done = nvec * vec;
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      acc_t acc{};
      for (int k = 0; k < nr; ++k) acc = k == 0 ? to_accum(rsrc[k][i]) : static_cast<acc_t>(op_(acc, to_accum(rsrc[k][i])));
      if (s) {
        const acc_t x = load_acc(s[i], pre);
        acc = nr == 0 ? x : static_cast<acc_t>(op_(acc, x));
      }
      const T y = from_accum<T>(fin ? apply_post(op_, acc, h_.nranks) : acc);
      if (d) d[i] = y;
      for (int k = 0; k < ns; ++k) sdst[k][i] = y;
    }
  }

  const transport::nvlink_device_handle& h_;
  const T* in_;
  T* out_;
  Op op_;
  int rank_;
  int channel_;
  std::uint64_t* send_step_;  // shared memory, (peer)
  std::uint64_t* recv_step_;  // shared memory, (peer)
  std::uint64_t* head_seen_;  // shared memory, (peer)
  const void** peer_ptrs_;    // shared memory, (rank)
  int* aborted_;              // shared memory
  const rank_params<T, Op>* launch_ = nullptr;  // every rank's buffers, when one launch carries them all
  std::size_t peer_in_offset_ = 0;               // use_staged_half
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
