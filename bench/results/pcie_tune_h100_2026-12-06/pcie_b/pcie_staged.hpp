// collcomm/tables/pcie_staged.hpp — algo::automatic's table for the GPU executor over transport::pcie_staged.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
// Source: pcie sweep of all_reduce, reduce_scatter, all_gather, broadcast, reduce at 8 ranks,
// f32, to 128M, median of 1 round(s), an arm kept while within 3% of the fastest; 2026-12-06,
// commit 6ea83fb with uncommitted changes; logs in /root/out/c2/pcie_b. Swept with every rank a
// thread on one GPU, whose one PCIe link all of them share: the rules hold for such worlds
// (.max_gpus = 1, .world = world_kind::threads); staged ranks on several GPUs, each with a link
// of its own, and processes take the classic algorithm
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using pcie_staged = rule_table<
    rule<kind::all_reduce, when{.max_bytes = 8192, .max_gpus = 1, .world = world_kind::threads}, algo::recursive_doubling, tuning<protocol::ll, 1, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 32768, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 8, 65536>>,
    rule<kind::all_reduce, when{.max_bytes = 524288, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::simple, 0, 262144>>,
    rule<kind::all_reduce, when{.max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::simple, 4, 65536>>,
    rule<kind::reduce_scatter, when{.max_bytes = 1024, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 1, 65536>>,
    rule<kind::reduce_scatter, when{.max_bytes = 4096, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 8, 65536>>,
    rule<kind::reduce_scatter, when{.max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::simple, 4, 65536>>,
    rule<kind::all_gather, when{.max_bytes = 1024, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 1, 65536>>,
    rule<kind::all_gather, when{.max_bytes = 4096, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 8, 65536>>,
    rule<kind::all_gather, when{.max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::simple, 4, 65536>>,
    rule<kind::broadcast, when{.max_bytes = 512, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::ll, 1, 65536>>,
    rule<kind::broadcast, when{.max_bytes = 2048, .max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::ll, 8, 65536>>,
    rule<kind::broadcast, when{.max_bytes = 32768, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::ll, 1, 65536>>,
    rule<kind::broadcast, when{.max_bytes = 524288, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::simple, 0, 262144>>,
    rule<kind::broadcast, when{.max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::simple, 4, 65536>>,
    rule<kind::reduce, when{.max_bytes = 32768, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::ll, 1, 65536>>,
    rule<kind::reduce, when{.max_bytes = 524288, .max_gpus = 1, .world = world_kind::threads}, algo::tree, tuning<protocol::simple, 0, 262144>>,
    rule<kind::reduce, when{.max_gpus = 1, .world = world_kind::threads}, algo::ring, tuning<protocol::simple, 4, 65536>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
