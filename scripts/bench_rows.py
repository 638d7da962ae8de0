#!/usr/bin/env python3
"""Markdown rows for scripts/bench.sh: medians of REPS runs with min-max ranges.

  bench_rows.py ratio SCENARIO BASELINE "b1 b2 .." "c1 c2 .." [OP TARGET]
      corelog against a baseline measured in the same runs: run k's ratio is
      c_k / b_k; the row gives both figures' medians (min-max) and the
      median (min-max) of the per-run ratios, and whether the median ratio
      meets OP TARGET (OP is >= or <=).
  bench_rows.py value SCENARIO "c1 c2 .." OP TARGET UNIT
      a figure against an absolute target (OP "-": no target, the figure only).
"""
import statistics
import sys


def nums(s):
    return [float(x) for x in s.split()]


def fig(v):
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.2f}"


def span(vs, f=fig, unit=""):
    med = statistics.median(vs)
    if len(vs) == 1:
        return f"{f(med)}{unit}"
    return f"{f(med)}{unit} ({f(min(vs))}–{f(max(vs))})"


def verdict(med, op, target):
    ok = med >= target if op == ">=" else med <= target
    return "met" if ok else "**missed**"


def ratio(scenario, baseline, b, c, op=None, target=None):
    b, c = nums(b), nums(c)
    rs = [ci / bi for bi, ci in zip(b, c) if bi > 0]
    r = span(rs, lambda v: f"{v:.2f}", "×") if rs else "–"
    goal = f"{op} {target}×" if op else "–"
    met = verdict(statistics.median(rs), op, float(target)) if op and rs else ""
    print(f"| {scenario} | {baseline} | {span(b)} | {span(c)} | **{r}** | {goal} | {met} |")


def value(scenario, c, op, target, unit):
    c = nums(c)
    med = statistics.median(c)
    if op == "-":  # a figure shown beside a target row, held to no target of its own
        print(f"| {scenario} | – | – | {span(c)} | – | – | |")
        return
    print(f"| {scenario} | target | {fig(float(target))} | {span(c)} | **{med / float(target):.2f}× of target** | {op} {target} {unit} | {verdict(med, op, float(target))} |")


if __name__ == "__main__":
    {"ratio": ratio, "value": value}[sys.argv[1]](*sys.argv[2:])
