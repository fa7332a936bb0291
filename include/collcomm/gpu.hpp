// collcomm/gpu.hpp — the GPU executor: gpu::world (ranks as threads of this process), worlds of
// processes (a communicator made from a bootstrap), communicator<Tr> for transport::nvlink,
// transport::pcie and transport::pcie_staged, and the collectives with every algorithm. Include
// from a CUDA translation unit (.cu, compiled by nvcc).
#pragma once

#include <collcomm/collectives.hpp>
#include <collcomm/gpu/capture.hpp>
#include <collcomm/gpu/communicator.hpp>
#include <collcomm/gpu/launch.hpp>
#include <collcomm/gpu/net_proxy.hpp>
#include <collcomm/gpu/options.hpp>
#include <collcomm/gpu/process_world.hpp>
#include <collcomm/gpu/stall.hpp>
#include <collcomm/gpu/transport.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/transport/pcie.hpp>
