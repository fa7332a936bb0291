#!/usr/bin/env bash
# Device call 10.
# Threads of one process (no MPS): branch grouped-lean (aa57cef: a small one_shot all_reduce of a
# launch that carries every rank, in registers, kernels/grouped_call.cuh) against main (ff9a0a9):
# its tests (test_gpu_one_shot, test_gpu_api), then collcomm_bench narrowed to one_shot all_reduce
# f32 (-DCOLLCOMM_BENCH_KINDS=kind::all_reduce -DCOLLCOMM_BENCH_ALGOS=algo::one_shot
# -DCOLLCOMM_BENCH_TYPES=float), 1 channel, 8 B-8 KiB, 8/4/2 ranks from a graph and 8 stream-launched,
# two rounds in turn.
# Processes (under MPS): branch pushed-fold against pushed-lean-one (b9bbaae, run9's "one"), three
# rounds in turn, and fold2's multi-process tests (pushed, disagreement and abort cases, `mp:
# every*`, then every case while time is left).
#   bench_mp_one (b9bbaae), bench_mp_fold (da7151b: a thread of at most a pair awaits its pair's
#   line and its peer's header at once), bench_mp_fold2 and test_gpu_mp_fold2 (e26410d: and the
#   reduction's loads without a branch); bench_thr_base (ff9a0a9), bench_thr_grp, test_gpu_one_shot
#   and test_gpu_api_grp (aa57cef; test_gpu_one_shot of 39e47d6)
#   bash bench/results/params_2026-12-07/run10.sh OUT
# Binaries: .deps/bins10.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run10.sh OUT}
LIMIT=${LIMIT:-540}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
gtest() {  # BINARY LOG LIMIT: a GPU test of threads, whole
  time_left 25 "$1" || return 1
  ( time timeout "$3" "$B/$1" ) > "$OUT/$2.log" 2>&1
  echo "[$SECONDS s] $1 rc=$? $(doctest_counts "$OUT/$2.log")" | summary
}
gtest test_gpu_one_shot one_shot 150
gtest test_gpu_api_grp api 150
A="-k all_reduce -a one_shot -b 8 -e 8K -f 4 -n 50 -w 10 -R 5 -c 1 -C 1"
for r in 1 2; do
  time_left 60 "threads round $r" || break
  for v in bench_thr_base bench_thr_grp; do
    for args in "-r 8 -G" "-r 4 -G" "-r 2 -G" "-r 8"; do
      echo "== $v $args"; timeout 60 "$B/$v" $A $args; echo "rc=$?"
    done
  done >> "$OUT/threads.txt" 2>&1
  echo "[$SECONDS s] threads round $r: $(grep -c 'rc=0' "$OUT/threads.txt") runs rc=0 so far" | summary
done
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp_fold2 fold2_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
for r in 1 2 3; do time_left 40 "A/B round $r" && ab_one_shot $r bench_mp_one bench_mp_fold bench_mp_fold2; done
test_run test_gpu_mp_fold2 fold2_every 'mp: every*' 150
test_run test_gpu_mp_fold2 fold2_all 'mp:*,mp fault*' $((LIMIT - SECONDS - 20))
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
