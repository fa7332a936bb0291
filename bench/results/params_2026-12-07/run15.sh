#!/usr/bin/env bash
# Device call 15: main's pushed kernel (bench_mp_fold2, e26410d: byte for byte main's) against
# branch pushed-fold-batch (bench_mp_batch, 094e3ef: a thread's first batch of four pairs awaited
# with its peer's header) and branch pushed-nobarrier (bench_mp_nb: a call of at most a pair a
# thread stores with no barrier before, each thread loading what it uses itself), three rounds in
# turn; each branch's multi-process tests.
#   bash bench/results/params_2026-12-07/run15.sh OUT   (binaries: .deps/bins14.tar.xz and
#   .deps/bins15.tar.xz, unpacked into .deps/bin)
set -u
OUT=${1:?usage: run15.sh OUT}
LIMIT=${LIMIT:-560}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
test_run test_gpu_mp_nb nb_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
test_run test_gpu_mp_batch batch_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
for r in 1 2 3; do time_left 60 "A/B round $r" && ab_one_shot $r bench_mp_fold2 bench_mp_batch bench_mp_nb; done
test_run test_gpu_mp_nb nb_every 'mp: every*' 120
test_run test_gpu_mp_batch batch_every 'mp: every*' 120
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
