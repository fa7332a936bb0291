#!/usr/bin/env bash
# Device call 4: whether the processes' one-block kernels share SMs, and what a taken branch to a
# line not yet fetched costs.
#   mps_floor (bench/probes/mps_floor.cu with modes jump and spread, and SM counts): straight 8 KiB
#   against 8 KiB of lines joined by 1 KiB branches, once and twice per launch, 1 and 8 processes;
#   8 processes with and without 116 KiB of dynamic shared memory (one block per SM) for code and meet.
#   bench_mp_hoist3 (branch pushed-compact) against bench_mp_spread (the same with
#   COLLCOMM_SPREAD_SMEM: every kernel launched with that much dynamic shared memory; spread.patch),
#   8 and 2 processes from a graph, two rounds.
#   bash bench/results/params_2026-12-07/run4.sh OUT
# Binaries: .deps/bins4.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run4.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
floor() {  # ARGS...
  time_left 10 "mps_floor $*" || return 1
  timeout 30 $B/mps_floor "$@"
  echo "rc=$?"
}
{
  for n in 1 8; do
    for mode in code jump; do
      for passes in 1 2; do floor $n $mode 200 9 graph 0 0 512 8 $passes 0; done
    done
  done
  for spread in 0 1; do
    for kb in 2 8 32; do floor 8 code 200 9 graph 0 0 512 $kb 1 $spread; done
    floor 8 jump 200 9 graph 0 0 512 8 1 $spread
    floor 8 meet 200 9 graph 0 0 512 8 1 $spread
  done
} > "$OUT/mps_floor.txt" 2>&1
grep -h "mps_floor n=" "$OUT/mps_floor.txt" | sed 's/ \[[1-9][0-9]*\] [^ ]* ([^)]*)//g' | summary
grep -h "SMs used" "$OUT/mps_floor.txt" | summary
ab() {  # ROUND
  for n in 8 2; do
    one_shot_latency bench_mp_hoist3 $n 1
    COLLCOMM_SPREAD_SMEM=118784 one_shot_latency bench_mp_spread $n 1
  done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $1: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
time_left 40 "A/B round 1" && ab 1
time_left 40 "A/B round 2" && ab 2
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
