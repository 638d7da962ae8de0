#!/usr/bin/env bash
# Runs one cargo-fuzz target of fuzz/ for a bounded time.
#
#   scripts/fuzz.sh [TARGET] [SECONDS]     (defaults: admission 60)
#   SANITIZER=none scripts/fuzz.sh recovery 600   (about 2.7x the executions of
#                                                  the default AddressSanitizer build)
#
# Installs cargo-fuzz if missing, seeds fuzz/corpus/TARGET from the committed
# seeds (fuzz/seeds/TARGET) and the shared test vectors, runs the target and
# prints libFuzzer's closing executions line. cargo-fuzz's sanitizer flags
# need nightly; on a stable toolchain RUSTC_BOOTSTRAP=1 unlocks them.
# A crash leaves its input under fuzz/artifacts/TARGET/ and fails the script.
set -euo pipefail

target="${1:-admission}"
seconds="${2:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi

corpus="$fuzz_dir/corpus/$target"
mkdir -p "$corpus" "$fuzz_dir/artifacts/$target"
if [[ -d "$fuzz_dir/seeds/$target" ]]; then
    cp -n "$fuzz_dir/seeds/$target"/* "$corpus"/ 2>/dev/null || true
fi
cp -n "$root"/segment/tests/vectors/*.bin "$corpus"/ 2>/dev/null || true

log="$(mktemp -t "fuzz-$target.XXXXXX.log")"
echo "fuzzing $target for ${seconds}s; corpus $corpus; log $log" >&2
status=0
(
    cd "$fuzz_dir"
    cargo fuzz run --sanitizer "${SANITIZER:-address}" "$target" "$corpus" -- \
        -max_total_time="$seconds" -print_final_stats=1
) >"$log" 2>&1 || status=$?

# libFuzzer's final stats: "stat::number_of_executed_units: N".
grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done [0-9]+ runs)' "$log" || true
if [[ $status -ne 0 ]]; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed (exit $status); crashing inputs:" >&2
    ls -l "$fuzz_dir/artifacts/$target" >&2 || true
    exit "$status"
fi
