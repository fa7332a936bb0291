// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of all_gather at 2,4,8 ranks, f32, to 4M from a CUDA graph, median of 2
// round(s), an arm kept while within 3% of the fastest; 2026-12-06, commit 5335f2e with
// uncommitted changes; logs in /root/out/ag_graph
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::all_gather, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
