#!/usr/bin/env bash
# All_gather's direct arms, 512 and 1024 threads per block, swept for the table: stream-launched
# (3 rounds, 8 B to 1 GiB) and from a CUDA graph (2 rounds, to 4 MiB, the tie-break), 2, 4 and 8
# ranks, with the narrow bench (all_gather, algo::direct, f32) in .deps/bin/bench_ag.
#   bash bench/results/copy_ll128_2026-12-06/run7.sh OUT
set -u
OUT=${1:?usage: run7.sh OUT}
A=(--bench .deps/bin/bench_ag --ranks 2,4,8 --kinds all_gather --only-arms '^direct/simple/c0/s0' --timeout 200)
python3 bench/tune.py gpu "${A[@]}" --rounds 3 --out "$OUT/ag_stream" --header "$OUT/ag_stream/nvlink.hpp" > "$OUT/ag_stream.log" 2>&1
echo "stream rc=$?"
python3 bench/tune.py gpu "${A[@]}" --graph --max-bytes 4M --rounds 2 --out "$OUT/ag_graph" --header "$OUT/ag_graph/nvlink.hpp" > "$OUT/ag_graph.log" 2>&1
echo "graph rc=$?"
tar -czf "$OUT/ag.tgz" -C "$OUT" ag_stream ag_graph ag_stream.log ag_graph.log && rm -rf "$OUT/ag_stream" "$OUT/ag_graph"
