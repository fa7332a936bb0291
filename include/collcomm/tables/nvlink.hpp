// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of all_reduce, reduce_scatter, all_gather, broadcast, reduce at 2,4,8 ranks,
// f32, to 1G, median of 1 round(s), an arm kept while within 10% of the fastest; 2026-12-05, one
// H100 (the run tool's nvidia-h100-x1), ranks as threads, binaries of f54e52f with the direct
// broadcast and reduce and the 2-vector direct copy of the commit that wrote this table; logs in
// bench/results/h100_2026-12-05/sweep_u2
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::all_reduce, when{.max_bytes = 512, .max_ranks = 2, .max_gpus = 1}, algo::tree, tuning<protocol::ll, 4>>,
    rule<kind::all_reduce, when{.max_bytes = 8388608, .max_ranks = 2, .max_gpus = 1}, algo::two_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_ranks = 2, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::reduce_scatter, when{.max_bytes = 64, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::reduce_scatter, when{.max_bytes = 1048576, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::reduce_scatter, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_bytes = 16, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::all_gather, when{.max_bytes = 1024, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_gather, when{.max_bytes = 4096, .max_ranks = 2, .max_gpus = 1}, algo::recursive_doubling, tuning<protocol::ll, 1>>,
    rule<kind::all_gather, when{.max_bytes = 1048576, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_gather, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::broadcast, when{.max_bytes = 32, .max_ranks = 2, .max_gpus = 1}, algo::tree, tuning<protocol::ll, 1>>,
    rule<kind::broadcast, when{.max_bytes = 524288, .max_ranks = 2, .max_gpus = 1}, algo::tree, tuning<protocol::ll>>,
    rule<kind::broadcast, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.max_bytes = 32768, .max_ranks = 2, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::reduce, when{.max_bytes = 524288, .max_ranks = 2, .max_gpus = 1}, algo::tree, tuning<protocol::ll>>,
    rule<kind::reduce, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 512, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_reduce, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::two_shot, tuning<protocol::simple>>,
    rule<kind::reduce_scatter, when{.max_bytes = 524288, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::ring, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::reduce_scatter, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::broadcast, when{.max_bytes = 8, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::tree, tuning<protocol::ll>>,
    rule<kind::broadcast, when{.max_bytes = 128, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::tree, tuning<protocol::ll, 1>>,
    rule<kind::broadcast, when{.max_bytes = 8192, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::tree, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::broadcast, when{.max_bytes = 524288, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::broadcast, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.max_bytes = 32768, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::tree, tuning<protocol::ll, 1>>,
    rule<kind::reduce, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 131072, .min_ranks = 5, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 2097152, .min_ranks = 5, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.min_ranks = 5, .max_gpus = 1}, algo::two_shot, tuning<protocol::simple>>,
    rule<kind::reduce_scatter, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_bytes = 65536, .min_ranks = 5, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::all_gather, when{.max_bytes = 4194304, .min_ranks = 5, .max_gpus = 1}, algo::ring, tuning<protocol::simple, 0, 1048576>>,
    rule<kind::all_gather, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::broadcast, when{.max_bytes = 8, .min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::broadcast, when{.max_bytes = 32768, .min_ranks = 5, .max_gpus = 1}, algo::tree, tuning<protocol::ll>>,
    rule<kind::broadcast, when{.max_bytes = 524288, .min_ranks = 5, .max_gpus = 1}, algo::ring, tuning<protocol::ll>>,
    rule<kind::broadcast, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.max_bytes = 131072, .min_ranks = 5, .max_gpus = 1}, algo::tree, tuning<protocol::ll, 1>>,
    rule<kind::reduce, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
