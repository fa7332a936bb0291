// collcomm/gpu/capture.hpp — what a program with several ranks on one GPU needs beyond the
// collectives:
//
// capture_group: ranks that share a GPU make one launch per call (gpu/launch.hpp), so their calls
// can only be captured into a CUDA graph together: every rank's stream must join one capture.
//   collcomm::gpu::capture_group cap(nlocal);       // shared by the ranks' threads
//   // in rank i's thread, with its stream s:
//   cap.begin(i, s);                                 // collective: s joins the capture
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::sum{}, s);
//   cudaGraph_t g = cap.end(i, s);                   // collective: the graph on i == 0, else null
//
// device_buffer: peers' kernels spin-wait for this rank's next kernel, and cudaMalloc and cudaFree
// may wait for every kernel of the device — a deadlock until the timeout if a rank allocates
// while its peers' kernels run. Stream-ordered allocation (cudaMallocAsync / cudaFreeAsync) does
// not wait for other streams' kernels: allocate through it, on the rank's stream.
#pragma once

#include <collcomm/detail/cuda.hpp>
#include <collcomm/error.hpp>

#include <cuda_runtime.h>

#include <barrier>
#include <cstddef>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

class capture_group {
 public:
  // `nlocal` threads, one per rank of this GPU, will call begin and end, each with its own index
  // in [0, nlocal) and its own stream, on the GPU that is current in each thread.
  explicit capture_group(int nlocal) : sync_(nlocal), joins_(static_cast<std::size_t>(nlocal), nullptr) {
    detail::cuda_check(cudaStreamCreateWithFlags(&origin_, cudaStreamNonBlocking), "gpu::capture_group");
    detail::cuda_check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "gpu::capture_group");
    for (auto& e : joins_)
      detail::cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "gpu::capture_group");
  }
  ~capture_group() {
    for (auto e : joins_)
      if (e) cudaEventDestroy(e);
    if (fork_) cudaEventDestroy(fork_);
    if (origin_) cudaStreamDestroy(origin_);
  }
  capture_group(const capture_group&) = delete;
  capture_group& operator=(const capture_group&) = delete;

  // Collective over the group's threads: index 0 begins a capture, every stream joins it.
  void begin(int index, cudaStream_t stream) {
    if (index == 0) {
      detail::cuda_check(cudaStreamBeginCapture(origin_, cudaStreamCaptureModeRelaxed), "gpu::capture_group::begin");
      detail::cuda_check(cudaEventRecord(fork_, origin_), "gpu::capture_group::begin");
    }
    sync_.arrive_and_wait();
    detail::cuda_check(cudaStreamWaitEvent(stream, fork_, 0), "gpu::capture_group::begin", index);
  }
  // Collective over the group's threads: every stream rejoins the capture's origin, and index 0
  // ends the capture and gets the graph (the others get nullptr). The caller owns the graph.
  cudaGraph_t end(int index, cudaStream_t stream) {
    detail::cuda_check(cudaEventRecord(joins_[static_cast<std::size_t>(index)], stream), "gpu::capture_group::end",
                       index);
    sync_.arrive_and_wait();
    cudaGraph_t graph = nullptr;
    if (index == 0) {
      for (auto e : joins_) detail::cuda_check(cudaStreamWaitEvent(origin_, e, 0), "gpu::capture_group::end");
      detail::cuda_check(cudaStreamEndCapture(origin_, &graph), "gpu::capture_group::end");
    }
    sync_.arrive_and_wait();
    return graph;
  }

 private:
  std::barrier<> sync_;
  cudaStream_t origin_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  std::vector<cudaEvent_t> joins_;
};

// `count` elements of T in the current GPU's memory, allocated and freed in the order of
// `stream` (cudaMallocAsync / cudaFreeAsync): safe while peers' kernels run (see the top).
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(std::size_t count, cudaStream_t stream) : count_(count), stream_(stream) {
    void* p = nullptr;
    detail::cuda_check(cudaMallocAsync(&p, count * sizeof(T), stream), "gpu::device_buffer: cudaMallocAsync");
    data_ = static_cast<T*>(p);
  }
  ~device_buffer() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  device_buffer(device_buffer&& o) noexcept { swap(o); }
  device_buffer& operator=(device_buffer&& o) noexcept {
    device_buffer(std::move(o)).swap(*this);
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

 private:
  void swap(device_buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    std::swap(stream_, o.stream_);
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace gpu
COLLCOMM_NAMESPACE_END
