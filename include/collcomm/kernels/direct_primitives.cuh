// collcomm/kernels/direct_primitives.cuh — the direct family (algo/primitives.hpp): a channel's
// block loads its peers' buffers in place, between barriers. Only for device handles whose
// peers' memory can be loaded and stored (Handle::load_store): nvlink, pcie P2P.
//
// Where the peers' buffers come from: when one launch carries every rank of the world (all on
// this GPU), from the launch's parameters (use_launch_buffers); else from the handle's table,
// where each rank publishes its buffers for the call (publish_buffers) before the schedule's
// entry barrier. Across processes the table holds every rank's staging window instead
// (gpu/communicator.hpp), and stage_input copies this channel's range of the input there.
#pragma once

#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/ll_fifo.cuh>
#include <collcomm/kernels/reduce_copy.cuh>

#include <cstddef>
#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

template <class State>
struct direct_family {
  using T = typename State::value_type;
  using rc = reduce_copy<T, typename State::op_type>;
  using pack_t = typename rc::pack_t;
  using acc_t = typename rc::acc_t;
  static constexpr int vec = rc::vec;
  static_assert(State::handle_type::load_store,
                "collcomm transport axis: the direct primitives need a transport whose peers' buffers can be loaded "
                "and stored (nvlink, pcie); this one carries FIFO messages only");

  // Makes this call's buffers reachable by direct peers. The schedule's first barrier publishes
  // it; its last barrier keeps it valid while peers read.
  __device__ static void publish_buffers(State& c) {
    if (threadIdx.x == 0 && !c.launch)
      c.h.buffers[c.channel * c.h.nranks + c.rank] = transport::buffer_pair{c.in, c.out};
  }

  // Every rank's block of this channel checks the call, arrives, then waits for all. The arrival
  // counter only grows; its value before we arrive says which barrier we join (we passed the last
  // one, so it is at least that one's total, and no peer passes this one before we arrive), so no
  // per-rank generation is kept. The call is checked before arriving: a rank making another call
  // never arrives, so no peer passes the barrier to read its buffers and write a mixed output;
  // its stall raises the world's abort word, which ends the peers' waits.
  __device__ static void barrier(State& c) {
    __syncthreads();
    if (threadIdx.x == 0 && !*c.aborted) {
      using ops = typename State::ops;
      const std::uint64_t n = static_cast<std::uint64_t>(c.h.nranks);
      std::uint64_t* word = &c.h.barrier[c.channel * c.h.barrier_stride];
      const std::uint64_t arrived = ops::load(word);
      const std::uint64_t recorded = ops::load(word + 1);  // beside the first: one round trip for both
      const std::uint64_t index = arrived / n + 1;
      std::uint32_t other = 0;
      if (!same_call(word + 1, recorded, index, c.call, other)) {
        c.stall_message(no_peer, index, other);
      } else {
        ops::fence();  // publish our buffers and stores before arriving
        ops::fetch_add(word, 1);
        const wait_result r = wait_at_least(word, index * n, c.h);
        if (r != wait_result::ok) c.stall(no_peer, index, transport::stall_barrier, r);
      }
    }
    __syncthreads();
  }
  // The barrier line's second word w holds (barrier index << 31 | call fingerprint) as recorded by
  // the first rank to check barrier `index`: the ranks meeting there must be making the same call
  // (gpu/launch.hpp, fingerprint_of), else `other` is the recorded call's fingerprint. v: a value of
  // w loaded after passing the last barrier.
  __device__ static bool same_call(std::uint64_t* w, std::uint64_t v, std::uint64_t index, std::uint32_t call,
                                   std::uint32_t& other) {
    using ops = typename State::ops;
    const std::uint64_t mine = (index << 31) | (call & 0x7fffffffu);
    while ((v >> 31) < index)
      if (ops::compare_exchange(w, v, mine)) return true;
    other = static_cast<std::uint32_t>(v & 0x7fffffffu);
    return (v >> 31) != index || v == mine;
  }

  // With every rank in this launch, the launch itself orders what the barriers would: it starts
  // after every rank's inputs are ready (it waits for every rank's stream), and no rank's stream
  // goes on before the whole launch ends, so no peer can reuse a buffer another block still reads.
  __device__ static void entry_barrier(State& c) {
    if (c.launch)
      __syncthreads();
    else
      barrier(c);
  }
  // Across processes, a call that staged its input in the kernel needs no exit barrier: a rank
  // overwrites a staging half only two staged calls later (pushed calls count: they advance the
  // same count), after the call between, which it ends only once every peer is done reading that
  // half — a staged call passes an entry barrier that peers reach after it, a pushed call takes
  // every peer's lines, which a peer stores only in a later kernel than its reads.
  __device__ static void exit_barrier(State& c) {
    if (c.launch || c.peer_in_offset)
      __syncthreads();
    else
      barrier(c);
  }

  // Copies this channel's range of the input, unchanged, into the staging half `offset` bytes into
  // this rank's window, at the same place; peers then read every peer's input `offset` bytes into
  // its window, after the entry barrier (which publishes these stores).
  __device__ static void stage_input(State& c, char* window, std::size_t offset, range r) {
    c.peer_in_offset = offset;
    rc::run(c.op, c.h.nranks, nullptr, 0, c.in + r.begin, false, reinterpret_cast<T*>(window + offset) + r.begin,
            nullptr, 0, r.size, false);
  }

  // ---- pushed calls (worlds of processes; transport/device_handle.hpp, pushes) -----------------
  //
  // A small one_shot all_reduce (transport::pushes) meets at no barrier. Call k of the channel
  // (its staged-call count, the same on every rank) has flag f = (k + 1) mod 2^32 and uses part
  // k & 1 of every rank's push area. Each rank stores its channel range as ll lines
  // (ll_fifo.cuh: 8 bytes of input per 16-byte line, each half flagged, (data, f) (data, ~f)) into
  // its region of every peer's part, at the line of the range's byte offset, and a header line on
  // the channel's slot, (call, f) (range size, ~f). Then it polls its own part: every peer's header
  // (a call or a size other than its own is reported as another call, stall_call / stall_size) and
  // lines, reduces them in rank order (its own input for itself) into shared memory, and writes its
  // output only once every header agreed — a failed call leaves the output untouched.
  //
  // Two parts suffice: a rank stores into part k & 1 of a peer's area again at call k + 2, after it
  // has ended call k + 1, which takes every peer's lines or passes a barrier every peer reaches
  // only in a kernel after its reads of call k. A line never shows its reader a stale f: a line
  // left unwritten since call k - 2^32 is the one hazard, so the first pushed call of each 2^32
  // calls (an epoch: (k + 1) >> 32) is staged instead and zeroes every push area between two
  // barriers (clean_push_area): a line then carries flags of its epoch's calls only, each once.

  // Before a __syncthreads: every rank's window (peers' from the buffer table, where a world of
  // processes keeps their windows; this rank's own, `window`) into peer_ptrs. Thread t loads rank
  // t - 1's, so that thread 0's own load (the staged-call count) goes out beside them.
  __device__ static void load_windows(State& c, char* window) {
    for (int r = static_cast<int>(threadIdx.x) - 1; r < c.h.nranks; r += blockDim.x)
      if (r >= 0) c.peer_ptrs[r] = r == c.rank ? window : c.h.buffers[c.channel * c.h.nranks + r].in;
  }
  // Part k & 1 of every rank's push area (windows in peer_ptrs: load_windows), read from the handle
  // and the block's state once: a pushed call's loads and stores are asm that clobbers memory, after
  // which each use of c.h or c.peer_ptrs in its loops would be loaded again (a round trip per peer).
  struct push_part {
    const void* const* windows;
    std::size_t region, at;  // bytes of a region; the part's offset in a window
    __device__ push_part(const State& c, std::uint64_t k)
        : windows(c.peer_ptrs),
          region(transport::push_region_bytes(c.h.nchannels)),
          at(4 * c.h.window_bytes + (k & 1) * static_cast<std::size_t>(c.h.nranks) * region) {}
    // Region `from` of rank `rank`'s part.
    __device__ std::uint64_t* operator()(int rank, int from) const {
      return reinterpret_cast<std::uint64_t*>(static_cast<char*>(const_cast<void*>(windows[rank])) + at +
                                              static_cast<std::size_t>(from) * region);
    }
  };

  // Polls the lines of peers q0 + i (bit i of `pending`) together until each carries flag k + 1;
  // line is peer q0's line, the next peer's `stride` words on. False: stalled or aborted.
  template <int B>
  __device__ static bool wait_lines(State& c, std::uint64_t k, int q0, unsigned pending, std::uint64_t (&a)[B],
                                    std::uint64_t (&b)[B], const std::uint64_t* line, std::size_t stride) {
    using scope = typename State::handle_type::scope;
    const std::uint32_t f = static_cast<std::uint32_t>(k + 1);
    const std::uint64_t start = cuda::ptx::get_sreg_globaltimer();
    for (unsigned spin = 1; pending; ++spin) {
      const std::uint64_t* l = line;
#pragma unroll
      for (int i = 0; i < B; ++i, l += stride)
        if (pending & (1u << i)) ll_load<scope>(l, a[i], b[i]);
#pragma unroll
      for (int i = 0; i < B; ++i)
        if ((pending & (1u << i)) && ll_arrived(a[i], b[i], f)) pending &= ~(1u << i);
      if (pending && (spin & 255u) == 0) {
        const int q = q0 + __ffs(static_cast<int>(pending)) - 1;
        wait_result w = wait_result::ok;
        if (c.block_aborted() || world_aborted(c.h.abort))
          w = wait_result::aborted;
        else if (cuda::ptx::get_sreg_globaltimer() - start > c.h.timeout_ns)
          w = wait_result::timeout;
        if (w != wait_result::ok) {
          if (!c.block_aborted()) c.stall(q, k, transport::stall_recv, w);
          return false;
        }
      }
    }
    return true;
  }

  // Peer q's header: another call, or another size of the range, is reported (stall_call,
  // stall_size) and no output is written. (a, b): a first load of it.
  __device__ __noinline__ static void check_header(State& c, int q, std::uint64_t k, const std::uint64_t* line,
                                                   std::uint64_t a, std::uint64_t b, std::uint32_t size) {
    const std::uint32_t f = static_cast<std::uint32_t>(k + 1);
    const wait_result w = ll_poll(c, line, f, a, b);
    if (w != wait_result::ok) {
      if (!c.block_aborted()) c.stall(q, k, transport::stall_recv, w);
    } else if (static_cast<std::uint32_t>(a) != (c.call & 0x7fffffffu) || static_cast<std::uint32_t>(b) != size) {
      c.stall_message(q, k, static_cast<std::uint32_t>(a));
    }
  }

  using push_line = typename ll_fifo<State>::line_t;  // ll's lines (elements of 1, 2, 4 or 8 bytes)
  static constexpr int epl = ll_fifo<State>::epl;
  // This rank's line j of range r (elements past the range, and lines past its end, are zero).
  __device__ static push_line pushed_line(const State& c, range r, index_t j) {
    push_line v;
    v.u = 0;
#pragma unroll
    for (int e = 0; e < epl; ++e)
      if (j * epl + e < r.size) v.t[e] = c.in[r.begin + j * epl + e];
    return v;
  }

  // first_line: pushed_line(c, r, threadIdx.x), loaded before the kernel's __syncthreads.
  __device__ static void pushed_all_reduce(State& c, std::uint64_t k, range r, const push_line& first_line) {
    using scope = typename State::handle_type::scope;
    auto own_line = [&](index_t j) {
      return j == static_cast<index_t>(threadIdx.x) ? first_line : pushed_line(c, r, j);
    };
    if (*c.aborted || r.size == 0) return;  // r.size: the same on every rank that makes this call
    const int n = c.h.nranks, me = c.rank;
    const std::uint32_t f = static_cast<std::uint32_t>(k + 1), size = static_cast<std::uint32_t>(r.size);
    const index_t lines = div_up(r.size * static_cast<index_t>(sizeof(T)), 8);
    const index_t first = r.begin * static_cast<index_t>(sizeof(T)) / 8;       // ranges start on 8-byte multiples
    const index_t header = 2 * c.channel, data = 2 * (c.h.nchannels + first);  // in 8-byte words of a region
    const push_part push_region(c, k);
    const std::uint32_t call = c.call & 0x7fffffffu;
    const std::size_t stride = push_region.region / 8;                // from one peer's line to the next's
    const std::uint64_t* const received = push_region(me, 0) + data;  // peer q's line j: + q * stride + 2 * j

#pragma unroll 1
    for (index_t j = threadIdx.x; j < lines; j += blockDim.x) {
      const push_line v = own_line(j);
      const std::uint64_t lo = ll_lo(v.w[0], f), hi = ll_hi(v.w[1], f);
#pragma unroll 1
      for (int i = 1; i < n; ++i) {
        const int q = me + i < n ? me + i : me + i - n;
        ll_store<scope>(push_region(q, me) + data + 2 * j, lo, hi);
      }
    }
#pragma unroll 1
    for (int q = threadIdx.x; q < n; q += blockDim.x)
      if (q != me) ll_store<scope>(push_region(q, me) + header, ll_lo(call, f), ll_hi(size, f));

    // Thread q checks peer q's header; its first load goes out beside its first lines' loads.
    const int hq = static_cast<int>(threadIdx.x);
    std::uint64_t ha = 0, hb = 0;
    if (hq < n && hq != me) ll_load<scope>(push_region(me, hq) + header, ha, hb);
    bool header_checked = !(hq < n && hq != me);

    // Each thread reduces its lines, B peers' loaded at once, awaited and reduced in rank order,
    // into shared memory; the output is written once every header agreed.
    __shared__ std::uint64_t reduced[transport::push_max_bytes / 8];
    constexpr int B = 8;
#pragma unroll 1
    for (index_t j = threadIdx.x; j < lines && !c.block_aborted(); j += blockDim.x) {
      const push_line own = own_line(j);
      acc_t acc[epl];
#pragma unroll 1
      for (int q0 = 0; q0 < n; q0 += B) {
        std::uint64_t a[B], b[B];
        const std::uint64_t* const line = received + q0 * stride + 2 * j;
        const std::uint64_t* l = line;
#pragma unroll
        for (int i = 0; i < B; ++i, l += stride)
          if (q0 + i < n && q0 + i != me) ll_load<scope>(l, a[i], b[i]);
        if (!header_checked) {
          check_header(c, hq, k, push_region(me, hq) + header, ha, hb, size);
          header_checked = true;
        }
        // The lines not there yet are loaded again together, until all are: one round trip after
        // the last peer's store, not one per peer.
        unsigned pending = 0;
#pragma unroll
        for (int i = 0; i < B; ++i)
          if (q0 + i < n && q0 + i != me && !ll_arrived(a[i], b[i], f)) pending |= 1u << i;
        if (pending && !wait_lines(c, k, q0, pending, a, b, line, stride)) break;
#pragma unroll
        for (int i = 0; i < B; ++i) {
          const int q = q0 + i;
          if (q >= n) break;
          push_line v = own;
          if (q != me) {
            v.w[0] = static_cast<std::uint32_t>(a[i]);
            v.w[1] = static_cast<std::uint32_t>(b[i]);
          }
#pragma unroll
          for (int e = 0; e < epl; ++e) {
            const acc_t x = c.load_acc(v.t[e], true);
            acc[e] = q == 0 ? x : static_cast<acc_t>(c.op(acc[e], x));
          }
        }
        if (c.block_aborted()) break;
      }
      push_line out;
#pragma unroll
      for (int e = 0; e < epl; ++e) out.t[e] = from_accum<T>(apply_post(c.op, acc[e], n));
      reduced[j] = out.u;
    }
    if (!header_checked) check_header(c, hq, k, push_region(me, hq) + header, ha, hb, size);
#pragma unroll 1
    for (int q = hq + static_cast<int>(blockDim.x); q < n; q += blockDim.x) {
      std::uint64_t a2, b2;
      ll_load<scope>(push_region(me, q) + header, a2, b2);
      check_header(c, q, k, push_region(me, q) + header, a2, b2, size);
    }
    __syncthreads();
    if (*c.aborted) return;
    const T* res = reinterpret_cast<const T*>(reduced);
#pragma unroll 1
    for (index_t i = threadIdx.x; i < r.size; i += blockDim.x) c.out[r.begin + i] = res[i];
  }

  // The first pushed call of an epoch (collective_kernel.cuh), staged: between two barriers of the
  // channel, when no peer stores into it, this rank zeroes its whole push area.
  __device__ static void clean_push_area(State& c, char* window) {
    barrier(c);
    if (*c.aborted) return;
    uint4* area = reinterpret_cast<uint4*>(window + 4 * c.h.window_bytes);
    const std::size_t vecs = transport::push_area_bytes(c.h.nranks, c.h.nchannels) / sizeof(uint4);
    for (std::size_t i = threadIdx.x; i < vecs; i += blockDim.x) area[i] = make_uint4(0, 0, 0, 0);
    barrier(c);
  }

  // Every rank's buffer `b` for this channel, into shared memory: read once per call, not per element.
  __device__ static void load_peer_ptrs(State& c, buf_ref b) {
    __syncthreads();
    for (int r = threadIdx.x; r < c.h.nranks; r += blockDim.x) c.peer_ptrs[r] = c.peer_ptr(r, b);
    __syncthreads();
  }

  // U 16-byte vectors per thread and pass (vectors v, v + blockDim.x, ...), peers read B at a time:
  // up to U x B independent loads in flight per thread, so that a block covers the memory latency
  // with few peers as with many. The reduction stays in rank order (every rank gets bitwise
  // identical results). Returns the first vector this thread has not done: the passes stop where
  // fewer than U of its vectors are left.
  template <int U, int B>
  __device__ static index_t reduce_vectors(State& c, const T* const* ptrs, int nr, T* d, index_t v, index_t nvec,
                                           bool pre, bool fin) {
    const index_t stride = blockDim.x;
    for (; v + (U - 1) * stride < nvec; v += U * stride) {
      acc_t acc[U][vec];
      for (int r0 = 0; r0 < nr; r0 += B) {
        pack_t got[U][B];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < B; ++j)
            if (r0 + j < nr) got[u][j].u = reinterpret_cast<const uint4*>(ptrs[r0 + j])[v + u * stride];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < B; ++j)
            if (r0 + j < nr)
#pragma unroll
              for (int e = 0; e < vec; ++e) {
                const acc_t x = c.load_acc(got[u][j].t[e], pre);
                acc[u][e] = r0 + j == 0 ? x : static_cast<acc_t>(c.op(acc[u][e], x));
              }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        pack_t out;
#pragma unroll
        for (int e = 0; e < vec; ++e) out.t[e] = from_accum<T>(fin ? apply_post(c.op, acc[u][e], nr) : acc[u][e]);
        reinterpret_cast<uint4*>(d)[v + u * stride] = out.u;
      }
    }
    return v;
  }

  __device__ static void direct_reduce_copy(State& c, buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    load_peer_ptrs(c, src);
    if (*c.aborted) return;
    const int nr = c.h.nranks;
    const T* const* ptrs = reinterpret_cast<const T* const*>(c.peer_ptrs);
    T* d = c.local(dst);
    const bool pre = src.which == buffer::input;
    std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(d);
    for (int r = 0; r < nr; ++r) bits |= reinterpret_cast<std::uintptr_t>(ptrs[r]);
    index_t done = 0;
    if ((bits & 15u) == 0) {
      const index_t nvec = n / vec;
      index_t v = threadIdx.x;
      v = nr <= 4 ? reduce_vectors<4, 4>(c, ptrs, nr, d, v, nvec, pre, fin)
                  : reduce_vectors<2, 8>(c, ptrs, nr, d, v, nvec, pre, fin);
      reduce_vectors<1, 8>(c, ptrs, nr, d, v, nvec, pre, fin);
      done = nvec * vec;
    }
    constexpr int batch = 8;
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      acc_t v{};
      for (int r0 = 0; r0 < nr; r0 += batch) {
        T got[batch];
#pragma unroll
        for (int j = 0; j < batch; ++j)
          if (r0 + j < nr) got[j] = ptrs[r0 + j][i];
#pragma unroll
        for (int j = 0; j < batch; ++j)
          if (r0 + j < nr) {
            const acc_t x = c.load_acc(got[j], pre);
            v = r0 + j == 0 ? x : static_cast<acc_t>(c.op(v, x));
          }
      }
      d[i] = from_accum<T>(fin ? apply_post(c.op, v, nr) : v);
    }
    __syncthreads();
  }

  __device__ static void direct_copy(State& c, int from, buf_ref src, buf_ref dst, index_t n) {
    if (n == 0) return;
    __syncthreads();
    if (*c.aborted) return;
    const T* s = c.peer_ptr(from, src);
    T* d = c.local(dst);
    const bool pre = src.which == buffer::input;
    index_t done = 0;
    if (((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 15u) == 0) {
      const index_t nvec = n / vec;
      const index_t stride = blockDim.x;
      // Two vectors per thread in flight (loaded before either is stored), then one at a time: on
      // an H100, 2 moved direct all_gather at 88-97 % of the copy bandwidth from 16 MiB (8 ranks),
      // against 75-86 % with 1 or 4 (bench/RESULTS.md).
      constexpr int U = 2;
      index_t v = threadIdx.x;
      auto convert = [&](pack_t& p) {
        if constexpr (op_has_pre<typename State::op_type>)
          if (pre)
            for (int e = 0; e < vec; ++e) p.t[e] = from_accum<T>(c.load_acc(p.t[e], true));
      };
      for (; v + (U - 1) * stride < nvec; v += U * stride) {
        pack_t tmp[U];
#pragma unroll
        for (int u = 0; u < U; ++u) tmp[u].u = reinterpret_cast<const uint4*>(s)[v + u * stride];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          convert(tmp[u]);
          reinterpret_cast<uint4*>(d)[v + u * stride] = tmp[u].u;
        }
      }
      for (; v < nvec; v += stride) {
        pack_t tmp;
        tmp.u = reinterpret_cast<const uint4*>(s)[v];
        convert(tmp);
        reinterpret_cast<uint4*>(d)[v] = tmp.u;
      }
      done = nvec * vec;
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) d[i] = from_accum<T>(c.load_acc(s[i], pre));
    __syncthreads();
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
