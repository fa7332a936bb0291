#!/usr/bin/env bash
# Device call 7: the pushed call's short path, second version (branch pushed-lean at 7276604: the
# prologue's loads issued before its shared-memory stores, the first polls before the headers are
# awaited, stores gathered 4 at a time, the reduction loading 8 ranks' lines at once), against the
# first version (8c6dc69) and pushed-compact; its multi-process tests.
#   bench_mp_hoist3 (pushed-compact), bench_mp_lean (8c6dc69), bench_mp_lean2 and test_gpu_mp_lean2 (7276604)
#   bash bench/results/params_2026-12-07/run7.sh OUT
# Binaries: .deps/bins7.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run7.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp_lean2 lean2_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
time_left 60 "A/B round 1" && ab_one_shot 1 bench_mp_hoist3 bench_mp_lean bench_mp_lean2
time_left 60 "A/B round 2" && ab_one_shot 2 bench_mp_hoist3 bench_mp_lean bench_mp_lean2
test_run test_gpu_mp_lean2 lean2_every 'mp: every*' 150
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
