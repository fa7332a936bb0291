// collcomm/host.hpp — everything the host executor needs: host::world and host::options,
// topology_table and communicator::set_topology (for algo::hierarchical),
// host::make_process_world (ranks as processes),
// communicator<transport::host_shm>, host::run_ranks and the collectives (collectives.hpp).
#pragma once

#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/collectives.hpp>
#include <collcomm/communicator.hpp>
#include <collcomm/host/options.hpp>
#include <collcomm/host/primitives.hpp>
#include <collcomm/host/process_world.hpp>
#include <collcomm/host/run_ranks.hpp>
#include <collcomm/host/world.hpp>
