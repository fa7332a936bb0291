#!/usr/bin/env bash
# Device call 6: the pushed call's common path rewritten short (branch pushed-lean: pushed_call.cuh;
# pairs (peer, line) spread over the block's threads, the launch's parameters read into registers,
# no block state in local memory) against branch pushed-compact; the multi-process tests on it.
#   bench_mp_hoist3 (pushed-compact), bench_mp_lean, test_gpu_mp_lean
#   bash bench/results/params_2026-12-07/run6.sh OUT
# Binaries: .deps/bins6.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run6.sh OUT}
LIMIT=${LIMIT:-420}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run() {  # BINARY LOG PATTERN LIMIT
  time_left 25 "$1 '$3'" || return 1
  ( time timeout "$4" $B/$1 --only "$3" ) > "$OUT/$2.log" 2>&1
  echo "[$SECONDS s] $1 '$3' rc=$? $(doctest_counts "$OUT/$2.log")" | summary
}
test_run test_gpu_mp_lean lean_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
ab() {  # ROUND
  for v in bench_mp_hoist3 bench_mp_lean; do
    one_shot_latency $v 8 1; one_shot_latency $v 2 1; one_shot_latency $v 4 1; one_shot_latency $v 8 0
  done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $1: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
time_left 60 "A/B round 1" && ab 1
time_left 60 "A/B round 2" && ab 2
test_run test_gpu_mp_lean lean_every 'mp: every*' 150
test_run test_gpu_mp_lean lean_all '*' 200
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
