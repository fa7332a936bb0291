#!/usr/bin/env bash
# Device call 14: branch pushed-fold-batch (094e3ef: pushed calls of more pairs than threads — 2 KiB
# of f32 among 8 processes — await a thread's peer header with its first batch of lines, at once)
# against main's pushed kernel (bench_mp_fold2, e26410d: byte for byte main's), three rounds in
# turn, and the branch's multi-process tests.
#   bash bench/results/params_2026-12-07/run14.sh OUT   (binaries: .deps/bins14.tar.xz, unpacked into .deps/bin)
set -u
OUT=${1:?usage: run14.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp_batch batch_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
for r in 1 2 3; do time_left 40 "A/B round $r" && ab_one_shot $r bench_mp_fold2 bench_mp_batch; done
test_run test_gpu_mp_batch batch_every 'mp: every*' 150
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
