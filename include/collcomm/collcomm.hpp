// collcomm/collcomm.hpp — the umbrella include: the policy core, every algorithm, the
// collectives, the host executor and the bootstraps; the GPU executor too when compiled by nvcc.
//   collcomm/host.hpp  the host executor alone (any C++20 compiler)
//   collcomm/gpu.hpp   the GPU executor alone (nvcc)
#pragma once

#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/bootstrap/env.hpp>
#include <collcomm/bootstrap/local.hpp>
#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/collectives.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/net.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/topology.hpp>
#include <collcomm/tuning.hpp>
#include <collcomm/types.hpp>
#if defined(__CUDACC__)
#include <collcomm/gpu.hpp>
#endif
