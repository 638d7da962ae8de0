#!/usr/bin/env bash
# The btrfs fsync race behind a power-cut loss (see btrfs_fsync_race.py):
# two threads that each sync a directory holding a new name and the same
# file, at once. Counts the tries whose last write, acknowledged by an
# fdatasync that returned before the clone, is missing from the clone.
#
#   scripts/btrfs-fsync-race.sh [TRIES] [MODE]     (defaults: 80 both)
#
# MODE `both` is the race; `seal-file-only`, `seal-dir-only`, `no-seal`
# and `no-dir` take one sync away; `fsync` and `no-prealloc` vary it;
# `offset`, `retention`, `cut` and `other-log` put a consumer offset store, a retention
# removal, a suffix cut's record or another log's rotating round beside the
# round instead of the seal.
# Needs root, losetup, mkfs.xfs (the clones are reflinks on an XFS
# scratch image) and mkfs.btrfs. Not part of CI: it measures the kernel.
set -euo pipefail
tries="${1:-80}" mode="${2:-both}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
w="$(mktemp -d "${TMPDIR:-/var/tmp}/btrfs-race.XXXXXX")"
loops=() mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}"; done
    for ((i = ${#loops[@]} - 1; i >= 0; i--)); do
        btrfs device scan --forget "${loops[$i]}" 2>/dev/null || true
        losetup -d "${loops[$i]}" 2>/dev/null || true
    done
    rm -rf "$w"
}
trap cleanup EXIT
truncate -s 8G "$w/scratch.img"
mkfs.xfs -q -m reflink=1 "$w/scratch.img"
sl=$(losetup --find --show "$w/scratch.img"); loops+=("$sl")
mkdir -p "$w/s" "$w/m" "$w/c"; mount "$sl" "$w/s"; mounts+=("$w/s")
truncate -s 1G "$w/s/b.img"; mkfs.btrfs -q -f "$w/s/b.img" >/dev/null
bl=$(losetup --find --show --direct-io=on --sector-size 4096 "$w/s/b.img"); loops+=("$bl")
mkdir -p "$w/s/clones"; mount "$bl" "$w/m"; mounts+=("$w/m")
python3 "$here/btrfs_fsync_race.py" "$w/m" "$w/s/b.img" "$w/s/clones" "$tries" "$mode"
umount "$w/m"; unset 'mounts[-1]'
btrfs device scan --forget "$bl" 2>/dev/null || true; losetup -d "$bl"; unset 'loops[-1]'
lost=0
while read -r t end; do
    cl=$(losetup --find --show --direct-io=on --sector-size 4096 "$w/s/clones/c$t")
    mount "$cl" "$w/c"
    size=$(stat -c %s "$w/c/d$t/a.log")
    last=$(dd if="$w/c/d$t/a.log" bs=1 skip=$((end - 1)) count=1 2>/dev/null | od -An -tx1 | tr -d ' ')
    if [[ $size -lt $end || "$last" != ab ]]; then
        echo "try $t: the last write (to byte $end) is missing: the file holds $size bytes, byte $((end - 1)) is ${last:-past the end}"
        lost=$((lost + 1))
    fi
    umount "$w/c"; btrfs device scan --forget "$cl" 2>/dev/null || true; losetup -d "$cl"
    rm -f "$w/s/clones/c$t"
done <"$w/s/clones/expect"
echo "btrfs-fsync-race: mode=$mode tries=$tries lost=$lost (kernel $(uname -r))"
