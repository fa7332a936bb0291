// collcomm/kernels/collective_kernel.cuh — the one __global__ entry of the GPU executor.
//
// collective_kernel<K, Algo, T, Op, Tuning> runs schedule Algo::run(K{}, ...) for one rank: block
// b is channel b. Launch bounds come from the tuning value, so equal tunings share one kernel.
// Kernels have hidden visibility and live in collcomm's versioned inline namespace.
#pragma once

#include <collcomm/kernels/block_primitives.cuh>
#include <collcomm/kinds.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace kernels {

// The GPU executor's knobs that change the generated code, as a type holding values (nvcc's
// kernel stubs do not take class-type template arguments): equal knobs are one type, so they
// share one kernel. Threads per channel (block): 512 moves 8 KiB per pass with 16-byte vectors.
template <int Threads = 512>
struct tuning {
  static constexpr int threads = Threads;
};

template <class T, class Op>
struct kernel_params {
  transport::nvlink_device_handle h;
  coll_args args;  // channel and nchannels are filled in from the grid
  const T* in;
  T* out;
  Op op;
};

// Dynamic shared memory a launch needs: the send and receive counts of each peer.
constexpr std::size_t kernel_smem_bytes(int nranks) { return 2 * sizeof(std::uint64_t) * static_cast<std::size_t>(nranks); }

template <class K, class Algo, class T, class Op, class Tuning>
COLLCOMM_KERNEL void __launch_bounds__(Tuning::threads) collective_kernel(const kernel_params<T, Op> p) {
  extern __shared__ std::uint64_t smem_steps[];  // (send | recv, peer)
  __shared__ int aborted;
  const int channel = static_cast<int>(blockIdx.x);
  const int n = p.h.nranks;
  std::uint64_t* global_steps = p.h.rank_steps(p.args.rank, channel);  // (peer, {send, recv})
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    smem_steps[i] = global_steps[2 * i];
    smem_steps[n + i] = global_steps[2 * i + 1];
  }
  if (threadIdx.x == 0) aborted = 0;

  block_primitives<T, Op> prims(p.h, p.in, p.out, p.op, p.args.rank, channel, smem_steps, smem_steps + n, &aborted);
  prims.publish_buffers();
  __syncthreads();

  coll_args a = p.args;
  a.channel = channel;
  a.nchannels = static_cast<int>(gridDim.x);
  Algo::run(K{}, prims, a);

  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    global_steps[2 * i] = smem_steps[i];
    global_steps[2 * i + 1] = smem_steps[n + i];
  }
}

}  // namespace kernels
COLLCOMM_NAMESPACE_END
