#!/usr/bin/env bash
# Large-message bandwidth among ranks as threads on one GPU (collcomm_bench, f32), against the
# copy bandwidth each run measures (the mem% column), logs under OUT.
#   bash bench/scripts/bandwidth.sh OUT [ring|slots|algorithms]
# ring (default): the figures of bench/RESULTS.md's bandwidth table: all_reduce, reduce_scatter,
#   all_gather and broadcast with the ring, 16 B to 1 GiB (factor 4), 1 MiB slots, ranks x
#   channels = 128 blocks (8 ranks x 16, 4 x 32, 2 x 64), 20 calls per repetition (5 from
#   64 MiB), median of 3. -> OUT/ring_R.txt per rank count R
# slots: the slot size and channel count at 8 ranks: all_reduce, reduce_scatter and broadcast
#   16 MiB to 1 GiB with 16 channels and 256 KiB or 1 MiB slots; all_reduce 256 MiB with 8 or 16
#   channels and 64 KiB, 256 KiB or 1 MiB slots. -> OUT/slots.txt
# algorithms: all_reduce 1 MiB to 1 GiB with two_shot and tree, and the ring with bf16, 8 ranks.
#   -> OUT/algorithms.txt
# MAXB (default 1G) caps the largest size. BIN: where collcomm_bench is (scripts/common.sh).
set -u
out=${1:?usage: bandwidth.sh OUT [ring|slots|algorithms]}
what=${2:-ring}
. "$(dirname "$0")/common.sh"
record_env "$out"
maxb=${MAXB:-1G}
case $what in
  ring)
    for rc in "8 16" "4 32" "2 64"; do
      set -- $rc
      for k in all_reduce reduce_scatter all_gather broadcast; do
        T=150 bench -k $k -a ring -r $1 -b 16 -e "$maxb" -f 4 -n 20 -w 3 -R 3 -c 1 -C $2 -s 1M
      done > "$out/ring_$1.txt" 2>&1
    done
    ;;
  slots)
    {
      for s in 256K 1M; do
        for k in all_reduce reduce_scatter broadcast; do
          T=100 bench -k $k -a ring -r 8 -b 16M -e "$maxb" -f 4 -n 10 -w 2 -R 3 -c 1 -C 16 -s $s
        done
      done
      for C in 8 16; do
        for s in 64K 256K 1M; do
          bench -k all_reduce -a ring -r 8 -b 256M -e 256M -n 5 -w 2 -R 3 -c 0 -C $C -s $s
        done
      done
    } > "$out/slots.txt" 2>&1
    ;;
  algorithms)
    {
      for a in two_shot tree; do
        T=120 bench -k all_reduce -a $a -r 8 -b 1M -e "$maxb" -f 8 -n 10 -w 2 -R 3 -c 1
      done
      T=120 bench -k all_reduce -a ring -t bf16 -r 8 -b 1M -e "$maxb" -f 8 -n 10 -w 2 -R 3 -c 1
    } > "$out/algorithms.txt" 2>&1
    ;;
  *)
    echo "bandwidth.sh: '$what' is not ring, slots or algorithms" >&2
    exit 2
    ;;
esac
grep -h "^# exit" "$out"/*.txt | sort | uniq -c
