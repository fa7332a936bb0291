#!/usr/bin/env bash
# Device call 20: the library with programmatic launches on by default and the process rules of
# run19's sweep. test_gpu_mp's chain case (programmatic and plain launches); collcomm_bench_mp -a
# automatic (8 B to 1 MiB) among 8, 4 and 2 processes from a graph and stream-launched, 2 rounds,
# the environment not set; then `mp: every*` (its mixed queue runs automatic with the new rules).
#   scripts/build_gpu_here.sh test_gpu_mp bench_mp   (here; carry .deps/bin, or a tar of it)
#   bash bench/results/params_2026-12-07/run20.sh OUT   (LIMIT: seconds, default 280)
set -u
OUT=${1:?usage: run20.sh OUT}
LIMIT=${LIMIT:-280}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
unset COLLCOMM_GPU_PROGRAMMATIC_LAUNCH
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp tab_chain 'mp: calls that depend*' 60
for round in 1 2; do
  time_left 120 "automatic round $round" || break
  for g in 1 0; do
    for n in 8 4 2; do
      echo "== collcomm_bench_mp n=$n automatic graph=$g pdl=1"
      timeout 40 "$B/collcomm_bench_mp" -n $n -k all_reduce -a automatic -b 8 -e 1M -f 4 -G $g -w 50 -i 200
      echo "rc=$?"
    done
  done >> "$OUT/auto.txt" 2>&1
  echo "[$SECONDS s] automatic round $round: $(grep -c 'rc=0' "$OUT/auto.txt") runs rc=0 so far" | summary
done
test_run test_gpu_mp tab_every 'mp: every*' $((LIMIT - SECONDS - 5))
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
