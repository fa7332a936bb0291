#!/usr/bin/env python3
"""bench/tune.py — writes algo::automatic's table for a transport from a sweep of the named arms.

For each rank count and kind it times every candidate arm (an algorithm with its protocol,
channels and slot bytes) at every size with the bench, picks the fastest arm per size, merges
neighbouring sizes into rules, and writes include/collcomm/tables/<transport>.hpp. With --verify it
then times algo::automatic (the table compiled in: rebuild the bench first) and the named arms that
won a size in the sweep, in turn in each of --rounds rounds, and writes verify.md: automatic against
the best of them at every size (the target: within 10 %).

  GPU (nvlink, ranks as threads on one GPU):
    python3 bench/tune.py gpu --bench build/bench/collcomm_bench --ranks 2,4,8 --out OUT
  host executor (host_shm, processes started by mpirun, beside MPI_Allreduce):
    python3 bench/tune.py host --bench build-net/bench/net/host_vs_mpi --ranks 2,4 --out OUT
  GPU over pcie_staged (ranks as threads on one GPU, connections in pinned host memory):
    python3 bench/tune.py pcie --bench .deps/bin/collcomm_bench_pcie --ranks 2,4,8 --max-bytes 128M --out OUT
  processes on one GPU (collcomm_bench_mp under MPS: bench/scripts/tune_mp.sh), small all_reduce
  from a CUDA graph, its channels the arm; its rules go first in the GPU table:
    python3 bench/tune.py mp --bench .deps/bin/collcomm_bench_mp --ranks 2,4,8 --max-bytes 8K --graph --out OUT_MP
    python3 bench/tune.py gpu --bench ... --out OUT --processes OUT_MP
  then, after rebuilding the bench with the new table:
    python3 bench/tune.py gpu ... --out OUT --verify

OUT keeps every raw log (raw/*.jsonl or raw/*.txt), sweep.json (every arm's median per size) and
the table's source line. --arms-only K limits the kinds; --max-bytes the sizes; --dry-run prints
the commands; --rounds R sweeps every arm R times, in turn, and takes the median; --resume takes
each run's output from its raw log where OUT has one (a sweep cut short, run again: only the
missing runs go; also a way to feed the parser logs written by hand). An arm whose time is
within --keep (default 3 %) of the arm chosen for the size below keeps that arm: fewer rules,
fewer kernels, and no flapping on noise. Small calls launched on streams all cost the launch's
host floor, whichever arm runs: --tiebreak DIR (a --graph sweep of the same arms, e.g. to 4M)
tells such ties (arms within --tie, default 10 %, of the fastest) apart by
their time from a CUDA graph, so that graph users get the arm that is fastest there.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap

KINDS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"]

# Candidate arms: (algorithm, protocol, channels, slot bytes[, threads per block]); 0 = the world's,
# threads 512 unless named. The 4-channel one_shot arm is for calls a few channels reduce in
# registers (kernels/grouped_call.cuh: a vector per thread and channel) sooner than one, with fewer
# blocks than the world's. The 32-channel one_shot and two_shot arms are for 2 ranks, whose worlds
# take 64: every rank reads every input, and fewer blocks at once may hit the L2 more (the bench
# refuses them where the world has fewer). Direct all_gather's copy loop keeps more loads in flight
# with 1024 threads (the bench builds 1024-thread kernels for algo::direct only).
GPU_ARMS = {
    "all_reduce": [("one_shot", "simple", 1, 0), ("one_shot", "simple", 4, 0), ("one_shot", "simple", 0, 0),
                   ("one_shot", "simple", 32, 0),
                   ("two_shot", "simple", 0, 0), ("two_shot", "simple", 32, 0),
                   ("ring", "ll", 1, 0), ("ring", "ll", 0, 0), ("tree", "ll", 4, 0), ("tree", "simple", 0, 1 << 20),
                   ("ring", "simple", 0, 1 << 20), ("recursive_doubling", "ll", 1, 0),
                   ("ring", "ll128", 0, 0), ("tree", "ll128", 0, 0)],
    "reduce_scatter": [("direct", "simple", 0, 0), ("ring", "ll", 1, 0), ("ring", "ll", 0, 0),
                       ("ring", "simple", 0, 1 << 20), ("ring", "ll128", 0, 0)],
    "all_gather": [("direct", "simple", 0, 0), ("direct", "simple", 0, 0, 1024), ("recursive_doubling", "ll", 1, 0),
                   ("ring", "ll", 1, 0), ("ring", "ll", 0, 0), ("ring", "simple", 0, 1 << 20), ("ring", "ll128", 0, 0)],
    "broadcast": [("direct", "simple", 0, 0), ("tree", "ll", 1, 0), ("tree", "ll", 0, 0), ("ring", "ll", 0, 0), ("tree", "simple", 0, 1 << 20),
                  ("ring", "simple", 0, 1 << 20), ("tree", "ll128", 0, 0), ("ring", "ll128", 0, 0)],
    "reduce": [("direct", "simple", 0, 0), ("tree", "ll", 1, 0), ("tree", "ll", 0, 0), ("ring", "ll", 0, 0), ("tree", "simple", 0, 1 << 20),
               ("ring", "simple", 0, 1 << 20), ("tree", "ll128", 0, 0), ("ring", "ll128", 0, 0)],
}
HOST_ARMS = {
    "all_reduce": [("ring", "simple", 1, 65536), ("ring", "simple", 1, 4096), ("ring", "simple", 2, 65536),
                   ("tree", "simple", 1, 65536), ("recursive_doubling", "simple", 1, 65536),
                   ("one_shot", "simple", 1, 65536), ("two_shot", "simple", 1, 65536)],
}
# pcie_staged: every arm names its slot bytes, and none more than the default world's 256 KiB, so
# that a rule runs as it was timed in a world of the default options (an arm's channels and slot
# bytes are upper bounds: algo::automatic runs them capped at the world's; the default world of 8
# ranks on a 132-SM GPU has 16 channels and 256 KiB slots). Ring with 64 KiB slots (fastest among 2
# ranks at 16-256 MiB in bench/RESULTS.md's pcie slot sweep) and 256 KiB (the default), on the
# world's channels and on 8 or 4 for mid sizes, where 32-64 channels cut a call into pieces too
# small; ll for latency (on 1 and 8 channels), tree and recursive_doubling where the kind has them.
# ll's lines are half flags, doubling the bytes over the link: swept to --ll-max (8M) only.
_PCIE_RING = [("ring", "simple", 0, 64 << 10), ("ring", "simple", 0, 256 << 10), ("ring", "simple", 8, 256 << 10),
              ("ring", "simple", 4, 64 << 10), ("ring", "ll", 1, 64 << 10), ("ring", "ll", 8, 64 << 10)]
_PCIE_TREE = [("tree", "ll", 1, 64 << 10), ("tree", "simple", 0, 256 << 10)]
PCIE_ARMS = {
    "all_reduce": _PCIE_RING + _PCIE_TREE + [("recursive_doubling", "ll", 1, 64 << 10)],
    "reduce_scatter": _PCIE_RING,
    "all_gather": _PCIE_RING + [("recursive_doubling", "ll", 1, 64 << 10)],
    "broadcast": _PCIE_RING + _PCIE_TREE,
    "reduce": _PCIE_RING + _PCIE_TREE,
}
# Processes on one GPU (collcomm_bench_mp, under MPS): small one_shot calls go pushed
# (transport::pushes), each channel's range in a block of its own, so the channel count is the arm;
# and its threads: 1024 take twice the (peer, line) pairs of a channel before a thread has two.
MP_ARMS = {"all_reduce": [("one_shot", "simple", c, 0) for c in (1, 2, 4, 8, 0)] +
           [("one_shot", "simple", c, 0, 1024) for c in (1, 2, 4, 0)]}
HEADERS = {"gpu": "include/collcomm/tables/nvlink.hpp", "host": "include/collcomm/tables/host_shm.hpp",
           "pcie": "include/collcomm/tables/pcie_staged.hpp"}
# The table's name (tables::NAME, collcomm/tables/NAME.hpp) and what it is for, per mode.
TABLES = {"gpu": ("nvlink", "the GPU executor over transport::nvlink"),
          "host": ("host_shm", "the host executor (transport::host_shm)"),
          "pcie": ("pcie_staged", "the GPU executor over transport::pcie_staged")}
LL_MAX = {"gpu": "64M", "pcie": "8M"}  # --ll-max's default
ALGO_HEADERS = {"ring": "ring", "tree": "tree", "recursive_doubling": "recursive_doubling", "one_shot": "one_shot",
                "two_shot": "two_shot", "direct": "direct"}
ELEM = {"f32": 4, "bf16": 2}
TIMEOUT_S = 300  # one bench run (--timeout)
REUSE = False  # --reuse


def parse_bytes(text):
    """'64M' -> 67108864 (the bench's K/M/G suffixes)."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def fields(a):
    """(algorithm, protocol, channels, slot bytes, threads per block) of an arm; threads 512 unless named."""
    return (*a, 512) if len(a) == 4 else tuple(a)


def arm_name(a):
    algo, proto, ch, sb, th = fields(a)
    return f"{algo}/{proto}/c{ch}/s{sb}" + (f"/t{th}" if th != 512 else "")


def parse_arm(name):
    algo, proto, ch, sb, *th = name.split("/")
    return (algo, proto, int(ch[1:]), int(sb[1:])) + ((int(th[0][1:]),) if th else ())


def rounds_by(meta):
    """{(kind, ranks): rounds} of a sweep's _meta, None keying the count of the rest. A merged sweep's
    "rounds" reads "3 (1 for reduce at 4 ranks, reduce at 8 ranks)"; a plain sweep's is a number."""
    text = str(meta.get("rounds"))
    m = re.match(r"(\d+)", text)
    out = {None: int(m.group(1)) if m else meta.get("rounds")}
    for n, where in re.findall(r"\((\d+) for ([^)]*)\)", text):
        for kind, r in re.findall(r"(\w+) at (\d+) ranks", where):
            out[(kind, int(r))] = int(n)
    return out


def run(cmd, dry, log):
    if REUSE and os.path.exists(log):  # --reuse: the log of an earlier run
        with open(log) as f:
            return f.read()
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if dry:
        return ""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        text, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    if rc != 0:  # kept apart, so that --resume and --reuse run it again rather than take it as whole
        log += ".failed"
        print(f"  exit {rc}; log {log}", flush=True)
    with open(log, "w") as f:
        f.write(text)
    return text


def sweep_top(args, proto):
    """The largest size to sweep an arm of protocol `proto` to."""
    if proto == "ll" and parse_bytes(args.ll_max) < parse_bytes(args.max_bytes):
        return args.ll_max  # ll moves half its lines as flags: never the fastest at large sizes
    return args.max_bytes


def parse_json_lines(out, elem, keep_copy_bw=True):
    """{table bytes (count x element): (µs, arm, None, copy GB/s or None)} of a bench's --json lines;
    a size with wrong outputs is left out (and said)."""
    res = {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if j.get("wrong", 0) > 0:
            print(f"  WRONG results: {line}", flush=True)
            continue
        res[j["count"] * elem] = (j["time_us"], j.get("arm", ""), None, j.get("copy_bw") if keep_copy_bw else None)
    return res


def gpu_sweep(args, kind, ranks, arm, log):
    """{table bytes (count x element): median µs} of one arm, out of place."""
    algo, proto, ch, sb, th = fields(arm)
    top = sweep_top(args, proto)
    cmd = [args.bench, "-k", kind, "-a", algo, "-t", args.type, "-r", str(ranks), "-b", "8", "-e", top,
           "-f", str(args.factor), "-n", str(args.iters), "-w", "5", "-R", str(args.reps), "-c", "1",
           "-C", str(ch), "-s", str(sb), "--check-max", args.check_max, "--no-in-place", "--json"]
    if algo != "automatic":
        cmd += ["-p", proto]
    if th != 512:
        cmd += ["-T", str(th)]
    if args.graph:
        cmd.append("-G")
    return parse_json_lines(run(cmd, args.dry_run, log), ELEM[args.type])


def pcie_sweep(args, kind, ranks, arm, log):
    """As gpu_sweep, with collcomm_bench_pcie (f32, out of place, every size checked). No ceiling is
    kept for plot.py: the pinned copy is a one-way bound on the link all ranks share, not on busbw."""
    algo, proto, ch, sb, th = fields(arm)
    if th != 512:
        raise SystemExit(f"arm {arm_name(arm)}: collcomm_bench_pcie builds 512-thread kernels only")
    cmd = [args.bench, "-k", kind, "-a", algo, "-r", str(ranks), "-b", "8", "-e", sweep_top(args, proto),
           "-f", str(args.factor), "-n", str(args.iters), "-w", "5", "-R", str(args.reps),
           "-C", str(ch), "-s", str(sb), "--json"]
    if algo != "automatic":
        cmd += ["-p", proto]
    return parse_json_lines(run(cmd, args.dry_run, log), ELEM["f32"], keep_copy_bw=False)


def mp_sweep(args, kind, ranks, arm, log):
    """As gpu_sweep, with collcomm_bench_mp (f32, processes on one GPU under MPS, every size checked),
    its text table parsed: {bytes: (µs, arm, None, None)}; a size with wrong outputs is left out."""
    algo, proto, ch, sb, th = fields(arm)
    cmd = [args.bench, "-n", str(ranks), "-k", kind, "-a", algo, "-C", str(ch), "-b", "8", "-e", args.max_bytes,
           "-f", str(args.factor), "-G", "1" if args.graph else "0", "-w", "50", "-i", "200"]
    if th != 512:
        cmd += ["-t", str(th)]
    res = {}
    for line in run(cmd, args.dry_run, log).splitlines():
        f = line.split()
        if len(f) >= 10 and f[0].isdigit() and f[4] == "|":  # size count type op | time algbw busbw mem% #wrong
            if int(f[9]) > 0:
                print(f"  WRONG results: {line}", flush=True)
                continue
            res[int(f[0])] = (float(f[5]), arm_name(arm), None, None)
    return res


def host_sweep(args, kind, ranks, arm, log):
    algo, proto, ch, sb, _ = fields(arm)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(ranks), args.bench, "--algo", algo,
           "--max-bytes", args.max_bytes, "--step", str(args.factor)]
    if algo != "automatic":
        cmd += ["--channels", str(ch), "--slot-bytes", str(sb)]
    out = run(cmd, args.dry_run, log)
    res, arm_text, copy = {}, "", None
    for line in out.splitlines():
        m = re.match(r"# from \d+ B: (.*)", line)
        if m:
            arm_text = m.group(1)
        m = re.match(r"# copy bandwidth: ([0-9.]+) GB/s", line)
        if m:
            copy = float(m.group(1))
        f = line.split()
        if len(f) >= 9 and f[0].isdigit():
            size, count, mpi, cc, wrong = int(f[0]), int(f[1]), float(f[3]), float(f[5]), int(f[8])
            if wrong == 0:
                res[count * 4] = (cc, arm_text, mpi, copy)
    return res


def choose(per_arm, keep, graph=None, tie=0.10, host_bound=1.5):
    """[(bytes, arm)] per size: the fastest, unless the arm chosen below is within `keep`.

    graph: {arm: {bytes: (µs, ...)}} of the same arms replayed from a CUDA graph (--tiebreak). At a
    size where the stream launch's host cost sets some arm's time (its stream time at least
    `host_bound` times its graph time), every arm whose GPU work is that far below the fastest
    stream time (graph time times `host_bound` at most that) runs at the same host floor, and so
    does any arm within `tie` of the fastest: of these, the fastest from a graph wins (again
    keeping the arm below while within `keep`)."""
    sizes = sorted({b for r in per_arm.values() for b in r})
    picks, prev = [], None
    for b in sizes:
        if b == 0:  # a call of no bytes (a kind's share of the smallest size): the first rule takes it
            continue
        times = {a: r[b][0] for a, r in per_arm.items() if b in r}
        best = min(times, key=times.get)
        g = {a: graph[a][b][0] for a in times if graph and b in graph.get(a, {})}
        if any(times[a] >= host_bound * v for a, v in g.items()):
            tied = {a: v for a, v in g.items()
                    if times[a] <= times[best] * (1 + tie) or v * host_bound <= times[best]}
            best = min(tied, key=tied.get)
            if prev in tied and tied[prev] <= tied[best] * (1 + keep):
                best = prev
        elif prev in times and times[prev] <= times[best] * (1 + keep):
            best = prev
        picks.append((b, best))
        prev = best
    return picks


def graph_times(tiebreak, r, kind):
    """The --tiebreak sweep's (ranks, kind) (its sweep.json, loaded): {arm: {bytes: (µs, ...)}}, or None."""
    named = (tiebreak or {}).get(str(r), {}).get(kind)
    return {parse_arm(a): {int(b): tuple(v) for b, v in res.items()} for a, res in named.items()} if named else None


def rules_for(picks):
    """[(max_bytes or None, arm)]: runs of one arm; the last open-ended."""
    out = []
    for i, (b, a) in enumerate(picks):
        if out and out[-1][1] == a:
            out[-1] = (b, a)
        else:
            out.append((b, a))
    if out:
        out[-1] = (None, out[-1][1])
    return out


def cpp_rule(kind, cond, arm):
    algo, proto, ch, sb, th = fields(arm)
    tun = (f"tuning<protocol::{proto}" + (f", {ch}" if ch or sb or th != 512 else "") +
           (f", {sb}" if sb or th != 512 else "") + (f", {th}" if th != 512 else "") + ">")
    return f"    rule<kind::{kind}, when{{{cond}}}, algo::{algo}, {tun}>"


def write_header(args, mode, chosen, source, processes=None):
    """processes: rules as `chosen`'s for worlds of processes on one GPU, written first (each run of
    them capped: no open-ended rule)."""
    path = args.header or HEADERS[mode]
    name, what = TABLES[mode]
    lines, algos = [], set()

    def emit(rules, world):
        ranks = sorted(rules)
        for i, r in enumerate(ranks):
            lo = ranks[i - 1] + 1 if i else 1
            hi = r if i + 1 < len(ranks) else None
            for kind in KINDS:
                for max_b, arm in rules[r].get(kind, []):
                    if arm[0] == "ring" and arm[1] == "simple" and arm[2] == 0 and arm[3] == 0 and max_b is None:
                        continue  # the classic algorithm with the world's options: what no rule gives
                    cond = []
                    if max_b is not None:
                        cond.append(f".max_bytes = {max_b}")
                    if lo > 1:
                        cond.append(f".min_ranks = {lo}")
                    if hi is not None:
                        cond.append(f".max_ranks = {hi}")
                    if mode in ("gpu", "pcie"):  # swept with every rank on one GPU (pcie: sharing its one link)
                        cond.append(".max_gpus = 1")
                    if mode == "pcie":  # swept with ranks as threads (processes stage through /dev/shm instead)
                        cond.append(".world = world_kind::threads")
                    if world:
                        cond.append(f".world = world_kind::{world}")
                    lines.append(cpp_rule(kind, ", ".join(cond), arm))
                    algos.add(arm[0])

    emit(processes or {}, "processes")
    emit(chosen, None)
    if mode == "pcie":
        source += (". Swept with every rank a thread on one GPU, whose one PCIe link all of them share: the "
                   "rules hold for such worlds (.max_gpus = 1, .world = world_kind::threads); staged ranks on "
                   "several GPUs, each with a link of its own, and processes take the classic algorithm.")
    source = "\n".join(textwrap.wrap("Source: " + source, 97, initial_indent="// ", subsequent_indent="// "))
    includes = "".join(f"#include <collcomm/algo/{ALGO_HEADERS[a]}.hpp>\n" for a in sorted(algos))
    body = ",\n".join(lines)
    text = f"""// collcomm/tables/{name}.hpp — algo::automatic's table for {what}.
// Written by bench/tune.py; rewrite it by re-running the script (bench/tune.py --help).
{source}
#pragma once

#include <collcomm/algo/automatic.hpp>
{includes}#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/tuning.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace tables {{

using {name} = rule_table<
{body}>;

}}  // namespace tables
COLLCOMM_NAMESPACE_END
"""
    text = text.replace("rule_table<\n>", "rule_table<>")
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path} ({len(lines)} rules)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["gpu", "host", "pcie", "mp"])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--kinds", default=None, help="comma-separated; default: every kind the mode has arms for")
    ap.add_argument("--type", default="f32")
    ap.add_argument("--max-bytes", default="1G")
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--graph", action="store_true", help="GPU: time calls replayed from a CUDA graph")
    ap.add_argument("--keep", type=float, default=0.03)
    ap.add_argument("--tiebreak", default=None,
                    help="GPU: OUT folder of a --graph sweep of the same arms: where the stream launch's host "
                         "cost sets the time, arms within --tie of the fastest tie, and the faster from a graph wins")
    ap.add_argument("--tie", type=float, default=0.10)
    ap.add_argument("--processes", default=None,
                    help="GPU: OUT folder of an mp sweep: its rules, for worlds of processes on one GPU up to the "
                         "largest size it swept, go first in the table")
    ap.add_argument("--rounds", type=int, default=1, help="sweeps of every arm; the median per size is taken")
    ap.add_argument("--out", required=True)
    ap.add_argument("--header", default=None)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="choose again from OUT/sweep.json (e.g. another --keep); with --verify, read OUT/raw's logs")
    ap.add_argument("--merge", default=None,
                    help="comma-separated OUT folders of earlier sweeps (one kind or a few arms each): their "
                         "sweep.json merged arm by arm into OUT/sweep.json, then chosen from as with --reuse")
    ap.add_argument("--only-arms", default=None,
                    help="sweep only the arms whose name (algo/protocol/cC/sS) matches this regular expression")
    ap.add_argument("--ll-max", default=None, help="GPU, pcie: sweep ll arms up to this size only (64M; pcie 8M)")
    ap.add_argument("--resume", action="store_true",
                    help="take each run's output from OUT/raw's log where there is one; run only the others")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--timeout", type=int, default=300, help="seconds one bench run may take")
    ap.add_argument("--check-max", default="64K", help="GPU: check outputs up to this size (the reference is slow)")
    args = ap.parse_args()
    if args.mode == "mp" and args.verify:
        ap.error("mp: verify automatic among processes with collcomm_bench_mp -a automatic (bench/results/*/run18.sh)")
    if args.processes and args.mode != "gpu":
        ap.error("--processes: GPU mode only (its rules go into tables/nvlink.hpp)")
    global TIMEOUT_S, REUSE
    TIMEOUT_S = args.timeout
    args.ll_max = args.ll_max or LL_MAX.get(args.mode, "64M")
    if args.mode == "pcie" and args.type != "f32":
        ap.error("pcie: collcomm_bench_pcie times f32 only")
    os.makedirs(args.out, exist_ok=True)
    if args.merge:  # the sweeps of several runs as one, then choose as --reuse does
        merged, rounds_of = {}, {}
        for d in args.merge.split(","):
            part = json.load(open(os.path.join(d, "sweep.json")))
            meta = part.pop("_meta", {})
            part_rounds = rounds_by(meta)
            for r, kinds_ in part.items():  # arm by arm: later folders add arms or replace them
                for kind, arms_ in kinds_.items():
                    merged.setdefault(r, {}).setdefault(kind, {}).update(arms_)
                    rounds_of[(kind, int(r))] = part_rounds.get((kind, int(r)), part_rounds.get(None))
            merged.setdefault("_meta", dict(meta))  # the first folder's commit, date and max bytes
        # rounds: the most common; the (kind, ranks) swept with another count are named
        counts = {}
        for v in rounds_of.values():
            counts[v] = counts.get(v, 0) + 1
        if counts:
            common = max(counts, key=counts.get)
            others = sorted({v for v in counts if v != common}, key=str)
            text = str(common)
            for v in others:
                where = sorted(k for k, n in rounds_of.items() if n == v)
                text += f" ({v} for " + ", ".join(f"{k} at {n} ranks" for k, n in where) + ")"
            merged["_meta"]["rounds"] = text
        with open(os.path.join(args.out, "sweep.json"), "w") as f:
            json.dump(merged, f, indent=1)
        args.reuse = True
    REUSE = args.reuse or args.resume
    tiebreak = json.load(open(os.path.join(args.tiebreak, "sweep.json"))) if args.tiebreak else None
    arms = {"gpu": GPU_ARMS, "host": HOST_ARMS, "pcie": PCIE_ARMS, "mp": MP_ARMS}[args.mode]
    if args.only_arms:
        arms = {k: [a for a in v if re.search(args.only_arms, arm_name(a))] for k, v in arms.items()}
    kinds = args.kinds.split(",") if args.kinds else list(arms)
    ranks = [int(r) for r in args.ranks.split(",")]
    os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)
    sweep = {"gpu": gpu_sweep, "host": host_sweep, "pcie": pcie_sweep, "mp": mp_sweep}[args.mode]
    sweep_path = os.path.join(args.out, "sweep.json")

    if args.verify:
        data = json.load(open(sweep_path))
        host = args.mode == "host"
        rows = ["| kind | ranks | bytes | automatic (µs) | its arm | best named (µs) | best arm | automatic / best |"
                + (" MPI (µs) | MPI / automatic |" if host else ""),
                "|---|---:|---:|---:|---|---:|---|---:|" + ("---:|---:|" if host else "")]
        worst = 0.0
        verify_data = {}  # verify.json: as sweep.json, with automatic's medians under "automatic/..."
        for r in ranks:
            for kind in kinds:
                named = data.get(str(r), {}).get(kind)
                if not named:
                    continue
                # automatic and the named arms that were fastest somewhere in the sweep, in turn in
                # each round (the machine's state then weighs on them alike), medians per size.
                best_named = sorted({min(((v[str(b)][0], a) for a, v in named.items() if str(b) in v))[1]
                                     for b in {int(x) for v in named.values() for x in v}})
                # automatic's world: the world's channels, and slots as large as any arm's (pcie: the
                # largest of its arms'), so that no arm runs capped below what the sweep timed.
                auto_slot = {"gpu": 1 << 20, "host": 65536,
                             "pcie": max(a[3] for v in PCIE_ARMS.values() for a in v)}[args.mode]
                auto_arm = ("automatic", "simple", 0, auto_slot)
                runs = {}
                for k in range(args.rounds):
                    for arm in [auto_arm] + [parse_arm(a) for a in best_named]:
                        log = os.path.join(args.out, "raw", f"verify_{kind}_r{r}_{arm_name(arm).replace('/', '_')}"
                                                            f"_round{k}.log")
                        for b, v in sweep(args, kind, r, arm, log).items():
                            runs.setdefault(arm_name(arm), {}).setdefault(b, []).append(v)
                med = {a: {b: sorted(vs)[len(vs) // 2] for b, vs in res.items()} for a, res in runs.items()}
                verify_data.setdefault(str(r), {})[kind] = {a: {str(b): v for b, v in res.items()} for a, res in med.items()}
                auto = med.pop(arm_name(auto_arm), {})
                named = {a: {str(b): v for b, v in res.items()} for a, res in med.items()}
                for b in sorted(auto):
                    cands = {a: v[str(b)][0] for a, v in named.items() if str(b) in v}
                    if not cands:
                        continue
                    best = min(cands, key=cands.get)
                    ratio = auto[b][0] / cands[best]
                    worst = max(worst, ratio)
                    arm = auto[b][1]
                    rows.append(f"| {kind} | {r} | {b} | {auto[b][0]:.2f} | {arm} | {cands[best]:.2f} | {best} "
                                f"| {ratio:.2f}{' **missed**' if ratio > 1.10 else ''} |"
                                + (f" {auto[b][2]:.2f} | {auto[b][2] / auto[b][0]:.2f} |" if host else ""))
        with open(os.path.join(args.out, "verify.json"), "w") as f:
            json.dump(verify_data, f, indent=1)
        with open(os.path.join(args.out, "verify.md"), "w") as f:
            f.write("\n".join(rows) + f"\n\nworst automatic / best: {worst:.2f} (target <= 1.10)\n")
        print(f"wrote {args.out}/verify.md; worst automatic / best {worst:.2f}")
        return

    data, chosen = {}, {}
    if args.reuse:  # choose again from the last sweep (another --keep), without running anything
        old = json.load(open(sweep_path))
        for r in ranks:
            for kind in kinds:
                named = old.get(str(r), {}).get(kind)
                if not named:
                    continue
                per_arm = {parse_arm(a): {int(b): tuple(v) for b, v in res.items()} for a, res in named.items()}
                data.setdefault(str(r), {})[kind] = named
                picks = choose(per_arm, args.keep, graph_times(tiebreak, r, kind), args.tie)
                chosen.setdefault(r, {})[kind] = rules_for(picks)
                for b, a in picks:
                    print(f"  {kind} ranks {r} {b:>11} B: {arm_name(a)}")
    for r in ([] if args.reuse else ranks):
        for kind in kinds:
            # Rounds go over every arm in turn, so that a slow spell of the machine hits them alike;
            # an arm's time at a size is its median over the rounds.
            rounds = {}
            for k in range(args.rounds):
                for arm in arms[kind]:
                    log = os.path.join(args.out, "raw", f"{kind}_r{r}_{arm_name(arm).replace('/', '_')}_round{k}.log")
                    for b, v in sweep(args, kind, r, arm, log).items():
                        rounds.setdefault(arm, {}).setdefault(b, []).append(v)
            per_arm = {arm: {b: sorted(vs)[len(vs) // 2] for b, vs in res.items() if len(vs) == args.rounds}
                       for arm, res in rounds.items()}
            per_arm = {a: res for a, res in per_arm.items() if res}
            if not per_arm:
                continue
            data.setdefault(str(r), {})[kind] = {arm_name(a): {str(b): v for b, v in res.items()}
                                                 for a, res in per_arm.items()}
            picks = choose(per_arm, args.keep, graph_times(tiebreak, r, kind), args.tie)
            chosen.setdefault(r, {})[kind] = rules_for(picks)
            for b, a in picks:
                print(f"  {kind} ranks {r} {b:>11} B: {arm_name(a)}")
    if args.dry_run:
        return
    if args.reuse:
        meta = old.get("_meta", {})
    else:
        # COLLCOMM_COMMIT: the commit the files are, where the copy's .git is older (bench/scripts/common.sh).
        commit = os.environ.get("COLLCOMM_COMMIT", "")
        if not commit:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                    text=True).stdout.strip()
            if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], stdout=subprocess.PIPE,
                              text=True).stdout.strip():
                commit += " with uncommitted changes"
        meta = {"commit": commit, "date": str(datetime.date.today()),
                "rounds": args.rounds, "max_bytes": args.max_bytes, "graph": args.graph}
        data["_meta"] = meta
        with open(sweep_path, "w") as f:
            json.dump(data, f, indent=1)
    source = (f"{args.mode} sweep of {', '.join(kinds)} at {args.ranks} ranks, {args.type}, to {meta.get('max_bytes')}"
              f"{' from a CUDA graph' if meta.get('graph') else ''}, median of {meta.get('rounds')} round(s), "
              f"an arm kept while within {args.keep:.0%} of the fastest"
              + (f", arms within {args.tie:.0%} of it where the launch's host cost sets the time told apart by a "
                 f"sweep from a CUDA graph ({args.tiebreak})" if args.tiebreak else "") + "; "
              f"{meta.get('date')}, commit {meta.get('commit')}; logs in {args.out}")
    if args.mode == "mp":  # its rules go into the GPU table: bench/tune.py gpu ... --processes OUT
        print(f"wrote {sweep_path}")
        return
    processes = None
    if args.processes:  # an mp sweep's picks, to the largest size it swept (larger calls: the rules below)
        mp = json.load(open(os.path.join(args.processes, "sweep.json")))
        processes = {}
        for r in sorted(int(x) for x in mp if x != "_meta"):
            for kind, named in mp[str(r)].items():
                per_arm = {parse_arm(a): {int(b): tuple(v) for b, v in res.items()} for a, res in named.items()}
                picks = choose(per_arm, args.keep)
                if not picks:
                    continue
                runs = rules_for(picks)
                runs[-1] = (max(b for b, _ in picks), runs[-1][1])
                processes.setdefault(r, {})[kind] = runs
                for b, a in picks:
                    print(f"  processes: {kind} ranks {r} {b:>11} B: {arm_name(a)}")
        pm = mp.get("_meta", {})
        source += (f"; first, for processes on one GPU: the mp sweep of {args.processes} (collcomm_bench_mp, "
                   f"to {pm.get('max_bytes')}{' from a CUDA graph' if pm.get('graph') else ''}, "
                   f"{pm.get('date')}, commit {pm.get('commit')})")
    write_header(args, args.mode, chosen, source, processes)


if __name__ == "__main__":
    sys.exit(main())
