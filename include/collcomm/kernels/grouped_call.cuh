// collcomm/kernels/grouped_call.cuh — a small one-shot all_reduce of a launch that carries every
// rank of the world (ranks as threads sharing one GPU, launch_mode::grouped), in registers.
//
// Such a launch starts only after every rank's input is ready and no rank's stream goes on before
// the whole launch ends (gpu/launch.hpp), so the call needs no barrier, no published buffers and no
// shared memory: block (x, y) reduces channel x's range of every rank's input, in rank order, into
// rank y's output. A call whose channel range fits one 16-byte vector per thread goes here, its
// loads (the ranks' input pointers, then their vectors, with the world's abort word) issued
// together; larger or misaligned calls take the schedule (algo/one_shot.hpp).
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/kernels/channel.cuh>
#include <collcomm/kernels/scoped_wait.cuh>
#include <collcomm/ops.hpp>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// Element types a vector holds whole.
template <class T>
inline constexpr bool grouped_call_type = sizeof(T) <= 16 && 16 % sizeof(T) == 0;

// The call of block (blockIdx.x, blockIdx.y) — channel x of the launch's rank y — done, or false
// (on every thread of the block alike) for the schedule to take it: a launch that does not carry
// every rank, a channel range of more than one vector per thread, or a buffer not 16-byte aligned.
// The launch's blocks do not wait for each other either way, so blocks of ranks whose outputs are
// aligned differently may go different ways. Channel ranges are cut on `align` elements as the
// schedule's are.
template <class T, class Op, class Params>
__device__ bool grouped_one_shot(const Params& p, std::uint32_t align) {
  static_assert(grouped_call_type<T>);
  using acc_t = accum_t<T>;
  constexpr int vec = static_cast<int>(16 / sizeof(T));  // elements per vector
  union pack_t {
    uint4 u;
    T t[vec];
    __device__ pack_t() {}
  };
  const int n = p.h.nranks;
  if (p.nlocal != n) return false;
  const rank_params<T, Op>& mine = p.rank[blockIdx.y];
  const std::uint32_t t = threadIdx.x, nt = blockDim.x, nc = gridDim.x, channel = blockIdx.x;
  if (mine.args.count > static_cast<index_t>(nc) * nt * vec || align * sizeof(T) % 16 != 0) return false;
  // The channel's range: channel_range's cut, in 32 bits (the count is at most nc x nt x vec).
  const std::uint32_t count = static_cast<std::uint32_t>(mine.args.count);
  const std::uint32_t per = ((nc == 1 ? count : (count + nc - 1) / nc) + align - 1) / align * align;
  if (per > nt * vec) return false;
  const std::uint32_t begin = min(per * channel, count);
  const std::uint32_t size = min(begin + per, count) - begin;
  // Every rank's input and this rank's output, 16-byte aligned at the range (the ranges start on
  // multiples of `align` elements, a multiple of 16 bytes); a rank past the last stands for rank 0,
  // so that each eight pointers load at once.
  auto input_of = [&](int q) { return p.rank[q < n ? q : 0].in; };
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(mine.out);
#pragma unroll 1
  for (int q0 = 0; q0 < n; q0 += 8)
#pragma unroll
    for (int u = 0; u < 8; ++u) bits |= reinterpret_cast<std::uintptr_t>(input_of(q0 + u));
  if (bits & 15u) return false;

  const std::uint32_t e0 = t * vec;  // this thread's vector: elements e0 .. e0 + vec of the range
  if (e0 >= size) return true;
  const bool whole = e0 + vec <= size;
  // A world that failed stays failed: the output is left as it was.
  const bool failed = world_aborted(p.h.entry_abort);
  acc_t acc[vec];
#pragma unroll 1
  for (int q0 = 0; q0 < n; q0 += 8) {
    pack_t v[8];
    if (whole) {
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u].u = *reinterpret_cast<const uint4*>(input_of(q0 + u) + begin + e0);
    } else {
#pragma unroll
      for (int u = 0; u < 8; ++u)
#pragma unroll
        for (int e = 0; e < vec; ++e) v[u].t[e] = e0 + e < size ? input_of(q0 + u)[begin + e0 + e] : T{};
    }
    fold_eight_ranks(acc, v, q0, n, mine.op);
  }
  if (failed) return true;
  T* const dst = mine.out + begin + e0;
  pack_t r;
#pragma unroll
  for (int e = 0; e < vec; ++e) r.t[e] = from_accum<T>(apply_post(mine.op, acc[e], n));
  if (whole) {
    *reinterpret_cast<uint4*>(dst) = r.u;
  } else {
#pragma unroll
    for (int e = 0; e < vec; ++e)
      if (e0 + e < size) dst[e] = r.t[e];
  }
  return true;
}

}  // namespace kernels
COLLCOMM_NAMESPACE_END
