// collcomm/transport/tags.hpp — the transport axis as tags.
//
// A transport tag says how ranks reach each other. `load_store` transports let a rank load and
// store a peer's buffer (the direct primitives: one_shot, two_shot, direct); the others carry
// FIFO messages only, and a direct algorithm over them does not compile (compose.hpp). The GPU
// transports' device handles are in transport/*_device.hpp; their host owner is gpu::world.
//
// This folder (transport/): the tags, and for each GPU transport its trivially copyable device
// handle (*_device.hpp) and its host-side connection setup (connections.hpp, nvlink.hpp,
// pcie.hpp). It includes the policy core and detail/ only: never an executor (gpu/, host/) or
// kernels/.
#pragma once

#include <collcomm/config.hpp>

#include <concepts>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// Ranks as threads or processes of one host sharing memory (the host executor).
struct host_shm {
  static constexpr const char* name = "host_shm";
  static constexpr bool load_store = true;
};
// CUDA peer access or IPC between GPUs, and ranks that share one GPU.
struct nvlink {
  static constexpr const char* name = "nvlink";
  static constexpr bool load_store = true;
};
// GPUs without NVLink whose peer access goes over PCIe (cudaDeviceCanAccessPeer): P2P.
struct pcie {
  static constexpr const char* name = "pcie";
  static constexpr bool load_store = true;
};
// GPUs without peer access: every connection staged through pinned host memory; FIFO messages only.
// Which of pcie and pcie_staged fits is the user's choice at set-up (gpu::all_peers_reachable).
struct pcie_staged {
  static constexpr const char* name = "pcie_staged";
  static constexpr bool load_store = false;
};

struct ibverbs {
  static constexpr const char* name = "ibverbs";
};
struct socket {
  static constexpr const char* name = "socket";
};
// Between hosts: FIFO messages only.
template <class Backend>
struct net {
  static constexpr const char* name = Backend::name;
  static constexpr bool load_store = false;
};

}  // namespace transport

template <class T>
concept transport_tag = requires {
  { T::name } -> std::convertible_to<const char*>;
  { T::load_store } -> std::convertible_to<bool>;
};

COLLCOMM_NAMESPACE_END
