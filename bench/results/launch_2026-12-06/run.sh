#!/usr/bin/env bash
# Where the grouped launch's time goes beyond the event design's floor, then a verify of the
# nvlink table with what time is left.
#   bash bench/results/launch_2026-12-06/run.sh OUT [SECONDS=560]
# 1. bench/probes/launch_calls.cu at 8 and 4 ranks: the event design with the probe's tiny kernel
#    and with a kernel shaped like collcomm's (cooperative or not, 0 or 3 us of work per block).
# 2. collcomm_bench, stream-launched one_shot all_reduce, 1 channel, 8 and 4 ranks: BIN/collcomm_bench_old
#    (before) and BIN/collcomm_bench (after), alternating, 3 processes each.
# 3. bench/results/h100_2026-12-05/run.sh verify with SWEEP (the merged table's folder) in the
#    remaining time.
# First the GPU tests LAUNCH_TESTS (test_gpu_fault: stalls name launched calls from the history).
# Binaries in .deps/bin: launch_calls (nvcc -O2 -arch=sm_90 bench/probes/launch_calls.cu -lcuda),
# collcomm_bench and collcomm_bench_old (scripts/build_gpu_here.sh bench).
set -u
OUT=${1:?usage: run.sh OUT [SECONDS]}
BUDGET=${2:-560}
. bench/scripts/common.sh
chmod +x "$BIN"/* 2>/dev/null
W=$OUT/launch
record_env "$W"
S=$OUT/summary.txt
for t in ${LAUNCH_TESTS:-test_gpu_fault}; do
  t0=$SECONDS
  timeout 120 "$BIN/$t" > "$W/$t.log" 2>&1
  echo "$t rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] test cases' "$W/$t.log" | tr -s ' ')" >> "$S"
done
for r in 8 4; do
  for rep in 1 2; do
    timeout 30 "$BIN/launch_calls" $r 4000 events,events_shaped
    PROBE_COOP=0 timeout 30 "$BIN/launch_calls" $r 4000 events_shaped | sed 's/^/coop0 /'
    PROBE_SPIN_NS=3000 timeout 30 "$BIN/launch_calls" $r 4000 events_shaped | sed 's/^/spin3us /'
  done
done 2>&1 | tee "$W/launch_calls.txt" >> "$S"
for r in 8 4; do
  for rep in 1 2 3; do
    for v in old new; do
      b=$BIN/collcomm_bench; [[ $v == old ]] && b=$BIN/collcomm_bench_old
      timeout 60 "$b" -k all_reduce -a one_shot -C 1 -r $r -b 8 -e 8K -f 32 -n 100 -w 10 -R 5 -c 1 --no-in-place --json |
        sed "s/^{/{\"v\":\"$v\",/"
    done
  done
done > "$W/bench.txt" 2>&1
grep -o '"v":"[a-z]*"\|"ranks":[0-9]*\|"bytes":[0-9]*\|"time_us":[0-9.]*\|"host_us":[0-9.]*' "$W/bench.txt" |
  paste - - - - - | tee -a "$S"
echo "launch part done at $SECONDS s" >> "$S"
mkdir -p "$OUT/verify"
TESTS=${TESTS:- } SWEEP=${SWEEP:-bench/results/h100_2026-12-05/sweep3_cecf1de/table} ROUNDS=${ROUNDS:-2} \
  bash bench/results/h100_2026-12-05/run.sh "$OUT/verify" verify $((BUDGET - SECONDS))
