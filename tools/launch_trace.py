#!/usr/bin/env python3
"""Lays out a launch trace (QWENRT_CUDA_LAUNCH_TRACE=file.csv, a -DQWENRT_CUDA_LAUNCH_TRACE=ON build).

  tools/launch_trace.py trace.csv [--last N]

One line per launch (a graph replay's nodes counted apart) of the last N (default 140: about one 0.8B decode step), in launch order:
  first_start  when its first block reached the wait (resident, weights being prefetched), in us
               from the window's first ready
  early        blocks that reached the wait before the launch's inputs were ready
  first_ready  when the wait first returned (the launch ahead had finished)
  last_ready   when the last block's wait returned (blocks that were not resident yet start late)
  held         next launch's first ready - this one's: the time this launch held the chain
Then the held time summed per launch shape (blocks x threads)."""
import argparse, collections, csv

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--last", type=int, default=140)
args = ap.parse_args()

by_grid = collections.defaultdict(list)
with open(args.trace) as f:
    for row in csv.DictReader(f):
        by_grid[int(row["grid_id"])].append({k: int(v) for k, v in row.items()})
# A graph node keeps its %gridid from replay to replay: its events split into one launch per replay
# where consecutive block starts are more than GAP apart (a replay's blocks start back to back).
GAP_NS = 50_000
launches = {}
for g, ev in by_grid.items():
    ev.sort(key=lambda e: e["start_ns"])
    part = 0
    for i, e in enumerate(ev):
        if i and e["start_ns"] - ev[i - 1]["start_ns"] > GAP_NS:
            part += 1
        launches.setdefault((g, part), []).append(e)
order = sorted(launches, key=lambda g: min(e["ready_ns"] for e in launches[g]))
window = order[-(args.last + 1):]  # one more: the last one's held time needs the next
t0 = min(e["ready_ns"] for e in launches[window[0]])
rows = []
for i, g in enumerate(window[:-1]):
    ev = launches[g]
    first_ready = min(e["ready_ns"] for e in ev)
    nxt = min(e["ready_ns"] for e in launches[window[i + 1]])
    rows.append(dict(i=i, blocks=ev[0]["blocks"], threads=ev[0]["threads"], seen=len(ev),
                     first_start=(min(e["start_ns"] for e in ev) - t0) / 1e3,
                     early=sum(e["start_ns"] < first_ready for e in ev),
                     first_ready=(first_ready - t0) / 1e3, last_ready=(max(e["ready_ns"] for e in ev) - t0) / 1e3,
                     held=(nxt - first_ready) / 1e3))
print(f"{'#':>4} {'blocks':>7} {'thr':>4} {'early':>6} {'first_start':>11} {'first_ready':>11} {'last_ready':>10} {'held':>7}")
for r in rows:
    print(f"{r['i']:4d} {r['blocks']:7d} {r['threads']:4d} {r['early']:6d} {r['first_start']:11.2f} {r['first_ready']:11.2f} "
          f"{r['last_ready']:10.2f} {r['held']:7.2f}" + ("" if r["seen"] == r["blocks"] else f"  ({r['seen']} events)"))
shape = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    s = shape[(r["blocks"], r["threads"])]
    s[0] += 1
    s[1] += r["held"]
total = sum(r["held"] for r in rows)
print(f"\nheld per launch shape (total {total:.1f} us over {len(rows)} launches):")
for (b, t), (n, h) in sorted(shape.items(), key=lambda kv: -kv[1][1]):
    print(f"  {b:7d} x {t:4d}: {n:4d} launches, {h:8.1f} us, {h / n:6.2f} us each, {100 * h / total:5.1f}%")
