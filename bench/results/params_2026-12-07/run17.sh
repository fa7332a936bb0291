#!/usr/bin/env bash
# Device call 17: main's pushed kernel (bench_mp_nb, 4cd4247: no barrier before a call of at most a
# pair a thread) against branch pushed-nb-batch (bench_mp_comb: with it, a thread's first batch of
# four pairs awaited with its peer's header) and branch pushed-channels (bench_mp_ch, 7c38ac4: the
# same, and calls spread over channels pushed up to 8 KiB per rank, at most 4 KiB and 16 KiB to all
# peers on each channel), three rounds in turn on one channel; both branches on 2, 4 and 8 channels
# among 8, 4 and 2 processes; each branch's multi-process tests.
#   bash bench/results/params_2026-12-07/run17.sh OUT   (binaries: .deps/bins17.tar.xz, unpacked into .deps/bin)
set -u
OUT=${1:?usage: run17.sh OUT}
LIMIT=${LIMIT:-540}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
start_mps && echo "MPS daemon started" | summary
for v in ch comb; do
  test_run test_gpu_mp_$v ${v}_pushed 'mp: pushed*,mp fault: processes that disagree*,mp fault: a pushed*' 90
done
for r in 1 2 3; do time_left 120 "A/B round $r" && ab_one_shot $r bench_mp_nb bench_mp_comb bench_mp_ch; done
for n in 8 4 2; do
  for c in 2 4 8; do
    for v in comb ch; do
      time_left 100 "channels" || break 3
      { echo "== bench_mp_$v n=$n one_shot -C $c graph=1"
        timeout 40 "$B/bench_mp_$v" -n $n -k all_reduce -a one_shot -C $c -b 8 -e 8K -f 4 -G 1 -w 50 -i 200
        echo "rc=$?"; } >> "$OUT/channels.txt" 2>&1
    done
  done
done
echo "[$SECONDS s] channels: $(grep -c 'rc=0' "$OUT/channels.txt") runs rc=0" | summary
for v in ch comb; do test_run test_gpu_mp_$v ${v}_every 'mp: every*' 150; done
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
