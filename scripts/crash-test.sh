#!/usr/bin/env bash
# Process-crash test: SIGKILLs `corelog append --fsync batch` at random
# moments, CYCLES times on one data directory, and checks after each
# reopen that every acknowledged batch is there byte for byte, that the log
# is a prefix of what was sent, and that appends go on.
#
#   scripts/crash-test.sh [CYCLES] [corelog-crash options...]
#
# CYCLES defaults to $CORELOG_CRASH_CYCLES, else 20. The seed is printed;
# replay a run's choices with --seed S (or CORELOG_CRASH_SEED=S).
# CORELOG_CRASH_PROFILE=release builds optimized binaries (for long runs);
# the default debug profile reuses what `cargo test` built.
# Fails (and keeps the data directory, naming it) if anything acknowledged
# is lost.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cycles="${1:-${CORELOG_CRASH_CYCLES:-20}}"
[[ $# -gt 0 ]] && shift
profile="${CORELOG_CRASH_PROFILE:-debug}"
target="${CARGO_TARGET_DIR:-$root/target}"

build=(cargo build --quiet -p corelog --bin corelog -p corelog-bench --bin corelog-crash)
case "$profile" in
    debug) ;;
    release) build+=(--release) ;;
    *) echo "CORELOG_CRASH_PROFILE must be debug or release, not $profile" >&2; exit 2 ;;
esac
(cd "$root" && "${build[@]}")

seed=()
if [[ -n "${CORELOG_CRASH_SEED:-}" ]]; then
    seed=(--seed "$CORELOG_CRASH_SEED")
fi
exec "$target/$profile/corelog-crash" --cycles "$cycles" \
    --corelog "$target/$profile/corelog" "${seed[@]}" "$@"
