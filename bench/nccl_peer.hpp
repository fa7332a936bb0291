// bench/nccl_peer.hpp — NCCL as the bench's peer column, loaded at run time.
//
// collcomm_bench --nccl times NCCL's collective on the same ranks, sizes and streams right after
// collcomm's (DESIGN.md, "Measuring": the peers' columns in the same process). NCCL is not a
// dependency of collcomm: the bench compiles against nccl.h for the types only and dlopen()s
// libnccl.so.2 when asked — from $COLLCOMM_NCCL_LIB if set, else the loader's search path (the
// GPU machines have it inside PyTorch's wheels: bench/scripts/common.sh finds it). NVLink multicast
// (NVLS) is switched off before NCCL starts, whatever the environment says: it may put a shared
// GPU out of service.
//
// Built without nccl.h (COLLCOMM_BENCH_HAVE_NCCL 0), --nccl says so and the bench runs without it.
// NCCL up to 2.29 refuses two ranks on one GPU ("Duplicate GPU detected"); the column then says
// so instead of a figure (collcomm runs them: that is one of the points of the comparison).
#pragma once

#if __has_include(<nccl.h>)
#define COLLCOMM_BENCH_HAVE_NCCL 1
#include <nccl.h>

#include <cuda_runtime.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace collcomm_bench::nccl {

struct api {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclAlltoAll) all_to_all = nullptr;  // NCCL >= 2.28
  int version = 0;
};

// The loaded API, or null with `why` saying what failed. Loaded once per process.
inline const api* load(std::string& why) {
  static api a;
  static std::string error;
  static const bool ok = [] {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    const char* path = std::getenv("COLLCOMM_NCCL_LIB");
    void* lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      error = std::string("cannot load ") + (path && *path ? path : "libnccl.so.2") + ": " + (e ? e : "?") +
              " (set COLLCOMM_NCCL_LIB to libnccl.so.2's path)";
      return false;
    }
    bool all = true;
    auto sym = [&](auto& f, const char* name, bool required = true) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (!f && required) {
        all = false;
        error += std::string(error.empty() ? "" : ", ") + "no symbol " + name;
      }
    };
    sym(a.get_version, "ncclGetVersion");
    sym(a.error_string, "ncclGetErrorString");
    sym(a.comm_init_all, "ncclCommInitAll");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.reduce_scatter, "ncclReduceScatter");
    sym(a.all_gather, "ncclAllGather");
    sym(a.broadcast, "ncclBroadcast");
    sym(a.reduce, "ncclReduce");
    sym(a.all_to_all, "ncclAlltoAll", false);
    if (!all) return false;
    if (a.get_version(&a.version) != ncclSuccess) {
      error = "ncclGetVersion failed";
      return false;
    }
    return true;
  }();
  if (!ok) why = error;
  return ok ? &a : nullptr;
}

template <class T>
constexpr ncclDataType_t dtype() {
  if constexpr (std::is_same_v<T, float>)
    return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return ncclFloat64;
  else if constexpr (std::is_same_v<T, __half>)
    return ncclFloat16;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return ncclBfloat16;
  else
    static_assert(sizeof(T) == 0, "collcomm_bench --nccl: no NCCL type for this element type");
}

// One communicator per rank (ncclCommInitAll: ranks as threads of this process, devices[r] each),
// or empty with `why` set: NCCL missing, or refusing the placement (several ranks on one GPU).
inline std::vector<ncclComm_t> make_comms(const api& a, const std::vector<int>& devices, std::string& why) {
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  const ncclResult_t r = a.comm_init_all(comms.data(), static_cast<int>(devices.size()), devices.data());
  if (r != ncclSuccess) {
    why = std::string("ncclCommInitAll: ") + a.error_string(r);
    (void)cudaGetLastError();
    return {};
  }
  return comms;
}

inline void destroy(const api& a, std::vector<ncclComm_t>& comms) {
  for (ncclComm_t c : comms)
    if (c) a.comm_destroy(c);
  comms.clear();
}

}  // namespace collcomm_bench::nccl
#else
#define COLLCOMM_BENCH_HAVE_NCCL 0
#endif
