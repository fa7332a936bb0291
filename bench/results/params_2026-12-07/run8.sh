#!/usr/bin/env bash
# Device call 8: the pushed call's short path, third version (branch pushed-lean at 8b32883: as
# 7276604, but a thread's pairs polled after the headers, those not there yet loaded again
# together), and that with the stores one pair at a time as in 8c6dc69 (lean3b), against the first
# version (8c6dc69) and pushed-compact; its multi-process tests.
#   bench_mp_hoist3, bench_mp_lean (8c6dc69), bench_mp_lean3 and test_gpu_mp_lean3 (8b32883),
#   bench_mp_lean3b (8b32883 with 8c6dc69's store loop)
#   bash bench/results/params_2026-12-07/run8.sh OUT
# Binaries: .deps/bins8.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run8.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp_lean3 lean3_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
time_left 60 "A/B round 1" && ab_one_shot 1 bench_mp_hoist3 bench_mp_lean bench_mp_lean3 bench_mp_lean3b
time_left 60 "A/B round 2" && ab_one_shot 2 bench_mp_hoist3 bench_mp_lean bench_mp_lean3 bench_mp_lean3b
test_run test_gpu_mp_lean3 lean3_every 'mp: every*' 150
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
