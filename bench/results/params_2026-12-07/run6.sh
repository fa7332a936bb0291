#!/usr/bin/env bash
# Device call 6: the pushed call's common path rewritten short (branch pushed-lean: pushed_call.cuh;
# pairs (peer, line) spread over the block's threads, the launch's parameters read into registers,
# no block state in local memory) against branch pushed-compact; the multi-process tests on it.
# Where the time goes in it (bench_mp_leanmarks: leanmarks.patch, clock marks of thread 0: 1 entry,
# 8 range, 9 input lines issued, 10 windows issued, 11 loads issued, 12 after __syncthreads, 2 count
# advanced, 3 stores issued, 13 headers checked, 4 = 14 lines polled, 5 after __syncthreads_or,
# 6 output written; print_marks names the spans 1-8 "enter", 8-9 "line", 9-10 "windows",
# 10-11 "t0loads", 11-12 "bar", 12-2 "adv", 12-13 "again" (to the headers checked), 13-14 "area"
# (the lines polled)).
#   bench_mp_hoist3 (pushed-compact), bench_mp_lean, bench_mp_leanmarks, test_gpu_mp_lean
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
test_run test_gpu_mp_lean lean_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
time_left 60 "A/B round 1" && ab_one_shot 1 bench_mp_hoist3 bench_mp_lean
pushed_marks bench_mp_leanmarks
time_left 60 "A/B round 2" && ab_one_shot 2 bench_mp_hoist3 bench_mp_lean
test_run test_gpu_mp_lean lean_every 'mp: every*' 150
test_run test_gpu_mp_lean lean_all '*' 200
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
