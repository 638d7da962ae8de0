#!/usr/bin/env bash
# The cluster fault suite: three corelog-server processes on 127.0.0.1-3,
# Iggy's SDK producing with a journal of every acknowledged message, and
# kill -9 of the leader and of a follower, SIGSTOP/SIGCONT of the leader, a
# follower's DIR wiped and rejoined, and the leader cut off by iptables, all
# while it sends. Prints a table (faults, acknowledged, lost, divergent) and
# fails unless lost and divergent are 0. Also: a leader paused past an
# election and resumed cut off from its peers must not name itself leader.
#
#   scripts/cluster-test.sh            # one round of the five faults (CI)
#   scripts/cluster-test.sh --rounds 4 # longer
#   scripts/cluster-test.sh --repeat 10  # the whole suite ten times
#
# Needs root and iptables (installed with apt when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=1
repeat=1
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        *) echo "usage: $0 [--rounds N] [--repeat N]" >&2; exit 2 ;;
    esac
done
if [[ $(id -u) -ne 0 ]]; then
    echo "cluster-test: needs root (iptables)" >&2
    exit 1
fi
if ! command -v iptables >/dev/null; then
    apt-get update -qq && apt-get install -y -qq iptables >/dev/null
fi
iptables -L INPUT -n >/dev/null  # fails here if the kernel has no iptables
export CARGO_TERM_COLOR=never
# --workspace, as the README's test command builds: the same features, so
# the binary the tests made is reused rather than every server test relinked.
cargo test --workspace --test cluster_faults --no-run --quiet
pass=0
for i in $(seq 1 "$repeat"); do
    echo "== cluster fault suite, run $i of $repeat ($rounds round(s) of 5 faults)"
    CLUSTER_ROUNDS=$rounds cargo test --workspace --test cluster_faults --quiet \
        -- --ignored --nocapture --test-threads 1 2>&1 | grep -E '^\||^node |panicked|Row|test result' 
    st=${PIPESTATUS[0]}
    if [[ $st -ne 0 ]]; then
        echo "cluster-test: run $i FAILED" >&2
        exit 1
    fi
    pass=$((pass + 1))
done
echo "cluster-test: $pass of $repeat runs passed"
