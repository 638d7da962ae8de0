#!/usr/bin/env python3
"""What splice saves a receiver on this kernel (issue 32, "in, by reference").

A sender process writes CHUNK-byte pieces into a loopback TCP socket; the receiver (this
process) stores each one in a file on DIR, in one of two ways, alternating:

  copy    recv_into a buffer, then pwrite it at its offset: the bytes cross user space
          (the socket's copy out, the page cache's copy in), as a send does today;
  splice  splice(socket -> pipe), then splice(pipe -> file at its offset): the socket's
          pages move into the pipe, and only the page cache's copy is left.

With --verify each chunk is then read once more, as admission reads it: from the buffer
(copy), or through a mapping of the file (splice: checked in place). zlib's crc32 stands in
for XXH3 (slower, the same in both; Python has no XXH3), so the verified rows overstate the
check and only their difference means something.

Prints the receiver's CPU (getrusage, this process only: the sender is another) per GB moved.
The file is truncated to its size first (both ways), so the mapping covers it.

  splice_probe.py --dir /var/tmp --gb 2 --chunk-kib 64,256,1024 --reps 5 [--verify]
"""
import argparse
import fcntl
import mmap
import os
import resource
import socket
import statistics
import time
import zlib

F_SETPIPE_SZ = 1031
PIPE_MAX = 1 << 20


def sender(port, chunk, total):
    s = socket.create_connection(("127.0.0.1", port))
    buf = os.urandom(chunk)
    sent = 0
    while sent < total:
        s.sendall(buf)
        sent += chunk
    s.close()


def receive(mode, conn, fd, chunk, total, verify):
    got = 0
    if mode == "copy":
        buf = bytearray(chunk)
        mv = memoryview(buf)
        while got < total:
            n = 0
            while n < chunk:
                k = conn.recv_into(mv[n:], chunk - n)
                if k == 0:
                    break
                n += k
            if verify:
                zlib.crc32(mv[:n])
            os.pwrite(fd, mv[:n], got)
            got += n
            if n < chunk:
                break
        return got
    rp, wp = os.pipe()
    fcntl.fcntl(wp, F_SETPIPE_SZ, min(max(chunk, 4096), PIPE_MAX))
    m = mmap.mmap(fd, total, prot=mmap.PROT_READ) if verify else None
    cfd = conn.fileno()
    while got < total:
        want = min(chunk, total - got)
        n = 0
        while n < want:  # the chunk through the pipe, in pieces of at most its size
            k = os.splice(cfd, wp, min(want - n, PIPE_MAX), flags=os.SPLICE_F_MOVE)
            if k == 0:
                break
            left = k
            while left:
                w = os.splice(rp, fd, left, offset_dst=got + n + (k - left), flags=os.SPLICE_F_MOVE)
                left -= w
            n += k
        if verify:
            zlib.crc32(memoryview(m)[got:got + n])
        got += n
        if n < want:
            break
    os.close(rp)
    os.close(wp)
    if m is not None:
        m.close()
    return got


def one(mode, chunk, gb, directory, verify):
    total = int(gb * 1e9) // chunk * chunk
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        ls.close()
        sender(port, chunk, total)
        os._exit(0)
    conn, _ = ls.accept()
    path = os.path.join(directory, f"splice-probe.{os.getpid()}")
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_RDWR, 0o644)
    os.ftruncate(fd, total)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.time()
    got = receive(mode, conn, fd, chunk, total, verify)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.time()
    os.waitpid(pid, 0)
    conn.close()
    ls.close()
    os.close(fd)
    os.unlink(path)
    if got != total:
        raise SystemExit(f"{mode}: received {got} of {total} bytes")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu / (got / 1e9), got / 1e6 / (t1 - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--chunk-kib", default="64,256,1024")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args()
    chunks = [int(c) * 1024 for c in a.chunk_kib.split(",")]
    res = {}
    for _ in range(a.reps):
        for chunk in chunks:
            for mode in ("copy", "splice"):
                os.sync()
                res.setdefault((chunk, mode), []).append(one(mode, chunk, a.gb, a.dir, a.verify))
    print(f"receiver CPU per GB, median (min-max) of {a.reps} alternating runs of {a.gb} GB"
          f"{', each chunk verified' if a.verify else ''}")
    print("| chunk | copy (s/GB) | splice (s/GB) | splice/copy | copy MB/s | splice MB/s |")
    print("|---|---|---|---|---|---|")
    for chunk in chunks:
        c, s = res[(chunk, "copy")], res[(chunk, "splice")]
        cc, sc = [x[0] for x in c], [x[0] for x in s]
        ratios = [b / a for a, b in zip(cc, sc)]

        def f(v):
            return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
        print(f"| {chunk // 1024} KiB | {f(cc)} | {f(sc)} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {statistics.median([x[1] for x in c]):,.0f} "
              f"| {statistics.median([x[1] for x in s]):,.0f} |")


if __name__ == "__main__":
    main()
