#!/usr/bin/env python3
"""The partitions scenario's cost curve as an SVG: msgs/s against the
partition count (log scale), one line per fsync policy.

  partitions_chart.py ROWS OUT.svg      ROWS: lines of "POLICY COUNT MSGS_PER_S"
"""
import math
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
series = {}
for policy, count, rate in rows:
    series.setdefault(policy, []).append((int(count), float(rate)))
W, H, L, R, T, B = 640, 360, 70, 40, 30, 50
xs = sorted({c for s in series.values() for c, _ in s})
ymax = max(r for s in series.values() for _, r in s) * 1.1 or 1
x = lambda c: L + (math.log10(c) - math.log10(xs[0])) / max(1e-9, math.log10(xs[-1]) - math.log10(xs[0])) * (W - L - R)
y = lambda r: H - B - r / ymax * (H - T - B)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="18" text-anchor="middle">appends vs partition count (100 B messages, 100 per batch; medians)</text>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>']
for c in xs:
    out.append(f'<text x="{x(c):.1f}" y="{H-B+16}" text-anchor="middle">{c:,}</text>')
out.append(f'<text x="{W/2}" y="{H-10}" text-anchor="middle">partitions</text>')
for i in range(5):
    v = ymax * i / 4
    out.append(f'<text x="{L-6}" y="{y(v)+4:.1f}" text-anchor="end">{v/1e6:.1f}M</text>')
    out.append(f'<line x1="{L}" y1="{y(v):.1f}" x2="{W-R}" y2="{y(v):.1f}" stroke="#ddd"/>')
colors = {"never": "#1f77b4", "batch": "#d62728"}
for k, (policy, pts) in enumerate(sorted(series.items())):
    pts.sort()
    col = colors.get(policy, "#555")
    path = " ".join(f"{x(c):.1f},{y(r):.1f}" for c, r in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"/>')
    for c, r in pts:
        out.append(f'<circle cx="{x(c):.1f}" cy="{y(r):.1f}" r="3" fill="{col}"/>')
    out.append(f'<text x="{W-R-150}" y="{T+16+16*k}" fill="{col}">fsync={policy} (msgs/s)</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
