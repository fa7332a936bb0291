#!/usr/bin/env bash
# Protocol ll128, second look: the GPU tests of ll128, a counting build (poll iterations and clock
# cycles per poll, per step and in the send-slot wait, printed by the kernel), ring ll128's
# time against its slot size and channel count (simple beside it), and the builds in EXTRA (a
# space-separated list of benches: kernel variants) with the defaults. SHORT=1: fewer settings.
#   [EXTRA="B1 B2"] bash bench/results/ll128_2026-12-06/run2.sh OUT BENCH PROBE_BENCH [TEST]
set -u
OUT=${1:?usage: run2.sh OUT BENCH PROBE_BENCH [TEST]}
B=$2
P=$3
T=${4:-}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
[ -n "$T" ] && { timeout 300 "$T" > "$OUT/test_ll128.txt" 2>&1; echo "test rc=$?" >> "$OUT/test_ll128.txt"; }
for r in 2 8; do
  timeout 60 "$P" -k all_reduce -a ring -p ll128 -r $r -b 32M -e 32M -n 4 -w 2 -R 1 -c 0 --no-in-place \
    > "$OUT/probe_r$r.txt" 2>&1
done
run() { echo "== $(basename "${BIN:-$B}") $*" >> "$OUT/sizes.txt"; timeout 60 "${BIN:-$B}" -k all_reduce -a ring -r "$@" -b 32M -e 128M -f 4 -c 0 -R 3 \
  --no-in-place 2>&1 | grep -E "^ +[0-9]" >> "$OUT/sizes.txt"; }
for r in 2 8; do
  run $r -p simple -s 1M
  run $r -p ll128
  run $r -p ll128 -s 1M
  [ "${SHORT:-0}" = 1 ] && continue
  run $r -p simple
  run $r -p ll128 -s 64K
  for c in 4 8; do run $r -p ll128 -C $c; done
done
for x in ${EXTRA:-}; do
  for r in 2 8; do BIN=$x run $r -p ll128; done
done
tail -n 4 "$OUT"/probe_r*.txt
