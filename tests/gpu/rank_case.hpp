// tests/gpu/rank_case.hpp — one rank's side of a collective case on GPU buffers, for tests whose
// ranks are processes or threads each with its own communicator and bootstrap: the calls of every
// kind on a stream, and run_case (fresh random inputs from a seed every rank shares, outputs
// poisoned, every element checked against tests/common/exact_reference.hpp).
#pragma once

#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>
#include <gpu/check_outputs.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#define CK(x)                                                                                       \
  do {                                                                                              \
    const cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x ": ") + cudaGetErrorString(e_)); \
  } while (0)

namespace collcomm_gpu_test {

// The seed of the next case: splitmix64 of the previous seed + 1, so that every case of a run
// draws its own inputs and the run replays from its first seed.
inline std::uint64_t next_seed(std::uint64_t s) {
  std::uint64_t x = s + 1 + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class K, class A, class T, class Op, class Comm>
void call(Comm& comm, const T* in, T* out, index_t count, int root, Op op, cudaStream_t s) {
  if constexpr (std::is_same_v<K, kind::all_reduce>)
    all_reduce<A>(comm, in, out, count, op, s);
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>)
    reduce_scatter<A>(comm, in, out, count, op, s);
  else if constexpr (std::is_same_v<K, kind::all_gather>)
    all_gather<A>(comm, in, out, count, s);
  else if constexpr (std::is_same_v<K, kind::broadcast>)
    broadcast<A>(comm, in, out, count, root, s);
  else if constexpr (std::is_same_v<K, kind::reduce>)
    reduce<A>(comm, in, out, count, op, root, s);
  else if constexpr (std::is_same_v<K, kind::all_to_all>)
    all_to_all<A>(comm, in, out, count, s);
  else
    static_assert(sizeof(K) == 0, "kind not covered by call");
}

// One case on this rank: `queued` calls back to back on the stream (each its own buffers),
// then every output element checked. Returns "" or the first mismatch. Buffers are allocated and
// freed only while no peer's kernel runs (bootstrap barriers around the launches).
// replays > 0: the calls are captured into a CUDA graph instead, which is then launched `replays`
// times, each after the outputs are poisoned and the inputs written again, and checked each time.
template <class K, class A, class T, class Op, class Comm, class Boot>
std::string run_case(Comm& comm, Boot& boot, cudaStream_t s, index_t count, bool in_place, int root,
                     int queued, std::uint64_t seed, int replays = 0) {
  const int n = comm.size(), me = comm.rank();
  coll_args base{};
  base.nranks = n;
  base.count = count;
  base.root = root;
  const index_t in_n = input_elems<K>(base);
  const Op op{};
  const case_config c{n, count, root, in_place};
  std::vector<std::vector<std::vector<T>>> x(static_cast<std::size_t>(queued));
  std::vector<std::vector<std::optional<std::vector<T>>>> expect;
  for (int q = 0; q < queued; ++q) {
    std::mt19937_64 g(seed ^ (static_cast<std::uint64_t>(q) * 0x9e3779b97f4a7c15ull));
    x[q].assign(static_cast<std::size_t>(n), std::vector<T>(in_n));
    for (int r = 0; r < n; ++r)
      for (index_t i = 0; i < in_n; ++i) x[q][r][i] = random_value<T, Op>(g, n, r, i);
    expect.push_back(reference<K>(x[q], c, op));
  }
  std::vector<call_buffers<T>> bufs;  // freed on return, after the last barrier
  for (int q = 0; q < queued; ++q) bufs.emplace_back(layout_of<K>(c, me));
  auto prepare = [&] {  // poisoned outputs, then the inputs (in place: inside the outputs)
    for (int q = 0; q < queued; ++q) {
      bufs[q].prepare(x[q][me]);
      if (!bufs[q].error().empty()) throw std::runtime_error("call " + std::to_string(q) + ": " + bufs[q].error());
    }
    CK(cudaDeviceSynchronize());
  };
  auto enqueue = [&] {
    for (int q = 0; q < queued; ++q) call<K, A>(comm, bufs[q].input(), bufs[q].output(), count, root, op, s);
  };
  std::string err;
  cudaGraphExec_t exec = nullptr;
  if (replays > 0) {
    try {
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      enqueue();
      cudaGraph_t graph = nullptr;
      CK(cudaStreamEndCapture(s, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      cudaGraphDestroy(graph);
    } catch (const std::exception& e) {
      err = std::string("capture: ") + e.what();
    }
  }
  for (int round = 0; round < std::max(replays, 1) && err.empty(); ++round) {
    prepare();
    boot.barrier();
    try {
      if (exec)
        CK(cudaGraphLaunch(exec, s));
      else
        enqueue();
    } catch (const std::exception& e) {
      err = std::string("launch: ") + e.what();
    }
    const cudaError_t se = cudaStreamSynchronize(s);
    if (se != cudaSuccess && err.empty()) err = std::string("CUDA: ") + cudaGetErrorString(se);
    if (err.empty()) {
      try {
        comm.check();
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    boot.barrier();
    for (int q = 0; q < queued && err.empty(); ++q) err = bufs[q].check(expect[q][me], "call " + std::to_string(q));
    if (!err.empty() && exec) err = "replay " + std::to_string(round) + ": " + err;
  }
  if (exec) cudaGraphExecDestroy(exec);
  return err;
}

}  // namespace collcomm_gpu_test
