#!/usr/bin/env bash
# The grouped launch's rendezvous among ranks of one GPU (threads), before and after its waiters
# sleep on a doorbell instead of a condition variable, and with longer polls: small all_reduce,
# one_shot, stream-launched, 4 and 8 ranks; old = collcomm_bench of the commit before, new = this
# tree's (COLLCOMM_GPU_RENDEZVOUS_SPIN_US sets the new one's poll); then the GPU tests that cover
# the rendezvous (a rank that never joins, ranks that disagree). OUT: the log folder.
#   bash bench/results/rendezvous_2026-12-05/run.sh OUT
# Logs go to a work folder packed into OUT/runs.tgz (the device returns 8 files at most); the
# tables and the tests' counts also into OUT/summary.txt.
set -u
FINAL=$1
OUT=/tmp/work/rendezvous
mkdir -p "$OUT"
trap 'tar czf "$FINAL/runs.tgz" -C /tmp/work rendezvous; cat "$OUT/summary.txt" "$OUT/table.txt" "$OUT/table_bw.txt" > "$FINAL/summary.txt" 2>/dev/null' EXIT
. bench/scripts/common.sh
record_env "$OUT"
chmod +x .deps/bin/* 2>/dev/null
{ nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; lscpu | grep -E "^CPU\(s\)|Model name|Thread|NUMA node\(s\)"; } > "$OUT/cpu.txt" 2>&1
for t in ${TESTS:-test_gpu_fault test_gpu_api test_gpu_sched_reducing}; do
  t0=$SECONDS
  timeout 120 ".deps/bin/$t" > "$OUT/$t.log" 2>&1
  echo "$t rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] test cases' "$OUT/$t.log")" >> "$OUT/summary.txt"
done
small=(-k all_reduce -a one_shot -C 1 -b 8 -e 2M -f 4 -n 20 -w 5 -R 5 -c 1 --check-max 64K --no-in-place --json)
run() {  # LABEL BIN ARGS...: one bench run, its JSON lines tagged with LABEL
  local label=$1 b=$2
  shift 2
  echo "\$ [$label] $b $*"
  timeout 60 "$b" "$@" | sed "s/^{/{\"label\":\"$label\",/"
  echo "# exit $?"
}
{
  for r in 8 4; do
    for round in 1 2 3; do
      run "old r$r" .deps/bin/collcomm_bench_old "${small[@]}" -r $r
      run "new r$r" .deps/bin/collcomm_bench "${small[@]}" -r $r
      COLLCOMM_GPU_RENDEZVOUS_SPIN_US=2000 run "new spin2000 r$r" .deps/bin/collcomm_bench "${small[@]}" -r $r
    done
    run "new graph r$r" .deps/bin/collcomm_bench "${small[@]}" -r $r -G
  done
} > "$OUT/rendezvous.txt" 2>&1
# Direct algorithms' data path, old against new (loads in flight per thread), large sizes.
{
  for round in 1 2; do
    for args in "-k all_reduce -a two_shot -r 8" "-k all_reduce -a two_shot -r 2" "-k all_reduce -a one_shot -r 8" \
                "-k all_gather -a direct -r 8" "-k reduce_scatter -a direct -r 8" "-k all_reduce -a one_shot -r 2"; do
      (( SECONDS < ${BUDGET:-480} )) || { echo "# skipped (time): $args"; continue; }
      for v in old new; do
        b=.deps/bin/collcomm_bench; [[ $v == old ]] && b=.deps/bin/collcomm_bench_old
        # shellcheck disable=SC2086
        run "$v $args" $b $args -b 16M -e 256M -f 4 -n 20 -w 3 -R 3 -c 1 --check-max 16M --no-in-place --json
      done
    done
  done
} > "$OUT/direct_bw.txt" 2>&1
python3 - "$OUT/rendezvous.txt" <<'PY' > "$OUT/table.txt"
import json, sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        t[(d["label"], d["bytes"])].append((d["time_us"], d.get("host_us", 0)))
for (label, b), v in sorted(t.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    print(f"{label:22s} {b:>9d} " + "  ".join(f"{x:8.1f}/{h:6.1f}" for x, h in v))
PY
python3 - "$OUT/direct_bw.txt" <<'PY' > "$OUT/table_bw.txt"
import json, sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        t[(d["label"].split(" ", 1)[1], d["bytes"], d["label"].split(" ")[0])].append((d["time_us"], d["mem_frac"], d["wrong"]))
for (what, b, v), x in sorted(t.items()):
    print(f"{what:36s} {b:>10d} {v:3s} " + "  ".join(f"{us:9.1f} {m*100:5.1f}% w{w}" for us, m, w in x))
PY
cat "$OUT/summary.txt" "$OUT/table.txt" "$OUT/table_bw.txt"
