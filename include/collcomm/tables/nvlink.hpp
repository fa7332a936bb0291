// collcomm/tables/nvlink.hpp — algo::automatic's table for the GPU executor over transport::nvlink.
// Written by bench/tune.py; rewrite it by re-running the script on the GPU (bench/tune.py --help).
// Source: the figures of bench/RESULTS.md on one H200, 8 ranks as threads (2026-12-03/04): one_shot
// 3.4-3.9 µs to 8 KiB from a graph (ring/ll 13-45 µs, ring 52-67 µs), 1 channel the fastest to
// 8 KiB; two_shot 1.85 ms at 256 MiB against ring's ~3.4 ms while every rank is on one GPU; ring
// with the world's options elsewhere.
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {

using nvlink = rule_table<
    // kind             condition                        algorithm       tuning (protocol, channels, slot bytes)
    rule<kind::all_reduce, when{.max_bytes = 8192},      algo::one_shot, tuning<protocol::simple, 1>>,
    rule<kind::all_reduce, when{.max_bytes = 262144},    algo::one_shot, tuning<protocol::simple>>,
    rule<kind::all_reduce, when{.max_gpus = 1},          algo::two_shot, tuning<protocol::simple>>>;

}  // namespace tables
COLLCOMM_NAMESPACE_END
