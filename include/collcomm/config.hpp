// collcomm/config.hpp — macros shared by every header.
//
// The library lives in `collcomm::COLLCOMM_ABI_NAMESPACE` (an inline namespace), so two copies of
// collcomm of different versions can sit in one process without their symbols clashing (the
// idea CUB uses in cub/util_namespace.cuh). Kernels additionally get hidden visibility.
#pragma once

#define COLLCOMM_VERSION_MAJOR 0
#define COLLCOMM_VERSION_MINOR 1
#define COLLCOMM_VERSION_PATCH 0

#ifndef COLLCOMM_ABI_NAMESPACE
#define COLLCOMM_ABI_NAMESPACE v0_1
#endif

#define COLLCOMM_NAMESPACE_BEGIN \
  namespace collcomm {           \
  inline namespace COLLCOMM_ABI_NAMESPACE {
#define COLLCOMM_NAMESPACE_END \
  }                            \
  }

// Functions that run in every executor (symbolic, host, GPU) are marked COLLCOMM_HD.
#if defined(__CUDACC__)
#define COLLCOMM_HD __host__ __device__
#define COLLCOMM_DEVICE __device__
#define COLLCOMM_KERNEL __global__ __attribute__((visibility("hidden")))
#else
#define COLLCOMM_HD
#define COLLCOMM_DEVICE
#endif

#if defined(__CUDA_ARCH__)
#define COLLCOMM_ON_DEVICE 1
#else
#define COLLCOMM_ON_DEVICE 0
#endif
