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

// Before a COLLCOMM_HD function template that calls its primitives object: the host executor's
// primitives are host functions, and nvcc would warn (#20011, #20014) that a __host__ __device__
// function calls them, in every .cu file that uses the host executor. (CCCL's _CCCL_EXEC_CHECK_DISABLE.)
#if defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define COLLCOMM_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define COLLCOMM_EXEC_CHECK_DISABLE
#endif

#if defined(__CUDA_ARCH__)
#define COLLCOMM_ON_DEVICE 1
#else
#define COLLCOMM_ON_DEVICE 0
#endif
