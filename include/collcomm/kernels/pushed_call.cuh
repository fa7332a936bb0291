// collcomm/kernels/pushed_call.cuh — a pushed call's common path: what it stores and polls, and
// why two parts of the push areas and their cleaning once an epoch suffice, is in
// direct_primitives.cuh ("pushed calls").
//
// A small call's time is the serial path of the block's busiest thread, so this path keeps it
// short: one round of loads (the staged-call count, the cleaned epoch, the abort word, the peers'
// windows, the input's lines); then each thread takes pairs (peer, line): it stores this rank's
// line to that peer and polls that peer's line here, into shared memory; then a __syncthreads and
// each thread reduces its lines in rank order and writes them. A call of at most a pair a thread
// has no barrier before its stores (each thread loads what it uses); a larger one shares its
// loads through shared memory, behind a __syncthreads. The launch's parameters are read straight
// into registers; no block state is built in local memory. The first call of an epoch is not
// taken here: the caller stages it.
#pragma once

#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/ll_fifo.cuh>
#include <collcomm/kernels/scoped_wait.cuh>
#include <collcomm/ops.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <cuda/ptx>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// One thread of channel `channel`, staged-call count k: counts k + 1. The channels this call does not
// run advance too: every channel's count stays the same, so that calls on fewer channels and calls
// on more pick the same half (a channel left behind would stage into the half a peer may still
// read for the call before).
template <class Handle>
__device__ void advance_staged_calls(const Handle& h, int channel, std::uint64_t k) {
  h.staged_calls[channel] = k + 1;
  if (channel == 0)
    for (int c = static_cast<int>(gridDim.x); c < h.nchannels; ++c) h.staged_calls[c] = k + 1;
}

// Peers' lines one pushed call can take: transport::pushes bounds (nranks - 1) x its lines by 2048.
inline constexpr std::uint32_t push_max_peer_lines = 16384 / 8;

// Awaits the lines src[u] of the bits u of `pending` until each carries flag f, those not there
// yet loaded again together (one round trip after the last arrival, not one per line); (a[u], b[u])
// hold the load that saw line u. arrived(u, a[u], b[u]) runs as line u is seen; false ends the
// wait (line u says this is not the same call: the caller records why). Gives up when the world's abort word is
// raised or after the timeout, `pending` then naming the lines not there; the clock is read only
// once the lines are late.
template <class Scope, int U, class Arrived>
__device__ __forceinline__ wait_result await_lines(const std::uint64_t* const (&src)[U], std::uint64_t (&a)[U],
                                                   std::uint64_t (&b)[U], unsigned& pending, std::uint32_t f,
                                                   std::uint32_t* abort_word, std::uint64_t timeout_ns,
                                                   Arrived&& arrived) {
  std::uint64_t start = 0;
#pragma unroll 1
  for (unsigned spin = 1; pending; ++spin) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (pending & (1u << u)) ll_load<Scope>(src[u], a[u], b[u]);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if ((pending & (1u << u)) && ll_arrived(a[u], b[u], f)) {
        pending &= ~(1u << u);
        if (!arrived(u, a[u], b[u])) return wait_result::ok;
      }
    if (pending && (spin & 255u) == 0) {
      if (world_aborted(abort_word)) return wait_result::aborted;
      const std::uint64_t now = cuda::ptx::get_sreg_globaltimer();
      if (start == 0)
        start = now;
      else if (now - start > timeout_ns)
        return wait_result::timeout;
    }
  }
  return wait_result::ok;
}

// A pushed call's wait that did not end well, out of line: a poll of peer `peer` that timed out
// (what: stall_recv), or its header of another call or size (stall_call, stall_size).
template <class Handle>
__device__ __noinline__ void pushed_stall(const Handle& h, int rank, int channel, int peer, std::uint64_t k,
                                          std::uint32_t what, wait_result why, std::uint32_t call,
                                          std::uint32_t peer_call) {
  record_stall(h, rank, channel, peer, k, what, why, call, peer_call);
}

// A block of a pushed call whose peers' blocks of this channel have all been seen (or that gave
// up on them): once every block of the grid is here, the stream's next kernel, launched
// programmatically (gpu/launch.hpp), may be placed, to wait resident for this one to end. Not
// before: placed earlier, next kernels could take the room a peer's block of this call still needs.
__device__ __forceinline__ void placed_with_peers() {
#if __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// The pushed call of a launch's only rank (p.rank[0]) on channel blockIdx.x, its range cut on
// `align` elements as the staged call's is. False, before any store: the call is its epoch's
// first, for the caller to stage (this rank's staged-call count is then not advanced yet).
template <class Handle, class T, class Op, class Params>
__device__ bool pushed_call_fast(const Params& p, std::uint32_t align) {
  using scope = typename Handle::scope;
  using acc_t = accum_t<T>;
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0, "collcomm: a pushed call's elements fill its 8-byte lines");
  constexpr int epl = static_cast<int>(8 / sizeof(T));  // elements per line
  union line_t {
    std::uint64_t u;
    std::uint32_t w[2];
    T t[epl];
    __device__ line_t() {}
  };
  __shared__ std::uint64_t peer_lines[push_max_peer_lines];  // (peer offset i, line j) at i * lines + j
  __shared__ std::uint64_t own_lines[transport::push_channel_bytes / 8];
  __shared__ std::uint64_t staged_k, cleaned;
  __shared__ int entry_failed;
  extern __shared__ std::uint64_t smem_steps[];  // here (rank): every rank's window
  char** const windows = reinterpret_cast<char**>(smem_steps);

  const rank_params<T, Op>& mine = p.rank[0];
  const int n = p.h.nranks, me = mine.args.rank, channel = static_cast<int>(blockIdx.x);
  const std::uint32_t t = threadIdx.x, nt = blockDim.x, nc = gridDim.x;
  // The channel's range (channel_range's cut, in 32 bits: a pushed call is at most push_max_bytes, its
  // range at most push_channel_bytes).
  const std::uint32_t count = static_cast<std::uint32_t>(mine.args.count);
  const std::uint32_t per = (((nc == 1 ? count : (count + nc - 1) / nc) + align - 1) / align) * align;
  const std::uint32_t begin = min(per * static_cast<std::uint32_t>(channel), count);
  const std::uint32_t size = min(begin + per, count) - begin;
  const std::uint32_t lines = (size * static_cast<std::uint32_t>(sizeof(T)) + 7) / 8;
  const T* const in = mine.in + begin;

  auto input_line = [&](std::uint32_t j) {  // zero past the range
    line_t v;
    v.u = 0;
#pragma unroll
    for (int e = 0; e < epl; ++e)
      if (j * epl + e < size) v.t[e] = in[j * epl + e];
    return v;
  };
  auto window_of = [&](int r) {
    return r == me ? static_cast<char*>(p.stage)
                   : static_cast<char*>(const_cast<void*>(p.h.buffers[channel * n + r].in));
  };
  auto peer_of = [&](std::uint32_t i) {  // peer offset i: peer me + 1 + i (mod n)
    const int q = me + 1 + static_cast<int>(i);
    return q < n ? q : q - n;
  };
  const std::uint32_t pairs = lines * static_cast<std::uint32_t>(n - 1);
  // Pair (i, j): peer offset i, line j; this thread's first is pair t, then every nt-th.
  const std::uint32_t i0 = lines ? t / lines : 0, j0 = t - i0 * lines;
  const std::uint32_t call = static_cast<std::uint32_t>(mine.call) & 0x7fffffffu;  // the call, in headers
  const std::size_t region = transport::push_region_bytes(p.h.nchannels);
  const std::size_t data = 16 * (static_cast<std::size_t>(p.h.nchannels) + begin * sizeof(T) / 8);  // bytes
  const std::size_t header = 16 * static_cast<std::size_t>(channel);
  std::uint32_t* const abort_word = p.h.abort;
  const std::uint64_t timeout_ns = p.h.timeout_ns;
  bool bad = false;
  auto header_differs = [&](std::uint64_t k, int q, std::uint64_t ha, std::uint64_t hb) {
    if (static_cast<std::uint32_t>(ha) == call && static_cast<std::uint32_t>(hb) == size) return false;
    const std::uint32_t theirs = static_cast<std::uint32_t>(ha) & 0x7fffffffu;
    pushed_stall(p.h, me, channel, q, k, theirs != call ? transport::stall_call : transport::stall_size,
                 wait_result::timeout, call, theirs);
    return true;
  };
  line_t first;  // this thread's first line of input (line t)

  if (pairs != 0 && pairs <= nt) {
    // At most a pair a thread, and no barrier before the stores: each thread loads what it uses
    // itself, in one round — the channel's staged-call count and its cleaned epoch (the same on
    // every thread: no thread of this kernel writes them before the barrier below), the abort word
    // (a stall may raise it meanwhile: threads that saw it raised store nothing and fail the call
    // at that barrier), its line of input, its pair's line and the windows of the peers it stores
    // to. Thread t stores its pair's line and, t < n - 1, its header to peer offset t, then awaits
    // the line of its pair and that peer's header here, both at once.
    const bool has_pair = t < pairs, has_header = t < static_cast<std::uint32_t>(n - 1);
    const std::uint64_t k = p.h.staged_calls[channel];
    const std::uint64_t epoch = p.h.staged_calls[p.h.nchannels + channel];
    const bool failed = world_aborted(p.h.entry_abort);
    first = input_line(t);
    const line_t pair_line = i0 == 0 ? first : input_line(j0);
    char* const pair_window = has_pair ? window_of(peer_of(i0)) : nullptr;
    char* const header_window = has_header ? window_of(peer_of(t)) : nullptr;
    if ((k + 1) >> 32 != epoch) return false;  // on every thread alike

    const std::uint32_t f = static_cast<std::uint32_t>(k + 1);
    const std::size_t at = 4 * p.h.window_bytes + (k & 1) * static_cast<std::size_t>(n) * region;
    const std::size_t to_peer = at + me * region;                   // this rank's region in a peer's part
    const char* const received = static_cast<char*>(p.stage) + at;  // peer q's region here: + q * region
    bad = failed;  // a world that failed stays failed: nothing stored, the output left as it was
    if (!failed && has_pair)
      ll_store<scope>(reinterpret_cast<std::uint64_t*>(pair_window + to_peer + data + 16 * j0),
                      ll_lo(pair_line.w[0], f), ll_hi(pair_line.w[1], f));
    if (!failed && has_header)
      ll_store<scope>(reinterpret_cast<std::uint64_t*>(header_window + to_peer + header), ll_lo(call, f),
                      ll_hi(size, f));
    if (!failed && has_pair) {
      const int qh = peer_of(has_header ? t : 0);
      const std::uint64_t* const src[2] = {
          reinterpret_cast<const std::uint64_t*>(received + peer_of(i0) * region + data + 16 * j0),
          reinterpret_cast<const std::uint64_t*>(received + qh * region + header)};
      std::uint64_t a[2], b[2];
      unsigned pending = has_header ? 3u : 1u;
      const wait_result w = await_lines<scope, 2>(src, a, b, pending, f, abort_word, timeout_ns,
                                                  [&](int u, std::uint64_t ha, std::uint64_t hb) {
                                                    if (u == 1) bad = header_differs(k, qh, ha, hb);
                                                    return !bad;
                                                  });
      if (w != wait_result::ok) {
        pushed_stall(p.h, me, channel, (pending & 2u) ? qh : peer_of(i0), k, transport::stall_recv, w, 0, 0);
        bad = true;
      }
      peer_lines[t] = static_cast<std::uint32_t>(a[0]) | (b[0] << 32);
    }
    const bool stop = __syncthreads_or(bad);  // every thread has read the count: it may advance
    placed_with_peers();
    if (t == nt - 1) advance_staged_calls(p.h, channel, k);
    if (stop) return true;  // a failed call leaves the output untouched
  } else {
    // More pairs than threads (or none): one round of loads, all issued before any is used — this
    // thread's first line of input, a rank's window, and (thread 0) the count, the epoch and the
    // abort word — into shared memory, a __syncthreads, then each thread's pairs.
    first = input_line(t);
    char* const window = static_cast<int>(t) < n ? window_of(static_cast<int>(t)) : nullptr;
    std::uint64_t k0 = 0, epoch0 = 0;
    bool failed0 = false;
    if (t == 0) {
      k0 = p.h.staged_calls[channel];
      epoch0 = p.h.staged_calls[p.h.nchannels + channel];
      failed0 = world_aborted(p.h.entry_abort);
    }
    if (t < lines) own_lines[t] = first.u;
#pragma unroll 1
    for (std::uint32_t j = t + nt; j < lines; j += nt) own_lines[j] = input_line(j).u;
    if (static_cast<int>(t) < n) windows[t] = window;
#pragma unroll 1
    for (int r = static_cast<int>(t + nt); r < n; r += static_cast<int>(nt)) windows[r] = window_of(r);
    if (t == 0) {
      staged_k = k0;
      cleaned = epoch0;
      entry_failed = failed0;
    }
    __syncthreads();
    const std::uint64_t k = staged_k;
    if ((k + 1) >> 32 != cleaned) return false;
    if (t == nt - 1) advance_staged_calls(p.h, channel, k);  // a thread that likely has no pair
    if (entry_failed || size == 0) return true;              // size: the same on every rank that makes this call

    const std::uint32_t f = static_cast<std::uint32_t>(k + 1);
    const std::size_t at = 4 * p.h.window_bytes + (k & 1) * static_cast<std::size_t>(n) * region;
    const std::size_t to_peer = at + me * region;  // this rank's region in a peer's part
    char* const received = windows[me] + at;       // peer q's region here: + q * region
    const std::uint32_t di = nt / lines, dj = nt - di * lines;
    auto next_pair = [&](std::uint32_t& i, std::uint32_t& j) {
      i += di;
      j += dj;
      if (j >= lines) j -= lines, ++i;
    };
    constexpr int U = 4;  // pairs a thread has in flight at once

    // Stores: this rank's line j into its region of peer q's part, a pair at a time (gathered, they
    // measured slower: each store is asm that clobbers memory); its header to each peer, peer
    // me + 1 + i (mod n) from thread i mod nt.
    {
      std::uint32_t i = i0, j = j0;
#pragma unroll 1
      for (std::uint32_t pr = t; pr < pairs; pr += nt) {
        line_t v;
        v.u = j == t ? first.u : own_lines[j];
        ll_store<scope>(reinterpret_cast<std::uint64_t*>(windows[peer_of(i)] + to_peer + data + 16 * j),
                        ll_lo(v.w[0], f), ll_hi(v.w[1], f));
        next_pair(i, j);
      }
    }
#pragma unroll 1
    for (std::uint32_t i = t; i < static_cast<std::uint32_t>(n - 1); i += nt)
      ll_store<scope>(reinterpret_cast<std::uint64_t*>(windows[peer_of(i)] + to_peer + header), ll_lo(call, f),
                      ll_hi(size, f));

    // Polls: its pairs U at a time, and with the first U the header of peer offset t (t < n - 1),
    // all at once; the headers of peers past the block's threads first. A peer's header is checked
    // as soon as it is seen: a peer of another call or size is reported as such, not as lines that
    // never came. The lines not there yet are loaded again together until all are (one round trip
    // after the last arrival, not one per line).
    auto header_of = [&](int q) { return reinterpret_cast<const std::uint64_t*>(received + q * region + header); };
    auto line_of = [&](std::uint32_t i, std::uint32_t j) {
      return reinterpret_cast<const std::uint64_t*>(received + peer_of(i) * region + data + 16 * j);
    };
#pragma unroll 1
    for (std::uint32_t i = t + nt; i < static_cast<std::uint32_t>(n - 1) && !bad; i += nt) {
      const int q = peer_of(i);
      const std::uint64_t* const src[1] = {header_of(q)};
      std::uint64_t a[1], b[1];
      unsigned pending = 1;
      const wait_result w = await_lines<scope, 1>(src, a, b, pending, f, abort_word, timeout_ns,
                                                  [&](int, std::uint64_t ha, std::uint64_t hb) {
                                                    bad = header_differs(k, q, ha, hb);
                                                    return !bad;
                                                  });
      if (w != wait_result::ok) {
        pushed_stall(p.h, me, channel, q, k, transport::stall_recv, w, 0, 0);
        bad = true;
      }
    }
    const bool has_header = t < static_cast<std::uint32_t>(n - 1);
    const int qh = peer_of(has_header ? t : 0);
    std::uint32_t i = i0, j = j0;
#pragma unroll 1
    for (std::uint32_t pr = t; pr < pairs && !bad; pr += U * nt) {
      std::uint64_t a[U + 1], b[U + 1];
      const std::uint64_t* src[U + 1];
      unsigned pending = pr == t && has_header ? 1u << U : 0u;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        src[u] = line_of(i, j);
        if (pr + u * nt < pairs) pending |= 1u << u;
        next_pair(i, j);
      }
      src[U] = header_of(qh);
      const wait_result w = await_lines<scope, U + 1>(src, a, b, pending, f, abort_word, timeout_ns,
                                                      [&](int u, std::uint64_t ha, std::uint64_t hb) {
                                                        if (u == U) bad = header_differs(k, qh, ha, hb);
                                                        return !bad;
                                                      });
      if (bad) break;
      if (w != wait_result::ok) {
        const std::uint32_t late = pr + (__ffs(static_cast<int>(pending)) - 1) * nt;  // a pair not there
        pushed_stall(p.h, me, channel, (pending & (1u << U)) ? qh : peer_of(late / lines), k, transport::stall_recv, w,
                     0, 0);
        bad = true;
        break;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (pr + u * nt < pairs) peer_lines[pr + u * nt] = static_cast<std::uint32_t>(a[u]) | (b[u] << 32);
    }
    const bool stop = __syncthreads_or(bad);
    placed_with_peers();
    if (stop) return true;  // a failed call leaves the output untouched
  }

  // Each thread's lines, reduced in rank order (this rank's own input for itself), 8 ranks' lines
  // loaded at once, and written out. Every load is made (this rank, or a rank past the last, reads
  // the first peer's line, unused), so that the eight issue back to back without a branch.
  T* const out = mine.out + begin;
#pragma unroll 1
  for (std::uint32_t j = t; j < lines; j += nt) {
    const std::uint64_t own = j == t ? first.u : own_lines[j];
    acc_t acc[epl];
#pragma unroll 1
    for (int q0 = 0; q0 < n; q0 += 8) {
      line_t v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int q = q0 + u, i = q - me - 1 + (q < me ? n : 0);  // q's peer offset
        const std::uint64_t x = peer_lines[(q < n && q != me ? static_cast<std::uint32_t>(i) * lines : 0u) + j];
        v[u].u = q == me ? own : x;
      }
      fold_eight_ranks(acc, v, q0, n, mine.op);
    }
#pragma unroll
    for (int e = 0; e < epl; ++e)
      if (j * epl + e < size) out[j * epl + e] = from_accum<T>(apply_post(mine.op, acc[e], n));
  }
  return true;
}

}  // namespace kernels
COLLCOMM_NAMESPACE_END
