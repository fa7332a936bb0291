#!/usr/bin/env bash
# The table with all_gather's 1024-thread arm: test_gpu_api built with it, then bench/tune.py
# --verify of all_gather at 2, 4 and 8 ranks (the narrow bench built with it, .deps/bin/bench_ag2):
# stream-launched (2 rounds, to 1 GiB) against the merged stream sweep, and from a CUDA graph (2
# rounds, to 4 MiB) against the merged graph sweep.
#   bash bench/results/copy_ll128_2026-12-06/run8.sh OUT
set -u
OUT=${1:?usage: run8.sh OUT}
R=bench/results/copy_ll128_2026-12-06
timeout 300 .deps/bin/test_gpu_api > "$OUT/test_gpu_api.txt" 2>&1
echo "test_gpu_api rc=$? $(tail -n 2 "$OUT/test_gpu_api.txt" | tr '\n' ' ')"
for mode in stream graph; do
  for r in 2 4 8; do
    d=$OUT/verify_$mode/r$r
    mkdir -p "$d"
    if [[ $mode == stream ]]; then cp $R/table/sweep.json "$d/"; extra=(); else cp $R/graph_merged/sweep.json "$d/"; extra=(--graph --max-bytes 4M); fi
    python3 bench/tune.py gpu --bench .deps/bin/bench_ag2 --ranks $r --kinds all_gather --timeout 200 --out "$d" \
      --header "$d/nvlink.hpp" --verify --rounds 2 "${extra[@]}" > "$d.log" 2>&1
    echo "$mode r$r rc=$? $(tail -n 1 "$d.log")"
  done
done
tar -czf "$OUT/verify.tgz" -C "$OUT" verify_stream verify_graph && rm -rf "$OUT/verify_stream" "$OUT/verify_graph"
