#!/usr/bin/env bash
# One device session's runs on an H100 (the `run` tool's nvidia-h100-x1), binaries prebuilt in
# .deps/bin (scripts/build_gpu_here.sh):
#   bash bench/results/h100_2026-12-05/run.sh OUT sweep SECONDS   the copy loop's loads in flight (collcomm_bench_cu1/_cu2 against collcomm_bench:
#        1, 2, 4 vectors per thread; where those are in BIN), the launch's host cost with
#        COOPERATIVE="1 0", then bench/tune.py's GPU sweep of every kind at 2, 4 and 8
#        ranks (KINDS, RANKS; arms of protocol simple and ll, MAX bytes, ROUNDS rounds, KEEP; GRAPH=1:
#        calls replayed from a CUDA graph), each into tune_KIND_rN
#   bash bench/results/h100_2026-12-05/run.sh OUT verify SECONDS  automatic beside the sweep's
#        winners (SWEEP: the merged sweep folder, carried; ROUNDS, default 2), one (kind, rank count) at a time
# Both first run GPU tests (TESTS). Everything lands in a work folder packed into OUT/runs.tgz; OUT/summary.txt has each step's exit
# status and time.
set -u
OUT=${1:?usage: run.sh OUT sweep|verify [SECONDS]}
WHAT=${2:?}
BUDGET=${3:-540}
. bench/scripts/common.sh
chmod +x "$BIN"/* 2>/dev/null
W=/tmp/work/$WHAT
mkdir -p "$W"
record_env "$W"
S="$OUT/summary.txt"
step() { echo "$*" | tee -a "$S"; }
pack() { tar czf "$OUT/runs.tgz" -C /tmp/work .; }
trap pack EXIT
for t in ${TESTS:-test_gpu_sched_rooted test_gpu_sched_moving}; do
  t0=$SECONDS
  timeout 120 "$BIN/$t" > "$W/$t.log" 2>&1
  step "$t rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] test cases' "$W/$t.log" | tr -s ' ')"
done
if [[ $WHAT == sweep ]]; then
  [[ -x $BIN/collcomm_bench_cu1 ]] && {
    for args in "-k all_gather -a direct -r 8" "-k all_gather -a direct -r 2" "-k all_reduce -a two_shot -r 8" \
                "-k all_reduce -a two_shot -r 2" "-k broadcast -a direct -r 8" "-k broadcast -a direct -r 2"; do
      for v in cu1 cu2 cu4; do
        b=$BIN/collcomm_bench_$v; [[ $v == cu4 ]] && b=$BIN/collcomm_bench
        echo "\$ [$v] $args"
        # shellcheck disable=SC2086
        timeout 60 "$b" $args -b 16M -e 256M -f 4 -n 20 -w 3 -R 3 -c 1 --check-max 16M --no-in-place --json |
          sed "s/^{/{\"variant\":\"$v\",/"
      done
    done
  } > "$W/copy_unroll.txt" 2>&1
  [[ -x $BIN/collcomm_bench_cu1 ]] && python3 - "$W/copy_unroll.txt" <<'PY' | tee -a "$S"
import json, sys, collections
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        t[(d["kind"], d["algo"], d["ranks"], d["bytes"])][d["variant"]] = (d["time_us"], d["mem_frac"], d["wrong"])
for k, v in sorted(t.items()):
    print(" ".join(map(str, k)), "  ".join(f"{n}: {x[0]:.1f} us {x[1]*100:.1f}% w{x[2]}" for n, x in sorted(v.items())))
PY
  step "copy variants done at $SECONDS s"
  # The grouped launch's host cost (stream-launched one_shot, 8 ranks): cooperative or plain launch.
  for coop in ${COOPERATIVE:-}; do
    COLLCOMM_GPU_COOPERATIVE=$coop timeout 60 "$BIN/collcomm_bench" -k all_reduce -a one_shot -C 1 -r 8 -b 8 -e 8K \
      -f 32 -n 50 -w 5 -R 5 -c 1 --no-in-place --json | sed "s/^{/{\"cooperative\":$coop,/" >> "$W/launch.txt" 2>&1
  done
  [[ -n ${COOPERATIVE:-} ]] && grep -o '"cooperative":[01].*"bytes":[0-9]*\|"time_us":[0-9.]*\|"host_us":[0-9.]*' "$W/launch.txt" | paste - - - |
    sed 's/,"kind.*"ranks_per_gpu//' | tee -a "$S"
fi
for kind in ${KINDS:-all_reduce reduce_scatter all_gather broadcast reduce}; do
  for r in ${RANKS:-2 4 8}; do
    (( SECONDS < BUDGET - 15 )) || { step "skipped (time): $kind $r"; continue; }
    d=$W/tune_${kind}_r$r
    args=(gpu --bench "$BIN/collcomm_bench" --ranks "$r" --kinds "$kind" --max-bytes "${MAX:-256M}" --ll-max 8M
          --reps 3 --timeout 60 --out "$d" --header "$d/nvlink.hpp" --only-arms "${ONLY_ARMS:-^[^/]+/(simple|ll)/}"
          --keep "${KEEP:-0.03}")
    [[ -n ${GRAPH:-} ]] && args+=(--graph)
    if [[ $WHAT == verify ]]; then
      mkdir -p "$d" && cp "${SWEEP:?}/sweep.json" "$d/" && args+=(--verify --rounds "${ROUNDS:-2}")
    else
      args+=(--rounds "${ROUNDS:-1}")
    fi
    t0=$SECONDS
    timeout $((BUDGET - SECONDS)) python3 bench/tune.py "${args[@]}" > "$d.log" 2>&1
    step "$WHAT $kind r$r rc=$? ($((SECONDS - t0)) s) $(tail -1 "$d.log")"
  done
done
