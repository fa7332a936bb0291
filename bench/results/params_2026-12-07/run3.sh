#!/usr/bin/env bash
# Device call 3: the pushed call's handle fields held in registers (hoist.patch: the push areas'
# geometry read once, not reloaded after every store and load, which are asm that clobbers memory),
# and that with the epoch's staged call out of line (hoist2.patch: the common path one stretch of
# code), and that with peers' lines addressed by a stride from the first (hoist3.patch, on
# hoist2: branch pushed-compact; the fast path's code 13.8 → 11.6 KB), against the base, in turn;
# where the time goes with the first (bench_mp_hoistmarks: fmarks.patch on hoist.patch); the
# multi-process tests on each; what straight-line code costs a
# launch (mps_floor's mode `code`: 2, 8, 32 KiB run once or twice, 1 and 8 processes).
#   collcomm_bench_mp 1d4c585 (the base); bench_mp_hoist, bench_mp_hoist2, bench_mp_hoist3;
#   bench_mp_hoistmarks; test_gpu_mp_hoist, test_gpu_mp_hoist2, test_gpu_mp_hoist3; mps_floor
#   bash bench/results/params_2026-12-07/run3.sh OUT
# Binaries: .deps/bins3.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run3.sh OUT}
LIMIT=${LIMIT:-380}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
ab() {  # ROUND
  for v in collcomm_bench_mp bench_mp_hoist bench_mp_hoist2 bench_mp_hoist3; do one_shot_latency $v 8 1; one_shot_latency $v 2 1; one_shot_latency $v 8 0; one_shot_latency $v 4 1; done >> "$OUT/latency.txt" 2>&1
  echo "[$SECONDS s] A/B round $1: $(grep -c 'rc=0' "$OUT/latency.txt") runs rc=0 so far" | summary
}
time_left 60 "A/B round 1" && ab 1
test_run test_gpu_mp_hoist2 hoist2_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 60
test_run test_gpu_mp_hoist3 hoist3_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 60
pushed_marks bench_mp_hoistmarks
time_left 60 "A/B round 2" && ab 2
test_run test_gpu_mp_hoist hoist_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 60
test_run test_gpu_mp_hoist2 hoist2_every 'mp: every*' 120
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
for n in 1 8; do
  for kb in 2 8 32; do
    for passes in 1 2; do
      time_left 10 "mps_floor code" || break 3
      timeout 30 $B/mps_floor $n code 200 9 graph 0 0 512 $kb $passes
      echo "rc=$?"
    done
  done
done > "$OUT/mps_floor_code.txt" 2>&1
grep -h "mps_floor n=" "$OUT/mps_floor_code.txt" | sed 's/ \[[1-9][0-9]*\] [^ ]* ([^)]*)//g' | summary
