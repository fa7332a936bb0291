// collcomm/gpu.hpp — everything the GPU executor needs: gpu::world (ranks as threads of this
// process), worlds of processes, the communicators of transport::nvlink and transport::pcie, and
// the collectives with every algorithm. Include from a CUDA translation unit (.cu, nvcc).
#pragma once

#include <collcomm/collectives.hpp>
#include <collcomm/transport/nvlink.hpp>
#include <collcomm/transport/pcie.hpp>
