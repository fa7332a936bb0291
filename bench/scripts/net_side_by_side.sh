#!/usr/bin/env bash
# bench/scripts/net_side_by_side.sh — collcomm over net<socket> beside Gloo (TCP transport) and
# Open MPI (TCP BTL, ob1), host buffers, f32 sum, ranks in two network namespaces joined by a veth
# pair (each namespace stands for one host). Needs root (ip netns), libgloo-dev, openmpi-bin and
# libopenmpi-dev.
#
# For each rank count (2: one per namespace; 4: two per namespace, ranks 0..n/2-1 in the first)
# and each round, runs collcomm, Gloo and MPI one after the other over the same sizes, each rank's
# output in $out/<lib>_n<ranks>_r<round>.rank<r>.log (rank 0's holds the table), then writes the
# side-by-side table ($out/table.md, bench/net/side_by_side.py).
#
# Ranks: collcomm and Gloo are started here, one process per rank under `ip netns exec`; MPI is
# started by mpirun inside the first namespace with a hostfile of the two addresses and an rsh agent
# that maps each address to its namespace (plm_rsh_agent), so orted and the ranks of the second
# host run in the second namespace and reach mpirun over the veth.
#
# Environment (defaults):
#   BUILD=build-net  OUT=bench/results/net_<host>_<date>  RANKS="2 4"  LIBS="collcomm gloo mpi"
#   ROUNDS=1  MAX_BYTES=256M  STEP=2  COLLS=all_reduce
#   CC_OPTS="" (collcomm_net_bench options, e.g. "--slot-bytes 1M --slots 4 --streams 2")
#   QUIET_IDLE=85 (percent idle CPU awaited, at most QUIET_WAIT=120 s, before each run)
#   NO_BUILD=1 skips the build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
BUILD="${BUILD:-build-net}"
OUT="${OUT:-bench/results/net_$(hostname -s)_$(date +%Y-%m-%d)}"
RANKS="${RANKS:-2 4}"
LIBS="${LIBS:-collcomm gloo mpi}"
ROUNDS="${ROUNDS:-1}"
MAX_BYTES="${MAX_BYTES:-256M}"
STEP="${STEP:-2}"
COLLS="${COLLS:-all_reduce}"
CC_OPTS="${CC_OPTS:-}"
QUIET_IDLE="${QUIET_IDLE:-85}"
QUIET_WAIT="${QUIET_WAIT:-120}"
mkdir -p "$OUT"

if [[ -z "${NO_BUILD:-}" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-$root/.deps/prefix}" \
    -DCOLLCOMM_BUILD_TESTS=OFF -DCOLLCOMM_BUILD_EXAMPLES=OFF -DCOLLCOMM_BUILD_NET_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target collcomm_net_bench gloo_bench mpi_bench
fi
bin="$root/$BUILD/bench/net"

# Two namespaces and a veth pair; names and subnet unique to this run, removed on exit.
tag="ccn$$"
nsa="${tag}a" nsb="${tag}b"
net="10.$((100 + $$ % 100)).$(( ($$ / 100) % 250 ))"
addr_a="$net.1" addr_b="$net.2"
work="$(mktemp -d /tmp/${tag}.XXXX)"
cleanup() {
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$nsb" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$nsa"
ip netns add "$nsb"
ip link add "${nsa}0" type veth peer name "${nsb}0"
ip link set "${nsa}0" netns "$nsa"
ip link set "${nsb}0" netns "$nsb"
ip -n "$nsa" addr add "$addr_a/24" dev "${nsa}0"
ip -n "$nsb" addr add "$addr_b/24" dev "${nsb}0"
for ns in "$nsa" "$nsb"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${ns}0" up
done

cat >"$work/agent.sh" <<AGENT
#!/bin/sh
# mpirun's rsh agent: "agent [options] host command..." runs command in host's namespace.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host=\$1; shift
case "\$host" in $addr_a) ns=$nsa;; $addr_b) ns=$nsb;; *) echo "agent: unknown host \$host" >&2; exit 1;; esac
exec ip netns exec \$ns /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent.sh"

# Waits (at most QUIET_WAIT s) until the CPUs are QUIET_IDLE % idle over one second; prints the idle.
idle_pct() {
  local a b
  read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ < /proc/stat
  sleep 1
  read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ < /proc/stat
  local busy=$(( (u2-u1)+(n2-n1)+(s2-s1)+(q2-q1)+(sq2-sq1)+(st2-st1) )) idle=$(( (i2-i1)+(w2-w1) ))
  echo $(( 100 * idle / (busy + idle + 1) ))
}
wait_quiet() {
  local t0=$SECONDS p
  while :; do
    p=$(idle_pct)
    if (( p >= QUIET_IDLE || SECONDS - t0 >= QUIET_WAIT )); then echo "$p"; return; fi
  done
}

sweep_args=(--max-bytes "$MAX_BYTES" --step "$STEP" --colls "$COLLS")
port=$((20000 + $$ % 20000))

run_lib() {  # lib nranks round
  local lib=$1 n=$2 round=$3 log="$OUT/${1}_n${2}_r${3}" idle
  idle=$(wait_quiet)
  local start=$SECONDS
  case $lib in
    collcomm|gloo)
      local pids=() r ns addr ifn store="$work/store_${n}_${round}"
      mkdir -p "$store"
      port=$((port + 1))
      for ((r = 0; r < n; r++)); do
        if (( r < n / 2 )); then ns=$nsa addr=$addr_a; else ns=$nsb addr=$addr_b; fi
        ifn="${ns}0"
        if [[ $lib == collcomm ]]; then
          ip netns exec "$ns" env RANK=$r WORLD_SIZE=$n MASTER_ADDR=$addr_a MASTER_PORT=$port \
            "$bin/collcomm_net_bench" --ifname "$ifn" "${sweep_args[@]}" $CC_OPTS >"$log.rank$r.log" 2>&1 &
        else
          ip netns exec "$ns" env RANK=$r WORLD_SIZE=$n \
            "$bin/gloo_bench" --store "$store" --addr "$addr" "${sweep_args[@]}" >"$log.rank$r.log" 2>&1 &
        fi
        pids+=($!)
      done
      local rc=0
      for p in "${pids[@]}"; do wait "$p" || rc=$?; done
      ;;
    mpi)
      printf '%s slots=%d\n%s slots=%d\n' "$addr_a" $((n / 2)) "$addr_b" $((n / 2)) >"$work/hosts"
      local rc=0
      ip netns exec "$nsa" mpirun --allow-run-as-root -np "$n" --hostfile "$work/hosts" --map-by slot \
        --mca plm_rsh_agent "$work/agent.sh" --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
        "$bin/mpi_bench" "${sweep_args[@]}" >"$log.rank0.log" 2>&1 || rc=$?
      ;;
  esac
  echo "# cpu idle before the run: ${idle}%; wall: $((SECONDS - start)) s; exit: $rc" >>"$log.rank0.log"
  echo "$lib n=$n round=$round: exit $rc, $((SECONDS - start)) s (idle before: ${idle}%)"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include bench/net || echo ' (with local changes)')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus; kernel $(uname -r)"
  echo "namespaces: $nsa ($addr_a), $nsb ($addr_b), veth mtu $(ip -n "$nsa" -o link show "${nsa}0" | sed -n 's/.*mtu \([0-9]*\).*/\1/p')"
  echo "command: RANKS='$RANKS' LIBS='$LIBS' ROUNDS=$ROUNDS MAX_BYTES=$MAX_BYTES STEP=$STEP COLLS=$COLLS CC_OPTS='$CC_OPTS' $0"
} | tee "$OUT/run_info.txt"

for n in $RANKS; do
  for ((round = 1; round <= ROUNDS; round++)); do
    for lib in $LIBS; do run_lib "$lib" "$n" "$round" | tee -a "$OUT/run_info.txt"; done
  done
done
python3 "$root/bench/net/side_by_side.py" "$OUT" | tee "$OUT/table.md"
