// collcomm/detail/cuda.hpp — the CUDA runtime helpers of the GPU executor's host side: an error
// check that throws collcomm::error, and a scoped current device.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <cuda_runtime.h>

#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace detail {

inline void cuda_check(cudaError_t e, const char* what, int rank = no_rank) {
  if (e != cudaSuccess) fail(errc::system, what, rank, std::string("CUDA error: ") + cudaGetErrorString(e));
}

// Makes `device` current for its lifetime, then restores the caller's device.
class device_guard {
 public:
  explicit device_guard(int device) {
    cuda_check(cudaGetDevice(&saved_), "cudaGetDevice");
    if (saved_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
    changed_ = saved_ != device;
  }
  ~device_guard() {
    if (changed_) cudaSetDevice(saved_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int saved_ = 0;
  bool changed_ = false;
};

}  // namespace detail
COLLCOMM_NAMESPACE_END
