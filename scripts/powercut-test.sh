#!/usr/bin/env bash
# Power-cut test on real filesystems: ext4, xfs and btrfs, each on a loop
# device written with direct I/O, its image file on an XFS scratch volume
# (itself a loop image, so `cp --reflink=always` works). While
# `corelog-powercut write` appends to several partitions through the engine,
# the image is cloned at random moments: a reflink copy is atomic and holds
# what the device had received, so the unsynced page cache is lost as in a
# power cut. Once the writer is done (and the original unmounted), each
# clone is mounted (its journal replays), recovered by the engine and
# checked against the acknowledgement journal (`corelog-powercut check`).
#
#   scripts/powercut-test.sh [--fs ext4|xfs|btrfs|all] [--clones N]
#       [--seconds S] [--policies batch,interval:MS,never] [--seed S]
#       [--partitions N] [--slack-ms MS] [--keep]
#
# Policies: `batch` must lose nothing acknowledged before a clone;
# `interval:MS` nothing acknowledged more than MS + --slack-ms before it
# (default 3000: the bound is MS plus the sync's own time, and btrfs on
# this setup stalled every write, and the shards with them, for 1.4 s,
# during which a run with 1 s of slack lost 190 batches acknowledged
# 1.36 s before the clone);
# `never` is the control and MUST lose acknowledged batches (or the suite
# could not see a loss): the run fails if the control loses nothing.
# Every image is also checked once after the writer's clean shutdown (all
# acknowledgements present, whatever the policy).
#
# `journal-batch` and `journal-never` put the replication journal
# (`corelog_replica::journal`) through the same clones instead of the
# engine: `corelog-journal-powercut` appends as a Raft follower does and
# now and then replaces a suffix with a new term's entries (the crash-safe
# truncate-suffix), syncing each step (`journal-never`: never, the control
# that must lose). A clone's recovered journal must be a prefix of a log
# the writer went through and hold every entry synced before the clone
# that no later step replaced.
#
# `cut-batch` and `cut-never` do the same to a replicated partition log
# (`LogConfig::commit_gate`, issue 28's one log): stamped batches appended
# as a follower will, and each replaced suffix cut with
# `PartitionLog::cut_suffix` (a `CUT` record made durable first, the cut
# finished by recovery), under the same check.
#
# Needs root, losetup, mkfs.{xfs,ext4,btrfs}. Outside CI a missing piece
# skips the run loudly; with CI=true it fails. Every mount and loop device
# made here is undone on exit, also on failure; on failure the scratch
# image is kept and named, holding each clone whose check failed twice:
# as the power cut left it (`.as-cut`) and after the checker's recovery.
# The checker prints, for a loss under a durable policy, what recovery did
# and what the files held before it: where each lost batch belonged and
# whether those bytes were past the file's end, zeros, or the batch.
#
# Why clones are checked after the writer: two filesystems with one UUID
# mounted at once need `-o nouuid` on xfs and, on btrfs, a kernel with
# temp-fsid support (6.7+); checking each clone alone, after the original
# is unmounted, works on any kernel. Loop devices use 4096-byte sectors:
# XFS requires direct I/O to a reflinked (shared) image file to be aligned
# to its 4 KiB blocks, and every image is a shared file once cloned.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
profile="${CORELOG_POWERCUT_PROFILE:-debug}"

fs_list=all clones=4 seconds=8 policies=batch,interval:200,never
seed="${CORELOG_POWERCUT_SEED:-$(date +%s)}" partitions=4 slack_ms=3000 keep=0
image_size=1G segment_bytes=131072
while [[ $# -gt 0 ]]; do
    case "$1" in
        --fs) fs_list="$2"; shift 2 ;;
        --clones) clones="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --policies|--policy) policies="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --partitions) partitions="$2"; shift 2 ;;
        --slack-ms) slack_ms="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "powercut: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[[ "$fs_list" == all ]] && fs_list="ext4 xfs btrfs"
fs_list="${fs_list//,/ }"
RANDOM=$((seed % 32768))
log() { echo "powercut: $*"; }

# A piece of the setup is missing: fail under CI, skip loudly elsewhere.
cannot() {
    if [[ "${CI:-}" == true ]]; then
        echo "powercut: FAIL: $* (CI=true: the suite may not skip)" >&2
        exit 1
    fi
    echo "" >&2
    echo "*** powercut: SKIPPED: $* ***" >&2
    echo "" >&2
    exit 0
}

[[ $(id -u) == 0 ]] || cannot "not root (loop devices and mounts need it)"
for t in losetup mkfs.xfs mkfs.ext4 mkfs.btrfs; do
    command -v "$t" >/dev/null || cannot "$t is missing (apt-get install xfsprogs btrfs-progs e2fsprogs)"
done

build=(cargo build --quiet -p corelog-bench --bin corelog-powercut --bin corelog-journal-powercut)
[[ "$profile" == release ]] && build+=(--release)
(cd "$root" && "${build[@]}")
bin="$target/$profile/corelog-powercut"
jbin="$target/$profile/corelog-journal-powercut"

work="$(mktemp -d "${TMPDIR:-/var/tmp}/corelog-powercut.XXXXXX")"
mounts=()  # mount points, unmounted in reverse order
loops=()   # loop devices, detached in reverse order
failed=0

umount_last() {
    local m="${mounts[-1]}"
    umount "$m" 2>/dev/null || umount -l "$m" || echo "powercut: cannot unmount $m" >&2
    unset 'mounts[-1]'
}

detach_last() {
    local l="${loops[-1]}"
    # btrfs remembers the device by fsid; forget it so that the next clone
    # (same fsid) is not taken for a second device of this filesystem.
    command -v btrfs >/dev/null && btrfs device scan --forget "$l" 2>/dev/null || true
    losetup -d "$l" || echo "powercut: cannot detach $l" >&2
    unset 'loops[-1]'
}

cleanup() {
    local rc=$?
    [[ -n "${writer_pid:-}" ]] && kill "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null
    while [[ ${#mounts[@]} -gt 0 ]]; do umount_last; done
    while [[ ${#loops[@]} -gt 0 ]]; do detach_last; done
    if [[ $rc -ne 0 || $failed -ne 0 || $keep -eq 1 ]]; then
        echo "powercut: kept $work (scratch.img holds the images and clones; journals beside it)" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# attach FILE: a loop device with direct I/O and 4 KiB sectors; sets $dev.
attach() {
    dev="$(losetup --find --show --direct-io=on --sector-size 4096 "$1")" ||
        cannot "losetup --direct-io=on --sector-size 4096 $1 failed"
    loops+=("$dev")
    [[ "$(cat "/sys/block/${dev#/dev/}/loop/dio")" == 1 ]] ||
        cannot "$dev does not do direct I/O"
}

# mount_at DEV DIR [OPTIONS]
mount_at() {
    mkdir -p "$2"
    mount ${3:+-o "$3"} "$1" "$2" || cannot "mount $1 on $2 failed (dmesg: $(dmesg | tail -1))"
    mounts+=("$2")
}

# The scratch volume: XFS with reflink, on a loop device over a sparse file.
truncate -s 16G "$work/scratch.img"
mkfs.xfs -q -m reflink=1 "$work/scratch.img" || cannot "mkfs.xfs -m reflink=1 failed"
dev="$(losetup --find --show "$work/scratch.img")" || cannot "losetup of the scratch image failed"
loops+=("$dev")
mount_at "$dev" "$work/scratch"
scratch="$work/scratch"

mkfs_image() { # FS FILE
    truncate -s "$image_size" "$2"
    case "$1" in
        ext4) mkfs.ext4 -q -F -b 4096 "$2" ;;
        xfs) mkfs.xfs -q -f -s size=4096 "$2" ;;
        btrfs) mkfs.btrfs -q -f "$2" >/dev/null ;;
        *) echo "powercut: unknown filesystem $1" >&2; exit 2 ;;
    esac
}

# The corelog-journal-powercut target of a journal-* or cut-* policy.
jtarget() { [[ "$1" == cut-* ]] && echo log || echo journal; }

mount_options() { [[ "$1" == xfs ]] && echo nouuid || true; }

# Totals per filesystem and policy, for the summary.
declare -A t_checks t_acked t_required t_lost t_gone

# run_one FS POLICY: one writer, $clones clones, then the checks.
run_one() {
    local fs="$1" policy="$2" tag="$1-${2//:/}"
    local img="$scratch/$tag.img" journal="$work/$tag.journal" marks="$work/$tag.clones"
    : >"$journal"; : >"$marks"
    mkfs_image "$fs" "$img" || cannot "mkfs.$fs failed"
    attach "$img"
    mount_at "$dev" "$work/$tag.mnt"
    if [[ "$policy" == journal-* || "$policy" == cut-* ]]; then
        local nosync=()
        [[ "$policy" == *-never ]] && nosync=(--no-sync)
        timeout --kill-after=10 $((seconds + 300)) \
            "$jbin" write --target "$(jtarget "$policy")" --dir "$work/$tag.mnt/data" \
            --history "$journal" --seconds "$seconds" \
            --seed "$seed" "${nosync[@]}" >"$work/$tag.writer.log" 2>&1 &
    else
        local common=(--journal "$journal" --fsync "$policy" --partitions "$partitions"
            --segment-bytes "$segment_bytes")
        timeout --kill-after=10 $((seconds + 300)) \
            "$bin" write --dir "$work/$tag.mnt/data" "${common[@]}" --seconds "$seconds" \
            >"$work/$tag.writer.log" 2>&1 &
    fi
    writer_pid=$!
    # One clone at a random moment in each of $clones equal slots.
    local slot_ms=$((seconds * 1000 / clones)) i
    for ((i = 0; i < clones; i++)); do
        local before=$((RANDOM % slot_ms))
        sleep "$(printf '%d.%03d' $((before / 1000)) $((before % 1000)))"
        local upto ns
        upto=$(stat -c %s "$journal")
        ns=$(date +%s%N)
        cp --reflink=always "$img" "$scratch/$tag.clone$i"
        echo "$i $upto $ns" >>"$marks"
        local after=$((slot_ms - before))
        sleep "$(printf '%d.%03d' $((after / 1000)) $((after % 1000)))"
    done
    local wrc=0
    wait "$writer_pid" || wrc=$?
    writer_pid=
    if [[ $wrc -ne 0 ]]; then
        cat "$work/$tag.writer.log" >&2
        echo "powercut: FAIL: the writer on $fs ($policy) failed" >&2
        failed=$((failed + 1))
        return
    fi
    log "$fs $policy: $(tail -1 "$work/$tag.writer.log")"
    # The original, after a clean shutdown: everything acknowledged.
    check_image "$fs" "$policy" "$tag" "$work/$tag.mnt" clean "$(stat -c %s "$journal")" "$(date +%s%N)"
    umount_last; detach_last
    # The clones, one at a time.
    local upto ns
    while read -r i upto ns; do
        # A copy as the power cut left it, kept if the check fails (the
        # checker's recovery changes the clone it opens).
        cp --reflink=always "$scratch/$tag.clone$i" "$scratch/$tag.clone$i.as-cut"
        attach "$scratch/$tag.clone$i"
        mount_at "$dev" "$work/$tag.clone$i.mnt" "$(mount_options "$fs")"
        local failed_before=$failed
        check_image "$fs" "$policy" "$tag" "$work/$tag.clone$i.mnt" "clone$i" "$upto" "$ns"
        umount_last; detach_last
        if [[ $failed -eq $failed_before ]]; then
            rm -f "$scratch/$tag.clone$i" "$scratch/$tag.clone$i.as-cut"
        else
            log "kept the failing clone: $scratch/$tag.clone$i.as-cut as cut, $scratch/$tag.clone$i after the checker's recovery"
        fi
    done <"$marks"
    rm -f "$img"
}

# check_image FS POLICY TAG MOUNT LABEL UPTO NS: runs the checker, keeps score.
check_image() {
    local fs="$1" policy="$2" tag="$3" mnt="$4" label="$5" upto="$6" ns="$7"
    local extra=() out rc=0
    [[ "$label" == clean ]] && extra=(--clean)
    if [[ "$policy" == journal-* || "$policy" == cut-* ]]; then
        out=$(timeout --kill-after=10 600 "$jbin" check --target "$(jtarget "$policy")" \
            --dir "$mnt/data" --history "$work/$tag.journal" \
            --clone-ns "$ns" --label "$fs/$label" 2>&1) || rc=$?
    else
        out=$(timeout --kill-after=10 600 "$bin" check --dir "$mnt/data" --journal "$work/$tag.journal" --fsync "$policy" \
            --partitions "$partitions" --segment-bytes "$segment_bytes" --upto "$upto" \
            --clone-ns "$ns" --slack-ms "$slack_ms" --label "$fs/$label" "${extra[@]}" 2>&1) || rc=$?
    fi
    echo "$out" | sed 's/^/    /'
    local line key="$fs $policy"
    line=$(echo "$out" | grep '^corelog-powercut check' | tail -1)
    num() { local v; v=$(echo "$line" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"); echo "${v:-0}"; }
    if [[ "$label" != clean ]]; then
        t_checks[$key]=$(( ${t_checks[$key]:-0} + 1 ))
        t_acked[$key]=$(( ${t_acked[$key]:-0} + $(num acked-before-clone) ))
        t_required[$key]=$(( ${t_required[$key]:-0} + $(num required) ))
        t_lost[$key]=$(( ${t_lost[$key]:-0} + $(num LOST) ))
    fi
    if [[ $rc -eq 0 ]]; then return; fi
    if [[ $rc -eq 1 && "$policy" == *never && "$label" != clean ]]; then
        return # the control is meant to lose acknowledged batches
    fi
    echo "powercut: FAIL: $fs $policy $label (checker exit $rc)" >&2
    failed=$((failed + 1))
}

log "seed $seed; filesystems: $fs_list; policies: $policies; $clones clones of $seconds s each; work dir $work"
started=$SECONDS
for fs in $fs_list; do
    for policy in ${policies//,/ }; do
        log "== $fs, fsync=$policy"
        run_one "$fs" "$policy"
    done
done

declare -A control_lost=() control_runs=()
for fs in $fs_list; do
    for policy in ${policies//,/ }; do
        key="$fs $policy"
        if [[ "$policy" == *never ]]; then
            log "summary: $fs fsync=$policy (control): ${t_checks[$key]:-0} clones checked, ${t_acked[$key]:-0} acknowledged before a clone, ${t_lost[$key]:-0} of them lost"
            control_runs[$policy]=$(( ${control_runs[$policy]:-0} + 1 ))
            control_lost[$policy]=$(( ${control_lost[$policy]:-0} + ${t_lost[$key]:-0} ))
        else
            log "summary: $fs fsync=$policy: ${t_checks[$key]:-0} clones checked, ${t_acked[$key]:-0} acknowledged before a clone, ${t_required[$key]:-0} required to survive, ${t_lost[$key]:-0} LOST"
        fi
    done
done
for policy in "${!control_runs[@]}"; do
    log "summary: control ($policy): ${control_lost[$policy]} acknowledged lost across ${control_runs[$policy]} runs"
    if [[ ${control_lost[$policy]} -eq 0 ]]; then
        echo "powercut: FAIL: the $policy control lost nothing: these clones cannot show a loss" >&2
        failed=$((failed + 1))
    fi
done
log "summary: $((SECONDS - started)) s, seed $seed"
if [[ $failed -ne 0 ]]; then
    echo "powercut: FAIL" >&2
    exit 1
fi
log "PASS: nothing acknowledged under a durable policy was lost"
