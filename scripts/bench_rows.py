#!/usr/bin/env python3
"""Markdown rows for scripts/bench.sh: medians of REPS runs with min-max ranges.

  bench_rows.py ratio SCENARIO BASELINE "b1 b2 .." "c1 c2 .." [OP TARGET]
      corelog against a baseline measured in the same runs: run k's ratio is
      c_k / b_k; the row gives both figures' medians (min-max) and the
      median (min-max) of the per-run ratios, and whether the median ratio
      meets OP TARGET (OP is >= or <=).
  bench_rows.py value SCENARIO "c1 c2 .." OP TARGET UNIT
      a figure against an absolute target (OP "-": no target, the figure only).
  bench_rows.py failed SCENARIO BASELINE "b1 b2 .." "c1 c2 .."
      how many runs failed on each side (corelog's target: none).

A run that failed is the word FAILED in place of its figure: it is counted and
shown beside the figure, which is the median of the runs that did not fail; a
ratio is taken over the runs where both sides gave a figure.
"""
import statistics
import sys


FAILED = "FAILED"


def nums(s):
    """Figures, None where a run failed."""
    return [None if x == FAILED else float(x) for x in s.split()]


def failures(vs):
    n = sum(v is None for v in vs)
    return f" **({n} of {len(vs)} runs FAILED)**" if n else ""


def fig(v):
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.2f}"


def span(vs, f=fig, unit=""):
    vs = [v for v in vs if v is not None]
    if not vs:
        return "–"
    med = statistics.median(vs)
    if len(vs) == 1:
        return f"{f(med)}{unit}"
    return f"{f(med)}{unit} ({f(min(vs))}–{f(max(vs))})"


def verdict(med, op, target):
    ok = med >= target if op == ">=" else med <= target
    return "met" if ok else "**missed**"


def ratio(scenario, baseline, b, c, op=None, target=None):
    b, c = nums(b), nums(c)
    rs = [ci / bi for bi, ci in zip(b, c) if bi is not None and ci is not None and bi > 0]
    r = span(rs, lambda v: f"{v:.2f}", "×") if rs else "–"
    goal = f"{op} {target}×" if op else "–"
    met = verdict(statistics.median(rs), op, float(target)) if op and rs else ""
    if op and None in c:
        met = "**missed** (failed runs)"
    print(f"| {scenario} | {baseline} | {span(b)}{failures(b)} | {span(c)}{failures(c)} | **{r}** | {goal} | {met} |")


def value(scenario, c, op, target, unit):
    c = nums(c)
    if op == "-":  # a figure shown beside a target row, held to no target of its own
        print(f"| {scenario} | – | – | {span(c)}{failures(c)} | – | – | |")
        return
    if None in c:
        print(f"| {scenario} | target | {fig(float(target))} | {span(c)}{failures(c)} | – | {op} {target} {unit} | **missed** (failed runs) |")
        return
    med = statistics.median(c)
    print(f"| {scenario} | target | {fig(float(target))} | {span(c)} | **{med / float(target):.2f}× of target** | {op} {target} {unit} | {verdict(med, op, float(target))} |")


def failed(scenario, baseline, b, c):
    b, c = nums(b), nums(c)
    shown = lambda vs: f"{sum(v is None for v in vs)} of {len(vs)}" if vs else "–"
    met = "met" if None not in c else "**missed**"
    print(f"| {scenario} | {baseline} | {shown(b)} | {shown(c)} | – | none | {met} |")


if __name__ == "__main__":
    {"ratio": ratio, "value": value, "failed": failed}[sys.argv[1]](*sys.argv[2:])
