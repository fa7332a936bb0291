// collcomm/tables/host_shm.hpp — algo::automatic's table for the host executor (transport::host_shm).
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: host sweep of all_reduce at 2,4 ranks, f32, to 64M, median of 3 (5 for all_reduce at 4
// ranks) round(s), an arm kept while within 10% of the fastest; 2026-12-05, commit 01a2753; logs
// in bench/results/tune_host_vm_2026-12-05/verify_cpus
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using host_shm = rule_table<
    rule<kind::all_reduce, when{.max_bytes = 2048, .max_ranks = 2}, algo::one_shot, tuning<protocol::simple, 1, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .max_ranks = 2}, algo::recursive_doubling, tuning<protocol::simple, 1, 65536>>,
    rule<kind::all_reduce, when{.max_ranks = 2}, algo::ring, tuning<protocol::simple, 1, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 2048, .min_ranks = 3}, algo::one_shot, tuning<protocol::simple, 1, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 32768, .min_ranks = 3}, algo::tree, tuning<protocol::simple, 1, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 131072, .min_ranks = 3}, algo::ring, tuning<protocol::simple, 2, 65536>>,
    rule<kind::all_reduce, when{.min_ranks = 3}, algo::ring, tuning<protocol::simple, 1, 65536>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
