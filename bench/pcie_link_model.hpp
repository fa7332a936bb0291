// bench/pcie_link_model.hpp — what transport::pcie's staged path moves over PCIe, and the pinned
// copy bandwidth it is compared with (collcomm_bench_mp -T pcie for processes, collcomm_bench_pcie
// for ranks of one process).
//
// Every staged message crosses the GPU's PCIe link twice: the sender's kernel writes it into a
// host slot (device -> host) and the receiver's kernel reads it from there (host -> device). The
// link is full duplex, so each direction is its own limit. link_bytes() runs a schedule over a
// primitives object that only counts the slot elements written (up) and read (down) by every rank
// on every channel in one call; up/time and down/time are the bytes that crossed the link each
// way per second (all ranks on one GPU share its one link), shown as a fraction of the pinned
// cudaMemcpyAsync device->host and host->device bandwidths measured in the same run.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/types.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace collcomm_bench {

// Slot elements written into and read from host memory by one rank's schedule on one channel.
struct link_counter {
  collcomm::index_t slot, align;
  std::uint64_t up = 0, down = 0;  // elements: written to host slots, read from host slots
  COLLCOMM_HD collcomm::index_t slot_elems() const { return slot; }
  COLLCOMM_HD collcomm::index_t align_elems() const { return align; }
  COLLCOMM_HD void add(int from, int to, collcomm::index_t n) {
    down += static_cast<std::uint64_t>(from) * n;
    up += static_cast<std::uint64_t>(to) * n;
  }
  using peers = collcomm::peers;
  using buf_ref = collcomm::buf_ref;
  using index_t = collcomm::index_t;
  COLLCOMM_HD void send(peers to, buf_ref, index_t n) { add(0, to.size, n); }
  COLLCOMM_HD void recv(peers from, buf_ref, index_t n) { add(from.size, 0, n); }
  COLLCOMM_HD void recv_reduce_send(peers from, buf_ref, peers to, index_t n) { add(from.size, to.size, n); }
  COLLCOMM_HD void recv_reduce_copy(peers from, buf_ref, buf_ref, index_t n, bool) { add(from.size, 0, n); }
  COLLCOMM_HD void recv_reduce_copy_send(peers from, buf_ref, buf_ref, peers to, index_t n, bool) {
    add(from.size, to.size, n);
  }
  COLLCOMM_HD void recv_copy_send(peers from, buf_ref, peers to, index_t n) { add(from.size, to.size, n); }
  COLLCOMM_HD void copy_send(buf_ref, buf_ref, peers to, index_t n, bool = false) { add(0, to.size, n); }
  COLLCOMM_HD void copy(buf_ref, buf_ref, index_t, bool = false) {}
  COLLCOMM_HD void barrier() {}
  COLLCOMM_HD void direct_reduce_copy(buf_ref, buf_ref, index_t, bool) {}
  COLLCOMM_HD void direct_copy(int, buf_ref, buf_ref, index_t) {}
};

// Bytes of one call, all ranks and channels: up (device -> host), down (host -> device).
template <class K, class Algo>
void link_bytes(collcomm::coll_args base, int nchannels, collcomm::index_t slot, collcomm::index_t align,
                std::size_t elem, double& up, double& down) {
  std::uint64_t u = 0, d = 0;
  for (int r = 0; r < base.nranks; ++r)
    for (int c = 0; c < nchannels; ++c) {
      collcomm::coll_args a = base;
      a.rank = r;
      a.channel = c;
      a.nchannels = nchannels;
      link_counter t{slot, align};
      Algo::run(K{}, t, a);
      u += t.up;
      d += t.down;
    }
  up = static_cast<double>(u) * elem;
  down = static_cast<double>(d) * elem;
}

namespace link_detail {
inline void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "pinned copy bandwidth: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace link_detail

// Pinned copy bandwidth on the current device, bytes / s of each direction, 256 MiB copies
// (3 warm-ups, median of 9): host->device alone, device->host alone, and each way while both run
// at once (a staged collective uses both).
struct pinned_bandwidth {
  double h2d = 0, d2h = 0, both = 0;
};
inline pinned_bandwidth measure_pinned_bandwidth() {
  using link_detail::ok;
  const std::size_t bytes = std::size_t{256} << 20;
  void *h[2] = {}, *d[2] = {};
  cudaStream_t s[2];
  for (int k = 0; k < 2; ++k) {
    ok(cudaHostAlloc(&h[k], bytes, cudaHostAllocDefault), "cudaHostAlloc");
    ok(cudaMalloc(&d[k], bytes), "cudaMalloc");
    std::memset(h[k], 1, bytes);
    ok(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  cudaEvent_t a, b, joined;
  ok(cudaEventCreate(&a), "cudaEventCreate");
  ok(cudaEventCreate(&b), "cudaEventCreate");
  ok(cudaEventCreate(&joined), "cudaEventCreate");
  // mode 0: h2d alone, 1: d2h alone, 2: both at once (s[1] joins s[0]'s timing).
  auto time_mode = [&](int mode) {
    std::vector<double> t;
    for (int i = 0; i < 12; ++i) {
      ok(cudaEventRecord(a, s[0]), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s[1], a, 0), "cudaStreamWaitEvent");
      if (mode != 1) ok(cudaMemcpyAsync(d[0], h[0], bytes, cudaMemcpyHostToDevice, s[0]), "cudaMemcpyAsync h2d");
      if (mode != 0) ok(cudaMemcpyAsync(h[1], d[1], bytes, cudaMemcpyDeviceToHost, s[1]), "cudaMemcpyAsync d2h");
      ok(cudaEventRecord(joined, s[1]), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s[0], joined, 0), "cudaStreamWaitEvent");
      ok(cudaEventRecord(b, s[0]), "cudaEventRecord");
      ok(cudaEventSynchronize(b), "cudaEventSynchronize");
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
      if (i >= 3) t.push_back(ms * 1e-3);
    }
    return bytes / link_detail::median(t);
  };
  pinned_bandwidth bw;
  bw.h2d = time_mode(0);
  bw.d2h = time_mode(1);
  bw.both = time_mode(2);
  for (cudaEvent_t e : {a, b, joined}) cudaEventDestroy(e);
  for (int k = 0; k < 2; ++k) {
    cudaStreamDestroy(s[k]);
    cudaFree(d[k]);
    cudaFreeHost(h[k]);
  }
  return bw;
}

}  // namespace collcomm_bench
