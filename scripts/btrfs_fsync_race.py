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
fsync (fsync instead of fdatasync), no-prealloc.
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
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
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
