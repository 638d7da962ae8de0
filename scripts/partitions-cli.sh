#!/usr/bin/env bash
# A new user's broker shape through the CLI: N partitions with the default
# 1 GiB segments, each given one small batch by its own `corelog append`
# call; then the directory's size, and the time to poll one partition and to
# append to one more (an engine opened over all N).
#
#   scripts/partitions-cli.sh [N]        (default 1500; a release build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:-1500}"
(cd "$root" && cargo build --quiet --release -p corelog --bin corelog)
corelog="${CARGO_TARGET_DIR:-$root/target}/release/corelog"
batch="$root/segment/tests/vectors/one-message.producer.bin"
dir="$(mktemp -d /var/tmp/corelog-partitions.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
ms() { date +%s%3N; }
start=$(ms)
for ((p = 0; p < n; p++)); do
    "$corelog" append --dir "$dir" --partition "$p" <"$batch" >/dev/null 2>"$dir.err" || {
        echo "partitions-cli: append to partition $p failed: $(cat "$dir.err")" >&2
        rm -f "$dir.err"; exit 1
    }
done
rm -f "$dir.err"
took=$(($(ms) - start))
used=$(du -sb "$dir" | cut -f1)
files=$(find "$dir/partitions" -type f | wc -l)
start=$(ms)
"$corelog" poll --dir "$dir" --partition $((n / 2)) --first >/dev/null
poll_ms=$(($(ms) - start))
start=$(ms)
"$corelog" append --dir "$dir" --partition $((n / 2)) <"$batch" >/dev/null
append_ms=$(($(ms) - start))
echo "partitions-cli: $n partitions, one corelog append each: all succeeded in $((took / 1000)).$(printf %03d $((took % 1000))) s ($((took / n)) ms per call)"
echo "partitions-cli: DIR holds $used bytes in $files files ($((used / n)) bytes per partition)"
echo "partitions-cli: corelog poll of one partition: $poll_ms ms; corelog append to one partition (engine opened over $n): $append_ms ms"
