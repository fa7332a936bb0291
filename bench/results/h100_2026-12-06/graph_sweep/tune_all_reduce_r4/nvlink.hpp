// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of all_reduce at 4 ranks, f32, to 4M from a CUDA graph, median of 2
// round(s), an arm kept while within 3% of the fastest; 2026-12-06, commit 953d9b8 with
// uncommitted changes; logs in /tmp/work/sweep/tune_all_reduce_r4
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::all_reduce, when{.max_bytes = 8192, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
