#!/usr/bin/env python3
"""bench/plot.py — time and bus bandwidth against size, one figure per kind and rank count, from
the measurements bench/tune.py keeps (OUT/sweep.json: every named arm, the median of its rounds;
OUT/verify.json: algo::automatic and the arms it was timed beside). Both axes logarithmic; a thin
line per named arm, a thick one for automatic, a dashed one per peer the bench timed beside it
(host: MPI_Allreduce), and the ceiling the bench measured in the same run, as bus bandwidth (GPU:
the copy bandwidth, read + write; host: memcpy's bytes per second per rank, every rank copying). Needs matplotlib (Debian: python3-matplotlib).

  python3 bench/plot.py OUT            -> OUT/plot_<kind>_r<ranks>.png
  python3 bench/plot.py OUT --title "all_reduce f32, processes on a 2-CPU machine"
  python3 bench/plot.py OUT --verify-only   the thin lines from verify.json's named arms (timed in
                                            the same run as automatic), not from sweep.json
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def bus_factor(kind, n):
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    return 1.0


def size_label(b):
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= unit:
            return f"{b // unit} {name}"
    return f"{b} B"


def series(per_size, n, kind, column=0):
    """(bytes, µs, busbw GB/s) sorted by size, from {bytes: [µs, arm text, peer µs?, copy GB/s?]}."""
    pts = []
    for b, v in per_size.items():
        if len(v) <= column or v[column] is None or int(b) <= 0:  # a count of 0 (all_gather of 8 B
            continue                                                 # among 8 ranks) has no place on a log axis
        t = float(v[column])
        pts.append((int(b), t, int(b) / (t * 1e-6) / 1e9 * bus_factor(kind, n)))
    return sorted(pts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="a directory bench/tune.py wrote (sweep.json, verify.json)")
    ap.add_argument("--title", default="")
    ap.add_argument("--peer", default="MPI", help="name of the peer in the host bench's third column")
    ap.add_argument("--verify-only", action="store_true",
                    help="named arms from verify.json (the run that timed automatic), not sweep.json")
    args = ap.parse_args()
    vpath = os.path.join(args.out, "verify.json")
    verify = json.load(open(vpath)) if os.path.exists(vpath) else {}
    if args.verify_only:
        sweep = {r: {k: {a: v for a, v in arms.items() if not a.startswith("automatic")} for k, arms in kinds.items()}
                 for r, kinds in verify.items()}
    else:
        sweep = json.load(open(os.path.join(args.out, "sweep.json")))
    written = []
    for r, kinds in sweep.items():
        if r.startswith("_"):
            continue
        n = int(r)
        for kind, arms in kinds.items():
            fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 5))
            for arm, per_size in sorted(arms.items()):
                pts = series(per_size, n, kind)
                ax_t.plot([p[0] for p in pts], [p[1] for p in pts], lw=0.9, alpha=0.8, marker=".", label=arm)
                ax_b.plot([p[0] for p in pts], [p[2] for p in pts], lw=0.9, alpha=0.8, marker=".", label=arm)
            ver = verify.get(r, {}).get(kind, {})
            for arm, per_size in ver.items():
                if not arm.startswith("automatic"):
                    continue
                pts = series(per_size, n, kind)
                ax_t.plot([p[0] for p in pts], [p[1] for p in pts], lw=2.6, color="black", label="automatic")
                ax_b.plot([p[0] for p in pts], [p[2] for p in pts], lw=2.6, color="black", label="automatic")
                peer = series(per_size, n, kind, column=2)
                if peer:
                    ax_t.plot([p[0] for p in peer], [p[1] for p in peer], lw=1.8, ls="--", color="tab:red",
                              label=args.peer)
                    ax_b.plot([p[0] for p in peer], [p[2] for p in peer], lw=1.8, ls="--", color="tab:red",
                              label=args.peer)
            ceilings = [float(v[3]) for a in arms.values() for v in a.values() if len(v) > 3 and v[3]]
            if ceilings:  # GPU: the copy kernel's read + write bandwidth; host: memcpy per rank, all at once
                host = any(len(v) > 2 and v[2] for a in arms.values() for v in a.values())
                ax_b.axhline(max(ceilings), color="gray", ls=":",
                             label="memcpy per rank, every rank at once (ceiling)" if host
                             else "copy bandwidth, read + write (ceiling)")
            for ax, ylabel in ((ax_t, "time per call (µs)"), (ax_b, "bus bandwidth (GB/s)")):
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("bytes (count × element)")
                ax.set_ylabel(ylabel)
                ax.grid(True, which="both", alpha=0.3)
                ticks = sorted({int(b) for a in arms.values() for b in a if int(b) > 0})
                ax.set_xticks(ticks[::2])
                ax.set_xticklabels([size_label(b) for b in ticks[::2]], rotation=45, fontsize=8)
            ax_b.legend(fontsize=7, loc="lower right")
            fig.suptitle(f"{kind}, {n} ranks{' — ' + args.title if args.title else ''}")
            fig.tight_layout()
            path = os.path.join(args.out, f"plot_{kind}_r{n}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    print("\n".join(written))


if __name__ == "__main__":
    main()
