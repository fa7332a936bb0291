// collcomm/transport/nvlink.hpp — transport::nvlink's host side: CUDA peer access between the GPUs
// a world uses. Ranks that share one GPU need nothing more; ranks on several GPUs need peer
// access between every pair (NVLink, or P2P over PCIe: then transport::pcie is the honest name,
// with the same kernels). Ranks of other processes reach each other's memory through CUDA IPC
// (gpu/process_world.hpp). The connections' layout is transport/connections.hpp; the device
// handles are transport/nvlink_device.hpp; the host owner of the memory is gpu::world.
#pragma once

#include <collcomm/detail/cuda.hpp>
#include <collcomm/error.hpp>

#include <cuda_runtime.h>

#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// Whether every pair of distinct GPUs among `devices` has peer access (cudaDeviceCanAccessPeer):
// transport::nvlink or transport::pcie where it does, transport::pcie_staged where it does not.
inline bool all_peers_reachable(const std::vector<int>& devices) {
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      detail::cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) return false;
    }
  return true;
}

// Enables peer access between every pair of distinct GPUs among `devices`; a pair without it is
// errc::invalid_usage naming the two GPUs.
inline void enable_peer_access(const std::vector<int>& devices, const char* where) {
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      detail::cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can)
        detail::fail(errc::invalid_usage, where, no_rank,
                     "GPUs " + std::to_string(a) + " and " + std::to_string(b) +
                         " cannot access each other's memory; use transport::pcie_staged between them");
      detail::device_guard g(a);
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        detail::cuda_check(e, "cudaDeviceEnablePeerAccess");
    }
}

}  // namespace transport
COLLCOMM_NAMESPACE_END
