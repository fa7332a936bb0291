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
  // lines, reduces them in rank order (its own input for itself), and writes its output only once
  // every header agreed — a failed call leaves the output untouched.
  //
  // Two parts suffice: a rank stores into part k & 1 of a peer's area again at call k + 2, after it
  // has ended call k + 1, which takes every peer's lines or passes a barrier every peer reaches
  // only in a kernel after its reads of call k. A line never shows its reader a stale f: a line
  // left unwritten since call k - 2^32 is the one hazard, so the first pushed call of each 2^32
  // calls (an epoch: (k + 1) >> 32) is staged instead and zeroes every push area between two
  // barriers (clean_push_area): a line then carries flags of its epoch's calls only, each once.
  // The common path is kernels/pushed_call.cuh's; what follows serves the staged first call.

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
