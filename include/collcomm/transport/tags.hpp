// collcomm/transport/tags.hpp — the transport axis as tags.
//
// A transport tag says how ranks reach each other. `load_store` transports let a rank load and
// store a peer's buffer (the direct primitives: one_shot, two_shot, direct); the others carry
// FIFO messages only. Each tag's host owner and device handle live in its own header.
#pragma once

#include <collcomm/config.hpp>

#include <concepts>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// Ranks as threads or processes of one host sharing memory (the host executor).
struct host_shm { static constexpr const char* name = "host_shm"; static constexpr bool load_store = true; };
// CUDA peer access or IPC between GPUs, and ranks that share one GPU.
struct nvlink { static constexpr const char* name = "nvlink"; static constexpr bool load_store = true; };
// GPUs without NVLink: P2P over PCIe where allowed, else staged through pinned host memory.
struct pcie { static constexpr const char* name = "pcie"; static constexpr bool load_store = true; };

struct ibverbs { static constexpr const char* name = "ibverbs"; };
struct socket { static constexpr const char* name = "socket"; };
// Between hosts: FIFO messages only.
template <class Backend>
struct net { static constexpr const char* name = Backend::name; static constexpr bool load_store = false; };

}  // namespace transport

template <class T>
concept transport_tag = requires {
  { T::name } -> std::convertible_to<const char*>;
  { T::load_store } -> std::convertible_to<bool>;
};

COLLCOMM_NAMESPACE_END
