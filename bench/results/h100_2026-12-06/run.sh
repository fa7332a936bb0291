#!/usr/bin/env bash
# The nvlink table chosen with a graph tie-break (bench/tune.py --tiebreak), verified twice:
# stream-launched against the stream sweep's winners (SROUNDS rounds, default 3, to 256 MiB), and
# replayed from a CUDA graph against the graph sweep's winners (2 rounds, to 4 MiB).
#   bash bench/results/h100_2026-12-06/run.sh OUT
# Binaries: .deps/bin/collcomm_bench and test_gpu_api (run first: TESTS) built with the table
# (scripts/build_gpu_here.sh bench test_gpu_api).
set -u
OUT=${1:?usage: run.sh OUT}
R=bench/results/h100_2026-12-06
mkdir -p "$OUT/stream" "$OUT/graph"
TESTS=${TESTS:-test_gpu_api} SWEEP=$R/table ROUNDS=${SROUNDS:-3} bash bench/results/h100_2026-12-05/run.sh "$OUT/stream" verify 300
rm -rf /tmp/work  # the stream part is packed in $OUT/stream/runs.tgz
TESTS=" " SWEEP=$R/graph_sweep/merged ROUNDS=2 GRAPH=1 MAX=4M \
  bash bench/results/h100_2026-12-05/run.sh "$OUT/graph" verify 200
