// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of all_gather at 2 ranks, f32, to 1G, median of 1 round(s), an arm kept
// while within 3% of the fastest; 2026-12-05, commit f937551 with uncommitted changes; logs in
// /tmp/work/sweep/tune_all_gather_r2
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::all_gather, when{.max_bytes = 4, .max_gpus = 1}, algo::ring, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::all_gather, when{.max_bytes = 1024, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_gather, when{.max_bytes = 4096, .max_gpus = 1}, algo::recursive_doubling, tuning<protocol::ll, 1>>,
    rule<kind::all_gather, when{.max_bytes = 65536, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_gather, when{.max_gpus = 1}, algo::direct, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
