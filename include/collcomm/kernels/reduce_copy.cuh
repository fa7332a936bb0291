// collcomm/kernels/reduce_copy.cuh — the block's elementwise data path: reduce any number of
// received buffers and one source in the accumulation type, apply the op's final step, and store
// the result to a destination and to any number of send slots. 16-byte vectors where every
// pointer allows (each thread keeps `unroll` vectors in flight, so that a block's loads cover the
// memory latency), scalars for the rest.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/types.hpp>

#include <cstdint>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// T as 16-byte vectors: `vec` elements per uint4.
template <class T>
struct vector16 {
  static constexpr int vec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
  union pack_t {
    uint4 u;
    T t[vec];
    __device__ pack_t() {}
  };
};

template <class T, class Op>
struct reduce_copy {
  using acc_t = accum_t<T>;
  static constexpr int vec = vector16<T>::vec;
  using pack_t = typename vector16<T>::pack_t;

  __device__ static acc_t load_acc(const Op& op, T x, bool pre) {
    acc_t a = to_accum(x);
    return pre ? apply_pre(op, a) : a;
  }

  // One 16-byte vector: the received values, then the source, reduced in the accumulation type.
  __device__ static void reduce_vec(const Op& op, int nranks, const pack_t* rv, int nr, const pack_t* sv, bool pre,
                                    bool fin, pack_t& outv) {
    acc_t acc[vec];
#pragma unroll
    for (int k = 0; k < peers::max_peers; ++k)
      if (k < nr)
        for (int e = 0; e < vec; ++e)
          acc[e] = k == 0 ? to_accum(rv[k].t[e]) : static_cast<acc_t>(op(acc[e], to_accum(rv[k].t[e])));
    if (sv)
      for (int e = 0; e < vec; ++e) {
        const acc_t x = load_acc(op, sv->t[e], pre);
        acc[e] = nr == 0 ? x : static_cast<acc_t>(op(acc[e], x));
      }
    for (int e = 0; e < vec; ++e) outv.t[e] = from_accum<T>(fin ? apply_post(op, acc[e], nranks) : acc[e]);
  }

  // n elements: value = (op over rsrc[0..nr)) op load(s) (pre applied to s's elements if `pre`),
  // the op's post step if `fin`, stored to d (if not null) and to sdst[0..ns).
  __device__ static void run(const Op& op, int nranks, const T* const* rsrc, int nr, const T* s, bool pre, T* d,
                             T* const* sdst, int ns, index_t n, bool fin) {
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
        for (int u = 0; u < unroll; ++u) reduce_vec(op, nranks, rv[u], nr, s ? &sv[u] : nullptr, pre, fin, outv[u]);
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
        reduce_vec(op, nranks, rv, nr, s ? &sv : nullptr, pre, fin, outv);
        if (d) reinterpret_cast<uint4*>(d)[v] = outv.u;
        for (int k = 0; k < ns; ++k) reinterpret_cast<uint4*>(sdst[k])[v] = outv.u;
      }
      done = nvec * vec;
    }
    for (index_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      acc_t acc{};
      for (int k = 0; k < nr; ++k)
        acc = k == 0 ? to_accum(rsrc[k][i]) : static_cast<acc_t>(op(acc, to_accum(rsrc[k][i])));
      if (s) {
        const acc_t x = load_acc(op, s[i], pre);
        acc = nr == 0 ? x : static_cast<acc_t>(op(acc, x));
      }
      const T y = from_accum<T>(fin ? apply_post(op, acc, nranks) : acc);
      if (d) d[i] = y;
      for (int k = 0; k < ns; ++k) sdst[k][i] = y;
    }
  }
};

}  // namespace kernels
COLLCOMM_NAMESPACE_END
