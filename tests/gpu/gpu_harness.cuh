// tests/gpu/gpu_harness.cuh — runs one collective on the GPU executor among N ranks (threads of
// this process, one stream each, all on GPU 0) and checks every output element.
//
// Inputs are small integers chosen per type and op so that every partial result of every
// reduction order is exact in the element type (the nccl-tests idea): then the reference, the
// same op applied on the host in rank order, must match bit for bit, and any lost, doubled or
// misplaced contribution shows. Outputs are poisoned first; outputs that are not significant on
// a rank must keep their poison.
#pragma once

#include <collcomm/collectives.hpp>
#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>
#include <common/matrix.hpp>
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <barrier>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace collcomm_gpu_test {
using namespace collcomm;
using namespace collcomm_test;

// Where the input sits inside the output buffer for an in-place call (elements), or -1.
template <class K>
long in_place_offset(const case_config& c, int rank) {
  if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::broadcast> || std::is_same_v<K, kind::reduce>) return 0;
  else if constexpr (std::is_same_v<K, kind::all_gather>) return static_cast<long>(rank * c.count);
  else if constexpr (std::is_same_v<K, kind::gather>) return rank == c.root ? static_cast<long>(rank * c.count) : -1;
  else return -1;
}

#define GPU_CHECK(x) REQUIRE_EQ((x), cudaSuccess)

// Runs the case; returns the first mismatch as text ("" when every element is right).
// use_graph: every rank's call is captured into ONE graph (the ranks' streams forked from one
// capturing stream, as ranks that share a GPU need), replayed 3 times (once in place).
// repeat: out of place, each rank queues the call `repeat` times back to back, no host barrier.
// Tuning: the kernel's (kernels::tuning<Threads, Protocol>), e.g. the ll protocol.
template <class K, class Algo, class T, class Tuning = kernels::tuning<>, class Op>
std::string run_case(gpu::world& w, const case_config& c, const Op& op, bool use_graph = false, int repeat = 1) {
  const int n = c.nranks;
  coll_args base{};
  base.nranks = n;
  base.count = c.count;
  base.root = c.root;
  const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
  std::mt19937_64 g(fresh_seed() ^ (c.count * 7919u) ^ static_cast<unsigned>(n));
  std::vector<std::vector<T>> x(n, std::vector<T>(in_n));
  for (int s = 0; s < n; ++s)
    for (index_t i = 0; i < in_n; ++i) x[s][i] = random_value<T, Op>(g, n, s, i);
  const auto expect = reference<K>(x, c, op);

  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  // Ranks spin-wait for each other inside their kernels, and cudaMalloc, cudaMemset, cudaFree and
  // graph instantiation may wait for every kernel on the device: so no rank may call them while a
  // peer's kernel runs. Every rank prepares, all launch, all synchronize, then all clean up.
  std::barrier sync_point(n);
  cudaStream_t origin = nullptr;  // the capture's stream (rank 0's thread)
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins(n, nullptr);
  cudaGraphExec_t exec = nullptr;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        cudaSetDevice(w.device_of(r));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        // reduce_scatter in place: the output is block `rank` of the input.
        const bool rs_in_place = c.in_place && std::is_same_v<K, kind::reduce_scatter>;
        const long ip = c.in_place ? in_place_offset<K>(c, r) : -1;
        const index_t out_alloc = rs_in_place ? in_n : out_n;
        T *d_in = nullptr, *d_out = nullptr;
        cudaMalloc(&d_out, (out_alloc + 1) * sizeof(T));
        cudaMemset(d_out, 0xA5, (out_alloc + 1) * sizeof(T));  // poison
        T* out_ptr = d_out;
        if (rs_in_place) {
          d_in = d_out;
          out_ptr = d_out + r * c.count;
          cudaMemcpy(d_in, x[r].data(), in_n * sizeof(T), cudaMemcpyHostToDevice);
        } else if (ip >= 0) {
          d_in = d_out + ip;
          cudaMemcpy(d_in, x[r].data(), in_n * sizeof(T), cudaMemcpyHostToDevice);
        } else {
          cudaMalloc(&d_in, (in_n + 1) * sizeof(T));
          cudaMemcpy(d_in, x[r].data(), in_n * sizeof(T), cudaMemcpyHostToDevice);
        }
        coll_args a = base;
        a.rank = r;
        if constexpr (std::is_same_v<K, kind::send_recv>) {
          a.send_peer = mod(r + 1, n);
          a.recv_peer = mod(r - 1, n);
        }
        std::string launch_error;
        auto launch = [&] {
          try {
            gpu::launch<K, Algo, Tuning>(w, r, a, d_in, out_ptr, op, s);
          } catch (const std::exception& ex) {
            launch_error = ex.what();
          }
        };
        gpu::preload<K, Algo, T, Op, Tuning>();
        cudaEventCreateWithFlags(&joins[r], cudaEventDisableTiming);
        if (r == 0 && use_graph) {
          cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking);
          cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
        }
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();  // every rank's setup is done before anyone captures
        cudaGraph_t graph = nullptr;
        if (use_graph) {
          if (r == 0) {
            cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed);
            cudaEventRecord(fork, origin);
          }
          sync_point.arrive_and_wait();
          cudaStreamWaitEvent(s, fork, 0);  // this rank's stream joins the capture
          launch();
          cudaEventRecord(joins[r], s);
          sync_point.arrive_and_wait();
          if (r == 0) {
            for (int q = 0; q < n; ++q) cudaStreamWaitEvent(origin, joins[q], 0);
            const cudaError_t ce = cudaStreamEndCapture(origin, &graph);
            if (ce != cudaSuccess && launch_error.empty()) launch_error = std::string("capture: ") + cudaGetErrorString(ce);
            if (graph && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess && launch_error.empty()) launch_error = "cudaGraphInstantiate failed";
            if (exec) cudaGraphUpload(exec, origin);
            cudaStreamSynchronize(origin);
          }
        }
        // A device-wide synchronize would invalidate a capture still in progress.
        sync_point.arrive_and_wait();
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        if (use_graph) {
          // Replays: the inputs are unchanged unless in place, so replay several times out of place.
          if (r == 0 && exec)
            for (int i = 0; i < (c.in_place ? 1 : 3); ++i) cudaGraphLaunch(exec, origin);
          if (r == 0) cudaStreamSynchronize(origin);
        } else {
          for (int i = 0; i < (c.in_place ? 1 : repeat); ++i) launch();
        }
        const cudaError_t e = cudaStreamSynchronize(s);
        sync_point.arrive_and_wait();
        if (graph) cudaGraphDestroy(graph);
        if (r == 0 && exec) cudaGraphExecDestroy(exec);
        cudaEventDestroy(joins[r]);
        if (!launch_error.empty()) { errors[r] = launch_error; return; }
        if (e != cudaSuccess) { errors[r] = std::string("CUDA: ") + cudaGetErrorString(e); return; }
        gpu::check_stall(w, r);
        std::vector<T> got(out_alloc + 1);
        cudaMemcpy(got.data(), d_out, (out_alloc + 1) * sizeof(T), cudaMemcpyDeviceToHost);
        T poison;
        std::memset(&poison, 0xA5, sizeof(T));
        const index_t base_off = rs_in_place ? r * c.count : 0;
        std::ostringstream msg;
        if (expect[r]) {
          const auto& ex = *expect[r];
          for (index_t i = 0; i < ex.size(); ++i)
            if (!same_bits(got[base_off + i], ex[i])) {
              msg << "rank " << r << " element " << i << ": got " << show(got[base_off + i]) << " expected " << show(ex[i]);
              break;
            }
        } else if (ip < 0) {
          for (index_t i = 0; i < out_n; ++i)
            if (!same_bits(got[i], poison)) { msg << "rank " << r << " non-significant output element " << i << " was written"; break; }
        }
        if (!same_bits(got[out_alloc], poison)) msg << "rank " << r << " wrote past the end of its output";
        errors[r] = msg.str();
        if (d_in != d_out && !rs_in_place && ip < 0) cudaFree(d_in);
        cudaFree(d_out);
        cudaStreamDestroy(s);
        if (r == 0 && origin) {
          cudaStreamDestroy(origin);
          cudaEventDestroy(fork);
        }
      } catch (const std::exception& ex) {
        errors[r] = ex.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors) if (!e.empty()) return e;
  return {};
}

}  // namespace collcomm_gpu_test
