// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: gpu sweep of all_reduce, reduce_scatter, all_gather, broadcast, reduce at 2,4,8 ranks,
// f32, to 1G, median of 3 (1 for reduce at 4 ranks, reduce at 8 ranks) round(s), an arm kept
// while within 5% of the fastest, arms within 10% of it where the launch's host cost sets the
// time told apart by a sweep from a CUDA graph
// (bench/results/copy_ll128_2026-12-06/graph_merged); 2026-12-05, commit cecf1de with
// uncommitted changes; logs in bench/results/copy_ll128_2026-12-06/table; first, for processes
// on one GPU: the mp sweep of bench/results/params_2026-12-07/run19/mp_sweep (collcomm_bench_mp,
// to 8K from a CUDA graph, 2026-12-08, commit 4517971)
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    rule<kind::all_reduce, when{.max_bytes = 2048, .max_ranks = 2, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .max_ranks = 2, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 8>>,
    rule<kind::all_reduce, when{.max_bytes = 512, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 2048, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 4>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 512, .min_ranks = 5, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 2048, .min_ranks = 5, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple, 4>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .min_ranks = 5, .max_gpus = 1, .world = world_kind::processes}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .max_ranks = 2, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 134217728, .max_ranks = 2, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_ranks = 2, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 32>>,
    rule<kind::reduce_scatter, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_bytes = 1048576, .max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple, 0, 0, 1024>>,
    rule<kind::broadcast, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.max_ranks = 2, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 33554432, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::two_shot, tuning<protocol::simple>>,
    rule<kind::reduce_scatter, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_bytes = 524288, .min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple, 0, 0, 1024>>,
    rule<kind::broadcast, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.min_ranks = 3, .max_ranks = 4, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_bytes = 8192, .min_ranks = 5, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 524288, .min_ranks = 5, .max_gpus = 1}, algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.min_ranks = 5, .max_gpus = 1}, algo::two_shot, tuning<protocol::simple>>,
    rule<kind::reduce_scatter, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.max_bytes = 262144, .min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::all_gather, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple, 0, 0, 1024>>,
    rule<kind::broadcast, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>,
    rule<kind::reduce, when{.min_ranks = 5, .max_gpus = 1}, algo::direct, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
