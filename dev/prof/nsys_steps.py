#!/usr/bin/env python3
"""Summarises an nsys `cuda_gpu_trace` CSV of `lilac bench` decode steps: per kernel name, the
in-graph duration and the gap from the previous kernel's end (negative = overlap under PDL).
Usage: nsys_steps.py TRACE.csv [first_kernel_name_of_a_step]"""
import csv, sys, collections
rows = []
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        name = r.get('Name') or r.get('name')
        if not name: continue
        try:
            st = float(r.get('Start (ns)') or r.get('Start')); du = float(r.get('Duration (ns)') or r.get('Duration'))
        except (TypeError, ValueError):
            continue
        rows.append((st, du, name))
rows.sort()
marker = sys.argv[2] if len(sys.argv) > 2 else 'k_embed'
starts = [i for i, r in enumerate(rows) if marker in r[2]]
# decode steps: a k_embed launch with grid 1 is followed by ~300+ kernels; take the last 20 steps
steps = []
for a, b in zip(starts, starts[1:] + [len(rows)]):
    if 100 < b - a < 2000: steps.append((a, b))
steps = steps[-20:]
print(f"{len(rows)} kernels, {len(starts)} '{marker}', {len(steps)} decode-like steps used")
agg = collections.OrderedDict()
tot = []
for a, b in steps:
    seg = rows[a:b]
    tot.append((seg[-1][0] + seg[-1][1] - seg[0][0]) / 1e3)
    prev_end = None
    for st, du, name in seg:
        short = name.split('(')[0].split('<')[0].replace('void ', '')[:40]
        if short.startswith('k_') is False: short = short
        e = agg.setdefault(short, [0, 0.0, 0.0, 0])
        e[0] += 1; e[1] += du / 1e3
        if prev_end is not None: e[2] += (st - prev_end) / 1e3
        prev_end = max(prev_end or 0, st + du)
n = len(steps) or 1
print(f"step wall (first start .. last end): mean {sum(tot)/n:.1f} us")
print(f"{'kernel':42s} {'per step':>8s} {'us/step':>9s} {'us/call':>8s} {'gap us/call':>11s}")
for k, (c, d, g, _) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{k:42s} {c/n:8.1f} {d/n:9.1f} {d/c:8.2f} {g/c:11.2f}")
# one step in order (the last), to see the chain
a, b = steps[-1] if steps else (0, 0)
print("\nlast step, first 40 kernels: start offset, duration, gap (us)")
prev_end = None; t0 = rows[a][0] if steps else 0
for st, du, name in rows[a:min(b, a + 40)]:
    g = (st - prev_end) / 1e3 if prev_end is not None else 0
    print(f"{(st-t0)/1e3:9.2f} {du/1e3:7.2f} {g:7.2f}  {name[:90]}")
    prev_end = max(prev_end or 0, st + du)
