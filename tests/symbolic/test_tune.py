#!/usr/bin/env python3
"""bench/tune.py's choice of an arm per size (label symbolic): random sweeps, fresh each run, checked
against the rules its docstring states, not against a copy of its code.

  * without a graph sweep: each size's pick is within `keep` of the fastest arm there, and is the
    fastest unless it is the pick of the size below;
  * with one (--tiebreak), at sizes where no arm is host-bound (stream time under host_bound x its
    graph time): as without (the fastest, or the pick of the size below while within `keep`);
  * at sizes where some arm is: the pick ties with the fastest on the stream (within `tie`, or its
    graph time that far below the fastest stream time) and is within `keep` of the fastest such arm
    from a graph.
"""
import importlib.util
import os
import random
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tune", os.path.join(HERE, "..", "..", "bench", "tune.py"))
tune = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tune)

seed = random.SystemRandom().randrange(1 << 63)
print(f"test_tune: seed = {seed}")
rng = random.Random(seed)
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAILED:", what)


checked = 0
for trial in range(300):
    arms = [(f"a{i}", "simple", rng.choice([0, 1]), 0) for i in range(rng.randint(1, 7))]
    sizes = [8 << (2 * i) for i in range(rng.randint(1, 12))]
    floor = rng.uniform(5, 25)  # the stream launch's host cost
    stream, graph = {}, {}
    for a in arms:
        for b in sizes:
            if rng.random() < 0.1:
                continue  # an arm that did not run at this size
            gpu = rng.uniform(1, 2 * floor) * (1 + b / 2**20 * rng.uniform(0.5, 2))
            graph.setdefault(a, {})[b] = (gpu,)
            stream.setdefault(a, {})[b] = (max(gpu * rng.uniform(1.0, 1.1), floor * rng.uniform(0.9, 1.2)),)
    stream = {a: r for a, r in stream.items() if r}
    if not stream:
        continue
    keep, tie, hb = rng.choice([0.0, 0.03, 0.05]), rng.choice([0.05, 0.10, 0.2]), 1.5
    plain = tune.choose(stream, keep)
    tied_picks = tune.choose(stream, keep, graph, tie, hb)
    check([b for b, _ in plain] == sorted({b for r in stream.values() for b in r}), "one pick per size")
    prev = prev_t = None
    for (b, p), (_, t) in zip(plain, tied_picks):
        times = {a: r[b][0] for a, r in stream.items() if b in r}
        fastest = min(times.values())
        check(times[p] <= fastest * (1 + keep) + 1e-9, f"trial {trial}, {b} B: {p} not within keep")
        check(times[p] == fastest or p == prev, f"trial {trial}, {b} B: {p} neither fastest nor kept")
        g = {a: graph[a][b][0] for a in times if b in graph.get(a, {})}
        bound = any(times[a] >= hb * v for a, v in g.items())
        if not bound:
            check(times[t] == fastest or (t == prev_t and times[t] <= fastest * (1 + keep) + 1e-9),
                  f"trial {trial}, {b} B: no arm host-bound, yet {t} is neither the fastest nor the kept pick")
        else:
            tied = {a: v for a, v in g.items() if times[a] <= fastest * (1 + tie) or v * hb <= fastest}
            check(t in tied, f"trial {trial}, {b} B: {t} does not tie on the stream")
            if t in tied:
                check(tied[t] <= min(tied.values()) * (1 + keep) + 1e-9, f"trial {trial}, {b} B: {t} not fastest from a graph")
            checked += 1
        prev, prev_t = p, t
check(checked > 100, f"only {checked} host-bound sizes drawn")
print(f"test_tune: {checked} host-bound sizes checked, {failures} failures")
sys.exit(1 if failures else 0)
