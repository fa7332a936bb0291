// collcomm/transport/nvlink_device.hpp — transport::nvlink's device handles: peers' memory loaded
// and stored directly (CUDA peer access, CUDA IPC, or ranks that share one GPU).
//   nvlink_handle<scope_device>  every rank of the world on one GPU
//   nvlink_handle<scope_system>  ranks on several GPUs
// The world says which at set-up (gpu::world::scope_is_device); the host owner is gpu::world.
#pragma once

#include <collcomm/transport/device_handle.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

template <class Scope>
using nvlink_handle = device_handle<Scope, true>;

}  // namespace transport
COLLCOMM_NAMESPACE_END
