// collcomm/gpu/transport.hpp — the GPU transports as the GPU executor sees them: for each tag,
// where its connections live and which device handles its kernels take, and the launch and
// preload of a composition over a transport.
//
//   transport     connections         device handle(s)                         direct algorithms
//   nvlink        receiver's GPU      nvlink_handle<scope_device> (one GPU),   yes
//                                     nvlink_handle<scope_system> (several)
//   pcie          receiver's GPU      pcie_handle (system scope)               yes
//   pcie_staged   pinned host memory  pcie_staged_handle (system scope)        no: a compile error
//
// A world's placement (options::connections) is fixed when it is made; a communicator checks
// that its transport's placement is the world's. nvlink picks between its two handles from the
// world at each launch (handle_index: gpu::world::scope_is_device, fixed at set-up): a
// composition over nvlink compiles a kernel for each, the others one.
#pragma once

#include <collcomm/gpu/launch.hpp>
#include <collcomm/gpu/options.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/transport/nvlink_device.hpp>
#include <collcomm/transport/pcie_device.hpp>
#include <collcomm/transport/tags.hpp>

#include <utility>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

template <class... Handles>
struct handle_list {};

template <class Transport>
struct transport_traits;  // specialized for each GPU transport below

template <>
struct transport_traits<transport::nvlink> {
  static constexpr placement connections = placement::device;
  using handles =
      handle_list<transport::nvlink_handle<transport::scope_device>, transport::nvlink_handle<transport::scope_system>>;
  static int handle_index(const world& w) { return w.scope_is_device() ? 0 : 1; }
};
template <>
struct transport_traits<transport::pcie> {
  static constexpr placement connections = placement::device;
  using handles = handle_list<transport::pcie_handle>;
  static int handle_index(const world&) { return 0; }
};
template <>
struct transport_traits<transport::pcie_staged> {
  static constexpr placement connections = placement::host;
  using handles = handle_list<transport::pcie_staged_handle>;
  static int handle_index(const world&) { return 0; }
};

template <class Tr>
concept gpu_transport = transport_tag<Tr> && requires {
  { transport_traits<Tr>::connections } -> std::convertible_to<placement>;
};

namespace launch_detail {
template <class K, class Algo, class Tuning, class T, class Op, class... Handles>
void launch_handle(handle_list<Handles...>, int index, world& w, int rank, const coll_args& a, const T* in, T* out,
                   const Op& op, cudaStream_t stream, void* stage) {
  int i = 0;
  (void)((i++ == index ? (launch_on<K, Algo, Tuning, Handles>(w, rank, a, in, out, op, stream, stage), true) : false) ||
         ...);
}
}  // namespace launch_detail

// Enqueues rank `rank`'s part of collective K over transport Tr on `stream` (gpu/launch.hpp), its
// kernels taking the device handle the world was made for (transport_traits<Tr>::handle_index).
template <class K, class Algo, tuning_like Tuning = tuning<>, gpu_transport Tr = transport::nvlink, class T, class Op>
void launch(world& w, int rank, coll_args a, const T* in, T* out, Op op, cudaStream_t stream, void* stage = nullptr) {
  static_assert(!std::is_same_v<typename Tuning::protocol, protocol::ll128> || std::is_same_v<Tr, transport::nvlink>,
                "collcomm protocol axis: ll128 relies on a warp's 128-byte store reaching its reader whole, which "
                "NVLink and one GPU's memory give and PCIe does not: over pcie and pcie_staged use ll or simple");
  launch_detail::launch_handle<K, Algo, Tuning>(typename transport_traits<Tr>::handles{},
                                                transport_traits<Tr>::handle_index(w), w, rank, a, in, out, op, stream,
                                                stage);
}

namespace launch_detail {
template <class K, class Algo, class T, class Op, class Tuning, class... Handles>
void preload_all(handle_list<Handles...>) {
  (preload_kernel<K, Algo, T, Op, Tuning, Handles>(), ...);
}
}  // namespace launch_detail

// Loads the kernels of one composition over Tr (every device handle of it) on the current device
// (communicator<Tr>::run does it for the calls inside gpu::preload: gpu/communicator.hpp).
template <class K, class Algo, class T, class Op, tuning_like Tuning, gpu_transport Tr>
void preload_composition() {
  static_assert(!std::is_same_v<typename Tuning::protocol, protocol::ll128> || std::is_same_v<Tr, transport::nvlink>,
                "collcomm protocol axis: ll128 is for transport::nvlink only (gpu::launch says why)");
  launch_detail::preload_all<K, Algo, T, Op, Tuning>(typename transport_traits<Tr>::handles{});
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
