#!/usr/bin/env python3
"""The side-by-side table of a net_side_by_side.sh results folder.

Reads every <lib>_n<ranks>_r<round>.rank0.log in the folder; a (library, collective, ranks,
size) measured in several rounds counts with its lowest median. Prints, per collective and rank
count, a markdown table: size, each library's median µs, collcomm's busbw, and the ratio of the
faster peer's time to collcomm's (> 1: collcomm faster) with the target it is held to (from 64 KiB:
>= 1.0; below: >= 1/1.5, i.e. collcomm within 1.5x of the faster peer)."""
import collections
import glob
import os
import re
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else "."
libs = ["collcomm", "gloo", "mpi"]
med = collections.defaultdict(dict)  # (coll, n, size) -> lib -> median µs
bus = {}  # (coll, n, size) -> collcomm busbw of its best round
ceiling = collections.defaultdict(list)
ceiling2 = collections.defaultdict(list)
settings = collections.defaultdict(set)
for path in sorted(glob.glob(os.path.join(folder, "*_n*_r*.rank0.log"))):
    m = re.match(r"(\w+?)_n(\d+)_r(\d+)\.rank0\.log", os.path.basename(path))
    if not m:
        continue
    lib, n = m.group(1), int(m.group(2))
    for line in open(path, errors="replace"):
        if line.startswith("# settings:"):
            settings[(lib, n)].add(line.split(":", 1)[1].strip())
        if line.startswith("# ceiling:"):
            ceiling[n].append(float(line.rsplit(":", 1)[1].split()[0]))
        if line.startswith("# ceiling both ways:"):
            ceiling2[n].append(float(line.rsplit(":", 1)[1].split()[0]))
        f = line.split()
        if len(f) == 9 and f[0] in ("all_reduce", "all_gather", "broadcast"):
            key = (f[0], n, int(f[1]))
            t = float(f[4])
            if lib not in med[key] or t < med[key][lib]:
                med[key][lib] = t
                if lib == "collcomm":
                    bus[key] = float(f[7])


def size_text(b):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s} {unit}"
    return f"{b} B"


groups = sorted({(c, n) for (c, n, _) in med})
for c, n in groups:
    print(f"\n### {c}, {n} ranks ({n // 2} per namespace)\n")
    for lib in libs:
        for s in sorted(settings.get((lib, n), [])):
            print(f"- {lib}: {s}")
    if ceiling.get(n):
        print(f"- ceiling (one TCP stream between the namespaces, one way): {max(ceiling[n]):.2f} GB/s")
    if ceiling2.get(n):
        print(f"- ceiling both ways (one stream each way at once, the slower): {max(ceiling2[n]):.2f} GB/s")
    print()
    print("| size | collcomm (µs) | gloo (µs) | MPI (µs) | collcomm busbw (GB/s) | faster peer / collcomm | target |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    met = missed = 0
    for (cc, nn, size) in sorted(k for k in med if k[0] == c and k[1] == n):
        row = med[(cc, nn, size)]
        cells = [f"{row[l]:.1f}" if l in row else "—" for l in libs]
        peers = [row[l] for l in ("gloo", "mpi") if l in row]
        ratio = min(peers) / row["collcomm"] if peers and "collcomm" in row else None
        want = 1.0 if size >= 64 * 1024 else 1 / 1.5
        verdict = ""
        if ratio is not None:
            ok = ratio >= want
            met += ok
            missed += not ok
            verdict = ("met" if ok else "missed") + (" (≥ 1.0)" if want == 1.0 else " (≥ 0.67)")
        rtext = f"{ratio:.2f}" if ratio is not None else "—"
        btext = f"{bus[(cc, nn, size)]:.3f}" if (cc, nn, size) in bus else "—"
        print(f"| {size_text(size)} | {cells[0]} | {cells[1]} | {cells[2]} | {btext} | {rtext} | {verdict} |")
    print(f"\nTarget met at {met} of {met + missed} sizes.")
