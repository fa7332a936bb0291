// collcomm/kernels/ll128_fifo.cuh — the FIFO primitives of protocol `ll128`.
//
// Same contract and block structure as ll_fifo.cuh (one channel is one thread block, every
// primitive call is block-collective, the same FIFO slots and counters), with lines of 128 bytes:
// 120 bytes of payload and an 8-byte flag per line instead of ll's 8 and 8 per 16 bytes.
//
// A slot is a run of 128-byte lines (the slot and the connection's memory are 128-byte aligned:
// slot_bytes is a multiple of 128, gpu::launch checks it; connection_layout pads each connection).
// Line 0 is the message's header, lines 1.. its data. A line is 16 words of 8 bytes and is written
// and read by 8 consecutive lanes of one warp, lane j holding words 2j and 2j + 1 as one 16-byte
// access; word 15 (lane 7's second) is the flag:
//     header: word 0 = count | call << 32, word 15 = flag   data line i: words 0..14 = payload, word 15 = flag
// The flag of message m on a connection is flag_of(m), a bijection of the 64-bit message count that
// never repeats on a connection. A receiver's 8 lanes of each line load it whole in each poll, lane
// 7 checking the flag word; once every line of the warp has its flag (__any_sync), the values of that
// very load are used (one round trip where the data is there: 5-10 % faster than polling the flag
// lane alone and loading the lines again). What makes the other 15 words valid once the flag is seen
// is the hardware's, not the PTX memory model's: a warp's 16-byte stores to one 128-byte line are
// one request to the L2 (one GPU, or NVLink to a peer), performed whole, and a warp's 16-byte loads
// of the line are one request that returns it whole.
// NCCL's LL128 relies on the same property, and so it is offered over transport::nvlink only
// (gpu::launch refuses it elsewhere: PCIe makes no such promise).
//
// Stale lines. A slot keeps what earlier messages left: ll128 lines of older messages carry other
// flags (flag_of is one-to-one); lines of simple or ll messages carry raw data, which matches an
// awaited flag only if an 8-byte word of it equals flag_of(m) for that exact message — a 64-bit
// value that mixes the count with a multiplicative hash, so that small integers, zeros and ll's
// (data, f, data, ~f) words do not. Unlike ll, no slot is rewritten whole.
//
// Per message:
//   sender:   thread 0 waits (bounded) until each send slot is free (as simple and ll), __syncthreads;
//             warp 0 writes the header lines; every warp writes its data lines with the flag. No
//             fence, no tail to wait for (tail still advances, relaxed, so a later call of another
//             protocol finds the connection's counts as simple leaves them).
//   receiver: warp 0 polls the header lines and checks count and call (stall_size / stall_call as
//             simple); every warp polls its own data lines (each poll bounded by the handle's
//             timeout, honouring the world's abort word and the block's abort flag); __syncthreads;
//             thread 0: fence.acq_rel and a relaxed store of head = m + 1, freeing the slot.
#pragma once

#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/ll_fifo.cuh>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// The flag of message m: odd-multiplier hash of m + 1 (one-to-one on 64-bit counts) with a tag mixed in.
COLLCOMM_HD constexpr std::uint64_t ll128_flag(std::uint64_t m) {
  return ((m + 1) * 0x9E3779B97F4A7C15ull) ^ 0x4C4C313238000000ull;
}

// What an ll128 message leaves in its slot's `sizes` word: neither an ll mark (ll_mark: tag 0x4C4C
// in bits 48..63) nor a count of simple (size_word: bit 63 set); only senders read it.
inline constexpr std::uint64_t ll128_sizes_word = std::uint64_t{0x3132} << 48;

template <class State>
struct ll128_fifo {
  using T = typename State::value_type;
  using Op = typename State::op_type;
  using acc_t = accum_t<T>;
  using scope = typename State::handle_type::scope;
  using ops = typename State::ops;
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0,
                "collcomm protocol axis: ll128 carries elements of 1, 2, 4 or 8 bytes");
  static constexpr int epw = static_cast<int>(8 / sizeof(T));  // elements per 8-byte word
  static constexpr int data_words = 15;                        // payload words per line
  static constexpr int epl = data_words * epw;                 // elements per line
  static constexpr int line_words = 16;
  static constexpr int unroll = 4;  // lines in flight per lane group (a warp holds 4 x unroll lines)
  static constexpr unsigned full = 0xffffffffu;
  union word_t {
    std::uint64_t u;
    T t[epw];
    __device__ word_t() {}
  };

  // A line's payload is the unit: schedules cut chunks on line boundaries.
  COLLCOMM_HD static index_t align_elems() { return epl; }
  COLLCOMM_HD static index_t slot_elems(const State& c) {
    const index_t lines = c.h.slot_bytes / 128;
    return lines > 1 ? (lines - 1) * epl : 0;
  }

  __device__ static void step(State& c, peers from, const buf_ref* src, const buf_ref* dst, peers to, index_t n,
                              bool fin) {
    if (n == 0) return;
    if (threadIdx.x == 0) reserve_send_slots(c, to);
    __syncthreads();
    if (*c.aborted) return;
    const std::uint64_t* rl[peers::max_peers];
    std::uint64_t* sl[peers::max_peers];
    std::uint64_t rflag[peers::max_peers], sflag[peers::max_peers];
    for (int k = 0; k < from.size; ++k) {
      const int f = from.rank[k];
      rl[k] = reinterpret_cast<const std::uint64_t*>(c.slot_bytes(f, c.rank, c.recv_step[f]));
      rflag[k] = ll128_flag(c.recv_step[f]);
    }
    for (int k = 0; k < to.size; ++k) {
      const int t = to.rank[k];
      sl[k] = reinterpret_cast<std::uint64_t*>(c.slot_bytes(c.rank, t, c.send_step[t]));
      sflag[k] = ll128_flag(c.send_step[t]);
    }
    if (threadIdx.x < 32) headers(c, from, to, rl, sl, rflag, sflag, n);
    move_lines(c, from, src, dst, to, rl, sl, rflag, sflag, n, fin);
    __syncthreads();
    if (threadIdx.x == 0 && !*c.aborted) release(c, from, to);
  }

 private:
  // Thread 0: waits (bounded) until every send slot is free (acquire: the receiver's reads of the
  // slot's previous message happen before our stores to it), and overwrites the slot's `sizes`
  // word: a slot ll128 wrote is no longer one whose every line carries an ll flag of the current
  // epoch, so a later ll message into it rewrites it whole (ll_fifo.cuh, "Epochs").
  __device__ __noinline__ static void reserve_send_slots(const State& c, peers to) {
    if (*c.aborted) return;
    for (int k = 0; k < to.size; ++k) {
      const int t = to.rank[k];
      const wait_result r = c.wait_send_slot(t);
      if (r != wait_result::ok) {
        c.stall(t, c.send_step[t], transport::stall_send_slot, r);
        return;
      }
      const std::uint64_t s = c.send_step[t];
      ops::store(&c.h.fifo(c.channel, c.rank, t).sizes[s & (c.h.slots - 1)], ll128_sizes_word);
    }
  }

  // Polls, in one warp, the lines at p[u] (u < U) whose flag lanes (lane % 8 == 7) await `flag`
  // where bit u of `live` is set: every lane loads its part of each line into (a, b) — all U loads
  // unconditional, so they issue back to back; a lane whose line u is past the message points p[u]
  // at a line it may read and leaves bit u clear — until the warp has seen every awaited flag, and
  // returns the values of that load. Bounded by the handle's timeout; gives up when the world's
  // abort word or the block's abort flag is raised (warp-uniform).
  template <int U>
  __device__ static wait_result poll(const State& c, const std::uint64_t* const (&p)[U], unsigned live,
                                     std::uint64_t flag, std::uint64_t (&a)[U], std::uint64_t (&b)[U]) {
    const bool flag_lane = (threadIdx.x & 7) == 7;
    std::uint64_t start = 0;
    for (unsigned i = 0;; ++i) {
#pragma unroll
      for (int u = 0; u < U; ++u) ll_load<scope>(p[u], a[u], b[u]);
      bool need = false;
#pragma unroll
      for (int u = 0; u < U; ++u) need |= flag_lane && ((live >> u) & 1u) && b[u] != flag;
      if (!__any_sync(full, need)) break;
      if (i == 0) start = cuda::ptx::get_sreg_globaltimer();
      if ((i & 63u) == 63u) {
        const bool stop = c.block_aborted() || world_aborted(c.h.abort);
        const bool late = cuda::ptx::get_sreg_globaltimer() - start > c.h.timeout_ns;
        if (__any_sync(full, stop)) return wait_result::aborted;
        if (__any_sync(full, late)) return wait_result::timeout;
      }
    }
    return wait_result::ok;
  }

  // Warp 0: the count and the call's fingerprint travel in each message's header line, written by
  // lanes 0 and 7 in one store instruction; lanes 0..7 poll each received header.
  __device__ __noinline__ static void headers(const State& c, peers from, peers to, const std::uint64_t* const* rl,
                                              std::uint64_t* const* sl, const std::uint64_t* rflag,
                                              const std::uint64_t* sflag, index_t n) {
    const int lane = threadIdx.x;
    const std::uint64_t word0 = static_cast<std::uint32_t>(n) | (std::uint64_t{c.call & 0x7fffffffu} << 32);
    for (int k = 0; k < to.size; ++k)
      if (lane == 0 || lane == 7) ll_store<scope>(sl[k] + 2 * lane, lane == 0 ? word0 : 0, lane == 7 ? sflag[k] : 0);
    for (int k = 0; k < from.size; ++k) {
      const std::uint64_t* const p[1] = {rl[k] + 2 * (lane & 7)};
      std::uint64_t a[1], b[1];
      const wait_result r = poll(c, p, lane < 8 ? 1u : 0u, rflag[k], a, b);
      const int f = from.rank[k];
      if (r != wait_result::ok) {
        if (lane == 0) c.stall(f, c.recv_step[f], transport::stall_recv, r);
        return;
      }
      if (lane == 0 && (static_cast<std::uint32_t>(a[0]) != static_cast<std::uint32_t>(n) ||
                        static_cast<std::uint32_t>(a[0] >> 32) != (c.call & 0x7fffffffu))) {
        c.stall_message(f, c.recv_step[f], static_cast<std::uint32_t>(a[0] >> 32));
      }
      if (__any_sync(full, c.block_aborted())) return;
    }
  }

  // The elements of a line's words 2j and 2j + 1 (lane j of the line; j = 7 has word 14 only):
  // element e0 = line * epl + 2j * epw onwards, zeros past n.
  __device__ static void load_src(const T* s, bool vec8, index_t e0, int words, index_t n, word_t& w0, word_t& w1) {
    if (vec8 && e0 + words * epw <= n) {
      const std::uint64_t* q = reinterpret_cast<const std::uint64_t*>(s + e0);
      w0.u = q[0];
      w1.u = words > 1 ? q[1] : 0;
      return;
    }
    w0.u = 0;
    w1.u = 0;
    for (int e = 0; e < epw; ++e) {
      if (e0 + e < n) w0.t[e] = s[e0 + e];
      if (words > 1 && e0 + epw + e < n) w1.t[e] = s[e0 + epw + e];
    }
  }
  __device__ static void store_dst(T* d, bool vec8, index_t e0, int words, index_t n, const word_t& w0,
                                   const word_t& w1) {
    if (vec8 && e0 + words * epw <= n) {
      std::uint64_t* q = reinterpret_cast<std::uint64_t*>(d + e0);
      q[0] = w0.u;
      if (words > 1) q[1] = w1.u;
      return;
    }
    for (int e = 0; e < epw; ++e) {
      if (e0 + e < n) d[e0 + e] = w0.t[e];
      if (words > 1 && e0 + epw + e < n) d[e0 + epw + e] = w1.t[e];
    }
  }

  // Asks the L2 for the line group at `first` that this warp moves next: lanes 0..15 one 128-byte
  // line each of its source, lanes 16..31 one received line each per peer. Both would otherwise come
  // from DRAM when the group starts (slots and source stream through more than the L2 holds) and
  // stand in the chain of dependent loads — source, flag polls, lines — that sets ll128's pace: a
  // group's first poll then finds its line in the L2 (ring all_reduce, H100: 14–19 % less time).
  __device__ static void prefetch_group(const T* s, index_t n, const std::uint64_t* const* rl, int nr, index_t first,
                                        index_t nlines) {
    if (first >= nlines) return;
    const int lane = threadIdx.x & 31;
    if (lane < 16) {
      const index_t e = first * epl + lane * 128 / static_cast<index_t>(sizeof(T));
      if (s && lane * 128 < 4 * unroll * epl * static_cast<int>(sizeof(T)) && e < n) prefetch_l2(s + e);
    } else if (first + (lane - 16) < nlines) {
      for (int k = 0; k < nr; ++k) prefetch_l2(rl[k] + line_words * (1 + first + (lane - 16)));
    }
  }
  __device__ static void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
  }

  // Data: warp w moves line groups w, w + warps, ...; a group is 4 x unroll lines, lane group
  // g = lane / 8 taking lines 4u + g (u < unroll). Every line of the group is loaded before the
  // first poll, so one round trip covers them all. Out of line, as is the connection work above:
  // nvcc 13.0's cicc segfaults on the tree all_reduce kernel (f32 included) when all of every
  // step is inlined into it.
  __device__ __noinline__ static void move_lines(State& c, peers from, const buf_ref* src, const buf_ref* dst, peers to,
                                                 const std::uint64_t* const* rl, std::uint64_t* const* sl,
                                                 const std::uint64_t* rflag, const std::uint64_t* sflag, index_t n,
                                                 bool fin) {
    const int nr = from.size, ns = to.size;
    const T* s = src ? c.local(*src) : nullptr;
    const bool pre = src && src->which == buffer::input;
    T* d = dst ? c.local(*dst) : nullptr;
    const bool vec8 = ((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 7u) == 0;
    const int lane = threadIdx.x & 31, j = lane & 7, g = lane >> 3;
    const int words = j == 7 ? 1 : 2;  // payload words of this lane in each line
    const index_t nlines = div_up(n, static_cast<index_t>(epl));
    const index_t group_lines = 4 * unroll;
    const index_t warps = blockDim.x / 32;
    for (index_t base = (threadIdx.x / 32) * group_lines; base < nlines; base += warps * group_lines) {
      if (__any_sync(full, c.block_aborted())) return;
      prefetch_group(s, n, rl, nr, base + warps * group_lines, nlines);
      word_t v0[unroll], v1[unroll];  // this lane's two words of each of its lines, as values of T
      acc_t acc[unroll][2 * epw];
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        const index_t line = base + 4 * u + g;
        if (s && line < nlines) load_src(s, vec8, line * epl + 2 * j * epw, words, n, v0[u], v1[u]);
      }
      for (int k = 0; k < nr; ++k) {
        const std::uint64_t* p[unroll];
        unsigned live = 0;
#pragma unroll
        for (int u = 0; u < unroll; ++u) {
          const index_t line = base + 4 * u + g;
          p[u] = rl[k] + line_words * (1 + (line < nlines ? line : nlines - 1)) + 2 * j;
          live |= (line < nlines ? 1u : 0u) << u;
        }
        std::uint64_t a[unroll], b[unroll];
        const wait_result r = poll(c, p, live, rflag[k], a, b);
        if (r != wait_result::ok) {
          if (lane == 0) c.stall(from.rank[k], c.recv_step[from.rank[k]], transport::stall_recv, r);
          return;
        }
#pragma unroll
        for (int u = 0; u < unroll; ++u) {
          word_t r0, r1;
          r0.u = a[u];
          r1.u = b[u];
#pragma unroll
          for (int e = 0; e < epw; ++e) {
            acc[u][e] = k == 0 ? to_accum(r0.t[e]) : static_cast<acc_t>(c.op(acc[u][e], to_accum(r0.t[e])));
            acc[u][epw + e] = k == 0 ? to_accum(r1.t[e]) : static_cast<acc_t>(c.op(acc[u][epw + e], to_accum(r1.t[e])));
          }
        }
      }
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        const index_t line = base + 4 * u + g;
        if (line >= nlines) continue;
        if (s)
#pragma unroll
          for (int e = 0; e < epw; ++e) {
            const acc_t x0 = c.load_acc(v0[u].t[e], pre), x1 = c.load_acc(v1[u].t[e], pre);
            acc[u][e] = nr == 0 ? x0 : static_cast<acc_t>(c.op(acc[u][e], x0));
            acc[u][epw + e] = nr == 0 ? x1 : static_cast<acc_t>(c.op(acc[u][epw + e], x1));
          }
        word_t o0, o1;
#pragma unroll
        for (int e = 0; e < epw; ++e) {
          o0.t[e] = from_accum<T>(fin ? apply_post(c.op, acc[u][e], c.h.nranks) : acc[u][e]);
          o1.t[e] = from_accum<T>(fin ? apply_post(c.op, acc[u][epw + e], c.h.nranks) : acc[u][epw + e]);
        }
        if (d) store_dst(d, vec8, line * epl + 2 * j * epw, words, n, o0, o1);
        for (int k = 0; k < ns; ++k)
          ll_store<scope>(sl[k] + line_words * (1 + line) + 2 * j, o0.u, j == 7 ? sflag[k] : o1.u);
      }
    }
  }

  // Thread 0: frees the received slots (head) after a fence that orders the block's reads of them
  // (before it through __syncthreads); advances tail.
  __device__ __noinline__ static void release(const State& c, peers from, peers to) {
    if (from.size > 0) ops::fence();
    for (int f : from) ops::store(c.h.fifo(c.channel, f, c.rank).head, ++c.recv_step[f]);
    for (int t : to) ops::store(c.h.fifo(c.channel, c.rank, t).tail, ++c.send_step[t]);
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
