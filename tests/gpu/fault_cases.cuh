// tests/gpu/fault_cases.cuh — the GPU fault cases, written once for every protocol, transport and
// call path (tests/gpu/test_gpu_fault.cu instantiates them; label gpu;fault):
//
//   rank_never_joins   rank 0 of 2 calls all_reduce and rank 1 never does: rank 0's call fails
//                      with errc::timeout naming rank 1 within the timeout (well under 3 s), a later
//                      call on that world is refused at once (errc::aborted), and a fresh world of
//                      the same placement then runs a collective correctly;
//   ranks_disagree     N = 2 and 4 ranks call all_reduce, rank 1 with another count: ranks of one
//                      GPU launch a call together, so every rank's call is refused before the
//                      launch, naming rank 1's call and the count, at once; then a fresh world
//                      works. (Ranks that launch alone — processes, tests/gpu/mp — are checked in
//                      the kernels: every FIFO message carries its call's fingerprint.)
//
// A case is parameterized on its call path (gpu_harness.cuh): fault_path<Tr, Protocol, Api> is
// all_reduce ring over transport Tr with tuning<Protocol>, through gpu::launch (Api = false) or
// through communicator<Tr> (Api = true). The world's connections are where Tr puts them.
#pragma once

#include "gpu_harness.cuh"

#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace collcomm_gpu_test {

template <class Tr, class Protocol, bool Api>
using fault_path = std::conditional_t<Api, via_api<kind::all_reduce, algo::ring, Tr, tuning<Protocol>>,
                                      via_launch<kind::all_reduce, algo::ring, tuning<Protocol>, Tr>>;

// The options of a world for transport Tr (its placement), the given timeout (0: the default).
template <class Tr>
gpu::options fault_options(std::chrono::milliseconds timeout = {}) {
  gpu::options o;
  o.connections = gpu::transport_traits<Tr>::connections;
  if (timeout.count() > 0) o.timeout = timeout;
  return o;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// After a fault: a fresh world of n ranks, made with `o`, runs all_reduce correctly on path Via.
template <class Via>
void check_fresh_world(int n, const gpu::options& o) {
  gpu::world w(n, {}, o);
  INFO("a fresh world of ", n, " ranks after the fault, seed=", fresh_seed());
  CHECK_EQ((run_case_via<Via, float>(w, case_config{n, 1000, 0, false}, op::sum{})), "");
}

// Rank 0 of 2 calls all_reduce of `count` floats (in place or not); rank 1 never calls.
template <class Tr, class Protocol, bool Api>
void rank_never_joins(std::chrono::milliseconds timeout, index_t count, bool in_place) {
  using Via = fault_path<Tr, Protocol, Api>;
  {
    gpu::world w(2, {}, fault_options<Tr>(timeout));
    float *d_in = nullptr, *d_out = nullptr;
    GPU_CHECK(cudaMalloc(&d_out, count * sizeof(float)));
    if (in_place)
      d_in = d_out;
    else
      GPU_CHECK(cudaMalloc(&d_in, count * sizeof(float)));
    coll_args a{};
    a.rank = 0;
    a.nranks = 2;
    a.count = count;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      Via::call(w, 0, a, d_in, d_out, op::sum{}, nullptr);  // rank 1 never calls
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::timeout);
      CHECK_EQ(e.rank(), 0);
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("rank(s) 1") != std::string::npos);
    }
    CHECK(seconds_since(t0) < 3.0);
    // The world is failed: a later call is refused at once.
    try {
      Via::call(w, 0, a, d_in, d_out, op::sum{}, nullptr);
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::aborted);
    }
    GPU_CHECK(cudaDeviceSynchronize());
    if (!in_place) cudaFree(d_in);
    cudaFree(d_out);
  }
  // The process stays usable.
  check_fresh_world<Via>(2, fault_options<Tr>());
}

// N = 2 and 4 ranks, one channel of 4 KiB slots; rank 1 calls all_reduce with 3000 elements, the
// others with 5000: refused on every rank before the launch (ranks of one GPU launch together).
template <class Tr, class Protocol, bool Api>
void ranks_disagree_on_count() {
  using Via = fault_path<Tr, Protocol, Api>;
  gpu::options o = fault_options<Tr>(std::chrono::milliseconds(300));
  o.channels = 1;
  o.slot_bytes = 4096;
  for (int n : {2, 4}) {
    gpu::world w(n, {}, o);
    std::vector<std::string> errors(n);
    std::vector<double> secs(n);
    std::vector<std::thread> threads;
    std::barrier sync_point(n);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        float *d_in = nullptr, *d_out = nullptr;
        cudaMalloc(&d_in, 5000 * sizeof(float));
        cudaMalloc(&d_out, 5000 * sizeof(float));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        coll_args a{};
        a.rank = r;
        a.nranks = n;
        a.count = r == 1 ? 3000 : 5000;
        Via::template preload<float, op::sum>();
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        try {
          Via::call(w, r, a, d_in, d_out, op::sum{}, s);
          cudaStreamSynchronize(s);
          secs[r] = seconds_since(t0);
          gpu::check_stall(w, r);  // what communicator<Tr>::check() does
        } catch (const error& e) {
          errors[r] = e.what();
        }
        sync_point.arrive_and_wait();
        cudaFree(d_in);
        cudaFree(d_out);
        cudaStreamDestroy(s);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      INFO("n=", n, " rank ", r, ": ", errors[r]);
      CHECK(!errors[r].empty());
      CHECK(errors[r].find("disagree on the count") != std::string::npos);
      CHECK(errors[r].find("rank 1's all_reduce") != std::string::npos);
      CHECK(secs[r] < 3.0);
    }
  }
  check_fresh_world<Via>(3, fault_options<Tr>());
}

}  // namespace collcomm_gpu_test
