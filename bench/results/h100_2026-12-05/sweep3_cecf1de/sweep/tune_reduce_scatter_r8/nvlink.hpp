// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of reduce_scatter at 8 ranks, f32, to 1G, median of 3 round(s), an arm kept
// while within 5% of the fastest; 2026-12-05, commit cecf1de with uncommitted changes; logs in
// /tmp/work/sweep/tune_reduce_scatter_r8
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::reduce_scatter, when{.max_bytes = 0, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::reduce_scatter, when{.max_gpus = 1}, algo::direct, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
