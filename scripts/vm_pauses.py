#!/usr/bin/env python3
"""How long this machine stops running threads that never sleep: `vm_pauses.py SECS`.

One process per CPU, pinned, spins for SECS reading the monotonic clock. Every gap between two
readings longer than 0.5 ms is a time that process did not run. On an otherwise idle machine that
is the machine itself pausing: interrupts, and on a VM the host not running the vCPU (steal). A
window where every CPU's spinner stopped at once is the whole VM frozen: no thread of any program
ran then, so no latency measured on the machine can be shorter than it.

Prints one line: `longest_gap_ms longest_all_cpus_ms gaps_over_1ms` (the longest gap of any
CPU's spinner, the longest window in which all of them stopped, and how many gaps of 1 ms or
more all spinners saw together).
"""
import multiprocessing
import os
import sys
import time

GAP_NS = 500_000


def spin(cpu, secs, out):
    os.sched_setaffinity(0, {cpu})
    clock = time.perf_counter_ns
    prev = clock()
    end = prev + int(secs * 1e9)
    gaps = []
    while prev < end:
        now = clock()
        if now - prev > GAP_NS:
            gaps.append((prev, now))
        prev = now
    out.put((cpu, gaps))


def overlap(a, b):
    """The windows in which both lists of (start, end) windows hold."""
    res, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            res.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return res


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    cpus = sorted(os.sched_getaffinity(0))
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=spin, args=(c, secs, out)) for c in cpus]
    for p in procs:
        p.start()
    per_cpu = [out.get()[1] for _ in procs]
    for p in procs:
        p.join()
    longest = max((e - s for gaps in per_cpu for s, e in gaps), default=0)
    common = per_cpu[0]
    for gaps in per_cpu[1:]:
        common = overlap(common, gaps)
    longest_all = max((e - s for s, e in common), default=0)
    over_1ms = sum(1 for s, e in common if e - s >= 1_000_000)
    print(f"{longest / 1e6:.2f} {longest_all / 1e6:.2f} {over_1ms}")


if __name__ == "__main__":
    main()
