// collcomm/transport/pcie_device.hpp — the device handles of the PCIe transports. Both use system
// scope: a peer GPU (or the host memory the connections sit in) is on the other side of the bus.
//   pcie_handle         transport::pcie: P2P over PCIe, peers' buffers loaded and stored directly
//   pcie_staged_handle  transport::pcie_staged: every connection in pinned host memory mapped
//                       into every GPU; FIFO messages only (no load/store of peers' buffers)
// pcie_handle is nvlink_handle<scope_system>: the same kernels serve both.
#pragma once

#include <collcomm/transport/device_handle.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

using pcie_handle = device_handle<scope_system, true>;
using pcie_staged_handle = device_handle<scope_system, false>;

}  // namespace transport
COLLCOMM_NAMESPACE_END
