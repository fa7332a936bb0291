#!/usr/bin/env bash
# Device call 15: main's pushed kernel (bench_mp_fold2, e26410d: byte for byte main's) against
# branch pushed-fold-batch (bench_mp_batch, 094e3ef: a thread's first batch of four pairs awaited
# with its peer's header) and branch pushed-nobarrier (bench_mp_nb: a call of at most a pair a
# thread stores with no barrier before, each thread loading what it uses itself), three rounds in
# turn; each branch's multi-process tests; pushed-nobarrier among 8 processes on 2, 4 and 8 channels.
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
for c in 2 4 8; do  # more channels: a call's lines spread over more blocks (8 processes, from a graph)
  time_left 60 "channels $c" || break
  { echo "== bench_mp_nb n=8 one_shot -C $c graph=1"
    timeout 40 "$B/bench_mp_nb" -n 8 -k all_reduce -a one_shot -C $c -b 8 -e 8K -f 4 -G 1 -w 50 -i 200
    echo "rc=$?"; } >> "$OUT/channels.txt" 2>&1
done
echo "[$SECONDS s] channels: $(grep -c 'rc=0' "$OUT/channels.txt") runs rc=0" | summary
test_run test_gpu_mp_nb nb_every 'mp: every*' 120
test_run test_gpu_mp_batch batch_every 'mp: every*' 120
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
