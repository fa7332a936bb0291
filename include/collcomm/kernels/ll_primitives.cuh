// collcomm/kernels/ll_primitives.cuh — the GPU executor's primitives, `ll` protocol (low latency).
//
// Same contract and block structure as block_primitives (block_primitives.cuh): one channel is one
// thread block, every primitive call is block-collective. The direct family (barrier,
// direct_reduce_copy, direct_copy), copy and publish_buffers are block_primitives' own, inherited;
// the FIFO family moves its messages as LL lines through the same FIFO slots of transport::nvlink.
//
// A slot is a run of 16-byte lines. Line 0 is the message's header, lines 1.. its data:
//     header: (count, f, 0, ~f)            data line i: (bytes 8i..8i+3, f, bytes 8i+4..8i+7, ~f)
// i.e. two 8-byte halves, each (4 bytes of payload | 4-byte flag << 32), written with ONE 16-byte
// store and read with one 16-byte load. Each half is a single 8-byte morally-strong access (relaxed,
// at the handle's scope), so a reader that sees a half's flag sees that half's payload: no fence and
// no counter between data and flag. (The PTX model treats a vector access as one access per element;
// hence a flag in each 8-byte half, not one per line.) The flag of message m on a connection is
// f = (m + 1) mod 2^32 — m is the connection's message count, which only grows — so a line written
// for an earlier message never carries the flag of the awaited one (see "Epochs" for the wrap). The
// second half carries ~f: a zeroed line matches no message, and stale data of another protocol
// (below) would need two words that are exact complements, one of them the awaited message number.
// Payload is half of the slot's bytes, less the header: slot_elems() = (slot_bytes / 16 - 1) * 8 / sizeof(T).
//
// Per message:
//   sender:   thread 0 waits (bounded) until the slot is free: head >= m + 1 - slots, as in simple
//             (relaxed spin + acquire fence: the receiver's reads of the slot's previous message
//             happened before); __syncthreads; every thread stores its lines with flag f = m + 1; thread 0
//             stores the header. No fence, no tail to publish (tail is still advanced, relaxed, so that
//             the connection's counters stay those of simple: a world may mix protocols call by call).
//   receiver: every thread polls its own lines (each poll bounded by the handle's timeout, honouring
//             the world's abort word and the block's abort flag) until each line carries (f, ~f),
//             and uses them; thread 0 also polls the header and checks its count (counts that
//             differ across ranks are reported as in simple: stall_size); __syncthreads; thread 0:
//             fence.acq_rel (orders the block's reads of the slot before the release of it) and a
//             relaxed store of head = m + 1, freeing the slot.
// A poll that runs out of time records the stall (first claimant wins) and raises the abort word,
// exactly as block_primitives' wait_at_least does; the block's other threads see the block's abort
// flag within 256 polls and stop.
//
// Epochs. A line keeps its last flag until it is rewritten, and a short message rewrites only its own
// lines; a line left from 2^32 messages ago would carry the awaited flag again, and a slot last used
// by a simple message holds raw data that could look like flags. So each slot remembers, in its
// `sizes` word (simple stores the message's count there, always < 2^32), the LL epoch it was last
// cleaned in: ll_mark(m) = "LL" tag | (m >> 30). A send whose slot lacks the mark of its own epoch
// writes every line of the slot (payload-less lines get the flag too) and then sets the mark: so every
// line of a slot carries a flag from the current 2^30-message epoch, never the awaited one — the first
// LL message into each slot, and one message per slot every 2^30 messages on a connection, pay for a
// whole-slot write. Only the sender reads and writes the mark (and simple's count check, on the
// receiver, is not used by ll).
// Limit: the whole-slot write of a slot last used by simple races with the receiver's first polls of
// it, which could take a stale 16-byte line of simple payload whose words 1 and 3 happen to be exactly
// (f, ~f) for a message. A world that alternates protocols on its connections relies on that not
// happening; the wrap of the flags does not (stale flags there are ll flags of the previous epoch,
// never f). Giving ll slots memory of their own (as NCCL does) removes it, for connection memory.
#pragma once

#include <collcomm/kernels/block_primitives.cuh>

#include <cuda/ptx>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// One 16-byte LL line, as its two 8-byte halves, at the handle's scope. `relaxed` makes every
// access morally strong: a poll is never served from a stale L1 line and never torn within a half.
__device__ inline void ll_load(const std::uint64_t* p, bool sys, std::uint64_t& a, std::uint64_t& b) {
  const std::size_t g = __cvta_generic_to_global(p);
  if (sys) asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(g) : "memory");
  else asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(g) : "memory");
}
__device__ inline void ll_store(std::uint64_t* p, bool sys, std::uint64_t a, std::uint64_t b) {
  const std::size_t g = __cvta_generic_to_global(p);
  if (sys) asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(g), "l"(a), "l"(b) : "memory");
  else asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(g), "l"(a), "l"(b) : "memory");
}
// A line of message flag f: (data, f) and (data, ~f).
__device__ inline bool ll_arrived(std::uint64_t a, std::uint64_t b, std::uint32_t flag) {
  return static_cast<std::uint32_t>(a >> 32) == flag && static_cast<std::uint32_t>(b >> 32) == ~flag;
}
__device__ inline std::uint64_t ll_lo(std::uint32_t data, std::uint32_t flag) {
  return static_cast<std::uint64_t>(data) | (static_cast<std::uint64_t>(flag) << 32);
}
__device__ inline std::uint64_t ll_hi(std::uint32_t data, std::uint32_t flag) {
  return static_cast<std::uint64_t>(data) | (static_cast<std::uint64_t>(~flag) << 32);
}
// The mark of a slot whose lines all carry flags of messages of m's epoch (see "Epochs" above).
// Never a count that simple stores (< 2^32).
__device__ inline std::uint64_t ll_mark(std::uint64_t m) {
  return (std::uint64_t{0x4C4C} << 48) | (m >> 30);
}

template <class T, class Op>
class ll_primitives : public block_primitives<T, Op> {
  using base = block_primitives<T, Op>;

 public:
  using acc_t = typename base::acc_t;
  // Elements of T are at most 8 bytes (every element type); a line's payload holds whole elements.
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0, "collcomm protocol axis: ll carries elements of 1, 2, 4 or 8 bytes");
  static constexpr int epl = static_cast<int>(8 / sizeof(T));  // elements per line
  static constexpr int unroll = 4;                              // lines in flight per thread
  union line_t {
    std::uint64_t u;
    std::uint32_t w[2];
    T t[epl];
    __device__ line_t() {}
  };

  __device__ ll_primitives(const transport::nvlink_device_handle& h, const T* in, T* out, const Op& op, int rank,
                           int channel, std::uint64_t* send_step, std::uint64_t* recv_step, std::uint64_t* head_seen,
                           const void** peer_ptrs, int* aborted)
      : base(h, in, out, op, rank, channel, send_step, recv_step, head_seen, peer_ptrs, aborted) {}

  // A line's payload (8 bytes) is the unit: schedules cut chunks on line boundaries.
  COLLCOMM_HD index_t align_elems() const { return epl; }
  // Data lines per slot (all but the header) times elements per line: a multiple of align_elems().
  // gpu::launch refuses slots too small to hold one data line (kernels::min_slot_bytes).
  COLLCOMM_HD index_t slot_elems() const {
    const index_t lines = this->h_.slot_bytes / 16;
    return lines > 1 ? (lines - 1) * epl : 0;
  }

  __device__ void send(peers to, buf_ref src, index_t n) { ll_step(peers{}, &src, nullptr, to, n, false); }
  __device__ void recv(peers from, buf_ref dst, index_t n) { ll_step(from, nullptr, &dst, peers{}, n, false); }
  __device__ void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) { ll_step(from, &src, nullptr, to, n, false); }
  __device__ void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    ll_step(from, &src, &dst, peers{}, n, fin);
  }
  __device__ void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    ll_step(from, &src, &dst, to, n, fin);
  }
  __device__ void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) { ll_step(from, nullptr, &dst, to, n, false); }
  __device__ void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    ll_step(peers{}, &src, &dst, to, n, fin);
  }
  // copy (no connection), barrier, direct_reduce_copy, direct_copy, publish_buffers: block_primitives'.

 private:
  __device__ std::uint64_t* slot_lines(int src, int dst, std::uint64_t msg) const {
    const auto& h = this->h_;
    return reinterpret_cast<std::uint64_t*>(h.fifo(this->channel_, src, dst).data + (msg & (h.slots - 1)) * h.slot_bytes);
  }
  __device__ bool block_aborted() const { return *static_cast<volatile int*>(this->aborted_) != 0; }

  // Polls one line until both its flags are `flag`; (a, b) hold a first load already. Bounded by the
  // handle's timeout; gives up when the world's abort word or the block's abort flag is raised.
  __device__ wait_result poll(const std::uint64_t* line, std::uint32_t flag, std::uint64_t& a, std::uint64_t& b) const {
    if (ll_arrived(a, b, flag)) return wait_result::ok;
    const auto& h = this->h_;
    const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
    for (unsigned i = 1;; ++i) {
      ll_load(line, h.system_scope, a, b);
      if (ll_arrived(a, b, flag)) return wait_result::ok;
      if ((i & 255u) == 0) {
        if (block_aborted() || world_aborted(h.abort)) return wait_result::aborted;
        if (cuda::ptx::get_sreg_globaltimer() - start > h.timeout_ns) return wait_result::timeout;
      }
    }
  }

  // Source elements of line i (of a message of n elements) into `v`; zeros past n.
  __device__ void load_src(const T* s, bool vec8, index_t i, index_t n, line_t& v) const {
    const index_t e0 = i * epl;
    if (vec8 && e0 + epl <= n) {
      v.u = reinterpret_cast<const std::uint64_t*>(s)[i];
      return;
    }
    v.u = 0;
    for (int e = 0; e < epl; ++e)
      if (e0 + e < n) v.t[e] = s[e0 + e];
  }
  __device__ void store_dst(T* d, bool vec8, index_t i, index_t n, const line_t& v) const {
    const index_t e0 = i * epl;
    if (vec8 && e0 + epl <= n) {
      reinterpret_cast<std::uint64_t*>(d)[i] = v.u;
      return;
    }
    for (int e = 0; e < epl; ++e)
      if (e0 + e < n) d[e0 + e] = v.t[e];
  }

  // The one body behind every FIFO primitive, as block_primitives::step: value = (⊕ received) ⊕
  // load(src); post if fin; store dst; send to each of `to`.
  __device__ void ll_step(peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n, bool fin) {
    if (n == 0) return;
    const auto& h = this->h_;
    const bool sys = h.system_scope;
    const int rank = this->rank_;
    std::uint64_t* const send_step = this->send_step_;
    std::uint64_t* const recv_step = this->recv_step_;
    __shared__ int clean;  // bit k: the slot towards to.rank[k] is rewritten whole (see "Epochs")

    if (threadIdx.x == 0) {
      clean = 0;
      if (!*this->aborted_)
        for (int k = 0; k < to.size; ++k) {
          const int t = to.rank[k];
          const std::uint64_t s = send_step[t];
          transport::fifo_view& c = h.fifo(this->channel_, rank, t);
          // Only this sender writes the slot's mark (and simple's counts); relaxed at the handle's
          // scope, it reads its own last store, made by an earlier kernel of this channel. Loaded
          // before the wait for the slot, so that the two round trips overlap.
          const std::uint64_t mark = load_relaxed(&c.sizes[s & (h.slots - 1)], sys);
          // Acquire (relaxed spin + fence, or a head value seen before): the receiver's reads of this
          // slot's previous message, which it ordered before its head store, happen before our stores below.
          const wait_result r = this->wait_send_slot(t);
          if (r != wait_result::ok) { this->stall(t, s, transport::stall_send_slot, r); break; }
          if (mark != ll_mark(s)) clean |= 1 << k;
        }
    }
    __syncthreads();
    if (*this->aborted_) return;

    const int nr = from.size, ns = to.size;
    const std::uint64_t* rl[peers::max_peers];
    std::uint64_t* sl[peers::max_peers];
    std::uint32_t rflag[peers::max_peers], sflag[peers::max_peers];
    for (int k = 0; k < nr; ++k) {
      rl[k] = slot_lines(from.rank[k], rank, recv_step[from.rank[k]]);
      rflag[k] = static_cast<std::uint32_t>(recv_step[from.rank[k]] + 1);
    }
    for (int k = 0; k < ns; ++k) {
      sl[k] = slot_lines(rank, to.rank[k], send_step[to.rank[k]]);
      sflag[k] = static_cast<std::uint32_t>(send_step[to.rank[k]] + 1);
    }
    const T* s = src ? this->local(*src) : nullptr;
    const bool pre = src && src->which == buffer::input;
    T* d = dst ? this->local(*dst) : nullptr;
    const bool vec8 = ((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 7u) == 0;
    const index_t nlines = div_up(n, static_cast<index_t>(epl));
    const index_t stride = blockDim.x;

    // Header: the count travels with the message, so that a receiver expecting another count says so.
    if (threadIdx.x == 0) {
      for (int k = 0; k < ns; ++k)
        ll_store(sl[k], sys, ll_lo(static_cast<std::uint32_t>(n), sflag[k]), ll_hi(0, sflag[k]));
      for (int k = 0; k < nr; ++k) {
        std::uint64_t a, b;
        ll_load(rl[k], sys, a, b);
        const wait_result r = poll(rl[k], rflag[k], a, b);
        const int f = from.rank[k];
        if (r != wait_result::ok) { this->stall(f, recv_step[f], transport::stall_recv, r); break; }
        if (static_cast<std::uint32_t>(a) != static_cast<std::uint32_t>(n)) {
          this->stall(f, recv_step[f], transport::stall_size, wait_result::timeout);
          break;
        }
      }
    }

    // Data: thread x moves lines x, x + stride, ...: `unroll` at a time, every load issued before
    // the first poll, so that the latency of one round trip covers them all.
    bool ok = !block_aborted();
    for (index_t i0 = threadIdx.x; ok && i0 < nlines; i0 += unroll * stride) {
      std::uint64_t ra[peers::max_peers][unroll], rb[peers::max_peers][unroll];
      line_t sv[unroll];
#pragma unroll
      for (int k = 0; k < peers::max_peers; ++k)
        if (k < nr)
#pragma unroll
          for (int u = 0; u < unroll; ++u)
            if (i0 + u * stride < nlines) ll_load(rl[k] + 2 * (1 + i0 + u * stride), sys, ra[k][u], rb[k][u]);
      if (s)
#pragma unroll
        for (int u = 0; u < unroll; ++u)
          if (i0 + u * stride < nlines) load_src(s, vec8, i0 + u * stride, n, sv[u]);
#pragma unroll
      for (int k = 0; k < peers::max_peers; ++k)
        if (k < nr)
#pragma unroll
          for (int u = 0; u < unroll; ++u)
            if (ok && i0 + u * stride < nlines) {
              const wait_result r = poll(rl[k] + 2 * (1 + i0 + u * stride), rflag[k], ra[k][u], rb[k][u]);
              if (r != wait_result::ok) {
                this->stall(from.rank[k], recv_step[from.rank[k]], transport::stall_recv, r);
                ok = false;
              }
            }
      if (!ok) break;
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        const index_t i = i0 + u * stride;
        if (i >= nlines) break;
        acc_t acc[epl];
#pragma unroll
        for (int k = 0; k < peers::max_peers; ++k)
          if (k < nr) {
            line_t rv;
            rv.w[0] = static_cast<std::uint32_t>(ra[k][u]);
            rv.w[1] = static_cast<std::uint32_t>(rb[k][u]);
#pragma unroll
            for (int e = 0; e < epl; ++e)
              acc[e] = k == 0 ? to_accum(rv.t[e]) : static_cast<acc_t>(this->op_(acc[e], to_accum(rv.t[e])));
          }
        if (s)
#pragma unroll
          for (int e = 0; e < epl; ++e) {
            const acc_t x = this->load_acc(sv[u].t[e], pre);
            acc[e] = nr == 0 ? x : static_cast<acc_t>(this->op_(acc[e], x));
          }
        line_t outv;
#pragma unroll
        for (int e = 0; e < epl; ++e) outv.t[e] = from_accum<T>(fin ? apply_post(this->op_, acc[e], h.nranks) : acc[e]);
        if (d) store_dst(d, vec8, i, n, outv);
#pragma unroll
        for (int k = 0; k < peers::max_peers; ++k)
          if (k < ns) ll_store(sl[k] + 2 * (1 + i), sys, ll_lo(outv.w[0], sflag[k]), ll_hi(outv.w[1], sflag[k]));
      }
    }

    // A slot of another epoch (or last used by simple): every line past the message gets its flag.
    if (clean)
      for (int k = 0; k < ns; ++k)
        if (clean & (1 << k)) {
          const index_t lines = h.slot_bytes / 16;
          for (index_t i = 1 + nlines + threadIdx.x; i < lines; i += stride) ll_store(sl[k] + 2 * i, sys, ll_lo(0, sflag[k]), ll_hi(0, sflag[k]));
        }
    __syncthreads();

    if (threadIdx.x == 0 && !*this->aborted_) {
      for (int k = 0; k < ns; ++k)
        if (clean & (1 << k)) {
          const std::uint64_t m = send_step[to.rank[k]];
          store_relaxed(&h.fifo(this->channel_, rank, to.rank[k]).sizes[m & (h.slots - 1)], ll_mark(m), sys);
        }
      // Orders the block's reads of the received slots (before it through __syncthreads) before
      // the head stores that free them, for the senders at the handle's scope.
      if (nr > 0) fence_acq_rel(sys);
      for (int f : from) store_relaxed(h.fifo(this->channel_, f, rank).head, ++recv_step[f], sys);
      // Not read by ll receivers (the flags are the signal): keeps tail equal to the messages sent,
      // which a later simple call on this connection waits for.
      for (int t : to) store_relaxed(h.fifo(this->channel_, rank, t).tail, ++send_step[t], sys);
    }
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
