// collcomm/kernels/ll_fifo.cuh — the FIFO primitives of protocol `ll` (low latency).
//
// Same contract and block structure as simple_fifo.cuh: one channel is one thread block, every
// primitive call is block-collective, and the messages go through the same FIFO slots; the direct
// family and copy are block_primitives' (block_primitives.cuh), whatever the protocol.
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
// `sizes` word (simple stores the message's count and call there, bit 63 set), the LL epoch it was last
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

#include <collcomm/kernels/channel.cuh>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// One 16-byte LL line, as its two 8-byte halves, at a scope. `relaxed` makes every access morally
// strong: a poll is never served from a stale L1 line and never torn within a half.
template <class Scope>
__device__ inline void ll_load(const std::uint64_t* p, std::uint64_t& a, std::uint64_t& b) {
  const std::size_t g = __cvta_generic_to_global(p);
  if constexpr (std::is_same_v<Scope, transport::scope_device>)
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(g) : "memory");
  else
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(g) : "memory");
}
template <class Scope>
__device__ inline void ll_store(std::uint64_t* p, std::uint64_t a, std::uint64_t b) {
  const std::size_t g = __cvta_generic_to_global(p);
  if constexpr (std::is_same_v<Scope, transport::scope_device>)
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(g), "l"(a), "l"(b) : "memory");
  else
    asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(g), "l"(a), "l"(b) : "memory");
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
// Never a word that simple stores (size_word, channel.cuh: bit 63 set).
__device__ inline std::uint64_t ll_mark(std::uint64_t m) { return (std::uint64_t{0x4C4C} << 48) | (m >> 30); }

// Polls one line until both its flags are `flag`; (a, b) hold a first load already. Bounded by the
// handle's timeout; gives up when the world's abort word or the block's abort flag is raised.
template <class State>
__device__ wait_result ll_poll(const State& c, const std::uint64_t* line, std::uint32_t flag, std::uint64_t& a,
                               std::uint64_t& b) {
  using scope = typename State::handle_type::scope;
  if (ll_arrived(a, b, flag)) return wait_result::ok;
  const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
  for (unsigned i = 1;; ++i) {
    ll_load<scope>(line, a, b);
    if (ll_arrived(a, b, flag)) return wait_result::ok;
    if ((i & 255u) == 0) {
      if (c.block_aborted() || world_aborted(c.h.abort)) return wait_result::aborted;
      if (cuda::ptx::get_sreg_globaltimer() - start > c.h.timeout_ns) return wait_result::timeout;
    }
  }
}

template <class State>
struct ll_fifo {
  using T = typename State::value_type;
  using Op = typename State::op_type;
  using acc_t = accum_t<T>;
  using scope = typename State::handle_type::scope;
  using ops = typename State::ops;
  // Elements of T are at most 8 bytes (every element type); a line's payload holds whole elements.
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0,
                "collcomm protocol axis: ll carries elements of 1, 2, 4 or 8 bytes");
  static constexpr int epl = static_cast<int>(8 / sizeof(T));  // elements per line
  static constexpr int unroll = 4;                             // lines in flight per thread
  union line_t {
    std::uint64_t u;
    std::uint32_t w[2];
    T t[epl];
    __device__ line_t() {}
  };

  // A line's payload (8 bytes) is the unit: schedules cut chunks on line boundaries.
  COLLCOMM_HD static index_t align_elems() { return epl; }
  // Data lines per slot (all but the header) times elements per line: a multiple of align_elems().
  // gpu::launch refuses slots too small to hold one data line (kernels::min_slot_bytes).
  COLLCOMM_HD static index_t slot_elems(const State& c) {
    const index_t lines = c.h.slot_bytes / 16;
    return lines > 1 ? (lines - 1) * epl : 0;
  }

  // The lines of one message's slots: received (rl, with the awaited flags) and sent (sl).
  struct message_lines {
    const std::uint64_t* rl[peers::max_peers];
    std::uint64_t* sl[peers::max_peers];
    std::uint32_t rflag[peers::max_peers], sflag[peers::max_peers];
  };

  // The one body behind every FIFO primitive, as simple_fifo::step: value = (op over received) op
  // load(src); post if fin; store dst; send to each of `to`. Inlined into the schedule, specialized
  // to the call's peer counts; thread 0's connection work may be out of line, as in simple_fifo.
  __device__ static void step(State& c, peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n,
                              bool fin) {
    if (n == 0) return;
    __shared__ int clean;  // bit k: the slot towards to.rank[k] is rewritten whole (see "Epochs")
    if (threadIdx.x == 0) clean = reserve(c, to);
    __syncthreads();
    if (*c.aborted) return;

    message_lines m;
    for (int k = 0; k < from.size; ++k) {
      m.rl[k] = slot_lines(c, from.rank[k], c.rank, c.recv_step[from.rank[k]]);
      m.rflag[k] = static_cast<std::uint32_t>(c.recv_step[from.rank[k]] + 1);
    }
    for (int k = 0; k < to.size; ++k) {
      m.sl[k] = slot_lines(c, c.rank, to.rank[k], c.send_step[to.rank[k]]);
      m.sflag[k] = static_cast<std::uint32_t>(c.send_step[to.rank[k]] + 1);
    }
    if (threadIdx.x == 0) headers(c, from, to, m, n);
    move_lines(c, from, src, dst, to, m, n, fin);
    if (clean) clean_slots(c, to, m, n, clean);
    __syncthreads();
    if (threadIdx.x == 0 && !*c.aborted) finish(c, from, to, clean);
  }

  // Thread 0's connection work (the send slots' wait, the headers, the counters) is out of line for
  // elements narrower than 4 bytes, for the reason simple_fifo gives (nvcc 13.0's cicc segfaults on
  // the tree all_reduce kernel of such elements when all of every step is inlined); the data path
  // (move_lines, its polls included) stays inlined.
  static constexpr bool connection_work_out_of_line = sizeof(T) < 4;

 private:
  __device__ static int reserve(const State& c, peers to) {
    if constexpr (connection_work_out_of_line)
      return reserve_out_of_line(c, to);
    else
      return reserve_send_slots(c, to);
  }
  __device__ static void headers(const State& c, peers from, peers to, const message_lines& m, index_t n) {
    if constexpr (connection_work_out_of_line)
      headers_out_of_line(c, from, to, m, n);
    else
      exchange_headers(c, from, to, m, n);
  }
  __device__ static void finish(const State& c, peers from, peers to, int clean) {
    if constexpr (connection_work_out_of_line)
      finish_out_of_line(c, from, to, clean);
    else
      release(c, from, to, clean);
  }
  __device__ __noinline__ static int reserve_out_of_line(const State& c, peers to) { return reserve_send_slots(c, to); }
  __device__ __noinline__ static void headers_out_of_line(const State& c, peers from, peers to, const message_lines& m,
                                                          index_t n) {
    exchange_headers(c, from, to, m, n);
  }
  __device__ __noinline__ static void finish_out_of_line(const State& c, peers from, peers to, int clean) {
    release(c, from, to, clean);
  }

  __device__ static std::uint64_t* slot_lines(const State& c, int src, int dst, std::uint64_t msg) {
    return reinterpret_cast<std::uint64_t*>(c.slot_bytes(src, dst, msg));
  }

  __device__ static wait_result poll(const State& c, const std::uint64_t* line, std::uint32_t flag, std::uint64_t& a,
                                     std::uint64_t& b) {
    return ll_poll(c, line, flag, a, b);
  }

  // Thread 0: waits (bounded) until every send slot is free, and returns which of them must be
  // rewritten whole (bit k for to.rank[k]: its mark is not of this message's epoch).
  __device__ static int reserve_send_slots(const State& c, peers to) {
    int clean = 0;
    if (*c.aborted) return clean;
    for (int k = 0; k < to.size; ++k) {
      const int t = to.rank[k];
      const std::uint64_t s = c.send_step[t];
      transport::fifo_view& conn = c.h.fifo(c.channel, c.rank, t);
      // Only this sender writes the slot's mark (and simple's counts); relaxed at the handle's
      // scope, it reads its own last store, made by an earlier kernel of this channel. Loaded
      // before the wait for the slot, so that the two round trips overlap.
      const std::uint64_t mark = ops::load(&conn.sizes[s & (c.h.slots - 1)]);
      // Acquire (relaxed spin + fence, or a head value seen before): the receiver's reads of this
      // slot's previous message, which it ordered before its head store, happen before our stores.
      const wait_result r = c.wait_send_slot(t);
      if (r != wait_result::ok) {
        c.stall(t, s, transport::stall_send_slot, r);
        break;
      }
      if (mark != ll_mark(s)) clean |= 1 << k;
    }
    return clean;
  }

  // Thread 0: the count and the call's fingerprint travel with the message in its header line, so
  // that a receiver expecting another count or another call says so (stall_size, stall_call).
  __device__ static void exchange_headers(const State& c, peers from, peers to, const message_lines& m, index_t n) {
    for (int k = 0; k < to.size; ++k)
      ll_store<scope>(m.sl[k], ll_lo(static_cast<std::uint32_t>(n), m.sflag[k]),
                      ll_hi(c.call & 0x7fffffffu, m.sflag[k]));
    for (int k = 0; k < from.size; ++k) {
      std::uint64_t a, b;
      ll_load<scope>(m.rl[k], a, b);
      const wait_result r = poll(c, m.rl[k], m.rflag[k], a, b);
      const int f = from.rank[k];
      if (r != wait_result::ok) {
        c.stall(f, c.recv_step[f], transport::stall_recv, r);
        break;
      }
      if (static_cast<std::uint32_t>(a) != static_cast<std::uint32_t>(n) ||
          static_cast<std::uint32_t>(b) != (c.call & 0x7fffffffu)) {
        c.stall_message(f, c.recv_step[f], static_cast<std::uint32_t>(b));
        break;
      }
    }
  }

  // Source elements of line i (of a message of n elements) into `v`; zeros past n.
  __device__ static void load_src(const T* s, bool vec8, index_t i, index_t n, line_t& v) {
    const index_t e0 = i * epl;
    if (vec8 && e0 + epl <= n) {
      v.u = reinterpret_cast<const std::uint64_t*>(s)[i];
      return;
    }
    v.u = 0;
    for (int e = 0; e < epl; ++e)
      if (e0 + e < n) v.t[e] = s[e0 + e];
  }
  __device__ static void store_dst(T* d, bool vec8, index_t i, index_t n, const line_t& v) {
    const index_t e0 = i * epl;
    if (vec8 && e0 + epl <= n) {
      reinterpret_cast<std::uint64_t*>(d)[i] = v.u;
      return;
    }
    for (int e = 0; e < epl; ++e)
      if (e0 + e < n) d[e0 + e] = v.t[e];
  }

  // Data: thread x moves lines x, x + stride, ...: `unroll` at a time, every load issued before
  // the first poll, so that the latency of one round trip covers them all.
  __device__ static void move_lines(State& c, peers from, const buf_ref* src, const buf_ref* dst, peers to,
                                    const message_lines& m, index_t n, bool fin) {
    const int nr = from.size, ns = to.size;
    const T* s = src ? c.local(*src) : nullptr;
    const bool pre = src && src->which == buffer::input;
    T* d = dst ? c.local(*dst) : nullptr;
    const bool vec8 = ((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 7u) == 0;
    const index_t nlines = div_up(n, static_cast<index_t>(epl));
    const index_t stride = blockDim.x;
    bool ok = !c.block_aborted();
    for (index_t i0 = threadIdx.x; ok && i0 < nlines; i0 += unroll * stride) {
      std::uint64_t ra[peers::max_peers][unroll], rb[peers::max_peers][unroll];
      line_t sv[unroll];
#pragma unroll
      for (int k = 0; k < peers::max_peers; ++k)
        if (k < nr)
#pragma unroll
          for (int u = 0; u < unroll; ++u)
            if (i0 + u * stride < nlines) ll_load<scope>(m.rl[k] + 2 * (1 + i0 + u * stride), ra[k][u], rb[k][u]);
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
              const wait_result r = poll(c, m.rl[k] + 2 * (1 + i0 + u * stride), m.rflag[k], ra[k][u], rb[k][u]);
              if (r != wait_result::ok) {
                c.stall(from.rank[k], c.recv_step[from.rank[k]], transport::stall_recv, r);
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
              acc[e] = k == 0 ? to_accum(rv.t[e]) : static_cast<acc_t>(c.op(acc[e], to_accum(rv.t[e])));
          }
        if (s)
#pragma unroll
          for (int e = 0; e < epl; ++e) {
            const acc_t x = c.load_acc(sv[u].t[e], pre);
            acc[e] = nr == 0 ? x : static_cast<acc_t>(c.op(acc[e], x));
          }
        line_t outv;
#pragma unroll
        for (int e = 0; e < epl; ++e) outv.t[e] = from_accum<T>(fin ? apply_post(c.op, acc[e], c.h.nranks) : acc[e]);
        if (d) store_dst(d, vec8, i, n, outv);
#pragma unroll
        for (int k = 0; k < peers::max_peers; ++k)
          if (k < ns)
            ll_store<scope>(m.sl[k] + 2 * (1 + i), ll_lo(outv.w[0], m.sflag[k]), ll_hi(outv.w[1], m.sflag[k]));
      }
    }
  }

  // A slot of another epoch (or last used by simple): every line past the message gets its flag.
  __device__ static void clean_slots(const State& c, peers to, const message_lines& m, index_t n, int clean) {
    const index_t nlines = div_up(n, static_cast<index_t>(epl));
    const index_t lines = c.h.slot_bytes / 16;
    for (int k = 0; k < to.size; ++k)
      if (clean & (1 << k))
        for (index_t i = 1 + nlines + threadIdx.x; i < lines; i += blockDim.x)
          ll_store<scope>(m.sl[k] + 2 * i, ll_lo(0, m.sflag[k]), ll_hi(0, m.sflag[k]));
  }

  // Thread 0: marks the rewritten slots; frees the received slots (head) after a fence that
  // orders the block's reads of them (before it through __syncthreads); advances tail.
  __device__ static void release(const State& c, peers from, peers to, int clean) {
    for (int k = 0; k < to.size; ++k)
      if (clean & (1 << k)) {
        const std::uint64_t s = c.send_step[to.rank[k]];
        ops::store(&c.h.fifo(c.channel, c.rank, to.rank[k]).sizes[s & (c.h.slots - 1)], ll_mark(s));
      }
    if (from.size > 0) ops::fence();
    for (int f : from) ops::store(c.h.fifo(c.channel, f, c.rank).head, ++c.recv_step[f]);
    // Not read by ll receivers (the flags are the signal): keeps tail equal to the messages sent,
    // which a later simple call on this connection waits for.
    for (int t : to) ops::store(c.h.fifo(c.channel, c.rank, t).tail, ++c.send_step[t]);
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
