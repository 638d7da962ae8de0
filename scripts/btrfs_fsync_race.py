"""The btrfs fsync race that lost an acknowledged batch, in plain syscalls.

For each try: a file `a.log` preallocated to 128 KiB is filled to near its
end with synced writes; then one more write lands, a new file `b.log` is
created in the same directory (a segment rotation), and two threads each
sync the directory and `a.log`:

  the "round": fsync(dir), fdatasync(a.log)     -- then the image is cloned
  the "seal":  fdatasync(a.log), fsync(dir)     -- side by side

The clone is taken right after the round's fdatasync returned, so it must
hold the last write. `scripts/btrfs-fsync-race.sh` mounts each clone and
counts the tries whose last write is missing.

usage: btrfs_fsync_race.py MOUNT IMAGE CLONE_DIR TRIES MODE
MODE (words, any order): seal-file-only, seal-dir-only, no-seal, no-dir,
fsync (fsync instead of fdatasync), no-prealloc. Or, for the other thread,
what other tasks of the engine do beside a round instead of the seal:
  offset:    a consumer offset stored (a new file in a subdirectory written
             and fdatasync'd, renamed over the old one, the subdirectory
             synced), as `PartitionLog::store_offset` does;
  retention: the oldest segment's files removed and the directory synced,
             as retention does;
  cut:       a record written beside the log, fdatasync'd, renamed into
             the same directory, the directory synced, as a suffix cut's
             record (`log/cut.rs`);
  other-log: another partition's round at its own segment's end, in a
             sibling directory: its last write, its new segment's name, its
             directory synced, then its file fdatasync'd.
"""
import os
import random
import subprocess
import sys
import threading

mnt, img, clonedir, tries, mode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
SEG = 131072
sync = os.fsync if "fsync" in mode.split(",") else os.fdatasync
expect = []
for t in range(tries):
    d = f"{mnt}/d{t}"
    os.mkdir(d)
    os.mkdir(f"{d}/consumers")
    for name in ("old.log", "old.index", "consumers/1.offset"):
        with open(f"{d}/{name}", "wb") as old:
            old.write(b"\x01" * 4096)
            os.fsync(old.fileno())
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    if "other-log" in mode.split(","):
        e = f"{mnt}/e{t}"
        os.mkdir(e)
        efd = os.open(e, os.O_RDONLY | os.O_DIRECTORY)
        ef = os.open(f"{e}/a.log", os.O_CREAT | os.O_RDWR, 0o644)
        os.fsync(efd)
        os.posix_fallocate(ef, 0, SEG)
        epos = SEG - random.randint(300, 1500)
        os.pwrite(ef, b"\x05" * epos, 0)
        sync(ef)
    f = os.open(f"{d}/a.log", os.O_CREAT | os.O_RDWR, 0o644)
    os.fsync(dfd)
    if "no-prealloc" not in mode:
        os.posix_fallocate(f, 0, SEG)
    pos, target = 0, SEG - random.randint(300, 1500)
    while pos < target:
        n = min(random.randint(200, 1500), target - pos)
        os.pwrite(f, bytes([(t + pos) % 251 + 1]) * n, pos)
        pos += n
        if random.random() < 0.3:
            sync(f)
    sync(f)
    n = SEG - pos + random.randint(1, 1500)
    os.pwrite(f, b"\xab" * n, pos)  # the last write
    g = os.open(f"{d}/b.log", os.O_CREAT | os.O_RDWR, 0o644)  # a new name
    if "no-prealloc" not in mode:
        os.posix_fallocate(g, 0, SEG)

    def seal():
        if "no-seal" in mode:
            return
        if "offset" in mode.split(","):
            c = f"{d}/consumers"
            o = os.open(f"{c}/1.offset.tmp", os.O_CREAT | os.O_WRONLY, 0o644)
            os.pwrite(o, b"\x02" * 16, 0)
            os.fdatasync(o)
            os.close(o)
            os.rename(f"{c}/1.offset.tmp", f"{c}/1.offset")
            cfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(cfd)
            os.close(cfd)
            return
        if "other-log" in mode.split(","):
            os.pwrite(ef, b"\xcd" * (SEG - epos + 700), epos)
            eg = os.open(f"{e}/b.log", os.O_CREAT | os.O_RDWR, 0o644)
            os.posix_fallocate(eg, 0, SEG)
            os.close(eg)
            os.fsync(efd)
            sync(ef)
            os.close(ef)
            os.close(efd)
            return
        if "cut" in mode.split(","):
            r = os.open(f"{d}/CUT.tmp", os.O_CREAT | os.O_WRONLY, 0o644)
            os.pwrite(r, b"\x03" * 32, 0)
            os.fdatasync(r)
            os.close(r)
            os.rename(f"{d}/CUT.tmp", f"{d}/CUT")
            os.fsync(dfd)
            return
        if "retention" in mode.split(","):
            os.unlink(f"{d}/old.log")
            os.unlink(f"{d}/old.index")
            os.fsync(dfd)
            return
        if "seal-dir-only" not in mode:
            sync(f)
        if "seal-file-only" not in mode:
            os.fsync(dfd)

    s = threading.Thread(target=seal)
    s.start()
    if "no-dir" not in mode:
        os.fsync(dfd)
    sync(f)
    subprocess.run(["cp", "--reflink=always", img, f"{clonedir}/c{t}"], check=True)
    s.join()
    for fd in (f, g, dfd):
        os.close(fd)
    expect.append((t, pos + n))
with open(f"{clonedir}/expect", "w") as out:
    for t, end in expect:
        out.write(f"{t} {end}\n")
